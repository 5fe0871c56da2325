// Training-step throughput of the CPU GPT-2 at the default shape (L=4, NH=4, C=128,
// T=128, B=16, V=256): tokens/s of forward + backward + AdamW at 1 and 2 threads, the share of time
// in GEMMs, and model FLOP/s against the OpenBLAS sgemm rate on the model's own GEMM shapes.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <vector>

#include "bench/bench_main.hpp"
#include "model/gpt.hpp"

namespace {

using namespace paci::model;
using Clock = std::chrono::steady_clock;

StageShape default_shape() {
  StageShape shape;
  shape.config = {.layers = 4, .heads = 4, .d_model = 128, .max_seq_len = 128, .vocab = 256};
  shape.range = whole_model(shape.config);
  shape.batch = 16;
  shape.seq_len = 128;
  return shape;
}

double seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// The baseline: every linear-layer GEMM of one training step (forward, input gradient, weight
// gradient, LM head included), each as one cblas call on OpenBLAS's own `threads` threads.
// Attention's per-head products (about 1/7 of the FLOPs) are not in it. Returns FLOP/s.
double sgemm_rate(const StageShape& shape, std::size_t threads) {
  const std::size_t R = shape.rows(), C = shape.config.d_model, V = shape.config.vocab;
  struct Linear {
    std::size_t in, out, count;
  };
  const std::vector<Linear> linears{{C, 3 * C, shape.range.num_layers},
                                    {C, C, shape.range.num_layers},
                                    {C, 4 * C, shape.range.num_layers},
                                    {4 * C, C, shape.range.num_layers},
                                    {C, V, 1}};
  std::vector<float> x(R * 4 * C, 0.01f), w(V * 4 * C + 16 * C * C, 0.02f), y(R * 4 * C + R * V);
  std::vector<float> dw(w.size());
  set_blas_threads(threads);
  auto run = [&] {
    double flops = 0;
    for (const Linear& l : linears) {
      for (std::size_t k = 0; k < l.count; ++k) {
        gemm_serial(Transpose::no, Transpose::yes, R, l.out, l.in, 1, x.data(), l.in, w.data(),
                    l.in, 0, y.data(), l.out);  // forward
        gemm_serial(Transpose::no, Transpose::no, R, l.in, l.out, 1, y.data(), l.out, w.data(),
                    l.in, 0, x.data(), l.in);  // input gradient
        gemm_serial(Transpose::yes, Transpose::no, l.out, l.in, R, 1, y.data(), l.out, x.data(),
                    l.in, 1, dw.data(), l.in);  // weight gradient
        flops += 3 * 2.0 * static_cast<double>(R * l.in * l.out);
      }
    }
    return flops;
  };
  run();  // warm-up
  double flops = 0;
  const auto start = Clock::now();
  while (seconds(start, Clock::now()) < 0.5) flops += run();
  const double rate = flops / seconds(start, Clock::now());
  set_blas_threads(1);  // what the model's own GEMM chunks need
  return rate;
}

void BM_TrainStep(benchmark::State& state) {
  const auto threads = static_cast<std::size_t>(state.range(0));
  const StageShape shape = default_shape();
  double baseline = sgemm_rate(shape, threads);  // measured again after the loop: the best of two
  Stage stage(shape, threads);
  ActivationSlot slot = stage.make_slot();
  std::vector<float> params(stage.layout().size()), grads(params.size());
  init_gpt2(stage.layout(), params, 1);
  AdamW adamw(stage.layout(), {}, threads);
  InitRng rng(2);
  std::vector<std::int32_t> tokens(shape.rows()), targets(shape.rows());
  for (auto& t : tokens) t = static_cast<std::int32_t>(rng.next() % 256);
  for (auto& t : targets) t = static_cast<std::int32_t>(rng.next() % 256);
  stage.enable_gemm_timing(true);
  auto step = [&] {
    const auto t0 = Clock::now();
    const float loss = stage.forward_loss(params, StageInput::tokens(tokens), targets, 1, slot);
    const auto t1 = Clock::now();
    stage.backward(params, grads, slot, {}, {});
    const auto t2 = Clock::now();
    adamw.step(params, grads, 1e-4);
    zero(grads);
    const auto t3 = Clock::now();
    benchmark::DoNotOptimize(loss);
    return std::array<double, 3>{seconds(t0, t1), seconds(t1, t2), seconds(t2, t3)};
  };
  step();  // warm-up: first touch of every buffer
  stage.reset_gemm_stats();
  double forward_s = 0, backward_s = 0, adamw_s = 0;
  for (auto _ : state) {
    const auto phases = step();
    forward_s += phases[0];
    backward_s += phases[1];
    adamw_s += phases[2];
  }
  baseline = std::max(baseline, sgemm_rate(shape, threads));
  const double n = static_cast<double>(state.iterations());
  const double total_s = forward_s + backward_s + adamw_s;
  const double model_flops =
      stage_flops(shape.config, shape.range, shape.batch, shape.seq_len).forward_backward();
  const double model_rate = model_flops * n / total_s;
  const GemmStats& gemm = stage.gemm_stats();
  state.counters["tokens_per_s"] = static_cast<double>(shape.rows()) * n / total_s;
  state.counters["fwd_ms"] = 1e3 * forward_s / n;
  state.counters["bwd_ms"] = 1e3 * backward_s / n;
  state.counters["adamw_ms"] = 1e3 * adamw_s / n;  // with zero_grad
  state.counters["gemm_share"] = gemm.seconds / total_s;
  state.counters["gemm_GFLOPs"] = gemm.flops / gemm.seconds / 1e9;
  state.counters["model_GFLOPs"] = model_rate / 1e9;
  state.counters["sgemm_GFLOPs"] = baseline / 1e9;
  state.counters["model_vs_sgemm"] = model_rate / baseline;
}
BENCHMARK(BM_TrainStep)
    ->Arg(1)
    ->Arg(2)
    ->ArgName("threads")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(2.0);

}  // namespace

int main(int argc, char** argv) {
  return paci::bench::run_benchmarks(argc, argv);
}
