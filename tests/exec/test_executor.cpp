// The executor's promises: flushed schedules equal one device accumulating the same micro-batches
// (bitwise on the CPU backend), async versions equal the static analysis exactly, runs are
// deterministic (threaded = sequential replay), PACI's backward really reads updated weights, and
// a failing worker stops the run promptly with the stage and action named.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "exec/executor.hpp"
#include "exec/partition.hpp"
#include "exec/rank_results.hpp"
#include "pipeline_runs.hpp"
#include "schedules/analysis.hpp"
#include "schedules/generators.hpp"

namespace paci::exec {
namespace {

model::GptConfig tiny() {
  model::GptConfig c;
  c.layers = 4;
  c.heads = 2;
  c.d_model = 16;
  c.max_seq_len = 8;
  c.vocab = 64;
  return c;
}

constexpr std::size_t kBatch = 2, kSeq = 8;

using testing::synthetic;
using testing::whole_params;

ExecConfig config_for(std::int32_t stages, const model::GptConfig& model = tiny()) {
  return testing::training_config<ExecConfig>(model, stages, kBatch, kSeq, 1e-2, 1e-3);
}

// tiny() with a mixture of experts in every block: 4 experts of width 12, top-2, a shared one,
// capacity 1.0 (some assignments dropped), the load-balancing loss at 0.1.
model::GptConfig tiny_moe() {
  model::GptConfig c = tiny();
  c.moe = {.experts = 4,
           .top_k = 2,
           .hidden = 12,
           .shared_expert = true,
           .capacity_factor = 1.0,
           .aux_loss_coef = 0.1};
  return c;
}

struct Reference {
  std::vector<double> step_losses;
  std::vector<double> step_aux_losses;  // mixture of experts: the blocks' load-balancing losses
  std::vector<float> params;
};

// One device, the whole model, accumulating M micro-batches per step: the definition the
// pipelines must reproduce. `halves`: each half of a step's micro-batches accumulated apart and
// the two sums added (first + second) before the step, what DualPipe's two copies compute.
Reference single_device(std::int32_t M, std::int32_t N, const model::GptConfig& model = tiny(),
                        bool halves = false) {
  const ExecConfig c = config_for(1, model);
  model::Stage stage({c.config, model::whole_model(c.config), kBatch, kSeq});
  Reference ref;
  ref.params.resize(stage.layout().size());
  model::init_gpt2(stage.layout(), ref.params, c.seed);
  std::vector<float> grads(ref.params.size(), 0.0f), second(halves ? grads.size() : 0, 0.0f);
  model::AdamW adamw(stage.layout(), c.adamw);
  model::LrSchedule lr = c.lr;
  lr.total_steps = static_cast<std::size_t>(N);
  model::ActivationSlot slot = stage.make_slot();
  std::vector<std::int32_t> inputs(kBatch * kSeq), targets(kBatch * kSeq);
  for (std::int32_t step = 0; step < N; ++step) {
    double sum = 0.0, aux = 0.0;
    for (std::int32_t i = 0; i < M; ++i) {
      synthetic(static_cast<std::uint64_t>(step * M + i), inputs, targets);
      sum += stage.forward_loss(ref.params, model::StageInput::tokens(inputs), targets,
                                1.0f / static_cast<float>(M), slot);
      aux += slot.aux_loss();
      stage.backward(ref.params, halves && 2 * i >= M ? second : grads, slot, {}, {});
    }
    for (std::size_t k = 0; k < second.size(); ++k) grads[k] += second[k];
    model::zero(second);
    ref.step_losses.push_back(sum / M);
    ref.step_aux_losses.push_back(aux / M);
    adamw.step(ref.params, grads, lr.at(static_cast<std::size_t>(step)));
    model::zero(grads);
  }
  return ref;
}

TEST(Executor, FlushedSchedulesEqualOneDeviceBitwise) {
  for (const char* kind : {"gpipe", "1f1b"})
    for (std::int32_t P : {1, 2, 4})
      for (std::int32_t M : {1, 2, P, 2 * P + 1}) {
        const Reference ref = single_device(M, 3);
        const Schedule s = generate_schedule(kind, P, M, 3);
        Executor ex(s, config_for(P));
        const ExecResult r = ex.run();
        // Bitwise: the same ops in the same order on the same data, with GEMMs whose chunking
        // depends on the shape only (model/blas.hpp).
        EXPECT_EQ(r.step_losses, ref.step_losses) << kind << " P=" << P << " M=" << M;
        EXPECT_EQ(whole_params(ex, P), ref.params) << kind << " P=" << P << " M=" << M;
      }
}

// The config of a two-copy schedule: the partition of one copy, held again by the second.
ExecConfig two_copies(std::int32_t P, const model::GptConfig& model = tiny()) {
  ExecConfig c = config_for(P, model);
  const std::vector<model::StageRange> one = c.ranges;
  c.ranges.insert(c.ranges.end(), one.begin(), one.end());
  return c;
}

// DualPipe: two copies of the model, each step's first half of micro-batches through copy 0 and
// its second half through copy 1, each stage's gradients summed with its twin's before the
// update. Bitwise one device that accumulates the two halves apart and adds them; both copies end
// with the same weights; threads and the sequential replay agree.
TEST(Executor, DualPipesTwoCopiesEqualOneDeviceSummingItsHalvesBitwise) {
  for (const bool moe : {false, true})
    for (std::int32_t P : {2, 4})
      for (std::int32_t M : {2 * P, 2 * P + 2}) {
        const model::GptConfig model = moe ? tiny_moe() : tiny();
        const std::string what =
            (moe ? "moe P=" : "P=") + std::to_string(P) + " M=" + std::to_string(M);
        const Reference ref = single_device(M, 3, model, true);
        const Schedule s = generate_schedule("dualpipe", P, M, 3);
        Executor ex(s, two_copies(P, model));
        const ExecResult r = ex.run();
        EXPECT_EQ(r.step_losses, ref.step_losses) << what;
        EXPECT_EQ(whole_params(ex, P), ref.params) << what;  // copy 0
        for (std::int32_t j = 0; j < P; ++j)
          EXPECT_EQ(ex.stage(P + j).params(), ex.stage(j).params()) << what << " stage " << j;
        ExecConfig sequential = two_copies(P, model);
        sequential.sequential = true;
        Executor one(s, sequential);
        EXPECT_EQ(one.run().step_losses, r.step_losses) << what;
        EXPECT_EQ(whole_params(one, s.stages), whole_params(ex, s.stages)) << what;
      }
  // Summing the halves apart is a different sum from one running sum: the test can tell them.
  EXPECT_NE(single_device(4, 3, tiny(), true).params, single_device(4, 3).params);
}

TEST(Executor, DualPipeNeedsItsCopiesToHoldTheSameLayers) {
  const Schedule s = generate_schedule("dualpipe", 2, 4, 1);
  ExecConfig c = config_for(4);  // four different stages of the four blocks
  try {
    Executor ex(s, c);
    ADD_FAILURE() << "copies of different layers accepted";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("stages 0 and 2 are the same layers"));
  }
  ExecConfig cuts = two_copies(2);
  cuts.cut_every = 1;
  cuts.on_cut = [](const CutImage&, std::size_t) {};
  EXPECT_THROW(Executor(s, cuts), InputError);
}

// A mixture of experts through every schedule that splits or pairs backwards: the executor's
// stages chained over threads give one device's losses and weights bit for bit (the load-balancing
// losses' gradients scaled by the same 1/M on every stage).
TEST(Executor, MixtureOfExpertsEqualsOneDeviceBitwise) {
  const std::int32_t P = 2, M = 4;
  const Reference ref = single_device(M, 3, tiny_moe());
  for (const char* kind : {"1f1b", "zb-h1", "interleaved", "dualpipev"}) {
    const Schedule s = generate_schedule(kind, P, M, 3);  // 2 or 4 stages of the 4 blocks
    Executor ex(s, config_for(s.stages, tiny_moe()));
    const ExecResult r = ex.run();
    EXPECT_EQ(r.step_losses, ref.step_losses) << kind;
    EXPECT_EQ(whole_params(ex, s.stages), ref.params) << kind;
    // The report's load-balancing loss: every stage's share of each step (summed in another
    // order than one device's, so to rounding).
    const std::vector<double> aux = r.step_aux_losses(s.microbatches);
    ASSERT_EQ(aux.size(), ref.step_aux_losses.size()) << kind;
    for (std::size_t k = 0; k < aux.size(); ++k)
      EXPECT_NEAR(aux[k], ref.step_aux_losses[k], 1e-6 * ref.step_aux_losses[k]) << kind;
    // Every block's experts were chosen K times by each token of every micro-batch.
    std::size_t blocks = 0;
    for (const std::vector<std::int64_t>& tokens : r.stage_expert_tokens)
      for (std::size_t b = 0; b < tokens.size() / 4; ++b, ++blocks) {
        std::int64_t sum = 0;
        for (std::size_t e = 0; e < 4; ++e) sum += tokens[b * 4 + e];
        EXPECT_EQ(sum, s.total_microbatches() * static_cast<std::int64_t>(kBatch * kSeq * 2));
      }
    EXPECT_EQ(blocks, 4u) << kind;
  }
  const Schedule flushed = generate_schedule("1f1b", P, M, 3);  // the executor keeps a reference
  Executor dense(flushed, config_for(P));
  EXPECT_TRUE(dense.run().step_aux_losses(M).empty());
}

TEST(Executor, AsyncVersionsEqualTheStaticAnalysis) {
  for (const char* kind : {"pipedream", "2bw", "paci"})
    for (std::int32_t M : {1, 2, 3, 4, 8}) {
      if (std::string(kind) == "2bw" && M < 4) continue;
      const Schedule s = generate_schedule(kind, 4, M, 3);
      const Analysis expected = analyze(s);
      Executor ex(s, config_for(4));
      const ExecResult r = ex.run();
      ASSERT_EQ(r.observed.versions.size(), expected.versions.size());
      for (std::size_t i = 0; i < expected.versions.size(); ++i) {
        const auto& got = r.observed.versions[i];
        const auto& want = expected.versions[i];
        ASSERT_EQ(got.v_f, want.v_f)
            << kind << " M=" << M << " stage " << want.stage << " mb " << want.microbatch;
        ASSERT_EQ(got.v_b, want.v_b) << kind << " M=" << M << " stage " << want.stage;
        ASSERT_EQ(got.update, want.update) << kind << " M=" << M;
        if (std::string(kind) == "pipedream") {
          EXPECT_EQ(got.v_f, got.v_b);  // the backward reads the stashed version
        }
      }
      for (std::int32_t st = 0; st < 4; ++st) {
        const auto& got = r.observed.stages[static_cast<std::size_t>(st)];
        const auto& want = expected.stages[static_cast<std::size_t>(st)];
        EXPECT_EQ(got.peak_activations, want.peak_activations) << kind << " M=" << M;
        EXPECT_EQ(got.peak_weight_versions, want.peak_weight_versions) << kind << " M=" << M;
        EXPECT_EQ(got.max_staleness, want.max_staleness) << kind << " M=" << M;
        if (std::string(kind) == "2bw") {
          EXPECT_LE(got.peak_weight_versions, 2);
        }
      }
    }
}

TEST(Executor, DeterministicAndThreadedEqualsSequential) {
  for (const char* kind : {"paci", "1f1b", "pipedream"}) {
    const Schedule s = generate_schedule(kind, 4, 3, 3);
    Executor a(s, config_for(4));
    const ExecResult ra = a.run();
    Executor b(s, config_for(4));
    const ExecResult rb = b.run();
    ExecConfig sequential = config_for(4);
    sequential.sequential = true;
    Executor c(s, sequential);
    const ExecResult rc = c.run();
    EXPECT_EQ(ra.microbatch_losses, rb.microbatch_losses) << kind;
    EXPECT_EQ(ra.microbatch_losses, rc.microbatch_losses) << kind;
    EXPECT_EQ(whole_params(a, 4), whole_params(b, 4)) << kind;
    EXPECT_EQ(whole_params(a, 4), whole_params(c, 4)) << kind;
  }
}

// With P=2, M=1, stage 0 runs 0F0 0F1 0B0 0U 0F2 0B1 ...: 0B1 comes after the update that 0B0's
// gradient made, so under PACI it reads version 1 while 0F1 read version 0. Stashing would make it
// read version 0 and change every later number.
TEST(Executor, PaciBackwardReadsTheUpdatedWeights) {
  Schedule s = generate_schedule("paci", 2, 1, 4);
  Executor current(s, config_for(2));
  const ExecResult rc = current.run();
  EXPECT_EQ(rc.observed.version(0, 1).v_f, 0);
  EXPECT_EQ(rc.observed.version(0, 1).v_b, 1);
  s.weight_policy = WeightPolicy::stash;
  Executor stash(s, config_for(2));
  const ExecResult rs = stash.run();
  EXPECT_EQ(rs.observed.version(0, 1).v_b, 0);
  // Micro-batch 1's loss comes from forwards only: equal. Later losses see different weights.
  EXPECT_EQ(rc.microbatch_losses[1], rs.microbatch_losses[1]);
  EXPECT_NE(rc.microbatch_losses[3], rs.microbatch_losses[3]);
  EXPECT_NE(whole_params(current, 2), whole_params(stash, 2));
}

// The asynchronous semantics written out the plainest way: every stage's actions in its device
// order, interleaved by a round-robin that runs whatever has its inputs; F reads the current
// weights, B reads the current weights (current policy) or the copy its own F saw (stash,
// double_buffer), U is the stage's AdamW step at its own step count. Independent of the
// executor's threads, transport, slot reuse and version bookkeeping; results must be bitwise the
// executor's.
struct Replay {
  std::vector<double> step_losses;
  std::vector<float> params;  // all stages, in stage order
};

Replay replay(const Schedule& s) {
  const ExecConfig c = config_for(s.stages);
  const auto P = static_cast<std::size_t>(s.stages);
  struct StageState {
    std::unique_ptr<model::Stage> stage;
    std::vector<float> params, grads;
    std::unique_ptr<model::AdamW> adamw;
    std::size_t steps = 0;
    std::map<std::int32_t, model::ActivationSlot> slots;
    std::map<std::int32_t, std::vector<float>> forward_weights;  // per mb: the weights F read
  };
  std::vector<StageState> st(P);
  model::LrSchedule lr = c.lr;
  lr.total_steps = static_cast<std::size_t>(s.steps);
  for (std::size_t i = 0; i < P; ++i) {
    st[i].stage =
        std::make_unique<model::Stage>(model::StageShape{c.config, c.ranges[i], kBatch, kSeq});
    st[i].params.resize(st[i].stage->layout().size());
    model::init_gpt2(st[i].stage->layout(), st[i].params, c.seed);
    st[i].grads.assign(st[i].params.size(), 0.0f);
    st[i].adamw = std::make_unique<model::AdamW>(st[i].stage->layout(), c.adamw);
  }
  std::map<std::pair<std::int32_t, std::int32_t>, std::vector<float>> outputs, input_grads;
  std::vector<float> losses(static_cast<std::size_t>(s.total_microbatches()));
  std::vector<std::int32_t> tokens(kBatch * kSeq), targets(kBatch * kSeq);
  std::vector<std::size_t> next(s.devices.size(), 0);
  const float scale = 1.0f / static_cast<float>(s.microbatches);
  for (bool progress = true; progress;) {
    progress = false;
    for (std::size_t d = 0; d < s.devices.size(); ++d) {
      if (next[d] == s.devices[d].size()) continue;
      const Action& a = s.devices[d][next[d]];
      StageState& x = st[static_cast<std::size_t>(a.stage)];
      const bool first = a.stage == 0, last = a.stage == s.stages - 1;
      const std::int32_t m = a.microbatch;
      if (a.kind == ActionKind::F && !first && !outputs.count({a.stage - 1, m})) continue;
      if (a.kind == ActionKind::B && !last && !input_grads.count({a.stage + 1, m})) continue;
      if (a.kind == ActionKind::F) {
        synthetic(static_cast<std::uint64_t>(m), tokens, targets);
        model::ActivationSlot& slot = x.slots.emplace(m, x.stage->make_slot()).first->second;
        x.forward_weights[m] = x.params;
        const model::StageInput in =
            first ? model::StageInput::tokens(tokens)
                  : model::StageInput::activations(outputs[{a.stage - 1, m}]);
        if (last) {
          losses[static_cast<std::size_t>(m)] =
              x.stage->forward_loss(x.params, in, targets, scale, slot);
        } else {
          const auto y = x.stage->forward(x.params, in, slot);
          outputs[{a.stage, m}].assign(y.begin(), y.end());
        }
      } else if (a.kind == ActionKind::B) {
        const std::vector<float>& w =
            s.weight_policy == WeightPolicy::current ? x.params : x.forward_weights[m];
        std::vector<float> dx(first ? 0 : kBatch * kSeq * c.config.d_model);
        x.stage->backward(w, x.grads, x.slots.at(m),
                          last ? std::span<const float>() : input_grads[{a.stage + 1, m}], dx);
        if (!first) input_grads[{a.stage, m}] = std::move(dx);
        x.slots.erase(m);
        x.forward_weights.erase(m);
      } else {
        x.adamw->step(x.params, x.grads, lr.at(x.steps++));
        model::zero(x.grads);
      }
      ++next[d];
      progress = true;
    }
  }
  Replay r;
  for (std::int32_t k = 0; k < s.steps; ++k) {
    double sum = 0.0;
    for (std::int32_t i = 0; i < s.microbatches; ++i)
      sum += losses[static_cast<std::size_t>(k * s.microbatches + i)];
    r.step_losses.push_back(sum / s.microbatches);
  }
  for (const auto& x : st) r.params.insert(r.params.end(), x.params.begin(), x.params.end());
  return r;
}

TEST(Executor, AsyncSchedulesEqualAPlainReplayOfTheirSemanticsBitwise) {
  for (const char* kind : {"paci", "pipedream", "2bw"})
    for (std::int32_t M : {1, 2, 4}) {
      if (std::string(kind) == "2bw" && M < 3) continue;
      const Schedule s = generate_schedule(kind, 3, M, 4);
      const Replay want = replay(s);
      Executor ex(s, config_for(3));
      const ExecResult got = ex.run();
      EXPECT_EQ(got.step_losses, want.step_losses) << kind << " M=" << M;
      EXPECT_EQ(whole_params(ex, 3), want.params) << kind << " M=" << M;
    }
}

TEST(Executor, AFailingWorkerStopsTheRunPromptly) {
  const Schedule s = generate_schedule("1f1b", 4, 4, 2);
  for (bool sequential : {false, true}) {
    ExecConfig c = config_for(4);
    c.sequential = sequential;
    c.fail_at = Action{ActionKind::B, 2, 3};
    Executor ex(s, c);
    const auto start = std::chrono::steady_clock::now();
    try {
      ex.run();
      ADD_FAILURE() << "the run did not fail";
    } catch (const std::runtime_error& e) {
      EXPECT_THAT(e.what(), ::testing::HasSubstr("stage 2, action 2B3"));
      EXPECT_THAT(e.what(), ::testing::HasSubstr("injected failure"));
    }
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  }
}

TEST(Executor, MeasuredTimelineIsComplete) {
  const Schedule s = generate_schedule("paci", 3, 2, 2);
  Executor ex(s, config_for(3));
  const ExecResult r = ex.run();
  EXPECT_EQ(r.timeline.compute.size(), s.num_actions());
  EXPECT_EQ(r.timeline.messages.size(), 2u * 2u * 4u);  // 2 links each way, 4 micro-batches
  for (const auto& m : r.timeline.messages) {
    EXPECT_LE(m.send_start_s, m.send_end_s);
    EXPECT_LE(m.recv_start_s, m.recv_end_s);
    EXPECT_EQ(m.bytes, static_cast<std::int64_t>(kBatch * kSeq * 16 * sizeof(float)));
  }
  for (std::size_t d = 0; d < r.times.size(); ++d)
    for (std::size_t i = 1; i < r.times[d].size(); ++i)
      EXPECT_LE(r.times[d][i - 1].end_s, r.times[d][i].start_s);
  const RunSummary summary = ex.summary(r);
  EXPECT_GT(summary.timing.makespan_s, 0.0);
  EXPECT_GT(r.device_peak_memory_bytes[0], ex.stage(0).static_bytes());
}

// One process per device: each device's part of a run, encoded and merged back (in any order),
// is the run: times, timeline, losses, observed versions and peaks, and the summary made of them.
TEST(RankResults, EveryDevicesPartMergesBackIntoTheWholeRun) {
  const Schedule s = generate_schedule("paci", 3, 2, 2);
  Executor ex(s, config_for(3));
  const ExecResult r = ex.run();
  std::vector<std::string> parts;
  for (std::int32_t d = s.num_devices() - 1; d >= 0; --d)
    parts.push_back(encode_rank_result(s, r, d));
  const ExecResult m = merge_rank_results(s, parts);
  EXPECT_EQ(m.step_losses, r.step_losses);
  EXPECT_EQ(m.microbatch_losses, r.microbatch_losses);
  EXPECT_EQ(m.wall_s, r.wall_s);
  EXPECT_EQ(m.device_peak_memory_bytes, r.device_peak_memory_bytes);
  ASSERT_EQ(m.times.size(), r.times.size());
  for (std::size_t d = 0; d < r.times.size(); ++d)
    for (std::size_t i = 0; i < r.times[d].size(); ++i) {
      EXPECT_EQ(m.times[d][i].start_s, r.times[d][i].start_s);
      EXPECT_EQ(m.times[d][i].end_s, r.times[d][i].end_s);
    }
  const auto by_device = [](auto v) {
    std::stable_sort(v.begin(), v.end(),
                     [](const auto& a, const auto& b) { return a.device < b.device; });
    return v;
  };
  const auto mc = by_device(m.timeline.compute), rc = by_device(r.timeline.compute);
  ASSERT_EQ(mc.size(), rc.size());
  for (std::size_t i = 0; i < rc.size(); ++i) {
    EXPECT_EQ(mc[i].action, rc[i].action);
    EXPECT_EQ(mc[i].start_s, rc[i].start_s);
    EXPECT_EQ(mc[i].version, rc[i].version);
  }
  ASSERT_EQ(m.timeline.messages.size(), r.timeline.messages.size());
  const auto mm = by_device(m.timeline.memory), rm = by_device(r.timeline.memory);
  ASSERT_EQ(mm.size(), rm.size());
  for (std::size_t i = 0; i < rm.size(); ++i) EXPECT_EQ(mm[i].bytes, rm[i].bytes);
  ASSERT_EQ(m.observed.stages.size(), r.observed.stages.size());
  for (std::size_t i = 0; i < r.observed.stages.size(); ++i) {
    EXPECT_EQ(m.observed.stages[i].peak_activations, r.observed.stages[i].peak_activations);
    EXPECT_EQ(m.observed.stages[i].max_staleness, r.observed.stages[i].max_staleness);
    EXPECT_EQ(m.observed.stages[i].mean_update_delay, r.observed.stages[i].mean_update_delay);
  }
  ASSERT_EQ(m.observed.versions.size(), r.observed.versions.size());
  for (std::size_t i = 0; i < r.observed.versions.size(); ++i) {
    EXPECT_EQ(m.observed.versions[i].v_b, r.observed.versions[i].v_b);
    EXPECT_EQ(m.observed.versions[i].update, r.observed.versions[i].update);
  }
  EXPECT_EQ(ex.summary(m).timing.makespan_s, ex.summary(r).timing.makespan_s);

  const auto refused = [&](std::vector<std::string> bad, const std::string& why) {
    try {
      merge_rank_results(s, bad);
      ADD_FAILURE() << "accepted: " << why;
    } catch (const std::runtime_error& e) {
      EXPECT_THAT(e.what(), ::testing::HasSubstr(why));
    }
  };
  refused({parts[0], parts[0], parts[1]}, "two rank results for device 2");
  refused({parts[0], parts[1]}, "no rank result for device 0");
  refused({parts[0], parts[1], "not msgpack"}, "does not decode");
}

TEST(RankResults, StageStatesRoundTripAndRefuseTruncation) {
  const model::StageState a{{0, 2}, 5, {1.0f, 2.0f, 3.0f}, {0.1f, 0.2f, 0.3f}, {4.0f, 5.0f, 6.0f}};
  const model::StageState b{{2, 1}, 5, {-1.0f}, {0.5f}, {0.25f}};
  const std::vector<model::StageStateView> views{a.view(), b.view()};
  const std::string bytes = encode_stage_states(views);
  std::vector<model::StageState> back;
  decode_stage_states(bytes, back);
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[0].range, a.range);
  EXPECT_EQ(back[0].optimizer_steps, 5u);
  EXPECT_EQ(back[0].weights, a.weights);
  EXPECT_EQ(back[0].second_moment, a.second_moment);
  EXPECT_EQ(back[1].range, b.range);
  EXPECT_EQ(back[1].first_moment, b.first_moment);
  std::vector<model::StageState> ignored;
  EXPECT_THROW(decode_stage_states(std::string_view(bytes).substr(0, bytes.size() - 1), ignored),
               std::runtime_error);
  EXPECT_THROW(decode_stage_states(bytes + "x", ignored), std::runtime_error);
  EXPECT_THROW(decode_stage_states("garbage", ignored), std::runtime_error);
}

TEST(Partition, BalancedAndExplicit) {
  const model::GptConfig c = tiny();
  const auto ranges = balanced_partition(c, 4, kBatch, kSeq);
  ASSERT_EQ(ranges.size(), 4u);
  std::size_t next = 0;
  for (const auto& r : ranges) {
    EXPECT_EQ(r.first_layer, next);
    EXPECT_GE(r.num_layers, 1u);
    next = r.end_layer();
  }
  EXPECT_EQ(next, c.layers);
  EXPECT_THROW(balanced_partition(c, 5, kBatch, kSeq), InputError);
  EXPECT_EQ(explicit_partition(c, 2, "3,1")[1].first_layer, 3u);
  EXPECT_THROW(explicit_partition(c, 2, "3,2"), InputError);
  EXPECT_THROW(explicit_partition(c, 3, "3,1"), InputError);
  EXPECT_THROW(explicit_partition(c, 2, "4,0"), InputError);
  EXPECT_THROW(explicit_partition(c, 2, "x,1"), InputError);
}

}  // namespace
}  // namespace paci::exec
