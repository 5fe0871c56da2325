// The per-GPU costs of a transformer's pieces (the collectives: plan/costs/collectives.cpp).
// Letters as in docs/costmodel.md: b micro-batch, s sequence, T = b·s tokens, h width, a heads,
// d = h/a head width, f MLP width, V vocabulary, t tensor-parallel GPUs; per GPU a/t heads, f/t
// MLP columns, and with sequence parallelism T/t tokens in the norms, dropouts and residual adds.
#include "plan/costs/costs.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <utility>

#include "base/errors.hpp"

namespace paci::plan {

namespace {

double ceil_div(std::int64_t a, std::int64_t b) {
  return static_cast<double>((a + b - 1) / b);
}

}  // namespace

std::string_view to_string(Precision precision) {
  switch (precision) {
    case Precision::bf16:
      return "bf16";
    case Precision::fp8:
      return "fp8";
    case Precision::mxfp8:
      return "mxfp8";
  }
  return "?";
}

Precision parse_precision(std::string_view text) {
  if (text == "bf16") return Precision::bf16;
  if (text == "fp8") return Precision::fp8;
  if (text == "mxfp8") return Precision::mxfp8;
  throw InputError(fmt::format("unknown precision '{}' (expected bf16, fp8 or mxfp8)", text));
}

void check_precision(const ClusterSpec& c, Precision precision) {
  if (precision == Precision::bf16) return;
  if (c.fp8_peak_flops <= 0)
    throw InputError(fmt::format(
        "--precision {}: {} has no FP8 tensor cores (its cluster file gives no fp8_peak_flops); "
        "--precision bf16 would work",
        to_string(precision), c.name));
  if (precision == Precision::mxfp8 && c.mxfp8_gemm_efficiency <= 0)
    throw InputError(fmt::format(
        "--precision mxfp8: {} has no block-scaled (MX) FP8 tensor cores (Blackwell has; its "
        "cluster file gives no mxfp8_gemm_efficiency); --precision fp8 would work",
        c.name));
}

double gemm_s(const ClusterSpec& c, std::int64_t m, std::int64_t n, std::int64_t k,
              std::int64_t batch, Precision precision) {
  if (m <= 0 || n <= 0 || k <= 0 || batch <= 0) return 0.0;
  const double M = static_cast<double>(m), N = static_cast<double>(n), K = static_cast<double>(k),
               B = static_cast<double>(batch);
  const double flops = 2.0 * M * N * K * B;
  // Input bytes per element: 2 (bf16), 1 (FP8), 1 + 1/32 (MXFP8's scales); the output is bf16.
  const double input = precision == Precision::bf16  ? 2.0
                       : precision == Precision::fp8 ? 1.0
                                                     : 1.0 + 1.0 / 32.0;
  const double bytes = (input * (M * K + K * N) + 2.0 * M * N) * B;
  const double tiles = ceil_div(m, kGemmTile) * ceil_div(n, kGemmTile) * B;
  const double fill = std::min(1.0, tiles / static_cast<double>(c.sms));
  const double rate = precision == Precision::bf16  ? c.peak_flops * c.gemm_efficiency
                      : precision == Precision::fp8 ? c.fp8_peak_flops * c.fp8_gemm_efficiency
                                                    : c.fp8_peak_flops * c.mxfp8_gemm_efficiency;
  const double compute_s = flops / (rate * fill);
  const double memory_s = bytes / (c.memory_bandwidth_bytes_per_s * c.memory_efficiency);
  return c.kernel_launch_s + std::max(compute_s, memory_s);
}

double memory_s(const ClusterSpec& c, double bytes) {
  if (bytes <= 0) return 0.0;
  return c.kernel_launch_s + bytes / (c.memory_bandwidth_bytes_per_s * c.memory_efficiency);
}

AttentionRate attention_rate(const ClusterSpec& c, double seq) {
  const auto& table = c.attention_by_seq;
  if (table.empty()) {
    const double forward = c.peak_flops * c.flash_forward_efficiency,
                 backward = c.peak_flops * c.flash_backward_efficiency;
    return {seq, forward, backward, forward, backward};
  }
  if (seq <= table.front().seq) return table.front();
  if (seq >= table.back().seq) return table.back();
  const auto hi = std::lower_bound(table.begin(), table.end(), seq,
                                   [](const AttentionRate& r, double s) { return r.seq < s; });
  const auto lo = hi - 1;
  const double x = std::log(seq / lo->seq) / std::log(hi->seq / lo->seq);
  const auto mix = [x](double a, double b) { return a + x * (b - a); };
  return {seq, mix(lo->causal_forward, hi->causal_forward),
          mix(lo->causal_backward, hi->causal_backward), mix(lo->full_forward, hi->full_forward),
          mix(lo->full_backward, hi->full_backward)};
}

PieceCosts& PieceCosts::operator+=(const PieceCosts& o) {
  forward_s += o.forward_s;
  forward_comm_s += o.forward_comm_s;
  input_grad_s += o.input_grad_s;
  weight_grad_s += o.weight_grad_s;
  backward_comm_s += o.backward_comm_s;
  recompute_s += o.recompute_s;
  parameters += o.parameters;
  fp8_parameters += o.fp8_parameters;
  expert_parameters += o.expert_parameters;
  activation_bytes += o.activation_bytes;
  stash_bytes += o.stash_bytes;
  release_bytes += o.release_bytes;
  workspace_bytes = std::max(workspace_bytes, o.workspace_bytes);  // one backward at a time
  return *this;
}

PieceCosts PieceCosts::scaled(std::int64_t count) const {
  const double k = static_cast<double>(count);
  PieceCosts p = *this;
  p.forward_s *= k;
  p.forward_comm_s *= k;
  p.input_grad_s *= k;
  p.weight_grad_s *= k;
  p.backward_comm_s *= k;
  p.recompute_s *= k;
  p.parameters *= count;
  p.fp8_parameters *= count;
  p.expert_parameters *= count;
  p.activation_bytes *= count;
  p.stash_bytes *= count;
  p.release_bytes *= count;
  return p;
}

std::int64_t padded_vocab(const ModelSpec& model, std::int64_t tensor_parallel) {
  const std::int64_t multiple = 128 * tensor_parallel;
  return (model.vocab + multiple - 1) / multiple * multiple;
}

namespace {

// The per-GPU widths of a layer under t-way tensor parallelism.
struct Widths {
  std::int64_t T = 0;   // tokens of the micro-batch on this GPU: b·s/c
  std::int64_t Tn = 0;  // tokens in the norms, dropouts, residual adds: T, or T/t with SP
  std::int64_t q = 0;   // query (and attention output) columns: h/t
  std::int64_t kv = 0;  // key (and value) columns: g·d/t, at least one head's d
  // Query and key columns with MLA's rotary part: a(d + r)/t each (q and kv without MLA).
  std::int64_t qk = 0, k = 0;
  std::int64_t f = 0;      // MLP columns: f/t
  std::int64_t heads = 0;  // a/t
};

Widths widths(const ModelSpec& m, const LayerRun& r) {
  const std::int64_t t = r.tensor_parallel;
  Widths w;
  w.T = r.microbatch_size * m.seq_len / r.context_parallel;
  w.Tn = r.sequence_parallel ? (w.T + t - 1) / t : w.T;
  w.q = m.q_dim() / t;
  w.kv = std::max<std::int64_t>(1, m.kv_heads / t) * m.head_dim();
  // With experts the layer's own (tensor-parallel) MLP is the shared expert, if any; the routed
  // experts are costed apart (moe_costs).
  w.f = (m.moe() ? m.shared_expert_ffn : m.ffn) / t;
  w.heads = m.heads / t;
  w.qk = m.mla() ? w.heads * m.qk_head_dim() : w.q;
  w.k = m.mla() ? w.heads * m.qk_head_dim() : w.kv;
  return w;
}

// One tensor-parallel collective over this GPU's T tokens of `width` columns, `bytes` per element
// (2: bf16; 1 when an all-gather carries FP8 inputs).
double tp_collective_s(const ClusterSpec& c, const LayerRun& r, const Widths& w, Collective kind,
                       double width, double bytes = 2.0) {
  return collective_s(c, kind, bytes * static_cast<double>(w.T) * width, r.tensor_parallel,
                      r.tp_ranks_per_node);
}

// Megatron's f and g operators around a tensor-parallel block whose input side carries `in`
// columns a token (h; MLA's latents, q_r + r_kv + r, which its up-projections gather) and whose
// output side carries h. Forward: with sequence parallelism an all-gather of the input and a
// reduce-scatter of the output, without it an all-reduce of the output; backward: a
// reduce-scatter of the input's gradient and an all-gather of the output's, or an all-reduce of
// the input's gradient.
struct TpPair {
  double forward_s = 0.0, backward_s = 0.0;
};
TpPair tp_pair(const ModelSpec& m, const ClusterSpec& c, const LayerRun& r, const Widths& w,
               double in, double gather_bytes) {
  const double h = static_cast<double>(m.d_model);
  if (!r.sequence_parallel)
    return {tp_collective_s(c, r, w, Collective::all_reduce, h),
            tp_collective_s(c, r, w, Collective::all_reduce, in)};
  return {tp_collective_s(c, r, w, Collective::all_gather, in, gather_bytes) +
              tp_collective_s(c, r, w, Collective::reduce_scatter, h),
          tp_collective_s(c, r, w, Collective::reduce_scatter, in) +
              tp_collective_s(c, r, w, Collective::all_gather, h)};
}

// The attention core of one layer (QK^T, softmax, dropout, times V): forward and backward.
struct CoreTimes {
  double forward_s = 0.0, backward_s = 0.0;
};

CoreTimes attention_core(const ModelSpec& m, const ClusterSpec& c, const LayerRun& r,
                         const Widths& w) {
  // d: each value head's width; dqk: each query and key head's (d plus MLA's rotary columns).
  const std::int64_t s = m.seq_len, d = m.head_dim(), dqk = m.qk_head_dim(),
                     batch = r.microbatch_size * w.heads;
  CoreTimes core;
  if (r.flash_attention) {
    // FlashAttention's own FLOP count: 4·s²·d per head and sequence forward (QK^T and PV), half
    // of it under a causal mask; its backward 2.5 times that (it recomputes QK^T). Each call at
    // the measured rate for its length and mask (attention_rate). With MLA's wider query and key
    // heads, QK^T's d is theirs: 2·s²·(d_qk + d).
    const double B = static_cast<double>(batch), D = 0.5 * static_cast<double>(dqk + d);
    const std::int64_t cp = r.context_parallel;
    if (cp == 1 || r.cp_all_gather) {
      // One call over the whole sequence; with the keys and values all-gathered (Llama 3's
      // context parallelism) each GPU's queries (s/c, load-balanced) meet every key before them:
      // 1/c of the work, at the whole sequence's rate.
      const double S = static_cast<double>(s);
      const double flops = 4.0 * B * S * S * D * (r.causal ? 0.5 : 1.0) / static_cast<double>(cp);
      const AttentionRate rate = attention_rate(c, S);
      core.forward_s =
          c.kernel_launch_s + flops / (r.causal ? rate.causal_forward : rate.full_forward);
      core.backward_s =
          c.kernel_launch_s + 2.5 * flops / (r.causal ? rate.causal_backward : rate.full_backward);
      return core;
    }
    // Transformer Engine's ring (AttnFuncWithCPAndKVP2P): c steps, one call each, on this GPU's
    // s/c queries. Causal: the sequence cut in 2c chunks, GPU i holding chunks i and 2c-1-i;
    // step 0 is its own chunks under the mask, every later step unmasked on half of it (all
    // the queries against half the keys, or half the queries against all): each step (s/c)²/2
    // query-key pairs, at the unmasked rate of their geometric-mean length s/(c·√2). Without a
    // mask every step is (s/c)² pairs at length s/c.
    const double chunk = static_cast<double>(s) / static_cast<double>(cp);
    const double steps = static_cast<double>(cp);
    const double step_flops = 4.0 * B * chunk * chunk * D * (r.causal ? 0.5 : 1.0);
    const AttentionRate own = attention_rate(c, chunk);
    const AttentionRate half = r.causal ? attention_rate(c, chunk / std::sqrt(2.0)) : own;
    core.forward_s = steps * c.kernel_launch_s +
                     step_flops / (r.causal ? own.causal_forward : own.full_forward) +
                     (steps - 1) * step_flops / half.full_forward;
    core.backward_s = steps * c.kernel_launch_s +
                      2.5 * step_flops / (r.causal ? own.causal_backward : own.full_backward) +
                      (steps - 1) * 2.5 * step_flops / half.full_backward;
    // Each step's partial result merged in bf16 (read it and the running sum, write the sum: 6
    // bytes per element): forward the output (this GPU's T·h/t), backward the query gradient and
    // the keys' and values' gradients that travel with them (T·2·kv/t).
    const double T = static_cast<double>(w.T), q = static_cast<double>(w.q),
                 kv = static_cast<double>(w.k + w.kv);
    core.forward_s += steps * memory_s(c, 6.0 * T * q);
    core.backward_s += steps * (memory_s(c, 6.0 * T * q) + memory_s(c, 6.0 * T * kv));
    return core;
  }
  // Megatron's unfused core: batched GEMMs over the full s x s scores, a fused
  // scale-mask-softmax (bf16 read and write: 4 bytes per score), and GPT's dropout on the
  // probabilities (read 2, write 2, its 1-byte mask).
  const double scores =
      static_cast<double>(batch) * static_cast<double>(s) * static_cast<double>(s);
  const bool dropout = m.arch == Arch::gpt;
  core.forward_s = gemm_s(c, s, s, dqk, batch) + memory_s(c, 4.0 * scores) +
                   (dropout ? memory_s(c, 5.0 * scores) : 0.0) + gemm_s(c, s, d, s, batch);
  // dV = P^T dO, dP = dO V^T, the dropout's and the softmax's backward (read P and dP, write dS:
  // 6 bytes per score), dQ = dS K, dK = dS^T Q.
  core.backward_s = gemm_s(c, s, d, s, batch) + gemm_s(c, s, s, d, batch) +
                    (dropout ? memory_s(c, 5.0 * scores) : 0.0) + memory_s(c, 6.0 * scores) +
                    2 * gemm_s(c, s, dqk, s, batch);
  return core;
}

// A linear layer [T x in] -> [T x out]: forward, input gradient (dX = dY·W^T) and weight gradient
// (dW = X^T·dY), all three in `precision` (Transformer Engine's FP8 runs fprop, dgrad and wgrad
// in FP8).
void linear(const ClusterSpec& c, std::int64_t T, std::int64_t in, std::int64_t out, PieceCosts& p,
            Precision precision = Precision::bf16) {
  p.forward_s += gemm_s(c, T, out, in, 1, precision);
  p.input_grad_s += gemm_s(c, T, in, out, 1, precision);
  p.weight_grad_s += gemm_s(c, in, out, T, 1, precision);
}

// The routed experts of one layer (docs/costmodel.md, "Mixture of experts"), as Megatron-LM's
// MoE layer with the all-to-all token dispatcher runs them at expert tensor parallelism 1: each
// GPU routes its T/t tokens (sequence-sharded under tensor parallelism), sends each token's k
// copies to the GPUs holding their experts and takes them back after.
void moe_costs(const ModelSpec& m, const ClusterSpec& c, const LayerRun& r, const Widths& w,
               PieceCosts& p) {
  const bool gpt = m.arch == Arch::gpt;
  const std::int64_t h = m.d_model, E = m.experts, e = r.expert_parallel, f = m.ffn;
  const std::int64_t tokens = (w.T + r.tensor_parallel - 1) / r.tensor_parallel;
  const double Tr = static_cast<double>(tokens), H = static_cast<double>(h),
               Fe = static_cast<double>(f), K = static_cast<double>(m.top_k);
  // The router: [T/t x h] x [h x E] in bf16, its softmax and top-k over fp32 logits (read and
  // write 4 bytes per logit), the same backward.
  linear(c, tokens, h, E, p);
  p.forward_s += memory_s(c, 8.0 * Tr * static_cast<double>(E));
  p.input_grad_s += memory_s(c, 8.0 * Tr * static_cast<double>(E));
  // Dispatch: the k copies of each token permuted into expert order (read and write 2 bytes per
  // element) and sent, bf16, to the expert's GPU; combine: sent back, un-permuted and summed with
  // the router's weights (read the copy, read and write the sum: 6). The backward mirrors both.
  // The busiest GPU receives its load times the mean (and sends as much back in the combine):
  // each all-to-all waits for it.
  const double copies = K * Tr;
  const double a2a = all_to_all_s(c, 2.0 * copies * H * r.expert_load, e, r.ep_ranks_per_node);
  p.forward_s += memory_s(c, 4.0 * copies * H) + memory_s(c, 6.0 * copies * H);
  p.input_grad_s += memory_s(c, 4.0 * copies * H) + memory_s(c, 6.0 * copies * H);
  p.forward_comm_s += 2 * a2a;
  p.backward_comm_s += 2 * a2a;
  // The experts: E/e on this GPU share the busiest GPU's copies (the mean k·T/t times the load),
  // each a GEMM of its tokens (a grouped GEMM: one batch of E/e), the arch's MLP of width f.
  const std::int64_t local = E / e;
  const double busiest = copies * r.expert_load;
  const std::int64_t per_expert =
      static_cast<std::int64_t>(std::ceil(busiest / static_cast<double>(local)));
  const std::int64_t up = gpt ? f : 2 * f;
  const auto grouped = [&](std::int64_t in, std::int64_t out) {
    p.forward_s += gemm_s(c, per_expert, out, in, local, r.precision);
    p.input_grad_s += gemm_s(c, per_expert, in, out, local, r.precision);
    p.weight_grad_s += gemm_s(c, in, out, per_expert, local, r.precision);
  };
  grouped(h, up);
  grouped(f, h);
  // The activation between them (GeLU 4 / 6 bytes per element forward / backward, SwiGLU 6 / 10,
  // as the dense MLP) and, with FP8, the casts of the two GEMMs' inputs forward and of their
  // output gradients backward (read 2, write 1 + 1).
  p.forward_s += memory_s(c, (gpt ? 4.0 : 6.0) * busiest * Fe);
  p.input_grad_s += memory_s(c, (gpt ? 6.0 : 10.0) * busiest * Fe);
  if (r.precision != Precision::bf16) {
    p.forward_s += memory_s(c, 4.0 * busiest * H) + memory_s(c, 4.0 * busiest * Fe);
    p.input_grad_s +=
        memory_s(c, 4.0 * busiest * static_cast<double>(up)) + memory_s(c, 4.0 * busiest * H);
  }
  // Parameters: the router whole, the local experts whole (their biases with gpt).
  const std::int64_t expert = gpt ? 2 * h * f + f + h : 3 * h * f;
  p.expert_parameters = local * expert;
  p.parameters += h * E + p.expert_parameters;
  if (r.precision != Precision::bf16) p.fp8_parameters += local * (up * h + f * h);
}

}  // namespace

PieceCosts layer_costs(const ModelSpec& m, const ClusterSpec& c, const LayerRun& r) {
  const Widths w = widths(m, r);
  const std::int64_t h = m.d_model;
  const bool gpt = m.arch == Arch::gpt;
  const double T = static_cast<double>(w.T), Tn = static_cast<double>(w.Tn),
               H = static_cast<double>(h), F = static_cast<double>(w.f);
  PieceCosts p;
  // The four GEMMs of a layer: QKV, attention output, the MLP's first (gate and up, for SwiGLU)
  // and second.
  const std::int64_t mlp_up = gpt ? w.f : 2 * w.f;
  // Each GEMM's forward and input-gradient time, for the collectives that overlap them.
  std::array<std::pair<double, double>, 4> gemms{};
  const auto timed_linear = [&](std::size_t i, std::int64_t in, std::int64_t out) {
    const PieceCosts before = p;
    linear(c, w.T, in, out, p, r.precision);
    gemms[i] = {p.forward_s - before.forward_s, p.input_grad_s - before.input_grad_s};
  };
  // MLA (Megatron-LM's MLASelfAttention): the latents' down-projections on every GPU of the
  // group (on its T/t tokens with sequence parallelism), the up-projections split by heads; the
  // five GEMMs take the QKV GEMM's place.
  const std::int64_t latents = m.q_lora_rank + m.kv_lora_rank + m.rope_head_width;
  if (m.mla()) {
    const PieceCosts before = p;
    if (m.q_lora_rank > 0) {
      linear(c, w.Tn, h, m.q_lora_rank, p, r.precision);
      linear(c, w.T, m.q_lora_rank, w.qk, p, r.precision);
    } else {
      linear(c, w.T, h, w.qk, p, r.precision);
    }
    linear(c, w.Tn, h, m.kv_lora_rank + m.rope_head_width, p, r.precision);
    linear(c, w.T, m.kv_lora_rank, w.heads * 2 * m.head_dim(), p, r.precision);
    gemms[0] = {p.forward_s - before.forward_s, p.input_grad_s - before.input_grad_s};
  } else {
    timed_linear(0, h, w.q + 2 * w.kv);
  }
  timed_linear(1, w.q, h);
  timed_linear(2, h, mlp_up);
  timed_linear(3, w.f, h);
  const CoreTimes core = attention_core(m, c, r, w);
  p.forward_s += core.forward_s;
  p.input_grad_s += core.backward_s;
  const bool fp8 = r.precision != Precision::bf16;
  // The query, key and value columns the attention's GEMMs write (MLA: its up-projections'; the
  // latents apart).
  const std::int64_t qkv_cols = m.mla() ? w.qk + w.heads * 2 * m.head_dim() : w.q + 2 * w.kv;
  if (fp8) {
    // The casts to 8 bits (docs/costmodel.md, "FP8"), each reading bf16 (2 bytes per element) and
    // writing a row-wise and a column-wise 8-bit copy (1 + 1: the dgrad and wgrad GEMMs read the
    // tensor in both layouts). Forward: the inputs of the attention output and the MLP's second
    // GEMM (the norms write the QKV and first MLP inputs in FP8 themselves, fused). Backward:
    // every GEMM's output gradient.
    p.forward_s += memory_s(c, 4.0 * T * static_cast<double>(w.q)) + memory_s(c, 4.0 * T * F);
    p.input_grad_s += memory_s(c, 4.0 * T * static_cast<double>(qkv_cols)) +
                      memory_s(c, 4.0 * Tn * static_cast<double>(m.mla() ? latents : 0)) +
                      memory_s(c, 4.0 * T * H) +
                      memory_s(c, 4.0 * T * static_cast<double>(mlp_up)) +
                      (w.f > 0 ? memory_s(c, 4.0 * T * H) : 0.0);
  }
  // The memory-bound kernels, bytes read plus written (docs/costmodel.md lists them).
  // Both: the attention output laid out back as [s, b, h/t] (a copy: 4 bytes per element) and,
  // in the backward, the gradients of Q, K and V assembled into the QKV GEMM's output layout (4
  // per element), as Megatron-LM's attention does around its core; the residual stream's two
  // gradient sums in the backward (read both, write: 6).
  const double qkv_out = T * static_cast<double>(w.qk + w.k + w.kv);
  p.forward_s += memory_s(c, 4 * T * static_cast<double>(w.q));
  p.input_grad_s += memory_s(c, 4 * qkv_out) + 2 * memory_s(c, 6 * Tn * H);
  if (gpt) {
    // Forward: two LayerNorms (4 bytes per element each), the QKV bias added after its GEMM (4),
    // two fused bias-dropout-adds (read the branch and the residual, write the sum, its 1-byte
    // mask: 7), a fused bias-GeLU (4 per MLP element). Backward: each LayerNorm 8 (read x and
    // dy, write dx, its weight-gradient partials), each dropout-add 5 (read the gradient and the
    // mask, write), GeLU 6, and the four biases' gradients (each a read of its output gradient:
    // 2 per element).
    p.forward_s += 2 * memory_s(c, 4 * Tn * H) + memory_s(c, 4 * qkv_out) +
                   2 * memory_s(c, 7 * Tn * H) + memory_s(c, 4 * T * F);
    p.input_grad_s +=
        2 * memory_s(c, 8 * Tn * H) + 2 * memory_s(c, 5 * Tn * H) + memory_s(c, 6 * T * F);
    p.weight_grad_s +=
        memory_s(c, 2 * qkv_out) + 2 * memory_s(c, 2 * Tn * H) + memory_s(c, 2 * T * F);
  } else {
    // Forward: two RMSNorms (4), rotary on Q and K (read and write: 4 per element), two residual
    // adds (6), SwiGLU (read gate and up, write: 6 per MLP element). Backward: RMSNorms 8,
    // rotary 4, SwiGLU 10.
    // MLA: rotary on the queries' and the shared key's r columns, the two latents' RMSNorms (4,
    // 8), and the rotary parts concatenated to the heads' (a copy of Q and K: 4 per element).
    const double qk = m.mla()
                          ? T * static_cast<double>(w.heads * m.rope_head_width + m.rope_head_width)
                          : T * static_cast<double>(w.q + w.kv);
    p.forward_s += 2 * memory_s(c, 4 * Tn * H) + memory_s(c, 4 * qk) + 2 * memory_s(c, 6 * Tn * H) +
                   memory_s(c, 6 * T * F);
    p.input_grad_s += 2 * memory_s(c, 8 * Tn * H) + memory_s(c, 4 * qk) + memory_s(c, 10 * T * F);
    if (m.mla()) {
      const double norms = Tn * static_cast<double>(m.q_lora_rank + m.kv_lora_rank);
      const double assembled = T * static_cast<double>(w.qk + w.k);
      p.forward_s += memory_s(c, 4 * norms) + memory_s(c, 4 * assembled);
      p.input_grad_s += memory_s(c, 8 * norms) + memory_s(c, 4 * assembled);
    }
  }
  // Two tensor-parallel collectives in each direction (Megatron's f and g operators).
  // With FP8 and sequence parallelism the forward all-gathers carry the 8-bit inputs of the QKV
  // and the first MLP GEMM (Transformer Engine gathers after the cast).
  const double forward_gather_bytes = fp8 ? 1.0 : 2.0;
  // With experts and no shared expert the MLP side has none: the tokens stay sequence-sharded
  // into the dispatch and out of the combine. MLA's attention gathers its latents, not the
  // h-wide input: its down-projections run on each GPU's own tokens (Megatron-LM's
  // MLASelfAttention: duplicated linears, the up-projections column-parallel).
  const int pairs = w.f > 0 ? 2 : 1;
  const std::array<double, 2> inputs{m.mla() ? static_cast<double>(latents) : H, H};
  if (!r.tp_comm_overlap) {
    for (int i = 0; i < pairs; ++i) {
      const TpPair pair =
          tp_pair(m, c, r, w, inputs[static_cast<std::size_t>(i)], forward_gather_bytes);
      p.forward_comm_s += pair.forward_s;
      p.backward_comm_s += pair.backward_s;
    }
  } else {
    // Transformer Engine's overlap (sequence parallelism): each all-gather and reduce-scatter is
    // cut into t chunks that travel while the GEMM it feeds or follows computes on the chunks
    // already there, so what shows is the part the GEMM cannot hide and one chunk. GEMM i's
    // collective: even i (QKV, the first MLP GEMM) the all-gather of its input forward (8 bits
    // with FP8) and the reduce-scatter of its input's gradient backward; odd i (the attention
    // output, the second MLP GEMM) the reduce-scatter of its output forward and the all-gather
    // of its output's gradient backward.
    const auto collective = [&](std::size_t i, bool forward) {
      const double in = inputs[i / 2];
      if (i % 2 == 0)
        return forward ? tp_collective_s(c, r, w, Collective::all_gather, in, forward_gather_bytes)
                       : tp_collective_s(c, r, w, Collective::reduce_scatter, in);
      return tp_collective_s(c, r, w, forward ? Collective::reduce_scatter : Collective::all_gather,
                             H);
    };
    const double chunks = static_cast<double>(r.tensor_parallel);
    const auto exposed = [&](double comm, double gemm) {
      return std::max(0.0, comm - gemm) + std::min(comm, gemm) / chunks;
    };
    // While a reduce-scatter's or a bulk overlap's kernels hold kTpOverlapCommSms SMs, the GEMM
    // beside it runs on the rest: slower by their share for as long as they overlap. Forward: the
    // reduce-scatters after the attention output and the second MLP GEMM (odd i); backward: the
    // bulk overlaps around the QKV and first MLP GEMMs (even i). The all-gathers' ring exchange
    // moves on copy engines.
    const double sms = static_cast<double>(std::max<std::int64_t>(c.sms, 1));
    const double slower =
        kTpOverlapCommSms < sms ? kTpOverlapCommSms / (sms - kTpOverlapCommSms) : 0.0;
    for (std::size_t i = 0; i < static_cast<std::size_t>(2 * pairs); ++i) {
      const auto [forward, input_grad] = gemms[i];
      const double forward_comm = collective(i, true), backward_comm = collective(i, false);
      p.forward_comm_s += exposed(forward_comm, forward) +
                          (i % 2 == 1 ? slower * std::min(forward_comm, forward) : 0.0);
      p.backward_comm_s += exposed(backward_comm, input_grad) +
                           (i % 2 == 0 ? slower * std::min(backward_comm, input_grad) : 0.0);
    }
  }
  if (m.moe()) moe_costs(m, c, r, w, p);
  // Context parallelism: every GPU's attention meets the keys and values of the other c - 1 GPUs'
  // tokens (K and V, bf16: 4·T·kv bytes of its own). All-gathered before the core and, in the
  // backward, gathered again and their gradients reduce-scattered, none of it hidden (PyTorch's
  // and Llama 3's); or passed around the ring in c - 1 steps, each behind the core's work on the
  // chunk before (1/c of it), the backward passing the gradients too (Transformer Engine's p2p).
  double cp_saved_bytes = 0;
  if (r.context_parallel > 1) {
    const std::int64_t cp = r.context_parallel;
    const double own = 2.0 * T * static_cast<double>(w.k + w.kv),
                 steps = static_cast<double>(cp - 1);
    if (r.cp_all_gather) {
      const double gathered = own * static_cast<double>(cp);
      const std::int64_t per_node = std::clamp<std::int64_t>(r.cp_ranks_per_node, 1, cp);
      const double gather = collective_s(c, Collective::all_gather, gathered, cp, per_node);
      p.forward_comm_s += gather;
      p.backward_comm_s +=
          gather + collective_s(c, Collective::reduce_scatter, gathered, cp, per_node);
      cp_saved_bytes = own * steps;  // the gathered keys and values, kept for the backward
    } else {
      // A ring over several nodes moves at its slowest hop's pace: the network's.
      const P2pLink link = p2p_link(c, r.cp_ranks_per_node >= cp);
      const double step = link.latency_s + own / link.bandwidth_bytes_per_s;
      const double chunks = static_cast<double>(cp);
      p.forward_comm_s += steps * std::max(0.0, step - core.forward_s / chunks);
      p.backward_comm_s += steps * std::max(0.0, 2 * step - core.backward_s / chunks);
    }
  }
  switch (r.recompute) {
    case Recompute::none:
      break;
    case Recompute::selective:
      p.recompute_s = core.forward_s;
      break;
    case Recompute::full:
      p.recompute_s = p.forward_s + p.forward_comm_s;
      break;
  }
  // Parameters on this GPU: the GEMMs' weights (and GPT's biases) split t ways, the norms whole.
  // MLA: the down-projections whole, the up-projections split, the latents' norms whole.
  const std::int64_t qkv_weights =
      m.mla() ? (m.q_lora_rank > 0 ? h * m.q_lora_rank + m.q_lora_rank * w.qk : h * w.qk) +
                    h * (m.kv_lora_rank + m.rope_head_width) +
                    m.kv_lora_rank * w.heads * 2 * m.head_dim()
              : h * qkv_cols;
  const std::int64_t gemm_weights = qkv_weights + w.q * h + h * mlp_up + w.f * h;
  p.parameters += gemm_weights;
  if (fp8) p.fp8_parameters += gemm_weights;  // the four GEMMs' weights
  p.parameters += gpt ? qkv_cols + h + w.f + (w.f > 0 ? h : 0) + 4 * h
                      : 2 * h + (m.mla() ? m.q_lora_rank + m.kv_lora_rank : 0);
  ActivationOptions a;
  a.microbatch_size = r.microbatch_size;
  a.tensor_parallel = r.tensor_parallel;
  a.sequence_parallel = r.sequence_parallel;
  a.recompute = r.recompute;
  a.flash_attention = r.flash_attention;
  a.fp8_linear_inputs = fp8;
  a.expert_load = r.expert_load;
  // Context parallelism: this GPU's s/c tokens of every sequence (FlashAttention keeps no s x s).
  ModelSpec local = m;
  local.seq_len = m.seq_len / r.context_parallel;
  p.activation_bytes =
      layer_activation_bytes(local, a) +
      (r.recompute == Recompute::full ? 0 : static_cast<std::int64_t>(cp_saved_bytes));
  // A split backward keeps every GEMM's output gradient from I until W needs it (bf16), and of
  // the activations the four GEMMs' inputs, W's other operand (the QKV and first MLP GEMM's
  // sequence-sharded with SP, gathered again for W as Megatron-LM does; 8-bit with FP8): Zero
  // Bubble's Megatron-LM frees the rest at I. Full recomputation keeps only the layer's input.
  // With experts: the busiest GPU's token copies through them (their two GEMMs' output
  // gradients and inputs), the router's too.
  const std::int64_t copies =
      m.moe()
          ? static_cast<std::int64_t>(std::ceil(
                static_cast<double>(m.top_k * ((w.T + r.tensor_parallel - 1) / r.tensor_parallel)) *
                r.expert_load))
          : 0;
  const std::int64_t expert_up = gpt ? m.ffn : 2 * m.ffn;
  p.stash_bytes = 2 * w.T * (qkv_cols + h + mlp_up + (w.f > 0 ? h : 0)) +
                  (m.mla() ? 2 * w.Tn * latents : 0) + (m.moe() ? 2 * copies * (expert_up + h) : 0);
  if (r.recompute != Recompute::full) {
    const std::int64_t input_bytes = fp8 ? 1 : 2;
    const std::int64_t w_inputs =
        input_bytes * (2 * w.Tn * h + w.T * w.q + w.T * w.f + (m.moe() ? copies * (h + m.ffn) : 0) +
                       (m.mla() ? w.Tn * (m.q_lora_rank + m.kv_lora_rank) : 0));
    p.release_bytes = std::max<std::int64_t>(0, p.activation_bytes - w_inputs);
  }
  if (r.recompute == Recompute::full) {  // the layer its backward rebuilds, whole
    a.recompute = Recompute::none;
    p.workspace_bytes =
        layer_activation_bytes(local, a) + static_cast<std::int64_t>(cp_saved_bytes);
  }
  return p;
}

PieceCosts embedding_costs(const ModelSpec& m, const ClusterSpec& c, const LayerRun& r) {
  const Widths w = widths(m, r);
  const double T = static_cast<double>(w.T), Tn = static_cast<double>(w.Tn),
               H = static_cast<double>(m.d_model);
  const bool gpt = m.arch == Arch::gpt;
  PieceCosts p;
  // The lookup (read and write a row per token) on this GPU's share of the vocabulary, GPT's
  // learned positions added (6) and dropout (7 with its mask). Backward: the rows scattered into
  // the fp32 gradient (read the bf16 gradient, read and write fp32 rows: 10).
  p.forward_s =
      memory_s(c, 4 * T * H) + (gpt ? memory_s(c, 6 * T * H) + memory_s(c, 7 * Tn * H) : 0);
  p.input_grad_s = gpt ? memory_s(c, 5 * Tn * H) : 0.0;
  p.weight_grad_s = memory_s(c, 10 * T * H) + (gpt ? memory_s(c, 10 * T * H) : 0.0);
  // The vocabulary shards' lookups summed: an all-reduce (a reduce-scatter with SP) forward.
  if (r.tensor_parallel > 1) {
    const double bytes = 2 * T * H;
    p.forward_comm_s =
        collective_s(c, r.sequence_parallel ? Collective::reduce_scatter : Collective::all_reduce,
                     bytes, r.tensor_parallel, r.tp_ranks_per_node);
  }
  p.parameters = padded_vocab(m, r.tensor_parallel) / r.tensor_parallel * m.d_model +
                 (gpt ? m.seq_len * m.d_model : 0);
  // Megatron's token ids (int64) and GPT's embedding-dropout mask.
  p.activation_bytes = 8 * w.T + (gpt ? w.Tn * m.d_model : 0);
  return p;
}

PieceCosts head_costs(const ModelSpec& m, const ClusterSpec& c, const LayerRun& r) {
  const Widths w = widths(m, r);
  const std::int64_t h = m.d_model;
  const std::int64_t V = padded_vocab(m, r.tensor_parallel) / r.tensor_parallel;
  const double T = static_cast<double>(w.T), Tn = static_cast<double>(w.Tn),
               H = static_cast<double>(h), Vt = static_cast<double>(V);
  PieceCosts p;
  // Final norm, the head's GEMM on this GPU's share of the vocabulary, and the vocabulary-
  // parallel cross-entropy in fp32 (read the bf16 logits, write and read them in fp32: 10 per
  // logit; backward read fp32, write the bf16 gradient: 6).
  p.forward_s = memory_s(c, 4 * Tn * H) + memory_s(c, 10 * T * Vt);
  p.input_grad_s = memory_s(c, 8 * Tn * H) + memory_s(c, 6 * T * Vt);
  linear(c, w.T, h, V, p);
  if (r.tensor_parallel > 1) {
    // Sequence parallelism gathers the tokens before the head; its input gradient is summed over
    // the vocabulary shards (an all-reduce, a reduce-scatter with SP); the loss reduces three
    // fp32 values per token (the maximum, the sum of exponentials, the target's logit).
    const double bytes = 2 * T * H;
    if (r.sequence_parallel)
      p.forward_comm_s +=
          collective_s(c, Collective::all_gather, bytes, r.tensor_parallel, r.tp_ranks_per_node);
    p.forward_comm_s +=
        3 * collective_s(c, Collective::all_reduce, 4 * T, r.tensor_parallel, r.tp_ranks_per_node);
    p.backward_comm_s =
        collective_s(c, r.sequence_parallel ? Collective::reduce_scatter : Collective::all_reduce,
                     bytes, r.tensor_parallel, r.tp_ranks_per_node);
  }
  // The head's weights: its own, or, tied, a copy of the embedding (Megatron keeps one on the
  // last stage when the first is elsewhere; evaluate() counts it once when they share a GPU).
  p.parameters = V * h + (m.arch == Arch::gpt ? 2 * h : h);
  // The final norm's input, the head's input (gathered with SP) and the fp32 logits.
  p.activation_bytes =
      2 * w.Tn * h + 2 * w.T * h / (r.sequence_parallel ? r.tensor_parallel : 1) + 4 * w.T * V;
  p.stash_bytes = 2 * w.T * V;  // the logits' gradient, for the head's W
  return p;
}

PieceCosts mtp_extra_costs(const ModelSpec& m, const ClusterSpec& c, const LayerRun& r) {
  const Widths w = widths(m, r);
  const std::int64_t h = m.d_model;
  const double T = static_cast<double>(w.T), Tn = static_cast<double>(w.Tn),
               H = static_cast<double>(h);
  PieceCosts p;
  // The lookup (read and write a row per token), the two RMSNorms and the concatenation (read
  // and write: 4 bytes per element each), the projection [T x 2h] -> h split t ways as a
  // column-parallel GEMM; the backward's norms 8, the concatenation's split 4.
  p.forward_s = memory_s(c, 4 * T * H) + 2 * memory_s(c, 4 * Tn * H) + memory_s(c, 8 * Tn * H);
  p.input_grad_s = 2 * memory_s(c, 8 * Tn * H) + memory_s(c, 8 * Tn * H);
  linear(c, w.T, 2 * h, h / r.tensor_parallel, p, r.precision);
  // Its weights: the projection 2h·h/t, the three norms (the embedding's, the hidden state's,
  // its own final one) whole.
  p.parameters = 2 * h * h / r.tensor_parallel + 3 * h;
  if (r.precision != Precision::bf16) p.fp8_parameters = 2 * h * h / r.tensor_parallel;
  // The two norms' inputs and the projection's input kept for the backward (sequence-sharded
  // with sequence parallelism).
  p.activation_bytes = 2 * 2 * w.Tn * h + 2 * w.Tn * 2 * h;
  p.stash_bytes = 2 * w.T * h / r.tensor_parallel;
  return p;
}

double optimizer_step_s(const ClusterSpec& c, std::int64_t parameters, std::int64_t data_parallel,
                        std::int32_t zero, bool bf16_gradients, bool bf16_moments) {
  // With ZeRO 1 or more each replica updates 1/d of the parameters; with ZeRO 0 and 1 every
  // replica still zeroes its whole gradient buffer (4 bytes per parameter), with ZeRO 2 and 3
  // only its shard.
  const double P = static_cast<double>(parameters), d = static_cast<double>(data_parallel);
  const double grad = gradient_bytes(bf16_gradients);
  const double adam =
      kAdamBytesPerParameter - 3.0 * (kGradientReduceBytes - grad) - (bf16_moments ? 8.0 : 0.0);
  const double sharded = adam - grad;
  const double bytes = zero == 0 ? P * adam : zero == 1 ? P * sharded / d + grad * P : P * adam / d;
  return memory_s(c, bytes);
}

}  // namespace paci::plan
