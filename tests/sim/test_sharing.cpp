// Host sharing in the simulator (CostModel::hosts): a hand-computed overlap, a uniform slowdown
// that scales every time exactly, the extrapolation past the measured counts, the JSON round trip
// and the checks of bad hosts.
#include <gtest/gtest.h>

#include "schedules/generators.hpp"
#include "sim/cost_model.hpp"
#include "sim/engine.hpp"
#include "traces/metrics.hpp"

namespace paci {
namespace {

CostModel uniform(std::int32_t P, double tf, double tb, double tu) {
  UniformCosts u;
  u.tf = tf;
  u.tb = tb;
  u.tu = tu;
  return uniform_cost_model(P, u);
}

HostSharing host(std::vector<std::int32_t> devices, std::vector<double> slowdown) {
  HostSharing h;
  h.devices = std::move(devices);
  h.slowdown_by_count = std::move(slowdown);
  return h;
}

HostSharing all_devices(std::int32_t devices, std::vector<double> slowdown) {
  std::vector<std::int32_t> list;
  for (std::int32_t d = 0; d < devices; ++d) list.push_back(d);
  return host(std::move(list), std::move(slowdown));
}

// GPipe, P=2, M=1, N=1, tf=1, tb=2, tu=1, both devices on a host where two computing at once run
// at half speed. Alone: 0F0 [0,1], 1F0 [1,2], 1B0 [2,4]; then 1U and 0B0 both start at 4 at half
// speed: 1U's one unit of work ends at 6, when 0B0 has done one of its two; its second unit runs
// alone, ending at 7; 0U [7,8]. Independent devices would end at 7.
TEST(HostSharing, HandComputedOverlap) {
  const Schedule s = generate_schedule("gpipe", 2, 1, 1);
  CostModel costs = uniform(2, 1.0, 2.0, 1.0);
  costs.hosts = {all_devices(2, {1.0, 2.0})};
  const SimResult r = simulate(s, costs, {false});
  auto expect = [&](int d, int i, const char* action, double start, double end) {
    ASSERT_EQ(to_string(s.devices[d][i]), action);
    EXPECT_DOUBLE_EQ(r.times[d][i].start_s, start) << action;
    EXPECT_DOUBLE_EQ(r.times[d][i].end_s, end) << action;
  };
  expect(0, 0, "0F0", 0, 1);
  expect(1, 0, "1F0", 1, 2);
  expect(1, 1, "1B0", 2, 4);
  expect(1, 2, "1U", 4, 6);
  expect(0, 1, "0B0", 4, 7);
  expect(0, 2, "0U", 7, 8);
  EXPECT_DOUBLE_EQ(timing_metrics(s, r.times).makespan_s, 8.0);
  costs.hosts.clear();
  EXPECT_DOUBLE_EQ(timing_metrics(s, simulate(s, costs, {false}).times).makespan_s, 7.0);
}

// A slowdown that does not depend on the count stretches every action by the same factor: every
// time of the run scales exactly (free links). A slowdown of 1 is the independent model.
TEST(HostSharing, UniformSlowdownScalesEveryTime) {
  for (const char* kind : {"gpipe", "1f1b", "pipedream", "2bw", "paci"})
    for (std::int32_t P : {2, 4}) {
      SCOPED_TRACE(std::string(kind) + " P=" + std::to_string(P));
      const Schedule s = generate_schedule(kind, P, 4, 3);
      const CostModel base = uniform(P, 1.0, 2.0, 0.5);
      const SimResult independent = simulate(s, base, {false});
      CostModel one = base, three = base;
      one.hosts = {all_devices(P, std::vector<double>(static_cast<std::size_t>(P), 1.0))};
      three.hosts = {all_devices(P, std::vector<double>(static_cast<std::size_t>(P), 3.0))};
      const SimResult r1 = simulate(s, one, {false}), r3 = simulate(s, three, {false});
      for (std::size_t d = 0; d < s.devices.size(); ++d)
        for (std::size_t i = 0; i < s.devices[d].size(); ++i) {
          EXPECT_NEAR(r1.times[d][i].start_s, independent.times[d][i].start_s, 1e-9);
          EXPECT_NEAR(r3.times[d][i].start_s, 3 * independent.times[d][i].start_s, 1e-9);
          EXPECT_NEAR(r3.times[d][i].end_s, 3 * independent.times[d][i].end_s, 1e-9);
        }
    }
}

// Sharing can only slow a run down, and more so for a larger slowdown; the versions read do not
// change (they depend on each device's order alone).
TEST(HostSharing, SlowsARunDownMonotonicallyAndKeepsVersions) {
  const Schedule s = generate_schedule("paci", 4, 4, 4);
  const CostModel base = uniform(4, 1.0, 2.0, 0.1);
  double previous = timing_metrics(s, simulate(s, base, {false}).times).makespan_s;
  const auto versions = simulate(s, base, {false}).observed.versions;
  for (double x : {1.2, 1.5, 2.0}) {
    CostModel shared = base;
    shared.hosts = {all_devices(4, {1.0, x, 1.5 * x, 2 * x})};
    const SimResult r = simulate(s, shared, {false});
    const double makespan = timing_metrics(s, r.times).makespan_s;
    EXPECT_GT(makespan, previous) << x;
    previous = makespan;
    ASSERT_EQ(r.observed.versions.size(), versions.size());
    for (std::size_t i = 0; i < versions.size(); ++i) {
      EXPECT_EQ(r.observed.versions[i].v_f, versions[i].v_f);
      EXPECT_EQ(r.observed.versions[i].v_b, versions[i].v_b);
    }
  }
}

// A device's own list overrides the host's: with device 1 twice as slow whenever both compute,
// GPipe P=2 M=1 (tf=1, tb=2, tu=1.5): from 4, 1U runs at half speed while 0B0 runs at full speed
// (device 0's own factor 1): 0B0 ends at 6, when 1U has done 1 of its 1.5; 0U [6, 7.5] keeps both
// computing, so 1U's last 0.5 takes until 7.
TEST(HostSharing, ADevicesOwnSlowdownOverridesTheHosts) {
  const Schedule s = generate_schedule("gpipe", 2, 1, 1);
  CostModel costs = uniform(2, 1.0, 2.0, 1.5);
  costs.hosts = {all_devices(2, {1.0, 3.0})};
  costs.hosts[0].device_slowdown_by_count = {{1.0, 1.0}, {1.0, 2.0}};
  const SimResult r = simulate(s, costs, {false});
  ASSERT_EQ(to_string(s.devices[1][2]), "1U");
  EXPECT_DOUBLE_EQ(r.times[1][2].end_s, 7.0);
  ASSERT_EQ(to_string(s.devices[0][1]), "0B0");
  EXPECT_DOUBLE_EQ(r.times[0][1].end_s, 6.0);
  EXPECT_DOUBLE_EQ(r.times[0][2].end_s, 7.5);
  EXPECT_DOUBLE_EQ(costs.hosts[0].slowdown(1, 2), 2.0);
  EXPECT_DOUBLE_EQ(costs.hosts[0].slowdown(1, 3), 3.0);  // past its list: scaled by k / size
  EXPECT_DOUBLE_EQ(costs.hosts[0].slowdown(2), 3.0);     // the host's own
}

TEST(HostSharing, SlowdownPastTheMeasuredCountsSharesFurther) {
  const HostSharing h = all_devices(4, {1.0, 1.5});
  EXPECT_DOUBLE_EQ(h.slowdown(0), 1.0);
  EXPECT_DOUBLE_EQ(h.slowdown(1), 1.0);
  EXPECT_DOUBLE_EQ(h.slowdown(2), 1.5);
  EXPECT_DOUBLE_EQ(h.slowdown(3), 2.25);
  EXPECT_DOUBLE_EQ(h.slowdown(4), 3.0);
}

TEST(HostSharing, JsonRoundTripAndChecks) {
  CostModel m = uniform(3, 1.0, 2.0, 0.0);
  m.hosts = {all_devices(2, {1.0, 1.25}), host({2}, {1.0})};
  const std::string text = write_cost_model(m);
  EXPECT_EQ(parse_cost_model(text, "m.json"), m);
  EXPECT_EQ(write_cost_model(parse_cost_model(text, "m.json")), text);
  auto bad = [&](std::vector<HostSharing> hosts, const std::string& fragment) {
    CostModel b = m;
    b.hosts = std::move(hosts);
    try {
      parse_cost_model(write_cost_model(b), "b.json");
      ADD_FAILURE() << "accepted: " << fragment;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
      EXPECT_EQ(std::string(e.what()).rfind("b.json: ", 0), 0u) << e.what();
    }
  };
  bad({host({}, {1.0})}, "hosts[0] lists no devices");
  bad({host({0}, {})}, "hosts[0].slowdown_by_count is empty");
  bad({host({0}, {1.0, 0.0})}, "hosts[0].slowdown_by_count[1] must be a finite number > 0");
  bad({host({0, 0}, {1.0})}, "device 0 is in hosts[0] twice");
  bad({host({0}, {1.0}), host({1, 0}, {1.0})}, "also in hosts[0]");
  bad({host({-1}, {1.0})}, "negative device");
  HostSharing two_lists = host({0, 1}, {1.0});
  two_lists.device_slowdown_by_count = {{1.0}};
  bad({two_lists}, "hosts[0].device_slowdown_by_count has 1 lists for 2 devices");
  two_lists.device_slowdown_by_count = {{1.0}, {1.0, -2.0}};
  bad({two_lists}, "hosts[0].device_slowdown_by_count[1][1] must be a finite number > 0");
  two_lists.device_slowdown_by_count = {{1.0, 0.9}, {1.0, 0.8}};
  CostModel own = m;
  own.hosts = {two_lists};
  EXPECT_EQ(parse_cost_model(write_cost_model(own), "own.json"), own);
  // A host naming a device the schedule does not have.
  CostModel wide = m;
  wide.hosts = {all_devices(5, {1.0})};
  EXPECT_NO_THROW(check_cost_model(wide));  // a host may name devices of a larger schedule
  const Schedule s = generate_schedule("1f1b", 3, 2, 1);
  try {
    check_cost_model(wide, &s);
    ADD_FAILURE() << "a host past the schedule's devices was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("hosts[0] names device 3"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace paci
