// The timing-free invariants of SCHEDULES.md, swept over P in 1..16, M in 1..24, N in 1..4 for
// every generator: validity, completeness, activations, weight versions, staleness, update delay.
#include <gtest/gtest.h>

#include <algorithm>

#include "schedules/analysis.hpp"
#include "schedules/generators.hpp"
#include "schedules/validate.hpp"

namespace paci {
namespace {

struct Config {
  std::string kind;
  std::int32_t P, M, N;
};

std::string name(const Config& c) {
  return c.kind + " P=" + std::to_string(c.P) + " M=" + std::to_string(c.M) +
         " N=" + std::to_string(c.N);
}

std::vector<Config> sweep(const std::string& kind) {
  std::vector<Config> out;
  for (std::int32_t P = 1; P <= 16; ++P)
    for (std::int32_t M = 1; M <= 24; ++M)
      for (std::int32_t N = 1; N <= 4; ++N)
        if (kind != "2bw" || M >= P) out.push_back({kind, P, M, N});
  return out;
}

std::int64_t ceil_div(std::int64_t a, std::int64_t b) {
  return (a + b - 1) / b;
}
std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}

// Counts per (stage, kind) straight from the device lists.
void expect_complete(const Schedule& s, const Config& c) {
  const std::int64_t T = static_cast<std::int64_t>(c.M) * c.N;
  ASSERT_EQ(s.total_microbatches(), T) << name(c);
  ASSERT_EQ(s.num_devices(), c.P) << name(c);
  for (std::int32_t d = 0; d < c.P; ++d) {
    std::int64_t f = 0, b = 0, u = 0;
    for (const Action& a : s.devices[static_cast<std::size_t>(d)]) {
      ASSERT_EQ(a.stage, d) << name(c);
      f += a.kind == ActionKind::F;
      b += a.kind == ActionKind::B;
      u += a.kind == ActionKind::U;
    }
    EXPECT_EQ(f, T) << name(c);
    EXPECT_EQ(b, T) << name(c);
    EXPECT_EQ(u, s.steps) << name(c);
  }
}

// versions[] agrees with the per-stage figures.
void expect_consistent(const Analysis& a, const Config& c) {
  for (const auto& st : a.stages) {
    std::int32_t max_stale = 0, max_delay = 0;
    std::int64_t sum = 0;
    for (std::int64_t m = 0; m < a.total_microbatches; ++m) {
      const auto& v = a.version(st.stage, static_cast<std::int32_t>(m));
      ASSERT_EQ(v.stage, st.stage);
      ASSERT_EQ(v.microbatch, m);
      ASSERT_GE(v.v_f, 0) << name(c);
      ASSERT_GE(v.v_b, v.v_f) << name(c);
      ASSERT_GE(v.update, v.v_b) << name(c);
      ASSERT_LT(v.update, st.updates) << name(c);
      max_stale = std::max(max_stale, v.staleness());
      max_delay = std::max(max_delay, v.update_delay());
      sum += v.staleness();
    }
    EXPECT_EQ(st.max_staleness, max_stale) << name(c);
    EXPECT_EQ(st.max_update_delay, max_delay) << name(c);
    EXPECT_NEAR(st.mean_staleness, static_cast<double>(sum) / a.total_microbatches, 1e-12);
  }
}

class EveryGenerator : public ::testing::TestWithParam<std::string> {};

TEST_P(EveryGenerator, SweepHoldsEveryInvariant) {
  const std::string kind = GetParam();
  for (const Config& c : sweep(kind)) {
    const Schedule s = generate_schedule(c.kind, c.P, c.M, c.N);
    ASSERT_NO_THROW(validate(s)) << name(c);
    expect_complete(s, c);
    const Analysis a = analyze(s);
    expect_consistent(a, c);
    const std::int64_t T = static_cast<std::int64_t>(c.M) * c.N;
    for (const auto& st : a.stages) {
      const std::int64_t w = c.P - 1 - st.stage;  // 1F1B warm-up forwards
      const std::int64_t in_flight = std::min<std::int64_t>(c.P - st.stage, T);
      if (kind == "gpipe") {
        EXPECT_EQ(st.peak_activations, c.M) << name(c);
      } else if (kind == "1f1b") {
        EXPECT_EQ(st.peak_activations, std::min(c.P - st.stage, c.M)) << name(c);
      } else {
        EXPECT_EQ(st.peak_activations, in_flight) << name(c);
      }
      if (kind == "gpipe" || kind == "1f1b") {
        EXPECT_EQ(st.max_staleness, 0) << name(c);
        EXPECT_EQ(st.max_update_delay, 0) << name(c);
        EXPECT_EQ(st.peak_weight_versions, 1) << name(c);
      } else if (kind == "pipedream") {
        EXPECT_EQ(st.max_staleness, 0) << name(c);  // the backward reads the stashed version
        EXPECT_EQ(st.max_update_delay, std::min<std::int64_t>(w, T - 1)) << name(c);
        if (T >= 2 * w + 1) {  // steady state: P-s in flight, each read a different version
          EXPECT_EQ(st.peak_weight_versions, c.P - st.stage) << name(c);
        }
        EXPECT_LE(st.peak_weight_versions, c.P - st.stage) << name(c);
      } else if (kind == "2bw") {
        EXPECT_EQ(st.max_staleness, 0) << name(c);
        EXPECT_LE(st.max_update_delay, 1) << name(c);
        EXPECT_LE(st.peak_weight_versions, 2) << name(c);
      } else if (kind == "paci") {
        const std::int64_t bound = ceil_div(w, c.M);
        EXPECT_EQ(st.peak_weight_versions, 1) << name(c);
        EXPECT_LE(st.max_staleness, bound) << name(c);
        if (T > bound * c.M) {
          EXPECT_EQ(st.max_staleness, bound) << name(c);  // steady state reached
        }
        if (c.M >= c.P - 1) {
          EXPECT_LE(st.max_staleness, 1) << name(c);
        }
        if (st.stage == c.P - 1) {
          EXPECT_EQ(st.max_staleness, 0) << name(c);
        }
        // Independent derivation from the 1F1B order: B(m) follows m backwards, F(m) follows
        // max(0, m-w) backwards, and a stage steps after every M-th backward.
        for (std::int64_t m = 0; m < T; ++m) {
          const auto& v = a.version(st.stage, static_cast<std::int32_t>(m));
          EXPECT_EQ(v.v_b, m / c.M) << name(c) << " mb " << m;
          EXPECT_EQ(v.v_f, floor_div(std::max<std::int64_t>(0, m - w), c.M)) << name(c);
        }
      }
      if (kind == "paci" || kind == "1f1b" || kind == "gpipe") {
        EXPECT_EQ(st.max_update_delay, st.max_staleness) << name(c);  // current weights
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Schedules, EveryGenerator,
                         ::testing::Values("gpipe", "1f1b", "pipedream", "2bw", "paci"));

TEST(Generators, PaciDoneWhenExample) {
  const Analysis a = analyze(generate_schedule("paci", 8, 4, 4));
  std::vector<std::int32_t> max_staleness;
  for (const auto& st : a.stages) max_staleness.push_back(st.max_staleness);
  EXPECT_EQ(max_staleness, (std::vector<std::int32_t>{2, 2, 2, 1, 1, 1, 1, 0}));
}

TEST(Generators, PipedreamRecordsOneMicrobatchPerStep) {
  const Schedule s = generate_schedule("pipedream", 4, 3, 2);
  EXPECT_EQ(s.microbatches, 1);
  EXPECT_EQ(s.steps, 6);
  EXPECT_EQ(s.weight_policy, WeightPolicy::stash);
}

TEST(Generators, RejectsImpossibleConfigurations) {
  EXPECT_THROW(generate_schedule("zigzag", 4, 4, 1), InputError);
  EXPECT_THROW(generate_schedule("1f1b", 0, 4, 1), InputError);
  EXPECT_THROW(generate_schedule("1f1b", 4, 0, 1), InputError);
  EXPECT_THROW(generate_schedule("1f1b", 4, 4, -1), InputError);
  EXPECT_THROW(generate_schedule("2bw", 4, 3, 1), InputError);             // 2bw needs M >= P
  EXPECT_THROW(generate_schedule("paci", 1, 100'000'000, 1), InputError);  // 3e8 actions
}

TEST(Generators, OneFOneBOrderAtFirstStage) {
  const Schedule s = generate_schedule("1f1b", 3, 4, 1);
  std::vector<std::string> got;
  for (const Action& a : s.devices[0]) got.push_back(to_string(a));
  EXPECT_EQ(got, (std::vector<std::string>{"0F0", "0F1", "0F2", "0B0", "0F3", "0B1", "0B2", "0B3",
                                           "0U"}));
}

}  // namespace
}  // namespace paci
