// The GPT-2 layers on the CPU, each forward followed by its backward (shape letters in
// config.hpp). Forwards overwrite their outputs; backwards overwrite activation gradients unless
// marked "+=" and add (+=) each parameter gradient once per call. Same bits for any thread count.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "model/blas.hpp"

namespace paci::model {

inline constexpr float kLayerNormEps = 1e-5f;

// out(B,T,C) = wte[tokens(B,T)] + wpe[t]. Tokens must be < V (checked by the caller).
void encoder_forward(const OpContext& ctx, float* out, const std::int32_t* tokens, const float* wte,
                     const float* wpe, std::size_t B, std::size_t T, std::size_t C);
// dwte[tokens(b,t)] += dout(b,t); dwpe[t] += Σ_b dout(b,t).
void encoder_backward(const OpContext& ctx, float* dwte, float* dwpe, const float* dout,
                      const std::int32_t* tokens, std::size_t B, std::size_t T, std::size_t C);

// out(R,C) = (inp − mean)·rstd·weight + bias per row; saves mean(R) and rstd(R) (eps 1e-5).
void layernorm_forward(const OpContext& ctx, float* out, float* mean, float* rstd, const float* inp,
                       const float* weight, const float* bias, std::size_t R, std::size_t C);
// dinp(R,C) += ..., dweight(C) += ..., dbias(C) += ...
void layernorm_backward(const OpContext& ctx, float* dinp, float* dweight, float* dbias,
                        const float* dout, const float* inp, const float* weight, const float* mean,
                        const float* rstd, std::size_t R, std::size_t C);
// Its two halves (a split backward: I, then W later), the same arithmetic: dinp(R,C) += ...;
// dweight(C) += ..., dbias(C) += ....
void layernorm_backward_input(const OpContext& ctx, float* dinp, const float* dout,
                              const float* inp, const float* weight, const float* mean,
                              const float* rstd, std::size_t R, std::size_t C);
void layernorm_backward_weight(const OpContext& ctx, float* dweight, float* dbias,
                               const float* dout, const float* inp, const float* mean,
                               const float* rstd, std::size_t R, std::size_t C);

// out(R,OC) = inp(R,C)·weight(OC,C)ᵀ + bias(OC) [+ residual(R,OC)]; bias, residual may be null.
void matmul_forward(const OpContext& ctx, float* out, const float* inp, const float* weight,
                    const float* bias, const float* residual, std::size_t R, std::size_t C,
                    std::size_t OC);
// dinp(R,C) = dout·weight (if dinp is not null); dweight(OC,C) += doutᵀ·inp; dbias(OC) += Σ_r dout
// (if dbias is not null). The residual's gradient is dout itself, handled by the caller.
void matmul_backward(const OpContext& ctx, float* dinp, float* dweight, float* dbias,
                     const float* dout, const float* inp, const float* weight, std::size_t R,
                     std::size_t C, std::size_t OC);
// Its weight half alone (a split backward's W; the input half is matmul_backward with the weight
// gradient left to this): dweight(OC,C) += doutᵀ·inp; dbias(OC) += Σ_r dout (if not null).
void matmul_backward_weight(const OpContext& ctx, float* dweight, float* dbias, const float* dout,
                            const float* inp, std::size_t R, std::size_t C, std::size_t OC);
// The input half alone: dinp(R,C) = dout·weight.
void matmul_backward_input(const OpContext& ctx, float* dinp, const float* dout,
                           const float* weight, std::size_t R, std::size_t C, std::size_t OC);

// Causal multi-head attention. qkv(B,T,3C) holds Q | K | V, head h at columns h·HS of each.
// att(B,NH,T,T) saves softmax(Q·Kᵀ/√HS) with zeros above the diagonal; out(B,T,C) = att·V.
void attention_forward(const OpContext& ctx, float* out, float* att, const float* qkv,
                       std::size_t B, std::size_t T, std::size_t C, std::size_t NH);
// dqkv(B,T,3C) = ...; datt(B,NH,T,T) is scratch.
void attention_backward(const OpContext& ctx, float* dqkv, float* datt, const float* dout,
                        const float* qkv, const float* att, std::size_t B, std::size_t T,
                        std::size_t C, std::size_t NH);

// out(N) = 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))), GPT-2's tanh approximation.
void gelu_forward(const OpContext& ctx, float* out, const float* inp, std::size_t N);
// dinp(N) = gelu'(inp)·dout; dinp may alias dout.
void gelu_backward(const OpContext& ctx, float* dinp, const float* inp, const float* dout,
                   std::size_t N);

// Fused softmax + cross-entropy over V classes per row: probs(R,V), losses(R) = −log p[target].
// Targets must be < V (checked by the caller). Returns the mean loss over the R rows.
float crossentropy_forward(const OpContext& ctx, float* probs, float* losses, const float* logits,
                           const std::int32_t* targets, std::size_t R, std::size_t V);
// dlogits(R,V) = (probs − onehot(target))·dloss, where dloss = d(loss)/d(each row's loss).
void crossentropy_backward(const OpContext& ctx, float* dlogits, const float* probs,
                           const std::int32_t* targets, float dloss, std::size_t R, std::size_t V);

// ---- mixture of experts (config.hpp, MoeConfig; shape letters E, K, H, N there) ----------------

// Where moe_route writes a micro-batch's routing (a block's slot) and what its backward reads.
struct MoeRouting {
  float* probs = nullptr;             // (R,E) softmax of the router logits
  float* gates = nullptr;             // (R,K)
  std::int32_t* choice = nullptr;     // (R,K) experts, most probable first
  std::int32_t* row = nullptr;        // (R,K) expert row of each assignment, −1 over capacity
  std::int32_t* first_row = nullptr;  // (E+1) expert e's rows [first_row[e], first_row[e+1])
  std::int32_t* chosen = nullptr;     // (E) assignments choosing e, before capacity
  std::vector<std::int32_t>* scratch = nullptr;  // (E) preallocated
};
// Routes R tokens from their router logits (R,E) to K experts each, each expert taking at most
// `capacity` assignments. Returns the load-balancing loss α·E·Σ_e f_e·P_e (not yet scaled).
float moe_route(const MoeRouting& routing, const float* logits, std::size_t R, std::size_t E,
                std::size_t K, std::size_t capacity, float aux_loss_coef);
// dlogits(R,E) = the router logits' gradient from the gates' gradients dgates(R,K) and from the
// load-balancing loss times aux_scale; probs, gates, choice and chosen as moe_route wrote them.
void moe_route_backward(const OpContext& ctx, float* dlogits, const float* probs,
                        const float* gates, const std::int32_t* choice, const std::int32_t* chosen,
                        const float* dgates, std::size_t R, std::size_t E, std::size_t K,
                        float aux_loss_coef, float aux_scale);
// h(N) = silu(a)·b.
void swiglu_forward(const OpContext& ctx, float* h, const float* a, const float* b, std::size_t N);
// da(N), db(N) from dh(N).
void swiglu_backward(const OpContext& ctx, float* da, float* db, const float* dh, const float* a,
                     const float* b, std::size_t N);

}  // namespace paci::model
