// What one micro-batch's forward on the GPU saves for its backward: model/activations.hpp's slot,
// on the device. Tensors in the compute precision sit in one buffer, float statistics
// (LayerNorm mean and rstd, probabilities, losses) in another, ids in a third. Allocated once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "cuda/memory.hpp"
#include "cuda/precision.hpp"
#include "model/activations.hpp"

namespace paci::cuda {

class ActivationSlot {
 public:
  ActivationSlot(const model::StageShape& shape, Precision precision);

  const model::StageShape& shape() const { return shape_; }
  Precision precision() const { return precision_; }
  // Device bytes this slot holds: the per-micro-batch activation memory of a GPU stage.
  std::size_t bytes() const;
  static std::size_t bytes_for(const model::StageShape& shape, Precision precision);

  bool filled() const { return filled_; }
  // Stage input as saved: (R,C) embeddings on the first stage, the received activations elsewhere.
  TensorView input() const;
  // Stage output (R,C) of a non-last stage (the last block's output).
  TensorView output() const;
  float loss_scale() const { return loss_scale_; }
  void release() { filled_ = false; }

 private:
  friend class Stage;
  struct Counts {
    std::size_t values = 0, stats = 0, ids = 0;
  };
  // Element counts of the three buffers; with a slot, records its offsets on the way.
  static Counts plan(const model::StageShape& shape, ActivationSlot* slot);
  template <typename floatX>
  floatX* value(std::size_t offset) {
    return values_.as<floatX>() + offset;
  }
  template <typename floatX>
  const floatX* value(std::size_t offset) const {
    return values_.as<floatX>() + offset;
  }
  float* stat(std::size_t offset) { return stats_.data() + offset; }
  const float* stat(std::size_t offset) const { return stats_.data() + offset; }

  model::StageShape shape_;
  Precision precision_;
  // model::BlockActivations offsets: ln1, qkv, att, atty, residual2, ln2, fch, fch_gelu and out
  // index values_; ln1_mean, ln1_rstd, ln2_mean and ln2_rstd index stats_.
  std::vector<model::BlockActivations> blocks_;
  std::size_t input_ = 0, lnf_ = 0;               // values_: (R,C) each
  std::size_t lnf_mean_ = 0, lnf_rstd_ = 0;       // stats_: (R) each
  std::size_t probs_ = 0, losses_ = 0;            // stats_: (R,V), (R)
  std::size_t tokens_ = 0, group_rows_ = 0;       // ids_: (R) each, first stage
  std::size_t group_starts_ = 0, group_ids_ = 0;  // ids_: (R+1), (R), first stage
  std::size_t targets_ = 0;                       // ids_: (R), last stage
  std::size_t group_count_ = 0;
  DeviceTensor values_;
  DeviceBuffer<float> stats_;
  DeviceBuffer<std::int32_t> ids_;
  float loss_scale_ = 1.0f;
  bool filled_ = false;
  // Host staging of this slot's ids (tokens, grouped rows, group starts, group tokens, targets:
  // 5R + 1), reused only after ids_copied_ says the previous copy left it. One per slot, so a
  // forward waits for the copy of this slot's previous micro-batch, not for the stream's work.
  PinnedBuffer<std::int32_t> ids_host_;
  Event ids_copied_;
};

}  // namespace paci::cuda
