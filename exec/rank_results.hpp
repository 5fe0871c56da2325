// One process per device: what one rank measured, as bytes for the rank that writes the outputs,
// and the merge of every rank's part into the ExecResult a single-process run would have given.
//
// A rank's part holds its device's action times, compute slices, memory samples and peak, the
// messages it received, the observed versions and peaks of its stages, and (the device holding
// the last stage) the micro-batch and step losses. Timestamps are each rank's own clock, started at
// a common barrier (docs/cuda.md says how close that is).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "exec/stage_plan.hpp"
#include "model/checkpoint_state.hpp"
#include "schedules/ir.hpp"

namespace paci::exec {

// The device running the last stage (two copies: the first copy's): its part carries the
// losses and the validation loss, so its process writes the outputs of a multi-process run.
std::int32_t last_stage_device(const Schedule& schedule);
// The last stage of a copy that `device` runs, or -1; whether it runs one (its part carries
// that copy's losses: two copies, two such devices).
std::int32_t last_stage_of(const Schedule& schedule, std::int32_t device);
bool holds_a_last_stage(const Schedule& schedule, std::int32_t device);

// Device `device`'s part of `result` (a rank's own result, or a whole run's: the other devices'
// data is left out either way), as MessagePack bytes.
std::string encode_rank_result(const Schedule& schedule, const ExecResult& result,
                               std::int32_t device);

// The whole run from one part per device (any order). Throws std::runtime_error on a part that
// does not decode, a device given twice or missing, or data that does not fit the schedule.
ExecResult merge_rank_results(const Schedule& schedule, std::span<const std::string> parts);

// The training state (weights, AdamW moments and steps) of a rank's stages as bytes, for the
// rank that writes the checkpoint: a tag, then per stage its layer range, steps, parameter count
// and the three float arrays, native byte order (the ranks of one launch share an architecture).
std::string encode_stage_states(std::span<const model::StageStateView> stages);
// Appends the stages in `bytes` to `out`. Throws std::runtime_error on bytes that are not an
// encoding or are cut short.
void decode_stage_states(std::string_view bytes, std::vector<model::StageState>& out);

}  // namespace paci::exec
