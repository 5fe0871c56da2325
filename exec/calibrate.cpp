// Calibrator: rounds of each stage alone (one at a time) timing its own F, B and U, then k = 2 .. P
// stage threads computing at once against that round's alone medians (the slowdown of sharing the
// host), pooled until the medians settle; and a ping-pong between two threads over the in-process
// transport for the link.
#include "exec/calibrate.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <stdexcept>
#include <thread>

#include "exec/transport.hpp"

namespace paci::exec {

Spread spread_of(std::vector<double> v) {
  Spread s;
  s.samples = v.size();
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  s.min = v.front();
  s.max = v.back();
  s.median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  return s;
}

namespace {

using Clock = std::chrono::steady_clock;

double seconds_between(Clock::time_point a, Clock::time_point z) {
  return std::chrono::duration<double>(z - a).count();
}

// The most micro-batches one stage may run during a calibration (its version book and LR
// schedule are sized for them).
constexpr std::int64_t kMaxMicrobatches = 1 << 16;

bool moved_little(double before, double now, double within) {
  // A relative bound, with a floor of 20 µs for sub-millisecond medians (AdamW on a small stage).
  return std::abs(now - before) <= within * std::abs(before) + 20e-6;
}

// Stops and joins a set of threads when it goes out of scope (or at join()), whatever happened:
// raises `stop` (and `go`, for threads still waiting to start), aborts the transport, if any, so
// no thread stays blocked in it, and joins them all.
struct Joiner {
  std::atomic<bool>& stop;
  std::vector<std::thread>& threads;
  InProcessTransport* transport = nullptr;
  std::atomic<bool>* go = nullptr;
  void join() {
    stop = true;
    if (go != nullptr) *go = true;
    for (auto& t : threads)
      if (t.joinable()) t.join();
  }
  ~Joiner() {
    if (transport != nullptr && std::any_of(threads.begin(), threads.end(),
                                            [](const std::thread& t) { return t.joinable(); }))
      transport->abort();
    join();
  }
};

// Keeps the calling thread's core busy for `seconds`, as a stage computing does.
void spin_for(double seconds) {
  const auto until = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                        std::chrono::duration<double>(seconds));
  while (Clock::now() < until) {
  }
}

// The link between two stage threads as a run uses it, while `busy` other threads compute.
// Latency: a sender that keeps computing sends a one-float message to a receiver blocked waiting
// for it; the time until the receiver has it (waking up included: with more threads than cores it
// may wait for one) — the mean, since a run adds them all up, outliers included. Bandwidth:
// activation-sized messages in a ping-pong (the median), taken as all copying.
template <typename Bench>
LinkMeasurement measure_link(std::size_t floats, std::size_t repeats,
                             const std::vector<Bench*>& busy) {
  std::atomic<bool> stop{false};
  std::vector<std::thread> load;
  std::vector<std::exception_ptr> errors(busy.size());
  InProcessTransport transport(2);
  Joiner joiner{stop, load, &transport};  // before any thread starts: nothing left unjoined
  for (std::size_t i = 0; i < busy.size(); ++i)
    load.emplace_back([&stop, &errors, bench = busy[i], i] {
      try {
        while (!stop) bench->run();
      } catch (...) {
        errors[i] = std::current_exception();
      }
    });
  const std::size_t rounds = std::max<std::size_t>(repeats, 60);
  constexpr double kComputeS = 0.004;  // the sender's work before and after each message
  std::vector<double> one_way(rounds), large;
  std::exception_ptr receiver_error;
  load.emplace_back([&] {
    try {
      std::vector<float> buffer(floats);
      for (std::size_t r = 0; r < 2 * rounds; ++r) {
        const std::size_t n = r < rounds ? 1 : floats;
        const auto key = MessageKey{DependencyKind::activation, 0, static_cast<std::int32_t>(r)};
        const SendTimes sent = transport.receive(1, 0, key, std::span<float>(buffer.data(), n));
        if (r < rounds)
          one_way[r] = seconds_between(Clock::time_point(), Clock::now()) - sent.start_s;
        transport.send(1, 0, key, std::span<const float>(buffer.data(), n), {});
      }
    } catch (const Aborted&) {  // the sender failed; its error is the one reported
    } catch (...) {
      receiver_error = std::current_exception();
    }
  });
  std::vector<float> data(floats, 1.0f), back(floats);
  for (std::size_t r = 0; r < 2 * rounds; ++r) {
    const std::size_t n = r < rounds ? 1 : floats;
    const auto key = MessageKey{DependencyKind::activation, 0, static_cast<std::int32_t>(r)};
    if (r < rounds) spin_for(kComputeS);
    const auto t0 = Clock::now();
    const double stamp = seconds_between(Clock::time_point(), t0);
    transport.send(0, 1, key, std::span<const float>(data.data(), n), {stamp, stamp});
    if (r < rounds) spin_for(kComputeS);
    transport.receive(0, 1, key, std::span<float>(back.data(), n));
    if (r >= rounds) large.push_back(seconds_between(t0, Clock::now()) / 2);
  }
  joiner.join();
  errors.push_back(receiver_error);
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
  LinkMeasurement link;
  double sum = 0.0;
  for (double x : one_way) sum += x;
  link.latency_s = sum / static_cast<double>(one_way.size());
  // The ping-pong of activation-sized messages is copying, almost all of it.
  link.bandwidth_bytes_per_s =
      static_cast<double>(floats * sizeof(float)) / std::max(spread_of(large).median, 1e-9);
  return link;
}

// What one thread of a window completed: the time its actions took, the time `alone` says they
// take, and how many there were.
struct WindowSums {
  double measured_s = 0.0, expected_s = 0.0;
  std::size_t actions = 0;
};

// One window with the given stages computing at once, one thread each: per stage, the time its
// completed actions took and the time `alone` says they take (per stage, an F, B, U time each),
// counting only actions that started after every thread had begun and ended before the window
// closed.
template <typename Bench>
std::vector<WindowSums> sharing_window(std::vector<std::unique_ptr<Bench>>& benches,
                                       const std::vector<std::array<double, 3>>& alone,
                                       const std::vector<std::size_t>& stages, double window_s) {
  const std::size_t k = stages.size();
  std::atomic<std::size_t> waiting{0};
  std::atomic<bool> go{false}, stop{false};
  struct Done {
    Clock::time_point start, end;
    double alone_s;
  };
  std::vector<std::vector<Done>> done(k);
  std::vector<std::exception_ptr> errors(k);
  std::vector<std::thread> threads;
  Joiner joiner{stop, threads, nullptr, &go};  // before any thread starts: nothing left unjoined
  for (std::size_t t = 0; t < k; ++t)
    threads.emplace_back([&, t] {
      try {
        const std::size_t s = stages[t];
        ++waiting;
        while (!go) std::this_thread::yield();
        while (!stop) {
          const auto times = benches[s]->run();
          for (std::size_t i = 0; i < 3; ++i)
            done[t].push_back({times[i].start, times[i].end, alone[s][i]});
        }
      } catch (...) {
        errors[t] = std::current_exception();
        stop = true;
      }
    });
  while (waiting < k) std::this_thread::yield();
  const Clock::time_point begin = Clock::now();
  go = true;
  std::this_thread::sleep_for(std::chrono::duration<double>(window_s));
  const Clock::time_point end = Clock::now();
  joiner.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
  std::vector<WindowSums> sums(k);
  for (std::size_t t = 0; t < k; ++t)
    for (const Done& d : done[t])
      if (d.start >= begin && d.end <= end) {
        sums[t].measured_s += seconds_between(d.start, d.end);
        sums[t].expected_s += d.alone_s;
        ++sums[t].actions;
      }
  return sums;
}

}  // namespace

