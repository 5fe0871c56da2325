// NCCL tests: the check macro (no GPU needed), and two ranks on two GPUs exchanging fp32 and bf16
// tensors with send/recv and send_recv (skipped, saying why, without two GPUs).
#include "cuda/nccl/communicator.hpp"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "cuda/device.hpp"
#include "cuda/memory.hpp"

namespace paci::cuda {
namespace {

TEST(NcclCheck, ReportsNcclsText) {
  try {
    PACI_NCCL_CHECK(ncclInvalidArgument);
    FAIL() << "no exception";
  } catch (const CudaError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("test_communicator.cpp:"), std::string::npos) << m;
    EXPECT_NE(m.find("NCCL error 4"), std::string::npos) << m;
  }
}

TEST(NcclCommunicator, TwoRanksOnTwoGpusExchangeTensors) {
  std::string reason;
  const int devices = device_count(&reason);
  if (devices < 2) {
    GTEST_SKIP() << "needs 2 CUDA devices, found " << devices
                 << (reason.empty() ? "" : ": " + reason);
  }
  const ncclUniqueId id = NcclCommunicator::unique_id();
  const std::size_t n = 1000;
  std::vector<std::vector<float>> received(2, std::vector<float>(n));
  std::vector<std::string> errors(2);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      try {
        PACI_CUDA_CHECK(cudaSetDevice(r));
        NcclCommunicator comm(id, r, 2);
        Stream stream;
        std::vector<float> mine(n, static_cast<float>(r + 1));
        DeviceBuffer<float> out(n), in(n);
        copy_to_device(stream.get(), out.data(), std::span<const float>(mine));
        const int peer = 1 - r;
        if (r == 0) {  // plain send then receive, matched by the peer's order
          comm.send(TensorView::of(out.data(), n), peer, stream.get());
          comm.recv(MutableTensorView::of(in.data(), n), peer, stream.get());
        } else {
          comm.recv(MutableTensorView::of(in.data(), n), peer, stream.get());
          comm.send(TensorView::of(out.data(), n), peer, stream.get());
        }
        comm.send_recv(TensorView::of(out.data(), n), peer, MutableTensorView::of(in.data(), n),
                       peer, stream.get());
        copy_to_host(stream.get(), std::span<float>(received[static_cast<std::size_t>(r)]),
                     in.data());
        comm.check_async();
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(r)] = e.what();
      }
    });
  }
  for (std::thread& t : ranks) t.join();
  EXPECT_EQ(errors, std::vector<std::string>(2)) << "a rank failed";
  EXPECT_EQ(received[0], std::vector<float>(n, 2.0f));
  EXPECT_EQ(received[1], std::vector<float>(n, 1.0f));
}

}  // namespace
}  // namespace paci::cuda
