// What one micro-batch's forward saves for its backward (ActivationSlot), preallocated once, and a
// fixed pool of slots keyed by micro-batch (ActivationStore) for a pipeline stage that keeps
// several forwards in flight. Nothing here allocates after construction.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "model/config.hpp"
#include "model/image.hpp"

namespace paci::model {

// Everything that fixes the size of a stage's buffers: the model, the stage's blocks, and the
// micro-batch shape (B sequences of T tokens).
struct StageShape {
  GptConfig config;
  StageRange range;
  std::size_t batch = 1;    // B
  std::size_t seq_len = 1;  // T, at most config.max_seq_len
  ExpertShard experts{};    // the part of each block's experts the stage holds (all by default)

  std::size_t rows() const { return batch * seq_len; }  // R
  // Throws ModelError on a bad config, range, or micro-batch shape.
  void validate() const;
  friend bool operator==(const StageShape&, const StageShape&) = default;
};

// Offsets, in floats inside the slot, of one block's saved activations.
struct BlockActivations {
  std::size_t ln1 = 0, ln1_mean = 0, ln1_rstd = 0;  // (R,C), (R), (R)
  std::size_t qkv = 0;                              // (R,3C)
  std::size_t att = 0;                              // (B,NH,T,T) softmax, zeros above diagonal
  std::size_t atty = 0;                             // (R,C) attention output before projection
  std::size_t residual2 = 0;                        // (R,C) x + attention branch
  std::size_t ln2 = 0, ln2_mean = 0, ln2_rstd = 0;  // (R,C), (R), (R)
  std::size_t fch = 0, fch_gelu = 0;                // (R,4C) before and after GELU (dense)
  std::size_t out = 0;                              // (R,C) block output
  // Mixture-of-experts blocks, in place of fch and fch_gelu (N = R·K expert rows at most):
  std::size_t probs = 0;               // (R,E) the router's softmax
  std::size_t gates = 0;               // (R,K) the chosen experts' renormalised probabilities
  std::size_t xe = 0;                  // (N,C) ln2's rows gathered expert by expert
  std::size_t ea = 0, eb = 0, eh = 0;  // (N,H) w1·x, w3·x, silu(a) ⊙ b
  std::size_t ey = 0;                  // (N,C) each row's expert output, before its gate
  std::size_t sa = 0, sb = 0, sh = 0;  // (R,H) the shared expert's a, b, h
  std::size_t aux = 0;                 // (1) the block's load-balancing loss, unscaled
  // Integers, in the slot's id buffer:
  std::size_t choice = 0;     // (R,K) each token's experts, most probable first
  std::size_t row = 0;        // (R,K) each assignment's expert row, −1 when over capacity
  std::size_t first_row = 0;  // (E+1) expert e owns rows [first_row[e], first_row[e+1])
  std::size_t chosen = 0;     // (E) assignments that chose e, before capacity
};

class ActivationSlot {
 public:
  explicit ActivationSlot(const StageShape& shape);

  const StageShape& shape() const { return shape_; }
  // Bytes this slot holds (floats and token/target ids): the per-micro-batch activation memory.
  std::size_t bytes() const;
  static std::size_t bytes_for(const StageShape& shape);

  // True between a forward that filled the slot and release (ActivationStore) or the next forward.
  bool filled() const { return filled_; }
  // Stage input as saved: (R,C) embeddings on the first stage, the received activations elsewhere.
  std::span<const float> input() const {
    return {data(input_), shape_.rows() * shape_.config.d_model};
  }
  // Stage output (R,C) of a non-last stage (the last block's output).
  std::span<const float> output() const;
  float loss_scale() const { return loss_scale_; }
  // The load-balancing losses of this forward's mixture-of-experts blocks, summed (unscaled by
  // loss_scale; 0 for a dense model).
  float aux_loss() const;
  // That of this stage's local_block-th block alone (0 for a dense block).
  float block_aux_loss(std::size_t local_block) const;
  // The local_block-th block's assignments to each of the E experts, before capacity (empty for
  // a dense block).
  std::span<const std::int32_t> expert_choices(std::size_t local_block) const;

 private:
  friend class Stage;
  friend class ActivationStore;
  float* data(std::size_t offset) { return floats_.data() + offset; }
  const float* data(std::size_t offset) const { return floats_.data() + offset; }
  std::int32_t* ids(std::size_t offset) { return ids_.data() + offset; }
  const std::int32_t* ids(std::size_t offset) const { return ids_.data() + offset; }
  // Every route in range (a slot read from a cut image is checked before a backward trusts it).
  bool routes_valid() const;
  // Lays the slot out for shape: offsets into `slot` when given; returns {floats, ids}.
  static std::pair<std::size_t, std::size_t> plan(const StageShape& shape, ActivationSlot* slot);

  StageShape shape_;
  std::vector<float> floats_;
  std::vector<std::int32_t> tokens_;   // (R) first stage
  std::vector<std::int32_t> targets_;  // (R) last stage
  std::vector<std::int32_t> ids_;      // mixture-of-experts routing (BlockActivations)
  std::size_t input_ = 0;              // (R,C)
  std::vector<BlockActivations> blocks_;
  std::size_t lnf_ = 0, lnf_mean_ = 0, lnf_rstd_ = 0;  // last stage: (R,C), (R), (R)
  std::size_t probs_ = 0, losses_ = 0;                 // last stage: (R,V), (R)
  float loss_scale_ = 1.0f;
  bool filled_ = false;
};

// A fixed number of slots, each holding one micro-batch's activations until its backward is done.
class ActivationStore {
 public:
  ActivationStore(const StageShape& shape, std::size_t capacity);

  // A free slot, now keyed by microbatch. Throws ModelError if every slot is taken or the
  // micro-batch already holds one (the schedule exceeded the capacity it was analysed for).
  ActivationSlot& acquire(std::int64_t microbatch);
  // The slot of microbatch; throws ModelError if it holds none.
  ActivationSlot& at(std::int64_t microbatch);
  bool contains(std::int64_t microbatch) const;
  // Frees the slot of microbatch (after its backward); throws ModelError if it holds none.
  void release(std::int64_t microbatch);

  std::size_t capacity() const { return slots_.size(); }
  std::size_t in_use() const { return in_use_; }
  std::size_t peak_in_use() const { return peak_in_use_; }
  std::size_t slot_bytes() const { return slots_.empty() ? 0 : slots_.front().bytes(); }

  // The store's whole state — every slot, free ones included, and the micro-batch holding each —
  // for a cut of a run (model/image.hpp). load_image throws InputError for keys that cannot be.
  void save_image(ImageWriter& out) const;
  void load_image(ImageReader& in);
  // The micro-batches holding a slot, ascending.
  std::vector<std::int64_t> held() const;

 private:
  static constexpr std::int64_t kFree = -1;
  std::size_t find(std::int64_t microbatch) const;  // capacity() when absent

  std::vector<ActivationSlot> slots_;
  std::vector<std::int64_t> keys_;  // micro-batch per slot, kFree when free
  std::size_t in_use_ = 0;
  std::size_t peak_in_use_ = 0;
};

}  // namespace paci::model
