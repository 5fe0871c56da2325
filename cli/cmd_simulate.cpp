// paci simulate | compare | sweep — the discrete-event simulator's commands.
#include <fmt/format.h>
#include <unistd.h>
#include <cmath>
#include <iostream>
#include <optional>

#include "cli/common.hpp"
#include "cli/cost_flags.hpp"
#include "cli/load.hpp"
#include "schedules/formats.hpp"
#include "schedules/generators.hpp"
#include "schedules/validate.hpp"
#include "sim/compare_rows.hpp"
#include "sim/engine.hpp"
#include "sim/replay.hpp"
#include "sim/report_json.hpp"
#include "traces/chrome_trace.hpp"
#include "traces/metrics.hpp"
#include "traces/report.hpp"
#include "traces/report_timeline.hpp"

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

// A measured report, parsed, with its name for messages.
nlohmann::json read_report(const std::string& path) {
  const std::string text = read_input(path);
  const std::string source = path == "-" ? "<stdin>" : path;
  if (text.find_first_not_of(" \t\r\n") == std::string::npos)
    throw InputError(fmt::format("{}: empty file, not a report", source));
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw_json_error(text, source, e);
  }
}

void print_replay(const std::string& path, double tolerance_s, const ReplayComparison& c) {
  std::cout << fmt::format(
      "replay of {}: makespan measured {:.6g} s, replayed {:.6g} s ({:+.3f}%); bubble measured "
      "{}, replayed {}\nevery action's start within {:.3g} s of the measured one (largest at {}); "
      "{} of {} actions differ by more than {:.3g} s\n",
      path, c.measured_makespan_s, c.replayed_makespan_s, 100.0 * c.makespan_error(),
      percent(c.measured_bubble), percent(c.replayed_bubble), c.max_start_error_s,
      to_string(c.worst_action), c.off, c.actions, tolerance_s);
  for (const ReplayMismatch& m : c.largest)
    std::cout << fmt::format("  {} on device {}: measured start {:.6f} s, replayed {:.6f} s — {}\n",
                             to_string(m.action), m.device, m.measured_start_s, m.replayed_start_s,
                             m.why);
}

}  // namespace

