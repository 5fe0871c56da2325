// GpuStageRuntime: forward, backward and update of one stage on the GPU under its weight policy.
#include "exec/cuda/gpu_stage.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <stdexcept>

#include "cuda/check.hpp"

namespace paci::exec::gpu {

namespace {

void copy_async(cudaStream_t stream, void* dst, const void* src, std::size_t bytes) {
  PACI_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream));
}

}  // namespace

GpuStageRuntime::GpuStageRuntime(const GpuStageConfig& config)
    : StageBooks(config, config.activation_capacity),
      precision_(config.precision),
      stage_(config.shape, config.precision),
      master_(stage_.layout().size()),
      grads_(stage_.layout().size()),
      optimizer_(stage_.layout(), config.adamw) {
  const std::size_t n = stage_.layout().size();
  if (config.precision == cuda::Precision::bf16) compute_ = cuda::DeviceTensor(config.precision, n);
  const std::size_t capacity = std::max<std::size_t>(config.activation_capacity, 1);
  for (std::size_t i = 0; i < capacity; ++i) slots_.push_back(stage_.make_slot());
  slot_mb_.assign(capacity, -1);
  for (std::size_t i = 0; i < book_.stash_slots(); ++i) stash_.emplace_back(config.precision, n);
  for (std::size_t i = 0; i < w_book_.size(); ++i) w_stashes_.push_back(stage_.make_weight_stash());
  for (std::size_t i = 0; i < config.snapshot_count(); ++i)
    snapshots_.emplace_back(config.precision, n);
  cuda::zero(stream(), grads_.data(), n);
}

GpuStageRuntime::View GpuStageRuntime::weights() const {
  if (precision_ == cuda::Precision::bf16) return compute_.view();
  return cuda::TensorView::of(master_.data(), master_.size());
}

void GpuStageRuntime::set_params(std::span<const float> host) {
  if (host.size() != master_.size())
    throw std::invalid_argument(fmt::format("stage {}: {} weights given, the layout has {}",
                                            stage(), host.size(), master_.size()));
  cuda::copy_to_device(stream(), master_.data(), host);
  if (precision_ == cuda::Precision::bf16)
    cuda::cast(stream(), compute_.as<cuda::bf16>(), master_.data(), master_.size());
  stage_.synchronize();
}

std::vector<float> GpuStageRuntime::params() const {
  std::vector<float> host(master_.size());
  cuda::copy_to_host(stream(), std::span<float>(host), master_.data());
  return host;
}

void GpuStageRuntime::copy_state_to(model::StageState& into) const {
  if (into.weights.size() != master_.size() || into.first_moment.size() != optimizer_.size() ||
      into.second_moment.size() != optimizer_.size())
    throw std::invalid_argument(fmt::format("stage {}: a state section of another size", stage()));
  cuda::copy_to_host(stream(), std::span<float>(into.weights), master_.data());
  cuda::copy_to_host(stream(), std::span<float>(into.first_moment), optimizer_.first_moment());
  cuda::copy_to_host(stream(), std::span<float>(into.second_moment), optimizer_.second_moment());
  into.optimizer_steps = optimizer_.steps();
}

void GpuStageRuntime::copy_state_from(const model::StageState& from) {
  if (from.first_moment.size() != optimizer_.size() ||
      from.second_moment.size() != optimizer_.size())
    throw std::invalid_argument(
        fmt::format("stage {}: optimizer state of {} / {} values, the layout has {}", stage(),
                    from.first_moment.size(), from.second_moment.size(), optimizer_.size()));
  set_params(from.weights);
  cuda::copy_to_device(stream(), optimizer_.first_moment(),
                       std::span<const float>(from.first_moment));
  cuda::copy_to_device(stream(), optimizer_.second_moment(),
                       std::span<const float>(from.second_moment));
  optimizer_.set_steps(from.optimizer_steps);
}

cuda::ActivationSlot& GpuStageRuntime::acquire(std::int32_t mb) {
  const auto free = std::find(slot_mb_.begin(), slot_mb_.end(), -1);
  if (free == slot_mb_.end())
    throw std::runtime_error(fmt::format(
        "stage {}: more than {} micro-batches in flight (the analysed peak activations)", stage(),
        slot_mb_.size()));
  *free = mb;
  peak_slots_ = std::max(peak_slots_, ++slots_in_use_);
  return slots_[static_cast<std::size_t>(free - slot_mb_.begin())];
}

