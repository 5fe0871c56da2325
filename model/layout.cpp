// ParamLayout construction: embeddings, then each block's twelve tensors, then ln_f and the head.
// A stage's model_offset() counts what the stages before it own, so stages tile the whole buffer.
#include "model/layout.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <unordered_map>

#include "model/check.hpp"

namespace paci::model {
namespace {

std::size_t product(const std::vector<std::size_t>& shape) {
  std::size_t n = 1;
  for (std::size_t d : shape) n *= d;
  return n;
}

std::size_t embedding_floats(const GptConfig& c) {
  return (c.vocab + c.max_seq_len) * c.d_model;
}

}  // namespace

std::size_t block_floats(const GptConfig& c) {
  const std::size_t C = c.d_model;
  if (!c.moe.enabled())
    return 12 * C * C + 13 * C;  // weights 3C²+C²+4C²+4C², biases and LayerNorms 3C+C+4C+C+4C
  // attention 4C² + 4C, two LayerNorms 4C, the router E·C, the experts (and the shared one)
  const std::size_t experts = c.moe.experts + (c.moe.shared_expert ? 1 : 0);
  return 4 * C * C + 8 * C + c.moe.experts * C + experts * expert_floats(c);
}

ParamLayout::ParamLayout(const GptConfig& config, StageRange range, ExpertShard shard)
    : config_(config), range_(range), shard_(shard) {
  validate(config, range);
  validate(config, shard);
  const std::size_t C = config.d_model;
  if (!range.is_first()) {
    model_offset_ = embedding_floats(config) + range.first_layer * block_floats(config);
  }
  if (range.is_first()) {
    wte_ = add("wte", {config.vocab, C}, InitKind::normal);
    wpe_ = add("wpe", {config.max_seq_len, C}, InitKind::normal);
  }
  for (std::size_t l = range.first_layer; l < range.end_layer(); ++l) {
    const std::string h = fmt::format("h.{}.", l);
    BlockOffsets b;
    b.ln1_w = add(h + "ln_1.weight", {C}, InitKind::ones);
    b.ln1_b = add(h + "ln_1.bias", {C}, InitKind::zeros);
    b.qkv_w = add(h + "attn.c_attn.weight", {3 * C, C}, InitKind::normal);
    b.qkv_b = add(h + "attn.c_attn.bias", {3 * C}, InitKind::zeros);
    b.attproj_w = add(h + "attn.c_proj.weight", {C, C}, InitKind::residual_projection);
    b.attproj_b = add(h + "attn.c_proj.bias", {C}, InitKind::zeros);
    b.ln2_w = add(h + "ln_2.weight", {C}, InitKind::ones);
    b.ln2_b = add(h + "ln_2.bias", {C}, InitKind::zeros);
    if (config.moe.enabled()) {
      const std::size_t E = config.moe.experts, H = config.moe.hidden;
      b.router_w = add(h + "moe.router.weight", {E, C}, InitKind::normal);
      const auto expert = [&](const std::string& name) {
        const std::size_t w1 = add(name + ".w1.weight", {H, C}, InitKind::normal);
        add(name + ".w3.weight", {H, C}, InitKind::normal);
        add(name + ".w2.weight", {C, H}, InitKind::residual_projection);
        return w1;
      };
      const std::size_t first = shard.first(E), end = shard.end(E);
      b.experts = expert(fmt::format("{}moe.experts.{}", h, first));
      for (std::size_t e = first + 1; e < end; ++e) expert(fmt::format("{}moe.experts.{}", h, e));
      if (config.moe.shared_expert) b.shared = expert(h + "moe.shared");
    } else {
      b.fc_w = add(h + "mlp.c_fc.weight", {4 * C, C}, InitKind::normal);
      b.fc_b = add(h + "mlp.c_fc.bias", {4 * C}, InitKind::zeros);
      b.fcproj_w = add(h + "mlp.c_proj.weight", {C, 4 * C}, InitKind::residual_projection);
      b.fcproj_b = add(h + "mlp.c_proj.bias", {C}, InitKind::zeros);
    }
    blocks_.push_back(b);
  }
  if (range.is_last(config)) {
    ln_f_w_ = add("ln_f.weight", {C}, InitKind::ones);
    ln_f_b_ = add("ln_f.bias", {C}, InitKind::zeros);
    lm_head_ = add("lm_head.weight", {config.vocab, C}, InitKind::normal);
  }
}

std::size_t ParamLayout::add(std::string name, std::vector<std::size_t> shape, InitKind init) {
  ParamTensor t;
  t.name = std::move(name);
  t.numel = product(shape);
  t.shape = std::move(shape);
  t.offset = size_;
  t.init = init;
  size_ += t.numel;
  tensors_.push_back(std::move(t));
  return tensors_.back().offset;
}

std::size_t ParamLayout::model_offset() const {
  PACI_MODEL_CHECK(shard_.whole(), "a stage holding expert part {} of {} is no slice of the model",
                   shard_.index, shard_.count);
  return model_offset_;
}

void copy_tensors(const ParamLayout& from, std::span<const float> src, const ParamLayout& to,
                  std::span<float> dst) {
  PACI_MODEL_CHECK(from.config() == to.config() && from.range() == to.range(),
                   "tensors copied between different stages");
  PACI_MODEL_CHECK(src.size() == from.size() && dst.size() == to.size(),
                   "buffers of {} and {} floats for layouts of {} and {}", src.size(), dst.size(),
                   from.size(), to.size());
  std::unordered_map<std::string_view, const ParamTensor*> into;
  for (const ParamTensor& t : to.tensors()) into.emplace(t.name, &t);
  for (const ParamTensor& t : from.tensors()) {
    const auto it = into.find(t.name);
    if (it == into.end()) continue;  // a tensor `to` does not hold
    std::copy_n(src.data() + t.offset, t.numel, dst.data() + it->second->offset);
  }
}

bool ParamLayout::contains(std::string_view name) const {
  for (const ParamTensor& t : tensors_) {
    if (t.name == name) return true;
  }
  return false;
}

const ParamTensor& ParamLayout::tensor(std::string_view name) const {
  for (const ParamTensor& t : tensors_) {
    if (t.name == name) return t;
  }
  PACI_MODEL_CHECK(false, "stage with blocks [{}, {}) has no tensor '{}'", range_.first_layer,
                   range_.end_layer(), name);
  return tensors_.front();  // unreachable
}

std::size_t ParamLayout::wte() const {
  PACI_MODEL_CHECK(range_.is_first(), "only the first stage owns wte");
  return wte_;
}
std::size_t ParamLayout::wpe() const {
  PACI_MODEL_CHECK(range_.is_first(), "only the first stage owns wpe");
  return wpe_;
}
std::size_t ParamLayout::ln_f_w() const {
  PACI_MODEL_CHECK(range_.is_last(config_), "only the last stage owns ln_f");
  return ln_f_w_;
}
std::size_t ParamLayout::ln_f_b() const {
  PACI_MODEL_CHECK(range_.is_last(config_), "only the last stage owns ln_f");
  return ln_f_b_;
}
std::size_t ParamLayout::lm_head() const {
  PACI_MODEL_CHECK(range_.is_last(config_), "only the last stage owns lm_head");
  return lm_head_;
}

}  // namespace paci::model
