// plot_frontier(): matplotlib through python3 (posix_spawn, no shell).
#include "plan/report/plot.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <spawn.h>
#include <sys/wait.h>

#include <vector>

extern char** environ;

namespace paci::plan {

namespace {

// The plot: step time against peak memory, one point per frontier plan, staleness as colour.
constexpr const char* kPlotScript = R"PY(
import csv, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
rows = list(csv.DictReader(open(sys.argv[1])))
x = [float(r["peak_memory_bytes"]) / 2**30 for r in rows]
y = [float(r["step_s"]) for r in rows]
c = [int(r["max_staleness"]) for r in rows]
fig, ax = plt.subplots(figsize=(7, 4.5))
points = ax.scatter(x, y, c=c, cmap="viridis", s=36, edgecolors="black", linewidths=0.4)
for r, xi, yi in zip(rows, x, y):
    ax.annotate(f"{r['kind']} t{r['tp']} p{r['pp']} b{r['microbatch_size']}", (xi, yi),
                fontsize=6, xytext=(3, 3), textcoords="offset points")
ax.set_xlabel("peak memory per GPU (GiB)")
ax.set_ylabel("step time (s)")
ax.set_title("paci plan: the Pareto frontier")
fig.colorbar(points, ax=ax, label="max staleness (updates)")
fig.tight_layout()
fig.savefig(sys.argv[2])
)PY";

int run(const char* python, const std::string& csv, const std::string& svg) {
  std::vector<std::string> args = {python, "-c", kPlotScript, csv, svg};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  // Its output goes nowhere: a python without matplotlib is tried, then the next one.
  posix_spawn_file_actions_t quiet;
  posix_spawn_file_actions_init(&quiet);
  posix_spawn_file_actions_addopen(&quiet, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&quiet, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid = 0;
  const int spawned = posix_spawnp(&pid, python, &quiet, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&quiet);
  if (spawned != 0) return -1;
  int status = 0;
  if (waitpid(pid, &status, 0) < 0) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

std::string plot_frontier(const std::string& csv_path, const std::string& svg_path) {
  for (const char* python : {"python3", "/usr/bin/python3"})
    if (run(python, csv_path, svg_path) == 0) return "";
  return fmt::format(
      "{} not drawn: no python3 with matplotlib (apt-get install "
      "python3-matplotlib); the frontier is in {}",
      svg_path, csv_path);
}

}  // namespace paci::plan
