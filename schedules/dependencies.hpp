// The one place that says what an action waits for. The validator, the analyser, the simulator
// and the executor all ask DependencyRules; none of them encodes a dependency of its own.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include <unordered_map>

#include "schedules/index.hpp"
#include "schedules/ir.hpp"

namespace paci {

// What flows along a dependency edge.
enum class DependencyKind : std::uint8_t {
  local,       // same stage: F(s,m) -> B(s,m), I(s,m) -> W(s,m); activations stay put
  activation,  // F(s-1,m) -> F(s,m): the output activation of stage s-1 is sent to stage s
  gradient,    // B/I(s+1,m) -> B/I(s,m): the input gradient of stage s+1 is sent to stage s
  // last backward of the twin stage in a step -> U(s): the twin's accumulated weight gradients
  // are sent to stage s, which sums them with its own (two copies, DualPipe)
  twin_gradients,
};

// The kind's name in reports, traces and messages: local, activation, gradient, twin gradients.
std::string_view to_string(DependencyKind kind);

struct Dependency {
  Action action;  // the action that must complete first
  DependencyKind kind = DependencyKind::local;
};

// Data dependencies (device order is the other constraint: a device runs its list in order).
//   F(s,m)  needs F(s-1,m)                         unless s is its copy's first stage (activation)
//   B(s,m)  needs F(s,m)                                              (local)
//           and the input gradient of stage s+1:  B(s+1,m) or I(s+1,m) unless s is its copy's
//           last stage                                                (gradient)
//   I(s,m)  same as B(s,m)
//   W(s,m)  needs I(s,m)                                              (local)
//   U(s)    one copy: no data dependency; its place in the device's list is what matters.
//           Two copies: the k-th U(s) needs the twin stage's gradients of step k, that is the
//           twin's backward end (B or W) of a step-k micro-batch that its device runs last
//           (twin_gradients)
// Whether stage s+1 produces micro-batch m's input gradient with B or with I is read from the
// schedule: a (stage, micro-batch) with an I action splits its backward. Most schedules split all
// of a stage's backwards or none; DualPipe's mix full and split backwards on one stage.
class DependencyRules {
 public:
  static constexpr int kMaxDependencies = 2;
  using List = std::array<Dependency, kMaxDependencies>;

  explicit DependencyRules(const Schedule& schedule);

  // Fills `out` and returns how many dependencies `action` has (0..kMaxDependencies). `where` is
  // the action's place in the schedule: a U of a two-copy schedule needs it (which step it ends),
  // and throws std::logic_error without it.
  int depends_on(const Action& action, List& out, ActionPos where = {}) const;

  // True when `stage` splits micro-batch `microbatch`'s backward into I and W.
  bool split_backward(std::int32_t stage, std::int32_t microbatch) const;
  // The action that produces the input gradient of `stage` for micro-batch `microbatch`.
  Action gradient_producer(std::int32_t stage, std::int32_t microbatch) const {
    return {split_backward(stage, microbatch) ? ActionKind::I : ActionKind::B, stage, microbatch};
  }
  // The action after which a micro-batch's activations at a stage may be freed, and whose
  // completion counts toward the stage's gradient accumulation: B, or W when split.
  Action backward_end(std::int32_t stage, std::int32_t microbatch) const {
    return {split_backward(stage, microbatch) ? ActionKind::W : ActionKind::B, stage, microbatch};
  }
  // The action whose weights a backward reads (B, or I when split).
  Action backward_read(std::int32_t stage, std::int32_t microbatch) const {
    return {split_backward(stage, microbatch) ? ActionKind::I : ActionKind::B, stage, microbatch};
  }

  std::int32_t stages() const { return stages_; }

 private:
  void find_twin_ends(const Schedule& schedule);
  enum Split : std::uint8_t { kNone = 0, kAll = 1, kSome = 2 };
  std::int32_t stages_;
  std::int32_t per_copy_;  // stages per copy
  bool copies_ = false;    // two copies
  // Two copies: the twin's last backward end before each U, keyed by the U's place.
  std::unordered_map<std::int64_t, Action> twin_end_;
  static std::int64_t key(ActionPos p) {
    return (static_cast<std::int64_t>(p.device) << 40) + p.index;
  }
  std::vector<std::uint8_t> split_;              // per stage: a Split
  std::vector<std::vector<std::int32_t>> some_;  // kSome stages: their I micro-batches, sorted
};

}  // namespace paci
