// Slot layout (one float buffer, offsets per block) and the keyed slot pool. bytes_for() is the
// same count computed without allocating; the constructor checks that the two agree.
#include "model/activations.hpp"

#include <algorithm>

#include "model/check.hpp"

namespace paci::model {

void StageShape::validate() const {
  model::validate(config, range);
  PACI_MODEL_CHECK(batch > 0, "batch (sequences per micro-batch) must be positive");
  PACI_MODEL_CHECK(seq_len > 0 && seq_len <= config.max_seq_len,
                   "sequence length {} must be in [1, max_seq_len {}]", seq_len,
                   config.max_seq_len);
}

ActivationSlot::ActivationSlot(const StageShape& shape) : shape_(shape) {
  shape.validate();
  const std::size_t R = shape.rows(), C = shape.config.d_model, T = shape.seq_len;
  const std::size_t att = shape.batch * shape.config.heads * T * T;
  std::size_t size = 0;
  auto take = [&size](std::size_t floats) {
    const std::size_t offset = size;
    size += floats;
    return offset;
  };
  input_ = take(R * C);
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
    b.fch = take(4 * R * C);
    b.fch_gelu = take(4 * R * C);
    b.out = take(R * C);
    blocks_.push_back(b);
  }
  if (shape.range.is_first()) tokens_.resize(R);
  if (shape.range.is_last(shape.config)) {
    lnf_ = take(R * C);
    lnf_mean_ = take(R);
    lnf_rstd_ = take(R);
    probs_ = take(R * shape.config.vocab);
    losses_ = take(R);
    targets_.resize(R);
  }
  floats_.resize(size);
  PACI_MODEL_CHECK(bytes() == bytes_for(shape), "slot layout and bytes_for() disagree");
}

std::size_t ActivationSlot::bytes() const {
  return floats_.size() * sizeof(float) + (tokens_.size() + targets_.size()) * sizeof(std::int32_t);
}

std::size_t ActivationSlot::bytes_for(const StageShape& shape) {
  shape.validate();
  const std::size_t R = shape.rows(), C = shape.config.d_model, T = shape.seq_len;
  const std::size_t att = shape.batch * shape.config.heads * T * T;
  std::size_t floats = R * C + shape.range.num_layers * (16 * R * C + 4 * R + att);
  std::size_t ids = 0;
  if (shape.range.is_first()) ids += R;
  if (shape.range.is_last(shape.config)) {
    floats += R * C + 3 * R + R * shape.config.vocab;
    ids += R;
  }
  return floats * sizeof(float) + ids * sizeof(std::int32_t);
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
    slot.loss_scale_ = in.get<float>();
    slot.filled_ = in.get<std::uint8_t>() != 0;
  }
}

}  // namespace paci::model
