// watch_drift: alone rounds and load probes against a steady clock; the window summaries.
#include "exec/drift.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <stdexcept>

namespace paci::exec {

DriftWatch watch_drift(Calibrator& calibrator, double seconds, double probe_every_s,
                       double probe_window_s, const std::function<void(double)>& progress) {
  if (!(seconds > 0) || !(probe_every_s > 0) || !(probe_window_s > 0))
    throw std::invalid_argument("watch_drift: durations must be positive");
  using Clock = std::chrono::steady_clock;
  const auto begin = Clock::now();
  const auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - begin).count(); };
  DriftWatch watch;
  watch.seconds = seconds;
  const std::size_t stages = calibrator.stage_count();
  double next_probe = 0.0;
  while (elapsed() < seconds) {
    for (std::size_t s = 0; s < stages; ++s) {
      const auto times = calibrator.time_alone(s);
      watch.alone.push_back({elapsed(), static_cast<std::int32_t>(s), times});
    }
    if (elapsed() >= next_probe) {
      const double factor = calibrator.probe(probe_window_s).factor();
      if (std::isfinite(factor)) watch.loaded.push_back({elapsed(), factor});
      next_probe = elapsed() + probe_every_s;
    }
    if (progress) progress(elapsed());
  }
  return watch;
}

std::vector<DriftWindow> drift_windows(const DriftWatch& watch, std::size_t stages,
                                       double window_s) {
  if (!(window_s > 0)) throw std::invalid_argument("drift_windows: the window must be positive");
  const auto count = static_cast<std::size_t>(std::ceil(watch.seconds / window_s));
  std::vector<std::vector<std::array<std::vector<double>, 3>>> alone(
      count, std::vector<std::array<std::vector<double>, 3>>(stages));
  std::vector<std::vector<double>> loaded(count);
  const auto window_of = [&](double at_s) {
    return std::min(count - 1, static_cast<std::size_t>(std::max(0.0, at_s) / window_s));
  };
  for (const DriftSample& x : watch.alone)
    for (std::size_t i = 0; i < 3; ++i)
      alone[window_of(x.at_s)][static_cast<std::size_t>(x.stage)][i].push_back(x.alone_s[i]);
  for (const DriftProbeSample& x : watch.loaded) loaded[window_of(x.at_s)].push_back(x.factor);
  std::vector<DriftWindow> out;
  for (std::size_t w = 0; w < count; ++w) {
    if (alone[w].empty() || alone[w][0][0].empty()) continue;
    DriftWindow window;
    window.from_s = static_cast<double>(w) * window_s;
    window.to_s = std::min(watch.seconds, static_cast<double>(w + 1) * window_s);
    for (const auto& stage : alone[w])
      window.stages.push_back({spread_of(stage[0]), spread_of(stage[1]), spread_of(stage[2])});
    window.load_factor = spread_of(loaded[w]);
    out.push_back(std::move(window));
  }
  return out;
}

DriftSummary summarize_drift(const std::vector<DriftWindow>& windows, const DriftWatch& watch,
                             std::size_t stage, std::size_t action) {
  DriftSummary d;
  std::vector<double> all, medians, within;
  for (const DriftSample& x : watch.alone)
    if (static_cast<std::size_t>(x.stage) == stage) all.push_back(x.alone_s.at(action));
  for (const DriftWindow& w : windows) {
    const Spread& s = w.stages.at(stage).at(action);
    medians.push_back(s.median);
    if (s.median > 0) within.push_back((s.max - s.min) / s.median);
  }
  d.all = spread_of(all);
  d.window_medians = spread_of(medians);
  if (d.window_medians.median > 0)
    d.between = (d.window_medians.max - d.window_medians.min) / d.window_medians.median;
  d.within = spread_of(within).median;
  return d;
}

}  // namespace paci::exec
