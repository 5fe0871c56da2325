// Watching how this machine's speed drifts (paci calibrate --drift): every stage's F, B and U
// alone, over and over for a stretch of time, with a load probe (every stage computing at once,
// as a run computes them; Calibrator::probe) between rounds, each sample stamped with its time;
// then summaries per window of time. What calibration cannot promise on a machine whose speed
// moves between minutes, this shows with numbers.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <vector>

#include "exec/calibrate.hpp"

namespace paci::exec {

struct DriftSample {
  double at_s = 0.0;  // since the watch began, at the end of the sample
  std::int32_t stage = 0;
  std::array<double, 3> alone_s{};  // F, B, U, seconds
};

struct DriftProbeSample {
  double at_s = 0.0;
  double factor = 0.0;  // LoadProbe::factor(): the run-like load against the calibration
};

struct DriftWatch {
  double seconds = 0.0;
  std::vector<DriftSample> alone;
  std::vector<DriftProbeSample> loaded;
};

// Rounds of every stage alone (one F, B, U each), a load probe of `probe_window_s` every
// `probe_every_s`, until `seconds` have passed. `progress` (may be empty) gets the seconds done
// after each round. The calibrator needs a round first (its pooled medians are the probe's
// reference).
DriftWatch watch_drift(Calibrator& calibrator, double seconds, double probe_every_s,
                       double probe_window_s, const std::function<void(double)>& progress = {});

// A window of the watch: per stage the spread of each action alone, and the load factors.
struct DriftWindow {
  double from_s = 0.0, to_s = 0.0;
  std::vector<std::array<Spread, 3>> stages;  // [stage][F, B, U]
  Spread load_factor;
};

// The watch cut into windows of `window_s` seconds (the last may be shorter; empty ones left
// out).
std::vector<DriftWindow> drift_windows(const DriftWatch& watch, std::size_t stages,
                                       double window_s);

// The drift of one action of one stage over the watch: its window medians' spread (the
// machine's drift between windows) and the spread of every sample within the windows, each
// relative to the overall median ((max - min) / median).
struct DriftSummary {
  Spread all;             // every sample
  Spread window_medians;  // one per window
  double between = 0.0;   // (max - min) / median of the window medians
  double within = 0.0;    // the median over windows of (max - min) / median inside one
};
DriftSummary summarize_drift(const std::vector<DriftWindow>& windows, const DriftWatch& watch,
                             std::size_t stage, std::size_t action);

}  // namespace paci::exec
