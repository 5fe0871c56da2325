// The one-process-per-device plan: every cross-device message is on exactly one link, in an order
// both ends agree on, for every generator but ZB-V (whose order MpiLinks runs by keeping early
// messages); a valid schedule whose receiver takes a link's messages in another order is refused
// with the link and the message named where the order must hold (NCCL); launches with the wrong
// number of processes are refused; the fingerprint tells schedules apart.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "exec/fingerprint.hpp"
#include "exec/rank_plan.hpp"
#include "schedules/generators.hpp"
#include "schedules/lower.hpp"
#include "schedules/validate.hpp"

namespace paci::exec {
namespace {

using ::testing::HasSubstr;

TEST(RankPlan, EveryGeneratorSendsInTheOrderItsConsumersReceive) {
  bool zb_v_reordered = false, dualpipe_reordered = false;
  for (const std::string& kind : generator_kinds())
    for (std::int32_t P : {2, 4, 8})
      for (std::int32_t M : {1, 3, 8}) {
        if ((kind == "2bw" && M < P) || (kind == "dualpipev" && M < 2 * P)) continue;
        const std::int32_t N = 3;
        const std::string what = kind + " P=" + std::to_string(P) + " M=" + std::to_string(M);
        if (kind == "dualpipe") {
          // Two copies: a device pair's link carries activations, gradients and (twins) whole
          // gradient buffers, of several sizes and not always received in their sending order:
          // MpiLinks probes each for its size and keeps what arrives early.
          if (M % 2 != 0 || M < 2 * P) continue;
          const Schedule s = generate_schedule(kind, P, M, N);
          EXPECT_NO_THROW(check_launch(s, P, false)) << what;
          // Every stage's gradient buffer to its twin once a step.
          std::size_t twins = 0;
          for (const DeviceProgram& device : lower(s).devices)
            for (const Op& op : device.ops)
              twins += op.kind == OpKind::send && op.message.kind == DependencyKind::twin_gradients
                           ? 1
                           : 0;
          EXPECT_EQ(twins, static_cast<std::size_t>(2 * P * N)) << what;
          try {
            device_links(s);
          } catch (const InputError& e) {
            EXPECT_THAT(e.what(), HasSubstr("cannot run one process per device")) << what;
            dualpipe_reordered = true;
          }
          continue;
        }
        if (kind == "interleaved") {  // chunks wrap around: device P-1 sends to device 0 too
          if (M % P != 0) continue;
          const auto links = device_links(generate_schedule(kind, P, M, N));
          EXPECT_EQ(links.size(), static_cast<std::size_t>(P == 2 ? 2 : 2 * P)) << what;
          continue;
        }
        if (v_shaped(kind)) {
          // The V: each link carries one stage's activations and another's gradients each way
          // (the turn, stages P-1 and P, stays on its device), and ZB-V's order receives some
          // of them in another order than they were sent: NCCL's in-order links refuse it (the
          // message named), MpiLinks keeps what arrives early (check_launch without the order).
          const Schedule s = generate_schedule(kind, P, M, N);
          EXPECT_NO_THROW(check_launch(s, P, false)) << what;
          try {
            device_links(s);
          } catch (const InputError& e) {
            EXPECT_THAT(e.what(), HasSubstr("cannot run one process per device")) << what;
            zb_v_reordered = true;
          }
          continue;
        }
        const Schedule s = generate_schedule(kind, P, M, N);
        const auto links = device_links(s);
        ASSERT_EQ(links.size(), static_cast<std::size_t>(2 * (P - 1))) << what;
        for (const DeviceLink& link : links) {
          EXPECT_EQ(std::abs(link.src - link.dst), 1) << what;
          const bool forward = link.dst == link.src + 1;
          EXPECT_EQ(link.messages.size(), static_cast<std::size_t>(N * M)) << what;
          std::int32_t previous = -1;
          for (const LinkMessage& m : link.messages) {
            EXPECT_EQ(m.kind, forward ? DependencyKind::activation : DependencyKind::gradient)
                << what;
            EXPECT_EQ(m.producer.stage, link.src) << what;
            EXPECT_EQ(m.consumer.stage, link.dst) << what;
            EXPECT_EQ(m.producer.microbatch, m.consumer.microbatch) << what;
            // Each of these generators sends a link's micro-batches in increasing order.
            EXPECT_GT(m.producer.microbatch, previous) << what;
            previous = m.producer.microbatch;
          }
        }
        EXPECT_NO_THROW(check_launch(s, P)) << what;
      }
  EXPECT_TRUE(zb_v_reordered) << "no ZB-V receives a link's messages out of order";
  EXPECT_TRUE(dualpipe_reordered) << "no DualPipe receives a link's messages out of order";
}

TEST(RankPlan, RefusesAValidScheduleWhoseReceiverReordersALink) {
  Schedule s = generate_schedule("gpipe", 2, 2, 1);
  auto& list = s.devices[1];
  const auto f0 = std::find(list.begin(), list.end(), Action{ActionKind::F, 1, 0});
  const auto f1 = std::find(list.begin(), list.end(), Action{ActionKind::F, 1, 1});
  ASSERT_TRUE(f0 != list.end() && f1 != list.end());
  std::iter_swap(f0, f1);  // device 1 now receives micro-batch 1's activation first
  ASSERT_NO_THROW(validate(s));
  try {
    device_links(s);
    FAIL() << "a reordered link was accepted";
  } catch (const InputError& e) {
    const std::string text = e.what();
    EXPECT_NE(text.find("from device 0 to device 1"), std::string::npos) << text;
    EXPECT_NE(text.find("message 1 is sent as 0F0 -> 1F0 (activation) but received as 0F1 -> "
                        "1F1 (activation)"),
              std::string::npos)
        << text;
  }
  EXPECT_THROW(check_launch(s, 2), InputError);
}

TEST(RankPlan, ALaunchNeedsOneProcessPerDevice) {
  const Schedule s = generate_schedule("paci", 4, 4, 2);
  try {
    check_launch(s, 2);
    FAIL() << "2 processes for 4 devices were accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("2 processes but the schedule has 4 devices"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(check_launch(s, 5), InputError);
  EXPECT_NO_THROW(check_launch(s, 4));
}

TEST(RankPlan, FingerprintTellsSchedulesApart) {
  const Schedule a = generate_schedule("paci", 4, 4, 2);
  EXPECT_EQ(schedule_fingerprint(a), schedule_fingerprint(generate_schedule("paci", 4, 4, 2)));
  EXPECT_NE(schedule_fingerprint(a), schedule_fingerprint(generate_schedule("1f1b", 4, 4, 2)));
  EXPECT_NE(schedule_fingerprint(a), schedule_fingerprint(generate_schedule("paci", 4, 4, 3)));
  EXPECT_NE(schedule_fingerprint(a), schedule_fingerprint(generate_schedule("paci", 4, 5, 2)));
}

}  // namespace
}  // namespace paci::exec
