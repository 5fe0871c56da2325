// EventClock (exec/event_clock.hpp) on a simulated GPU clock: events complete when simulated time
// passes their timestamp, and elapsed times come back rounded to float milliseconds, as
// cudaEventElapsedTime gives them. The GPU pipeline's timestamps use the same class on CUDA events.
#include "exec/event_clock.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <iostream>
#include <limits>
#include <stdexcept>
#include <vector>

namespace paci::exec {
namespace {

// The simulated device: per event the time (s) its last record reaches, and the time now.
struct SimDevice {
  std::vector<double> recorded;
  double now = 0.0;
  std::size_t queries = 0;
};

struct SimEvents {
  using Handle = std::size_t;
  SimDevice* device = nullptr;

  Handle create() {
    device->recorded.push_back(std::numeric_limits<double>::quiet_NaN());
    return device->recorded.size() - 1;
  }
  bool query(Handle h) {
    ++device->queries;
    const double t = device->recorded[h];
    return std::isnan(t) || t <= device->now;  // never recorded reads as completed, as on CUDA
  }
  double elapsed_ms(Handle from, Handle to) {
    return static_cast<float>((device->recorded[to] - device->recorded[from]) * 1e3);
  }
};

// Stamp i is recorded at i·dt plus a sub-microsecond-scale wobble the timer must keep.
double when(std::size_t i, double dt) {
  return static_cast<double>(i) * dt + 3e-7 * static_cast<double>(i % 7);
}

TEST(EventClock, KeepsMicrosecondsOverHoursWithABoundedPool) {
  SimDevice device;
  EventClock<SimEvents> clock(SimEvents{&device});
  // 3 hours of stamps about 20 ms apart; the GPU runs 400 stamps behind the host; a resolve every
  // 50 stamps (the pipeline resolves at every reported step).
  const double dt = 0.0200173;
  const std::size_t n = 540000, lag = 400;
  std::vector<int> ids;
  for (std::size_t i = 0; i < n; ++i) {
    const int id = clock.stamp();
    device.recorded[clock.handle(id)] = when(i, dt);
    ids.push_back(id);
    if (i >= lag) device.now = when(i - lag, dt);
    if (i % 50 == 0) clock.resolve();
  }
  device.now = when(n, dt);
  clock.resolve();
  EXPECT_EQ(clock.unresolved(), 0u);
  EXPECT_EQ(clock.stamps(), n);
  EXPECT_LT(clock.events(), 3 * lag) << "events are reused";
  // Durations (here the gap between consecutive stamps) keep microseconds after 3 hours.
  double worst_gap = 0.0, worst_drift = 0.0;
  for (std::size_t i = 1; i < n; ++i) {
    const double gap = clock.seconds(ids[i]) - clock.seconds(ids[i - 1]);
    worst_gap = std::max(worst_gap, std::abs(gap - (when(i, dt) - when(i - 1, dt))));
    worst_drift = std::max(worst_drift, std::abs(clock.seconds(ids[i]) - when(i, dt)));
  }
  EXPECT_LT(worst_gap, 2e-6);  // two roundings of a ≈9 s span (the lag): ulp ≈ 1 µs
  // The absolute times drift by one float rounding per anchor hop: no more than twice what a
  // single origin's rounding is at the end (T·2⁻²⁴).
  const double T = when(n, dt);
  EXPECT_LT(worst_drift, 2.0 * T * std::ldexp(1.0, -24));
  // From one origin, the same gaps are only good to about a millisecond after 3 hours: the
  // difference of two float counts of milliseconds near 10⁷.
  const auto from_origin = [&](std::size_t i) {
    return static_cast<double>(static_cast<float>(when(i, dt) * 1e3)) * 1e-3;
  };
  double origin_gap = 0.0;
  for (std::size_t i = n - 1000; i < n; ++i)
    origin_gap = std::max(origin_gap, std::abs(from_origin(i) - from_origin(i - 1) -
                                               (when(i, dt) - when(i - 1, dt))));
  EXPECT_GT(origin_gap, 1e-4);
  std::cout << "EventClock over " << T << " s: gaps off by at most " << worst_gap * 1e6
            << " us (one origin: " << origin_gap * 1e6 << " us), drift " << worst_drift * 1e6
            << " us, " << clock.events() << " events for " << n << " stamps\n";
}

TEST(EventClock, ResolvingWhenDueKeepsThePoolAndTheQueriesBounded) {
  SimDevice device;
  EventClock<SimEvents> clock(SimEvents{&device});
  std::size_t resolves = 0;
  for (std::size_t i = 0; i < 20000; ++i) {
    resolves += clock.resolve_if_due() ? 1 : 0;
    device.recorded[clock.handle(clock.stamp())] = when(i, 1e-3);
    device.now = when(i, 1e-3);  // the GPU keeps up
  }
  EXPECT_LT(clock.events(), 200u);
  EXPECT_LT(device.queries, 3u * 20000u) << "a bounded number of queries per stamp";
  EXPECT_GT(resolves, 100u);
  clock.resolve();
  EXPECT_NEAR(clock.seconds(19999), when(19999, 1e-3), 1e-6);
}

TEST(EventClock, ACompletedStampNeedsNoWaitAndAPendingOneHasNoTime) {
  SimDevice device;
  EventClock<SimEvents> clock(SimEvents{&device});
  const int origin = clock.stamp();
  device.recorded[clock.handle(origin)] = 1.0;
  const int a = clock.stamp(), b = clock.stamp();
  device.recorded[clock.handle(a)] = 1.5;
  device.recorded[clock.handle(b)] = 2.5;
  device.now = 2.0;
  clock.resolve();
  EXPECT_FALSE(clock.pending(origin).has_value());
  EXPECT_FALSE(clock.pending(a).has_value());
  EXPECT_TRUE(clock.pending(b).has_value());
  EXPECT_DOUBLE_EQ(clock.seconds(origin), 0.0);
  EXPECT_NEAR(clock.seconds(a), 0.5, 1e-7);
  EXPECT_THROW((void)clock.seconds(b), std::logic_error);
  EXPECT_THROW((void)clock.handle(a), std::logic_error);
  EXPECT_THROW((void)clock.pending(7), std::logic_error);
  // The origin's event is free again (a, the latest completed, is the anchor now): c reuses it.
  const int c = clock.stamp();
  EXPECT_EQ(clock.events(), 3u);
  device.recorded[clock.handle(c)] = 2.75;
  device.now = 3.0;
  clock.resolve();
  EXPECT_NEAR(clock.seconds(b), 1.5, 1e-7);
  EXPECT_NEAR(clock.seconds(c), 1.75, 1e-7);
  EXPECT_NEAR(clock.seconds(a), 0.5, 1e-7) << "a resolved time stays";
}

TEST(EventClock, AnOriginNotYetReachedTimesNothing) {
  SimDevice device;
  EventClock<SimEvents> clock(SimEvents{&device});
  const int origin = clock.stamp();
  device.recorded[clock.handle(origin)] = 5.0;
  const int a = clock.stamp();
  device.recorded[clock.handle(a)] = 6.0;
  device.now = 4.0;
  clock.resolve();
  EXPECT_EQ(clock.unresolved(), 2u);
  EXPECT_TRUE(clock.pending(origin).has_value());
  device.now = 7.0;
  clock.resolve();
  EXPECT_NEAR(clock.seconds(a), 1.0, 1e-7);
}

}  // namespace
}  // namespace paci::exec