int run_simulate(const std::vector<std::string>& args) {
  std::string file, json_path, trace_path, replay_path;
  double replay_tolerance = 0.01;
  bool quiet = false;
  CostFlags cost;
  po::options_description options("options");
  auto add = options.add_options();
  add("file", po::value(&file)->required(), "schedule file (json, csv, text; - for stdin)");
  add("json", po::value(&json_path), "write the report JSON (- for stdout)");
  add("trace", po::value(&trace_path), "write a Chrome trace (Perfetto, chrome://tracing)");
  add("replay", po::value(&replay_path),
      "replay the measured run of FILE in this report (paci train --report) with its own "
      "durations and message times, and compare every action's start");
  add("replay-tolerance", po::value(&replay_tolerance)->default_value(0.01, "0.01"),
      "with --replay: an action is off when its start differs by more than this fraction of "
      "the measured makespan");
  add("quiet,q", po::bool_switch(&quiet), "no table on stdout");
  add_cost_options(options, cost);
  po::positional_options_description positional;
  positional.add("file", 1);
  po::variables_map vm;
  if (!parse_options("simulate",
                     "FILE [--cost C | --tf .. --tb ..] [--replay REPORT] [--json R] [--trace T]",
                     options, positional, args, vm))
    return 0;
  if (!(replay_tolerance >= 0) || !std::isfinite(replay_tolerance))
    throw UsageError(
        fmt::format("--replay-tolerance must be a fraction >= 0 (got {})", replay_tolerance));
  if (!replay_path.empty() && !cost.host_slowdown.empty())
    throw UsageError(
        "--replay uses the measured times, sharing included; --host-slowdown does not apply");
  const Schedule s = load_valid_schedule(file);
  CostModel costs = resolve_cost_model(cost, vm, s.stages, s.num_devices());
  // Two copies (DualPipe): a cost model of one copy's stages serves both.
  if (s.copies > 1 && costs.stages.size() == static_cast<std::size_t>(s.stages_per_copy()))
    costs = two_copy_cost_model(costs);
  try {
    check_cost_model(costs, &s);
  } catch (const InputError& e) {  // a cost model file against this schedule: name the file
    if (cost.cost_path.empty()) throw;
    throw InputError(fmt::format("{}: {} ({})", cost.cost_path == "-" ? "<stdin>" : cost.cost_path,
                                 e.what(), file));
  }
  SimOptions sim_options;
  sim_options.record_timeline = !trace_path.empty();
  std::optional<MeasuredTimeline> measured;
  ReplayInputs replay;
  if (!replay_path.empty()) {
    const std::string source = replay_path == "-" ? "<stdin>" : replay_path;
    measured = read_measured_timeline(read_report(replay_path), s, source);
    replay = replay_inputs(s, *measured, source);
    sim_options.replay = &replay;
  }
  const SimResult result = simulate(s, costs, sim_options);
  const RunSummary run = run_summary(s, costs, result);
  std::optional<ReplayComparison> comparison;
  double bare_makespan = 0.0;  // the replay without the device's work around its actions
  if (measured) {
    const double makespan = timing_metrics(s, measured->times).makespan_s;
    comparison = compare_replay(s, *measured, replay, result.times, replay_tolerance * makespan);
    ReplayInputs bare = replay;
    for (auto& list : bare.actions)
      for (ReplayAction& a : list) a.gap_s = a.post_s = 0.0;
    SimOptions bare_options;
    bare_options.record_timeline = false;
    bare_options.replay = &bare;
    bare_makespan = timing_metrics(s, simulate(s, costs, bare_options).times).makespan_s;
  }
  const std::string costs_text =
      measured
          ? fmt::format("replayed from {} (durations and message times as measured)", replay_path)
          : describe_costs(cost, costs);
  if (!json_path.empty()) {
    ordered_json head = run_report_head(s, run);
    head["cost_model"] = costs_text;
    head["critical_path"] = critical_path_json(result.critical_path);
    head["events"] = result.events;
    if (comparison) {
      head["replay"] =
          replay_json(replay_path, replay_tolerance * comparison->measured_makespan_s, *comparison);
      head["replay"]["makespan_without_device_overheads_s"] = bare_makespan;
    }
    write_output(json_path, report_with_versions(head, run.observed.versions));
  }
  if (!trace_path.empty()) write_chrome_trace(result.timeline, trace_path);
  if (!quiet && json_path != "-" && trace_path != "-") {
    print_simulation(file, s, costs_text, result, run);
    if (comparison) {
      print_replay(replay_path, replay_tolerance * comparison->measured_makespan_s, *comparison);
      std::cout << fmt::format(
          "without the measured work around actions (receiving, waking up, sending): makespan "
          "{:.6g} s ({:+.2f}%)\n",
          bare_makespan, 100.0 * (bare_makespan / comparison->measured_makespan_s - 1.0));
    }
  }
  return 0;
}

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
      "comma-separated schedules "
      "(gpipe,1f1b,pipedream,2bw,paci,zb-h1,zb-h2,interleaved,zb-v,dualpipev,dualpipe)");
  add("format,f", po::value(&format)->default_value("table"), "table | csv | json");
  std::string chunk_cost_path;
  add("interleaved-cost", po::value(&chunk_cost_path),
      "interleaved's cost model: its P·v stages, v = its stages / P (paci calibrate --kind "
      "interleaved --chunks v, or paci costmodel --stages P·v); default: the stages' costs split "
      "in two, uniform costs only");
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
  std::optional<CostModel> chunk_costs;
  if (!chunk_cost_path.empty()) {
    chunk_costs = read_cost_model(chunk_cost_path);
    const auto stages = static_cast<std::int32_t>(chunk_costs->stages.size());
    if (stages < 2 * P || stages % P != 0)
      throw InputError(fmt::format(
          "--interleaved-cost {}: {} stages, interleaved on P={} devices needs P·v of them, v >= 2",
          chunk_cost_path, stages, P));
  }
  std::vector<std::string> skipped;
  const auto rows =
      compare_rows(kinds, P, M, N, costs, &skipped, chunk_costs ? &*chunk_costs : nullptr);
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
      row["zb_bubble_ratio"] = r.zb_bubble_ratio;
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
    std::cout << fmt::format(
        "{:<11} {:>12} {:>14} {:>9} {:>13} {:>10} {:>12} {:>10} {:>10} {:>9}\n", "schedule",
        "makespan_s", "microbatch/s", "bubble", "steady_bubble", "zb_bubble", "peak_memory",
        "max_stale", "max_delay", "vs_1f1b");
    for (const auto& r : rows)
      std::cout << fmt::format(
          "{:<11} {:>12.6g} {:>14.6g} {:>9} {:>13} {:>10} {:>12} {:>10} {:>10} {:>8.3f}x\n", r.kind,
          r.makespan_s, r.microbatches_per_s, percent(r.bubble_ratio),
          percent(r.steady_bubble_ratio), percent(r.zb_bubble_ratio), mib(r.peak_memory_bytes),
          r.max_staleness, r.max_update_delay, r.speedup_vs_1f1b);
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
        "sweep: wrote {} ({} points x {} kinds, {} skipped: 2bw needs M >= P, interleaved M a "
        "multiple of P and uniform costs, zb-v uniform costs, dualpipev those and M >= 2P, "
        "dualpipe P and M even and M >= 2P)\n",
        output, total, kinds.size(), skipped);
  return 0;
}

}  // namespace paci::cli
