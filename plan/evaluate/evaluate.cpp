// evaluate(): a configuration to a schedule and a cost model, simulated. GPUs are ranked as
// Megatron-LM ranks them (tensor-parallel fastest, then data-parallel, then pipeline), so a node of
// g GPUs holds g/t consecutive data-parallel replicas of a stage when t < g, and pipeline
// neighbours share a node only when t·d < g.
#include "plan/evaluate/evaluate.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "schedules/analysis.hpp"
#include "schedules/generators.hpp"

namespace paci::plan {

namespace {

// The SMs DualPipe's all-to-all kernels hold while a pair runs: "only 20 SMs are sufficient to
// fully utilize the bandwidths of IB and NVLink" (DeepSeek-V3 technical report, arXiv 2412.19437,
// section 3.2.2, on H800s of 132 SMs); taken as the same 20 on every GPU.
constexpr double kPairCommSms = 20;

// The pair's compute on the SMs left: SMs / (SMs − 20) times slower (1 when the cluster states no
// SM count, or too few).
double pair_compute_slowdown(const ClusterSpec& gpu) {
  const double sms = static_cast<double>(gpu.sms);
  return sms > 2 * kPairCommSms ? sms / (sms - kPairCommSms) : 1.0;
}

// Whether two GPUs (global ranks) sit in one node.
bool same_node(std::int64_t a, std::int64_t b, std::int64_t gpus_per_node) {
  return a / gpus_per_node == b / gpus_per_node;
}

}  // namespace

bool mirrored_kind(std::string_view kind) {
  return v_shaped(kind) || kind == "dualpipe";
}

bool asynchronous_kind(const std::string& kind) {
  return kind == "paci" || kind == "pipedream" || kind == "2bw";
}

std::vector<std::int32_t> default_partition(const PlanConfig& c) {
  if (!c.partition.empty()) return c.partition;
  const std::int32_t S = c.model_stages();
  const auto L = static_cast<std::int32_t>(c.model.layers);
  std::vector<std::int32_t> layers(static_cast<std::size_t>(S), L / S);
  std::int32_t rest = L % S;
  for (std::int32_t s = 1; s + 1 < S && rest > 0; ++s, --rest)
    ++layers[static_cast<std::size_t>(s)];
  for (std::int32_t s = S; s-- > 0 && rest > 0; --rest) ++layers[static_cast<std::size_t>(s)];
  return layers;
}

std::string cp_label(const PlanConfig& c, std::string_view format) {
  if (c.cp <= 1) return "";
  return fmt::format(fmt::runtime(format), c.cp) + (c.cp_all_gather ? " (all-gather)" : "");
}

std::vector<std::int32_t> placement_of(const PlanConfig& c) {
  std::vector<std::int32_t> placement(static_cast<std::size_t>(c.stages()));
  // Mirrored (zb-v, dualpipev, dualpipe): stages s and 2p - 1 - s on device s; else looped,
  // stage s on device s mod p.
  for (std::int32_t s = 0; s < c.stages(); ++s)
    placement[static_cast<std::size_t>(s)] =
        mirrored_kind(c.kind) && s >= c.pp ? 2 * c.pp - 1 - s : s % c.pp;
  return placement;
}

std::int32_t simulated_steps(const PlanConfig& c) {
  if (!asynchronous_kind(c.kind)) return 1;
  const auto P = static_cast<std::int32_t>(c.pp);
  const auto M = static_cast<std::int32_t>(c.microbatches());
  // The updates between the first quarter and the last (but one) measure the period; twice the
  // fill and two steps more leave them in steady state, and when a step holds the fill (M >= P)
  // three steps do: the first update already comes after it (the same period to 1e-5 as twice as
  // many steps, on the tests' and bench_plan's configurations).
  if (c.kind == "pipedream") return std::max<std::int32_t>(2, (4 + 2 * P + M - 1) / M);
  if (M >= P) return 3;
  const std::int32_t fill_steps = (P + M - 1) / M;  // steps before stage 0 is in steady state
  return 2 * fill_steps + 2;
}

ConfigCosts::ConfigCosts(const PlanConfig& c) : config_(c), placement_(placement_of(c)) {
  const ClusterSpec& gpu = c.cluster;
  const ModelSpec& m = c.model;
  // The replicas that hold the same weights: the data-parallel ones and, since each holds a part of
  // every sequence, the context-parallel ones (Megatron-LM reduces and shards over both).
  const std::int64_t t = c.tp, d = c.dp() * c.cp, P = c.pp, g = gpu.gpus_per_node;
  // Where each group's GPUs sit (Megatron-LM's order, tensor innermost, then context, data,
  // pipeline): the tensor-parallel group in one node when t <= g, its c context-parallel peers in
  // the same node while t·c <= g (else spread over nodes), the replicas of a stage g/t to a node,
  // pipeline neighbours t·d ranks apart.
  LayerRun run;
  run.microbatch_size = c.microbatch_size;
  run.tensor_parallel = t;
  run.sequence_parallel = c.sequence_parallel;
  run.tp_comm_overlap = c.tp_comm_overlap;
  run.recompute = c.recompute;
  run.flash_attention = c.flash_attention;
  run.causal = true;
  run.tp_ranks_per_node = std::min(t, g);
  run.context_parallel = c.cp;
  run.cp_ranks_per_node = std::clamp<std::int64_t>(g / t, 1, c.cp);
  run.cp_all_gather = c.cp_all_gather;
  run.precision = c.precision;
  run.expert_parallel = c.ep;
  run.ep_ranks_per_node = std::min<std::int64_t>(c.ep, g);  // the nearest GPUs first
  run.expert_load = c.expert_load;
  dp_per_node_ = std::clamp<std::int64_t>(g / t, 1, d);
  // An expert's replicas: the t·c·d GPUs of a stage over the e of its group, e ranks apart.
  expert_shards_ = std::max<std::int64_t>(1, t * c.cp * c.dp() / c.ep);
  expert_shards_per_node_ = std::clamp<std::int64_t>(g / c.ep, 1, expert_shards_);
  // HSDP: the sharding group is the nearest replicas (t ranks apart), its replicas that many
  // further.
  shards_ = c.shards();
  shards_per_node_ = std::clamp<std::int64_t>(g / t, 1, shards_);
  groups_ = d / shards_;
  groups_per_node_ = std::clamp<std::int64_t>(g / (t * shards_), 1, groups_);
  stride_ = t * d;
  layer_ = layer_costs(m, gpu, run);
  if (m.dense_layers > 0) dense_layer_ = layer_costs(m.dense_part(), gpu, run);
  embedding_ = embedding_costs(m, gpu, run);
  head_ = head_costs(m, gpu, run);
  // Tied embeddings, or multi-token prediction (it looks the next tokens up in the embedding on
  // the last stage: Megatron-LM keeps a copy there, synchronised as a tied one), on two devices.
  // DualPipe: not apart. Devices 0 and p - 1 each hold one copy's embedding and the other's head;
  // the copies hold the same weights, so each device's head shares its embedding and the twins'
  // gradient exchange brings each device both halves of the sum (the schedule's first and last
  // stage are both on device 0).
  tied_apart_ = (m.tied_embeddings || m.mtp_layers > 0) && placement_.front() != placement_.back();
  if (m.mtp_layers > 0) {
    PieceCosts head = head_;
    head.parameters = 0;
    mtp_ = layer_;
    mtp_ += head;
    mtp_ += mtp_extra_costs(m, gpu, run);
    mtp_ = mtp_.scaled(m.mtp_layers);
  }
  message_bytes_ = 2.0 * static_cast<double>(c.microbatch_size * m.seq_len) *
                   static_cast<double>(m.d_model) / static_cast<double>(t * c.cp);
  // Tied embeddings on two devices: their gradients summed between the first and last stage's
  // GPUs at every step (Megatron's embedding group), fp32.
  if (tied_apart_)
    embedding_sync_s_ =
        collective_s(gpu, Collective::all_reduce,
                     gradient_bytes(c.bf16_gradients) * static_cast<double>(embedding_.parameters),
                     2, same_node(0, (P - 1) * stride_, g) ? 2 : 1);
}

std::int32_t ConfigCosts::dense_in(std::int32_t first, std::int32_t n) const {
  const auto dense = static_cast<std::int32_t>(config_.model.dense_layers);
  return std::clamp(dense - first, 0, std::max(n, 0));
}

PieceCosts ConfigCosts::layers_from(std::int32_t first, std::int32_t n) const {
  const std::int32_t dense = dense_in(first, n);
  PieceCosts p;
  if (dense > 0) p += dense_layer_.scaled(dense);
  if (n - dense > 0) p += layer_.scaled(n - dense);
  return p;
}

StagePlan ConfigCosts::stage(std::int32_t s, std::int32_t first_layer, std::int32_t layers) const {
  const PlanConfig& c = config_;
  const ClusterSpec& gpu = c.cluster;
  const std::int64_t d = c.dp() * c.cp;  // the replicas of the weights (above)
  StagePlan sp;
  sp.stage = s;
  sp.device = placement_[static_cast<std::size_t>(s)];
  sp.first_layer = first_layer;
  sp.layers = layers;
  // DualPipe: each copy's first model stage holds an embedding, its last a head.
  sp.embedding = s % c.model_stages() == 0;
  sp.head = s % c.model_stages() == c.model_stages() - 1;
  const PieceCosts own_layers = layers_from(first_layer, layers);
  sp.pieces = own_layers;
  const std::int32_t dense = dense_in(first_layer, layers);
  if (sp.embedding) sp.pieces += embedding_;
  if (sp.head) {
    PieceCosts h = head_;
    // Tied on one device: the head is the embedding (no second copy).
    if (c.model.tied_embeddings && !tied_apart_)
      h.parameters -= padded_vocab(c.model, c.tp) / c.tp * c.model.d_model;
    sp.pieces += h;
    if (c.model.mtp_layers > 0) {
      sp.pieces += mtp_;
      // The embedding's copy the modules look the next tokens up in, when it is elsewhere.
      if (tied_apart_ && !c.model.tied_embeddings) sp.pieces.parameters += embedding_.parameters;
    }
  }
  // Activation offloading (docs/costmodel.md, "Activation offloading"; Transformer Engine's CPU
  // offload as Megatron-LM uses it, TE >= 2.10): the activations of layer i < N are copied to the
  // host, one layer after another on a copy stream, from the end of its forward; layer L - N + i
  // waits for that copy, so at most L - N layers' activations are on the GPU. In the backward the
  // copies come back the same way, each needed by its layer's backward. Each direction's N copies
  // hide behind the other L - 2 layers' forward (backward); what they exceed shows.
  sp.offloaded_layers = std::clamp(c.offload_layers - first_layer, 0, layers);
  if (sp.offloaded_layers > 0) {
    // The offloaded layers' copies, hidden behind a stage layer's average compute.
    sp.host_bytes = layers_from(first_layer, sp.offloaded_layers).activation_bytes;
    const double copies_s =
        static_cast<double>(sp.host_bytes) / (gpu.host_bandwidth_bytes_per_s * gpu.host_efficiency);
    // With every layer but the last offloaded, layer i + 1 waits for layer i's copy: nothing
    // hides them (Transformer Engine warns that overlap needs N <= L - 2).
    const double hiding = sp.offloaded_layers <= layers - 2
                              ? static_cast<double>(layers - 2) / static_cast<double>(layers)
                              : 0.0;
    sp.exposed_offload_forward_s = std::max(0.0, copies_s - hiding * own_layers.forward_total_s());
    sp.exposed_offload_backward_s =
        std::max(0.0, copies_s - hiding * own_layers.backward_total_s());
    sp.pieces.forward_s += sp.exposed_offload_forward_s;
    sp.pieces.input_grad_s += sp.exposed_offload_backward_s;
    // A split backward frees at I its layers' share of what it holds (the offloaded ones' came
    // back for it).
    const double kept = static_cast<double>(sp.pieces.activation_bytes - sp.host_bytes) /
                        static_cast<double>(sp.pieces.activation_bytes);
    sp.pieces.release_bytes =
        static_cast<std::int64_t>(static_cast<double>(sp.pieces.release_bytes) * kept);
    sp.pieces.activation_bytes -= sp.host_bytes;
  }
  const std::int64_t params = sp.pieces.parameters;
  // The routed experts' state is sharded over an expert's replicas, the rest over the layer's.
  const std::int64_t expert_params = sp.pieces.expert_parameters;
  sp.optimizer_s = optimizer_step_s(gpu, params - expert_params, shards_, c.zero, c.bf16_gradients,
                                    c.bf16_moments) +
                   optimizer_step_s(gpu, expert_params, expert_shards_, c.zero, c.bf16_gradients,
                                    c.bf16_moments);
  // FP8 (docs/costmodel.md, "FP8"): the weights cast to their two 8-bit copies (read 2 bytes,
  // write 1 + 1) once per step, at its first micro-batch (Transformer Engine caches them for the
  // others); with ZeRO 3 every gathered layer is cast again, for each forward and backward.
  // FP8 weights (--fp8-param-gather): the optimizer casts its fp32 shard to 8 bits (read 4, write
  // 1) and, once gathered, the transposed copy is made (read 1, write 1).
  const double fp8_weights = static_cast<double>(sp.pieces.fp8_parameters);
  // The routed experts' FP8 weights are sharded over an expert's replicas, the rest over d.
  const double fp8_experts =
      std::min(fp8_weights, static_cast<double>(sp.pieces.expert_parameters));
  const double weight_cast_s =
      !c.fp8_params ? memory_s(gpu, 4.0 * fp8_weights)
      : c.zero < 3
          ? memory_s(gpu, 5.0 * (fp8_weights - fp8_experts) / static_cast<double>(shards_) +
                              5.0 * fp8_experts / static_cast<double>(expert_shards_)) +
                memory_s(gpu, 2.0 * fp8_weights)
          : memory_s(gpu, 2.0 * fp8_weights);  // gathered in 8 bits: the transpose only
  if (c.zero == 3 && d > 1) {
    sp.pieces.forward_s += weight_cast_s;
    sp.pieces.input_grad_s += weight_cast_s;
  } else {
    sp.optimizer_s += weight_cast_s;
  }
  // Per-tensor scales: the amaxes of every FP8 tensor all-reduced over the group that shares the
  // weights' scales (tensor, context and data parallel: Megatron-LM's amax reduction group) after
  // each micro-batch's forward and backward.
  if (c.precision == Precision::fp8 && sp.pieces.fp8_parameters > 0) {
    const std::int64_t group = static_cast<std::int64_t>(c.tp) * d;
    sp.amax_reduce_s =
        small_all_reduce_s(gpu, group, std::min<std::int64_t>(group, gpu.gpus_per_node));
    sp.pieces.forward_comm_s += sp.amax_reduce_s;
    sp.pieces.backward_comm_s += sp.amax_reduce_s;
  }
  // The stage's pieces as ZeRO 3 gathers them, one collective each: its layers (and the
  // multi-token-prediction modules' layers on the last), the embedding, the head (with the
  // modules' own weights and the embedding's copy) (docs/costmodel.md, "ZeRO").
  const std::int64_t embedding = sp.embedding ? embedding_.parameters : 0;
  const std::int64_t mtp_layers = sp.head ? c.model.mtp_layers : 0;
  const std::int64_t head =
      sp.head ? std::max<std::int64_t>(
                    0, params - own_layers.parameters - mtp_layers * layer_.parameters - embedding)
              : 0;
  // HSDP: a shard of gradients, reduce-scattered in its group, is all-reduced between the groups.
  const auto between_groups = [&](double bytes) {
    return groups_ > 1
               ? collective_s(gpu, Collective::all_reduce, bytes / static_cast<double>(shards_),
                              groups_, groups_per_node_)
               : 0.0;
  };
  // A layer's weights gathered (`gather`: 2 bytes each, 1 for an FP8 weight with FP8 weights) or
  // its gradients reduced.
  const auto gather_bytes_of = [&](const PieceCosts& layer) {
    return kParamGatherBytes * static_cast<double>(layer.parameters) -
           (c.fp8_params ? static_cast<double>(layer.fp8_parameters) : 0.0);
  };
  const auto per_piece = [&](Collective kind, double bytes_per_parameter) {
    const auto one = [&](std::int64_t p, double bytes) {
      if (p <= 0) return 0.0;
      return collective_s(gpu, kind, bytes, shards_, shards_per_node_) +
             (kind == Collective::reduce_scatter ? between_groups(bytes) : 0.0);
    };
    const auto plain = [&](std::int64_t p) {
      return one(p, bytes_per_parameter * static_cast<double>(p));
    };
    // A layer's routed experts' gradients are reduced over an expert's replicas.
    const auto layer = [&](const PieceCosts& l) {
      const std::int64_t experts = l.expert_parameters;
      return kind == Collective::all_gather
                 ? one(l.parameters, gather_bytes_of(l))
                 : plain(l.parameters - experts) +
                       collective_s(gpu, kind, bytes_per_parameter * static_cast<double>(experts),
                                    expert_shards_, expert_shards_per_node_);
    };
    return static_cast<double>(layers - dense + mtp_layers) * layer(layer_) +
           (dense > 0 ? static_cast<double>(dense) * layer(dense_layer_) : 0.0) + plain(embedding) +
           plain(head);
  };
  // The largest layer this stage gathers.
  const PieceCosts& big_layer =
      dense > 0 && (dense == layers || dense_layer_.parameters > layer_.parameters) &&
              !(mtp_layers > 0 && layer_.parameters > dense_layer_.parameters)
          ? dense_layer_
          : layer_;
  const std::int64_t largest =
      std::max({layers + mtp_layers > 0 ? big_layer.parameters : 0, embedding, head});
  const double largest_share =
      params > 0 ? static_cast<double>(largest) / static_cast<double>(params) : 0.0;
  // At the end of the step: ZeRO 0 all-reduces the fp32 gradients, ZeRO 1 reduce-scatters them,
  // and ZeRO 1 and 2 gather the updated bf16 weights; ZeRO 2 and 3 reduced them per micro-batch,
  // and ZeRO 3 keeps its weights sharded.
  const double grad_bytes = gradient_bytes(c.bf16_gradients);
  // The routed experts' part over an expert's replicas (their FP8 weights gathered in 8 bits
  // with the rest's).
  const double expert_share = static_cast<double>(expert_params);
  const double grads = grad_bytes * static_cast<double>(params - expert_params);
  const double expert_grads = grad_bytes * expert_share;
  const double expert_fp8 = c.fp8_params ? std::min(fp8_weights, expert_share) : 0.0;
  const double gather =
      c.zero == 1 || c.zero == 2
          ? collective_s(gpu, Collective::all_gather,
                         kParamGatherBytes * static_cast<double>(params - expert_params) -
                             (c.fp8_params ? fp8_weights - expert_fp8 : 0.0),
                         shards_, shards_per_node_) +
                collective_s(gpu, Collective::all_gather,
                             kParamGatherBytes * expert_share - expert_fp8, expert_shards_,
                             expert_shards_per_node_)
          : 0.0;
  const double reduce =
      c.zero >= 2 ? 0.0
      : c.zero == 1
          ? collective_s(gpu, Collective::reduce_scatter, grads, shards_, shards_per_node_) +
                between_groups(grads) +
                collective_s(gpu, Collective::reduce_scatter, expert_grads, expert_shards_,
                             expert_shards_per_node_)
          : collective_s(gpu, Collective::all_reduce, grads, d, dp_per_node_) +
                collective_s(gpu, Collective::all_reduce, expert_grads, expert_shards_,
                             expert_shards_per_node_);
  sp.reduce_s = reduce + gather;
  // Buckets reduce while the backward runs; the last one cannot.
  const auto overlapped = [&](double comm, double compute, double last) {
    return comm > 0 ? std::max(comm - compute, std::min(comm, last)) : 0.0;
  };
  double exposed = reduce;
  if (c.overlap_grad_reduce && reduce > 0)
    exposed = overlapped(
        reduce, sp.pieces.backward_total_s(),
        reduce * std::min(1.0, kGradBucketParameters /
                                   static_cast<double>(std::max<std::int64_t>(params, 1))));
  sp.exposed_reduce_s = exposed + gather;
  if (c.zero == 3 && d > 1) {
    // The bf16 weights gathered piece by piece for every micro-batch's forward and again for its
    // backward, each prefetched behind the compute of the piece before (the first cannot be):
    // two gathered pieces and one piece's unsharded gradients are held at a time.
    sp.zero_forward_s = sp.zero_input_grad_s = per_piece(Collective::all_gather, kParamGatherBytes);
    const double first = sp.zero_forward_s * largest_share;
    sp.exposed_zero_forward_s = overlapped(sp.zero_forward_s, sp.pieces.forward_total_s(), first);
    sp.exposed_zero_input_grad_s = overlapped(
        sp.zero_input_grad_s,
        sp.pieces.input_grad_s + sp.pieces.backward_comm_s + sp.pieces.recompute_s, first);
    // With FP8 weights a layer's FP8 GEMM weights arrive in 8 bits: a byte each, not two.
    const bool fp8_layer = c.fp8_params && layers > 0 && largest == big_layer.parameters;
    sp.zero_workspace_bytes += 2 * (static_cast<std::int64_t>(kParamGatherBytes) * largest -
                                    (fp8_layer ? big_layer.fp8_parameters : 0));
    // FP8: the gathered layer's two 8-bit copies (row-wise and transposed); with FP8 weights the
    // gathered weight is the row-wise copy, and only the transposed one is made.
    if (sp.pieces.fp8_parameters > 0 && layers > 0)
      sp.zero_workspace_bytes += (c.fp8_params ? 1 : 2) * big_layer.fp8_parameters;
  }
  if (c.zero >= 2 && d > 1) {
    // Every micro-batch's gradients reduce-scattered, piece by piece, as its backward makes them
    // (ZeRO 3, and ZeRO 2 with the overlap on): issued on their own stream, they run while the
    // stage computes what follows, until its next backward needs the buffer again: a forward and
    // a backward of compute in the steady state, less the time ZeRO 3's gathers hold the same
    // links; the last micro-batch's only behind the rest of its own backward. The last piece's
    // cannot hide. Averaged over the M micro-batches (every one's W carries the same share).
    sp.zero_weight_grad_s = per_piece(Collective::reduce_scatter, grad_bytes);
    const bool overlap = c.zero == 3 || c.overlap_grad_reduce;
    const double last = sp.zero_weight_grad_s * largest_share;
    const double steady = std::max(0.0, sp.pieces.forward_total_s() + sp.pieces.backward_total_s() -
                                            sp.zero_forward_s - sp.zero_input_grad_s);
    const double own = std::max(0.0, sp.pieces.backward_total_s() - sp.zero_input_grad_s);
    const double M = static_cast<double>(std::max<std::int64_t>(1, c.microbatches()));
    sp.exposed_zero_weight_grad_s =
        overlap ? ((M - 1) * overlapped(sp.zero_weight_grad_s, steady, last) +
                   overlapped(sp.zero_weight_grad_s, own, last)) /
                      M
                : sp.zero_weight_grad_s;
    sp.zero_workspace_bytes += static_cast<std::int64_t>(grad_bytes) * largest;
  }
  return sp;
}

StageCost ConfigCosts::stage_cost(const StagePlan& sp) const {
  const PlanConfig& c = config_;
  const std::int64_t d = shards_, params = sp.pieces.parameters;  // ZeRO shards over d
  StageCost cost;
  cost.forward_s = sp.pieces.forward_total_s() + sp.exposed_zero_forward_s;
  cost.input_grad_s = sp.pieces.input_grad_s + sp.pieces.backward_comm_s + sp.pieces.recompute_s +
                      sp.exposed_zero_input_grad_s;
  cost.weight_grad_s = sp.pieces.weight_grad_s + sp.exposed_zero_weight_grad_s;
  cost.backward_s =
      sp.pieces.backward_total_s() + sp.exposed_zero_input_grad_s + sp.exposed_zero_weight_grad_s;
  // What an overlapped pair (dualpipev) hides behind the other action's compute: the tensor- and
  // context-parallel collectives and the experts' all-to-alls left exposed in each pass
  // (DualPipe's F&B), while the communication kernels hold kPairCommSms of the GPU's SMs.
  cost.forward_comm_s = sp.pieces.forward_comm_s;
  cost.backward_comm_s = sp.pieces.backward_comm_s;
  cost.pair_compute_slowdown = pair_compute_slowdown(c.cluster);
  cost.update_s =
      sp.optimizer_s + sp.exposed_reduce_s + ((sp.embedding || sp.head) ? embedding_sync_s_ : 0.0);
  cost.activation_bytes = sp.pieces.activation_bytes;
  cost.activation_message_bytes = sp.head ? 0 : static_cast<std::int64_t>(message_bytes_);
  cost.gradient_message_bytes = sp.embedding ? 0 : static_cast<std::int64_t>(message_bytes_);
  // ZeRO shards the optimizer state (1), the gradients (2) and the weights (3) over d; the routed
  // experts' over an expert's replicas.
  const std::int64_t experts = sp.pieces.expert_parameters, dense = params - experts,
                     de = expert_shards_;
  const auto sharded = [&](std::int64_t bytes, bool shard) {
    return shard ? (bytes * dense + d - 1) / d + (bytes * experts + de - 1) / de : bytes * params;
  };
  cost.weight_bytes = sharded(kWeightBytes, c.zero >= 3);
  // FP8's two 8-bit copies of the GEMMs' weights, kept for the step (ZeRO 3: per gathered layer,
  // in the workspace). With FP8 weights the row-wise copy is the weight: no bf16 one (ZeRO 3
  // keeps its shard in 8 bits).
  const std::int64_t fp8 = sp.pieces.fp8_parameters;
  if (c.fp8_params)
    cost.weight_bytes -= c.zero >= 3 && d > 1 ? (kWeightBytes * fp8 + d - 1) / d - (fp8 + d - 1) / d
                                              : kWeightBytes * fp8;
  if (c.zero < 3 || d == 1) cost.weight_bytes += 2 * fp8;
  cost.gradient_bytes =
      sharded(static_cast<std::int64_t>(gradient_bytes(c.bf16_gradients)), c.zero >= 2);
  const bool remainders = c.precision != Precision::mxfp8 && !c.fp8_params;
  cost.optimizer_bytes = sharded(!c.bf16_moments ? kOptimizerBytes
                                 : remainders    ? kOptimizerBf16RemaindersBytes
                                                 : kOptimizerBf16MomentsBytes,
                                 c.zero >= 1);
  cost.weight_grad_stash_bytes = sp.pieces.stash_bytes;
  cost.input_grad_release_bytes = sp.pieces.release_bytes;
  // Each stage's own; a device holds only its largest (hold_workspace_once).
  cost.workspace_bytes = sp.pieces.workspace_bytes + sp.zero_workspace_bytes;
  return cost;
}

std::vector<StagePlan> ConfigCosts::stage_plans(const std::vector<std::int32_t>& layers) const {
  std::vector<StagePlan> out;
  const std::int32_t S = config_.model_stages();
  std::int32_t first_layer = 0;
  for (std::int32_t s = 0; s < config_.stages(); ++s) {
    if (s % S == 0) first_layer = 0;  // DualPipe's second copy: the same layers again
    const std::int32_t n = layers[static_cast<std::size_t>(s % S)];
    out.push_back(stage(s, first_layer, n));
    first_layer += n;
  }
  return out;
}

// One backward runs at a time on a device: of its stages' workspaces (a full recomputation's
// layer, ZeRO's gathered pieces) it holds the largest once, on the first stage that has it.
void ConfigCosts::hold_workspace_once(std::vector<StageCost>& stages) const {
  std::vector<std::size_t> largest(static_cast<std::size_t>(config_.pp), stages.size());
  for (std::size_t s = 0; s < stages.size(); ++s) {
    std::size_t& at = largest[static_cast<std::size_t>(placement_[s])];
    if (at == stages.size() || stages[s].workspace_bytes > stages[at].workspace_bytes) at = s;
  }
  for (std::size_t s = 0; s < stages.size(); ++s)
    if (largest[static_cast<std::size_t>(placement_[s])] != s) stages[s].workspace_bytes = 0;
}

std::vector<StageCost> ConfigCosts::stage_costs(const std::vector<std::int32_t>& layers) const {
  std::vector<StageCost> out;
  for (const StagePlan& sp : stage_plans(layers)) out.push_back(stage_cost(sp));
  hold_workspace_once(out);
  return out;
}

CostModel ConfigCosts::cost_model(const std::vector<std::int32_t>& layers,
                                  std::vector<StagePlan>* stages) const {
  const PlanConfig& c = config_;
  const ClusterSpec& gpu = c.cluster;
  const ModelSpec& m = c.model;
  const std::int64_t P = c.pp, g = gpu.gpus_per_node;
  CostModel costs;
  costs.description = fmt::format(
      "paci plan: {} on {} x {} (t={}{}, p={}, d={}, v={}, b={}, M={}, recompute {}{}{}{}{}{}{}{})",
      m.name, c.gpus, gpu.name, c.tp, cp_label(c, ", c={}"), P, c.dp(), c.chunks, c.microbatch_size,
      c.microbatches(), to_string(c.recompute), c.sequence_parallel ? ", sequence parallel" : "",
      c.tp_comm_overlap ? ", tensor-parallel collectives overlapped" : "",
      c.zero > 0
          ? fmt::format(
                ", ZeRO {}{}", c.zero,
                c.shard_group > 0 ? fmt::format(" over groups of {} (HSDP)", c.shard_group) : "")
          : "",
      c.precision != Precision::bf16 ? fmt::format(", {}", to_string(c.precision)) : "",
      c.bf16_gradients ? ", bf16 gradients" : "",
      c.overlap_grad_reduce ? ", overlapped gradient reduction" : "",
      c.pp > 1 && !c.p2p_overlapped() ? ", pipeline sends waited on" : "");
  costs.tokens_per_microbatch = c.microbatch_size * m.seq_len;
  costs.blocking_sends = !c.p2p_overlapped();
  for (StagePlan& sp : stage_plans(layers)) {
    costs.stages.push_back(stage_cost(sp));
    if (stages) stages->push_back(std::move(sp));
  }
  hold_workspace_once(costs.stages);
  // Pipeline messages: on the network, or on NVLink between neighbours that share a node.
  // Pipeline neighbours are t·d GPUs apart: on an oversubscribed network, in different leaves when
  // a stage's GPUs fill a leaf's nodes.
  const bool across_leaves =
      gpu.network.oversubscription > 1 &&
      static_cast<double>(stride_) / static_cast<double>(g) >= gpu.network.nodes_per_leaf;
  const P2pLink network = p2p_link(gpu, false, across_leaves), nvlink = p2p_link(gpu, true);
  const auto rank = [&](std::int64_t device) { return device * stride_; };
  const bool one_node = same_node(rank(0), rank(P - 1), g);
  const P2pLink base = one_node ? nvlink : network;
  costs.default_link = {base.latency_s, base.bandwidth_bytes_per_s};
  // DualPipe's twins (devices d and p - 1 - d) exchange their gradients too.
  if (!one_node && stride_ < g)
    for (std::int64_t a = 0; a < P; ++a)
      for (const std::int64_t b : {(a + 1) % P, (a + P - 1) % P, c.copies() > 1 ? P - 1 - a : a})
        if (a != b && same_node(rank(a), rank(b), g) &&
            std::none_of(costs.links.begin(), costs.links.end(), [&](const LinkOverride& o) {
              return o.src_device == a && o.dst_device == b;
            }))
          costs.links.push_back({static_cast<std::int32_t>(a),
                                 static_cast<std::int32_t>(b),
                                 {nvlink.latency_s, nvlink.bandwidth_bytes_per_s}});
  return costs;
}

PlanResult evaluate(const PlanConfig& config, const EvaluateOptions& options) {
  SimResult simulated;
  return evaluate(config, options, simulated);
}

PlanResult evaluate(const PlanConfig& config, const EvaluateOptions& options, SimResult& sim,
                    const Schedule* schedule) {
  check_config(config);
  const PlanConfig& c = config;
  const ModelSpec& m = c.model;
  PlanResult r;
  r.config = c;
  r.parameters = parameter_counts(m).total;
  r.dp = c.dp();
  r.microbatches = c.microbatches();
  const auto M = static_cast<std::int32_t>(r.microbatches);
  r.simulated_steps = simulated_steps(c);
  r.schedule = schedule ? *schedule
                        : generate_schedule(c.kind, c.pp, M, r.simulated_steps,
                                            c.kind == "interleaved" ? c.chunks : 0);
  const ConfigCosts costs(c);
  r.costs = costs.cost_model(default_partition(c), &r.stages);

  SimOptions so;
  so.record_timeline = options.record_timeline;
  sim = simulate(r.schedule, r.costs, so);
  measure(r, sim);
  return r;
}

void measure(PlanResult& r, const SimResult& sim) {
  const PlanConfig& c = r.config;
  const ClusterSpec& gpu = c.cluster;
  const ModelSpec& m = c.model;
  const auto M = static_cast<std::int32_t>(r.microbatches);
  // The step: the makespan of one flushed step; for an asynchronous schedule the time between
  // stage 0's updates in the middle half of the run, times the updates per global step, and no
  // less than the busiest device's work per step (a window still in its fill can measure less,
  // which no steady state runs at).
  const auto& list0 = r.schedule.devices[static_cast<std::size_t>(r.schedule.placement[0])];
  const auto& times0 = sim.times[static_cast<std::size_t>(r.schedule.placement[0])];
  std::vector<double> updates;
  for (std::size_t i = 0; i < list0.size(); ++i)
    if (list0[i].kind == ActionKind::U && list0[i].stage == 0) updates.push_back(times0[i].end_s);
  double busy = 0.0, busiest = 0.0;
  for (const auto& device : sim.times) {
    double own = 0.0;
    for (const ActionTime& a : device) own += a.end_s - a.start_s;
    busy += own;
    busiest = std::max(busiest, own);
  }
  const double updates_per_step = c.kind == "pipedream" ? static_cast<double>(M) : 1.0;
  const double global_steps = static_cast<double>(r.schedule.steps) / updates_per_step;
  if (!asynchronous_kind(c.kind)) {
    r.step_s = sim.critical_path.length_s;
  } else {
    const std::size_t n = updates.size(), a = n / 4, b = n - 1 - std::max<std::size_t>(1, n / 4);
    r.step_s = std::max((updates[b] - updates[a]) / static_cast<double>(b - a) * updates_per_step,
                        busiest / global_steps);
  }
  const double devices = static_cast<double>(r.schedule.num_devices());
  r.bubble_ratio = 1.0 - busy / global_steps / (devices * r.step_s);
  const double tokens = static_cast<double>(c.global_batch * m.seq_len);
  r.tokens_per_s = tokens / r.step_s;
  const ParamCounts counts = parameter_counts(m);
  const double L = static_cast<double>(m.layers), s = static_cast<double>(m.seq_len),
               h = static_cast<double>(m.d_model);
  const double head_params = static_cast<double>(m.vocab) * h;
  // Attention: QK^T and PV, 2·s·a·(d_qk + d) a token forward, three times that with the backward
  // (12·s·a·d without MLA's wider query and key heads), unmasked as Megatron-LM counts it.
  // Multi-token prediction: each module a layer, its projection and the head again.
  const double mtp = static_cast<double>(m.mtp_layers);
  r.model_flops_per_step =
      tokens *
      (6.0 * (static_cast<double>(counts.active_layers) + (1.0 + mtp) * head_params) +
       6.0 * (L + mtp) * s * static_cast<double>(m.heads * (m.qk_head_dim() + m.head_dim())));
  r.model_tflops_per_gpu = r.model_flops_per_step / r.step_s / static_cast<double>(c.gpus) / 1e12;
  r.mfu = gpu.peak_flops > 0 ? r.model_tflops_per_gpu * 1e12 / gpu.peak_flops : 0.0;
  r.memory_per_device = sim.device_peak_memory_bytes;
  r.peak_memory_bytes = *std::max_element(r.memory_per_device.begin(), r.memory_per_device.end());
  r.memory_limit_bytes = gpu.memory_bytes;
  // Offloaded activations, one micro-batch's (Megatron-LM offloads only at p = 1, where one is
  // in flight), against the host memory per GPU when the cluster gives it.
  r.host_memory_bytes = c.offload_layers > 0 ? ConfigCosts(c).host_bytes() : 0;
  r.host_fits = !(gpu.host_memory_bytes > 0) ||
                static_cast<double>(r.host_memory_bytes) <= gpu.host_memory_bytes;
  r.fits = static_cast<double>(r.peak_memory_bytes) <= r.memory_limit_bytes && r.host_fits;
  r.max_staleness = analyze(r.schedule).max_lag();
}

}  // namespace paci::plan
