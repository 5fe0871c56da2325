// machine_json / machine_line, blas_json, metrics_head_line: cores from the C++ runtime, the CPU
// model from /proc/cpuinfo (or "unknown CPU"), the BLAS from model::blas_identity();
// unbind_from_cores (sched_setaffinity).
#include "exec/machine.hpp"

#include <fmt/format.h>
#include <sched.h>
#include <unistd.h>
#include <fstream>
#include <iostream>
#include <thread>

#include "model/blas_kernel.hpp"

namespace paci::exec {

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

ordered_json blas_json(const model::BlasIdentity& identity) {
  ordered_json j;
  j["library"] = identity.library;
  j["kernel"] = identity.kernel;
  j["chosen_by"] = std::string(model::to_string(identity.chosen_by));
  j["cpu"] = identity.cpu ? std::string(model::to_string(*identity.cpu)) : "not x86";
  if (!identity.requested.empty()) j["requested"] = identity.requested;
  if (!identity.openblas_choice.empty()) j["openblas_choice"] = identity.openblas_choice;
  return j;
}

std::string metrics_head_line(const TrainSetup& t, const std::string& version) {
  ordered_json j;
  j["run"] = {{"paci", version},
              {"kind", t.schedule.kind},
              {"stages", t.schedule.stages},
              {"microbatches", t.schedule.microbatches},
              {"first_step", t.first_step},
              {"last_step", t.last_step}};
  j["blas"] = blas_json(model::blas_identity());
  return j.dump() + "\n";
}

}  // namespace paci::exec
