// The launch checks: launch_info, refuse_without_mpi, check_mpi_sees,
// check_one_process_per_device.
#include "exec/launch_checks.hpp"

#include <fmt/format.h>

#include "base/errors.hpp"
#include "exec/remote.hpp"

namespace paci::exec {

LaunchInfo launch_info() {
  try {
    return launch_info_from_environment();
  } catch (const RendezvousError& e) {
    throw InputError(e.what());
  }
}

void refuse_without_mpi(const LaunchInfo& launch, const std::string& needs) {
  if (launch.rank != 0) throw QuietExit("built without MPI", 2);  // process 0 says it
  throw InputError(fmt::format(
      "started as process {} of {} by a launcher ({}), but this paci was built without MPI, "
      "which {} needs (apt-get install libopenmpi-dev, then rebuild; see docs/multiprocess.md)",
      launch.rank, launch.world_size, launch.source, needs));
}

void check_mpi_sees(const LaunchInfo& launch, int mpi_processes, const std::string& command) {
  if (mpi_processes == launch.world_size) return;
  // Then every process is alone in a world of its own: only launcher's rank 0 says it.
  if (launch.rank != 0) throw QuietExit("MPI does not see the launch", 2);
  throw InputError(fmt::format(
      "started as process {} of {} by a launcher ({}), but MPI sees {} process{}: start paci {} "
      "with mpirun (or srun with MPI support)",
      launch.rank, launch.world_size, launch.source, mpi_processes, mpi_processes == 1 ? "" : "es",
      command));
}

void check_one_process_per_device(int processes, std::int32_t devices) {
  if (processes != devices)
    throw InputError(
        fmt::format("the launch has {} processes for {} devices: start one process "
                    "per device (mpirun -np {})",
                    processes, devices, devices));
}

}  // namespace paci::exec
