// StageSet: the stage runtimes of one run, whatever the backend (StageRuntime on the CPU,
// GpuStageRuntime on the GPU) — one per stage this process runs, none for a stage another process
// runs — and what both executors derive from them the same way: the memory a device holds and what
// a run observed.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "exec/stage_plan.hpp"
#include "schedules/ir.hpp"

namespace paci::exec {

template <typename Runtime>
class StageSet {
 public:
  // A runtime for each plan from `make(plan)`, except for the stages placed on another device
  // than `local_device` when it is set (>= 0: one process per device).
  template <typename Make>
  void allocate(const Schedule& schedule, const std::vector<StagePlan>& plans,
                std::int32_t local_device, Make&& make) {
    for (const StagePlan& plan : plans) {
      if (local_device >= 0 &&
          schedule.placement[static_cast<std::size_t>(plan.stage)] != local_device) {
        stages_.push_back(nullptr);  // another process runs it
        continue;
      }
      stages_.push_back(make(plan));
    }
  }

  std::size_t size() const { return stages_.size(); }
  bool runs(std::int32_t s) const { return stages_[static_cast<std::size_t>(s)] != nullptr; }
  std::int32_t first_local() const {
    std::int32_t s = 0;
    while (!runs(s)) ++s;
    return s;
  }
  Runtime& operator[](std::int32_t s) { return *stages_[static_cast<std::size_t>(s)]; }
  const Runtime& operator[](std::int32_t s) const { return *stages_[static_cast<std::size_t>(s)]; }
  const std::vector<std::unique_ptr<Runtime>>& all() const { return stages_; }

  // Bytes the stages placed on `device` hold now.
  std::int64_t memory_bytes(const Schedule& schedule, std::int32_t device) const {
    std::int64_t bytes = 0;
    for (std::size_t s = 0; s < stages_.size(); ++s)
      if (stages_[s] && schedule.placement[s] == device) bytes += stages_[s]->memory_bytes();
    return bytes;
  }

  // What each stage recorded, for observed_analysis() (empty for another process's stages).
  std::vector<StageObservation> observations() const {
    std::vector<StageObservation> out;
    for (const auto& rt : stages_)
      out.push_back(rt ? StageObservation{&rt->versions(), rt->peak_activations(), rt->aux_losses(),
                                          rt->expert_tokens()}
                       : StageObservation{});
    return out;
  }

 private:
  std::vector<std::unique_ptr<Runtime>> stages_;
};

}  // namespace paci::exec
