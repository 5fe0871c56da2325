// GpuStageRuntime: one pipeline stage training on the GPU — what exec::StageRuntime is on the CPU
// (fp32 master weights, the gradient accumulation buffer, its own AdamW and LR schedule stepped at
// its U, an activation slot per in-flight micro-batch, the weight copies its policy keeps; the
// versions, the split backward's stashes and the snapshots in the same StageBooks), with
// cuda::Stage computing on the stage's own stream, and the same names and types for the pipeline
// core (exec/pipeline_core.hpp). Every call queues work on that stream and returns; nothing
// allocates after the constructor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "cuda/optimizer.hpp"
#include "cuda/stage.hpp"
#include "exec/stage_books.hpp"
#include "exec/stage_plan.hpp"
#include "model/checkpoint_state.hpp"
#include "model/gpt.hpp"
#include "schedules/ir.hpp"

namespace paci::exec::gpu {

struct GpuStageConfig : StagePlan {
  cuda::Precision precision = cuda::Precision::fp32;
};

class GpuStageRuntime : public StageBooks {
 public:
  using View = cuda::TensorView;
  using MutableView = cuda::MutableTensorView;
  using Input = cuda::StageInput;
  using Loss = double;  // pinned host memory the stream writes

  explicit GpuStageRuntime(const GpuStageConfig& config);

  const cuda::Stage& compute() const { return stage_; }
  cuda::Stage& compute() { return stage_; }
  const model::ParamLayout& layout() const { return stage_.layout(); }
  cudaStream_t stream() const { return stage_.stream(); }
  // The weights the stage computes with now (device, read-only; bf16 in bf16 precision).
  View weights() const;
  // A host copy of the fp32 master weights; the master weights from the host (the bf16 compute
  // copy follows). These wait.
  std::vector<float> params() const;
  void set_params(std::span<const float> host);
  // Weights, AdamW moments and step count into / from a checkpoint's stage section of this
  // stage's layout, as StageRuntime does (buffers already sized); these wait.
  void copy_state_to(model::StageState& into) const;
  void copy_state_from(const model::StageState& from);

  // F(s, mb) on the stage's stream. Last stage: the unscaled mean loss lands in *loss (pinned)
  // when the stream gets there; elsewhere the output is output(mb).
  void forward(std::int32_t mb, const Input& input, std::span<const std::int32_t> targets,
               Loss* loss);
  View output(std::int32_t mb) const;
  // B(s, mb) with the weights its policy says; d_output empty on the last stage, d_input empty on
  // the first.
  void backward(std::int32_t mb, View d_output, MutableView d_input);
  // The same backward split in two (zero-bubble schedules; the plan's split_backward): I(s, mb)
  // computes d_input and keeps what W needs; W(s, mb) adds the weight gradients and frees the
  // micro-batch's slot. Split backwards read the current weights.
  void input_grad(std::int32_t mb, View d_output, MutableView d_input);
  void weight_grad(std::int32_t mb);
  // U(s): (clip,) AdamW with this stage's LR, zero gradients, new version.
  void update();

  std::size_t peak_activations() const { return peak_slots_; }
  std::int64_t static_bytes() const;  // master, gradients, moments (+ the bf16 compute copy)
  std::int64_t memory_bytes() const;  // static + activations in use + kept weight copies
  std::int64_t activation_slot_bytes() const;
  // The weights after the i-th snapshot step (device, read-only).
  View snapshot(std::size_t i) const { return snapshots_.at(i).view(); }

 private:
  cuda::ActivationSlot& acquire(std::int32_t mb);
  std::size_t slot_of(std::int32_t mb) const;
  void release(std::size_t slot);
  View weights_at(const Read& read) const;

  cuda::Precision precision_;
  cuda::Stage stage_;
  cuda::DeviceBuffer<float> master_, grads_;
  cuda::DeviceTensor compute_;  // bf16 weights the stage computes with (bf16 precision only)
  cuda::AdamW optimizer_;
  cuda::SquaredNorm norm_;
  std::vector<cuda::ActivationSlot> slots_;
  std::vector<std::int32_t> slot_mb_;  // the micro-batch each slot holds, −1 when free
  std::size_t slots_in_use_ = 0, peak_slots_ = 0;
  std::vector<cuda::DeviceTensor> stash_;      // one copy per VersionBook stash slot
  std::vector<cuda::DeviceTensor> snapshots_;  // preallocated
  // Split backward: one stash per activation slot (which micro-batch holds each: StageBooks).
  std::vector<cuda::WeightGradStash> w_stashes_;
};

}  // namespace paci::exec::gpu
