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
  // Copies of the model the stages hold: 1, or 2 for DualPipe's two directions. Copy c holds
  // stages [c·S, (c+1)·S), S = stages / copies, stage c·S + j the same layers as stage j; the
  // micro-batches of a step split in halves, the first half on copy 0 and the second on copy 1
  // (each copy takes its own inputs and computes its own losses); before a step's updates every
  // stage's gradients are summed with its twin's, so both copies step to the same weights.
  std::int32_t copies = 1;
  std::vector<std::vector<Action>> devices;  // per device, in execution order

  // Stages per copy (S), and where a stage sits in its copy.
  std::int32_t stages_per_copy() const { return copies > 1 ? stages / copies : stages; }
  std::int32_t layer_of(std::int32_t stage) const { return stage % stages_per_copy(); }
  bool first_stage(std::int32_t stage) const { return layer_of(stage) == 0; }
  bool last_stage(std::int32_t stage) const { return layer_of(stage) == stages_per_copy() - 1; }
  // The copy a stage belongs to, and the one a (global) micro-batch runs on.
  std::int32_t copy_of_stage(std::int32_t stage) const { return stage / stages_per_copy(); }
  std::int32_t copy_of_microbatch(std::int64_t microbatch) const {
    return copies > 1
               ? static_cast<std::int32_t>((microbatch % microbatches) * copies / microbatches)
               : 0;
  }
  // The stage holding the same layers in the other copy (copies == 2), or -1.
  std::int32_t twin(std::int32_t stage) const {
    if (copies != 2) return -1;
    const std::int32_t S = stages_per_copy();
    return stage < S ? stage + S : stage - S;
  }

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
// used, copies 1 or 2 dividing the stages and the micro-batches of a step, twins on different
// devices); throws InputError naming the first problem. Actions are checked by validate().
void check_metadata(const Schedule& schedule);

}  // namespace paci
