// The drift-following prediction: every duration scaled by a run's drift factor, the median over
// the runs' simulations; and the verdict on a prediction against its measured runs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>

#include "fidelity/prediction.hpp"
#include "schedules/generators.hpp"
#include "sim/engine.hpp"

namespace paci::fidelity {
namespace {

using ::testing::HasSubstr;

TEST(DriftPrediction, ScalesEveryDurationAndNothingElse) {
  UniformCosts u;
  u.tf = 1;
  u.tu = 0.5;
  u.latency_s = 0.25;
  u.weight_bytes = 1000;
  const CostModel costs = uniform_cost_model(3, u);
  const CostModel scaled = scaled_costs(costs, 1.5);
  for (std::size_t s = 0; s < 3; ++s) {
    EXPECT_DOUBLE_EQ(scaled.stages[s].forward_s, 1.5);
    EXPECT_DOUBLE_EQ(scaled.stages[s].backward_s, 3.0);
    EXPECT_DOUBLE_EQ(scaled.stages[s].input_grad_s, 1.5);
    EXPECT_DOUBLE_EQ(scaled.stages[s].weight_grad_s, 1.5);
    EXPECT_DOUBLE_EQ(scaled.stages[s].update_s, 0.75);
    EXPECT_EQ(scaled.stages[s].weight_bytes, 1000);
  }
  EXPECT_EQ(scaled.default_link, costs.default_link);
}

TEST(DriftPrediction, IsTheMedianOfTheRunsSimulations) {
  UniformCosts u;  // free links: a makespan scales with its durations exactly
  const CostModel costs = uniform_cost_model(4, u);
  for (const char* kind : {"1f1b", "paci", "zb-h1"}) {
    const Schedule s = generate_schedule(kind, 4, 4, 3);
    const double base = simulate(s, costs, {false, nullptr}).critical_path.length_s;
    EXPECT_NEAR(drift_corrected_makespan(s, costs, {0.9, 1.3, 1.1}), 1.1 * base, 1e-9 * base);
    EXPECT_NEAR(drift_corrected_makespan(s, costs, {1.0, 1.2}), 1.1 * base, 1e-9 * base);
    // Factors that could not be measured are left out; none left: the pooled prediction.
    const double nan = std::numeric_limits<double>::quiet_NaN();
    EXPECT_NEAR(drift_corrected_makespan(s, costs, {nan, 2.0, -1.0}), 2.0 * base, 1e-9 * base);
    EXPECT_NEAR(drift_corrected_makespan(s, costs, {}), base, 1e-12);
  }
}

TEST(DriftPrediction, JudgesAgainstTheRangeAndTheTolerance) {
  // Inside the range, however far from the median.
  Verdict v = judge(1.3, 1.0, 0.8, 1.4, 0.05);
  EXPECT_TRUE(v.inside_range);
  EXPECT_TRUE(v.holds());
  EXPECT_NEAR(v.error, 0.3, 1e-12);
  EXPECT_EQ(v.note("x", 1.3, 1.0, 0.8, 1.4, 0.05), "");
  // Outside it but within the tolerance.
  v = judge(1.04, 1.0, 0.99, 1.01, 0.05);
  EXPECT_FALSE(v.inside_range);
  EXPECT_TRUE(v.within_tolerance);
  EXPECT_TRUE(v.holds());
  // Neither, runs tight: a miss of the model.
  v = judge(1.2, 1.0, 0.98, 1.02, 0.05);
  EXPECT_FALSE(v.holds());
  EXPECT_FALSE(v.spread_too_wide);
  EXPECT_THAT(v.note("paci", 1.2, 1.0, 0.98, 1.02, 0.05), HasSubstr("a miss of the model"));
  // Neither, and the runs spread wider than the band: said with the numbers.
  v = judge(0.7, 1.0, 0.85, 1.3, 0.05);
  EXPECT_FALSE(v.holds());
  EXPECT_TRUE(v.spread_too_wide);
  const std::string note = v.note("gpipe", 0.7, 1.0, 0.85, 1.3, 0.05);
  EXPECT_THAT(note, HasSubstr("gpipe: predicted 0.700 s, -30.0% from the measured median 1.000 s"));
  EXPECT_THAT(note, HasSubstr("spread 45.0% of their median"));
  EXPECT_THAT(note, HasSubstr("cannot be told apart from its own noise"));
}

}  // namespace
}  // namespace paci::fidelity
