// RemoteLinks over NCCL: one process per GPU, rank r running schedule device r. Every directed
// link the schedule uses gets its own two-rank communicator (split off the world) and its own
// stream, so a link's transfers wait only for their producer and for the link's earlier messages,
// never for the consumer's compute: with both ends queueing a link's messages in the same order
// (exec::device_links() refuses a schedule where they differ), no cycle of waits can form.
// NCCL connects a point-to-point pair lazily, blocking the host on the first message until the
// peer makes its first call too, so the constructor sends one message over every link in one
// global order first; the run then never meets an unconnected link.
// A watchdog thread polls every communicator for NCCL's asynchronous errors and for a run that
// makes no progress for `timeout`; either aborts every communicator (which also ends transfers
// a CUDA call is blocked behind) and the next wait() throws the reason.
// Built only where NCCL is found (target paci_exec_nccl).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>

#include <string>
#include <thread>
#include <vector>
#include "exec/comm_guard.hpp"

#include "cuda/memory.hpp"
#include "cuda/nccl/communicator.hpp"
#include "exec/cuda/remote.hpp"
#include "exec/launch.hpp"
#include "schedules/ir.hpp"

namespace paci::exec::gpu {

// The whole connection of one rank: rank 0 makes NCCL's unique id and serves it at `endpoint` (its
// port on every interface), the others fetch it from there (exec/launch.hpp); then the world
// communicator. Selects GPU info.local_rank first. Throws RendezvousError or cuda::CudaError after
// `timeout` or on failure.
cuda::NcclCommunicator connect_ranks(const LaunchInfo& info, const Endpoint& endpoint,
                                     std::chrono::milliseconds timeout);

class NcclLinks final : public RemoteLinks {
 public:
  // Collective over every process of the launch; world.rank() is this process's device. Throws
  // InputError when the world's size is not the schedule's device count, when the schedule
  // cannot run one process per device, or when another process gives another `fingerprint`
  // (of the schedule and every setting that shapes the messages); cuda::CudaError on an NCCL
  // failure.
  NcclLinks(cuda::NcclCommunicator& world, const Schedule& schedule, std::uint64_t fingerprint,
            std::chrono::seconds timeout);
  ~NcclLinks() override;
  NcclLinks(const NcclLinks&) = delete;
  NcclLinks& operator=(const NcclLinks&) = delete;

  std::int32_t local_device() const override { return world_.rank(); }
  void send(std::int32_t dst, cuda::TensorView data, cudaEvent_t ready, cudaEvent_t done) override;
  void receive(std::int32_t src, cuda::MutableTensorView into, cudaEvent_t start,
               cudaEvent_t done) override;
  void wait(cudaEvent_t event) override;
  void wait_idle() override;
  void barrier() override;
  std::vector<std::string> gather(std::string bytes, std::int32_t root) override;
  void abort() noexcept override;

 private:
  struct Link {
    std::int32_t src = 0, dst = 0;
    cuda::NcclCommunicator comm;  // rank 0: src, rank 1: dst
    cuda::Stream stream;
  };
  Link& link(std::int32_t src, std::int32_t dst);
  void progress() { last_progress_s_ = clock_s(); }
  static double clock_s();
  void watch();
  // Aborts every communicator from the watchdog thread, recording why.
  void abort_from_watchdog(const std::string& why) noexcept;
  // The world's 64-bit values, one per process, in rank order.
  std::vector<std::uint64_t> all_gather(std::uint64_t value);

  cuda::NcclCommunicator& world_;
  cuda::Stream stream_;  // the world's collectives
  cuda::Event done_;
  std::vector<Link> links_;  // the links this process is an end of
  std::chrono::seconds timeout_;
  std::atomic<double> last_progress_s_{0.0};
  std::atomic<bool> stop_{false};
  // Every enqueue on the communicators runs under it, and the aborts (the watchdog's, or this
  // process's after a failure) take it: no communicator is freed under a send.
  CommGuard guard_;
  std::thread watchdog_;
};

}  // namespace paci::exec::gpu
