// Calibration: measures on this machine what the simulator's cost model needs — per stage the
// durations of F, B and U alone (no other stage computing), how much slower (or faster) every
// action runs while k stage threads compute at once (k = 1 .. stages: the host is shared), the
// bytes a stage holds and sends, and the in-process transport's latency and bandwidth. Every
// figure is a median over rounds of repeats, taken until it stops moving; the spread comes too.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "exec/executor.hpp"

namespace paci::exec {

// min, median and max of a set of samples (seconds, or a dimensionless ratio).
struct Spread {
  double min = 0.0, median = 0.0, max = 0.0;
  std::size_t samples = 0;
};
Spread spread_of(std::vector<double> samples);

struct StageMeasurement {
  Spread forward_s, backward_s, update_s;  // alone: no other stage computing
  // The same backward split (zero-bubble schedules): its input and weight halves, alone; empty
  // (no samples) when the calibration did not time them.
  Spread input_grad_s, weight_grad_s;
  std::int64_t activation_bytes = 0;  // one micro-batch's activation slot
  std::int64_t message_bytes = 0;     // an activation or gradient sent to a neighbour
  std::int64_t weight_bytes = 0, gradient_bytes = 0, optimizer_bytes = 0;
  std::int64_t weight_grad_stash_bytes = 0;  // a split backward's, from I to W
};

struct LinkMeasurement {
  double latency_s = 0.0;              // one-way, for a one-float message (median)
  double bandwidth_bytes_per_s = 0.0;  // from the median time of activation-sized messages
};

// The link between two processes of a launch (paci calibrate under mpirun; exec/mpi/): a
// ping-pong of one-float messages and of activation-sized ones, the same for both directions.
struct PairLinkMeasurement {
  std::int32_t a = 0, b = 0;           // the processes (= devices), a < b
  Spread latency_s;                    // half a one-float round trip
  Spread transfer_s;                   // half an activation-sized round trip
  std::int64_t bytes = 0;              // the activation-sized message
  double bandwidth_bytes_per_s = 0.0;  // bytes / (transfer − latency), from the medians
};

struct CalibrationOptions {
  std::size_t repeats = 9;      // timed F, B, U triples per stage and round
  std::size_t max_rounds = 6;   // stop here even when the medians still move
  double stable_within = 0.01;  // a median is stable when a round moves it by less than this
  bool measure_sharing = true;  // also time k = 2 .. stages threads computing at once
  bool measure_split = true;    // also time the backward split into I and W, alone
  // How many stage threads can compute at once: the schedule's devices (interleaved: several
  // stages per device, one computing at a time). 0: one per stage. Sharing is timed for k = 2 ..
  // min(stages, devices).
  std::size_t devices = 0;
  double warmup_s = 3.0;  // every stage computing at once before the first round
};

struct Calibration {
  std::vector<StageMeasurement> stages;
  // slowdown_by_count[k-1]: how many times longer an action takes while k stage threads compute
  // at once (k = 1 .. min(stages, devices)) than alone (time-weighted over every action they
  // completed, each against the median of its stage and kind timed alone in the same round, so a
  // machine whose speed drifts compares like with like); [0] is 1 by definition. Measured as it is:
  // on some machines two threads computing at once each run faster than one alone (below 1). Spread
  // over rounds and threads.
  std::vector<double> slowdown_by_count;
  std::vector<Spread> slowdown_spread;
  // The same per stage (its own thread's ratios; stages share a host differently): [s][k-1].
  std::vector<std::vector<double>> stage_slowdown_by_count;
  LinkMeasurement link;
  std::int64_t tokens_per_microbatch = 0;
  std::size_t repeats = 0;
  std::size_t rounds = 0;  // rounds taken
  bool stable = true;      // every median settled within stable_within before max_rounds
  // The figure whose pooled median the last round moved most, relative to where it was ("stage 0
  // F", "stage 1 slowdown k=2"), by how much, and all of its samples: what an unsettled
  // calibration leaves uncertain (moved is 0 and figure empty after a single round).
  struct Movement {
    std::string figure;
    double moved = 0.0;
    Spread samples;
  };
  Movement largest_move;
};

// How fast the stages run right now against a calibration (Calibrator::probe): the time the
// actions took, all stages computing as a run computes them, over the time the calibration says
// they take there.
struct LoadProbe {
  double measured_s = 0.0, expected_s = 0.0;
  std::size_t actions = 0;  // completed inside the window
  // measured / expected: above 1, the machine runs slower now than the calibration says.
  double factor() const;
};

// Calibration in rounds: each round times every stage alone (`repeats` F, B, U triples each),
// then k = 2 .. stages (at most options.devices) threads at once against that round's alone
// medians. Pooled over rounds, so rounds can be spread over a longer stretch (paci fidelity
// interleaves them with its runs).
class Calibrator {
 public:
  // Uses config's shape, partition (one range per stage), threads and data; allocates every
  // stage and warms it up.
  Calibrator(const ExecConfig& config, const CalibrationOptions& options);
  ~Calibrator();

  void round();
  // Forgets every sample so far (to pool only rounds taken later, alongside other work).
  void discard();
  // True once a round moved no pooled median by more than stable_within (two rounds at least).
  bool settled() const { return settled_; }
  std::size_t rounds() const { return rounds_; }
  std::size_t stage_count() const { return benches_.size(); }
  // Everything pooled so far (the link is measured on the first call).
  Calibration result();

  // Not pooled: every stage computing at once, as many as the devices allow (in turns where
  // fewer), for `window_s` seconds, each completed action against its stage's pooled median
  // alone times the stage's pooled slowdown for that many computing at once. A drift factor to
  // take right before a run (paci fidelity). Needs a round first.
  LoadProbe probe(double window_s);
  // Not pooled: every stage alone, one after another, `repeats` F, B and U each (and I and W when
  // the calibration times the split), each against its pooled median: how fast this machine runs
  // the stages right now, in the terms the cost model's durations are in (times alone). A drift
  // factor to take right before a run (paci fidelity). Needs a round first.
  LoadProbe probe_alone(std::size_t repeats);
  // Not pooled: one F, B and U of `stage` alone, their seconds (a drift watch's sample).
  std::array<double, 3> time_alone(std::size_t stage);
  // The slowest stage's F + B + U alone, from the pooled medians (0 before any round).
  double longest_stage_s() const;

 private:
  struct Bench;
  std::vector<double> medians() const;  // every pooled median, in a fixed order
  // The figure of medians()[i] ("stage 0 F") and its pooled samples.
  std::pair<std::string, const std::vector<double>*> figure(std::size_t i) const;

  const ExecConfig& config_;
  CalibrationOptions options_;
  std::vector<std::unique_ptr<Bench>> benches_;
  std::vector<std::array<std::vector<double>, 3>> alone_;  // per stage: F, B, U samples
  std::vector<std::array<std::vector<double>, 2>> split_;  // per stage: I, W samples
  std::vector<std::vector<std::vector<double>>> ratios_;   // per stage, per k >= 2: samples
  std::vector<double> previous_;
  std::size_t rounds_ = 0;
  std::size_t at_once_ = 0;  // stages computing at once at most: min(stages, options.devices)
  bool settled_ = false;
  std::optional<LinkMeasurement> link_;
  Calibration::Movement largest_move_;
};

// Rounds until settled() or max_rounds.
Calibration calibrate(const ExecConfig& config, const CalibrationOptions& options = {});

}  // namespace paci::exec
