// One configuration of a training run on a GPU cluster, evaluated in-process: the schedule of its
// pipeline (one of the generators'), a cost model whose stage durations hold the layers' compute,
// the tensor-parallel collectives and the recomputation, whose U holds the optimizer step and the
// data-parallel gradient reduction, whose links are the pipeline's messages on NVLink or the
// network, and whose memory is the weights, gradients, optimizer state (sharded or not),
// activations and stashes; then the discrete-event engine's step. No files: a search calls it
// thousands of times a second.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "plan/costs/costs.hpp"
#include "plan/hardware/cluster.hpp"
#include "plan/shapes/model.hpp"
#include "schedules/ir.hpp"
#include "sim/cost_model.hpp"
#include "sim/engine.hpp"

namespace paci::plan {

// What the runtimes that run `kind` do with pipeline sends when not told (docs/costmodel.md,
// "Pipeline messages"): 1f1b waits for them (Megatron-LM's non-interleaved schedule refuses to
// overlap them; PyTorch's Schedule1F1B waits on its steady phase's fused send and receive); every
// other kind overlaps them (Megatron-LM's interleaved schedule by default, PyTorch's GPipe and
// multi-stage runtime, the Zero Bubble runtime).
inline bool default_overlap_p2p(std::string_view kind) {
  return kind != "1f1b";
}

struct PlanConfig {
  ModelSpec model;
  ClusterSpec cluster;
  std::int64_t gpus = 0;
  std::int64_t global_batch = 0;  // sequences per optimizer step
  std::int32_t tp = 1, pp = 1;    // t, p
  // c: context parallelism, each sequence's tokens split over c GPUs of the tensor-parallel
  // group's node (docs/costmodel.md, "Context parallelism"); the attention's keys and values pass
  // around a ring (Megatron-LM / Transformer Engine's p2p) or are all-gathered (Llama 3's,
  // PyTorch's and so torchtitan's).
  std::int32_t cp = 1;
  bool cp_all_gather = false;
  // e: expert parallelism (docs/costmodel.md, "Mixture of experts"), each of the model's E experts
  // on one GPU of a group of e, E/e on each (Megatron-LM's --expert-model-parallel-size with
  // --expert-tensor-parallel-size 1), the group taken from the t·c·d GPUs that hold a stage (the
  // nearest: inside a node while e fits); 1 for a dense model.
  std::int32_t ep = 1;
  // The busiest GPU's routed token copies over the mean (1: the router balances them, as the
  // published MoE benchmarks force it to).
  double expert_load = 1.0;
  std::int32_t chunks = 1;           // v: model stages per device (interleaved), else 1
  std::int64_t microbatch_size = 1;  // b
  std::string kind = "1f1b";
  Recompute recompute = Recompute::none;
  bool sequence_parallel = false, overlap_grad_reduce = false;
  // ZeRO stage over the d data-parallel replicas (docs/costmodel.md, "ZeRO"): 0 replicated (DDP),
  // 1 the optimizer state sharded (Megatron-LM's distributed optimizer), 2 the gradients too
  // (reduce-scattered every micro-batch), 3 the weights too (FSDP: gathered per layer for each
  // micro-batch's forward and backward).
  std::int32_t zero = 0;
  // HSDP (torchtitan's replicate x shard mesh; Megatron-LM's --num-distributed-optimizer-
  // instances): ZeRO shards over this many of the weights' d·c replicas, the nearest ones, and
  // the resulting groups replicate one another (their gradient shards all-reduced between them).
  // 0: over all of them.
  std::int64_t shard_group = 0;
  bool tp_comm_overlap = false;  // needs sequence_parallel (docs/costmodel.md)
  // Pipeline messages travel while the sender computes (true), or the sender waits for each to
  // arrive (false: Megatron-LM's non-interleaved schedule always, its interleaved one with
  // --no-overlap-p2p-communication). Unset: what the kind's runtimes do (default_overlap_p2p).
  std::optional<bool> overlap_p2p;
  bool p2p_overlapped() const { return overlap_p2p.value_or(default_overlap_p2p(kind)); }
  // Activation offloading (Megatron-LM's --cpu-offloading-num-layers, Transformer Engine's CPU
  // offload; docs/costmodel.md, "Activation offloading"): the activations of the model's first
  // this-many layers copied to host memory as the forward leaves each and back before the
  // backward needs it. Megatron-LM runs it without pipeline parallelism or recomputation only.
  std::int32_t offload_layers = 0;
  bool flash_attention = true;
  // The linear layers' GEMMs: bf16, FP8 (per-tensor scales, Transformer Engine's delayed
  // scaling) or MXFP8 (docs/costmodel.md, "FP8"); the cluster must have them.
  Precision precision = Precision::bf16;
  // The gradient buffer and its data-parallel reduction in bf16 (2 bytes per parameter) instead of
  // fp32 (4): Megatron-LM's --grad-reduce-in-bf16 (torchtitan keeps fp32 sharded gradients); not
  // searched (it changes the numerics).
  bool bf16_gradients = false;
  // The FP8 GEMMs' weights kept only in 8 bits (their two copies, no bf16 one) and gathered in 8
  // bits: Megatron-LM's --fp8-param-gather (with FP8, and ZeRO 1 or more). Not searched.
  bool fp8_params = false;
  // AdamW's two moments in bf16, 2 bytes each instead of fp32's 4 (Megatron-LM's precision-aware
  // optimizer: --use-precision-aware-optimizer --exp-avg-dtype bf16 --exp-avg-sq-dtype bf16,
  // with its distributed optimizer: ZeRO 1 or more). Not searched (it changes the numerics).
  bool bf16_moments = false;
  // Layers per model stage (model_stages() entries: p·v, DualPipe's p), empty: as even as the
  // layers allow, the remainder on the middle stages (the first and last carry the embedding and
  // the head).
  std::vector<std::int32_t> partition;

