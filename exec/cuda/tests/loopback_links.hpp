// RemoteLinks between threads of one process on one GPU, for testing the one-process-per-device
// pipeline where a single GPU is all there is (NCCL refuses two ranks on one device). A send
// copies the data into a staging buffer on the sender's link stream (after `ready`; `done` when
// copied, as NCCL's send completes once the data has left); a receive takes the link's next
// staged message in order and copies it out on the receiver's link stream. A receive queued
// before its send blocks the receiving host thread until the send is queued, which cannot
// deadlock for a valid schedule (docs/cuda.md). gather() and barrier() meet on a condition
// variable; abort() wakes every waiter, which then throws.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "cuda/memory.hpp"
#include "exec/cuda/remote.hpp"

namespace paci::exec::gpu::loopback {

// What the threads share.
class LoopbackHub {
 public:
  explicit LoopbackHub(std::int32_t processes) : processes_(processes), slots_(processes) {}

 private:
  friend class LoopbackLinks;
  struct Staged {
    cuda::DeviceBuffer<unsigned char> data;
    cuda::Event copied;
    std::size_t bytes = 0;
  };
  // Every process's bytes, once all have called it; throws after abort().
  std::vector<std::string> exchange(std::int32_t me, std::string bytes);

  std::int32_t processes_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::pair<std::int32_t, std::int32_t>, std::deque<Staged*>> queued_;
  std::deque<Staged> staged_;  // kept until the hub dies: receivers may still read them
  std::vector<std::string> slots_, result_;
  std::int32_t arrived_ = 0;
  std::int64_t generation_ = 0;
  bool aborted_ = false;
};

class LoopbackLinks final : public RemoteLinks {
 public:
  LoopbackLinks(LoopbackHub& hub, std::int32_t device) : hub_(hub), device_(device) {}

  std::int32_t local_device() const override { return device_; }
  void send(std::int32_t dst, cuda::TensorView data, cudaEvent_t ready, cudaEvent_t done) override;
  void receive(std::int32_t src, cuda::MutableTensorView into, cudaEvent_t start,
               cudaEvent_t done) override;
  void wait(cudaEvent_t event) override;
  void wait_idle() override;
  void barrier() override { hub_.exchange(device_, {}); }
  std::vector<std::string> gather(std::string bytes, std::int32_t root) override;
  void abort() noexcept override;

 private:
  cuda::Stream& stream(std::int32_t peer) { return streams_[peer]; }
  void check_aborted();

  LoopbackHub& hub_;
  std::int32_t device_;
  std::map<std::int32_t, cuda::Stream> streams_;  // one per peer and direction of use
};

}  // namespace paci::exec::gpu::loopback
