// paci simulate | compare | sweep — the discrete-event simulator's commands.
#include <fmt/format.h>
#include <unistd.h>
#include <cmath>
#include <iostream>

#include "cli/common.hpp"
#include "cli/compare_rows.hpp"
#include "cli/cost_flags.hpp"
#include "cli/load.hpp"
#include "schedules/generators.hpp"
#include "sim/engine.hpp"
#include "traces/chrome_trace.hpp"
#include "traces/report.hpp"

namespace paci::cli {

namespace {

std::string percent(double ratio) {
  return std::isfinite(ratio) ? fmt::format("{:.2f}%", 100.0 * ratio) : "n/a";
}

std::string mib(std::int64_t bytes) {
  return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
}

void print_simulation(const std::string& path, const Schedule& s, const std::string& costs,
                      const SimResult& result, const RunSummary& run) {
  const TimingMetrics& t = run.timing;
  std::cout << fmt::format(
      "{}: {} ({} weights), {} stages on {} devices, M={} x N={} = {} micro-batches\n"
      "cost model: {}\n",
      path == "-" ? "<stdin>" : path, s.kind, to_string(s.weight_policy), s.stages, s.num_devices(),
      s.microbatches, s.steps, s.total_microbatches(), costs);
  const double mb = static_cast<double>(s.total_microbatches());
  std::cout << fmt::format("makespan {:.6g} s, {:.6g} micro-batches/s", t.makespan_s,
                           t.makespan_s > 0 ? mb / t.makespan_s : 0.0);
  if (run.tokens_per_microbatch > 0)
    std::cout << fmt::format(", {:.6g} tokens/s",
                             mb * static_cast<double>(run.tokens_per_microbatch) / t.makespan_s);
  std::cout << fmt::format("\nbubble {} (whole run), {} (steady window", percent(t.bubble_ratio),
                           percent(t.steady_bubble_ratio));
  if (std::isfinite(t.steady_bubble_ratio))
    std::cout << fmt::format(" {:.6g}-{:.6g} s", t.steady_start_s, t.steady_end_s);
  std::cout << ")\n";
  const CriticalPath& cp = result.critical_path;
  std::cout << fmt::format(
      "critical path: {} actions, {:.6g} s compute, {:.6g} s waiting for messages, from {} to "
      "{}\n",
      cp.actions.size(), cp.compute_s, cp.communication_s,
      cp.actions.empty() ? "-" : to_string(cp.actions.front()),
      cp.actions.empty() ? "-" : to_string(cp.actions.back()));
  std::cout << fmt::format("{:>6} {:>7} {:>12} {:>8} {:>12} {:>12} {:>10} {:>10} {:>11}\n", "stage",
                           "device", "busy_s", "util", "peak_memory", "activations", "versions",
                           "max_stale", "mean_stale");
  for (const auto& st : run.observed.stages) {
    const double busy = t.stage_busy_s[static_cast<std::size_t>(st.stage)];
    std::cout << fmt::format(
        "{:>6} {:>7} {:>12.6g} {:>8} {:>12} {:>12} {:>10} {:>10} {:>11.3f}\n", st.stage, st.device,
        busy, percent(t.makespan_s > 0 ? busy / t.makespan_s : 0.0),
        mib(run.device_peak_memory_bytes[static_cast<std::size_t>(st.device)]), st.peak_activations,
        st.peak_weight_versions, st.max_staleness, st.mean_staleness);
  }
}

ordered_json critical_path_json(const CriticalPath& cp) {
  constexpr std::size_t kMaxListed = 1000;
  ordered_json j;
  j["length_s"] = cp.length_s;
  j["compute_s"] = cp.compute_s;
  j["communication_s"] = cp.communication_s;
  j["actions"] = cp.actions.size();
  j["path"] = ordered_json::array();
  for (std::size_t i = 0; i < cp.actions.size() && i < kMaxListed; ++i)
    j["path"].push_back(to_string(cp.actions[i]));
  j["path_truncated"] = cp.actions.size() > kMaxListed;
  return j;
}

}  // namespace

int run_simulate(const std::vector<std::string>& args) {
  std::string file, json_path, trace_path;
  bool quiet = false;
  CostFlags cost;
  po::options_description options("options");
  auto add = options.add_options();
  add("file", po::value(&file)->required(), "schedule file (json, csv, text; - for stdin)");
  add("json", po::value(&json_path), "write the report JSON (- for stdout)");
  add("trace", po::value(&trace_path), "write a Chrome trace (Perfetto, chrome://tracing)");
  add("quiet,q", po::bool_switch(&quiet), "no table on stdout");
  add_cost_options(options, cost);
  po::positional_options_description positional;
  positional.add("file", 1);
  po::variables_map vm;
  if (!parse_options("simulate", "FILE [--cost C | --tf .. --tb ..] [--json R] [--trace T]",
                     options, positional, args, vm))
    return 0;
  const Schedule s = load_valid_schedule(file);
  const CostModel costs = resolve_cost_model(cost, vm, s.stages);
  check_cost_model(costs, &s);
  SimOptions sim_options;
  sim_options.record_timeline = !trace_path.empty();
  const SimResult result = simulate(s, costs, sim_options);
  const RunSummary run = run_summary(s, costs, result);
  if (!json_path.empty()) {
    ordered_json head = run_report_head(s, run);
    head["cost_model"] = describe_costs(cost, costs);
    head["critical_path"] = critical_path_json(result.critical_path);
    head["events"] = result.events;
    write_output(json_path, report_with_versions(head, run.observed.versions));
  }
  if (!trace_path.empty()) write_chrome_trace(result.timeline, trace_path);
  if (!quiet && json_path != "-" && trace_path != "-")
    print_simulation(file, s, describe_costs(cost, costs), result, run);
  return 0;
}

namespace {

std::vector<CompareRow> compare_rows(const std::vector<std::string>& kinds, std::int32_t P,
                                     std::int32_t M, std::int32_t N, const CostModel& costs,
                                     std::vector<std::string>* skipped) {
  const CompareRow baseline = simulate_row("1f1b", P, M, N, costs);
  std::vector<CompareRow> rows;
  for (const auto& kind : kinds) {
    if (kind == "2bw" && M < P) {
      if (skipped) skipped->push_back(fmt::format("2bw needs M >= P (M={}, P={})", M, P));
      continue;
    }
    CompareRow row = kind == "1f1b" ? baseline : simulate_row(kind, P, M, N, costs);
    row.speedup_vs_1f1b = row.makespan_s > 0 ? baseline.makespan_s / row.makespan_s : 0.0;
    rows.push_back(row);
  }
  return rows;
}

}  // namespace

int run_compare(const std::vector<std::string>& args) {
  std::int32_t P = 0, M = 0, N = 1;
  std::string kinds_text, format = "table";
  CostFlags cost;
  po::options_description options("options");
  auto add = options.add_options();
  add("stages,p", po::value(&P)->required(), "pipeline stages P");
  add("microbatches,m", po::value(&M)->required(), "micro-batches per optimizer step M");
  add("steps,n", po::value(&N)->default_value(1), "optimizer steps N");
  add("kinds", po::value(&kinds_text)->default_value("all"),
      "comma-separated schedules (gpipe,1f1b,pipedream,2bw,paci)");
  add("format,f", po::value(&format)->default_value("table"), "table | csv | json");
  add_cost_options(options, cost);
  po::variables_map vm;
  if (!parse_options("compare", "--stages P --microbatches M --steps N [cost flags]", options, {},
                     args, vm))
    return 0;
  if (format != "table" && format != "csv" && format != "json")
    throw UsageError(fmt::format("--format must be table, csv or json, got '{}'", format));
  const auto kinds = parse_kinds(kinds_text);
  if (P <= 0 || M <= 0 || N <= 0)
    throw InputError(
        fmt::format("--stages, --microbatches and --steps must be positive (got "
                    "P={}, M={}, N={})",
                    P, M, N));
  const CostModel costs = resolve_cost_model(cost, vm, P);
  std::vector<std::string> skipped;
  const auto rows = compare_rows(kinds, P, M, N, costs, &skipped);
  if (format == "csv") {
    std::string out = csv_header();
    for (const auto& r : rows) out += csv_row(r);
    std::cout << out;
  } else if (format == "json") {
    ordered_json j;
    j["stages"] = P;
    j["microbatches"] = M;
    j["steps"] = N;
    j["cost_model"] = describe_costs(cost, costs);
    j["rows"] = ordered_json::array();
    for (const auto& r : rows) {
      ordered_json row;
      row["kind"] = r.kind;
      row["makespan_s"] = r.makespan_s;
      row["microbatches_per_s"] = r.microbatches_per_s;
      row["tokens_per_s"] = r.tokens_per_s;
      row["bubble_ratio"] = r.bubble_ratio;
      row["steady_bubble_ratio"] = number_or_null(r.steady_bubble_ratio);
      row["peak_memory_bytes"] = r.peak_memory_bytes;
      row["max_staleness"] = r.max_staleness;
      row["max_update_delay"] = r.max_update_delay;
      row["speedup_vs_1f1b"] = r.speedup_vs_1f1b;
      j["rows"].push_back(row);
    }
    std::cout << j.dump(2) << '\n';
  } else {
    std::cout << fmt::format(
        "P={} stages, M={} micro-batches per step, N={} steps ({} "
        "micro-batches); cost model: {}\n",
        P, M, N, static_cast<std::int64_t>(M) * N, describe_costs(cost, costs));
    std::cout << fmt::format("{:<10} {:>12} {:>14} {:>9} {:>13} {:>12} {:>10} {:>10} {:>9}\n",
                             "schedule", "makespan_s", "microbatch/s", "bubble", "steady_bubble",
                             "peak_memory", "max_stale", "max_delay", "vs_1f1b");
    for (const auto& r : rows)
      std::cout << fmt::format(
          "{:<10} {:>12.6g} {:>14.6g} {:>9} {:>13} {:>12} {:>10} {:>10} {:>8.3f}x\n", r.kind,
          r.makespan_s, r.microbatches_per_s, percent(r.bubble_ratio),
          percent(r.steady_bubble_ratio), mib(r.peak_memory_bytes), r.max_staleness,
          r.max_update_delay, r.speedup_vs_1f1b);
    for (const auto& note : skipped) std::cout << "skipped: " << note << '\n';
  }
  return 0;
}

int run_sweep(const std::vector<std::string>& args) {
  std::string stages_text, microbatches_text, kinds_text, output = "-";
  std::int32_t N = 8;
  bool quiet = false;
  CostFlags cost;
  po::options_description options("options");
  auto add = options.add_options();
  add("stages,p", po::value(&stages_text)->required(), "grid of P, e.g. 2,4,8 or 2:16");
  add("microbatches,m", po::value(&microbatches_text)->required(), "grid of M, e.g. 1:64:1");
  add("steps,n", po::value(&N)->default_value(8), "optimizer steps N");
  add("kinds", po::value(&kinds_text)->default_value("all"), "comma-separated schedules");
  add("output,o", po::value(&output)->default_value("-"), "CSV output (- for stdout)");
  add("quiet,q", po::bool_switch(&quiet), "no progress on a terminal");
  add_cost_options(options, cost);
  po::variables_map vm;
  if (!parse_options("sweep", "--stages GRID --microbatches GRID [--steps N] [-o FILE.csv]",
                     options, {}, args, vm))
    return 0;
  const auto kinds = parse_kinds(kinds_text);
  const auto Ps = parse_grid(stages_text, "stages");
  const auto Ms = parse_grid(microbatches_text, "microbatches");
  if (N <= 0) throw InputError(fmt::format("--steps must be positive, got {}", N));
  const bool progress = !quiet && isatty(STDERR_FILENO);
  std::string out = csv_header();
  std::size_t done = 0, skipped = 0;
  const std::size_t total = Ps.size() * Ms.size();
  for (std::int32_t P : Ps) {
    const CostModel costs = resolve_cost_model(cost, vm, P);
    for (std::int32_t M : Ms) {
      std::vector<std::string> notes;
      for (const auto& row : compare_rows(kinds, P, M, N, costs, &notes)) out += csv_row(row);
      skipped += notes.size();
      if (progress && (++done % 16 == 0 || done == total))
        std::cerr << fmt::format("\rsweep: {}/{} (P, M) points", done, total) << std::flush;
    }
  }
  if (progress) std::cerr << '\n';
  write_output(output, out);
  if (!quiet && output != "-")
    std::cerr << fmt::format(
        "sweep: wrote {} ({} points x {} kinds, {} skipped: 2bw needs M >= P)\n", output, total,
        kinds.size(), skipped);
  return 0;
}

}  // namespace paci::cli
