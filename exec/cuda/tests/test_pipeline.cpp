// The GPU pipeline against the CPU executor on the same schedule files (split backwards and
// interleaved stages included): versions read equal the static analysis exactly for every
// generator; fp32 losses and final weights agree with the CPU backend's within the CUDA tests'
// tolerance (bf16 loosely); runs repeat bit for bit; the measured timeline keeps every device's
// order; a failing action is named. They skip without a GPU.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <optional>
#include <string>
#include <thread>

#include "exec/cuda/pipeline.hpp"
#include "exec/executor.hpp"
#include "exec/partition.hpp"
#include "exec/rank_results.hpp"
#include "loopback_links.hpp"
#include "pipeline_runs.hpp"
#include "schedules/analysis.hpp"
#include "schedules/generators.hpp"
#include "support.hpp"

namespace paci::exec::gpu {
namespace {

using cuda::Precision;

constexpr std::size_t kBatch = 2, kSeq = 16;

model::GptConfig small() {
  return {.layers = 4, .heads = 2, .d_model = 32, .max_seq_len = 16, .vocab = 64};
}

using testing::synthetic;
using testing::whole_params;

template <typename Config>
Config common(std::int32_t stages) {
  return testing::training_config<Config>(small(), stages, kBatch, kSeq, 3e-3, 3e-4);
}

GpuExecConfig gpu_config(std::int32_t stages, Precision precision) {
  GpuExecConfig c = common<GpuExecConfig>(stages);
  c.precision = precision;
  return c;
}

std::vector<float> to_float(const std::vector<double>& x) {
  return {x.begin(), x.end()};
}

class GpuPipelineTest : public cuda::testing::GpuTest {};
class GpuPipelinePrecisionTest : public cuda::testing::GpuPrecisionTest {};

// Every generator's schedule: four devices, or (interleaved, zb-v, dualpipev) two devices holding
// two stages each. Empty where the generator does not allow M.
std::optional<Schedule> four_stages(const std::string& kind, std::int32_t M, std::int32_t N) {
  if (kind == "interleaved")
    return M % 2 == 0 ? std::optional(generate_schedule(kind, 2, M, N, 2)) : std::nullopt;
  if (kind == std::string("zb-v")) return generate_schedule(kind, 2, M, N, 2);
  if (kind == std::string("dualpipev"))
    return M >= 4 ? std::optional(generate_schedule(kind, 2, M, N, 2)) : std::nullopt;
  if (kind == "2bw" && M < 4) return std::nullopt;
  return generate_schedule(kind, 4, M, N);
}

TEST_F(GpuPipelineTest, VersionsAndPeaksEqualTheStaticAnalysisForEveryGenerator) {
  for (const char* kind : {"gpipe", "1f1b", "pipedream", "2bw", "paci", "zb-h1", "zb-h2",
                           "interleaved", "zb-v", "dualpipev"})
    for (std::int32_t M : {1, 2, 4, 8}) {
      const std::optional<Schedule> made = four_stages(kind, M, 3);
      if (!made) continue;
      const Schedule& s = *made;
      const Analysis want = analyze(s);
      GpuPipeline p(s, gpu_config(4, Precision::fp32));
      const ExecResult r = p.run();
      ASSERT_EQ(r.observed.versions.size(), want.versions.size());
      for (std::size_t i = 0; i < want.versions.size(); ++i) {
        const auto& got = r.observed.versions[i];
        const auto& exp = want.versions[i];
        ASSERT_EQ(got.v_f, exp.v_f) << kind << " M=" << M << " stage " << exp.stage;
        ASSERT_EQ(got.v_b, exp.v_b) << kind << " M=" << M << " stage " << exp.stage;
        ASSERT_EQ(got.update, exp.update) << kind << " M=" << M << " stage " << exp.stage;
      }
      for (std::int32_t st = 0; st < 4; ++st) {
        const auto& got = r.observed.stages[static_cast<std::size_t>(st)];
        const auto& exp = want.stages[static_cast<std::size_t>(st)];
        EXPECT_EQ(got.peak_activations, exp.peak_activations) << kind << " M=" << M;
        EXPECT_EQ(got.peak_weight_versions, exp.peak_weight_versions) << kind << " M=" << M;
      }
    }
}

TEST_P(GpuPipelinePrecisionTest, LossesAndWeightsMatchTheCpuExecutor) {
  const Precision precision = GetParam();
  for (const char* kind : {"1f1b", "paci", "pipedream", "zb-h1", "zb-h2", "interleaved"}) {
    const Schedule s = *four_stages(kind, 4, 3);
    Executor cpu(s, common<ExecConfig>(4));
    const ExecResult want = cpu.run();
    GpuPipeline gpu(s, gpu_config(4, precision));
    const ExecResult got = gpu.run();
    // Losses after three updates: the GPU's fp32 sums differ from the CPU's in order only; bf16
    // rounds weights and activations, so it is checked loosely (the tests' shared rule, 4x).
    EXPECT_TRUE(cuda::testing::close(to_float(got.step_losses), to_float(want.step_losses),
                                     precision, std::string(kind) + " step losses", 4.0));
    EXPECT_TRUE(cuda::testing::close(whole_params(gpu, 4), whole_params(cpu, 4), precision,
                                     std::string(kind) + " final weights", 4.0));
  }
}

INSTANTIATE_TEST_SUITE_P(Precisions, GpuPipelinePrecisionTest,
                         ::testing::Values(Precision::fp32, Precision::bf16),
                         cuda::testing::precision_name);

TEST_F(GpuPipelineTest, RepeatsBitForBitAndKeepsEveryDevicesOrder) {
  const Schedule s = generate_schedule("paci", 4, 2, 4);
  GpuPipeline a(s, gpu_config(4, Precision::fp32));
  const ExecResult ra = a.run();
  GpuPipeline b(s, gpu_config(4, Precision::fp32));
  const ExecResult rb = b.run();
  EXPECT_EQ(ra.step_losses, rb.step_losses);
  EXPECT_EQ(whole_params(a, 4), whole_params(b, 4));
  // Each device's actions ran in its list order, without overlapping each other.
  for (std::size_t d = 0; d < ra.times.size(); ++d)
    for (std::size_t i = 1; i < ra.times[d].size(); ++i) {
      EXPECT_LE(ra.times[d][i - 1].end_s, ra.times[d][i].start_s + 1e-6) << "device " << d;
      EXPECT_LE(ra.times[d][i].start_s, ra.times[d][i].end_s) << "device " << d;
    }
  // Every cross-device message was sent before its consumer started.
  EXPECT_FALSE(ra.timeline.messages.empty());
  for (const MessageSlice& m : ra.timeline.messages)
    EXPECT_LE(m.send_end_s, m.recv_end_s + 1e-6) << to_string(m.consumer);
  const RunSummary summary = a.summary(ra);
  EXPECT_GT(summary.timing.makespan_s, 0.0);
}

TEST_F(GpuPipelineTest, ValidationLossOfTheFinalWeightsMatchesTheCpu) {
  const Schedule s = generate_schedule("1f1b", 2, 2, 2);
  Executor cpu(s, common<ExecConfig>(2));
  cpu.run();
  GpuPipeline gpu(s, gpu_config(2, Precision::fp32));
  gpu.run();
  const double want =
      cpu.evaluate({cpu.stage(0).weights(), cpu.stage(1).weights()}, synthetic, 100, 4);
  const double got =
      gpu.evaluate({gpu.stage(0).weights(), gpu.stage(1).weights()}, synthetic, 100, 4);
  EXPECT_NEAR(got, want, 1e-4 * std::abs(want));
}

TEST_F(GpuPipelineTest, AFailingActionIsNamed) {
  const Schedule s = generate_schedule("paci", 4, 2, 2);
  GpuExecConfig c = gpu_config(4, Precision::fp32);
  c.fail_at = Action{ActionKind::B, 2, 1};
  GpuPipeline p(s, c);
  try {
    p.run();
    FAIL() << "the run should have failed";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("stage 2"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("2B1"), std::string::npos) << e.what();
  }
}

// One process per device, played by one thread per device on this GPU with LoopbackLinks in
// place of NCCL: what each "process" runs, its results, and its pipelined validation.
struct ProcessRun {
  std::vector<std::string> parts;   // encoded results, one per device
  std::vector<std::string> errors;  // one per device, empty when it succeeded
  double val_loss = 0.0;            // on the last stage's process
};

ProcessRun run_as_processes(const Schedule& s, const GpuExecConfig& base) {
  const std::int32_t P = s.num_devices();
  loopback::LoopbackHub hub(P);
  ProcessRun out;
  out.parts.resize(static_cast<std::size_t>(P));
  out.errors.resize(static_cast<std::size_t>(P));
  std::vector<std::thread> threads;
  std::vector<std::future<void>> finished;
  for (std::int32_t d = 0; d < P; ++d) {
    std::promise<void> done;
    finished.push_back(done.get_future());
    threads.emplace_back([&, d, done = std::move(done)]() mutable {
      loopback::LoopbackLinks links(hub, d);
      try {
        GpuExecConfig c = base;
        c.remote = &links;
        GpuPipeline p(s, c);
        const ExecResult r = p.run();
        out.parts[static_cast<std::size_t>(d)] = encode_rank_result(s, r, d);
        std::vector<cuda::TensorView> weights(static_cast<std::size_t>(s.stages));
        for (std::int32_t st = 0; st < s.stages; ++st)
          if (p.runs(st)) weights[static_cast<std::size_t>(st)] = p.stage(st).weights();
        const double loss = p.evaluate(weights, synthetic, 100, 4);
        if (p.runs(s.stages - 1)) out.val_loss = loss;
      } catch (const std::exception& e) {
        out.errors[static_cast<std::size_t>(d)] = e.what();
        links.abort();
      }
      done.set_value();
    });
  }
  // A hang fails the test instead of hanging it: after the deadline every waiter is woken.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  for (auto& f : finished)
    if (f.wait_until(deadline) != std::future_status::ready) {
      ADD_FAILURE() << "the processes did not finish within 120 s";
      loopback::LoopbackLinks(hub, 0).abort();
      break;
    }
  for (auto& t : threads) t.join();
  return out;
}

TEST_P(GpuPipelinePrecisionTest, OneProcessPerDeviceComputesWhatOneProcessDoes) {
  const Precision precision = GetParam();
  for (const char* kind : {"1f1b", "paci", "2bw", "zb-h2", "interleaved"}) {
    const Schedule s = *four_stages(kind, 4, 3);
    GpuPipeline whole(s, gpu_config(4, precision));
    const ExecResult want = whole.run();
    std::vector<cuda::TensorView> weights;
    for (std::int32_t st = 0; st < 4; ++st) weights.push_back(whole.stage(st).weights());
    const double want_val = whole.evaluate(weights, synthetic, 100, 4);

    const ProcessRun run = run_as_processes(s, gpu_config(4, precision));
    for (const std::string& e : run.errors) ASSERT_EQ(e, "") << kind;
    const ExecResult got = merge_rank_results(s, run.parts);
    // The same kernels on the same inputs in the same order: bit for bit.
    EXPECT_EQ(got.step_losses, want.step_losses) << kind;
    EXPECT_EQ(got.microbatch_losses, want.microbatch_losses) << kind;
    ASSERT_EQ(got.observed.versions.size(), want.observed.versions.size()) << kind;
    for (std::size_t k = 0; k < want.observed.versions.size(); ++k) {
      EXPECT_EQ(got.observed.versions[k].v_f, want.observed.versions[k].v_f) << kind;
      EXPECT_EQ(got.observed.versions[k].v_b, want.observed.versions[k].v_b) << kind;
      EXPECT_EQ(got.observed.versions[k].update, want.observed.versions[k].update) << kind;
    }
    for (std::size_t st = 0; st < want.observed.stages.size(); ++st) {
      EXPECT_EQ(got.observed.stages[st].peak_activations, want.observed.stages[st].peak_activations)
          << kind;
      EXPECT_EQ(got.observed.stages[st].peak_weight_versions,
                want.observed.stages[st].peak_weight_versions)
          << kind;
    }
    EXPECT_EQ(got.timeline.compute.size(), want.timeline.compute.size()) << kind;
    EXPECT_EQ(got.timeline.messages.size(), want.timeline.messages.size()) << kind;
    EXPECT_EQ(run.val_loss, want_val) << kind;
  }
}

TEST_F(GpuPipelineTest, AFailingProcessStopsTheOthers) {
  const Schedule s = generate_schedule("paci", 4, 2, 2);
  GpuExecConfig c = gpu_config(4, Precision::fp32);
  c.fail_at = Action{ActionKind::B, 1, 1};
  const ProcessRun run = run_as_processes(s, c);  // returning at all: nobody hangs
  EXPECT_NE(run.errors[1].find("stage 1, action 1B1"), std::string::npos) << run.errors[1];
  // Device 0 needs 1B1's gradient: it must have stopped with an error, not waited forever.
  EXPECT_NE(run.errors[0], "");
}

}  // namespace
}  // namespace paci::exec::gpu
