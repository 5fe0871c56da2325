// What one GPU spends on one micro-batch of a transformer under tensor parallelism, and what the
// collectives between GPUs cost: every GEMM timed by its shape (the larger of its compute at the
// GPU's measured GEMM efficiency, scaled down when it has too few tiles to fill the GPU, and its
// bytes at the HBM's measured bandwidth, plus a kernel's fixed time), the attention core as
// FlashAttention or as Megatron's unfused kernels, the memory-bound kernels (norms, activations,
// dropout, residual adds, the optimizer) at the HBM's measured bandwidth, and the ring
// collectives by message size on NVLink inside a node and on the network across nodes. Every
// constant that is not in the ClusterSpec is named here with its source; docs/costmodel.md
// writes every formula out.
#pragma once

#include <cstdint>
#include <string_view>

#include "plan/costs/collectives.hpp"
#include "plan/hardware/cluster.hpp"
#include "plan/shapes/model.hpp"

namespace paci::plan {

// --- Primitives ------------------------------------------------------------------------------

// The GEMM tile cuBLAS uses for large bf16 GEMMs on A100 and H100 (128 x 128 threadblock tiles
// are among the "typical tile dimensions in cuBLAS", NVIDIA's Matrix Multiplication Background
// User's Guide, DU-09799-001, section 2.3). A GEMM with fewer tiles than the GPU has SMs runs in
// one partial wave: its rate falls with the share of SMs it fills.
inline constexpr std::int64_t kGemmTile = 128;
// The SMs a Transformer Engine userbuffers collective overlapped with a GEMM runs its kernels on
// (the pipelined reduce-scatters and the bulk overlaps; the ring-exchange all-gathers move on copy
// engines): initialize_ub's default num_sm, transformer_engine/pytorch/module/base.py (TE at commit
// 0004dbd). The GEMM beside it has the other SMs.
inline constexpr double kTpOverlapCommSms = 16;

// The number format of the linear layers' GEMMs (docs/costmodel.md, "FP8"): bf16; FP8 with one
// scale per tensor (Transformer Engine's delayed scaling, E4M3 forward and E5M2 gradients:
// Megatron-LM's --fp8-format hybrid; torchao's float8 in torchtitan); MXFP8, FP8 with one
// power-of-two scale per 32 elements (Blackwell's block-scaled tensor cores). The attention core,
// the embedding and the LM head stay in bf16 in all three.
enum class Precision { bf16, fp8, mxfp8 };
std::string_view to_string(Precision precision);
Precision parse_precision(std::string_view text);  // "bf16" | "fp8" | "mxfp8"; InputError else
// InputError when `cluster` cannot run `precision`: FP8 without fp8_peak_flops, MXFP8 without
// mxfp8_gemm_efficiency; the line names what would work.
void check_precision(const ClusterSpec& cluster, Precision precision);

// [m x k] times [k x n], `batch` of them, bf16 in and out, on one GPU; with FP8 or MXFP8 its inputs
// are 8-bit (MXFP8 with a 1-byte scale per 32 of them), its output bf16, at the FP8 rate.
double gemm_s(const ClusterSpec& c, std::int64_t m, std::int64_t n, std::int64_t k,
              std::int64_t batch = 1, Precision precision = Precision::bf16);
// A memory-bound kernel moving `bytes` (reads plus writes) through HBM.
double memory_s(const ClusterSpec& c, double bytes);
// The attention core's rates (FLOP/s) at `seq` tokens: the cluster's attention_by_seq
// interpolated in log length (clamped at both ends), or peak_flops times its two shares, the
// same with and without a mask.
AttentionRate attention_rate(const ClusterSpec& c, double seq);

// --- One transformer layer, one micro-batch, one GPU --------------------------------------------

// How a layer runs: micro-batch, tensor parallelism, sequence parallelism, recomputation, the
// attention core's implementation, and how the group's GPUs sit in nodes.
struct LayerRun {
  std::int64_t microbatch_size = 1;  // b
  std::int64_t tensor_parallel = 1;  // t
  bool sequence_parallel = false;
  // Transformer Engine's overlap of the sequence-parallel all-gathers and reduce-scatters with the
  // GEMMs they feed or follow (needs sequence_parallel).
  bool tp_comm_overlap = false;
  Recompute recompute = Recompute::none;
  bool flash_attention = true;
  // The attention core computes only the causal half of the s x s scores (FlashAttention with a
  // causal mask); Megatron's unfused kernels compute all of them.
  bool causal = true;
  std::int64_t tp_ranks_per_node = 1;  // of the t GPUs, how many share a node (t when t <= 8)
  // c: each GPU holds s/c of every sequence's tokens (load-balanced causal chunks) and its
  // attention meets the other c - 1 GPUs' keys and values: passed around a ring, each step behind
  // the attention of the chunk before (p2p), or all-gathered before it (all_gather). Of the c
  // GPUs, cp_ranks_per_node share a node (c when t·c fits in the NVLink domain; fewer, and the
  // ring's steps and the gather cross the network, when it does not).
  std::int64_t context_parallel = 1;
  std::int64_t cp_ranks_per_node = 1;
  bool cp_all_gather = false;
  Precision precision = Precision::bf16;  // of the four linear layers' GEMMs
  // Mixture of experts: the E experts spread over e GPUs (expert parallelism, E/e whole experts
  // on each: Megatron-LM's expert tensor parallelism 1), ep_ranks_per_node of them in a node; the
  // busiest GPU's token copies over the mean (routing imbalance, >= 1).
  std::int64_t expert_parallel = 1;
  std::int64_t ep_ranks_per_node = 1;
  double expert_load = 1.0;
};

// Seconds and bytes of one layer (or of the embedding and the head, below).
struct PieceCosts {
  double forward_s = 0.0;        // compute of the forward
  double forward_comm_s = 0.0;   // tensor- and context-parallel collectives in the forward
  double input_grad_s = 0.0;     // compute of the input-gradient half (dX GEMMs, the attention
                                 // core's and the memory-bound kernels' backward)
  double weight_grad_s = 0.0;    // the weight-gradient GEMMs (dW)
  double backward_comm_s = 0.0;  // tensor- and context-parallel collectives in the backward
  double recompute_s = 0.0;      // forward work redone in the backward (compute and collectives)
  std::int64_t parameters = 0;   // on this GPU
  // Of which weights of FP8 GEMMs: Transformer Engine keeps an 8-bit copy of each and of its
  // transpose (FP8) or column-wise scaled copy (MXFP8), cast once per step.
  std::int64_t fp8_parameters = 0;
  // Of which the routed experts' (mixture of experts): their gradients are reduced, and ZeRO
  // shards them, over the replicas of an expert, not of the layer.
  std::int64_t expert_parameters = 0;
  std::int64_t activation_bytes = 0;  // kept from the forward to the backward, per micro-batch
  std::int64_t stash_bytes = 0;       // a split backward's output gradients, from I to W
  // Of activation_bytes, what a split backward frees at I: all but the inputs its W reads.
  std::int64_t release_bytes = 0;
  std::int64_t workspace_bytes = 0;  // transient peak of its backward (full recomputation)