  std::int64_t dp() const { return gpus / (static_cast<std::int64_t>(tp) * cp * pp); }
  // The GPUs ZeRO shards over: shard_group, or all d·c replicas of the weights.
  std::int64_t shards() const { return shard_group > 0 ? shard_group : dp() * cp; }
  std::int64_t microbatches() const { return global_batch / (dp() * microbatch_size); }
  // The schedule's stages: p·v (interleaved v, the V's 2, DualPipe's two copies of p).
  std::int32_t stages() const { return pp * chunks; }
  // DualPipe holds two copies of the model, each split into p model stages (Schedule::copies);
  // every other kind one.
  std::int32_t copies() const { return kind == "dualpipe" ? 2 : 1; }
  // The model's stages, each a range of layers (the partition's entries): the schedule's stages
  // of one copy.
  std::int32_t model_stages() const { return stages() / copies(); }
};

// The kinds that place two of the schedule's stages on each device, mirrored: device d holds
// stages d and 2p - 1 - d (the V of zb-v and dualpipev; DualPipe's copy 0's stage d and copy 1's
// model stage p - 1 - d).
bool mirrored_kind(std::string_view kind);

// InputError naming the first problem: a degree that does not divide the GPUs, the heads, the
// kv heads or the MLP; a context-parallel degree whose 2c chunks do not divide the sequence, or
// without FlashAttention; a global batch not divisible by d·b; a ZeRO stage outside 0-3; a
// precision the GPU lacks; fewer layers than p·v stages; a bad partition; chunks with a kind
// other than interleaved; a kind the generators refuse.
void check_config(const PlanConfig& config);

// check_config without the model's and the cluster's own checks (a search makes them once).
void check_knobs(const PlanConfig& config);
// Of those, the pipeline's alone: chunks only for interleaved, layers for p·v stages, the
// partition (one entry per model stage, each at least one layer, summing to the layers), at most
// 2^20 micro-batches.
void check_pipeline(const PlanConfig& config);
// Of those, activation offloading's: 0 or more layers, fewer than the model's, at p = 1 without
// recomputation (what Megatron-LM runs), on a cluster that gives its host link.
void check_offload(const PlanConfig& config);
// InputError for expert parallelism the model or Megatron-LM cannot run: e not dividing the
// experts or the t·c·d GPUs of a stage, a mixture of experts with tensor parallelism but without
// sequence parallelism, ZeRO 3 with experts, --ep on a dense model, an expert load below 1.
void check_experts(const PlanConfig& config);

// One model stage of the evaluated configuration.
struct StagePlan {
  std::int32_t stage = 0, device = 0;
  std::int32_t first_layer = 0, layers = 0;
  bool embedding = false, head = false;
  PieceCosts pieces;       // its layers, embedding and head together, one micro-batch
  double optimizer_s = 0;  // the AdamW step of its parameters (and FP8's weight casts)
  // FP8 with per-tensor scales, per micro-batch: the amax reductions of its forward and of its
  // backward (each in forward_comm_s and backward_comm_s of `pieces`).
  double amax_reduce_s = 0;
  double reduce_s = 0;          // the data-parallel gradient reduction, all of it
  double exposed_reduce_s = 0;  // of which in its U (the rest overlaps the last backward)
  // ZeRO 2 and 3, per micro-batch: the data-parallel collectives of its forward (3: the weights
  // gathered), of its input-gradient half (3: gathered again) and of its weight-gradient half
  // (2, 3: the gradients reduce-scattered), all of them and the part its compute does not hide.
  double zero_forward_s = 0, zero_input_grad_s = 0, zero_weight_grad_s = 0;
  double exposed_zero_forward_s = 0, exposed_zero_input_grad_s = 0, exposed_zero_weight_grad_s = 0;
  std::int64_t zero_workspace_bytes = 0;  // ZeRO's transient buffers (gathered layer, bucket)
  // Activation offloading, per micro-batch: its layers whose activations go to host memory, the
  // bytes they hold there, and the copies' time its forward and its backward cannot hide.
  std::int32_t offloaded_layers = 0;
  std::int64_t host_bytes = 0;
  double exposed_offload_forward_s = 0, exposed_offload_backward_s = 0;
};

struct PlanResult {
  PlanConfig config;
  std::int64_t parameters = 0;  // the model's
  std::int64_t dp = 0, microbatches = 0;
  Schedule schedule;  // the simulated steps
  CostModel costs;    // what paci simulate replays
  std::vector<StagePlan> stages;
  double step_s = 0;  // one optimizer step over the global batch (steady state when async)
  double tokens_per_s = 0;
  double model_flops_per_step = 0;  // 6·(layer and head parameters) + 12·L·s·h per token
  double model_tflops_per_gpu = 0, mfu = 0;
  double bubble_ratio = 0;                      // the simulated steps' idle share of the devices
  std::vector<std::int64_t> memory_per_device;  // peak bytes per GPU of each pipeline device
  std::int64_t peak_memory_bytes = 0;           // the largest
  // Activation offloading: the host memory one GPU's offloaded activations take (0 without), and
  // whether that is within the cluster's host memory per GPU (`fits` requires it).
  std::int64_t host_memory_bytes = 0;
  bool host_fits = true;
  double memory_limit_bytes =
      0;              // what `fits` compares with: the GPU's memory, or a search's limit
  bool fits = false;  // peak_memory_bytes <= memory_limit_bytes
  // The schedule's analysed staleness: the most weight versions between a micro-batch's forward
  // and the weights its backward reads or the update that applies its gradient (Analysis::max_lag:
  // 0 for the flushed schedules, PACI and 2BW 1, PipeDream p - 1).
  std::int32_t max_staleness = 0;
  std::int32_t simulated_steps = 0;
};

struct EvaluateOptions {
  bool record_timeline = false;  // keep the simulated timeline (for a Chrome trace)
};

// From a simulation of r.schedule under r.costs (r.config, r.microbatches and r.simulated_steps
// set): the step, bubble, tokens/s, model FLOPs, MFU (0 without a peak), memory per device (fits
// against the cluster's memory) and staleness.
void measure(PlanResult& r, const SimResult& simulated);

// "" without context parallelism, else `format` with c and " (all-gather)" when it all-gathers
// (", c={}": ", c=2 (all-gather)").
std::string cp_label(const PlanConfig& config, std::string_view format);

// Schedule stage -> pipeline device: stage k on device k mod p (interleaved; the identity for one
// stage a device), stages d and 2p - 1 - d on device d (mirrored_kind).
std::vector<std::int32_t> placement_of(const PlanConfig& config);
// The steps a configuration's schedule is simulated for: one when it flushes; for an
// asynchronous schedule (PACI, PipeDream, 2BW) enough that the middle half of stage 0's updates
// is past the fill and before the drain (PipeDream: in its own steps of one micro-batch).
std::int32_t simulated_steps(const PlanConfig& config);
bool asynchronous_kind(const std::string& kind);

// What a configuration's stages cost, for any split of the layers: computed once per
// configuration (the layer, embedding and head pieces, the collectives' placement), then asked
// per stage. check_config() first.
class ConfigCosts {
 public:
  explicit ConfigCosts(const PlanConfig& config);
  // Model stage `stage` holding `layers` layers from `first_layer` on (with the embedding when it
  // is the first stage and the head when it is the last).
  StagePlan stage(std::int32_t stage, std::int32_t first_layer, std::int32_t layers) const;
  StageCost stage_cost(const StagePlan& stage) const;
  // Every schedule stage for layers per model stage `layers` (DualPipe: each copy's stages hold
  // the same layers).
  std::vector<StagePlan> stage_plans(const std::vector<std::int32_t>& layers) const;
  // Every schedule stage's cost for layers per model stage `layers` (no description, no links: a
  // bound's).
  std::vector<StageCost> stage_costs(const std::vector<std::int32_t>& layers) const;
  // The whole cost model for layers per model stage `layers` (and its schedule stages).
  CostModel cost_model(const std::vector<std::int32_t>& layers,
                       std::vector<StagePlan>* stages = nullptr) const;
  const std::vector<std::int32_t>& placement() const { return placement_; }
  // The host memory one micro-batch's offloaded activations take (its offload_layers layers').
  std::int64_t host_bytes() const {
    return layers_from(0, config_.offload_layers).activation_bytes;
  }

