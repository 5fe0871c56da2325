// StageRuntime: everything one pipeline stage owns while it trains — its blocks' parameters, the
// gradient accumulation buffer, its own AdamW and LR schedule (stepped at its U), an activation
// store keyed by micro-batch, a weight-version store, and the versions each F and B really read.
//   current       the backward reads the current weights with the activations its forward saved
//                 (PACI: after an update that is a newer version than the forward read)
//   stash         an update first copies the current weights if an in-flight forward read them;
//                 the backward then reads the version its forward read (PipeDream)
//   double_buffer the same with at most two versions alive (PipeDream-2BW)
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/gpt.hpp"
#include "schedules/ir.hpp"

namespace paci::exec {

struct StageRuntimeConfig {
  model::StageShape shape;
  std::int32_t stage = 0;
  WeightPolicy policy = WeightPolicy::current;
  std::size_t activation_capacity = 1;  // slots: the analysed peak activations of the stage
  std::size_t stash_capacity = 0;       // extra weight copies: analysed peak versions - 1
  std::size_t threads = 1;
  model::AdamWConfig adamw;
  model::LrSchedule lr;
  double clip = 0.0;        // > 0: clip this stage's gradient norm to it before each update
  float loss_scale = 1.0f;  // 1/M: the last stage's loss is averaged over a step's micro-batches
  std::int64_t total_microbatches = 0;
  std::int32_t updates = 0;         // U actions of the stage in the schedule (N)
  std::size_t lr_step_offset = 0;   // optimizer steps done before this run (resume)
  std::int32_t snapshot_every = 0;  // > 0: keep a copy of the weights after every k-th update
};

class StageRuntime {
 public:
  explicit StageRuntime(const StageRuntimeConfig& config);

  std::int32_t stage() const { return config_.stage; }
  const model::Stage& model_stage() const { return stage_; }
  model::Stage& model_stage() { return stage_; }
  const model::ParamLayout& layout() const { return stage_.layout(); }
  std::span<float> params() { return params_; }
  std::span<const float> params() const { return params_; }
  std::span<const float> grads() const { return grads_; }
  model::AdamW& optimizer() { return optimizer_; }
  const model::AdamW& optimizer() const { return optimizer_; }
  std::int32_t version() const { return version_; }

  // F(s, mb). `input` is tokens on the first stage, received activations elsewhere. On the last
  // stage `targets` are used and the unscaled mean loss is returned; elsewhere returns 0 and the
  // output is in output(mb).
  float forward(std::int32_t mb, const model::StageInput& input,
                std::span<const std::int32_t> targets);
  std::span<const float> output(std::int32_t mb);
  // B(s, mb): reads the weights its policy says, accumulates gradients, frees the activations.
  // d_output is empty on the last stage, d_input empty on the first.
  void backward(std::int32_t mb, std::span<const float> d_output, std::span<float> d_input);
  // U(s): (clip,) AdamW step with this stage's LR schedule, zero gradients, new version.
  void update();

  // What the run measured.
  std::int32_t v_f(std::int64_t mb) const { return v_f_[static_cast<std::size_t>(mb)]; }
  std::int32_t v_b(std::int64_t mb) const { return v_b_[static_cast<std::size_t>(mb)]; }
  std::int32_t update_of(std::int64_t mb) const { return update_[static_cast<std::size_t>(mb)]; }
  std::size_t peak_activations() const { return activations_.peak_in_use(); }
  std::size_t peak_weight_versions() const { return 1 + peak_stash_in_use_; }
  std::int64_t static_bytes() const;  // params, gradients, AdamW moments
  std::int64_t memory_bytes() const;  // static + activations in use + stashed weight copies
  // Weights after the i-th global step that is a multiple of snapshot_every (steps counted from
  // the start of training, resumed runs included), for i < snapshots(): validation after the run.
  std::size_t snapshots() const { return snapshots_taken_; }
  std::span<const float> snapshot(std::size_t i) const { return snapshots_.at(i); }
  std::int64_t activation_slot_bytes() const {
    return static_cast<std::int64_t>(activations_.slot_bytes());
  }

 private:
  struct StashedVersion {
    std::int32_t version = -1;  // -1: free
    std::vector<float> params;
  };
  std::span<const float> weights_for_backward(std::int32_t mb, std::int32_t& version_read);

  StageRuntimeConfig config_;
  model::Stage stage_;
  std::vector<float> params_, grads_;
  model::AdamW optimizer_;
  model::ActivationStore activations_;
  std::vector<StashedVersion> stash_;
  std::vector<std::int64_t> readers_;  // per version: in-flight micro-batches whose F read it
  std::size_t stash_in_use_ = 0, peak_stash_in_use_ = 0;
  std::int32_t version_ = 0;
  std::vector<std::int32_t> v_f_, v_b_, update_;
  std::vector<std::vector<float>> snapshots_;  // preallocated: nothing allocates during the run
  std::size_t snapshots_taken_ = 0;
};

}  // namespace paci::exec
