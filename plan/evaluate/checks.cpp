// The checks of a configuration (evaluate.hpp: check_config, check_knobs, check_pipeline,
// check_experts, check_offload): one InputError line naming the knob and, where one exists, what
// would work.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "plan/evaluate/evaluate.hpp"
#include "schedules/generators.hpp"

namespace paci::plan {

void check_pipeline(const PlanConfig& c) {
  const ModelSpec& m = c.model;
  if (mirrored_kind(c.kind) && c.chunks != 2)
    throw InputError(fmt::format(
        "--kind {} places two model stages on each device ({}): --chunks 2, not {}", c.kind,
        c.kind == "dualpipe" ? "one of each of its two copies" : "a V", c.chunks));
  if (c.kind == "dualpipe" && c.pp % 2 != 0)
    throw InputError(fmt::format(
        "--kind dualpipe runs its two copies in opposite directions on an even number of devices, "
        "--pp {} is odd: an even --pp, or --kind dualpipev (any p)",
        c.pp));
  if (c.kind == "dualpipe" && (c.microbatches() % 2 != 0 || c.microbatches() < 2 * c.pp))
    throw InputError(fmt::format(
        "--kind dualpipe needs an even number of micro-batches a step, at least 2p = {} "
        "(DualPipe's bound: half of them on each copy), got {}: a global batch of at least {} "
        "sequences and a multiple of {}, a smaller --microbatch-size or --pp",
        2 * c.pp, c.microbatches(), 2 * c.pp * c.dp() * c.microbatch_size,
        2 * c.dp() * c.microbatch_size));
  if (c.kind == "dualpipev" && c.microbatches() < 2 * c.pp)
    throw InputError(fmt::format(
        "--kind dualpipev needs at least 2p = {} micro-batches a step (DualPipe's bound), got {}: "
        "a larger global batch, a smaller --microbatch-size or --pp",
        2 * c.pp, c.microbatches()));
  if (c.chunks > 1 && c.kind != "interleaved" && !mirrored_kind(c.kind))
    throw InputError(fmt::format("--chunks {} is interleaved's; {} runs one stage per device",
                                 c.chunks, c.kind));
  if (m.layers < c.model_stages())
    throw InputError(
        c.copies() > 1
            ? fmt::format("{} layers are too few for --pp {} model stages (each of dualpipe's "
                          "two copies splits the model over p)",
                          m.layers, c.pp)
            : fmt::format("{} layers are too few for --pp {} x --chunks {} = {} stages", m.layers,
                          c.pp, c.chunks, c.stages()));
  if (!c.partition.empty()) {
    if (static_cast<std::int32_t>(c.partition.size()) != c.model_stages())
      throw InputError(fmt::format("--partition lists {} stages, the pipeline has {}{}",
                                   c.partition.size(), c.model_stages(),
                                   c.copies() > 1 ? " (in each of dualpipe's two copies)" : ""));
    std::int64_t sum = 0;
    for (const std::int32_t layers : c.partition) {
      if (layers < 1) throw InputError("--partition: every stage needs at least one layer");
      sum += layers;
    }
    if (sum != m.layers)
      throw InputError(
          fmt::format("--partition adds up to {} layers, the model has {}", sum, m.layers));
  }
  if (c.microbatches() > (std::int64_t{1} << 20))
    throw InputError(fmt::format("{} micro-batches per step are more than paci simulates (2^20)",
                                 c.microbatches()));
}

void check_config(const PlanConfig& c) {
  check_model(c.model);
  check_cluster(c.cluster, c.cluster.name);
  check_knobs(c);
}

void check_knobs(const PlanConfig& c) {
  const auto positive = [](std::int64_t value, const char* flag) {
    if (value < 1) throw InputError(fmt::format("{} must be at least 1, got {}", flag, value));
  };
  positive(c.gpus, "--gpus");
  positive(c.global_batch, "--global-batch");
  positive(c.tp, "--tp");
  positive(c.pp, "--pp");
  positive(c.cp, "--cp");
  positive(c.chunks, "--chunks");
  positive(c.microbatch_size, "--microbatch-size");
  const std::int64_t tp_pp = static_cast<std::int64_t>(c.tp) * c.pp;
  if (c.cp == 1 && c.gpus % tp_pp != 0)
    throw InputError(fmt::format("--gpus {} is not divisible by --tp {} x --pp {} = {}", c.gpus,
                                 c.tp, c.pp, tp_pp));
  if (c.cp > 1) {
    const std::int64_t tcp = tp_pp * c.cp;
    if (c.gpus % tcp != 0)
      throw InputError(fmt::format("--gpus {} is not divisible by --tp {} x --cp {} x --pp {} = {}",
                                   c.gpus, c.tp, c.cp, c.pp, tcp));
    if (c.model.seq_len % (2 * c.cp) != 0)
      throw InputError(fmt::format(
          "--cp {} splits each sequence into 2 x {} = {} load-balanced chunks: the sequence ({}) "
          "is not divisible by {}; --cp {} would work",
          c.cp, c.cp, 2 * c.cp, c.model.seq_len, 2 * c.cp,
          std::gcd(c.model.seq_len / 2, std::int64_t{c.cp})));
    if (!c.flash_attention)
      throw InputError(
          "--cp runs the attention core with FlashAttention (Transformer Engine, PyTorch's SDPA): "
          "--attention unfused cannot");
  }
  const ModelSpec& m = c.model;
  const auto divides = [&](std::int64_t what, const char* name) {
    if (what % c.tp != 0)
      throw InputError(
          fmt::format("--tp {} does not divide the model's {} ({})", c.tp, name, what));
  };
  divides(m.heads, "attention heads");
  divides(m.d_model, "width d_model");
  // With experts the routed ones stay whole (expert tensor parallelism 1): t splits the shared one.
  if (!m.moe())
    divides(m.ffn, "MLP width");
  else if (m.shared_expert_ffn > 0)
    divides(m.shared_expert_ffn, "shared expert's width");
  if (m.dense_layers > 0) divides(m.dense_ffn, "dense layers' MLP width");
  if (m.kv_heads % c.tp != 0 && c.tp % m.kv_heads != 0)
    throw InputError(fmt::format(
        "--tp {} and the model's {} key-value heads: one must divide the other", c.tp, m.kv_heads));
  const std::int64_t d = c.dp();
  if (c.global_batch % (d * c.microbatch_size) != 0)
    throw InputError(
        fmt::format("--global-batch {} is not divisible by d x b = {} x {} (d = gpus / (tp x pp{}) "
                    "data-parallel replicas, b = --microbatch-size)",
                    c.global_batch, d, c.microbatch_size, c.cp > 1 ? " x cp" : ""));
  if (c.tp_comm_overlap && !c.sequence_parallel)
    throw InputError(
        "--tp-comm-overlap overlaps the sequence-parallel collectives: it needs "
        "--sequence-parallel");
  if (c.zero < 0 || c.zero > 3)
    throw InputError(fmt::format("--zero takes 0, 1, 2 or 3, got {}", c.zero));
  if (c.shard_group != 0) {
    const std::int64_t replicas = c.dp() * c.cp;
    if (c.shard_group < 2 || replicas % c.shard_group != 0)
      throw InputError(fmt::format(
          "--shard-group {} must divide the weights' {} replicas (d = {} x c = {}) and be at "
          "least 2: it is the GPUs ZeRO shards over, the rest replicating",
          c.shard_group, replicas, c.dp(), c.cp));
    if (c.zero == 0 && c.shard_group != replicas)
      throw InputError(
          fmt::format("--shard-group {} is the group ZeRO shards over: it needs --zero 1, 2 or 3",
                      c.shard_group));
  }
  check_offload(c);
  check_experts(c);
  if (c.fp8_params && c.precision == Precision::bf16)
    throw InputError(
        "--fp8-param-gather keeps the FP8 GEMMs' weights in 8 bits: it needs --precision fp8 or "
        "mxfp8");
  // With one replica ZeRO has nothing to shard: its stage 0 is the distributed optimizer's.
  const bool sharding = c.zero > 0 || c.dp() * c.cp == 1;
  if (c.fp8_params && !sharding)
    throw InputError(
        "--fp8-param-gather gathers the 8-bit weights of Megatron-LM's distributed optimizer or "
        "FSDP: it needs --zero 1, 2 or 3");
  if (c.bf16_moments && !sharding)
    throw InputError(
        "--moments-dtype bf16 is Megatron-LM's precision-aware optimizer, which runs with its "
        "distributed optimizer only: it needs --zero 1, 2 or 3");
  check_precision(c.cluster, c.precision);
  check_pipeline(c);
}

void check_experts(const PlanConfig& c) {
  const ModelSpec& m = c.model;
  if (!m.moe()) {
    if (c.ep != 1)
      throw InputError(fmt::format(
          "--ep {} spreads a model's experts: {} has none (--experts E makes a mixture of "
          "experts)",
          c.ep, m.name));
    return;
  }
  if (c.ep < 1 || m.experts % c.ep != 0) {
    std::int64_t fits = std::min<std::int64_t>(std::max(c.ep, 1), m.experts);
    while (m.experts % fits != 0) --fits;  // the largest divisor of E not above e
    throw InputError(fmt::format(
        "--ep {} must divide the model's {} experts (each GPU of the group holds E/e of them); "
        "--ep {} would work",
        c.ep, m.experts, fits));
  }
  const std::int64_t stage_gpus = static_cast<std::int64_t>(c.tp) * c.cp * c.dp();
  if (stage_gpus % c.ep != 0)
    throw InputError(fmt::format(
        "--ep {} must divide the {} GPUs that hold a pipeline stage (t x c x d = {} x {} x {}): "
        "Megatron-LM takes the expert-parallel group from them",
        c.ep, stage_gpus, c.tp, c.cp, c.dp()));
  if (c.tp > 1 && !c.sequence_parallel)
    throw InputError(fmt::format(
        "a mixture of experts with --tp {} needs --sequence-parallel: each GPU routes its share of "
        "the sequence (Megatron-LM: 'sequence parallelism must be used' with expert and tensor "
        "parallelism)",
        c.tp));
  if (c.zero == 3 && stage_gpus > 1)
    throw InputError(
        "--zero 3 with experts: Megatron-LM's FSDP does not run with expert parallelism "
        "(megatron/training/arguments.py); --zero 1 or 2 would work");
  if (!(c.expert_load >= 1.0) || !std::isfinite(c.expert_load))
    throw InputError(fmt::format(
        "--expert-load {} is the busiest GPU's routed tokens over the mean: it is at least 1",
        c.expert_load));
  // The busiest of e GPUs receives at most every copy: e times the mean.
  if (c.expert_load > static_cast<double>(c.ep))
    throw InputError(fmt::format(
        "--expert-load {} with --ep {}: the busiest of {} GPU{} receives at most {} times the mean",
        c.expert_load, c.ep, c.ep, c.ep == 1 ? "" : "s", c.ep));
}

void check_offload(const PlanConfig& c) {
  if (c.offload_layers == 0) return;
  if (c.offload_layers < 0)
    throw InputError(fmt::format("--offload-layers must be 0 or more, got {}", c.offload_layers));
  if (c.offload_layers >= c.model.layers)
    throw InputError(fmt::format(
        "--offload-layers {}: Megatron-LM offloads fewer layers than the model's {}; at most {} "
        "would work",
        c.offload_layers, c.model.layers, c.model.layers - 1));
  if (c.pp != 1)
    throw InputError(fmt::format(
        "--offload-layers {} with --pp {}: Megatron-LM offloads activations only without "
        "pipeline parallelism; --pp 1 or --offload-layers 0 would work",
        c.offload_layers, c.pp));
  if (c.kind != "1f1b" || c.chunks != 1)
    throw InputError(fmt::format(
        "--offload-layers {} with --kind {}: without pipeline parallelism Megatron-LM runs one "
        "micro-batch's forward and backward at a time (--kind 1f1b), which is what offloading "
        "is modelled for",
        c.offload_layers, c.kind));
  if (c.recompute != Recompute::none)
    throw InputError(fmt::format(
        "--offload-layers {} with --recompute {}: Megatron-LM offloads activations only without "
        "recomputation; --recompute none or --offload-layers 0 would work",
        c.offload_layers, to_string(c.recompute)));
  if (!(c.cluster.host_bandwidth_bytes_per_s > 0))
    throw InputError(fmt::format(
        "--offload-layers {}: {} gives no link to host memory (host_bandwidth_bytes_per_s and "
        "host_efficiency in its cluster file)",
        c.offload_layers, c.cluster.name));
}

}  // namespace paci::plan