// One stage's runtime fed with what the stages around it really send for data's micro-batch 0
// (prime_forward / prime_backward, in pipeline order), running F, B and U of one micro-batch at a
// time and timing each. Real inputs matter: a synthetic pattern made the last stage's F and B
// about 10% slower than in training.
struct Calibrator::Bench {
  struct Timed {
    Clock::time_point start, end;
  };

  Bench(const ExecConfig& config, std::int32_t stage) : config_(config) {
    rc_.shape = {config.config, config.ranges[static_cast<std::size_t>(stage)], config.batch,
                 config.seq_len};
    rc_.stage = stage;
    rc_.activation_capacity = 1;
    rc_.split_backward = true;  // run_split() times I and W
    rc_.threads = config.threads_per_device;
    rc_.adamw = config.adamw;
    // A learning rate of 0: AdamW does all of its work (moments, decay, the step), but the
    // weights never move. Updated with synthetic gradients they would drift, over a hundred or so
    // steps, into values that make stage 0's F and B twice as slow — timings of a state no real
    // training is in. (So a fresh runtime, when one runs out of micro-batches, is the same.)
    rc_.lr = config.lr;
    rc_.lr.max_lr = rc_.lr.min_lr = 0.0;
    rc_.lr.total_steps = static_cast<std::size_t>(kMaxMicrobatches) + 1;
    rc_.total_microbatches = kMaxMicrobatches;
    rc_.updates = static_cast<std::int32_t>(kMaxMicrobatches);
    renew();
    const std::size_t rows = config.batch * config.seq_len;
    width_ = rows * config.config.d_model;
    tokens_.resize(rows);
    targets_.resize(rows);
    config.data(0, tokens_, targets_);
    input_.resize(width_);
    d_output_.resize(width_);
    d_input_.resize(width_);
    // By its blocks, not its index: a two-copy schedule's copy 1 starts again at block 0.
    const model::StageRange& range = config.ranges[static_cast<std::size_t>(stage)];
    first_ = range.is_first();
    last_ = range.is_last(config.config);
  }

