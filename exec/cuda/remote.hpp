// Messages to and from schedule devices that other processes run (one process per GPU, started by
// mpirun or any launcher): the interface GpuPipeline uses in a multi-process launch. The
// process-level half (local device, barrier, gather, abort) is exec::ProcessLinks, shared with the
// CPU executor's MPI links (exec/remote.hpp); this adds the data plane in device memory, ordered
// by CUDA events. NcclLinks (exec/cuda/nccl_links.hpp) implements it with NCCL; the pipeline needs
// nothing else from NCCL.
//
// Every call is asynchronous on the GPU unless it says otherwise. Messages on one directed link
// are matched in the order they are queued, so both ends must queue them in the same order:
// exec::device_links() (exec/rank_plan.hpp) checks that a schedule does.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/precision.hpp"
#include "exec/remote.hpp"

namespace paci::exec::gpu {

class RemoteLinks : public ProcessLinks {
 public:
  // Queues the next message to device `dst`: it starts once `ready` (recorded on the producer's
  // stream) has completed; `done` is recorded when `data` may be reused.
  virtual void send(std::int32_t dst, cuda::TensorView data, cudaEvent_t ready,
                    cudaEvent_t done) = 0;
  // Queues the receive of the next message from device `src` into `into`; `start` is recorded
  // when the receive is queued to run, `done` when the data is in.
  virtual void receive(std::int32_t src, cuda::MutableTensorView into, cudaEvent_t start,
                       cudaEvent_t done) = 0;

  // Blocks until `event` has completed, throwing instead if a peer or a link failed meanwhile
  // (a blocked NCCL transfer would otherwise never end).
  virtual void wait(cudaEvent_t event) = 0;
  // Blocks until every queued send and receive has completed (same failure rule as wait()).
  virtual void wait_idle() = 0;
};

}  // namespace paci::exec::gpu
