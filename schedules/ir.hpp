// The schedule IR: P stages placed on devices, and per device an ordered list of actions.
// Every consumer (validator, analyser, simulator, executor) reads this one representation, and
// asks dependencies.hpp — never its own rules — what an action waits for.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "base/errors.hpp"

namespace paci {

// F forward, B full backward, I input-gradient half, W weight-gradient half, U optimizer step.
enum class ActionKind : std::uint8_t { F = 0, B = 1, I = 2, W = 3, U = 4 };
inline constexpr int kNumActionKinds = 5;

char kind_letter(ActionKind kind);

// An overlapped pair (DualPipe's F&B): a forward and a full backward of other micro-batches that a
// device runs as one unit, each hiding the other's communication. The pair is two consecutive
// actions of a device's list, the forward marked `first`, the backward `second`; it starts when
// both have their inputs, and its outputs leave when both are done (docs/design/schedules.md).
enum class Overlap : std::uint8_t { none = 0, first = 1, second = 2 };

struct Action {
  // 12 bytes: the mark sits beside the kind (schedules hold millions of actions).
  constexpr Action(ActionKind k = ActionKind::F, std::int32_t s = 0, std::int32_t m = -1,
                   Overlap o = Overlap::none)
      : kind(k), overlap(o), stage(s), microbatch(m) {}

  ActionKind kind;
  Overlap overlap;  // its part in an overlapped pair, if any
  std::int32_t stage;
  std::int32_t microbatch;  // global micro-batch index; -1 for U

  // The same action (kind, stage, micro-batch), whether or not it runs in an overlapped pair:
  // what the dependency rules and the index compare. Schedule's == compares the pairs too.
  friend bool operator==(const Action& a, const Action& b) {
    return a.kind == b.kind && a.stage == b.stage && a.microbatch == b.microbatch;
  }
};
static_assert(sizeof(Action) == 12);

// Text form of one action, PyTorch pipelining's grammar extended with U: 0F3, 2B3, 1I0, 1W0, 1U.
// The pair marking is not part of it: a schedule file writes a pair as one cell, parse_cell's.
std::string to_string(const Action& action);
// Parses one action; throws InputError naming the token on anything else (an overlapped pair
// included: parse_cell reads those).
Action parse_action(std::string_view token);
// Parses one cell of a schedule: an action, or PyTorch's overlapped pair
// "(<forward>;<backward>)OVERLAP_F_B", appended to `out` as two actions marked first and second.
// Throws InputError naming the token otherwise.
void parse_cell(std::string_view token, std::vector<Action>& out);

// Which weights a backward reads (SCHEDULES.md).
//   current       — the stage's current weights (PACI and every flushed schedule)
//   stash         — the version its forward read (PipeDream)
//   double_buffer — like stash, with at most two versions alive (PipeDream-2BW)
enum class WeightPolicy : std::uint8_t { current, stash, double_buffer };

std::string_view to_string(WeightPolicy policy);
WeightPolicy parse_weight_policy(std::string_view text);

struct Schedule {
  std::string kind =
      "custom";             // generator that made it (gpipe, 1f1b, pipedream, 2bw, paci) or custom
  std::int32_t stages = 0;  // P
  std::vector<std::int32_t> placement;  // stage -> device; size P
  std::int32_t microbatches = 0;        // M: micro-batches per optimizer step (accumulation)
  std::int32_t steps = 0;               // N: optimizer steps; N·M micro-batches in all
  WeightPolicy weight_policy = WeightPolicy::current;
  std::vector<std::vector<Action>> devices;  // per device, in execution order

  std::int64_t total_microbatches() const {
    return static_cast<std::int64_t>(microbatches) * steps;
  }
  std::int32_t num_devices() const { return static_cast<std::int32_t>(devices.size()); }
  std::size_t num_actions() const;
  // True when some device runs an overlapped pair.
  bool has_overlap() const;

  // Metadata, actions and their pair markings all equal.
  friend bool operator==(const Schedule& a, const Schedule& b);
};

// Checks the metadata alone (counts positive, placement in range and of size P, every device
// used); throws InputError naming the first problem. Actions are checked by validate().
void check_metadata(const Schedule& schedule);

}  // namespace paci
