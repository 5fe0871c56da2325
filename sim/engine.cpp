// The discrete-event engine. Events are action completions (and, on shared hosts, starts), popped
// in time order from a binary heap; a completion frees its device, and sends each output that
// another device needs over that link (FIFO: a message starts when the link's previous send has
// left; with blocking_sends the sender is free only when its message has arrived). A device starts
// its next action as soon as the device is free and every dependency (from DependencyRules) has
// arrived; an overlapped pair (DualPipe's F&B) that hides communication starts when both its
// actions' inputs have, takes pair_duration_s() in all, and sends both outputs at its end. On a
// shared host every start and end re-rates the actions running there (slowdown for the number
// computing) and reschedules their ends; stale ends are skipped.
#include "sim/engine.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <queue>

#include "schedules/consumers.hpp"
#include "schedules/dependencies.hpp"
#include "schedules/index.hpp"
#include "sim/replay.hpp"

namespace paci {
namespace {

constexpr double kUnknown = std::numeric_limits<double>::quiet_NaN();

struct Event {
  double time_s;
  std::uint64_t sequence;  // ties resolve in push order: deterministic
  std::int32_t device;
  // An end is stale unless it matches the device's generation; kStart marks a start on a shared
  // host. (24 bytes: the queue holds millions.)
  std::uint32_t generation;
  static constexpr std::uint32_t kStart = std::numeric_limits<std::uint32_t>::max();
  bool operator>(const Event& o) const {
    return time_s != o.time_s ? time_s > o.time_s : sequence > o.sequence;
  }
};

class Engine {
 public:
  Engine(const Schedule& s, const CostModel& costs, const SimOptions& options)
      : s_(s), costs_(costs), options_(options), index_(s), rules_(s) {}

  SimResult run();

 private:
  std::int32_t device_of(std::int32_t stage) const {
    return s_.placement[static_cast<std::size_t>(stage)];
  }
  const StageCost& cost(std::int32_t stage) const {
    return costs_.stages[static_cast<std::size_t>(stage)];
  }
  void try_start(std::int32_t device);
  void complete(std::int32_t device, double now);
  // Shared hosts: work done by every action running on host h up to time t, at its current rate;
  // then new ends for all of them at the rate for the number now computing.
  void advance(std::size_t host, double t);
  void reschedule(std::size_t host, double t);
  void on_start(std::int32_t device, double t);
  bool on_end(std::int32_t device, double t, std::uint32_t generation);
  void send(const Action& producer, std::int32_t src, std::uint32_t consumer_vertex,
            DependencyKind kind, double now);
  // Whether the overlapped pair opening at device d's action `first` hides anything (and so runs
  // as one unit): not in a replay, whose measured actions each waited for their own inputs.
  bool hides(std::int32_t d, std::size_t first) const;
  // Sends the output of action `a` (vertex v, on device d) to every other device that needs it.
  void send_outputs(const Action& a, std::int32_t d, std::int64_t v, double now);
  void sample_memory(std::int32_t device, double now);
  std::int64_t device_memory(std::int32_t device) const;
  CriticalPath critical_path() const;

  const Schedule& s_;
  const CostModel& costs_;
  SimOptions options_;
  ActionIndex index_;
  DependencyRules rules_;
  SimResult result_;

