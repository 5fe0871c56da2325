// paci plan's search: every configuration of the knobs a user leaves open (tensor and pipeline
// degrees, micro-batch size, schedule kind and chunks, recomputation, the switches, the layers on
// each stage), the ones that cannot win pruned by a bound that never prunes a winner, the rest
// simulated by the discrete-event engine; the fastest that fit in memory and a staleness limit,
// and the Pareto frontier over step time, memory and staleness. The same answer with any number
// of threads.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "plan/evaluate/evaluate.hpp"
#include "plan/search/partition.hpp"  // bottleneck_partition

namespace paci::plan {

// What a plan may not count on by default, of a GPU's memory: the CUDA context (about 0.5-1 GiB),
// NCCL's buffers (about 1-2 GiB on 8 GPUs) and the caching allocator's fragmentation. No single
// measurement gives it; 4 GiB is the reserve paci states (docs/costmodel.md), --memory-limit
// replaces it.
inline constexpr double kFrameworkReserveBytes = 4.0 * 1024 * 1024 * 1024;

// A knob with one value is fixed, with several searched over; empty: its whole range.
struct SearchSpace {
  ModelSpec model;
  ClusterSpec cluster;
  std::int64_t gpus = 0, global_batch = 0;
  std::vector<std::int32_t> tp;  // whole range: the divisors of the GPUs per node that fit
  // Context parallelism; whole range: the c with t·c within the NVLink domain and 2c dividing the
  // sequence. Each c > 1 with its keys and values passed around a ring (false) or all-gathered
  // (true). Default: the ring, Megatron-LM's and Transformer Engine's; in paci's model the
  // all-gather (exposed, its keys and values held) is slower and larger wherever both fit, and
  // searching it doubles the space: it is searched when asked, or for a tool that runs only it
  // (torchtitan).
  std::vector<std::int32_t> cp;
  std::vector<bool> cp_all_gather{false};
  std::vector<std::int32_t> pp;  // whole range: the divisors of gpus/(t·c) up to the layers
  std::vector<std::int64_t> microbatch_size;  // whole range: the divisors of global batch / d
  std::vector<std::string> kinds;             // whole range: default_kinds (listed: any)
  // Interleaved; whole range: v >= 2 with p·v dividing L, or L + 2 (one layer fewer on the first
  // and the last stage).
  std::vector<std::int32_t> chunks;
  std::vector<Recompute> recompute;  // whole range: none, selective, full
  // The switches of today's runs, searched off and on unless fixed (a switch that changes nothing
  // for a configuration, SP at t = 1 or the optimizer's at d = 1, is tried off only).
  std::vector<bool> sequence_parallel{false, true}, tp_comm_overlap{false, true},
      overlap_grad_reduce{false, true};
  // Pipeline sends overlapped with compute (PlanConfig::overlap_p2p): unset, what the kind's
  // runtimes do (default_overlap_p2p).
  std::optional<bool> overlap_p2p;
  // ZeRO stages (0 at d = 1, where there is nothing to shard).
  std::vector<std::int32_t> zero{0, 1, 2, 3};
  // HSDP's sharding groups (PlanConfig::shard_group), each with ZeRO 1 to 3; 0 (the default):
  // ZeRO over all the replicas. A group that does not divide a configuration's replicas is
  // invalid for it; one equal to them is the default.
  std::vector<std::int64_t> shard_group{0};
  // Activation offloading (PlanConfig::offload_layers): none unless listed; where a configuration
  // cannot offload (p > 1, recomputation) it runs without, when 0 is listed too.
  std::vector<std::int32_t> offload_layers{0};
  // Expert parallelism (PlanConfig::ep); whole range: with experts, every e dividing them and the
  // t·c·d GPUs of a stage; 1 for a dense model.
  std::vector<std::int32_t> ep;
  double expert_load = 1.0;  // PlanConfig::expert_load, not searched
  bool flash_attention = true;
  // The GEMMs' number format: not searched (FP8 changes the numerics a run converges with: the
  // user's decision), bf16 unless given.
  Precision precision = Precision::bf16;
  bool bf16_gradients = false;  // likewise not searched: fp32 unless given
  // FP8 weights and bf16 AdamW moments (PlanConfig::fp8_params, bf16_moments): the user's, off
  // unless given.
  bool fp8_params = false, bf16_moments = false;
  // Given: every configuration runs it. Empty: the balanced partition (the slowest stage's work
  // smallest) and the one that is smallest under the memory limit, where they differ.
  std::vector<std::int32_t> partition;
};

struct SearchProgress {
  std::int64_t done = 0, total = 0;  // candidates decided (simulated or pruned) of all
  double seconds = 0;
  std::optional<double> best_step_s;
};

struct SearchOptions {
  double memory_limit_bytes = 0;    // 0: the GPU's memory less kFrameworkReserveBytes
  std::int32_t max_staleness = -1;  // -1: any
  std::size_t top = 10;
  std::size_t jobs = 0;  // threads simulating; 0: every core
  bool prune = true;     // false: simulate every candidate (the exhaustive reference)
  // Given: why a configuration cannot run where the plan goes ("" when it can; --emit TOOL asks
  // interop::refusal), and those that cannot are left out, counted as not runnable.
  std::function<std::string(const PlanConfig&)> runnable;
  std::function<void(const SearchProgress&)> progress;  // after every batch
  const std::atomic<bool>* interrupted = nullptr;       // set: stop, keep what was found
};

// Why configurations lost.
struct Rejected {
  std::int64_t invalid = 0;        // a degree that does not divide, a schedule that cannot be made
  std::int64_t out_of_memory = 0;  // peak above the memory limit (bounded or simulated)
  std::int64_t too_stale = 0;      // staleness above --max-staleness
  std::int64_t pruned = 0;         // its bound could neither make the top list nor the frontier
  std::int64_t not_runnable = 0;   // SearchOptions::runnable refused it
  std::string not_runnable_example;
  std::int64_t least_excess_bytes = -1;  // of the configurations out of memory, the smallest excess
  // Offloaded activations above the host memory per GPU (the GPU's own memory fit).
  std::int64_t out_of_host_memory = 0;
  std::int64_t least_host_excess_bytes = -1;
  std::string invalid_example;  // one invalid configuration's reason

