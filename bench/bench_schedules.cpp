// Generate, validate and analyse large schedules. The target: P=64, M=64, N=256
// (about 2.1 million actions) in under 2 s and under 1 GB peak memory; the counters print actions
// per second and the process's peak resident memory.
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include "bench/bench_main.hpp"
#include "schedules/analysis.hpp"
#include "schedules/formats.hpp"
#include "schedules/generators.hpp"
#include "schedules/validate.hpp"

namespace {

double peak_rss_mib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

void set_counters(benchmark::State& state, std::size_t actions) {
  state.counters["actions"] = static_cast<double>(actions);
  state.counters["actions_per_s"] =
      benchmark::Counter(static_cast<double>(actions) * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate);
  state.counters["peak_rss_MiB"] = peak_rss_mib();
}

// The whole pass a user's `paci schedule | paci analyze` makes, minus the I/O.
void BM_GenerateValidateAnalyze(benchmark::State& state, const char* kind) {
  const auto P = static_cast<std::int32_t>(state.range(0));
  const auto M = static_cast<std::int32_t>(state.range(1));
  const auto N = static_cast<std::int32_t>(state.range(2));
  std::size_t actions = 0;
  for (auto _ : state) {
    const paci::Schedule s = paci::generate_schedule(kind, P, M, N);
    paci::validate(s);
    const paci::Analysis a = paci::analyze(s);
    benchmark::DoNotOptimize(a.stages.data());
    actions = s.num_actions();
  }
  set_counters(state, actions);
}

void BM_Stage(benchmark::State& state, int which) {
  const paci::Schedule s = paci::generate_schedule(
      "paci", static_cast<std::int32_t>(state.range(0)), static_cast<std::int32_t>(state.range(1)),
      static_cast<std::int32_t>(state.range(2)));
  for (auto _ : state) {
    if (which == 0)
      benchmark::DoNotOptimize(
          paci::generate_schedule("paci", s.stages, s.microbatches, s.steps).devices.data());
    if (which == 1) benchmark::DoNotOptimize(paci::validate(s).actions);
    if (which == 2) benchmark::DoNotOptimize(paci::analyze(s).stages.data());
    if (which == 3)
      benchmark::DoNotOptimize(paci::write_schedule(s, paci::ScheduleFormat::json).size());
  }
  set_counters(state, s.num_actions());
}

}  // namespace

BENCHMARK_CAPTURE(BM_GenerateValidateAnalyze, paci, "paci")
    ->Args({64, 64, 256})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);
BENCHMARK_CAPTURE(BM_GenerateValidateAnalyze, pipedream, "pipedream")
    ->Args({64, 64, 256})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);
BENCHMARK_CAPTURE(BM_GenerateValidateAnalyze, onef1b, "1f1b")
    ->Args({64, 64, 256})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);
BENCHMARK_CAPTURE(BM_Stage, generate, 0)
    ->Args({64, 64, 256})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);
BENCHMARK_CAPTURE(BM_Stage, validate, 1)
    ->Args({64, 64, 256})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);
BENCHMARK_CAPTURE(BM_Stage, analyze, 2)
    ->Args({64, 64, 256})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);
BENCHMARK_CAPTURE(BM_Stage, write_json, 3)
    ->Args({64, 64, 256})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);

int main(int argc, char** argv) {
  return paci::bench::run_benchmarks(argc, argv);
}
