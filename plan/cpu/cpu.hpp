// paci plan on this machine: the CPU executor's runs of the calibrated GPT (plan/cpu/layers.hpp) on
// 1, 2 or 4 stage threads, every schedule kind and every contiguous partition of its layers,
// each simulated from the per-layer calibration; the same ranking, frontier and reasons as a
// cluster search, and for each plan the `paci train` command that runs it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "plan/cpu/layers.hpp"
#include "plan/search/search.hpp"

namespace paci::plan {

// The cluster name of every CPU plan.
inline constexpr std::string_view kCpuClusterName = "this-cpu";

// The most configurations a CPU plan simulates (a few seconds on one core).
inline constexpr double kMaxCpuConfigurations = 20000;

struct CpuSpace {
  LayerCalibration calibration;
  std::vector<std::int32_t> pp;         // stage threads; empty: 1, 2 and 4 (at most the layers)
  std::vector<std::string> kinds;       // empty: all eight
  std::vector<std::int32_t> chunks;     // interleaved; empty: every v >= 2 with p·v <= layers
  std::int64_t microbatches = 8;        // M: micro-batches of `calibration.batch` sequences a step
  std::vector<std::int32_t> partition;  // layers per model stage; empty: every partition
};

// The calibrated model as a plan's model: a GPT of its shape (its own LM head, MLP 4h).
ModelSpec cpu_model(const LayerCalibration& calibration);
// "this CPU": `memory_bytes` the limit plans are held to, no peak (MFU is not reported).
ClusterSpec cpu_cluster(const LayerCalibration& calibration, double memory_bytes);
// The configuration of `pp` stage threads running `kind` (chunks v for interleaved, else 1) on
// M micro-batches with `layers` per model stage; InputError when it cannot run (layers that do
// not sum to the model's, an empty stage, chunks on another kind).
PlanConfig cpu_config(const LayerCalibration& calibration, double memory_bytes, std::int32_t pp,
                      const std::string& kind, std::int32_t chunks, std::int64_t microbatches,
                      const std::vector<std::int32_t>& layers);
// One configuration simulated under the calibration's cost model (cpu_cost_model).
PlanResult evaluate_cpu(const LayerCalibration& calibration, const PlanConfig& config,
                        const EvaluateOptions& options, SimResult& simulated);
// The space as search_document() and search_text() describe it: the model, "this-cpu" with
// `memory_bytes`, the machine's cores (as gpus) and the global batch in sequences.
SearchSpace cpu_search_space(const LayerCalibration& calibration, double memory_bytes,
                             std::int64_t global_batch);

// Every configuration of the space simulated (tens for the default GPT: no pruning), ranked as
// search() ranks; InputError when the partitions of a deeper model make more than
// kMaxCpuConfigurations. memory_limit_bytes must be positive.
SearchResult search_cpu(const CpuSpace& space, const SearchOptions& options);

// This machine's memory (what a CPU plan is held to unless --memory-limit says otherwise).
double machine_memory_bytes();

// The paci train command that runs a CPU plan for `steps` optimizer steps.
std::string train_command(const PlanResult& plan, std::int64_t steps);

}  // namespace paci::plan
