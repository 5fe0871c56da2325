// ParamLayout: where each parameter tensor of a stage lives inside that stage's ONE contiguous
// float buffer (gradients and AdamW moments use the same layout). Tensors are grouped per block in
// GPT-2's state-dict order, so a stage's buffer is exactly a slice of the whole model's buffer.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "model/config.hpp"

namespace paci::model {

// How init_gpt2() fills a tensor (model/init.hpp).
enum class InitKind {
  normal,               // N(0, 0.02): embeddings, qkv and fc weights, the LM head
  residual_projection,  // N(0, 0.02/√(2·L)): attention and MLP output projections
  ones,                 // LayerNorm gains
  zeros,                // biases, LayerNorm biases
};

struct ParamTensor {
  std::string name;  // GPT-2 names: wte, h.3.attn.c_attn.weight, ln_f.bias, lm_head.weight
  std::vector<std::size_t> shape;  // linear weights are (OC, C) as in torch.nn.Linear
  std::size_t offset = 0;          // in floats, from the start of the stage buffer
  std::size_t numel = 0;
  InitKind init = InitKind::zeros;

  // AdamW's decoupled weight decay applies to tensors of two or more dimensions only.
  bool decays() const { return shape.size() >= 2; }
};

// Offsets (in floats, within the stage buffer) of one block's tensors.
struct BlockOffsets {
  std::size_t ln1_w = 0, ln1_b = 0;          // (C), (C)
  std::size_t qkv_w = 0, qkv_b = 0;          // (3C, C), (3C)
  std::size_t attproj_w = 0, attproj_b = 0;  // (C, C), (C)
  std::size_t ln2_w = 0, ln2_b = 0;          // (C), (C)
  std::size_t fc_w = 0, fc_b = 0;            // (4C, C), (4C)      dense blocks only
  std::size_t fcproj_w = 0, fcproj_b = 0;    // (C, 4C), (C)       dense blocks only
  // Mixture-of-experts blocks only (config.hpp, MoeConfig), in place of fc and fcproj:
  std::size_t router_w = 0;  // (E, C)
  // The first expert the buffer holds (ExpertShard::first); expert e's w1 (H,C), w3 (H,C), w2 (C,H)
  // from experts + (e − first)·expert_floats.
  std::size_t experts = 0;
  std::size_t shared = 0;  // the shared expert's w1, w3, w2 the same way (if it has one)
};

// Floats of one SwiGLU expert: w1 and w3 (H, C), w2 (C, H).
inline std::size_t expert_floats(const GptConfig& c) {
  return 3 * c.moe.hidden * c.d_model;
}
// Floats of one block's parameters (dense: 12C² + 13C).
std::size_t block_floats(const GptConfig& c);

class ParamLayout {
 public:
  // Validates config, range and shard (ModelError otherwise). With a shard, the buffer holds
  // only that part of each block's experts (expert parallelism); every other tensor whole.
  ParamLayout(const GptConfig& config, StageRange range, ExpertShard shard = {});

  const GptConfig& config() const { return config_; }
  StageRange range() const { return range_; }
  ExpertShard shard() const { return shard_; }
  const std::vector<ParamTensor>& tensors() const { return tensors_; }
  std::size_t size() const { return size_; }  // floats in the buffer
  std::size_t bytes() const { return size_ * sizeof(float); }

  // Throws ModelError naming the tensor if this stage does not own it.
  const ParamTensor& tensor(std::string_view name) const;
  bool contains(std::string_view name) const;

  // Offsets of the embedding (first stage), per-block and head (last stage) tensors.
  std::size_t wte() const;      // (V, C)
  std::size_t wpe() const;      // (max_seq_len, C)
  std::size_t ln_f_w() const;   // (C)
  std::size_t ln_f_b() const;   // (C)
  std::size_t lm_head() const;  // (V, C), untied from wte
  const BlockOffsets& block(std::size_t local_layer) const { return blocks_.at(local_layer); }

  // Where this stage's buffer starts inside the whole model's buffer: the whole model's tensors
  // [model_offset(), model_offset() + size()) are this stage's, in the same order. A stage
  // holding part of its experts is no slice (ModelError): copy_tensors() maps it.
  std::size_t model_offset() const;

 private:
  std::size_t add(std::string name, std::vector<std::size_t> shape, InitKind init);

  GptConfig config_;
  StageRange range_;
  ExpertShard shard_;
  std::vector<ParamTensor> tensors_;
  std::vector<BlockOffsets> blocks_;
  std::size_t size_ = 0;
  std::size_t model_offset_ = 0;
  std::size_t wte_ = 0, wpe_ = 0, ln_f_w_ = 0, ln_f_b_ = 0, lm_head_ = 0;
};

// Copies every tensor of `from` that `to` also holds (by name; both layouts of the same model and
// range, in their own order) from `src` into `dst`: a whole stage's buffer into a part of its
// experts' (each part's tensors are the whole's), or a part's back into the whole.
void copy_tensors(const ParamLayout& from, std::span<const float> src, const ParamLayout& to,
                  std::span<float> dst);

}  // namespace paci::model
