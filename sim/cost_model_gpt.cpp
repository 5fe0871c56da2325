// The analytic cost model of a GPT-2 style decoder split into pipeline stages: FLOPs, parameters,
// activation memory and messages per stage from the shape, durations from a device's speed, and
// the balanced default partition. Every formula is written out in docs/costmodel.md.
#include <fmt/format.h>
#include <algorithm>
#include <cmath>
#include <initializer_list>

#include "sim/cost_model.hpp"

namespace paci {

namespace {

// Letters as in docs/costmodel.md: L layers, d model width, h heads, T sequence length,
// V vocabulary, b sequences per micro-batch, s bytes per element of the training dtype.

std::int64_t product(std::initializer_list<std::int64_t> factors) {
  std::int64_t out = 1;
  for (const std::int64_t f : factors)
    if (__builtin_mul_overflow(out, f, &out))
      throw InputError("the GPT shape is too large: a byte or parameter count overflows 64 bits");
  return out;
}

std::int64_t sum(std::initializer_list<std::int64_t> terms) {
  std::int64_t out = 0;
  for (const std::int64_t t : terms)
    if (__builtin_add_overflow(out, t, &out))
      throw InputError("the GPT shape is too large: a byte or parameter count overflows 64 bits");
  return out;
}

void check_shape(const GptShape& g) {
  const auto positive = [](std::int32_t value, std::string_view name) {
    if (value < 1) throw InputError(fmt::format("{} must be at least 1 (got {})", name, value));
  };
  positive(g.layers, "layers");
  positive(g.d_model, "d_model");
  positive(g.heads, "heads");
  positive(g.seq_len, "seq_len");
  positive(g.vocab, "vocab");
  positive(g.microbatch_size, "the micro-batch size");
  if (g.d_model % g.heads != 0)
    throw InputError(fmt::format("d_model {} is not divisible by {} heads", g.d_model, g.heads));
  if (g.dtype_bytes != 2 && g.dtype_bytes != 4)
    throw InputError(
        fmt::format("dtype_bytes must be 2 (bf16, fp16) or 4 (fp32), got {}", g.dtype_bytes));
}

void check_device(const DeviceSpeed& device) {
  const auto speed = [](double value, std::string_view what) {
    if (!std::isfinite(value) || !(value > 0))
      throw InputError(fmt::format("{} must be a positive finite number (got {})", what, value));
  };
  speed(device.flops_per_s, "the device FLOP/s (--flops)");
  speed(device.memory_bytes_per_s, "the device memory bandwidth (--mem-bandwidth)");
  if (!std::isfinite(device.link.latency_s) || device.link.latency_s < 0)
    throw InputError(
        fmt::format("the link latency (--latency) must be a finite number of seconds >= 0 (got {})",
                    device.link.latency_s));
  if (!(device.link.bandwidth_bytes_per_s > 0))
    throw InputError(
        fmt::format("the link bandwidth (--bandwidth) must be positive bytes/s, or inf (got {})",
                    device.link.bandwidth_bytes_per_s));
}

void check_stage_count(const GptShape& g, std::int32_t stages) {
  if (stages < 1) throw InputError(fmt::format("need at least one stage (got {})", stages));
  if (stages > g.layers)
    throw InputError(fmt::format("{} stages but only {} layer{}: every stage needs at least one",
                                 stages, g.layers, g.layers == 1 ? "" : "s"));
}

void check_partition(const GptShape& g, std::int32_t stages,
                     const std::vector<std::int32_t>& partition) {
  if (partition.size() != static_cast<std::size_t>(stages))
    throw InputError(
        fmt::format("the partition has {} entries for {} stages", partition.size(), stages));
  std::int64_t total = 0;
  for (std::size_t s = 0; s < partition.size(); ++s) {
    if (partition[s] < 1)
      throw InputError(fmt::format(
          "the partition entry for stage {} is {}; every stage needs at least one layer", s,
          partition[s]));
    total += partition[s];
  }
  if (total != g.layers)
    throw InputError(
        fmt::format("the partition sums to {} layers, the model has {}", total, g.layers));
}

// Forward FLOPs of one transformer block for one micro-batch: 24·b·T·d² for the QKV, output
// projection and MLP matmuls, 4·b·T²·d for attention scores and the weighted sum (full T×T).
double layer_forward_flops(const GptShape& g) {
  const double b = g.microbatch_size, t = g.seq_len, d = g.d_model;
  return 24 * b * t * d * d + 4 * b * t * t * d;
}

// Forward FLOPs of the LM head (d -> V) for one micro-batch.
double head_forward_flops(const GptShape& g) {
  const double b = g.microbatch_size, t = g.seq_len, d = g.d_model, v = g.vocab;
  return 2 * b * t * d * v;
}

StageCost stage_cost(const GptShape& g, const DeviceSpeed& device, std::int32_t layers, bool first,
                     bool last) {
  const std::int64_t b = g.microbatch_size, t = g.seq_len, d = g.d_model, h = g.heads, v = g.vocab,
                     s = g.dtype_bytes, n = layers;
  const double forward_flops = n * layer_forward_flops(g) + (last ? head_forward_flops(g) : 0.0);

  // Parameters: 12·d² + 13·d per block; wte + wpe on the first stage; untied head + final LN on
  // the last.
  const std::int64_t per_layer = sum({product({12, d, d}), product({13, d})});
  const std::int64_t params =
      sum({product({n, per_layer}), first ? sum({product({v, d}), product({t, d})}) : 0,
           last ? sum({product({v, d}), 2 * d}) : 0});

  // Activations held per micro-batch (Korthikanti et al. 2022, no recomputation, generalised to
  // s bytes per element; 1-byte dropout masks): b·T·d·(16·s + 2) + b·h·T²·(2·s + 1) per block.
  const std::int64_t btd = product({b, t, d});
  const std::int64_t per_layer_activation =
      sum({product({btd, 16 * s + 2}), product({b, h, t, t, 2 * s + 1})});
  const std::int64_t first_activation = btd;  // embedding dropout mask
  // Final LN input and output (s each), logits (s) and fp32 softmax for the cross-entropy (4).
  const std::int64_t last_activation = sum({product({2, btd, s}), product({b, t, v, s + 4})});

  StageCost c;
  c.forward_s = forward_flops / device.flops_per_s;
  c.backward_s = 2 * forward_flops / device.flops_per_s;
  c.input_grad_s = c.weight_grad_s = forward_flops / device.flops_per_s;
  // AdamW reads weights, gradients and two fp32 moments and writes weights and moments.
  c.update_s = static_cast<double>(product({params, 3 * s + 16})) / device.memory_bytes_per_s;
  c.activation_bytes = sum({product({n, per_layer_activation}), first ? first_activation : 0,
                            last ? last_activation : 0});
  c.activation_message_bytes = last ? 0 : product({btd, s});
  c.gradient_message_bytes = first ? 0 : product({btd, s});
  c.weight_bytes = c.gradient_bytes = product({params, s});
  c.optimizer_bytes = product({params, 8});
  // Split backward (zero-bubble schedules): from I to W, the output gradient of every linear and
  // LayerNorm a weight gradient needs — per block 11·b·T·d values (fcproj d, fc 4d, ln2 d, attproj
  // d, qkv 3d, ln1 d), the logits' and final LayerNorm's on the last stage, the embedding's on the
  // first (as exec's StageRuntime keeps them).
  c.weight_grad_stash_bytes = sum({product({n, 11, btd, s}), first ? product({btd, s}) : 0,
                                   last ? sum({product({b, t, v, s}), product({btd, s})}) : 0});
  return c;
}

std::string join(const std::vector<std::int32_t>& values) {
  std::string out;
  for (std::size_t i = 0; i < values.size(); ++i)
    out += fmt::format("{}{}", i == 0 ? "" : ",", values[i]);
  return out;
}

}  // namespace

std::vector<std::int32_t> balanced_partition(const GptShape& shape, std::int32_t stages) {
  check_shape(shape);
  check_stage_count(shape, stages);
  const std::int32_t layers = shape.layers;
  if (stages == 1) return {layers};
  const double layer = layer_forward_flops(shape), head = head_forward_flops(shape);
  const std::int32_t others = stages - 1;
  // With k layers on the last stage, the others' largest share ceil((L-k)/(P-1)) never grows
  // with k while the last stage's time grows: the best k is the first one where the last stage
  // is at least as slow as the others (k*), or k* - 1 when that is strictly cheaper.
  const auto others_time = [&](std::int32_t k) {
    const std::int64_t rest = layers - k;
    return static_cast<double>((rest + others - 1) / others) * layer;  // ceil((L-k)/(P-1))
  };
  const auto last_time = [&](std::int32_t k) { return k * layer + head; };
  std::int32_t lo = 1, hi = layers - others + 1;  // k* in [lo, hi]; hi: no such k
  while (lo < hi) {
    const std::int32_t mid = lo + (hi - lo) / 2;
    if (last_time(mid) >= others_time(mid))
      hi = mid;
    else
      lo = mid + 1;
  }
  std::int32_t best_k = std::min(lo, layers - others);
  if (lo > 1 && lo <= layers - others && others_time(lo - 1) < last_time(lo)) best_k = lo - 1;
  const std::int32_t rest = layers - best_k, base = rest / others, extra = rest % others;
  std::vector<std::int32_t> partition(static_cast<std::size_t>(stages), base);
  for (std::int32_t s = others - extra; s < others; ++s) ++partition[static_cast<std::size_t>(s)];
  partition.back() = best_k;
  return partition;
}

CostModel gpt_cost_model(const GptShape& shape, const DeviceSpeed& device, std::int32_t stages,
                         const std::vector<std::int32_t>& partition) {
  check_shape(shape);
  check_device(device);
  check_stage_count(shape, stages);
  std::vector<std::int32_t> layers = partition;
  if (layers.empty())
    layers = balanced_partition(shape, stages);
  else
    check_partition(shape, stages, layers);

  CostModel model;
  model.default_link = device.link;
  model.tokens_per_microbatch = product({shape.microbatch_size, shape.seq_len});
  for (std::int32_t s = 0; s < stages; ++s)
    model.stages.push_back(
        stage_cost(shape, device, layers[static_cast<std::size_t>(s)], s == 0, s == stages - 1));
  model.description = fmt::format(
      "gpt L={} d={} heads={} T={} V={} b={} dtype_bytes={} partition={} on {:g} FLOP/s, {:g} "
      "B/s memory",
      shape.layers, shape.d_model, shape.heads, shape.seq_len, shape.vocab, shape.microbatch_size,
      shape.dtype_bytes, join(layers), device.flops_per_s, device.memory_bytes_per_s);
  check_cost_model(model);  // a tiny FLOP/s can still overflow a duration to inf
  return model;
}

}  // namespace paci
