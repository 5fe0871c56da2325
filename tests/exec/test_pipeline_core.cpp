// The pipeline core (exec/pipeline_core.hpp) on its own, with a stage runtime and a backend that
// only record what they are asked: the action switch hands each kind of action its inputs and
// reports the version it read; advance() calls a backend's hooks in the order both backends rely
// on (the GPU pipeline never runs here, so this is where its half of the contract is checked);
// a device's log becomes aligned times, compute slices and memory samples, a resumed run's too.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <string>
#include <vector>

#include "exec/pipeline_core.hpp"
#include "model/stage.hpp"
#include "schedules/generators.hpp"
#include "schedules/lower.hpp"

namespace paci::exec {
namespace {

// Records every call; F reads version 10 + mb, B reads 20 + mb, the current version is 7 (8
// after U).
struct FakeRuntime {
  using View = std::span<const float>;
  using MutableView = std::span<float>;
  using Input = model::StageInput;
  using Loss = float;

  bool first = false, last = false;
  std::int32_t current = 7;
  std::vector<float> out = std::vector<float>(4, 3.0f);
  std::vector<std::string> calls;

  bool is_first() const { return first; }
  bool is_last() const { return last; }
  std::int32_t version() const { return current; }
  std::int32_t v_f(std::int64_t mb) const { return 10 + static_cast<std::int32_t>(mb); }
  std::int32_t v_b(std::int64_t mb) const { return 20 + static_cast<std::int32_t>(mb); }
  void forward(std::int32_t mb, const Input& in, std::span<const std::int32_t> targets,
               Loss* loss) {
    calls.push_back(fmt::format("F{} {} targets={}", mb, in.is_tokens() ? "tokens" : "activations",
                                targets.empty() ? 0 : targets[0]));
    if (last) *loss = 1.5f;
  }
  void backward(std::int32_t mb, View d_output, MutableView d_input) {
    calls.push_back(fmt::format("B{} {} {}", mb, d_output.size(), d_input.size()));
  }
  void input_grad(std::int32_t mb, View d_output, MutableView d_input) {
    calls.push_back(fmt::format("I{} {} {}", mb, d_output.size(), d_input.size()));
  }
  void weight_grad(std::int32_t mb) { calls.push_back(fmt::format("W{}", mb)); }
  void update() {
    calls.push_back("U");
    ++current;
  }
  View output(std::int32_t) { return out; }
};

struct FakeBuffers : StageTokens {
  std::vector<float> grad = std::vector<float>(4, 0.0f);
  FakeBuffers() : StageTokens(2) {}
  std::span<float> d_input() { return grad; }
};

void data(std::uint64_t index, std::span<std::int32_t> tokens, std::span<std::int32_t> targets) {
  for (auto& t : tokens) t = static_cast<std::int32_t>(index);
  for (auto& t : targets) t = static_cast<std::int32_t>(100 + index);
}

TEST(PipelineCore, TheActionSwitchGivesEachKindItsInputsAndTheVersionItRead) {
  FakeBuffers b;
  float loss = 0.0f;
  const std::vector<float> received(4, 1.0f);
  FakeRuntime first;
  first.first = true;
  EXPECT_EQ(run_action(first, {ActionKind::F, 0, 3}, data, b, {}, b.d_input(), &loss), 13);
  EXPECT_EQ(b.tokens[0], 3);
  FakeRuntime middle;
  EXPECT_EQ(run_action(middle, {ActionKind::F, 1, 2}, data, b, received, b.d_input(), &loss), 12);
  FakeRuntime last;
  last.last = true;
  EXPECT_EQ(run_action(last, {ActionKind::F, 2, 5}, data, b, received, b.d_input(), &loss), 15);
  EXPECT_EQ(loss, 1.5f);
  // Backwards: no output gradient on the last stage, no input gradient out of the first.
  EXPECT_EQ(run_action(last, {ActionKind::B, 2, 5}, data, b, received, b.d_input(), &loss), 25);
  EXPECT_EQ(run_action(first, {ActionKind::B, 0, 3}, data, b, received, b.d_input(), &loss), 23);
  EXPECT_EQ(run_action(middle, {ActionKind::I, 1, 2}, data, b, received, b.d_input(), &loss), 7);
  EXPECT_EQ(run_action(middle, {ActionKind::W, 1, 2}, data, b, received, b.d_input(), &loss), 22);
  EXPECT_EQ(run_action(middle, {ActionKind::U, 1, 0}, data, b, received, b.d_input(), &loss), 8);
  EXPECT_EQ(first.calls, (std::vector<std::string>{"F3 tokens targets=103", "B3 4 0"}));
  EXPECT_EQ(middle.calls,
            (std::vector<std::string>{"F2 activations targets=103", "I2 4 4", "W2", "U"}));
  EXPECT_EQ(last.calls, (std::vector<std::string>{"F5 activations targets=105", "B5 0 4"}));
}

// A backend whose stamps count its calls and whose hooks write what they are given.
struct RecordingBackend {
  struct Taken {
    std::span<const float> view;
  };
  TrainingConfig cfg;
  std::vector<FakeRuntime> stages;
  std::vector<FakeBuffers> bufs;
  std::vector<float> losses = std::vector<float>(8, 0.0f), received = std::vector<float>(4, 1.0f);
  bool ready = true;
  int clock = 0;
  std::vector<std::string> log;