  // Micro-batch 0's forward with the previous stage's output (ignored on the first stage); copies
  // this stage's output into `next` (when given) before it can be freed.
  void prime_forward(std::span<const float> input, std::span<float> next) {
    if (!first_) std::copy(input.begin(), input.end(), input_.begin());
    runtime_->forward(
        0, first_ ? model::StageInput::tokens(tokens_) : model::StageInput::activations(input_),
        targets_);
    if (!next.empty()) {
      const auto out = runtime_->output(0);
      std::copy(out.begin(), out.end(), next.begin());
    }
  }
  // Micro-batch 0's backward with the next stage's input gradient (ignored on the last stage),
  // and its update; the gradient it sends back stays in d_input().
  void prime_backward(std::span<const float> d_output) {
    if (!last_) std::copy(d_output.begin(), d_output.end(), d_output_.begin());
    runtime_->backward(0, last_ ? std::span<const float>() : std::span<const float>(d_output_),
                       first_ ? std::span<float>() : std::span<float>(d_input_));
    runtime_->update();
    next_ = 1;
  }
  std::span<float> input() { return input_; }
  std::span<const float> d_input() const { return d_input_; }

  // A fresh runtime with the same weights (its version book and LR schedule have room for
  // kMaxMicrobatches; a long warm-up of a tiny model can use them up).
  void renew() {
    runtime_ = std::make_unique<StageRuntime>(rc_);
    std::vector<float> weights(runtime_->layout().size());
    model::init_gpt2(runtime_->layout(), weights, config_.seed);
    runtime_->set_params(weights);
    next_ = 0;
  }

  // F, B and U of the next micro-batch; their start and end times.
  std::array<Timed, 3> run() {
    if (next_ >= kMaxMicrobatches) renew();
    const auto mb = static_cast<std::int32_t>(next_++);
    std::array<Timed, 3> t;
    t[0].start = Clock::now();
    runtime_->forward(
        mb, first_ ? model::StageInput::tokens(tokens_) : model::StageInput::activations(input_),
        targets_);
    t[0].end = t[1].start = Clock::now();
    runtime_->backward(mb, last_ ? std::span<const float>() : std::span<const float>(d_output_),
                       first_ ? std::span<float>() : std::span<float>(d_input_));
    t[1].end = t[2].start = Clock::now();
    runtime_->update();
    t[2].end = Clock::now();
    return t;
  }

  // F, I, W and U of the next micro-batch: the times of I and W.
  std::array<Timed, 2> run_split() {
    if (next_ >= kMaxMicrobatches) renew();
    const auto mb = static_cast<std::int32_t>(next_++);
    runtime_->forward(
        mb, first_ ? model::StageInput::tokens(tokens_) : model::StageInput::activations(input_),
        targets_);
    std::array<Timed, 2> t;
    t[0].start = Clock::now();
    runtime_->input_grad(mb, last_ ? std::span<const float>() : std::span<const float>(d_output_),
                         first_ ? std::span<float>() : std::span<float>(d_input_));
    t[0].end = t[1].start = Clock::now();
    runtime_->weight_grad(mb);
    t[1].end = Clock::now();
    runtime_->update();
    return t;
  }

