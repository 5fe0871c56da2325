// LoopbackLinks: staged device copies between threads, the hub's exchange, abort.
#include "loopback_links.hpp"

#include <stdexcept>

#include "cuda/check.hpp"

namespace paci::exec::gpu::loopback {

std::vector<std::string> LoopbackHub::exchange(std::int32_t me, std::string bytes) {
  std::unique_lock lock(mutex_);
  const std::int64_t generation = generation_;
  slots_[static_cast<std::size_t>(me)] = std::move(bytes);
  if (++arrived_ == processes_) {
    result_ = slots_;
    arrived_ = 0;
    ++generation_;
    changed_.notify_all();
  } else {
    changed_.wait(lock, [&] { return generation_ != generation || aborted_; });
  }
  if (aborted_) throw std::runtime_error("another process failed");
  return result_;
}

void LoopbackLinks::check_aborted() {
  std::lock_guard lock(hub_.mutex_);
  if (hub_.aborted_) throw std::runtime_error("another process failed");
}

void LoopbackLinks::send(std::int32_t dst, cuda::TensorView data, cudaEvent_t ready,
                         cudaEvent_t done) {
  const std::size_t bytes = data.count * cuda::element_bytes(data.precision);
  LoopbackHub::Staged* staged = nullptr;
  {
    std::lock_guard lock(hub_.mutex_);
    hub_.staged_.push_back({cuda::DeviceBuffer<unsigned char>(bytes), cuda::Event(), bytes});
    staged = &hub_.staged_.back();
  }
  cuda::Stream& s = stream(dst);
  PACI_CUDA_CHECK(cudaStreamWaitEvent(s.get(), ready, 0));
  PACI_CUDA_CHECK(
      cudaMemcpyAsync(staged->data.data(), data.data, bytes, cudaMemcpyDeviceToDevice, s.get()));
  staged->copied.record(s.get());
  PACI_CUDA_CHECK(cudaEventRecord(done, s.get()));
  std::lock_guard lock(hub_.mutex_);
  hub_.queued_[{device_, dst}].push_back(staged);
  hub_.changed_.notify_all();
}

void LoopbackLinks::receive(std::int32_t src, cuda::MutableTensorView into, cudaEvent_t start,
                            cudaEvent_t done) {
  LoopbackHub::Staged* staged = nullptr;
  {
    std::unique_lock lock(hub_.mutex_);
    auto& queue = hub_.queued_[{src, device_}];
    hub_.changed_.wait(lock, [&] { return !queue.empty() || hub_.aborted_; });
    if (hub_.aborted_) throw std::runtime_error("another process failed");
    staged = queue.front();
    queue.pop_front();
  }
  const std::size_t bytes = into.count * cuda::element_bytes(into.precision);
  if (bytes != staged->bytes)
    throw std::runtime_error("loopback: a message of " + std::to_string(staged->bytes) +
                             " bytes received into " + std::to_string(bytes));
  cuda::Stream& s = stream(-1 - src);  // receiving streams apart from sending ones
  PACI_CUDA_CHECK(cudaEventRecord(start, s.get()));
  staged->copied.wait_on(s.get());
  PACI_CUDA_CHECK(
      cudaMemcpyAsync(into.data, staged->data.data(), bytes, cudaMemcpyDeviceToDevice, s.get()));
  PACI_CUDA_CHECK(cudaEventRecord(done, s.get()));
}

void LoopbackLinks::wait(cudaEvent_t event) {
  check_aborted();
  PACI_CUDA_CHECK(cudaEventSynchronize(event));
}

void LoopbackLinks::wait_idle() {
  for (auto& [peer, s] : streams_) s.synchronize();
}

std::vector<std::string> LoopbackLinks::gather(std::string bytes, std::int32_t root) {
  std::vector<std::string> all = hub_.exchange(device_, bytes);
  if (device_ != root) return {};
  return all;
}

void LoopbackLinks::abort() noexcept {
  std::lock_guard lock(hub_.mutex_);
  hub_.aborted_ = true;
  hub_.changed_.notify_all();
}

}  // namespace paci::exec::gpu::loopback
