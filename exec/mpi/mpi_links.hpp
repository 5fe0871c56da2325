// HostLinks over MPI: one process per schedule device on CPUs (mpirun -np P paci train --device
// cpu), rank r running schedule device r. Built where MPI is found (CMake option PACI_MPI, target
// paci_exec_mpi).
//
// Messages: every send is a non-blocking MPI_Isend from a pooled buffer (the executor goes on at
// once; a buffer is reused once its send completed); every receive an MPI_Irecv polled to its end.
// All messages of the run travel on one tag of a communicator of their own, so MPI's
// non-overtaking rule keeps each directed link in sending order; each message carries its key
// (kind, producing stage, micro-batch) and send times in a header, and a receive checks the key
// against the one it expects. Barrier and gather are non-blocking collectives, polled.
//
// Failure: every wait polls, besides its request, a receive posted on a control tag. A process
// that fails calls abort(), which sends its rank to every peer on that tag; a peer's next wait
// then throws QuietExit, and every process ends at its next message instead of waiting forever.
// A wait that lasts `timeout` throws too (a peer that hangs). A peer that dies is the launcher's
// to report: mpirun ends the job when a process is killed (docs/multiprocess.md).
//
// Progress: a message past MPI's eager limit also needs its sender to call into MPI unless the
// transport copies it alone (Open MPI's shared memory with cross-memory attach does); the sender
// calls in at every message of its own, so such a message may arrive up to one action late over
// TCP (docs/multiprocess.md).
//
// Expert parallelism (expert_parts e > 1): e processes run each device, world rank d·e + j running
// device d with part j of its experts. The processes of part j form the pipeline (their own
// communicator: part j's links); those of device d share expert rows (an all-gather on a
// communicator of their own) and gather their parts of the stage states. A failure reaches every
// process of the world.
//
// MPI is initialised for calls from one thread (MPI_THREAD_FUNNELED): the executor runs its one
// device in the thread that owns the links.
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "exec/calibrate.hpp"
#include "exec/remote.hpp"
#include "schedules/ir.hpp"

namespace paci::exec::mpi {

// MPI_Init_thread on construction and MPI_Finalize on destruction, once per process.
class Session {
 public:
  Session();
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
  int rank() const { return rank_; }
  int size() const { return size_; }
  // Collective over MPI_COMM_WORLD, blocking (polled, sleeping between polls): every process's
  // value, in rank order. Throws after `timeout`.
  std::vector<std::uint64_t> all_gather(std::uint64_t value, std::chrono::seconds timeout) const;
  // Collective: how many processes of the launch share this process's machine
  // (MPI_COMM_TYPE_SHARED).
  int local_size() const;
  // "Open MPI v4.1.4, ..." (MPI_Get_library_version's first line).
  static std::string library();

 private:
  int rank_ = 0, size_ = 1;
};

class MpiLinks final : public HostLinks, public model::ExpertExchange {
 public:
  // Collective over MPI_COMM_WORLD. Throws InputError when the world's size is not the schedule's
  // device count times expert_parts (check_launch: any valid schedule runs, its early messages
  // kept), and through check_fingerprints() when another process gives another `fingerprint`.
  MpiLinks(const Schedule& schedule, std::uint64_t fingerprint, std::chrono::seconds timeout,
           std::int32_t expert_parts = 1);
  // Collective with no schedule: every pair of processes may exchange messages (paci calibrate's
  // link measurement). Checks only the fingerprint.
  MpiLinks(std::uint64_t fingerprint, std::chrono::seconds timeout);
  ~MpiLinks() override;
  MpiLinks(const MpiLinks&) = delete;
  MpiLinks& operator=(const MpiLinks&) = delete;

  std::int32_t local_device() const override { return rank_; }
  std::int32_t processes() const { return size_; }

  void send(std::int32_t src, std::int32_t dst, const MessageKey& key, std::span<const float> data,
            SendTimes times) override;
  SendTimes receive(std::int32_t dst, std::int32_t src, const MessageKey& key,
                    std::span<float> out) override;
  bool ready(std::int32_t dst, std::int32_t src, const MessageKey& key) override;
  void barrier() override;
  std::vector<std::string> gather(std::string bytes, std::int32_t root) override;
  void abort() noexcept override;
  // A message that arrives ahead of its turn is kept until its consumer asks.
  bool in_order() const override { return false; }

  model::ExpertShard expert_shard() const override {
    return {static_cast<std::size_t>(part_), static_cast<std::size_t>(parts_)};
  }
  model::ExpertExchange* expert_exchange() override { return parts_ > 1 ? this : nullptr; }
  std::vector<std::string> gather_expert_parts(std::string bytes) override;
  // The expert group's all-gather (MPI_Iallgatherv of rows, polled like every wait), after a
  // check that every member's routing bounds agree (runtime_error naming the parts otherwise).
  void share(std::span<float> rows, std::span<const std::size_t> first, std::size_t width) override;
  // After this process's abort(), a part other than 0: whether its device's part 0 said within
  // `within` that it failed too (a failure every part meets alike, such as a NaN loss, is then
  // said once, by part 0). False at once for part 0, without expert parallelism, or when this
  // process stops for a peer's failure.
  bool partner_failed(std::chrono::milliseconds within) noexcept;

