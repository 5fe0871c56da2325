// Slot layout (one float buffer, offsets per block) and the keyed slot pool. bytes_for() is the
// same count computed without allocating; the constructor checks that the two agree.
#include "model/activations.hpp"

#include <algorithm>

#include "model/check.hpp"

namespace paci::model {

void StageShape::validate() const {
  model::validate(config, range);
  model::validate(config, experts);
  PACI_MODEL_CHECK(batch > 0, "batch (sequences per micro-batch) must be positive");
  PACI_MODEL_CHECK(seq_len > 0 && seq_len <= config.max_seq_len,
                   "sequence length {} must be in [1, max_seq_len {}]", seq_len,
                   config.max_seq_len);
  // Expert rows are numbered in 32-bit integers (the slot's routes).
  PACI_MODEL_CHECK(!config.moe.enabled() || rows() * config.moe.top_k <= 0x7fffffff,
                   "{} tokens a micro-batch times top-{} is more expert rows than routes can "
                   "number",
                   rows(), config.moe.top_k);
}

std::pair<std::size_t, std::size_t> ActivationSlot::plan(const StageShape& shape,
                                                         ActivationSlot* slot) {
  shape.validate();
  const GptConfig& c = shape.config;
  const std::size_t R = shape.rows(), C = c.d_model, T = shape.seq_len;
  const std::size_t att = shape.batch * c.heads * T * T;
  std::size_t floats = 0, ids = 0;
  auto take = [&floats](std::size_t n) {
    const std::size_t offset = floats;
    floats += n;
    return offset;
  };
  auto take_ids = [&ids](std::size_t n) {
    const std::size_t offset = ids;
    ids += n;
    return offset;
  };
  const std::size_t input = take(R * C);
  if (slot != nullptr) slot->input_ = input;
  for (std::size_t l = 0; l < shape.range.num_layers; ++l) {
    BlockActivations b;
    b.ln1 = take(R * C);
    b.ln1_mean = take(R);
    b.ln1_rstd = take(R);
    b.qkv = take(3 * R * C);
    b.att = take(att);
    b.atty = take(R * C);
    b.residual2 = take(R * C);
    b.ln2 = take(R * C);
    b.ln2_mean = take(R);
    b.ln2_rstd = take(R);
    if (c.moe.enabled()) {
      const std::size_t E = c.moe.experts, K = c.moe.top_k, H = c.moe.hidden, N = R * K;
      b.probs = take(R * E);
      b.gates = take(R * K);
      b.xe = take(N * C);
      b.ea = take(N * H);
      b.eb = take(N * H);
      b.eh = take(N * H);
      b.ey = take(N * C);
      if (c.moe.shared_expert) {
        b.sa = take(R * H);
        b.sb = take(R * H);
        b.sh = take(R * H);
      }
      b.aux = take(1);
      b.choice = take_ids(N);
      b.row = take_ids(N);
      b.first_row = take_ids(E + 1);
      b.chosen = take_ids(E);
    } else {
      b.fch = take(4 * R * C);
      b.fch_gelu = take(4 * R * C);
    }
    b.out = take(R * C);
    if (slot != nullptr) slot->blocks_.push_back(b);
  }
  if (shape.range.is_first()) ids += R;  // tokens
  if (shape.range.is_last(c)) {
    const std::size_t lnf = take(R * C), mean = take(R), rstd = take(R);
    const std::size_t probs = take(R * c.vocab), losses = take(R);
    ids += R;  // targets
    if (slot != nullptr) {
      slot->lnf_ = lnf;
      slot->lnf_mean_ = mean;
      slot->lnf_rstd_ = rstd;
      slot->probs_ = probs;
      slot->losses_ = losses;
    }
  }
  return {floats, ids};
}

ActivationSlot::ActivationSlot(const StageShape& shape) : shape_(shape) {
  const auto [floats, ids] = plan(shape, this);
  floats_.resize(floats);
  if (shape.range.is_first()) tokens_.resize(shape.rows());
  if (shape.range.is_last(shape.config)) targets_.resize(shape.rows());
  ids_.resize(ids - tokens_.size() - targets_.size());
}

std::size_t ActivationSlot::bytes() const {
  return floats_.size() * sizeof(float) +
         (tokens_.size() + targets_.size() + ids_.size()) * sizeof(std::int32_t);
}

std::size_t ActivationSlot::bytes_for(const StageShape& shape) {
  const auto [floats, ids] = plan(shape, nullptr);
  return floats * sizeof(float) + ids * sizeof(std::int32_t);
}

bool ActivationSlot::routes_valid() const {
  const MoeConfig& m = shape_.config.moe;
  if (!m.enabled()) return true;
  const std::size_t K = m.top_k, N = shape_.rows() * K, E = m.experts;
  std::vector<std::int64_t> chosen(E), kept(E);
  std::vector<bool> taken(N);
  for (const BlockActivations& b : blocks_) {
    const std::int32_t* first = ids(b.first_row);
    if (first[0] != 0) return false;
    for (std::size_t e = 0; e < E; ++e)
      if (first[e + 1] < first[e]) return false;
    if (static_cast<std::size_t>(first[E]) > N) return false;
    std::fill(chosen.begin(), chosen.end(), 0);
    std::fill(kept.begin(), kept.end(), 0);
    std::fill(taken.begin(), taken.end(), false);
    // Each assignment an expert in range, a token's K experts distinct, each row used once and
    // inside its expert's rows, and the counts moe_route wrote: rows an expert owns = kept,
    // chosen = assignments (the load-balancing loss's f_e).
    for (std::size_t i = 0; i < N; ++i) {
      const std::int32_t e = ids(b.choice)[i], row = ids(b.row)[i];
      if (e < 0 || static_cast<std::size_t>(e) >= E) return false;
      for (std::size_t j = i - i % K; j < i; ++j)
        if (ids(b.choice)[j] == e) return false;
      ++chosen[static_cast<std::size_t>(e)];
      if (row == -1) continue;
      if (row < first[e] || row >= first[e + 1] || taken[static_cast<std::size_t>(row)])
        return false;
      taken[static_cast<std::size_t>(row)] = true;
      ++kept[static_cast<std::size_t>(e)];
    }
    for (std::size_t e = 0; e < E; ++e)
      if (chosen[e] != ids(b.chosen)[e] || kept[e] != first[e + 1] - first[e]) return false;
  }
  return true;
}

float ActivationSlot::block_aux_loss(std::size_t local_block) const {
  return shape_.config.moe.enabled() ? *data(blocks_.at(local_block).aux) : 0.0f;
}

std::span<const std::int32_t> ActivationSlot::expert_choices(std::size_t local_block) const {
  if (!shape_.config.moe.enabled()) return {};
  return {ids(blocks_.at(local_block).chosen), shape_.config.moe.experts};
}

float ActivationSlot::aux_loss() const {
  float sum = 0;
  if (shape_.config.moe.enabled())
    for (const BlockActivations& b : blocks_) sum += *data(b.aux);
  return sum;
}

std::span<const float> ActivationSlot::output() const {
  const std::size_t offset = blocks_.empty() ? input_ : blocks_.back().out;
  return {data(offset), shape_.rows() * shape_.config.d_model};
}

ActivationStore::ActivationStore(const StageShape& shape, std::size_t capacity) {
  PACI_MODEL_CHECK(capacity > 0, "an activation store needs at least one slot");
  slots_.reserve(capacity);
  for (std::size_t i = 0; i < capacity; ++i) slots_.emplace_back(shape);
  keys_.assign(capacity, kFree);
}

std::size_t ActivationStore::find(std::int64_t microbatch) const {
  for (std::size_t i = 0; i < keys_.size(); ++i) {
    if (keys_[i] == microbatch) return i;
  }
  return keys_.size();
}

bool ActivationStore::contains(std::int64_t microbatch) const {
  return microbatch != kFree && find(microbatch) < keys_.size();
}

ActivationSlot& ActivationStore::acquire(std::int64_t microbatch) {
  PACI_MODEL_CHECK(microbatch >= 0, "micro-batch index {} is negative", microbatch);
  PACI_MODEL_CHECK(!contains(microbatch), "micro-batch {} already holds an activation slot",
                   microbatch);
  const std::size_t i = find(kFree);
  PACI_MODEL_CHECK(i < keys_.size(), "all {} activation slots are in use (micro-batch {})",
                   keys_.size(), microbatch);
  keys_[i] = microbatch;
  ++in_use_;
  peak_in_use_ = std::max(peak_in_use_, in_use_);
  return slots_[i];
}

ActivationSlot& ActivationStore::at(std::int64_t microbatch) {
  const std::size_t i = microbatch == kFree ? keys_.size() : find(microbatch);
  PACI_MODEL_CHECK(i < keys_.size(), "micro-batch {} holds no activation slot", microbatch);
  return slots_[i];
}

void ActivationStore::release(std::int64_t microbatch) {
  ActivationSlot& slot = at(microbatch);
  slot.filled_ = false;
  keys_[static_cast<std::size_t>(&slot - slots_.data())] = kFree;
  --in_use_;
}

std::vector<std::int64_t> ActivationStore::held() const {
  std::vector<std::int64_t> out;
  for (const std::int64_t key : keys_)
    if (key != kFree) out.push_back(key);
  std::sort(out.begin(), out.end());
  return out;
}

void ActivationStore::save_image(ImageWriter& out) const {
  out.put(std::span<const std::int64_t>(keys_));
  out.put(static_cast<std::uint64_t>(peak_in_use_));
  for (const ActivationSlot& slot : slots_) {
    out.put(std::span<const float>(slot.floats_));
    out.put(std::span<const std::int32_t>(slot.tokens_));
    out.put(std::span<const std::int32_t>(slot.targets_));
    out.put(std::span<const std::int32_t>(slot.ids_));
    out.put(slot.loss_scale_);
    out.put(static_cast<std::uint8_t>(slot.filled_));
  }
}

void ActivationStore::load_image(ImageReader& in) {
  in.get(std::span<std::int64_t>(keys_));
  in_use_ = 0;
  for (std::size_t i = 0; i < keys_.size(); ++i) {
    if (keys_[i] == kFree) continue;
    in.check(keys_[i] >= 0 && find(keys_[i]) == i,
             fmt::format("activation slot {} holds micro-batch {}", i, keys_[i]));
    ++in_use_;
  }
  peak_in_use_ = in.get<std::uint64_t>();
  in.check(peak_in_use_ >= in_use_ && peak_in_use_ <= keys_.size(),
           fmt::format("peak of {} activation slots in use", peak_in_use_));
  for (ActivationSlot& slot : slots_) {
    in.get(std::span<float>(slot.floats_));
    in.get(std::span<std::int32_t>(slot.tokens_));
    in.get(std::span<std::int32_t>(slot.targets_));
    in.get(std::span<std::int32_t>(slot.ids_));
    slot.loss_scale_ = in.get<float>();
    slot.filled_ = in.get<std::uint8_t>() != 0;
    in.check(!slot.filled_ || slot.routes_valid(), "an activation slot's expert routes");
  }
}

}  // namespace paci::model