  StageMeasurement sizes() const {
    StageMeasurement m;
    m.activation_bytes = runtime_->activation_slot_bytes();
    m.message_bytes = static_cast<std::int64_t>(width_ * sizeof(float));
    const auto weights = static_cast<std::int64_t>(runtime_->layout().bytes());
    m.weight_bytes = weights;
    m.gradient_bytes = weights;
    m.optimizer_bytes = 2 * weights;
    m.weight_grad_stash_bytes = static_cast<std::int64_t>(runtime_->weight_stash_bytes());
    return m;
  }

  const ExecConfig& config_;
  StageRuntimeConfig rc_;
  std::unique_ptr<StageRuntime> runtime_;
  std::size_t width_ = 0;
  std::vector<std::int32_t> tokens_, targets_;
  std::vector<float> input_, d_output_, d_input_;
  bool first_ = false, last_ = false;
  std::int64_t next_ = 0;
};

Calibrator::Calibrator(const ExecConfig& config, const CalibrationOptions& options)
    : config_(config), options_(options) {
  if (options.repeats == 0 || options.max_rounds == 0)
    throw std::invalid_argument("calibration needs at least one repeat and one round");
  const std::size_t P = config.ranges.size();
  for (std::size_t s = 0; s < P; ++s)
    benches_.push_back(std::make_unique<Bench>(config, static_cast<std::int32_t>(s)));
  // Micro-batch 0 through the pipeline, forward then backward, so every stage times what it would
  // receive in training (two copies: through each copy).
  const auto feeds_next = [&](std::size_t s) {
    return s + 1 < P && !config.ranges[s].is_last(config.config);
  };
  for (std::size_t s = 0; s < P; ++s)
    benches_[s]->prime_forward(s > 0 ? benches_[s]->input() : std::span<float>(),
                               feeds_next(s) ? benches_[s + 1]->input() : std::span<float>());
  for (std::size_t s = P; s-- > 0;)
    benches_[s]->prime_backward(feeds_next(s) ? benches_[s + 1]->d_input()
                                              : std::span<const float>());
  for (auto& bench : benches_) bench->run();  // warms caches, pages and thread pools up
  // Then every stage at once for a while, as training keeps the machine: on a shared VM the first
  // seconds of load ran ~10% slower than the rest (the host settling), which a calibration taken
  // cold would pass on to every prediction.
  // (As many at once as the run computes: with fewer devices than stages, in turns.)
  at_once_ = options.devices > 0 ? std::min(P, options.devices) : P;
  std::vector<std::array<double, 3>> unused(P, {1.0, 1.0, 1.0});
  const std::size_t turns = (P + at_once_ - 1) / at_once_;
  for (std::size_t first = 0; first < P; first += at_once_) {
    std::vector<std::size_t> stages;
    for (std::size_t s = first; s < std::min(P, first + at_once_); ++s) stages.push_back(s);
    sharing_window(benches_, unused, stages, options.warmup_s / static_cast<double>(turns));
  }
  alone_.resize(P);
  split_.resize(P);
  ratios_.assign(P, std::vector<std::vector<double>>(
                        options.measure_sharing && at_once_ > 1 ? at_once_ - 1 : 0));
}

Calibrator::~Calibrator() = default;

void Calibrator::discard() {
  for (auto& stage : alone_)
    for (auto& samples : stage) samples.clear();
  for (auto& stage : split_)
    for (auto& samples : stage) samples.clear();
  for (auto& stage : ratios_)
    for (auto& samples : stage) samples.clear();
  previous_.clear();
  rounds_ = 0;
  settled_ = false;
}

