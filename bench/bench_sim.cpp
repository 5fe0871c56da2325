// Simulator throughput. Targets: P=64, M=64, N=256 (2.1 million actions) in under 2 s
// single-threaded and under 1 GB; a sweep of 1,000 configurations (P <= 16, M <= 64, N=8) in
// seconds. Counters: events per second and peak resident memory.
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include "bench/bench_main.hpp"
#include "schedules/generators.hpp"
#include "sim/engine.hpp"
#include "traces/chrome_trace.hpp"

namespace {

double peak_rss_mib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;
}

paci::CostModel costs(std::int32_t P) {
  paci::UniformCosts u;
  u.tb = 2.0;
  u.latency_s = 0.01;
  u.bandwidth_bytes_per_s = 1e9;
  u.message_bytes = 1 << 20;
  u.activation_bytes = 1 << 22;
  return paci::uniform_cost_model(P, u);
}

void BM_Simulate(benchmark::State& state, const char* kind, bool timeline) {
  const paci::Schedule s = paci::generate_schedule(kind, static_cast<std::int32_t>(state.range(0)),
                                                   static_cast<std::int32_t>(state.range(1)),
                                                   static_cast<std::int32_t>(state.range(2)));
  const paci::CostModel c = costs(s.stages);
  std::int64_t events = 0;
  for (auto _ : state) {
    const paci::SimResult r = paci::simulate(s, c, {timeline});
    events = r.events;
    benchmark::DoNotOptimize(r.times.data());
  }
  state.counters["actions"] = static_cast<double>(s.num_actions());
  state.counters["events_per_s"] =
      benchmark::Counter(static_cast<double>(events) * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate);
  state.counters["peak_rss_MiB"] = peak_rss_mib();
}

// 1,024 configurations: P in 1..16, M in 1..64, N=8; paci and its 1f1b baseline each.
void BM_Sweep(benchmark::State& state) {
  std::int64_t configurations = 0;
  for (auto _ : state) {
    configurations = 0;
    for (std::int32_t P = 1; P <= 16; ++P) {
      const paci::CostModel c = costs(P);
      for (std::int32_t M = 1; M <= 64; ++M) {
        for (const char* kind : {"paci", "1f1b"}) {
          const paci::Schedule s = paci::generate_schedule(kind, P, M, 8);
          benchmark::DoNotOptimize(paci::simulate(s, c, {false}).events);
        }
        ++configurations;
      }
    }
  }
  state.counters["configurations"] = static_cast<double>(configurations);
  state.counters["configurations_per_s"] = benchmark::Counter(
      static_cast<double>(configurations) * static_cast<double>(state.iterations()),
      benchmark::Counter::kIsRate);
}

void BM_TraceJson(benchmark::State& state) {
  const paci::Schedule s = paci::generate_schedule("paci", 16, 16, 64);
  const paci::SimResult r = paci::simulate(s, costs(16), {true});
  for (auto _ : state) benchmark::DoNotOptimize(paci::chrome_trace_json(r.timeline).size());
  state.counters["compute_slices"] = static_cast<double>(r.timeline.compute.size());
}

}  // namespace

BENCHMARK_CAPTURE(BM_Simulate, paci, "paci", false)
    ->Args({64, 64, 256})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);
BENCHMARK_CAPTURE(BM_Simulate, onef1b, "1f1b", false)
    ->Args({64, 64, 256})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);
BENCHMARK_CAPTURE(BM_Simulate, paci_with_timeline, "paci", true)
    ->Args({64, 64, 256})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);
BENCHMARK(BM_Sweep)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_TraceJson)->Unit(benchmark::kMillisecond)->Iterations(3);

int main(int argc, char** argv) {
  return paci::bench::run_benchmarks(argc, argv);
}