std::size_t GpuStageRuntime::slot_of(std::int32_t mb) const {
  const auto it = std::find(slot_mb_.begin(), slot_mb_.end(), mb);
  if (it == slot_mb_.end())
    throw std::logic_error(
        fmt::format("stage {}: no activations saved for micro-batch {}", stage(), mb));
  return static_cast<std::size_t>(it - slot_mb_.begin());
}

void GpuStageRuntime::forward(std::int32_t mb, const Input& input,
                              std::span<const std::int32_t> targets, Loss* loss) {
  cuda::ActivationSlot& slot = acquire(mb);
  book_.forward(mb);
  if (is_last())
    stage_.enqueue_forward_loss(weights(), input, targets, plan_.loss_scale, slot, loss);
  else
    stage_.forward(weights(), input, slot);
}

GpuStageRuntime::View GpuStageRuntime::output(std::int32_t mb) const {
  return slots_[slot_of(mb)].output();
}

GpuStageRuntime::View GpuStageRuntime::weights_at(const Read& read) const {
  return read.source == VersionBook::kCurrent
             ? weights()
             : stash_[static_cast<std::size_t>(read.source)].view();
}

void GpuStageRuntime::release(std::size_t slot) {
  slots_[slot].release();  // the stream orders the slot's next forward after this backward
  slot_mb_[slot] = -1;
  --slots_in_use_;
}

void GpuStageRuntime::backward(std::int32_t mb, View d_output, MutableView d_input) {
  const Read read = backward_read(mb);
  const std::size_t i = slot_of(mb);
  stage_.backward(weights_at(read), MutableView::of(grads_.data(), grads_.size()), slots_[i],
                  d_output, d_input);
  release(i);
  book_.backward(mb, read.version);
}

void GpuStageRuntime::input_grad(std::int32_t mb, View d_output, MutableView d_input) {
  const Read read = backward_read(mb);
  const std::size_t i = w_book_.hold(mb, read.version);
  stage_.backward_input(weights_at(read), slots_[slot_of(mb)], d_output, d_input, w_stashes_[i]);
}

void GpuStageRuntime::weight_grad(std::int32_t mb) {
  const WeightStashBook::Held held = w_book_.release(mb);
  const std::size_t slot = slot_of(mb);
  stage_.backward_weight(cuda::MutableTensorView::of(grads_.data(), grads_.size()), slots_[slot],
                         w_stashes_[held.stash]);
  release(slot);
  book_.backward(mb, held.version);  // read at I; its gradient joins this version's step
}

void GpuStageRuntime::update() {
  const View current = weights();
  const std::size_t bytes = current.count * cuda::element_bytes(current.precision);
  const Update u = begin_update();
  if (u.keep_in != VersionBook::kCurrent)
    copy_async(stream(), stash_[static_cast<std::size_t>(u.keep_in)].view().data, current.data,
               bytes);
  float grad_scale = 1.0f;
  if (plan_.clip > 0.0)
    grad_scale = model::clip_coefficient(norm_(stream(), grads_.data(), grads_.size()), plan_.clip);
  optimizer_.step(stream(), master_.data(), grads_.data(), plan_.lr.at(u.step), grad_scale,
                  precision_ == cuda::Precision::bf16 ? compute_.as<cuda::bf16>() : nullptr);
  cuda::zero(stream(), grads_.data(), grads_.size());
  if (const auto i = take_snapshot(u.step, snapshots_.size()))
    copy_async(stream(), snapshots_[*i].view().data, weights().data, bytes);
}

std::int64_t GpuStageRuntime::activation_slot_bytes() const {
  return static_cast<std::int64_t>(slots_.front().bytes());
}

std::int64_t GpuStageRuntime::static_bytes() const {
  const auto n = static_cast<std::int64_t>(master_.size());
  return 4 * n * static_cast<std::int64_t>(sizeof(float)) +
         static_cast<std::int64_t>(compute_.bytes());
}

std::int64_t GpuStageRuntime::memory_bytes() const {
  const auto weight_copy =
      static_cast<std::int64_t>(master_.size() * cuda::element_bytes(precision_));
  // Output gradients kept from an I for its W.
  const auto awaiting_w = static_cast<std::int64_t>(
      w_book_.in_use() * (w_stashes_.empty() ? 0 : w_stashes_.front().bytes()));
  return static_bytes() + awaiting_w +
         static_cast<std::int64_t>(slots_in_use_) * activation_slot_bytes() +
         static_cast<std::int64_t>(book_.stash_in_use()) * weight_copy;
}

}  // namespace paci::exec::gpu
