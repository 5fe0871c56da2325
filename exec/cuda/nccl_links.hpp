// RemoteLinks over NCCL: one process per GPU, rank r running schedule device r. Every directed
// link the schedule uses gets its own two-rank communicator (split off the world) and its own
// stream, so a link's transfers wait only for their producer and for the link's earlier messages,
// never for the consumer's compute: with both ends queueing a link's messages in the same order
// (exec::device_links() refuses a schedule where they differ), no cycle of waits can form.
// Built only where NCCL is found (target paci_exec_nccl); compiled, never run yet (docs/cuda.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cuda/memory.hpp"
#include "cuda/nccl/communicator.hpp"
#include "exec/cuda/remote.hpp"
#include "schedules/ir.hpp"

namespace paci::exec::gpu {

class NcclLinks final : public RemoteLinks {
 public:
  // Collective over every process of the launch; world.rank() is this process's device. Throws
  // InputError when the world's size is not the schedule's device count, when the schedule
  // cannot run one process per device, or when another process runs a different schedule (their
  // fingerprints differ); cuda::CudaError on an NCCL failure.
  NcclLinks(cuda::NcclCommunicator& world, const Schedule& schedule);
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
  std::vector<std::string> gather(const std::string& bytes, std::int32_t root) override;
  void abort() noexcept override;

 private:
  struct Link {
    std::int32_t src = 0, dst = 0;
    cuda::NcclCommunicator comm;  // rank 0: src, rank 1: dst
    cuda::Stream stream;
  };
  Link& link(std::int32_t src, std::int32_t dst);
  // Throws if NCCL reported an asynchronous error on any communicator of this process.
  void check() const;
  // The world's 64-bit values, one per process, in rank order.
  std::vector<std::uint64_t> all_gather(std::uint64_t value);

  cuda::NcclCommunicator& world_;
  cuda::Stream stream_;  // the world's collectives
  cuda::Event done_;
  std::vector<Link> links_;  // the links this process is an end of
};

}  // namespace paci::exec::gpu