  const TrainingConfig& config() const { return cfg; }
  FakeRuntime& stage(std::int32_t s) { return stages[static_cast<std::size_t>(s)]; }
  FakeBuffers& buffers(std::int32_t s) { return bufs[static_cast<std::size_t>(s)]; }
  float* loss(std::int32_t mb) {
    log.push_back(fmt::format("loss {}", mb));
    return &losses.at(static_cast<std::size_t>(mb));
  }
  std::int64_t memory_bytes(std::int32_t) const { return 1000 + clock; }
  int stamp(const FakeRuntime&) {
    log.push_back(fmt::format("stamp {}", clock));
    return clock++;
  }
  int free_stamp(int end) {
    log.push_back(fmt::format("free after {}", end));
    return clock++;
  }
  bool inputs_ready(DeviceRun<int>&, std::span<const Op> receives, bool) {
    log.push_back(fmt::format("ready? {} receives", receives.size()));
    return ready;
  }
  Taken take(DeviceRun<int>&, std::span<const Op> receives, FakeRuntime&) {
    for (const Op& r : receives) log.push_back("take " + to_string(r.message.producer));
    return {received};
  }
  void consumed(DeviceRun<int>&, Taken&, const Action& a, int start) {
    log.push_back(fmt::format("consumed by {} from {}", to_string(a), start));
  }
  void finished(DeviceRun<int>&, const Action& a, FakeRuntime&, int end) {
    log.push_back(fmt::format("finished {} at {}", to_string(a), end));
  }
  void send(DeviceRun<int>&, const Op& op, std::span<const float> data, FakeRuntime&) {
    log.push_back(fmt::format("send to {} ({} values of {})", to_string(op.message.consumer),
                              data.size(), data.empty() ? 0.0f : data[0]));
  }
};

TEST(PipelineCore, AdvanceCallsTheHooksInOrderAndWaitsWithoutSideEffects) {
  const Schedule s = generate_schedule("gpipe", 2, 1, 1);  // device 1: 1F0, 1B0, 1U
  const LoweredProgram program = lower(s);
  RecordingBackend be;
  be.cfg.data = data;
  be.stages.resize(2);
  be.stages[0].first = true;
  be.stages[1].last = true;
  be.bufs.resize(2);
  DeviceRun<int> dev(s, program, 1);
  be.ready = false;
  EXPECT_FALSE(advance(be, dev, false));
  EXPECT_EQ(dev.next, 0u);
  EXPECT_EQ(be.log, (std::vector<std::string>{"ready? 1 receives"}));
  be.log.clear();
  be.ready = true;
  ASSERT_TRUE(advance(be, dev, false));  // 1F0: receives 0F0's activation
  ASSERT_TRUE(advance(be, dev, false));  // 1B0: sends its gradient to 0B0
  ASSERT_TRUE(advance(be, dev, false));  // 1U: no micro-batch, so no loss is asked for
  EXPECT_TRUE(dev.done());
  EXPECT_EQ(be.log, (std::vector<std::string>{"ready? 1 receives",
                                              "take 0F0",
                                              "stamp 0",
                                              "loss 0",
                                              "stamp 1",
                                              "consumed by 1F0 from 0",
                                              "finished 1F0 at 1",
                                              "free after 1",
                                              "ready? 0 receives",
                                              "stamp 3",
                                              "stamp 4",
                                              "consumed by 1B0 from 3",
                                              "finished 1B0 at 4",
                                              "send to 0B0 (4 values of 0)",
                                              "free after 4",
                                              "ready? 0 receives",
                                              "stamp 6",
                                              "stamp 7",
                                              "consumed by 1U from 6",
                                              "finished 1U at 7",
                                              "free after 7"}));
  EXPECT_EQ(be.losses[0], 1.5f);  // the last stage's loss where the backend said
  EXPECT_EQ(dev.next, 3u);

  ExecResult result;
  result.times.resize(2);
  result.device_peak_memory_bytes.assign(2, 0);
  dev.log.collect(result, 1, dev.list, true, [](int stamp) { return stamp * 0.5; });
  ASSERT_EQ(result.times[1].size(), 3u);
  EXPECT_EQ(result.times[1][1].start_s, 1.5);
  EXPECT_EQ(result.times[1][1].end_s, 2.0);
  EXPECT_EQ(result.times[1][1].free_s, 2.5);
  ASSERT_EQ(result.timeline.compute.size(), 3u);
  EXPECT_EQ(result.timeline.compute[0].version, 10);  // F0 read v_f(0)
  EXPECT_EQ(result.timeline.compute[1].version, 20);  // B0 read v_b(0)
  EXPECT_EQ(result.timeline.compute[2].version, 8);   // U created version 8
  // Memory: one sample per change, at the action's end; the peak.
  ASSERT_EQ(result.timeline.memory.size(), 3u);
  EXPECT_EQ(result.timeline.memory[0].bytes, 1002);
  EXPECT_EQ(result.timeline.memory[1].bytes, 1005);
  EXPECT_EQ(result.timeline.memory[2].bytes, 1008);
  EXPECT_EQ(result.device_peak_memory_bytes[1], 1008);
}

TEST(PipelineCore, AResumedDevicesLogKeepsItsListsPositions) {
  const Schedule s = generate_schedule("gpipe", 2, 1, 1);
  DeviceLog<double> log;
  log.skip(2);  // resumed before the device's third action, its U
  log.action(5.0, 6.0, 1);
  log.freed(6.5);
  log.memory(6.0, 10, false);  // without the timeline: only the peak
  ExecResult result;
  result.times.resize(2);
  result.device_peak_memory_bytes.assign(2, 0);
  log.collect(result, 1, s.devices[1], true, [](double t) { return t; });
  ASSERT_EQ(result.times[1].size(), 3u);
  EXPECT_EQ(result.times[1][0].end_s, 0.0);
  EXPECT_EQ(result.times[1][2].start_s, 5.0);
  EXPECT_EQ(result.times[1][2].free_s, 6.5);
  ASSERT_EQ(result.timeline.compute.size(), 1u);
  EXPECT_EQ(result.timeline.compute[0].action, s.devices[1][2]);
  EXPECT_TRUE(result.timeline.memory.empty());
  EXPECT_EQ(result.device_peak_memory_bytes[1], 10);
  EXPECT_EQ(log.end_at(2), 6.0);
}

TEST(PipelineCore, FailureTextNamesTheDeviceStageAndAction) {
  const Action a{ActionKind::B, 2, 1};
  EXPECT_EQ(at_action(1, a), "device 1, stage 2, action 2B1");
  EXPECT_STREQ(deadlock(3, a).what(), "deadlock: device 3 waits at 2B1");
  TrainingConfig c;
  EXPECT_NO_THROW(fail_if_injected(c, a));
  c.fail_at = a;
  EXPECT_NO_THROW(fail_if_injected(c, {ActionKind::F, 2, 1}));
  EXPECT_THROW(fail_if_injected(c, a), std::runtime_error);
}

TEST(PipelineCore, StepMeanAveragesOneStepsMicroBatches) {
  const std::vector<double> losses{1.0, 2.0, 3.0, 5.0};
  EXPECT_EQ(step_mean(std::span<const double>(losses), 2, 0), 1.5);
  EXPECT_EQ(step_mean(std::span<const double>(losses), 2, 1), 4.0);
}

}  // namespace
}  // namespace paci::exec
