// What a command started by mpirun does before its processes meet (built only with MPI): every
// process runs the same setup (flags, files, checks), then they agree on how it went, so that a
// refusal every process shares is said once (by process 0) and a failure only one process meets
// (a file missing on one node) is said by that process, and every process ends either way.
#pragma once

#include <chrono>
#include <exception>
#include <optional>
#include <string>
#include <type_traits>

#include "cli/cli.hpp"
#include "exec/fingerprint.hpp"
#include "exec/mpi/mpi_links.hpp"
#include "exec/remote.hpp"

namespace paci::cli {

// Runs `setup` in every process of `session`'s launch and returns its result where every process
// succeeded. Otherwise each failed process prints its line unless process 0 failed with the same
// text, and every process ends (exec::QuietExit): with its own exit code where it failed, else 2.
template <typename Setup>
std::invoke_result_t<Setup> agreed_setup(const exec::mpi::Session& session,
                                         const std::string& command, Setup&& setup) {
  std::optional<std::invoke_result_t<Setup>> result;
  std::exception_ptr error;
  std::uint64_t mine = 0;  // 0: it worked; else a hash of the failure's text
  try {
    result.emplace(setup());
  } catch (const std::exception& e) {
    error = std::current_exception();
    mine = exec::fingerprint(e.what()) | 1;
  } catch (...) {
    error = std::current_exception();
    mine = 1;
  }
  std::chrono::seconds timeout{600};
  try {
    timeout = exec::link_timeout();
  } catch (const std::exception&) {  // a bad value: the setup says so (and fails)
  }
  const std::vector<std::uint64_t> all = session.all_gather(mine, timeout);
  if (error) {
    const bool say = session.rank() == 0 || all.front() != mine;
    throw exec::QuietExit("setup failed", report_failure(command, error, say));
  }
  for (const std::uint64_t other : all)
    if (other != 0) throw exec::QuietExit("another process's setup failed", 2);
  return std::move(*result);
}

// In the catch of a launch's run: tells the peers that this process stops (if its links were
// made), prints the failure as `command`'s one line, and ends this process quietly after it.
// With expert parallelism a failure every part of a device meets alike (a NaN loss, a bad
// routing) is printed by part 0 only: another part waits up to 3 s for part 0's notice.
[[noreturn]] inline void end_launch(const std::string& command, exec::mpi::MpiLinks* links) {
  if (links != nullptr) links->abort();  // no peer waits on this process any more
  const bool say = links == nullptr || !links->partner_failed(std::chrono::seconds(3));
  throw exec::QuietExit("reported", report_failure(command, std::current_exception(), say));
}

}  // namespace paci::cli