 private:
  PlanConfig config_;
  std::vector<std::int32_t> placement_;
  // A routed (or dense model's) layer, one of a mixture of experts' first dense layers, the
  // embedding, the head.
  PieceCosts layer_, dense_layer_, embedding_, head_;
  // The multi-token-prediction modules, on the last stage: each a layer, the head run again (its
  // weights the model's) and the module's own pieces.
  PieceCosts mtp_;
  // Keeps each device's largest stage workspace and zeroes the rest (one backward at a time).
  void hold_workspace_once(std::vector<StageCost>& stages) const;
  // The layers first .. first + n - 1 together (the first dense_layers dense, the rest layer_).
  PieceCosts layers_from(std::int32_t first, std::int32_t n) const;
  std::int32_t dense_in(std::int32_t first, std::int32_t n) const;
  bool tied_apart_ = false;
  double message_bytes_ = 0, embedding_sync_s_ = 0;
  std::int64_t dp_per_node_ = 1, stride_ = 1;
  // ZeRO's sharding group (HSDP: shard_group) and its replicas, and how many of each share a
  // node.
  std::int64_t shards_ = 1, shards_per_node_ = 1, groups_ = 1, groups_per_node_ = 1;
  // An expert's replicas (the GPUs ZeRO shards its state over, its gradients reduced over).
  std::int64_t expert_shards_ = 1, expert_shards_per_node_ = 1;
};

// Layers per model stage for `config`: its partition when given, else as even as the layers allow
// with the remainder on the middle stages (the first and the last also hold the embedding and the
// head), then on the last ones.
std::vector<std::int32_t> default_partition(const PlanConfig& config);

// check_config, then the schedule, cost model and simulation. A flushed schedule is simulated for
// one step (its step is every step); an asynchronous one (PACI, PipeDream, 2BW) for enough steps
// that the period between its last ones is its steady state.
PlanResult evaluate(const PlanConfig& config, const EvaluateOptions& options = {});
// The same, and the simulation itself (for a trace); `schedule`, when given, is the configuration's
// (generate_schedule(kind, p, M, simulated_steps(config), v): a search keeps them).
PlanResult evaluate(const PlanConfig& config, const EvaluateOptions& options, SimResult& simulated,
                    const Schedule* schedule = nullptr);

}  // namespace paci::plan
