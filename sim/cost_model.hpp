// The cost model the simulator replays a schedule with (versioned JSON, "paci.costmodel/1"):
// per stage the durations of F, B, I, W and U and the bytes it holds and sends; per link the
// latency and bandwidth. Built from uniform flags, from a GPT shape and a device's speed
// (analytic FLOPs and bytes, docs/costmodel.md), or measured by `paci calibrate`.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "schedules/ir.hpp"

namespace paci {

inline constexpr std::string_view kCostModelFormatTag = "paci.costmodel/1";

struct StageCost {
  double forward_s = 0.0;                     // F
  double backward_s = 0.0;                    // B (full backward)
  double input_grad_s = 0.0;                  // I (input-gradient half, zero-bubble schedules)
  double weight_grad_s = 0.0;                 // W (weight-gradient half)
  double update_s = 0.0;                      // U (optimizer step of the stage)
  std::int64_t activation_bytes = 0;          // held per micro-batch between F and end of backward
  std::int64_t activation_message_bytes = 0;  // sent forward to the next stage per micro-batch
  std::int64_t gradient_message_bytes = 0;    // sent backward to the previous stage per mb
  std::int64_t weight_bytes = 0;              // one copy of the stage's weights
  std::int64_t gradient_bytes = 0;            // gradient accumulation buffer
  std::int64_t optimizer_bytes = 0;           // optimizer state (AdamW: two moments)
  // Split backward: held per micro-batch from I to W, the output gradients W needs (optional in
  // the JSON, written when not 0).
  std::int64_t weight_grad_stash_bytes = 0;
  // Split backward: of activation_bytes, what a micro-batch frees at its I, the rest (the inputs
  // its W reads) held until W (optional in the JSON, written when not 0). 0: all held until W, as
  // paci's executor does; Zero Bubble's Megatron-LM keeps only W's inputs.
  std::int64_t input_grad_release_bytes = 0;
  // Held for the whole run beside the weights (optional in the JSON, written when not 0): what a
  // backward needs transiently at its peak, such as the layer a full recomputation rebuilds.
  std::int64_t workspace_bytes = 0;
  // Overlapped pairs (DualPipe's F&B): of forward_s and of backward_s, the communication that the
  // other action's compute hides when the two run as a pair (optional in the JSON, written when
  // not 0; each at most its duration). 0: nothing hides, a pair takes F + B (paci's CPU executor).
  double forward_comm_s = 0.0;
  double backward_comm_s = 0.0;
  // Overlapped pairs: how much slower a pair's compute runs while its communication kernels hold
  // some of the GPU's SMs (DualPipe's all-to-all kernels take 20 of them: SMs / (SMs − 20)); 1:
  // not slowed (optional in the JSON, written when not 1; at least 1).
  double pair_compute_slowdown = 1.0;

  std::int64_t static_bytes() const {
    return weight_bytes + gradient_bytes + optimizer_bytes + workspace_bytes;
  }
  double duration_s(ActionKind kind) const;
  friend bool operator==(const StageCost&, const StageCost&) = default;
};

// The time of an overlapped pair: `forward`'s stage forward F and `backward`'s stage full
// backward B, the forward's communication c_F hidden behind the backward's compute and the
// backward's c_B behind the forward's, each as far as that compute lasts, the compute slowed by
// k (pair_compute_slowdown, the larger of the two stages'): with F' = k·(F − c_F) and
// B' = k·(B − c_B), F' + B' + c_F + c_B − min(c_F, B') − min(c_B, F'). With k = 1: F + B −
// min(c_F, B − c_B) − min(c_B, F − c_F), at least max(F, B); F + B with no communication stated
// (a pair longer than F + B runs as two actions: the simulator's Engine).
double pair_duration_s(const StageCost& forward, const StageCost& backward);

struct LinkCost {
  double latency_s = 0.0;
  double bandwidth_bytes_per_s = std::numeric_limits<double>::infinity();  // inf: free
  // latency + bytes / bandwidth (bytes / inf = 0, so a free link still costs its latency)
  double transfer_s(std::int64_t bytes) const;
  friend bool operator==(const LinkCost&, const LinkCost&) = default;
};

struct LinkOverride {
  std::int32_t src_device = 0;
  std::int32_t dst_device = 0;
  LinkCost cost;
  friend bool operator==(const LinkOverride&, const LinkOverride&) = default;
};

// Devices that share one host's compute (the CPU executor's stage threads on one machine; several
// stages on one GPU): while k of them compute at once, an action runs slowdown(k) times as long as
// the stage cost says (the cost is its time alone; a factor below 1 means faster, as measured on
// some machines). slowdown_by_count[k-1] is given for k = 1, 2, ...; past the list's end the last
// entry is scaled by k / size (more computing than measured shares the host further). A device may
// have its own list (device_slowdown_by_count, one per entry of `devices`, or none at all) where
// the host's stages are not alike. A device in no host runs independently.
struct HostSharing {
  std::vector<std::int32_t> devices;
  std::vector<double> slowdown_by_count;
  std::vector<std::vector<double>> device_slowdown_by_count;  // empty, or one list per device
  // The factor for k computing at once; for the device at `devices[position]`.
  double slowdown(std::size_t computing) const;
  double slowdown(std::size_t position, std::size_t computing) const;
  friend bool operator==(const HostSharing&, const HostSharing&) = default;
};

struct CostModel {
  std::string description;  // free text: where the numbers come from
  std::vector<StageCost> stages;
  LinkCost default_link;                   // every device pair not overridden
  std::vector<LinkOverride> links;         // per directed device pair
  std::vector<HostSharing> hosts;          // shared hosts; empty: every device independent
  std::int64_t tokens_per_microbatch = 0;  // for tokens/s; 0 when unknown
  // A device waits for each message it sends to arrive before its next action (Megatron-LM's
  // pipeline sends without --overlap-p2p-communication: every request waited on); false: messages
  // travel while the sender computes.
  bool blocking_sends = false;

