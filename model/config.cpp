// Validation of GptConfig and StageRange, and the analytic FLOP count of a stage (the formula
// documented in config.hpp and used by the benchmark and the simulator's cost model).
#include "model/config.hpp"

#include <cmath>

#include "model/check.hpp"

namespace paci::model {

void GptConfig::validate() const {
  PACI_MODEL_CHECK(heads > 0, "heads must be positive");
  PACI_MODEL_CHECK(d_model > 0, "d_model must be positive");
  PACI_MODEL_CHECK(d_model % heads == 0, "d_model {} is not a multiple of heads {}", d_model,
                   heads);
  PACI_MODEL_CHECK(max_seq_len > 0, "max_seq_len must be positive");
  PACI_MODEL_CHECK(vocab > 0, "vocab must be positive");
  if (!moe.enabled()) return;
  PACI_MODEL_CHECK(moe.top_k >= 1 && moe.top_k <= moe.experts,
                   "top-k {} must be between 1 and the {} experts", moe.top_k, moe.experts);
  PACI_MODEL_CHECK(moe.hidden > 0, "an expert's hidden width must be positive");
  PACI_MODEL_CHECK(std::isfinite(moe.capacity_factor) && moe.capacity_factor >= 0,
                   "capacity factor {} must be 0 (dropless) or positive", moe.capacity_factor);
  PACI_MODEL_CHECK(std::isfinite(moe.aux_loss_coef) && moe.aux_loss_coef >= 0,
                   "load-balancing loss coefficient {} must be 0 or positive", moe.aux_loss_coef);
}

std::size_t MoeConfig::capacity(std::size_t rows) const {
  const std::size_t all = rows * top_k;
  if (capacity_factor <= 0) return all;
  const double c =
      std::ceil(capacity_factor * static_cast<double>(all) / static_cast<double>(experts));
  return c >= static_cast<double>(all) ? all : static_cast<std::size_t>(c);
}

void validate(const GptConfig& config, StageRange range) {
  config.validate();
  PACI_MODEL_CHECK(range.end_layer() <= config.layers,
                   "stage blocks [{}, {}) leave a model of {} layers", range.first_layer,
                   range.end_layer(), config.layers);
  PACI_MODEL_CHECK(range.num_layers > 0 || range.is_first() || range.is_last(config),
                   "a middle stage must own at least one block (first_layer {})",
                   range.first_layer);
}

void validate(const GptConfig& config, ExpertShard shard) {
  PACI_MODEL_CHECK(shard.count > 0 && shard.index < shard.count,
                   "expert part {} of {} does not exist", shard.index, shard.count);
  if (shard.whole()) return;
  PACI_MODEL_CHECK(config.moe.enabled(), "a dense model has no experts to split in {} parts",
                   shard.count);
  PACI_MODEL_CHECK(config.moe.experts % shard.count == 0,
                   "{} experts do not split into {} equal parts (expert parallelism must divide "
                   "the expert count)",
                   config.moe.experts, shard.count);
}

StageFlops stage_flops(const GptConfig& config, StageRange range, std::size_t batch,
                       std::size_t seq_len) {
  const double R = static_cast<double>(batch * seq_len);
  const double C = static_cast<double>(config.d_model);
  const double T = static_cast<double>(seq_len);
  const double blocks = static_cast<double>(range.num_layers);
  StageFlops flops;
  // qkv C→3C, attention projection C→C, fc C→4C, projection 4C→C: 12·C² weights per block.
  // MoE: the 4·C² of attention, then per token K experts' and the shared one's 3·C·H and the
  // router's C·E.
  double per_token = 12 * C * C;
  if (config.moe.enabled()) {
    const auto& m = config.moe;
    const double experts = static_cast<double>(m.top_k + (m.shared_expert ? 1 : 0));
    per_token = 4 * C * C + experts * 3 * C * static_cast<double>(m.hidden) +
                C * static_cast<double>(m.experts);
  }
  flops.matmul_forward = blocks * 2 * R * per_token;
  if (range.is_last(config)) flops.matmul_forward += 2 * R * C * static_cast<double>(config.vocab);
  // Per block: Q·Kᵀ and P·V, each 2·T·T·HS per (sequence, head), i.e. 2·R·T·C over the heads.
  flops.attention_forward = blocks * 2 * (2 * R * T * C);
  return flops;
}

void check_token_ids(std::span<const std::int32_t> ids, std::size_t vocab, const char* what) {
  for (std::size_t i = 0; i < ids.size(); ++i) {
    PACI_MODEL_CHECK(ids[i] >= 0 && static_cast<std::size_t>(ids[i]) < vocab,
                     "{} id {} at position {} is outside the vocabulary [0, {})", what, ids[i], i,
                     vocab);
  }
}

}  // namespace paci::model