  // One more out of memory, by `excess` bytes.
  void add_out_of_memory(std::int64_t excess) {
    ++out_of_memory;
    if (least_excess_bytes < 0 || excess < least_excess_bytes) least_excess_bytes = excess;
  }
  // One more whose offloaded activations exceed the host memory per GPU, by `excess` bytes.
  void add_out_of_host_memory(std::int64_t excess) {
    ++out_of_host_memory;
    if (least_host_excess_bytes < 0 || excess < least_host_excess_bytes)
      least_host_excess_bytes = excess;
  }
};

struct SearchResult {
  double memory_limit_bytes = 0;
  std::vector<PlanResult> plans;     // fit and fresh enough, fastest first, at most `top`
  std::vector<PlanResult> frontier;  // the Pareto-optimal ones over step, peak memory, staleness
  std::optional<PlanResult> best_synchronous, best_asynchronous;
  Rejected rejected;
  std::int64_t configurations = 0;  // every combination of the knobs (and partitions)
  std::int64_t simulated = 0;
  // Of the simulated configurations, the smallest ratio of the simulated step to its bound: at
  // least 1 wherever the bound holds (pruning relies on it).
  double least_step_over_bound = 0;
  double seconds = 0;
  std::size_t jobs = 1;
  bool interrupted = false;
  // Nothing fit: the configuration whose peak (simulated, or bounded from below where the bound
  // rejected it) was smallest, and what one
  // knob outside the searched space would make of it ("with --recompute full: 71.0 GiB").
  std::optional<PlanConfig> smallest;
  std::int64_t smallest_peak_bytes = -1;
  std::int64_t smallest_static_bytes = -1;  // of that peak: weights, gradients, optimizer state
  std::vector<std::pair<std::string, std::int64_t>> alternatives;
};

// The eight kinds a search covers when --kind is not given; for a mixture of experts also the
// mirrored zb-v, dualpipev and dualpipe (default_kinds).
const std::vector<std::string>& all_kinds();
const std::vector<std::string>& default_kinds(const ModelSpec& model);

// The whole search. InputError for a space with nothing to search (a fixed knob that does not
// fit the model, no GPUs).
SearchResult search(const SearchSpace& space, const SearchOptions& options = {});

// What every configuration of `space` shares, the searched knobs left at their defaults: the
// model, the cluster, the GPUs and batch, and the settings that are not searched (attention,
// number formats, the expert load).
PlanConfig unsearched(const SearchSpace& space);

// Every knob given one value: the configuration they give (chunks 2 for interleaved unless
// given); nullopt when any knob is searched.
std::optional<PlanConfig> single_configuration(const SearchSpace& space);

// Every knob but the switches (the ZeRO stage, context parallelism) given one value: that
// configuration with each switch and the ZeRO stage at its first value, context parallelism at its
// first or 1 (what does not depend on them, a degree that does
// not divide, is decided on it); nullopt when another knob is searched.
std::optional<PlanConfig> fixed_but_switches(const SearchSpace& space);

// The top `top` of `plans` (each fits and is fresh enough), the frontier over them and the best
// synchronous and asynchronous one, into `result`, ties broken by configuration as search() does.
void rank_plans(const std::vector<PlanResult>& plans, std::size_t top, SearchResult& result);

// One configuration (every knob given) with its best partition: its own when given, else the
// balanced one and the one smallest under `memory_limit_bytes` (<= 0: the GPU's memory less
// kFrameworkReserveBytes), the fastest that fits, or when none does the one with the smaller
// peak; `fits` and `memory_limit_bytes` are against that limit. A configuration that does not fit
// is not an error.
PlanResult evaluate_best_partition(const PlanConfig& config, double memory_limit_bytes,
                                   const EvaluateOptions& options, SimResult& simulated);

}  // namespace paci::plan
