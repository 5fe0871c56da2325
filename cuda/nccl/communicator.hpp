// NCCL point-to-point between pipeline ranks, one process per GPU: a communicator (RAII; aborted,
// not destroyed, when it dies by an exception or after abort(), so peers are not left waiting on
// it) and send/recv of device tensors on a stream. How the ranks find each other (the unique id's
// rendezvous) is the launch's business: exec::gpu::connect_ranks() (exec/cuda/nccl_links.hpp).
#pragma once

#include <nccl.h>

#include <chrono>

#include "cuda/check.hpp"
#include "cuda/precision.hpp"

namespace paci::cuda {

inline void check_nccl(ncclResult_t status, const char* file, int line, const char* expression) {
  if (status != ncclSuccess) {
    fail_call(file, line, "NCCL", static_cast<int>(status), ncclGetErrorString(status), expression);
  }
}

}  // namespace paci::cuda

// PACI_NCCL_CHECK(ncclSend(...)): throws CudaError naming file, line, expression and NCCL's text.
#define PACI_NCCL_CHECK(call) ::paci::cuda::check_nccl((call), __FILE__, __LINE__, #call)

namespace paci::cuda {

class NcclCommunicator {
 public:
  // Made on rank 0 and handed to the others (exec::gpu::connect_ranks does it over TCP).
  static ncclUniqueId unique_id();

  // Collective: every rank calls it with the same id and world size, its own rank, and the GPU it
  // uses already current (cudaSetDevice). Blocks until all ranks have joined.
  NcclCommunicator(const ncclUniqueId& id, int rank, int world_size);
  // Empty: belongs to no group (what split() returns to a process outside the new group).
  NcclCommunicator() = default;
  ~NcclCommunicator();
  NcclCommunicator(NcclCommunicator&& other) noexcept;
  NcclCommunicator& operator=(NcclCommunicator&& other) noexcept;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  // Collective over this communicator (ncclCommSplit): the processes giving the same color >= 0
  // get a new communicator among them, ranked by key; a negative color gets an empty one.
  NcclCommunicator split(int color, int key) const;

  bool empty() const { return comm_ == nullptr; }
  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  ncclComm_t get() const { return comm_; }

  // Queued on `stream`; the matching call on `peer` must come (in the same order between the two).
  void send(TensorView data, int peer, cudaStream_t stream);
  void recv(MutableTensorView data, int peer, cudaStream_t stream);
  // A send and a receive in one NCCL group (a middle stage passing an activation forward while
  // taking a gradient back), so the two ranks cannot deadlock on each other's order.
  void send_recv(TensorView send_data, int send_peer, MutableTensorView recv_data, int recv_peer,
                 cudaStream_t stream);

  // Throws CudaError if NCCL reported an asynchronous error (a peer aborted, a link failed).
  // Nothing to check on an empty communicator.
  void check_async() const;
  // ncclCommAbort: drops this rank out so that it never blocks anyone again. Idempotent.
  void abort() noexcept;
  // Forgets the handle without destroying it (after another thread aborted it through get()).
  void release() noexcept { comm_ = nullptr; }

 private:
  ncclComm_t comm_ = nullptr;
  int rank_ = 0, world_size_ = 1;
  int uncaught_at_construction_ = 0;
};

}  // namespace paci::cuda