void Calibrator::round() {
  const std::size_t P = benches_.size();
  std::vector<std::array<double, 3>> round_medians(P);
  double longest_s = 0.0;  // the slowest stage's F + B + U alone, this round
  for (std::size_t s = 0; s < P; ++s) {
    std::array<std::vector<double>, 3> samples;
    for (std::size_t r = 0; r < options_.repeats; ++r) {
      const auto t = benches_[s]->run();
      for (std::size_t k = 0; k < 3; ++k)
        samples[k].push_back(seconds_between(t[k].start, t[k].end));
    }
    for (std::size_t k = 0; k < 3; ++k) {
      round_medians[s][k] = spread_of(samples[k]).median;
      alone_[s][k].insert(alone_[s][k].end(), samples[k].begin(), samples[k].end());
    }
    longest_s =
        std::max(longest_s, round_medians[s][0] + round_medians[s][1] + round_medians[s][2]);
    for (std::size_t r = 0; options_.measure_split && r < options_.repeats; ++r) {
      const auto t = benches_[s]->run_split();
      for (std::size_t k = 0; k < 2; ++k)
        split_[s][k].push_back(seconds_between(t[k].start, t[k].end));
    }
  }
  // Long enough for every thread to complete a few actions even when k share few cores (and at
  // least 50 ms, for a tiny model on a loaded machine).
  const double window_s = std::max(0.05, static_cast<double>(options_.repeats) * longest_s);
  // For each k, windows of k consecutive stages (wrapping around) until every stage ran in one.
  for (std::size_t k = 2; !ratios_.empty() && k <= ratios_.front().size() + 1; ++k)
    for (std::size_t first = 0; first < P; first += k) {
      std::vector<std::size_t> stages;
      for (std::size_t t = 0; t < k; ++t) stages.push_back((first + t) % P);
      const auto sums = sharing_window(benches_, round_medians, stages, window_s);
      for (std::size_t t = 0; t < k; ++t)
        if (sums[t].expected_s > 0)
          ratios_[stages[t]][k - 2].push_back(sums[t].measured_s / sums[t].expected_s);
    }
  ++rounds_;
  const std::vector<double> now = medians();
  if (rounds_ > 1 && previous_.size() == now.size()) {
    settled_ = true;
    largest_move_ = {};
    for (std::size_t i = 0; i < now.size(); ++i) {
      settled_ = settled_ && moved_little(previous_[i], now[i], options_.stable_within);
      const double moved = previous_[i] != 0 ? std::abs(now[i] / previous_[i] - 1.0) : 0.0;
      if (moved > largest_move_.moved) {
        const auto [name, samples] = figure(i);
        largest_move_ = {name, moved, spread_of(*samples)};
      }
    }
  }
  previous_ = now;
}

std::pair<std::string, const std::vector<double>*> Calibrator::figure(std::size_t i) const {
  static constexpr const char* kKinds[] = {"F", "B", "U"};
  const std::size_t P = alone_.size();
  if (i < 3 * P) return {fmt::format("stage {} {}", i / 3, kKinds[i % 3]), &alone_[i / 3][i % 3]};
  i -= 3 * P;
  for (std::size_t s = 0; s < ratios_.size(); ++s) {
    if (i < ratios_[s].size())
      return {fmt::format("stage {} slowdown k={}", s, i + 2), &ratios_[s][i]};
    i -= ratios_[s].size();
  }
  throw std::out_of_range("Calibrator::figure: no such median");
}

double LoadProbe::factor() const {
  return expected_s > 0 ? measured_s / expected_s : std::numeric_limits<double>::quiet_NaN();
}

double Calibrator::longest_stage_s() const {
  double longest = 0.0;
  for (const auto& stage : alone_) {
    double sum = 0.0;
    for (const auto& samples : stage) sum += spread_of(samples).median;
    longest = std::max(longest, sum);
  }
  return longest;
}

LoadProbe Calibrator::probe(double window_s) {
  if (rounds_ == 0) throw std::logic_error("Calibrator::probe before any round");
  const std::size_t P = benches_.size();
  LoadProbe probe;
  for (std::size_t first = 0; first < P; first += at_once_) {
    std::vector<std::size_t> stages;
    for (std::size_t s = first; s < std::min(P, first + at_once_); ++s) stages.push_back(s);
    const std::size_t k = stages.size();
    // Each stage's actions as the pooled calibration times them with k computing at once.
    std::vector<std::array<double, 3>> expected(P, {0.0, 0.0, 0.0});
    for (std::size_t s : stages) {
      double slowdown = 1.0;
      if (k >= 2 && k - 2 < ratios_[s].size() && !ratios_[s][k - 2].empty())
        slowdown = spread_of(ratios_[s][k - 2]).median;
      for (std::size_t i = 0; i < 3; ++i)
        expected[s][i] = spread_of(alone_[s][i]).median * slowdown;
    }
    for (const WindowSums& w : sharing_window(benches_, expected, stages, window_s)) {
      probe.measured_s += w.measured_s;
      probe.expected_s += w.expected_s;
      probe.actions += w.actions;
    }
  }
  return probe;
}

