// A cut of a run (exec/cut.hpp) as a paci.state/2 checkpoint: the stages' weights and AdamW
// state as the usual sections, each stage's runtime image, the messages crossing the cut and the
// losses so far as blobs, and extra.cut saying where the cut lies (docs/checkpoints.md). Written
// by paci train --save-every for schedules whose steps are not cuts and for every schedule file;
// read back by --resume.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "exec/cut.hpp"
#include "model/checkpoint_state.hpp"
#include "schedules/ir.hpp"

namespace paci::exec {

// Where a cut's schedule starts and what sizes its stages' runtimes, besides the schedule.
struct CutContext {
  std::size_t base_step = 0;  // the global step the cut's schedule starts at (the run's first);
                              // its data position is the metadata's next_microbatch
  std::int32_t steps = 0;     // that schedule's optimizer steps
  std::int32_t snapshot_every = 0;  // --val-every: the validation snapshots the images hold
  // A run of a schedule file: the schedule, carried in the checkpoint (blob "schedule", its
  // canonical JSON) so that --resume runs the same one, and the file's name; null for --kind
  // runs, whose schedule --resume regenerates from the flags.
  const Schedule* schedule = nullptr;
  std::string schedule_file;
};

// metadata: the run's, its `step` the save point.
void save_cut(const std::string& path, model::StateMetadata metadata, const CutContext& context,
              const exec::CutImage& image);

// Whether the file holds a cut, and the step its schedule starts at (InputError naming the file
// for a malformed extra.cut).
bool holds_cut(const model::TrainingState& state);
std::size_t cut_base_step(const model::TrainingState& state);
// The schedule a cut of a schedule file's run carries (validated), or nothing for a cut of a
// --kind run; InputError naming the file for a malformed or invalid copy.
std::optional<Schedule> cut_schedule(const model::TrainingState& state);
// The name of the file that schedule came from, as the saving run gave it ("" if none).
std::string cut_schedule_file(const model::TrainingState& state);

// The cut of `schedule` under the stage ranges `ranges` and --val-every `snapshot_every` the
// file holds (its buffers moved out of
// `state`), ready for ExecConfig::resume_from; InputError naming the file when it was taken in
// another schedule or partition, or a blob is missing. Blob sizes the executor checks.
std::shared_ptr<const exec::CutImage> load_cut(model::TrainingState&& state,
                                               const Schedule& schedule,
                                               const std::vector<model::StageRange>& ranges,
                                               std::int32_t snapshot_every);

}  // namespace paci::exec
