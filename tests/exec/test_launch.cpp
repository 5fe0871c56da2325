// Tests of the launch environment and the TCP rendezvous (no GPU, no NCCL calls): rank variables
// of each launcher, the endpoint, and a loopback rendezvous with several ranks and its timeouts.
#include "exec/launch.hpp"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <thread>
#include <vector>

namespace paci::exec {
namespace {

// A fake environment for the parsers.
auto environment(std::map<std::string, std::string> values) {
  return [values = std::move(values)](const char* name) -> const char* {
    const auto it = values.find(name);
    return it == values.end() ? nullptr : it->second.c_str();
  };
}

TEST(LaunchInfo, ReadsEachLaunchersVariables) {
  LaunchInfo info =
      launch_info_from_environment(environment({{"OMPI_COMM_WORLD_RANK", "3"},
                                                {"OMPI_COMM_WORLD_SIZE", "4"},
                                                {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}}));
  EXPECT_EQ(info.rank, 3);
  EXPECT_EQ(info.world_size, 4);
  EXPECT_EQ(info.local_rank, 1);
  EXPECT_EQ(info.source, "OMPI_COMM_WORLD_RANK");
  info = launch_info_from_environment(environment({{"PACI_RANK", "0"},
                                                   {"PACI_WORLD_SIZE", "2"},
                                                   {"SLURM_PROCID", "5"},
                                                   {"SLURM_NTASKS", "8"}}));
  EXPECT_EQ(info.source, "PACI_RANK");  // ours first
  EXPECT_EQ(info.local_rank, 0);        // defaults to the rank
  info = launch_info_from_environment(
      environment({{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "8"}, {"SLURM_LOCALID", "1"}}));
  EXPECT_EQ(info.rank, 5);
  EXPECT_EQ(info.local_rank, 1);
  info = launch_info_from_environment(environment({}));
  EXPECT_EQ(info.world_size, 1);
  EXPECT_EQ(info.source, "single process");
}

TEST(LaunchInfo, RejectsMalformedValues) {
  EXPECT_THROW(
      launch_info_from_environment(environment({{"PACI_RANK", "two"}, {"PACI_WORLD_SIZE", "4"}})),
      RendezvousError);
  EXPECT_THROW(
      launch_info_from_environment(environment({{"PACI_RANK", "4"}, {"PACI_WORLD_SIZE", "4"}})),
      RendezvousError);
}

TEST(Rendezvous, EndpointFromTheEnvironment) {
  EXPECT_EQ(rendezvous_endpoint_from_environment(environment({})).port, 29517);
  const Endpoint e =
      rendezvous_endpoint_from_environment(environment({{"PACI_RENDEZVOUS", "node7:1234"}}));
  EXPECT_EQ(e.host, "node7");
  EXPECT_EQ(e.port, 1234);
  EXPECT_THROW(rendezvous_endpoint_from_environment(environment({{"PACI_RENDEZVOUS", "node7"}})),
               RendezvousError);
}

TEST(Rendezvous, EveryRankGetsRankZerosBytesOverLoopback) {
  RendezvousServer server(0);  // a free port
  const Endpoint endpoint{"127.0.0.1", server.port()};
  const std::vector<std::uint8_t> payload{1, 2, 3, 250, 0, 7};
  std::vector<std::vector<std::uint8_t>> got(3);
  std::vector<std::thread> ranks;
  for (int r = 1; r <= 3; ++r) {
    ranks.emplace_back([&, r] {
      got[static_cast<std::size_t>(r - 1)] =
          fetch_from_rendezvous(endpoint, r, std::chrono::seconds(10));
    });
  }
  server.serve(payload, 3, std::chrono::seconds(10));
  for (std::thread& t : ranks) t.join();
  for (const auto& g : got) EXPECT_EQ(g, payload);
}

TEST(Rendezvous, TimesOutSayingHowManyCame) {
  RendezvousServer server(0);
  try {
    server.serve(std::vector<std::uint8_t>{1}, 2, std::chrono::milliseconds(200));
    FAIL() << "no timeout";
  } catch (const RendezvousError& e) {
    EXPECT_NE(std::string(e.what()).find("0 of 2 ranks came"), std::string::npos) << e.what();
  }
  int closed_port = 0;
  {
    RendezvousServer gone(0);
    closed_port = gone.port();
  }
  EXPECT_THROW(fetch_from_rendezvous({"127.0.0.1", closed_port}, 1, std::chrono::milliseconds(300)),
               RendezvousError);
}

}  // namespace
}  // namespace paci::exec
