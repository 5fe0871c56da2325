// The lowered program: for every generator's schedules up to 16 stages, each device's program is
// its list with, around each action, exactly the receives its dependency rules name and the sends
// its consumers need (the messages the executors sent when each derived them on its own); every
// message is sent once and received once; a cut plan and the link orders read from it.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "schedules/consumers.hpp"
#include "schedules/generators.hpp"
#include "schedules/index.hpp"
#include "schedules/lower.hpp"

namespace paci {
namespace {

using MessageId = std::tuple<int, std::int32_t, std::int32_t, std::int32_t, std::int32_t>;
MessageId id_of(const StageMessage& m) {
  return {static_cast<int>(m.kind), m.producer.stage, m.producer.microbatch,
          static_cast<int>(m.consumer.kind), m.consumer.stage};
}

// The messages of action i on device d as an executor derived them before lowering: receives from
// DependencyRules, sends from ConsumerIndex, local dependencies left out.
void expect_block_matches(const Schedule& s, const ActionIndex& index, const DependencyRules& rules,
                          const ConsumerIndex& consumers, const DeviceProgram& program,
                          std::int32_t d, std::size_t i, const std::string& what) {
  const Action& a = s.devices[static_cast<std::size_t>(d)][i];
  const auto& block = program.blocks[i];
  ASSERT_EQ(program.ops[block.compute].kind, OpKind::compute) << what;
  EXPECT_EQ(program.ops[block.compute].action, a) << what;
  DependencyRules::List deps;
  const int n = rules.depends_on(a, deps, {d, static_cast<std::int64_t>(i)});
  std::vector<Dependency> expected_in;
  for (int j = 0; j < n; ++j)
    if (deps[static_cast<std::size_t>(j)].kind != DependencyKind::local)
      expected_in.push_back(deps[static_cast<std::size_t>(j)]);
  const auto receives = program.receives(i);
  ASSERT_EQ(receives.size(), expected_in.size()) << what << " at " << to_string(a);
  for (std::size_t k = 0; k < receives.size(); ++k) {
    const StageMessage& m = receives[k].message;
    EXPECT_EQ(receives[k].kind, OpKind::receive) << what;
    EXPECT_EQ(m.kind, expected_in[k].kind) << what;
    EXPECT_EQ(m.producer, expected_in[k].action) << what;
    EXPECT_EQ(m.consumer, a) << what;
    EXPECT_EQ(m.src, s.placement[static_cast<std::size_t>(m.producer.stage)]) << what;
    EXPECT_EQ(m.dst, d) << what;
    EXPECT_EQ(m.dst_index, static_cast<std::int64_t>(i)) << what;
    EXPECT_EQ(s.devices[static_cast<std::size_t>(m.src)][static_cast<std::size_t>(m.src_index)],
              m.producer)
        << what;
  }
  std::vector<Consumer> expected_out;
  for (const Consumer& c : consumers.of(index.vertex(ActionPos{d, static_cast<std::int64_t>(i)})))
    if (c.kind != DependencyKind::local) expected_out.push_back(c);
  const auto sends = program.sends(i);
  ASSERT_EQ(sends.size(), expected_out.size()) << what << " at " << to_string(a);
  for (std::size_t k = 0; k < sends.size(); ++k) {
    const StageMessage& m = sends[k].message;
    const ActionPos at = index.position(expected_out[k].vertex);
    EXPECT_EQ(sends[k].kind, OpKind::send) << what;
    EXPECT_EQ(m.kind, expected_out[k].kind) << what;
    EXPECT_EQ(m.producer, a) << what;
    EXPECT_EQ(m.src, d) << what;
    EXPECT_EQ(m.src_index, static_cast<std::int64_t>(i)) << what;
    EXPECT_EQ(m.dst, at.device) << what;
    EXPECT_EQ(m.dst_index, at.index) << what;
    EXPECT_EQ(m.consumer,
              s.devices[static_cast<std::size_t>(at.device)][static_cast<std::size_t>(at.index)])
        << what;
  }
}

TEST(Lower, EveryGeneratorUpToSixteenStagesGivesTheMessagesTheExecutorsSent) {
  int checked = 0;
  for (const std::string& kind : generator_kinds())
    for (std::int32_t P : {1, 2, 3, 4, 8, 16})
      for (std::int32_t M : {1, 4, 16, 32}) {
        if (kind == "2bw" && M < P) continue;
        if (kind == "interleaved" && M % P != 0) continue;
        if (kind == "dualpipev" && M < 2 * P) continue;
        if (kind == "dualpipe" && (P % 2 != 0 || M < 2 * P)) continue;
        const Schedule s = generate_schedule(kind, P, M, 2);
        const std::string what = kind + " P=" + std::to_string(P) + " M=" + std::to_string(M);
        const LoweredProgram program = lower(s);
        ASSERT_EQ(program.devices.size(), s.devices.size()) << what;
        const ActionIndex index(s);
        const DependencyRules rules(s);
        const ConsumerIndex consumers(s, index, rules);
        std::map<MessageId, int> balance;  // +1 per send, -1 per receive
        std::size_t messages = 0;
        for (std::int32_t d = 0; d < s.num_devices(); ++d) {
          const DeviceProgram& dp = program.devices[static_cast<std::size_t>(d)];
          const auto& list = s.devices[static_cast<std::size_t>(d)];
          ASSERT_EQ(dp.blocks.size(), list.size()) << what;
          // The blocks tile the ops in list order.
          std::uint32_t next = 0;
          for (const auto& block : dp.blocks) {
            EXPECT_EQ(block.first, next) << what;
            EXPECT_LE(block.first, block.compute) << what;
            EXPECT_LT(block.compute, block.end) << what;
            next = block.end;
          }
          EXPECT_EQ(next, dp.ops.size()) << what;
          for (std::size_t i = 0; i < list.size(); ++i)
            expect_block_matches(s, index, rules, consumers, dp, d, i, what);
          for (const Op& op : dp.ops) {
            if (op.kind == OpKind::compute) continue;
            balance[id_of(op.message)] += op.kind == OpKind::send ? 1 : -1;
            messages += op.kind == OpKind::send ? 1 : 0;
          }
        }
        for (const auto& [message, count] : balance) EXPECT_EQ(count, 0) << what;
        // Between adjacent stages, each micro-batch's activation and its gradient: 2 (P - 1)
        // messages per micro-batch (interleaved: P·v stages). DualPipe: 2 (P - 1) per
        // micro-batch in its copy, and each stage's gradients to its twin once a step.
        const auto per_copy = static_cast<std::size_t>(s.stages_per_copy());
        const std::size_t twins = s.copies == 2 ? static_cast<std::size_t>(s.stages * s.steps) : 0;
        EXPECT_EQ(messages,
                  2 * (per_copy - 1) * static_cast<std::size_t>(s.total_microbatches()) + twins)
            << what;
        ++checked;
      }
  EXPECT_GT(checked, 150);
}

// GPipe on two devices: device 0's four forwards never wait for device 1, so all four activations
// can be in flight to it at once; device 1's backwards all follow its last forward, so all four
// gradients can be in flight to device 0 at once: 4 + 4.
TEST(MessageBound, GPipeCanHaveEveryMicroBatchInFlightToEachDevice) {
  EXPECT_EQ(message_bound(lower(generate_schedule("gpipe", 2, 4, 1))), 8);
}

// One micro-batch through three devices: each device has at most one message in flight to it
// (its activation arrives before the gradient can exist), whatever the timing.
TEST(MessageBound, OneMicroBatchHasOneMessageInFlightPerDevice) {
  EXPECT_EQ(message_bound(lower(generate_schedule("gpipe", 3, 1, 1))), 3);
}

// 1F1B at P = 8, M = 8: the GPU pipeline preallocates 43 buffers where the static analysis'
// bound (twice the peak activations of every stage but the last) asked for 70 (docs/cuda.md).
TEST(MessageBound, OneFOneBAtEightStagesNeedsFortyThreeBuffers) {
  EXPECT_EQ(message_bound(lower(generate_schedule("1f1b", 8, 8, 3))), 43);
}

// Whatever the timing, no interleaving of the devices has more messages in flight than the
// bound: here the one where each device in turn runs as far as it can (a sequential replay),
// which leaves many behind. The executor's own runs are checked against it in tests/exec.
TEST(MessageBound, NeverBelowWhatASequentialReplayCanReach) {
  for (const std::string& kind : generator_kinds())
    for (std::int32_t P : {2, 4, 8})
      for (std::int32_t M : {1, 4, 16}) {
        if (kind == "2bw" && M < P) continue;
        if (kind == "interleaved" && M % P != 0) continue;
        if (kind == "dualpipev" && M < 2 * P) continue;
        if (kind == "dualpipe" && M < 2 * P) continue;
        const Schedule s = generate_schedule(kind, P, M, 2);
        const LoweredProgram program = lower(s);
        // Each device, in turn, runs as far as it can before the next: the messages it leaves
        // behind are in flight together.
        std::set<MessageId> in_flight;
        std::int64_t most = 0;
        std::vector<std::size_t> pc(program.devices.size(), 0);
        for (bool progress = true; progress;) {
          progress = false;
          for (std::size_t d = 0; d < program.devices.size(); ++d) {
            const DeviceProgram& dp = program.devices[d];
            for (; pc[d] < dp.ops.size(); ++pc[d], progress = true) {
              const Op& op = dp.ops[pc[d]];
              if (op.kind == OpKind::receive && !in_flight.contains(id_of(op.message))) break;
              if (op.kind == OpKind::receive) in_flight.erase(id_of(op.message));
              if (op.kind == OpKind::send) in_flight.insert(id_of(op.message));
              most = std::max<std::int64_t>(most, static_cast<std::int64_t>(in_flight.size()));
            }
          }
        }
        EXPECT_GE(message_bound(program), most) << kind << " P=" << P << " M=" << M;
      }
}

TEST(MessageBound, RefusesAReceiveThatIsNeverSent) {
  LoweredProgram program;
  DeviceProgram& dp = program.devices.emplace_back();
  StageMessage m;
  m.producer = {ActionKind::F, 0, 0};
  m.consumer = {ActionKind::F, 1, 0};
  dp.ops.push_back({OpKind::receive, {}, m});
  dp.ops.push_back({OpKind::compute, m.consumer, {}});
  dp.blocks.push_back({0, 1, 2});
  EXPECT_THROW(message_bound(program), std::logic_error);
}

}  // namespace
}  // namespace paci