  std::optional<ConsumerIndex> consumers_;
  std::vector<double> done_s_;      // per vertex: end time, NaN until done
  std::vector<double> arrival_s_;   // per vertex: arrival of its cross-device input, NaN until sent
  std::vector<std::int32_t> pred_;  // per vertex: vertex whose completion released it, or -1
  std::vector<std::uint8_t> pred_is_message_;
  std::vector<std::size_t> pc_;  // per device: next action index
  std::vector<std::uint8_t> busy_;
  std::vector<std::int64_t> held_;  // per device: an overlapped pair's first, its sends held, or -1
  std::vector<double> free_at_s_;
  std::vector<double> link_free_s_;  // per (src, dst) device pair
  const ReplayInputs* replay_ = nullptr;
  std::vector<std::int32_t> host_of_;                 // per device: index into costs_.hosts, or -1
  std::vector<std::size_t> host_position_;            // per device: its index in its host's devices
  std::vector<std::vector<std::int32_t>> computing_;  // per host: devices computing now
  std::vector<double> remaining_s_;  // per device: work left in its action, in alone-seconds
  std::vector<double> since_s_;      // per device: when remaining_s_ was last brought up to date
  std::vector<std::uint32_t> generation_;  // wraps before kStart; never equal to it
  std::vector<StageVersionTracker> trackers_;
  std::vector<std::int64_t> memory_now_;
  std::vector<std::int64_t> awaiting_w_;  // per stage: micro-batches between their I and their W
  std::vector<std::vector<std::int32_t>> stages_on_;  // per device: its stages
  std::priority_queue<Event, std::vector<Event>, std::greater<>> queue_;
  std::uint64_t sequence_ = 0;
};

std::int64_t Engine::device_memory(std::int32_t device) const {
  std::int64_t bytes = result_.device_static_bytes[static_cast<std::size_t>(device)];
  for (const std::int32_t st : stages_on_[static_cast<std::size_t>(device)]) {
    const auto& t = trackers_[static_cast<std::size_t>(st)];
    // Between I and W a micro-batch holds its activations less what its I freed, and its
    // output gradients.
    const std::int64_t awaiting = awaiting_w_[static_cast<std::size_t>(st)];
    bytes += t.in_flight() * cost(st).activation_bytes +
             (t.live_versions() - 1) * cost(st).weight_bytes +
             awaiting * (cost(st).weight_grad_stash_bytes - cost(st).input_grad_release_bytes);
  }
  return bytes;
}

void Engine::sample_memory(std::int32_t device, double now) {
  const std::int64_t bytes = device_memory(device);
  auto& current = memory_now_[static_cast<std::size_t>(device)];
  if (bytes == current) return;
  current = bytes;
  auto& peak = result_.device_peak_memory_bytes[static_cast<std::size_t>(device)];
  peak = std::max(peak, bytes);
  if (options_.record_timeline) result_.timeline.memory.push_back({device, now, bytes});
}

void Engine::try_start(std::int32_t d) {
  const auto du = static_cast<std::size_t>(d);
  const auto& list = s_.devices[du];
  if (busy_[du] || pc_[du] >= list.size()) return;
  const Action& a = list[pc_[du]];
  const auto v =
      static_cast<std::size_t>(index_.vertex(ActionPos{d, static_cast<std::int64_t>(pc_[du])}));
  double ready = free_at_s_[du];
  std::int32_t pred = pc_[du] > 0 ? static_cast<std::int32_t>(v - 1) : -1;
  bool via_message = false;
  DependencyRules::List deps;
  // An overlapped pair that hides something starts when both its actions have their inputs (its
  // second then starts where its first ends, every input long there); one that hides nothing is
  // two actions back to back, as the executors run it.
  const bool opens_pair = a.overlap == Overlap::first && hides(d, pc_[du]);
  for (std::size_t part = 0; part < (opens_pair ? 2u : 1u); ++part) {
    const Action& b = list[pc_[du] + part];
    const int k = rules_.depends_on(b, deps, {d, static_cast<std::int64_t>(pc_[du] + part)});
    for (int j = 0; j < k; ++j) {
      const Action& p = deps[static_cast<std::size_t>(j)].action;
      const auto pv = static_cast<std::size_t>(index_.vertex(p));
      const bool remote = device_of(p.stage) != d;
      const double t = remote ? arrival_s_[v + part] : done_s_[pv];
      if (std::isnan(t)) return;  // not arrived yet; its completion will call us again
      if (t >= ready) {
        ready = t;
        pred = static_cast<std::int32_t>(pv);
        via_message = remote;
      }
    }
  }
  busy_[du] = 1;
  pred_[v] = pred;
  pred_is_message_[v] = via_message;
  double start = ready, duration = cost(a.stage).duration_s(a.kind);
  if (a.overlap != Overlap::none) {  // the pair's time, shared in proportion to the two alone
    const std::size_t first = pc_[du] - (a.overlap == Overlap::second ? 1 : 0);
    if (first + 1 >= list.size()) throw std::logic_error("simulate: a pair without its second");
    const Action& f = list[first];
    const Action& b = list[first + 1];
    const double alone = cost(f.stage).forward_s + cost(b.stage).backward_s;
    // A pair that hides nothing (shorter than alone it is not) runs as its two actions, each at
    // its own speed: no SMs are given to communication it does not overlap.
    if (alone > 0.0 && hides(d, first))
      duration *= pair_duration_s(cost(f.stage), cost(b.stage)) / alone;
  }
  if (replay_ != nullptr) {
    const ReplayAction& r = replay_->actions[du][pc_[du]];
    start += r.gap_s;
    duration = r.duration_s;
  }
  result_.times[du][pc_[du]] = {start, start + duration, start + duration};
  auto& tracker = trackers_[static_cast<std::size_t>(a.stage)];
  if (a.kind == ActionKind::F) {
    auto& rec =
        result_.observed
            .versions[static_cast<std::size_t>(a.stage * s_.total_microbatches() + a.microbatch)];
    rec.v_f = tracker.on_forward();
    sample_memory(d, start);
  } else if (a.kind != ActionKind::U && a == rules_.backward_read(a.stage, a.microbatch)) {
    auto& rec =
        result_.observed
            .versions[static_cast<std::size_t>(a.stage * s_.total_microbatches() + a.microbatch)];
    rec.v_b = tracker.on_backward_read(rec.v_f);
  }
  if (host_of_[du] >= 0) {  // its end depends on who else computes meanwhile
    remaining_s_[du] = duration;
    queue_.push({start, sequence_++, d, Event::kStart});
  } else {
    queue_.push({start + duration, sequence_++, d, generation_[du]});
  }
}

void Engine::advance(std::size_t host, double t) {
  const auto& computing = computing_[host];
  for (std::int32_t d : computing) {
    const auto du = static_cast<std::size_t>(d);
    const double slowdown = costs_.hosts[host].slowdown(host_position_[du], computing.size());
    remaining_s_[du] = std::max(0.0, remaining_s_[du] - (t - since_s_[du]) / slowdown);
    since_s_[du] = t;
  }
}

void Engine::reschedule(std::size_t host, double t) {
  const auto& computing = computing_[host];
  for (std::int32_t d : computing) {
    const auto du = static_cast<std::size_t>(d);
    const double slowdown = costs_.hosts[host].slowdown(host_position_[du], computing.size());
    generation_[du] = (generation_[du] + 1) % Event::kStart;
    queue_.push({t + remaining_s_[du] * slowdown, sequence_++, d, generation_[du]});
  }
}

void Engine::on_start(std::int32_t d, double t) {
  const auto host = static_cast<std::size_t>(host_of_[static_cast<std::size_t>(d)]);
  advance(host, t);
  computing_[host].push_back(d);
  since_s_[static_cast<std::size_t>(d)] = t;
  reschedule(host, t);
}

bool Engine::on_end(std::int32_t d, double t, std::uint32_t generation) {
  const auto du = static_cast<std::size_t>(d);
  if (generation != generation_[du]) return false;  // rescheduled since
  if (host_of_[du] < 0) return true;
  const auto host = static_cast<std::size_t>(host_of_[du]);
  advance(host, t);
  auto& computing = computing_[host];
  computing.erase(std::find(computing.begin(), computing.end(), d));
  reschedule(host, t);
  result_.times[du][pc_[du]].end_s = t;  // complete() sets free_s
  return true;
}

void Engine::send(const Action& producer, std::int32_t src, std::uint32_t consumer_vertex,
                  DependencyKind kind, double now) {
  const ActionPos where = index_.position(consumer_vertex);
  const std::int32_t dst = where.device;
  const Action& consumer =
      s_.devices[static_cast<std::size_t>(dst)][static_cast<std::size_t>(where.index)];
  // The twin's whole gradient buffer before a two-copy schedule's update; a micro-batch's
  // activation or input gradient otherwise.
  const std::int64_t bytes =
      kind == DependencyKind::activation       ? cost(producer.stage).activation_message_bytes
      : kind == DependencyKind::twin_gradients ? cost(producer.stage).gradient_bytes
                                               : cost(producer.stage).gradient_message_bytes;
  const LinkCost& link = costs_.link(src, dst);
  auto& link_free = link_free_s_[static_cast<std::size_t>(src * s_.num_devices() + dst)];
  double start = std::max(now, link_free), wire = 0.0, latency = link.latency_s;
  if (replay_ != nullptr) {  // the measured delay holds any queueing on the link already
    start = now;
    latency = replay_->message_delay_s[consumer_vertex];
  } else if (!std::isinf(link.bandwidth_bytes_per_s)) {
    wire = static_cast<double>(bytes) / link.bandwidth_bytes_per_s;
  }
  link_free = std::max(link_free, start + wire);
  const double arrival = start + wire + latency;
  arrival_s_[consumer_vertex] = arrival;
  if (options_.record_timeline)
    result_.timeline.messages.push_back(
        {producer, consumer, kind, src, dst, bytes, start, start + wire, start + latency, arrival});
}

void Engine::complete(std::int32_t d, double now) {
  ++result_.events;
  const auto du = static_cast<std::size_t>(d);
  const std::size_t i = pc_[du]++;
  const Action& a = s_.devices[du][i];
  const auto v =
      static_cast<std::size_t>(index_.vertex(ActionPos{d, static_cast<std::int64_t>(i)}));
  done_s_[v] = now;
  busy_[du] = 0;
  free_at_s_[du] = now + (replay_ != nullptr ? replay_->actions[du][i].post_s : 0.0);
  result_.times[du][i].free_s = free_at_s_[du];
  auto& tracker = trackers_[static_cast<std::size_t>(a.stage)];
  std::int32_t version = tracker.version();
  if (a.kind == ActionKind::U) {
    tracker.on_update();
    version = tracker.version();
  } else {
    auto& rec =
        result_.observed
            .versions[static_cast<std::size_t>(a.stage * s_.total_microbatches() + a.microbatch)];
    if (a.kind == ActionKind::F) version = rec.v_f;
    if (a.kind == ActionKind::I) ++awaiting_w_[static_cast<std::size_t>(a.stage)];
    if (a.kind == ActionKind::W) --awaiting_w_[static_cast<std::size_t>(a.stage)];
    if (a == rules_.backward_read(a.stage, a.microbatch)) version = rec.v_b;
    if (a == rules_.backward_end(a.stage, a.microbatch)) {
      tracker.on_backward_end();
      rec.update = tracker.version();
    }
  }
  sample_memory(d, now);
  if (options_.record_timeline) {
    const ActionTime& t = result_.times[du][i];
    result_.timeline.compute.push_back({a, d, t.start_s, t.end_s, version});
  }
  // An overlapped pair's outputs leave when both are done (DualPipe's and PyTorch's runtimes send
  // after the pair); a pair that hides nothing is two actions back to back, as the CPU runs it.
  if (a.overlap == Overlap::first && hides(d, i)) {
    held_[du] = static_cast<std::int64_t>(v);
  } else {
    if (a.overlap == Overlap::second && held_[du] >= 0) {
      send_outputs(s_.devices[du][i - 1], d, held_[du], now);
      held_[du] = -1;
    }
    send_outputs(a, d, static_cast<std::int64_t>(v), now);
  }
  try_start(d);
}

bool Engine::hides(std::int32_t d, std::size_t first) const {
  if (replay_ != nullptr) return false;  // measured: each action waited for its own inputs
  const auto& list = s_.devices[static_cast<std::size_t>(d)];
  if (first + 1 >= list.size()) return false;  // not a pair (validate() refuses it)
  const StageCost& f = cost(list[first].stage);
  const StageCost& b = cost(list[first + 1].stage);
  return pair_duration_s(f, b) < f.forward_s + b.backward_s;
}

void Engine::send_outputs(const Action& a, std::int32_t d, std::int64_t v, double now) {
  for (const Consumer& consumer : consumers_->of(v)) {
    const std::int32_t dst = index_.position(consumer.vertex).device;
    if (dst == d) continue;  // same device: the consumer reads done_s_
    send(a, d, consumer.vertex, consumer.kind, now);
    if (costs_.blocking_sends && replay_ == nullptr) {  // the sender waits for its message
      const auto du = static_cast<std::size_t>(d);
      free_at_s_[du] = std::max(free_at_s_[du], arrival_s_[consumer.vertex]);
      result_.times[du][pc_[du] - 1].free_s = free_at_s_[du];
    }
    try_start(dst);
  }
}

CriticalPath Engine::critical_path() const {
  CriticalPath path;
  std::int64_t last = -1;
  double last_end = -1.0;
  for (std::size_t v = 0; v < done_s_.size(); ++v)
    if (done_s_[v] > last_end) {
      last_end = done_s_[v];
      last = static_cast<std::int64_t>(v);
    }
  path.length_s = std::max(0.0, last_end);
  for (std::int64_t v = last; v >= 0; v = pred_[static_cast<std::size_t>(v)]) {
    const ActionPos p = index_.position(v);
    const Action& a =
        s_.devices[static_cast<std::size_t>(p.device)][static_cast<std::size_t>(p.index)];
    const ActionTime& t =
        result_.times[static_cast<std::size_t>(p.device)][static_cast<std::size_t>(p.index)];
    path.actions.push_back(a);
    path.compute_s += t.end_s - t.start_s;
    const std::int32_t pred = pred_[static_cast<std::size_t>(v)];
    if (pred >= 0 && pred_is_message_[static_cast<std::size_t>(v)])
      path.communication_s += t.start_s - done_s_[static_cast<std::size_t>(pred)];
  }
  std::reverse(path.actions.begin(), path.actions.end());
  return path;
}

SimResult Engine::run() {
  check_cost_model(costs_, &s_);
  replay_ = options_.replay;
  if (replay_ != nullptr &&
      (replay_->actions.size() != s_.devices.size() ||
       replay_->message_delay_s.size() != static_cast<std::size_t>(index_.size())))
    throw std::invalid_argument("replay inputs do not match the schedule");
  for (std::size_t d = 0; replay_ != nullptr && d < s_.devices.size(); ++d)
    if (replay_->actions[d].size() != s_.devices[d].size())
      throw std::invalid_argument("replay inputs do not match the schedule's lists");
  const auto n = static_cast<std::size_t>(index_.size());
  const auto D = static_cast<std::size_t>(s_.num_devices());
  consumers_.emplace(s_, index_, rules_);
  done_s_.assign(n, kUnknown);
  arrival_s_.assign(n, kUnknown);
  pred_.assign(n, -1);
  pred_is_message_.assign(n, 0);
  pc_.assign(D, 0);
  busy_.assign(D, 0);
  held_.assign(D, -1);
  free_at_s_.assign(D, 0.0);
  link_free_s_.assign(D * D, 0.0);
  host_of_.assign(D, -1);
  host_position_.assign(D, 0);
  if (replay_ == nullptr)  // a replay's durations were measured with whatever sharing there was
    for (std::size_t h = 0; h < costs_.hosts.size(); ++h)
      for (std::size_t i = 0; i < costs_.hosts[h].devices.size(); ++i) {
        const auto d = static_cast<std::size_t>(costs_.hosts[h].devices[i]);
        host_of_[d] = static_cast<std::int32_t>(h);
        host_position_[d] = i;
      }
  computing_.assign(costs_.hosts.size(), {});
  remaining_s_.assign(D, 0.0);
  since_s_.assign(D, 0.0);
  generation_.assign(D, 0);
  result_.times.resize(D);
  for (std::size_t d = 0; d < D; ++d) result_.times[d].resize(s_.devices[d].size());
  result_.device_static_bytes.assign(D, 0);
  stages_on_.assign(D, {});
  for (std::int32_t st = 0; st < s_.stages; ++st) {
    stages_on_[static_cast<std::size_t>(device_of(st))].push_back(st);
    trackers_.emplace_back(st, device_of(st), s_.weight_policy);
    result_.device_static_bytes[static_cast<std::size_t>(device_of(st))] += cost(st).static_bytes();
  }
  result_.device_peak_memory_bytes = result_.device_static_bytes;
  memory_now_ = result_.device_static_bytes;
  awaiting_w_.assign(static_cast<std::size_t>(s_.stages), 0);
  const std::int64_t T = s_.total_microbatches();
  result_.observed.total_microbatches = T;
  result_.observed.versions.resize(static_cast<std::size_t>(s_.stages * T));
  for (std::int32_t st = 0; st < s_.stages; ++st)
    for (std::int64_t m = 0; m < T; ++m) {
      auto& rec = result_.observed.versions[static_cast<std::size_t>(st * T + m)];
      rec.stage = st;
      rec.microbatch = static_cast<std::int32_t>(m);
    }
  result_.timeline.source = "simulated";
  result_.timeline.num_devices = s_.num_devices();
  if (options_.record_timeline) {
    result_.timeline.compute.reserve(n);
    for (std::int32_t d = 0; d < s_.num_devices(); ++d)
      result_.timeline.memory.push_back(
          {d, 0.0, result_.device_static_bytes[static_cast<std::size_t>(d)]});
  }

  for (std::int32_t d = 0; d < s_.num_devices(); ++d) try_start(d);
  while (!queue_.empty()) {
    const Event e = queue_.top();
    queue_.pop();
    if (e.generation == Event::kStart)
      on_start(e.device, e.time_s);
    else if (on_end(e.device, e.time_s, e.generation))
      complete(e.device, e.time_s);
  }
  for (std::size_t d = 0; d < D; ++d)
    if (pc_[d] < s_.devices[d].size())
      throw std::runtime_error(fmt::format(
          "simulation deadlocked: device {} waits at {} (validate the schedule to see the cycle)",
          d, to_string(s_.devices[d][pc_[d]])));
  for (std::int32_t st = 0; st < s_.stages; ++st)
    result_.observed.stages.push_back(trackers_[static_cast<std::size_t>(st)].peaks());
  summarize_versions(result_.observed);
  result_.critical_path = critical_path();
  return std::move(result_);
}

}  // namespace

SimResult simulate(const Schedule& schedule, const CostModel& costs, const SimOptions& options) {
  Engine engine(schedule, costs, options);
  return engine.run();
}

}  // namespace paci

namespace paci {

RunSummary run_summary(const Schedule& schedule, const CostModel& costs, const SimResult& result) {
  RunSummary run;
  run.source = "simulated";
  run.timing = timing_metrics(schedule, result.times);
  run.observed = result.observed;
  run.device_peak_memory_bytes = result.device_peak_memory_bytes;
  run.tokens_per_microbatch = costs.tokens_per_microbatch;
  return run;
}

}  // namespace paci
