// Where a process sits in a multi-process launch (rank, world size, local rank, read from the
// launcher's environment: mpirun, srun, or plain variables) and a TCP rendezvous that hands rank
// 0's bytes (the NCCL unique id) to every other rank. Host-only: needs neither NCCL nor MPI, so
// paci train can tell it was started by a launcher whatever backends the build has.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace paci::exec {

struct RendezvousError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct LaunchInfo {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;  // the GPU this process takes on its node
  std::string source;  // which variables said so ("PACI_RANK", "OMPI_COMM_WORLD_RANK", ...)
};

// The first complete set of: PACI_RANK/PACI_WORLD_SIZE/PACI_LOCAL_RANK; Open MPI's
// OMPI_COMM_WORLD_RANK/_SIZE/_LOCAL_RANK; PMI_RANK/PMI_SIZE (MPICH, Intel MPI; local rank from
// MPI_LOCALRANKID); SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID. None: a single process, 0 of 1.
// Throws RendezvousError on a malformed or inconsistent value. `getenv` is replaceable for tests.
LaunchInfo launch_info_from_environment(
    const std::function<const char*(const char*)>& getenv = nullptr);

struct Endpoint {
  std::string host = "127.0.0.1";
  int port = 29517;
};
// PACI_RENDEZVOUS=host:port (rank 0's address as the others reach it); 127.0.0.1:29517 if unset.
Endpoint rendezvous_endpoint_from_environment(
    const std::function<const char*(const char*)>& getenv = nullptr);

// Rank 0's side: listens on every interface at `port` (0: a free port, see port()).
class RendezvousServer {
 public:
  explicit RendezvousServer(int port);
  ~RendezvousServer();
  RendezvousServer(const RendezvousServer&) = delete;
  RendezvousServer& operator=(const RendezvousServer&) = delete;

  int port() const { return port_; }
  // Sends payload to each of `clients` connecting ranks; throws RendezvousError if they have not
  // all come within `timeout` (naming how many did).
  void serve(std::span<const std::uint8_t> payload, int clients, std::chrono::milliseconds timeout);

 private:
  int fd_ = -1;
  int port_ = 0;
};

// Any other rank's side: connects (retrying while rank 0 is not listening yet) and returns the
// payload. Throws RendezvousError after `timeout`.
std::vector<std::uint8_t> fetch_from_rendezvous(const Endpoint& endpoint, int rank,
                                                std::chrono::milliseconds timeout);

}  // namespace paci::exec
