// One process per schedule device (a launch by mpirun, srun or PACI_RANK/PACI_WORLD_SIZE): what
// every transport between processes shares, whatever memory its messages live in.
//
// ProcessLinks is the process-level half of the links interface: which device this process runs,
// the barrier that starts every process's clock together, the gather that brings every process's
// results and state to the one that writes the outputs, and abort(). Two transports implement it:
//   - HostLinks (below): messages in host memory, the Transport the CPU executor uses;
//     exec/mpi/mpi_links.hpp implements it over MPI point-to-point.
//   - exec::gpu::RemoteLinks (exec/cuda/remote.hpp): messages in device memory ordered by CUDA
//     events; exec/cuda/nccl_links.hpp implements it over NCCL.
// The rest of a multi-process run is shared by both: the launch checks (exec/rank_plan.hpp), the
// fingerprints (exec/fingerprint.hpp), the link timeout, and the gathers below.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "exec/stage_plan.hpp"
#include "exec/transport.hpp"
#include "model/checkpoint_state.hpp"
#include "model/stage.hpp"
#include "schedules/ir.hpp"

namespace paci::exec {

class ProcessLinks {
 public:
  virtual ~ProcessLinks() = default;
  // The schedule device this process runs (its rank).
  virtual std::int32_t local_device() const = 0;
  // Blocks until every process has called it: the common origin of the processes' clocks.
  virtual void barrier() = 0;
  // Collective, blocking: `root` gets every process's bytes in device order; the others get an
  // empty vector. Taken by value: a transport may keep them without a copy.
  virtual std::vector<std::string> gather(std::string bytes, std::int32_t root) = 0;
  // Drops out of every link and tells the peers, so that no peer waits on this process any more.
  // Idempotent.
  virtual void abort() noexcept = 0;
  // Whether a link's messages must be received in the order they were sent (NCCL); false when a
  // message that arrives ahead of its turn is kept until its consumer asks (MpiLinks).
  virtual bool in_order() const { return true; }

  // Expert parallelism: several processes run each device, each holding one part of its stages'
  // experts (every process of a part runs the whole schedule on the same data). Without it, the
  // one part of one, no exchange, and a gather of this process's bytes alone.
  virtual model::ExpertShard expert_shard() const { return {}; }
  // What this process's stages share their experts' rows through (null without).
  virtual model::ExpertExchange* expert_exchange() { return nullptr; }
  // Collective over the processes running this device: part 0 gets every part's bytes in part
  // order, the others an empty vector.
  virtual std::vector<std::string> gather_expert_parts(std::string bytes) { return {bytes}; }
};

// The CPU executor's links to other processes: a Transport whose send() has this process's
// device as its source and whose receive() has it as its destination. A link's messages are
// received in the order they were sent (exec::device_links() checks that a schedule allows it)
// unless in_order() says otherwise.
class HostLinks : public ProcessLinks, public Transport {
 public:
  void abort() noexcept override = 0;
  // When set (by the executor, for its run), a send's end is stamped when the send is queued.
  const RunClock* clock = nullptr;
};

// Ends a process of a multi-process launch with `exit_code`, printing nothing more: a peer failed
// and reports it itself, or this process has already printed its one line (or every process
// refused what they all checked, and process 0 says it). So a failed launch says why once.
struct QuietExit : std::runtime_error {
  QuietExit(const std::string& what, int code) : std::runtime_error(what), exit_code(code) {}
  int exit_code = 1;
};

// How long one wait of a process on its links may last before it gives up:
// PACI_LINK_TIMEOUT_S (PACI_NCCL_TIMEOUT_S is read too, for old scripts); 600 s if unset.
// Throws InputError on a value that is not a positive number of seconds.
std::chrono::seconds link_timeout(const std::function<const char*(const char*)>& getenv = nullptr);

// Collective: every process's ExecResult part, merged on the process running the last stage (the
// writer, exec::last_stage_device()); the others get `local` back.
ExecResult gather_result(ProcessLinks& links, const Schedule& schedule, const ExecResult& local);

// Collective over the processes running this device (expert parallelism): their parts of these
// stages' states assembled into whole stages on part 0 (model::copy_tensors); the others get an
// empty vector.
std::vector<model::StageState> assemble_expert_parts(ProcessLinks& links,
                                                     const model::GptConfig& config,
                                                     std::span<const model::StageStateView> mine);

// Collective: every process's stage states (weights, AdamW moments and steps) on the writer, in
// layer order; the others get an empty vector.
std::vector<model::StageState> gather_stage_states(ProcessLinks& links, const Schedule& schedule,
                                                   std::span<const model::StageStateView> mine);

}  // namespace paci::exec
