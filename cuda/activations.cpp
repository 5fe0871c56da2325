// The device slot's layout: model/activations.cpp's order, split by element type. bytes_for()
// counts without allocating; the constructor checks that the two agree.
#include "cuda/activations.hpp"

#include "model/check.hpp"

namespace paci::cuda {

ActivationSlot::Counts ActivationSlot::plan(const model::StageShape& shape, ActivationSlot* slot) {
  shape.validate();
  const std::size_t R = shape.rows(), C = shape.config.d_model, T = shape.seq_len;
  const std::size_t att = shape.batch * shape.config.heads * T * T;
  Counts n;
  auto take = [](std::size_t& size, std::size_t count) {
    const std::size_t offset = size;
    size += count;
    return offset;
  };
  const std::size_t input = take(n.values, R * C);
  if (slot != nullptr) slot->input_ = input;
  for (std::size_t l = 0; l < shape.range.num_layers; ++l) {
    model::BlockActivations b;
    b.ln1 = take(n.values, R * C);
    b.ln1_mean = take(n.stats, R);
    b.ln1_rstd = take(n.stats, R);
    b.qkv = take(n.values, 3 * R * C);
    b.att = take(n.values, att);
    b.atty = take(n.values, R * C);
    b.residual2 = take(n.values, R * C);
    b.ln2 = take(n.values, R * C);
    b.ln2_mean = take(n.stats, R);
    b.ln2_rstd = take(n.stats, R);
    b.fch = take(n.values, 4 * R * C);
    b.fch_gelu = take(n.values, 4 * R * C);
    b.out = take(n.values, R * C);
    if (slot != nullptr) slot->blocks_.push_back(b);
  }
  if (shape.range.is_first()) {
    const std::size_t tokens = take(n.ids, R), rows = take(n.ids, R);
    const std::size_t starts = take(n.ids, R + 1), group_ids = take(n.ids, R);
    if (slot != nullptr) {
      slot->tokens_ = tokens;
      slot->group_rows_ = rows;
      slot->group_starts_ = starts;
      slot->group_ids_ = group_ids;
    }
  }
  if (shape.range.is_last(shape.config)) {
    const std::size_t lnf = take(n.values, R * C);
    const std::size_t lnf_mean = take(n.stats, R), lnf_rstd = take(n.stats, R);
    const std::size_t probs = take(n.stats, R * shape.config.vocab), losses = take(n.stats, R);
    const std::size_t targets = take(n.ids, R);
    if (slot != nullptr) {
      slot->lnf_ = lnf;
      slot->lnf_mean_ = lnf_mean;
      slot->lnf_rstd_ = lnf_rstd;
      slot->probs_ = probs;
      slot->losses_ = losses;
      slot->targets_ = targets;
    }
  }
  return n;
}

ActivationSlot::ActivationSlot(const model::StageShape& shape, Precision precision)
    : shape_(shape), precision_(precision) {
  const Counts n = plan(shape, this);
  values_ = DeviceTensor(precision, n.values);
  stats_ = DeviceBuffer<float>(n.stats);
  ids_ = DeviceBuffer<std::int32_t>(n.ids);
  ids_host_ = PinnedBuffer<std::int32_t>(5 * shape.rows() + 1);
  PACI_MODEL_CHECK(bytes() == bytes_for(shape, precision), "slot layout and bytes_for() disagree");
}

std::size_t ActivationSlot::bytes() const {
  return values_.bytes() + stats_.bytes() + ids_.bytes();
}

std::size_t ActivationSlot::bytes_for(const model::StageShape& shape, Precision precision) {
  const Counts n = plan(shape, nullptr);
  return n.values * element_bytes(precision) + n.stats * sizeof(float) +
         n.ids * sizeof(std::int32_t);
}

TensorView ActivationSlot::input() const {
  const std::size_t count = shape_.rows() * shape_.config.d_model;
  return {
      static_cast<const unsigned char*>(values_.view().data) + input_ * element_bytes(precision_),
      count, precision_};
}

TensorView ActivationSlot::output() const {
  const std::size_t offset = blocks_.empty() ? input_ : blocks_.back().out;
  const std::size_t count = shape_.rows() * shape_.config.d_model;
  return {
      static_cast<const unsigned char*>(values_.view().data) + offset * element_bytes(precision_),
      count, precision_};
}

}  // namespace paci::cuda
