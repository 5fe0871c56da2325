// NcclCommunicator. Sends and receives name the tensor's precision as the NCCL
// type (float32 or bfloat16) and its element count, so both sides must agree on both.
#include "cuda/nccl/communicator.hpp"

#include <cstring>
#include <exception>
#include <string>
#include <utility>
#include <vector>

namespace paci::cuda {
namespace {

ncclDataType_t nccl_type(Precision p) {
  return p == Precision::fp32 ? ncclFloat32 : ncclBfloat16;
}

}  // namespace

ncclUniqueId NcclCommunicator::unique_id() {
  ncclUniqueId id;
  PACI_NCCL_CHECK(ncclGetUniqueId(&id));
  return id;
}

NcclCommunicator::NcclCommunicator(const ncclUniqueId& id, int rank, int world_size)
    : rank_(rank), world_size_(world_size), uncaught_at_construction_(std::uncaught_exceptions()) {
  PACI_CUDA_REQUIRE(world_size > 0 && rank >= 0 && rank < world_size,
                    "rank " + std::to_string(rank) + " of " + std::to_string(world_size));
  PACI_NCCL_CHECK(ncclCommInitRank(&comm_, world_size, id, rank));
}

NcclCommunicator NcclCommunicator::split(int color, int key) const {
  ncclComm_t comm = nullptr;
  PACI_NCCL_CHECK(
      ncclCommSplit(comm_, color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, &comm, nullptr));
  NcclCommunicator out;
  if (comm == nullptr) return out;
  out.comm_ = comm;
  out.uncaught_at_construction_ = std::uncaught_exceptions();
  PACI_NCCL_CHECK(ncclCommUserRank(comm, &out.rank_));
  PACI_NCCL_CHECK(ncclCommCount(comm, &out.world_size_));
  return out;
}

NcclCommunicator::~NcclCommunicator() {
  if (comm_ == nullptr) return;
  if (std::uncaught_exceptions() > uncaught_at_construction_) {
    ncclCommAbort(comm_);  // unwinding from a failure: do not wait for peers
  } else {
    ncclCommDestroy(comm_);
  }
}

NcclCommunicator::NcclCommunicator(NcclCommunicator&& other) noexcept
    : comm_(std::exchange(other.comm_, nullptr)),
      rank_(other.rank_),
      world_size_(other.world_size_),
      uncaught_at_construction_(other.uncaught_at_construction_) {}

NcclCommunicator& NcclCommunicator::operator=(NcclCommunicator&& other) noexcept {
  std::swap(comm_, other.comm_);
  std::swap(rank_, other.rank_);
  std::swap(world_size_, other.world_size_);
  std::swap(uncaught_at_construction_, other.uncaught_at_construction_);
  return *this;
}

void NcclCommunicator::send(TensorView data, int peer, cudaStream_t stream) {
  PACI_NCCL_CHECK(ncclSend(data.data, data.count, nccl_type(data.precision), peer, comm_, stream));
}

void NcclCommunicator::recv(MutableTensorView data, int peer, cudaStream_t stream) {
  PACI_NCCL_CHECK(ncclRecv(data.data, data.count, nccl_type(data.precision), peer, comm_, stream));
}

void NcclCommunicator::send_recv(TensorView send_data, int send_peer, MutableTensorView recv_data,
                                 int recv_peer, cudaStream_t stream) {
  PACI_NCCL_CHECK(ncclGroupStart());
  try {
    send(send_data, send_peer, stream);
    recv(recv_data, recv_peer, stream);
  } catch (...) {
    ncclGroupEnd();
    throw;
  }
  PACI_NCCL_CHECK(ncclGroupEnd());
}

void NcclCommunicator::check_async() const {
  if (comm_ == nullptr) return;
  ncclResult_t status = ncclSuccess;
  PACI_NCCL_CHECK(ncclCommGetAsyncError(comm_, &status));
  if (status != ncclSuccess) {
    fail_call(__FILE__, __LINE__, "NCCL", static_cast<int>(status),
              std::string(ncclGetErrorString(status)) + " (" + ncclGetLastError(comm_) + ")",
              "ncclCommGetAsyncError");
  }
}

void NcclCommunicator::abort() noexcept {
  if (comm_ != nullptr) ncclCommAbort(comm_);
  comm_ = nullptr;
}

}  // namespace paci::cuda