  const LinkCost& link(std::int32_t src_device, std::int32_t dst_device) const;
  friend bool operator==(const CostModel&, const CostModel&) = default;
};

// Uniform costs for every stage, as given by the simulate/compare/sweep flags.
struct UniformCosts {
  double tf = 1.0;            // --tf
  std::optional<double> tb;   // --tb, default 2·tf
  std::optional<double> tw;   // --tw: W; then I = tb - tw. Default: I = W = tb/2
  std::optional<double> tfb;  // --tfb: an overlapped pair F&B, in [max(F, B), F + B]; default F + B
  double tu = 0.0;            // --tu
  double latency_s = 0.0;     // --latency
  double bandwidth_bytes_per_s = std::numeric_limits<double>::infinity();  // --bandwidth
  std::int64_t message_bytes = 0;          // --message-bytes (both directions)
  std::int64_t activation_bytes = 0;       // --activation-bytes
  std::int64_t weight_bytes = 0;           // --weight-bytes (gradients the same; AdamW state twice)
  std::int64_t tokens_per_microbatch = 0;  // --tokens-per-microbatch
};

// Every stage gets the same costs; throws InputError (naming the flag) for a negative or
// non-finite value, a bandwidth <= 0, or tw > tb.
CostModel uniform_cost_model(std::int32_t stages, const UniformCosts& costs);

// Checks values (at least one stage; finite, non-negative durations, latencies and bytes;
// positive bandwidth, inf allowed; no link overridden twice; hosts with devices >= 0 in at most
// one host, at least one finite slowdown > 0, a device list per device if any) and, when
// `schedule` is given, that the model has exactly one entry per stage and that every link and
// host names devices the schedule has. Throws InputError naming the problem.
void check_cost_model(const CostModel& model, const Schedule* schedule = nullptr);

// Canonical JSON, exact round trip: parse(write(m)) == m (an infinite bandwidth is "inf").
std::string write_cost_model(const CostModel& model);
// Parses any layout, then runs check_cost_model(); InputError messages start with `source`.
CostModel parse_cost_model(std::string_view json, std::string_view source);
CostModel read_cost_model(const std::string& path);  // file, or "-" for stdin

// Analytic cost model of a GPT-2 style decoder split into stages (docs/costmodel.md).
struct GptShape {
  std::int32_t layers = 12;
  std::int32_t d_model = 768;
  std::int32_t heads = 12;
  std::int32_t seq_len = 1024;
  std::int32_t vocab = 50257;
  std::int32_t microbatch_size = 1;  // sequences per micro-batch
  std::int32_t dtype_bytes = 2;      // 4 fp32, 2 bf16/fp16
};

// The shapes paci costmodel knows by name: tiny (paci's default GPT, fp32, B=16) and GPT-2 small,
// medium, large and xl (bf16, sequence 1024, B=1); InputError listing them otherwise.
GptShape gpt_shape_preset(const std::string& name);
// Bytes of one number: fp32 4, bf16 and fp16 2; InputError otherwise.
std::int32_t dtype_bytes(const std::string& dtype);

struct DeviceSpeed {
  double flops_per_s = 0.0;         // sustained matmul throughput
  double memory_bytes_per_s = 0.0;  // memory bandwidth (bounds the optimizer step)
  LinkCost link;                    // between neighbouring stages
};

// Layers per stage: `partition` when non-empty (one entry >= 1 per stage, summing to layers),
// else balanced_partition(). Throws InputError for a bad shape, device or partition.
CostModel gpt_cost_model(const GptShape& shape, const DeviceSpeed& device, std::int32_t stages,
                         const std::vector<std::int32_t>& partition = {});

// Contiguous layers per stage (each >= 1) minimising the largest stage forward time: the last
// stage, which also runs the LM head, takes k layers with k chosen to minimise
// max(ceil((L-k)/(P-1)) layers, k layers + head), ties to the larger k; the other stages share
// L-k as evenly as possible, the remainder on the later ones (docs/costmodel.md).
std::vector<std::int32_t> balanced_partition(const GptShape& shape, std::int32_t stages);

}  // namespace paci
