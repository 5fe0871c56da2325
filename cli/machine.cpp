// machine_json / machine_line: cores from the C++ runtime, the CPU model from /proc/cpuinfo (or
// "unknown CPU"), the BLAS from model::blas_identity(); unbind_from_cores (sched_setaffinity).
#include "cli/machine.hpp"

#include <fmt/format.h>
#include <sched.h>
#include <unistd.h>
#include <fstream>
#include <iostream>
#include <thread>

#include "model/blas_kernel.hpp"

namespace paci::cli {

namespace {

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos && colon + 2 <= line.size()) return line.substr(colon + 2);
    }
  return "unknown CPU";
}

}  // namespace

ordered_json machine_json() {
  ordered_json j;
  j["cores"] = std::thread::hardware_concurrency();
  j["cpu"] = cpu_model();
  j["blas"] = model::describe(model::blas_identity());
  return j;
}

std::string machine_line() {
  const ordered_json j = machine_json();
  return fmt::format("{} cores, {}, {}", j["cores"].get<unsigned>(), j["cpu"].get<std::string>(),
                     j["blas"].get<std::string>());
}

void unbind_from_cores(const std::string& command) {
  cpu_set_t all;
  CPU_ZERO(&all);
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  for (long c = 0; c < cores && c < CPU_SETSIZE; ++c) CPU_SET(static_cast<int>(c), &all);
  if (sched_setaffinity(0, sizeof(all), &all) != 0)
    std::cerr << "paci " << command
              << ": note: could not widen process 0's core binding; the stages' slowdown may be "
                 "overstated (mpirun --bind-to none avoids it)\n";
}

}  // namespace paci::cli