LoadProbe Calibrator::probe_alone(std::size_t repeats) {
  if (rounds_ == 0) throw std::logic_error("Calibrator::probe_alone before any round");
  LoadProbe probe;
  for (std::size_t s = 0; s < benches_.size(); ++s) {
    std::array<double, 3> median{};
    for (std::size_t k = 0; k < 3; ++k) median[k] = spread_of(alone_[s][k]).median;
    for (std::size_t r = 0; r < repeats; ++r) {
      const auto t = benches_[s]->run();
      for (std::size_t k = 0; k < 3; ++k) {
        probe.measured_s += seconds_between(t[k].start, t[k].end);
        probe.expected_s += median[k];
        ++probe.actions;
      }
    }
    if (options_.measure_split && !split_[s][0].empty()) {
      const double i_median = spread_of(split_[s][0]).median;
      const double w_median = spread_of(split_[s][1]).median;
      for (std::size_t r = 0; r < repeats; ++r) {
        const auto t = benches_[s]->run_split();
        probe.measured_s +=
            seconds_between(t[0].start, t[0].end) + seconds_between(t[1].start, t[1].end);
        probe.expected_s += i_median + w_median;
        probe.actions += 2;
      }
    }
  }
  return probe;
}

std::array<double, 3> Calibrator::time_alone(std::size_t stage) {
  const auto t = benches_.at(stage)->run();
  return {seconds_between(t[0].start, t[0].end), seconds_between(t[1].start, t[1].end),
          seconds_between(t[2].start, t[2].end)};
}

std::vector<double> Calibrator::medians() const {
  std::vector<double> out;
  for (const auto& stage : alone_)
    for (const auto& samples : stage) out.push_back(spread_of(samples).median);
  for (const auto& stage : ratios_)
    for (const auto& samples : stage) out.push_back(spread_of(samples).median);
  return out;
}

Calibration Calibrator::result() {
  if (!link_) {
    // Two stages talk while the others compute (as many as the devices leave).
    std::vector<Bench*> others;
    for (std::size_t s = 2; s < at_once_; ++s) others.push_back(benches_[s].get());
    link_ = measure_link(config_.batch * config_.seq_len * config_.config.d_model, options_.repeats,
                         others);
  }
  Calibration c;
  c.repeats = options_.repeats;
  c.rounds = rounds_;
  c.stable = settled_;
  c.largest_move = largest_move_;
  for (std::size_t s = 0; s < benches_.size(); ++s) {
    StageMeasurement m = benches_[s]->sizes();
    m.forward_s = spread_of(alone_[s][0]);
    m.backward_s = spread_of(alone_[s][1]);
    m.update_s = spread_of(alone_[s][2]);
    if (!split_[s][0].empty()) {
      m.input_grad_s = spread_of(split_[s][0]);
      m.weight_grad_s = spread_of(split_[s][1]);
    }
    c.stages.push_back(m);
  }
  // Per stage, and pooled over stages (the host's own curve). A count no window completed an
  // action at (a tiny model on a loaded machine) ends the lists: the simulator extrapolates.
  c.slowdown_by_count = {1.0};
  c.slowdown_spread = {Spread{1.0, 1.0, 1.0, 0}};
  c.stage_slowdown_by_count.assign(ratios_.size(), {1.0});
  for (std::size_t k = 0; !ratios_.empty() && k < ratios_.front().size(); ++k) {
    std::vector<double> pooled;
    for (const auto& stage : ratios_) pooled.insert(pooled.end(), stage[k].begin(), stage[k].end());
    if (pooled.empty()) break;
    c.slowdown_spread.push_back(spread_of(pooled));
    c.slowdown_by_count.push_back(c.slowdown_spread.back().median);
    for (std::size_t s = 0; s < ratios_.size(); ++s)  // a stage without samples: the host's
      c.stage_slowdown_by_count[s].push_back(
          ratios_[s][k].empty() ? c.slowdown_by_count.back() : spread_of(ratios_[s][k]).median);
  }
  if (c.slowdown_by_count.size() == 1) c.stage_slowdown_by_count.clear();
  c.link = *link_;
  c.tokens_per_microbatch = static_cast<std::int64_t>(config_.batch * config_.seq_len);
  return c;
}

Calibration calibrate(const ExecConfig& config, const CalibrationOptions& options) {
  Calibrator calibrator(config, options);
  while (calibrator.rounds() < options.max_rounds && !calibrator.settled()) calibrator.round();
  return calibrator.result();
}

}  // namespace paci::exec