  double forward_total_s() const { return forward_s + forward_comm_s; }
  double backward_total_s() const {
    return input_grad_s + weight_grad_s + backward_comm_s + recompute_s;
  }
  PieceCosts& operator+=(const PieceCosts& o);
  PieceCosts scaled(std::int64_t count) const;  // `count` identical pieces
};

// One transformer layer. The vocabulary does not enter.
PieceCosts layer_costs(const ModelSpec& model, const ClusterSpec& c, const LayerRun& run);
// The first stage's token (and position) embedding, vocabulary-parallel over t.
PieceCosts embedding_costs(const ModelSpec& model, const ClusterSpec& c, const LayerRun& run);
// A multi-token-prediction module's own pieces (DeepSeek-V3's, as Megatron-LM's MTP block runs
// it on the last stage), beside the layer and the head it runs again: the next token's embedding
// (the model's, looked up again) and the hidden state RMS-normed, concatenated and projected from
// 2h to h, its final norm.
PieceCosts mtp_extra_costs(const ModelSpec& model, const ClusterSpec& c, const LayerRun& run);
// The last stage's final norm, LM head (vocabulary-parallel over t) and cross-entropy loss.
PieceCosts head_costs(const ModelSpec& model, const ClusterSpec& c, const LayerRun& run);

// The vocabulary as Megatron-LM pads it: up to a multiple of 128 x t.
std::int64_t padded_vocab(const ModelSpec& model, std::int64_t tensor_parallel);

// --- The optimizer step ------------------------------------------------------------------------

// Bytes of HBM traffic per parameter of one AdamW step in Megatron's mixed precision: the fp32
// master weight read and written (8), the fp32 gradient read (4), both fp32 moments read and
// written (16), the bf16 weight written (2), the gradient buffer zeroed (4), and the gradient
// read once more for the global norm of clipping (4).
inline constexpr double kAdamBytesPerParameter = 38.0;
// Memory per parameter (Megatron's mixed precision): bf16 weight, and the fp32 master weight with
// both AdamW moments (sharded by the ZeRO stage); the gradient buffer's is gradient_bytes() below.
inline constexpr std::int64_t kWeightBytes = 2, kOptimizerBytes = 12;
// The optimizer state with bf16 moments (Megatron-LM's precision-aware optimizer): two 2-byte
// moments and the fp32 master weight, 4 bytes, or 2 where it keeps only the 16 bits a bf16 weight
// lacks (store_param_remainders, its default, for bf16 weights under a recipe its Adam kernel
// casts: bf16 or FP8 with delayed scaling; distrib_optimizer.py, core_v0.16.1).
inline constexpr std::int64_t kOptimizerBf16MomentsBytes = 8, kOptimizerBf16RemaindersBytes = 6;
// The gradient a data-parallel reduction moves, per parameter: fp32 (Megatron reduces its fp32
// gradient buffer); with the distributed optimizer also the bf16 weights all-gathered after.
inline constexpr double kGradientReduceBytes = 4.0, kParamGatherBytes = 2.0;
// Megatron-LM's default gradient bucket for --overlap-grad-reduce: 40 M parameters
// (DistributedDataParallelConfig.bucket_size); the last bucket cannot overlap the backward.
inline constexpr double kGradBucketParameters = 40e6;

// Bytes per parameter of the gradient buffer and of its data-parallel reduction: fp32 (4,
// Megatron-LM's default with --bf16, Meta's Llama 3) or bf16 (2: Megatron-LM's
// --grad-reduce-in-bf16, NeMo's and Megatron-Bridge's performance recipes).
inline double gradient_bytes(bool bf16_gradients) {
  return bf16_gradients ? 2.0 : kGradientReduceBytes;
}

// The AdamW step of `parameters` on one GPU of d replicas at ZeRO stage `zero` (0-3); with bf16
// gradients the gradient's three passes (read, zeroed, read for the norm) move 2 bytes each, not 4.
// With bf16 moments (the precision-aware optimizer) each moment's read and write moves 2 bytes, not
// 4.
double optimizer_step_s(const ClusterSpec& c, std::int64_t parameters, std::int64_t data_parallel,
                        std::int32_t zero, bool bf16_gradients = false, bool bf16_moments = false);

}  // namespace paci::plan
