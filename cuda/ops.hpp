// The GPT-2 layers on the GPU: one launcher per model/ops.hpp function, same argument order,
// shapes (letters in model/config.hpp) and semantics: forwards overwrite their outputs; backwards
// overwrite activation gradients unless marked "+=" and add (+=) parameter gradients once per call.
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <span>

#include "cuda/bf16.hpp"

// floatX (activations, weights) is float or bf16; parameter gradients, LayerNorm statistics,
// probabilities and losses are float. Every sum runs in float (or double) in a fixed order: no
// atomics, so a launcher gives the same bits on every run on the same GPU. Every launcher is
// asynchronous on ctx.stream and allocates nothing.
namespace paci::cuda {

// What every launcher needs: its stream, cuBLAS handles bound to it, and scratch.
struct OpContext {
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;
  cublasLtHandle_t lt = nullptr;
  void* lt_workspace = nullptr;
  std::size_t lt_workspace_bytes = 0;
  float* partials = nullptr;  // column-sum scratch, at least partial_floats(R, widest) floats
  std::size_t partial_floats = 0;
  bool use_lt = true;  // matmul_forward through cuBLASLt with the bias fused (false: GEMM + kernel)
};

// Column sums over R rows (bias, LayerNorm and position-embedding gradients) run in two fixed-order
// passes: per chunk of kPartialRows rows, then over the chunks. Scratch for (R, columns), two sums.
inline constexpr std::size_t kPartialRows = 128;
inline std::size_t partial_floats(std::size_t R, std::size_t columns) {
  return 2 * columns * ((R + kPartialRows - 1) / kPartialRows);
}

// ---- encoder ----------------------------------------------------------------------------------
// out(B,T,C) = wte[tokens(B,T)] + wpe[t]. tokens on the device, each < V.
template <typename floatX>
void encoder_forward(const OpContext& ctx, floatX* out, const std::int32_t* tokens,
                     const floatX* wte, const floatX* wpe, std::size_t B, std::size_t T,
                     std::size_t C);

// The rows of a micro-batch grouped by token, so that dwte sums each token's rows in row order
// without atomics (made on the host by group_tokens, then copied to the device).
struct TokenGroups {
  const std::int32_t* rows = nullptr;    // (R) row indices, sorted by token, rows in order
  const std::int32_t* starts = nullptr;  // (count + 1) where each token's rows begin in `rows`
  const std::int32_t* tokens = nullptr;  // (count) the token of each group
  std::size_t count = 0;
};
// Host: fills rows(R), starts(R+1) and group_tokens(R) from tokens(R); keys(R) is scratch.
// Returns the number of distinct tokens. Allocates nothing.
std::size_t group_tokens(std::span<const std::int32_t> tokens, std::span<std::uint64_t> keys,
                         std::span<std::int32_t> rows, std::span<std::int32_t> starts,
                         std::span<std::int32_t> group_tokens);

// dwte[tokens(b,t)] += dout(b,t) (a token's rows added in row order, as on the CPU);
// dwpe[t] += Σ_b dout(b,t).
template <typename floatX>
void encoder_backward(const OpContext& ctx, float* dwte, float* dwpe, const floatX* dout,
                      const TokenGroups& groups, std::size_t B, std::size_t T, std::size_t C);

// ---- LayerNorm ----------------------------------------------------------------------------------
// out(R,C) = (inp − mean)·rstd·weight + bias per row; saves mean(R), rstd(R); eps 1e-5.
template <typename floatX>
void layernorm_forward(const OpContext& ctx, floatX* out, float* mean, float* rstd,
                       const floatX* inp, const floatX* weight, const floatX* bias, std::size_t R,
                       std::size_t C);
// dinp(R,C) += ..., dweight(C) += Σ_r dout·norm, dbias(C) += Σ_r dout. Uses ctx.partials.
template <typename floatX>
void layernorm_backward(const OpContext& ctx, floatX* dinp, float* dweight, float* dbias,
                        const floatX* dout, const floatX* inp, const floatX* weight,
                        const float* mean, const float* rstd, std::size_t R, std::size_t C);
// Its two halves, for a split backward (layernorm_backward is the one, then the other): dinp
// alone (reads the weight), and dweight, dbias alone (read no weight).
template <typename floatX>
void layernorm_backward_input(const OpContext& ctx, floatX* dinp, const floatX* dout,
                              const floatX* inp, const floatX* weight, const float* mean,
                              const float* rstd, std::size_t R, std::size_t C);
template <typename floatX>
void layernorm_backward_weight(const OpContext& ctx, float* dweight, float* dbias,
                               const floatX* dout, const floatX* inp, const float* mean,
                               const float* rstd, std::size_t R, std::size_t C);

// ---- linear layer (cuBLAS / cuBLASLt) -----------------------------------------------------------
// out(R,OC) = inp(R,C)·weight(OC,C)ᵀ + bias(OC) [+ residual(R,OC)]; bias, residual may be null.
// The residual add is fused: it is the GEMM's C operand (beta = 1), the bias the Lt epilogue.
// Rows of out and residual (forward) and of dout (backward) are ld ≥ OC elements apart (0: OC);
// the columns [OC, ld) are neither read nor written. A padded ld keeps the rows 16-byte aligned
// for cuBLASLt when OC is odd (the LM head's vocabulary, 50257).
template <typename floatX>
void matmul_forward(const OpContext& ctx, floatX* out, const floatX* inp, const floatX* weight,
                    const floatX* bias, const floatX* residual, std::size_t R, std::size_t C,
                    std::size_t OC, std::size_t ld = 0);
// dinp(R,C) = dout·weight (if dinp is not null); dweight(OC,C) += doutᵀ·inp (fp32 accumulate);
// dbias(OC) += Σ_r dout (if dbias is not null; uses ctx.partials).
template <typename floatX>
void matmul_backward(const OpContext& ctx, floatX* dinp, float* dweight, float* dbias,
                     const floatX* dout, const floatX* inp, const floatX* weight, std::size_t R,
                     std::size_t C, std::size_t OC, std::size_t ld = 0);
// Its two halves (matmul_backward is the one, then the other): dinp = dout·weight; and
// dweight += doutᵀ·inp, dbias += Σ_r dout (dbias may be null).
template <typename floatX>
void matmul_backward_input(const OpContext& ctx, floatX* dinp, const floatX* dout,
                           const floatX* weight, std::size_t R, std::size_t C, std::size_t OC,
                           std::size_t ld = 0);
template <typename floatX>
void matmul_backward_weight(const OpContext& ctx, float* dweight, float* dbias, const floatX* dout,
                            const floatX* inp, std::size_t R, std::size_t C, std::size_t OC,
                            std::size_t ld = 0);

// ---- causal multi-head attention ----------------------------------------------------------------
// qkv(B,T,3C) holds Q | K | V, head h at columns h·HS of each. scores(B,NH,T,T) is float scratch
// for scale·Q·Kᵀ (cuBLAS, batched over heads); att(B,NH,T,T) saves the causal softmax with zeros
// above the diagonal; out(B,T,C) = att·V.
template <typename floatX>
void attention_forward(const OpContext& ctx, floatX* out, floatX* att, float* scores,
                       const floatX* qkv, std::size_t B, std::size_t T, std::size_t C,
                       std::size_t NH);
// dqkv(B,T,3C) = ...; dscores (float) and dsoft (floatX), both (B,NH,T,T), are scratch.
template <typename floatX>
void attention_backward(const OpContext& ctx, floatX* dqkv, float* dscores, floatX* dsoft,
                        const floatX* dout, const floatX* qkv, const floatX* att, std::size_t B,
                        std::size_t T, std::size_t C, std::size_t NH);

// ---- GELU (tanh approximation) ------------------------------------------------------------------
template <typename floatX>
void gelu_forward(const OpContext& ctx, floatX* out, const floatX* inp, std::size_t N);
// dinp(N) = gelu'(inp)·dout; dinp may alias dout.
template <typename floatX>
void gelu_backward(const OpContext& ctx, floatX* dinp, const floatX* inp, const floatX* dout,
                   std::size_t N);

// ---- fused softmax cross-entropy ----------------------------------------------------------------
// probs(R,V) = softmax(logits) in float, losses(R) = −log probs[target]. Targets < V. Rows of
// logits are ld ≥ V elements apart: the padding columns [V, ld) are masked (never read), so the
// softmax runs over the V real tokens only. probs is dense (R,V).
template <typename floatX>
void crossentropy_forward(const OpContext& ctx, float* probs, float* losses, const floatX* logits,
                          const std::int32_t* targets, std::size_t R, std::size_t V,
                          std::size_t ld);
// *mean (one double on the device) = Σ values(n) / n, summed in a fixed order in double.
void mean_of(const OpContext& ctx, double* mean, const float* values, std::size_t n);
// dlogits(R,V) = (probs − onehot(target))·dloss, rows ld apart; the padding columns [V, ld) are
// set to zero, so the head's backward GEMMs may run over them.
template <typename floatX>
void crossentropy_backward(const OpContext& ctx, floatX* dlogits, const float* probs,
                           const std::int32_t* targets, float dloss, std::size_t R, std::size_t V,
                           std::size_t ld);

}  // namespace paci::cuda
