// Checkpoints during a run (paci train --save-every): consistent cuts of a running pipeline, or
// every stage's state after the steps that are cuts.
#include "exec/train_save.hpp"

#include <fmt/format.h>

#include <mutex>
#include <stdexcept>
#include <utility>

#include "exec/train_cut.hpp"
#include "model/layout.hpp"

namespace paci::exec {

model::StateMetadata state_metadata(const TrainSetup& t, std::size_t steps_done) {
  model::StateMetadata m;
  m.config = t.exec.config;
  m.step = steps_done;
  m.next_microbatch = t.first_microbatch + (steps_done - t.first_step) *
                                               static_cast<std::size_t>(t.schedule.microbatches);
  m.data_seed = t.data_seed;
  m.data_order = std::string(model::to_string(t.data_order));
  m.lr_schedule = t.exec.lr;
  m.lr_schedule.total_steps = t.total_steps;
  m.adamw = t.exec.adamw;
  m.extra["kind"] = t.schedule.kind;
  m.extra["microbatches"] = t.schedule.microbatches;
  m.extra["batch"] = t.exec.batch;
  m.extra["seq_len"] = t.exec.seq_len;
  return m;
}

namespace {

// --save-every K: every stage copies its weights and AdamW state right after its update of each
// K-th step, and the stage completing a step's set writes the checkpoint (save_state: a temporary
// file, fsync, rename, so the last complete one stays until the new one is whole). The schedule's
// steps are cuts (make_train_setup checked): when a stage updates for step k nothing of a later
// step has run on it and nothing of step k is left, so the copies form the state of the run after
// step k. One set of buffers (the weights and both moments once more), allocated here, not
// during the run, is enough: a stage's update of step k + 1 needs a forward of step k + 1 on every
// stage, which each runs after its own update of step k (a cut), and so, on the writer's thread,
// after the write of step k has returned.
class PeriodicSaver {
 public:
  PeriodicSaver(const TrainSetup& t, std::string path, std::size_t every)
      : t_(t), path_(std::move(path)), every_(every) {
    // Two copies hold the same state: the first copy's stages are the checkpoint.
    const auto stages = static_cast<std::size_t>(t.schedule.stages_per_copy());
    for (std::size_t s = 0; s < stages; ++s) {
      const model::StageRange& range = t.exec.ranges[s];
      const std::size_t n = model::ParamLayout(t.exec.config, range).size();
      slot_.stages.push_back(
          {range, 0, std::vector<float>(n), std::vector<float>(n), std::vector<float>(n)});
    }
  }

  void after_update(const StageRuntime& rt, std::size_t steps_done) {
    // The last step is written by --save at the end of the run.
    if (steps_done % every_ != 0 || steps_done == t_.last_step) return;
    if (rt.stage() >= t_.schedule.stages_per_copy()) return;  // the second copy's twin
    Slot& slot = slot_;
    rt.copy_state_to(slot.stages.at(static_cast<std::size_t>(rt.stage())));
    {
      std::lock_guard lock(mutex_);
      if (slot.filled > 0 && slot.step != steps_done)
        throw std::logic_error(
            fmt::format("--save-every: stage {} saves step {} while step {} "
                        "is incomplete",
                        rt.stage(), steps_done, slot.step));
      slot.step = steps_done;
      if (++slot.filled < slot.stages.size()) return;
      slot.filled = 0;
    }
    std::vector<model::StageStateView> views;
    for (const model::StageState& s : slot.stages) views.push_back(s.view());
    model::save_state(path_, state_metadata(t_, steps_done), views);
  }

 private:
  struct Slot {
    std::vector<model::StageState> stages;  // one per stage, in stage order
    std::size_t step = 0;
    std::size_t filled = 0;  // stages that have copied their state for `step`
  };
  const TrainSetup& t_;
  std::string path_;
  std::size_t every_;
  Slot slot_;
  std::mutex mutex_;
};

}  // namespace

std::shared_ptr<void> install_periodic_saves(TrainSetup& t, const TrainOptions& o) {
  if (o.save_every <= 0) return nullptr;
  const bool from_file = !t.schedule_file.empty();
  if (step_cut_violation(t.schedule) || from_file) {
    // Micro-batches are in flight at every step's end, or the schedule is a file's, which
    // --resume cannot regenerate: save consistent cuts (exec/cut.hpp), a file's carrying it.
    t.exec.cut_every = o.save_every;
    t.exec.on_cut = [&t, from_file, path = o.save_path](const CutImage& image,
                                                        std::size_t steps_done) {
      model::StateMetadata m = state_metadata(t, steps_done);
      m.next_microbatch = t.first_microbatch;  // the data of the cut's schedule's micro-batch 0
      save_cut(path, std::move(m),
               {t.first_step, t.schedule.steps, t.exec.snapshot_every,
                from_file ? &t.schedule : nullptr, t.schedule_file},
               image);
    };
    return nullptr;
  }
  auto saver =
      std::make_shared<PeriodicSaver>(t, o.save_path, static_cast<std::size_t>(o.save_every));
  t.exec.after_update = [saver = saver.get()](const StageRuntime& rt, std::size_t steps_done) {
    saver->after_update(rt, steps_done);
  };
  return saver;
}

}  // namespace paci::exec
