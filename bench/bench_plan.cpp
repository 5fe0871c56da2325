// paci plan's speed. One configuration evaluated in-process (schedule built, costed, simulated,
// memory computed) at GPT-3 175B scale, P=8, M=64 (target: 1 ms median on one core); and the
// whole default search for Llama 3 70B on 1,024 H100s, GPT-3 175B on 1,024 A100s and Llama 3 405B
// on 16,384 H100s (target: 2 s on one core), on one thread and on every core (target: 10,000
// configurations a second on one core), with how many were simulated and pruned.
// bench/bench_plan.sh runs it and writes docs/results/bench_plan.md.
#include <benchmark/benchmark.h>

#include <algorithm>

#include "bench/bench_main.hpp"
#include "plan/evaluate/evaluate.hpp"
#include "plan/search/search.hpp"

namespace {

using namespace paci::plan;

PlanConfig gpt3_175b() {
  PlanConfig c;
  c.model = model_preset("gpt3-175b");
  c.cluster = cluster_preset("a100-80gb");
  c.gpus = 1024;
  c.global_batch = 1024;  // d = 16, b = 1: M = 64
  c.tp = 8;
  c.pp = 8;
  c.microbatch_size = 1;
  c.kind = "1f1b";
  c.recompute = Recompute::selective;
  c.sequence_parallel = true;
  return c;
}

void BM_EvaluateOne(benchmark::State& state, const char* kind) {
  PlanConfig c = gpt3_175b();
  c.kind = kind;
  double step = 0;
  for (auto _ : state) {
    const PlanResult r = evaluate(c);
    step = r.step_s;
    benchmark::DoNotOptimize(step);
  }
  state.counters["microbatches"] = static_cast<double>(c.microbatches());
  state.counters["step_s"] = step;
}

SearchSpace llama3_70b_h100() {
  SearchSpace s;
  s.model = model_preset("llama3-70b");
  s.cluster = cluster_preset("h100-80gb");
  s.gpus = 1024;
  s.global_batch = 1024;  // 8 M tokens of 8,192
  return s;
}

SearchSpace gpt3_175b_a100() {
  SearchSpace s;
  s.model = model_preset("gpt3-175b");
  s.cluster = cluster_preset("a100-80gb");
  s.gpus = 1024;
  s.global_batch = 1536;  // Narayanan et al. 2021's batch for GPT-3 175B
  return s;
}

// The reference: Llama 3 405B as Meta trained it (16,384 H100s, 2,048 sequences of 8K).
SearchSpace llama3_405b_h100() {
  SearchSpace s;
  s.model = model_preset("llama3-405b");
  s.cluster = cluster_preset("h100-80gb");
  s.gpus = 16384;
  s.global_batch = 2048;
  return s;
}

void BM_Search(benchmark::State& state, SearchSpace (*space)(), std::size_t jobs) {
  SearchOptions o;
  o.jobs = jobs;
  SearchResult r;
  for (auto _ : state) {
    r = search(space(), o);
    benchmark::DoNotOptimize(r.simulated);
  }
  state.counters["configurations"] = static_cast<double>(r.configurations);
  state.counters["simulated"] = static_cast<double>(r.simulated);
  state.counters["pruned"] = static_cast<double>(r.rejected.pruned);
  state.counters["out_of_memory"] = static_cast<double>(r.rejected.out_of_memory);
  state.counters["configurations_per_s"] = benchmark::Counter(
      static_cast<double>(r.configurations) * static_cast<double>(state.iterations()),
      benchmark::Counter::kIsRate);
  state.counters["jobs"] = static_cast<double>(r.jobs);
  state.counters["best_step_s"] = r.plans.empty() ? 0.0 : r.plans.front().step_s;
}

double minimum(const std::vector<double>& v) {
  return *std::min_element(v.begin(), v.end());
}
double maximum(const std::vector<double>& v) {
  return *std::max_element(v.begin(), v.end());
}

}  // namespace

BENCHMARK_CAPTURE(BM_EvaluateOne, gpt3_175b_p8_m64_1f1b, "1f1b")
    ->Unit(benchmark::kMillisecond)
    ->Repetitions(9)
    ->ComputeStatistics("min", minimum)
    ->ComputeStatistics("max", maximum);
BENCHMARK_CAPTURE(BM_EvaluateOne, gpt3_175b_p8_m64_paci, "paci")
    ->Unit(benchmark::kMillisecond)
    ->Repetitions(9)
    ->ComputeStatistics("min", minimum)
    ->ComputeStatistics("max", maximum);
BENCHMARK_CAPTURE(BM_Search, llama3_70b_1024_h100_one_core, llama3_70b_h100, 1)
    ->Unit(benchmark::kSecond)
    ->Iterations(1)
    ->Repetitions(3)
    ->ComputeStatistics("min", minimum)
    ->ComputeStatistics("max", maximum);
BENCHMARK_CAPTURE(BM_Search, gpt3_175b_1024_a100_one_core, gpt3_175b_a100, 1)
    ->Unit(benchmark::kSecond)
    ->Iterations(1)
    ->Repetitions(3)
    ->ComputeStatistics("min", minimum)
    ->ComputeStatistics("max", maximum);
BENCHMARK_CAPTURE(BM_Search, llama3_405b_16384_h100_one_core, llama3_405b_h100, 1)
    ->Unit(benchmark::kSecond)
    ->Iterations(1)
    ->Repetitions(3)
    ->ComputeStatistics("min", minimum)
    ->ComputeStatistics("max", maximum);
BENCHMARK_CAPTURE(BM_Search, llama3_70b_1024_h100_every_core, llama3_70b_h100, 0)
    ->Unit(benchmark::kSecond)
    ->Iterations(1)
    ->Repetitions(3)
    ->ComputeStatistics("min", minimum)
    ->ComputeStatistics("max", maximum);

int main(int argc, char** argv) {
  return paci::bench::run_benchmarks(argc, argv);
}
