// NcclLinks: the start-up checks and link communicators, transfers on the link streams, polling
// waits that turn a peer's failure into an error, and the world's barrier and gather.
#include "exec/cuda/nccl_links.hpp"

#include <fmt/format.h>
#include <chrono>
#include <thread>

#include "cuda/check.hpp"
#include "exec/rank_plan.hpp"

namespace paci::exec::gpu {

NcclLinks::NcclLinks(cuda::NcclCommunicator& world, const Schedule& schedule) : world_(world) {
  check_launch(schedule, world.world_size());
  const std::vector<std::uint64_t> prints = all_gather(schedule_fingerprint(schedule));
  for (std::size_t r = 1; r < prints.size(); ++r)
    if (prints[r] != prints[0])
      throw InputError(fmt::format(
          "process {} runs another schedule than process 0 (fingerprint {:016x} against "
          "{:016x}): give every process the same schedule file and flags",
          r, prints[r], prints[0]));
  // Every process takes part in every split, in the same (src, dst) order.
  const std::int32_t me = world.rank();
  int color = 0;
  for (const DeviceLink& l : device_links(schedule)) {
    const bool mine = l.src == me || l.dst == me;
    cuda::NcclCommunicator comm = world.split(mine ? color : -1, l.src == me ? 0 : 1);
    ++color;
    if (mine) links_.push_back({l.src, l.dst, std::move(comm), cuda::Stream()});
  }
}

NcclLinks::~NcclLinks() = default;

NcclLinks::Link& NcclLinks::link(std::int32_t src, std::int32_t dst) {
  for (Link& l : links_)
    if (l.src == src && l.dst == dst) return l;
  throw std::logic_error(fmt::format("no NCCL link from device {} to device {}", src, dst));
}

void NcclLinks::send(std::int32_t dst, cuda::TensorView data, cudaEvent_t ready, cudaEvent_t done) {
  Link& l = link(world_.rank(), dst);
  PACI_CUDA_CHECK(cudaStreamWaitEvent(l.stream.get(), ready, 0));
  l.comm.send(data, 1, l.stream.get());
  PACI_CUDA_CHECK(cudaEventRecord(done, l.stream.get()));
}

void NcclLinks::receive(std::int32_t src, cuda::MutableTensorView into, cudaEvent_t start,
                        cudaEvent_t done) {
  Link& l = link(src, world_.rank());
  PACI_CUDA_CHECK(cudaEventRecord(start, l.stream.get()));
  l.comm.recv(into, 0, l.stream.get());
  PACI_CUDA_CHECK(cudaEventRecord(done, l.stream.get()));
}

void NcclLinks::check() const {
  world_.check_async();
  for (const Link& l : links_) l.comm.check_async();
}

void NcclLinks::wait(cudaEvent_t event) {
  for (;;) {
    const cudaError_t state = cudaEventQuery(event);
    if (state == cudaSuccess) return;
    if (state != cudaErrorNotReady) PACI_CUDA_CHECK(state);
    check();
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

void NcclLinks::wait_idle() {
  for (Link& l : links_) {
    done_.record(l.stream.get());
    wait(done_.get());
  }
}

std::vector<std::uint64_t> NcclLinks::all_gather(std::uint64_t value) {
  const auto n = static_cast<std::size_t>(world_.world_size());
  cuda::DeviceBuffer<std::uint64_t> mine(1), all(n);
  PACI_CUDA_CHECK(cudaMemcpy(mine.data(), &value, sizeof(value), cudaMemcpyHostToDevice));
  PACI_NCCL_CHECK(
      ncclAllGather(mine.data(), all.data(), 1, ncclUint64, world_.get(), stream_.get()));
  done_.record(stream_.get());
  wait(done_.get());
  std::vector<std::uint64_t> out(n);
  PACI_CUDA_CHECK(cudaMemcpy(out.data(), all.data(), all.bytes(), cudaMemcpyDeviceToHost));
  return out;
}

void NcclLinks::barrier() {
  all_gather(0);
}

std::vector<std::string> NcclLinks::gather(const std::string& bytes, std::int32_t root) {
  const std::vector<std::uint64_t> sizes = all_gather(bytes.size());
  const std::int32_t me = world_.rank();
  std::vector<cuda::DeviceBuffer<unsigned char>> buffers(sizes.size());
  if (me == root) {
    PACI_NCCL_CHECK(ncclGroupStart());
    for (std::size_t r = 0; r < sizes.size(); ++r) {
      if (static_cast<std::int32_t>(r) == root || sizes[r] == 0) continue;
      buffers[r] = cuda::DeviceBuffer<unsigned char>(sizes[r]);
      const ncclResult_t status = ncclRecv(buffers[r].data(), sizes[r], ncclUint8,
                                           static_cast<int>(r), world_.get(), stream_.get());
      if (status != ncclSuccess) ncclGroupEnd();
      PACI_NCCL_CHECK(status);
    }
    PACI_NCCL_CHECK(ncclGroupEnd());
  } else if (!bytes.empty()) {
    buffers[0] = cuda::DeviceBuffer<unsigned char>(bytes.size());
    PACI_CUDA_CHECK(
        cudaMemcpy(buffers[0].data(), bytes.data(), bytes.size(), cudaMemcpyHostToDevice));
    PACI_NCCL_CHECK(
        ncclSend(buffers[0].data(), bytes.size(), ncclUint8, root, world_.get(), stream_.get()));
  }
  done_.record(stream_.get());
  wait(done_.get());
  if (me != root) return {};
  std::vector<std::string> out(sizes.size());
  for (std::size_t r = 0; r < sizes.size(); ++r) {
    if (static_cast<std::int32_t>(r) == root) {
      out[r] = bytes;
    } else if (sizes[r] > 0) {
      out[r].resize(sizes[r]);
      PACI_CUDA_CHECK(
          cudaMemcpy(out[r].data(), buffers[r].data(), sizes[r], cudaMemcpyDeviceToHost));
    }
  }
  return out;
}

void NcclLinks::abort() noexcept {
  for (Link& l : links_) l.comm.abort();
  world_.abort();
}

}  // namespace paci::exec::gpu
