// replay_inputs() and compare_replay(): from a measured timeline to the engine's per-action and
// per-message replay inputs, and back to a per-action comparison that explains differences.
#include "sim/replay.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <unordered_map>

#include "schedules/dependencies.hpp"
#include "schedules/index.hpp"
#include "traces/metrics.hpp"

namespace paci {

namespace {

constexpr double kNone = std::numeric_limits<double>::quiet_NaN();

// The cross-device input of device d's i-th action, if it has one.
std::optional<Action> remote_input(const Schedule& s, const DependencyRules& rules, std::int32_t d,
                                   std::size_t i) {
  const Action& a = s.devices[static_cast<std::size_t>(d)][i];
  DependencyRules::List deps;
  const int n = rules.depends_on(a, deps, {d, static_cast<std::int64_t>(i)});
  for (int j = 0; j < n; ++j) {
    const Action& p = deps[static_cast<std::size_t>(j)].action;
    if (s.placement[static_cast<std::size_t>(p.stage)] != d) return p;
  }
  return std::nullopt;
}

// Why an action started when it did: the later of the device's previous action and its message.
std::string ready_reason(double previous_free_s, double message_s, const std::optional<Action>& p,
                         const Action& previous) {
  if (p && !std::isnan(message_s) && message_s >= previous_free_s)
    return fmt::format("the message from {} at {:.6f} s", to_string(*p), message_s);
  return previous.stage < 0 ? "the start of the run"
                            : fmt::format("{} on its device, free at {:.6f} s", to_string(previous),
                                          previous_free_s);
}

}  // namespace

ReplayInputs replay_inputs(const Schedule& s, const MeasuredTimeline& measured,
                           std::string_view source) {
  const ActionIndex index(s);
  const DependencyRules rules(s);
  const auto n = static_cast<std::size_t>(index.size());
  // Two copies: a U's twin gradients name the same U every step; its producer says which one.
  std::unordered_map<std::int64_t, std::int64_t> update_of;  // producer vertex -> U vertex
  for (std::int32_t d = 0; s.copies > 1 && d < s.num_devices(); ++d)
    for (std::size_t i = 0; i < s.devices[static_cast<std::size_t>(d)].size(); ++i) {
      if (s.devices[static_cast<std::size_t>(d)][i].kind != ActionKind::U) continue;
      if (const auto p = remote_input(s, rules, d, i))
        update_of[index.vertex(*p)] = index.vertex(ActionPos{d, static_cast<std::int64_t>(i)});
    }
  // Message records by consumer vertex.
  std::vector<std::int64_t> record(n, -1);
  for (std::size_t k = 0; k < measured.messages.size(); ++k) {
    const MessageSlice& m = measured.messages[k];
    std::int64_t v = index.vertex(m.consumer);
    if (m.kind == DependencyKind::twin_gradients && m.consumer.kind == ActionKind::U) {
      const auto it = update_of.find(index.vertex(m.producer));
      v = it == update_of.end() ? -1 : it->second;
    }
    if (v < 0)
      throw InputError(fmt::format("{}: timeline.messages[{}]: {} is not in the schedule", source,
                                   k, to_string(m.consumer)));
    const ActionPos at = index.position(v);
    const std::optional<Action> p =
        at.device == m.dst_device
            ? remote_input(s, rules, at.device, static_cast<std::size_t>(at.index))
            : std::nullopt;
    if (!p || !(*p == m.producer))
      throw InputError(fmt::format(
          "{}: timeline.messages[{}]: the run sent {} -> {}, which the schedule's dependencies do "
          "not explain ({})",
          source, k, to_string(m.producer), to_string(m.consumer),
          p ? fmt::format("{} waits for {}", to_string(m.consumer), to_string(*p))
            : fmt::format("{} has no input from another device", to_string(m.consumer))));
    if (record[static_cast<std::size_t>(v)] >= 0)
      throw InputError(fmt::format("{}: timeline.messages[{}]: a second message for {}", source, k,
                                   to_string(m.consumer)));
    record[static_cast<std::size_t>(v)] = static_cast<std::int64_t>(k);
  }
  ReplayInputs in;
  in.message_delay_s.assign(n, kNone);
  in.actions.resize(s.devices.size());
  for (std::size_t d = 0; d < s.devices.size(); ++d) {
    const auto& list = s.devices[d];
    for (std::size_t i = 0; i < list.size(); ++i) {
      const Action& a = list[i];
      const ActionTime& t = measured.times[d][i];
      double ready = i > 0 ? measured.times[d][i - 1].device_free_s() : 0.0;
      if (const auto p = remote_input(s, rules, static_cast<std::int32_t>(d), i)) {
        const auto v = static_cast<std::size_t>(
            index.vertex(ActionPos{static_cast<std::int32_t>(d), static_cast<std::int64_t>(i)}));
        if (record[v] < 0)
          throw InputError(fmt::format("{}: the timeline has no message {} -> {}", source,
                                       to_string(*p), to_string(a)));
        const MessageSlice& m = measured.messages[static_cast<std::size_t>(record[v])];
        const ActionPos producer = index.find(*p);
        const double producer_end = measured
                                        .times[static_cast<std::size_t>(producer.device)]
                                              [static_cast<std::size_t>(producer.index)]
                                        .end_s;
        in.message_delay_s[v] = std::max(0.0, m.send_end_s - producer_end);
        ready = std::max(ready, producer_end + in.message_delay_s[v]);
      }
      in.actions[d].push_back(
          {t.end_s - t.start_s, std::max(0.0, t.start_s - ready), t.device_free_s() - t.end_s});
    }
  }
  return in;
}

ReplayComparison compare_replay(const Schedule& s, const MeasuredTimeline& measured,
                                const ReplayInputs& inputs, const ActionTimes& replayed,
                                double tolerance_s) {
  const ActionIndex index(s);
  const DependencyRules rules(s);
  ReplayComparison c;
  const TimingMetrics m = timing_metrics(s, measured.times), r = timing_metrics(s, replayed);
  c.measured_makespan_s = m.makespan_s;
  c.replayed_makespan_s = r.makespan_s;
  c.measured_bubble = m.bubble_ratio;
  c.replayed_bubble = r.bubble_ratio;
  // The message time of an action on each side: its producer's end there plus the delay.
  auto message_at = [&](const ActionTimes& times, const std::optional<Action>& p, std::size_t v) {
    if (!p) return kNone;
    const ActionPos where = index.find(*p);
    return times[static_cast<std::size_t>(where.device)][static_cast<std::size_t>(where.index)]
               .end_s +
           inputs.message_delay_s[v];
  };
  for (std::size_t d = 0; d < s.devices.size(); ++d)
    for (std::size_t i = 0; i < s.devices[d].size(); ++i) {
      const Action& a = s.devices[d][i];
      const double error = std::abs(replayed[d][i].start_s - measured.times[d][i].start_s);
      ++c.actions;
      if (error > c.max_start_error_s || c.actions == 1) {
        c.max_start_error_s = error;
        c.worst_action = a;
      }
      if (error <= tolerance_s) continue;
      ++c.off;
      const auto p = remote_input(s, rules, static_cast<std::int32_t>(d), i);
      const auto v = static_cast<std::size_t>(
          index.vertex(ActionPos{static_cast<std::int32_t>(d), static_cast<std::int64_t>(i)}));
      const Action previous = i > 0 ? s.devices[d][i - 1] : Action{ActionKind::F, -1, -1};
      auto reason = [&](const ActionTimes& times) {
        return ready_reason(i > 0 ? times[d][i - 1].device_free_s() : 0.0, message_at(times, p, v),
                            p, previous);
      };
      c.largest.push_back({a, static_cast<std::int32_t>(d), measured.times[d][i].start_s,
                           replayed[d][i].start_s,
                           fmt::format("measured: waited for {}; replayed: waited for {}",
                                       reason(measured.times), reason(replayed))});
    }
  std::sort(c.largest.begin(), c.largest.end(), [](const auto& x, const auto& y) {
    return std::abs(x.replayed_start_s - x.measured_start_s) >
           std::abs(y.replayed_start_s - y.measured_start_s);
  });
  if (c.largest.size() > 10) c.largest.resize(10);
  return c;
}

}  // namespace paci
