// paci schedule | validate | analyze — the schedule IR's commands.
#include <fmt/format.h>
#include <iostream>

#include "cli/common.hpp"
#include "cli/load.hpp"
#include "schedules/analysis.hpp"
#include "schedules/formats.hpp"
#include "schedules/generators.hpp"
#include "schedules/validate.hpp"
#include "traces/report.hpp"

namespace paci::cli {

int run_schedule(const std::vector<std::string>& args) {
  std::string kind, output = "-", format;
  std::int32_t stages = 0, microbatches = 0, steps = 1, chunks = 0;
  po::options_description options("options");
  auto add = options.add_options();
  add("kind,k", po::value(&kind)->required(),
      "gpipe | 1f1b | pipedream | 2bw | paci | zb-h1 | zb-h2 | interleaved | zb-v | dualpipev | "
      "dualpipe");
  add("stages,p", po::value(&stages)->required(),
      "devices P (one pipeline stage each; interleaved: P·v stages; zb-v, dualpipev: 2P; "
      "dualpipe: two copies of P stages, P even)");
  add("chunks,v", po::value(&chunks)->notifier(check_chunks_flag),
      "interleaved: model stages per device (default 2); stage k on device k mod P");
  add("microbatches,m", po::value(&microbatches)->required(),
      "micro-batches per optimizer step M (the accumulation factor)");
  add("steps,n", po::value(&steps)->default_value(1),
      "optimizer steps N; N·M micro-batches in all");
  add("output,o", po::value(&output)->default_value("-"), "output file, - for standard output");
  add("format,f", po::value(&format),
      "json | csv | text | pytorch (PyTorch pipelining's CSV: synchronous schedules only) "
      "(default: from the output's extension, else json)");
  po::variables_map vm;
  if (!parse_options("schedule", "--kind K --stages P --microbatches M [--steps N] [-o FILE]",
                     options, {}, args, vm))
    return 0;
  ScheduleFormat fmt_out = ScheduleFormat::json;
  if (!format.empty())
    fmt_out = parse_schedule_format(format);
  else if (output != "-")
    fmt_out = detect_schedule_format(output, "{");
  const Schedule schedule = generate_schedule(kind, stages, microbatches, steps, chunks);
  write_output(output, write_schedule(schedule, fmt_out));
  return 0;
}

int run_validate(const std::vector<std::string>& args) {
  std::vector<std::string> files;
  bool quiet = false;
  po::options_description options("options");
  auto add = options.add_options();
  add("file", po::value(&files)->required()->multitoken(),
      "schedule files (json, csv, text; - for stdin)");
  add("quiet,q", po::bool_switch(&quiet), "print nothing on success");
  po::positional_options_description positional;
  positional.add("file", -1);
  po::variables_map vm;
  if (!parse_options("validate", "FILE...", options, positional, args, vm)) return 0;
  for (const auto& file : files) {
    const Schedule s = load_valid_schedule(file);
    const ValidationSummary summary = validate(s);
    if (!quiet)
      std::cout << fmt::format(
          "{}: valid — {} ({} weights), {} stages on {} devices, M={} x N={} = {} micro-batches, "
          "{} actions, {} dependency edges, no deadlock\n",
          file == "-" ? "<stdin>" : file, s.kind, to_string(s.weight_policy), s.stages,
          s.num_devices(), s.microbatches, s.steps, s.total_microbatches(), summary.actions,
          summary.dependency_edges);
  }
  return 0;
}

namespace {

std::string label(const Schedule& s, const std::string& path) {
  return s.kind != "custom" ? s.kind : path;
}

// One schedule: a table with a row per stage.
void print_analysis(const Schedule& s, const Analysis& a, const std::string& path) {
  std::cout << fmt::format(
      "{}: {} ({} weights), {} stages on {} devices, M={} micro-batches per step, N={} steps\n",
      path == "-" ? "<stdin>" : path, s.kind, to_string(s.weight_policy), s.stages, s.num_devices(),
      s.microbatches, s.steps);
  std::cout << fmt::format("{:>6} {:>7} {:>12} {:>14} {:>10} {:>11} {:>10} {:>8}\n", "stage",
                           "device", "activations", "weight_vers", "max_stale", "mean_stale",
                           "max_delay", "updates");
  for (const auto& st : a.stages)
    std::cout << fmt::format("{:>6} {:>7} {:>12} {:>14} {:>10} {:>11.3f} {:>10} {:>8}\n", st.stage,
                             st.device, st.peak_activations, st.peak_weight_versions,
                             st.max_staleness, st.mean_staleness, st.max_update_delay, st.updates);
}

// Several schedules side by side: per stage, activations / weight versions / max staleness /
// max update delay of each.
void print_side_by_side(const std::vector<Schedule>& schedules,
                        const std::vector<Analysis>& analyses,
                        const std::vector<std::string>& paths) {
  constexpr int kWidth = 15;
  std::int32_t max_stages = 0;
  std::string header = fmt::format("{:>6}", "stage");
  for (std::size_t i = 0; i < schedules.size(); ++i) {
    max_stages = std::max(max_stages, schedules[i].stages);
    header += fmt::format("  {:>{}}", label(schedules[i], paths[i]), kWidth);
  }
  std::cout << "per stage: activations in flight / weight versions / max staleness / max update "
               "delay\n"
            << header << '\n';
  for (std::int32_t st = 0; st < max_stages; ++st) {
    std::string row = fmt::format("{:>6}", st);
    for (const auto& a : analyses) {
      if (st >= static_cast<std::int32_t>(a.stages.size())) {
        row += fmt::format("  {:>{}}", "-", kWidth);
        continue;
      }
      const auto& x = a.stages[static_cast<std::size_t>(st)];
      row += fmt::format("  {:>{}}",
                         fmt::format("{} / {} / {} / {}", x.peak_activations,
                                     x.peak_weight_versions, x.max_staleness, x.max_update_delay),
                         kWidth);
    }
    std::cout << row << '\n';
  }
  std::string policies = fmt::format("{:>6}", "policy");
  for (const auto& s : schedules)
    policies += fmt::format("  {:>{}}", to_string(s.weight_policy), kWidth);
  std::cout << policies << '\n';
}

}  // namespace

int run_analyze(const std::vector<std::string>& args) {
  std::vector<std::string> files;
  std::string json_path;
  po::options_description options("options");
  auto add = options.add_options();
  add("file", po::value(&files)->required()->multitoken(),
      "schedule files (json, csv, text; - for stdin); several print side by side");
  add("json", po::value(&json_path),
      "write the analysis as report JSON (one file only; - for stdout)");
  po::positional_options_description positional;
  positional.add("file", -1);
  po::variables_map vm;
  if (!parse_options("analyze", "FILE... [--json R]", options, positional, args, vm)) return 0;
  if (!json_path.empty() && files.size() != 1)
    throw UsageError("--json takes exactly one schedule file");
  std::vector<Schedule> schedules;
  std::vector<Analysis> analyses;
  for (const auto& file : files) {
    schedules.push_back(load_valid_schedule(file));
    analyses.push_back(analyze(schedules.back()));
  }
  if (!json_path.empty()) {
    ordered_json head;
    head["source"] = "static";
    head["schedule"] = schedule_summary_json(schedules[0]);
    head["stages"] = ordered_json::array();
    for (const auto& st : analyses[0].stages) head["stages"].push_back(stage_analysis_json(st));
    write_output(json_path, report_with_versions(head, analyses[0].versions));
    if (json_path == "-") return 0;
  }
  if (files.size() == 1)
    print_analysis(schedules[0], analyses[0], files[0]);
  else
    print_side_by_side(schedules, analyses, files);
  return 0;
}

}  // namespace paci::cli
