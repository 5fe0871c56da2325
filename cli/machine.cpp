// machine_json / machine_line: cores from the C++ runtime, the CPU model from /proc/cpuinfo (or
// "unknown CPU"), the BLAS from model::blas_identity().
#include "cli/machine.hpp"

#include <fmt/format.h>
#include <fstream>
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

}  // namespace paci::cli
