// Checkpoints during a run (paci train --save-every K): after every K-th optimizer step, the whole
// training state, written atomically so that the last complete one stays until the next is whole.
// Where every step's end is a cut (nothing in flight) the stages' states after that step; where it
// is not (PACI, PipeDream, 2BW), or the schedule is a file's, a consistent cut of the running
// pipeline (exec/cut.hpp, exec/train_cut.hpp). CPU executor, one process.
#pragma once

#include <cstddef>
#include <memory>

#include "exec/train_setup.hpp"
#include "model/checkpoint_state.hpp"

namespace paci::exec {

// The metadata of the run's state after `steps_done` optimizer steps: shape, data position, seed
// and order, LR schedule, AdamW, and the schedule's kind, micro-batches, batch and sequence length.
model::StateMetadata state_metadata(const TrainSetup& t, std::size_t steps_done);

// Installs --save-every's saves into t.exec (on_cut, or after_update); nothing when
// options.save_every is 0. The returned object (possibly null) must outlive the run; `t` too.
std::shared_ptr<void> install_periodic_saves(TrainSetup& t, const TrainOptions& options);

}  // namespace paci::exec