  // Blocks until every send this process queued has completed (its receiver took it).
  void wait_sends();
  // How long one wait may last before it gives up (from now on).
  void set_timeout(std::chrono::seconds timeout) { timeout_ = timeout; }

 private:
  struct Header {
    std::int32_t kind = 0, stage = 0, microbatch = 0, floats = 0;
    double send_start_s = 0.0, send_end_s = 0.0;
  };
  struct Outgoing {
    std::vector<char> bytes;
    MPI_Request request = MPI_REQUEST_NULL;
    std::int32_t dst = 0;
  };
  // Every buffer MPI may still read or write. After a failure, requests nobody will complete are
  // left to MPI_Finalize, so these outlive the links (kept until the process exits).
  struct Buffers {
    std::deque<Outgoing> sends;            // in flight, oldest first
    std::vector<std::vector<char>> spare;  // buffers of completed sends, reused
    std::vector<char> incoming;            // a receive's header and data
    // Messages that arrived ahead of their turn (a link's sends in another order than its
    // consumer's receives, as in ZB-V), by source and key, until their consumer asks.
    std::map<std::tuple<std::int32_t, int, std::int32_t, std::int32_t>, std::vector<char>> early;
    std::int32_t control_in = -1;           // a peer's rank, when it says it failed
    std::vector<std::int32_t> control_out;  // what abort() sends (one rank per peer)
    std::uint64_t fingerprint = 0;          // the start-up check's
    std::vector<std::uint64_t> prints;
    std::int64_t size = 0;  // a gather's
    std::vector<std::int64_t> sizes;
    std::string gather_out;
    std::vector<std::string> gather_in;
    std::vector<int> counts, displs;  // an expert all-gather's, in rows
    std::vector<float> share_rows;    // its rows, staged
    std::uint64_t share_print = 0;    // its routing bounds' fingerprint, and every member's
    std::vector<std::uint64_t> share_prints;
    std::int32_t partner_in = -1;  // part 0's failure notice (partner_failed)
  };
  void connect(std::uint64_t fingerprint, std::int32_t expert_parts);
  // Where a process of this part's pipeline, or of `comm`, is in the world (error messages).
  std::int32_t world_of_device(std::int32_t device) const { return device * parts_ + part_; }
  std::int32_t world_rank_in(MPI_Comm comm, std::int32_t rank) const;
  // Bytes of every process of `comm` on its `root` (point to point in chunks).
  std::vector<std::string> gather_on(MPI_Comm comm, std::string bytes, std::int32_t root);
  // Polls `request` to completion, watching the control receive and the timeout meanwhile;
  // `what` and `peer` (-1: a collective) name it in a timeout's message. `sleep`: between polls,
  // else spin (a barrier whose end starts the clocks).
  void wait(MPI_Request& request, const char* what, std::int32_t peer, MPI_Status* status = nullptr,
            bool sleep = true);
  // The same loop around any test: until `done()` says so.
  void poll(const std::function<bool()>& done, const char* what, std::int32_t peer, bool sleep);
  void check_peers();              // throws QuietExit once a peer said it failed
  void cancel_receive() noexcept;  // the receive left pending by a failure
  // Ends the links: after a failure, leaves what nobody completed to MPI_Finalize and keeps the
  // buffers it may touch until the process exits. Idempotent.
  void close() noexcept;
  void reclaim_sends();

  MPI_Comm world_ = MPI_COMM_NULL;    // every process: the control tag and the start-up check
  MPI_Comm comm_ = MPI_COMM_NULL;     // this expert part's pipeline: the links' messages
  MPI_Comm experts_ = MPI_COMM_NULL;  // the processes running this device
  std::int32_t rank_ = 0, size_ = 1;  // in comm_: the device, the device count
  std::int32_t world_rank_ = 0, part_ = 0, parts_ = 1;
  std::chrono::seconds timeout_;
  std::unique_ptr<Buffers> b_ = std::make_unique<Buffers>();
  MPI_Request control_ = MPI_REQUEST_NULL;    // the posted control receive
  MPI_Request partner_ = MPI_REQUEST_NULL;    // part 0's notice, awaited by partner_failed()
  MPI_Request receiving_ = MPI_REQUEST_NULL;  // a message or gathered bytes being received
  std::vector<MPI_Request> control_sends_;
  bool aborted_ = false, peer_failed_ = false;
};

// Collective: the link between every pair of processes, one pair at a time while the others wait
// at a barrier: `repeats` round trips of a one-float message, then of a message of `floats`
// floats, after a few unmeasured ones. Process 0 gets every pair (a < b, in order); the others an
// empty vector.
std::vector<PairLinkMeasurement> measure_links(MpiLinks& links, std::size_t floats,
                                               std::size_t repeats);

// Collective: every process's node (MPI_Get_processor_name), on process 0, in rank order.
std::vector<std::string> node_names(MpiLinks& links);

}  // namespace paci::exec::mpi
