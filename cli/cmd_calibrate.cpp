// paci calibrate — measures per-stage F, B, U and the transport on this machine and writes a cost
// model (paci.costmodel/1) that paci simulate reads.
#include <fmt/format.h>
#include <unistd.h>
#include <iostream>

#include "cli/calibration.hpp"
#include "cli/common.hpp"
#include "cli/load.hpp"
#include "cli/train_setup.hpp"
#include "exec/calibrate.hpp"
#include "sim/cost_model.hpp"

namespace paci::cli {

namespace {

std::string describe(const exec::Calibration& c, const TrainSetup& t) {
  char host[256] = "this machine";
  gethostname(host, sizeof host - 1);
  std::string partition;
  for (const auto& r : t.exec.ranges)
    partition += (partition.empty() ? "" : ",") + std::to_string(r.num_layers);
  return fmt::format(
      "calibrated on {}: gpt L={} d={} heads={} T={} V={} B={}, partition {}, {} thread(s) per "
      "stage, medians of {} repeats",
      host, t.exec.config.layers, t.exec.config.d_model, t.exec.config.heads, t.exec.seq_len,
      t.exec.config.vocab, t.exec.batch, partition, t.exec.threads_per_device, c.repeats);
}

}  // namespace

int run_calibrate(const std::vector<std::string>& args) {
  TrainFlags f;
  std::string output = "-";
  std::size_t repeats = 9;
  po::options_description options("options");
  auto add = options.add_options();
  add("output,o", po::value(&output)->default_value("-"), "cost model JSON (- for stdout)");
  add("repeats", po::value(&repeats)->default_value(9), "timed repeats per action (median)");
  add_train_options(options, f);
  po::variables_map vm;
  if (!parse_options("calibrate",
                     "--stages P [model flags, --partition, --threads] [--repeats R] [-o C]",
                     options, {}, args, vm))
    return 0;
  if (repeats == 0) throw InputError("--repeats must be positive");
  const TrainSetup t = make_train_setup(f, vm);
  const exec::Calibration c = exec::calibrate(t.exec, repeats);
  const CostModel model = cost_model_from_calibration(c, describe(c, t));
  check_cost_model(model);
  write_output(output, write_cost_model(model));
  if (!f.quiet && output != "-")
    std::cerr << fmt::format(
        "paci calibrate: wrote {} ({} stages; link latency {:.3g} s, "
        "bandwidth {:.3g} B/s)\n",
        output, model.stages.size(), c.link.latency_s, c.link.bandwidth_bytes_per_s);
  return 0;
}

}  // namespace paci::cli
