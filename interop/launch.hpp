// Launch scripts for a plan: the command each tool runs it with on the cluster, under torchrun
// (one call per node; srun as the alternative), with the environment the plan needs, absolute
// paths and the model. paci plan -o DIR writes them beside the plan's other files.
#pragma once

#include <string>
#include <vector>

#include "interop/tool.hpp"
#include "plan/evaluate/evaluate.hpp"

namespace paci::interop {

// Nodes and processes per node for `config`: every node full (GPUs per node of the cluster),
// one node with `gpus` processes when the run is smaller than a node.
struct Launch {
  std::int64_t nodes = 1, processes_per_node = 1;
};
Launch launch_of(const plan::PlanConfig& config);

// The bash script that launches `plan` with `tool` (megatron or torchtitan); `dir` is the
// absolute folder it will sit in (the schedule CSV torchtitan loads is there). With
// PACI_DRY_RUN=1 in its environment the script prints the command, one word a line, and launches
// nothing. InputError with refusal()'s line when the tool cannot run the plan.
std::string launch_script(Tool tool, const plan::PlanResult& plan, const std::string& dir);

// Writes into `dir` schedule.csv (PyTorch's CSV), megatron.sh and torchtitan.sh, each when its
// tool can run the plan, every file atomically; returns one line per file not written, saying
// why.
std::vector<std::string> write_launch_files(const plan::PlanResult& plan, const std::string& dir);

}  // namespace paci::interop
