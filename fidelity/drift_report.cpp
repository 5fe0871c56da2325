// drift_table and drift_json.
#include "fidelity/drift_report.hpp"

#include "exec/executor.hpp"

#include <fmt/format.h>

namespace paci::fidelity {

namespace {

constexpr const char* kActions[] = {"F", "B", "U"};

std::string ms(const exec::Spread& s) {
  return fmt::format("{:7.2f} [{:6.2f}, {:6.2f}]", 1e3 * s.median, 1e3 * s.min, 1e3 * s.max);
}

ordered_json spread(const exec::Spread& s) {
  return {{"min", s.min}, {"median", s.median}, {"max", s.max}, {"samples", s.samples}};
}

}  // namespace

std::string drift_table(const exec::DriftWatch& watch,
                        const std::vector<exec::DriftWindow>& windows, std::size_t stages) {
  std::string out =
      fmt::format("{:>15}  {:>24}  {:>24}  {:>24}  {:>22}\n", "window (s)", "stage 0 F (ms)",
                  "stage 0 B (ms)", "stage 0 U (ms)", "load factor");
  for (const exec::DriftWindow& w : windows) {
    const auto& s0 = w.stages.at(0);
    out += fmt::format("{:>6.0f} - {:>6.0f}  {:>24}  {:>24}  {:>24}  ", w.from_s, w.to_s, ms(s0[0]),
                       ms(s0[1]), ms(s0[2]));
    out += w.load_factor.samples ? fmt::format("{:.3f} [{:.3f}, {:.3f}]\n", w.load_factor.median,
                                               w.load_factor.min, w.load_factor.max)
                                 : "-\n";
  }
  out += fmt::format(
      "over {:.0f} s, {} windows: between windows, (max - min) / median of the window medians; "
      "within, the median over windows of (max - min) / median inside one\n",
      watch.seconds, windows.size());
  for (std::size_t s = 0; s < stages; ++s)
    for (std::size_t a = 0; a < 3; ++a) {
      const exec::DriftSummary d = exec::summarize_drift(windows, watch, s, a);
      out += fmt::format(
          "  stage {} {}: median {:.2f} ms, window medians {:.2f}-{:.2f} ms: between {:.1f}%, "
          "within {:.1f}%\n",
          s, kActions[a], 1e3 * d.all.median, 1e3 * d.window_medians.min,
          1e3 * d.window_medians.max, 100 * d.between, 100 * d.within);
    }
  return out;
}

ordered_json drift_json(const exec::DriftWatch& watch,
                        const std::vector<exec::DriftWindow>& windows, std::size_t stages,
                        double window_s) {
  ordered_json j;
  j["seconds"] = watch.seconds;
  j["window_s"] = window_s;
  j["windows"] = ordered_json::array();
  for (const exec::DriftWindow& w : windows) {
    ordered_json row = {{"from_s", w.from_s}, {"to_s", w.to_s}};
    row["stages"] = ordered_json::array();
    for (const auto& st : w.stages)
      row["stages"].push_back({{"forward_s", spread(st[0])},
                               {"backward_s", spread(st[1])},
                               {"update_s", spread(st[2])}});
    row["load_factor"] = spread(w.load_factor);
    j["windows"].push_back(row);
  }
  j["summary"] = ordered_json::array();
  for (std::size_t s = 0; s < stages; ++s)
    for (std::size_t a = 0; a < 3; ++a) {
      const exec::DriftSummary d = exec::summarize_drift(windows, watch, s, a);
      j["summary"].push_back({{"stage", s},
                              {"action", kActions[a]},
                              {"all", spread(d.all)},
                              {"window_medians", spread(d.window_medians)},
                              {"between", d.between},
                              {"within", d.within}});
    }
  j["alone"] = ordered_json::array();
  for (const exec::DriftSample& x : watch.alone)
    j["alone"].push_back({x.at_s, x.stage, x.alone_s[0], x.alone_s[1], x.alone_s[2]});
  j["loaded"] = ordered_json::array();
  for (const exec::DriftProbeSample& x : watch.loaded) j["loaded"].push_back({x.at_s, x.factor});
  return j;
}

DriftRun watch_after_training(const exec::TrainSetup& t, const exec::CalibrationOptions& o,
                              double seconds, std::size_t after_runs,
                              const std::function<void(const std::string&)>& progress) {
  exec::CalibrationOptions options = o;
  options.devices = static_cast<std::size_t>(t.schedule.num_devices());
  exec::Calibrator calibrator(t.exec, options);
  while (!calibrator.settled() && calibrator.rounds() < options.max_rounds) calibrator.round();
  for (std::size_t r = 0; r < after_runs; ++r) {
    progress(fmt::format("training run {}/{} of {} before the watch", r + 1, after_runs,
                         t.schedule.kind));
    exec::Executor(t.schedule, t.exec).run();
  }
  DriftRun run;
  run.probe_window_s = std::max(0.3, 4 * calibrator.longest_stage_s());
  run.watch = exec::watch_drift(calibrator, seconds, 5.0, run.probe_window_s, [&](double done) {
    progress(fmt::format("watching the drift, {:.0f}/{:.0f} s", done, seconds));
  });
  progress("");
  run.stages = calibrator.stage_count();
  run.rounds = calibrator.rounds();
  run.settled = calibrator.settled();
  return run;
}

}  // namespace paci::fidelity
