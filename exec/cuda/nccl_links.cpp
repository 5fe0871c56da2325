// NcclLinks: the start-up checks, link communicators and their first messages, transfers on the
// link streams, polling waits, the watchdog, and the world's barrier and gather.
#include "exec/cuda/nccl_links.hpp"

#include <fmt/format.h>

#include "cuda/check.hpp"
#include "exec/fingerprint.hpp"
#include "exec/rank_plan.hpp"

#include <cstring>

namespace paci::exec::gpu {

cuda::NcclCommunicator connect_ranks(const LaunchInfo& info, const Endpoint& endpoint,
                                     std::chrono::milliseconds timeout) {
  PACI_CUDA_CHECK(cudaSetDevice(info.local_rank));
  ncclUniqueId id;
  if (info.rank == 0) {
    id = cuda::NcclCommunicator::unique_id();
    if (info.world_size > 1) {
      RendezvousServer server(endpoint.port);
      const auto* bytes = reinterpret_cast<const std::uint8_t*>(&id);
      server.serve({bytes, sizeof(id)}, info.world_size - 1, timeout);
    }
  } else {
    const std::vector<std::uint8_t> bytes = fetch_from_rendezvous(endpoint, info.rank, timeout);
    if (bytes.size() != sizeof(id)) {
      throw RendezvousError("rendezvous: got " + std::to_string(bytes.size()) +
                            " bytes for the NCCL unique id, expected " +
                            std::to_string(sizeof(id)));
    }
    std::memcpy(&id, bytes.data(), sizeof(id));
  }
  return cuda::NcclCommunicator(id, info.rank, info.world_size);
}

double NcclLinks::clock_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

NcclLinks::NcclLinks(cuda::NcclCommunicator& world, const Schedule& schedule,
                     std::uint64_t fingerprint, std::chrono::seconds timeout)
    : world_(world), timeout_(timeout) {
  check_launch(schedule, world.world_size());
  progress();
  check_fingerprints(all_gather(fingerprint), world.rank());
  // Every process takes part in every split, in the same (src, dst) order.
  const std::int32_t me = world.rank();
  const std::vector<DeviceLink> all = device_links(schedule);
  int color = 0;
  for (const DeviceLink& l : all) {
    const bool mine = l.src == me || l.dst == me;
    cuda::NcclCommunicator comm = world.split(mine ? color : -1, l.src == me ? 0 : 1);
    ++color;
    if (mine) links_.push_back({l.src, l.dst, std::move(comm), cuda::Stream()});
  }
  watchdog_ = std::thread([this] { watch(); });
  try {
    // Connect every link in the one global order: the earliest link not yet connected has both
    // ends waiting on it, so the walk cannot deadlock.
    cuda::DeviceBuffer<float> one(1);
    for (Link& l : links_) {
      guard_.use([&] {
        if (l.src == me)
          l.comm.send(cuda::TensorView{one.data(), 1, cuda::Precision::fp32}, 1, l.stream.get());
        else
          l.comm.recv(cuda::MutableTensorView{one.data(), 1, cuda::Precision::fp32}, 0,
                      l.stream.get());
        done_.record(l.stream.get());
      });
      wait(done_.get());
    }
  } catch (...) {
    abort();  // stops the watchdog (no destructor runs for a constructor that throws)
    throw;
  }
}

NcclLinks::~NcclLinks() {
  stop_ = true;
  if (watchdog_.joinable()) watchdog_.join();
  if (guard_.aborted()) {  // aborted: nothing left to destroy
    for (Link& l : links_) l.comm.release();
    world_.release();
  }
}

void NcclLinks::watch() {
  while (!stop_) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (stop_ || guard_.aborted()) continue;
    std::string why;
    auto check = [&](const cuda::NcclCommunicator& c, const std::string& which) {
      ncclResult_t status = ncclSuccess;
      if (why.empty() && c.get() != nullptr &&
          ncclCommGetAsyncError(c.get(), &status) == ncclSuccess && status != ncclSuccess)
        why = fmt::format("NCCL reported {} on {}: {}", ncclGetErrorString(status), which,
                          ncclGetLastError(c.get()));
    };
    check(world_, "the world communicator");
    for (const Link& l : links_)
      check(l.comm, fmt::format("the link from device {} to device {}", l.src, l.dst));
    if (why.empty() && clock_s() - last_progress_s_ > static_cast<double>(timeout_.count()))
      why = fmt::format(
          "no progress for {} s (a peer may have stopped; PACI_NCCL_TIMEOUT_S sets "
          "the limit)",
          timeout_.count());
    if (!why.empty()) abort_from_watchdog(why);
  }
}

void NcclLinks::abort_from_watchdog(const std::string& why) noexcept {
  guard_.abort(fmt::format("process {}: {}", world_.rank(), why), [&] {
    for (Link& l : links_)
      if (l.comm.get() != nullptr) ncclCommAbort(l.comm.get());
    if (world_.get() != nullptr) ncclCommAbort(world_.get());
  });
}

NcclLinks::Link& NcclLinks::link(std::int32_t src, std::int32_t dst) {
  for (Link& l : links_)
    if (l.src == src && l.dst == dst) return l;
  throw std::logic_error(fmt::format("no NCCL link from device {} to device {}", src, dst));
}

void NcclLinks::send(std::int32_t dst, cuda::TensorView data, cudaEvent_t ready, cudaEvent_t done) {
  guard_.use([&] {
    Link& l = link(world_.rank(), dst);
    PACI_CUDA_CHECK(cudaStreamWaitEvent(l.stream.get(), ready, 0));
    l.comm.send(data, 1, l.stream.get());
    PACI_CUDA_CHECK(cudaEventRecord(done, l.stream.get()));
  });
  progress();
}

void NcclLinks::receive(std::int32_t src, cuda::MutableTensorView into, cudaEvent_t start,
                        cudaEvent_t done) {
  guard_.use([&] {
    Link& l = link(src, world_.rank());
    PACI_CUDA_CHECK(cudaEventRecord(start, l.stream.get()));
    l.comm.recv(into, 0, l.stream.get());
    PACI_CUDA_CHECK(cudaEventRecord(done, l.stream.get()));
  });
  progress();
}

void NcclLinks::wait(cudaEvent_t event) {
  for (;;) {
    guard_.throw_if_aborted();
    const cudaError_t state = cudaEventQuery(event);
    if (state == cudaSuccess) break;
    if (state != cudaErrorNotReady) PACI_CUDA_CHECK(state);
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  progress();
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
  // Ordered on stream_ (a plain cudaMemcpy from pageable memory may return before the data lands
  // and is not ordered with a non-blocking stream).
  guard_.use([&] {
    PACI_CUDA_CHECK(
        cudaMemcpyAsync(mine.data(), &value, sizeof(value), cudaMemcpyHostToDevice, stream_.get()));
    PACI_NCCL_CHECK(
        ncclAllGather(mine.data(), all.data(), 1, ncclUint64, world_.get(), stream_.get()));
    done_.record(stream_.get());
  });
  wait(done_.get());  // polled: a copy queued behind the all-gather would block unwatched
  std::vector<std::uint64_t> out(n);
  PACI_CUDA_CHECK(cudaMemcpy(out.data(), all.data(), all.bytes(), cudaMemcpyDeviceToHost));
  return out;
}

void NcclLinks::barrier() {
  all_gather(0);
}

std::vector<std::string> NcclLinks::gather(std::string bytes, std::int32_t root) {
  const std::vector<std::uint64_t> sizes = all_gather(bytes.size());
  const std::int32_t me = world_.rank();
  std::vector<cuda::DeviceBuffer<unsigned char>> buffers(sizes.size());
  guard_.use([&] {  // the transfers are queued under the lock
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
      PACI_CUDA_CHECK(cudaMemcpyAsync(buffers[0].data(), bytes.data(), bytes.size(),
                                      cudaMemcpyHostToDevice, stream_.get()));
      PACI_NCCL_CHECK(
          ncclSend(buffers[0].data(), bytes.size(), ncclUint8, root, world_.get(), stream_.get()));
    }
    done_.record(stream_.get());
  });
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
  stop_ = true;
  if (watchdog_.joinable() && watchdog_.get_id() != std::this_thread::get_id()) watchdog_.join();
  guard_.abort(  // nothing when the watchdog already did
      fmt::format("process {}: this process stopped its links after a failure", world_.rank()),
      [&] {
        for (Link& l : links_) l.comm.abort();
        world_.abort();
      });
}

}  // namespace paci::exec::gpu
