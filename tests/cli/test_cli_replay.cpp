// The engine against the executor, independent of the machine: every schedule at P=2 and P=4 is
// trained (a tiny GPT), then `paci simulate --replay` replays the measured report with its own
// durations and message times; makespan, bubble and every action's start must agree within 1%.
// Also: calibration's sharing figures, --host-slowdown, and paci fidelity's output — their
// structure and invariants, never how fast this machine is.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>

#include "fidelity/prediction.hpp"
#include "schedules/generators.hpp"
#include "sim/engine.hpp"
#include "tests/cli/run.hpp"

namespace paci {
namespace {

using testing::corpus_flags;
using ::testing::HasSubstr;
using testing::run_paci;
using testing::slurp;
using testing::temp_path;

const char* const kTiny = " --layers 4 --heads 2 --d-model 32 --seq-len 16 --batch 2 ";

class CliReplay : public ::testing::TestWithParam<std::tuple<const char*, int>> {};

TEST_P(CliReplay, ReplayOfAMeasuredRunEqualsItWithinOnePercent) {
  const auto [kind, P] = GetParam();
  const std::string name = std::string(kind) + "_p" + std::to_string(P);
  const std::string schedule = temp_path(name + ".json"), report = temp_path(name + ".report.json"),
                    replay = temp_path(name + ".replay.json");
  ASSERT_EQ(run_paci("schedule -k " + std::string(kind) + " -p " + std::to_string(P) + " -m " +
                     std::to_string(P) + " -n 3 -o " + schedule)
                .status,
            0);
  const auto train = run_paci("train --schedule " + schedule + kTiny + corpus_flags() +
                              "--quiet --report " + report);
  ASSERT_EQ(train.status, 0) << train.err;
  const auto r = run_paci("simulate " + schedule + " --replay " + report + " --json " + replay);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("replay of " + report));
  const auto measured = nlohmann::json::parse(slurp(report));
  const auto j = nlohmann::json::parse(slurp(replay));
  const auto& rp = j["replay"];
  const double makespan = measured["makespan_s"].get<double>();
  EXPECT_NEAR(rp["measured_makespan_s"].get<double>(), makespan, 1e-12);
  EXPECT_NEAR(j["makespan_s"].get<double>(), makespan, 0.01 * makespan);
  EXPECT_NEAR(j["bubble_ratio"].get<double>(), measured["bubble_ratio"].get<double>(),
              0.01 * measured["bubble_ratio"].get<double>());
  EXPECT_LE(rp["max_start_error_s"].get<double>(), 0.01 * makespan);
  EXPECT_EQ(rp["actions_off"], 0) << rp.dump(2);
  EXPECT_EQ(rp["actions"], measured["schedule"]["actions"]);
  // The versions replayed are the versions the run read.
  EXPECT_EQ(j["versions"], measured["versions"]);
}

INSTANTIATE_TEST_SUITE_P(EverySchedule, CliReplay,
                         ::testing::Combine(::testing::Values("gpipe", "1f1b", "pipedream", "2bw",
                                                              "paci"),
                                            ::testing::Values(2, 4)),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param)) + "_P" +
                                  std::to_string(std::get<1>(info.param));
                         });

TEST(CliReplay, RefusesAReportOfAnotherScheduleOrNoReport) {
  const std::string a = temp_path("replay_a.json"), b = temp_path("replay_b.json"),
                    report = temp_path("replay_a.report.json");
  ASSERT_EQ(run_paci("schedule -k 1f1b -p 2 -m 2 -n 2 -o " + a).status, 0);
  ASSERT_EQ(run_paci("schedule -k gpipe -p 2 -m 2 -n 2 -o " + b).status, 0);
  ASSERT_EQ(
      run_paci("train --schedule " + a + kTiny + corpus_flags() + "--quiet --report " + report)
          .status,
      0);
  auto bad = [](const testing::Result& r, const std::string& fragment) {
    EXPECT_EQ(r.status, 2) << r.err;
    EXPECT_THAT(r.err, HasSubstr(fragment));
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  };
  bad(run_paci("simulate " + b + " --replay " + report), "a run of another schedule");
  bad(run_paci("simulate " + a + " --replay " + temp_path("nope.json")), "nope.json");
  testing::write_text(temp_path("replay_garbage.json"), "{\"source\": ");
  bad(run_paci("simulate " + a + " --replay " + temp_path("replay_garbage.json")),
      "replay_garbage.json");
  const std::string simulated = temp_path("replay_sim.json");
  ASSERT_EQ(run_paci("simulate " + a + " --quiet --json " + simulated).status, 0);
  bad(run_paci("simulate " + a + " --replay " + simulated), "only a measured run");
  bad(run_paci("simulate " + a + " --replay " + report + " --replay-tolerance -1"),
      "--replay-tolerance");
}

TEST(CliSharing, HostSlowdownFlagSlowsTheSimulationDown) {
  auto makespan = [](const std::string& extra) {
    const auto r = run_paci("compare -p 4 -m 4 -n 2 --kinds 1f1b,paci --format json" + extra);
    EXPECT_EQ(r.status, 0) << r.err;
    return nlohmann::json::parse(r.out)["rows"][1]["makespan_s"].get<double>();
  };
  const double independent = makespan("");
  EXPECT_NEAR(makespan(" --host-slowdown 2,2,2,2"), 2 * independent, 1e-9);  // 2x at any count
  EXPECT_GT(makespan(" --host-slowdown 1,1.5,2,2.5"), independent);
  const auto bad = run_paci("compare -p 4 -m 4 --host-slowdown 1,x");
  EXPECT_EQ(bad.status, 2);
  EXPECT_THAT(bad.err, HasSubstr("--host-slowdown must list numbers > 0"));
}

TEST(CliSharing, CalibrationMeasuresTheSlowdownWithItsSpread) {
  const std::string cost = temp_path("shared.cost.json"),
                    details = temp_path("shared.details.json");
  const auto r = run_paci("calibrate -p 3" + std::string(kTiny) + corpus_flags() +
                          "--repeats 3 --max-rounds 2 -o " + cost + " --details " + details);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("slowdown with k stages computing at once"));
  const auto c = nlohmann::json::parse(slurp(cost));
  ASSERT_EQ(c["hosts"].size(), 1u);
  EXPECT_EQ(c["hosts"][0]["devices"], nlohmann::json::array({0, 1, 2}));
  const auto& slowdown = c["hosts"][0]["slowdown_by_count"];
  ASSERT_EQ(slowdown.size(), 3u);
  EXPECT_EQ(slowdown[0].get<double>(), 1.0);
  // Measured as it is (below 1 where two threads at once each run faster, as on some VMs).
  for (const auto& x : slowdown) EXPECT_GT(x.get<double>(), 0.0);
  ASSERT_EQ(c["hosts"][0]["device_slowdown_by_count"].size(), 3u);
  const auto d = nlohmann::json::parse(slurp(details));
  EXPECT_EQ(d["machine"]["cores"].get<unsigned>() > 0, true);
  EXPECT_THAT(d["machine"]["blas"].get<std::string>(), HasSubstr("kernel"));
  for (const auto& stage : d["stages"])
    for (const char* key : {"forward_s", "backward_s", "update_s"}) {
      const auto& s = stage[key];
      EXPECT_LE(s["min"].get<double>(), s["median"].get<double>()) << key;
      EXPECT_LE(s["median"].get<double>(), s["max"].get<double>()) << key;
      EXPECT_GE(s["samples"].get<int>(), 3) << key;
    }
  // The simulator reads the calibrated model, hosts included; --independent leaves them out.
  ASSERT_EQ(run_paci("schedule -k paci -p 3 -m 3 -n 2 -o " + temp_path("shared.json")).status, 0);
  EXPECT_EQ(
      run_paci("simulate " + temp_path("shared.json") + " --cost " + cost + " --quiet").status, 0);
  ASSERT_EQ(run_paci("calibrate -p 2 --independent --repeats 2 --max-rounds 1" +
                     std::string(kTiny) + corpus_flags() + "-o " + cost)
                .status,
            0);
  EXPECT_FALSE(nlohmann::json::parse(slurp(cost)).contains("hosts"));
}

// Interleaved: the model's P·v stages calibrated, each stage's device the schedule's, the host's
// sharing timed for as many threads as there are devices.
TEST(CliSharing, AnInterleavedCalibrationPutsItsStagesOnTheirDevices) {
  const std::string cost = temp_path("interleaved.cost.json");
  const auto r =
      run_paci("calibrate -p 2 --kind interleaved --chunks 2 --repeats 2 --max-rounds 1" +
               std::string(kTiny) + corpus_flags() + "-o " + cost);
  ASSERT_EQ(r.status, 0) << r.err;
  const auto c = nlohmann::json::parse(slurp(cost));
  EXPECT_EQ(c["stages"].size(), 4u);
  EXPECT_THAT(c["description"].get<std::string>(), HasSubstr("1,1,1,1 on devices 0,1,0,1"));
  ASSERT_EQ(c["hosts"].size(), 1u);
  EXPECT_EQ(c["hosts"][0]["devices"], nlohmann::json::array({0, 1}));
  EXPECT_EQ(c["hosts"][0]["slowdown_by_count"].size(), 2u);
  EXPECT_EQ(c["hosts"][0]["device_slowdown_by_count"].size(), 2u);
  const std::string schedule = temp_path("interleaved.json");
  ASSERT_EQ(run_paci("schedule -k interleaved -p 2 -m 4 -n 2 -o " + schedule).status, 0);
  EXPECT_EQ(run_paci("simulate " + schedule + " --cost " + cost + " --quiet").status, 0);
}

TEST(CliSharing, FidelityReportsTheMeasuredSpreadAndAnExactReplay) {
  const std::string json = temp_path("fidelity.json"), md = temp_path("fidelity.md");
  const auto r = run_paci(
      "fidelity -p 2 -m 2 -n 2 --kinds 1f1b,paci,zb-h1,interleaved --repeats 3 "
      "--calibration-repeats 2" +
      std::string(kTiny) + corpus_flags() + "--json " + json + " --markdown " + md);
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(slurp(json));
  EXPECT_THAT(j["machine"]["blas"].get<std::string>(), HasSubstr("kernel"));
  EXPECT_EQ(j["settings"]["repeats"], 3);
  ASSERT_EQ(j["runs"].size(), 4u);
  // Interleaved's four stages on two devices: a calibration of their own.
  ASSERT_EQ(j["other_calibrations"].size(), 1u);
  EXPECT_EQ(j["other_calibrations"][0]["placement"], nlohmann::json::array({0, 1, 0, 1}));
  EXPECT_EQ(j["runs"][3]["kind"], "interleaved");
  EXPECT_EQ(j["runs"][3]["stages"], 4);
  EXPECT_EQ(j["runs"][3]["devices"], 2);
  for (const auto& run : j["runs"]) {
    const auto& all = run["measured_makespans_s"];
    ASSERT_EQ(all.size(), 3u);
    const double lo = run["measured_min_s"], mid = run["measured_makespan_s"],
                 hi = run["measured_max_s"], predicted = run["predicted_makespan_s"];
    EXPECT_LE(lo, mid);
    EXPECT_LE(mid, hi);
    EXPECT_EQ(run["inside_range"].get<bool>(), predicted >= lo && predicted <= hi);
    EXPECT_NEAR(run["relative_error"].get<double>(), predicted / mid - 1, 1e-12);
    // One drift factor per run, from the load probe before it; the prediction follows them (a
    // makespan scales with its durations but for the links' latency).
    const auto factors = run["drift_factors"].get<std::vector<double>>();
    ASSERT_EQ(factors.size(), 3u);
    for (const double f : factors) EXPECT_GT(f, 0.0);
    std::vector<double> sorted = factors;
    std::sort(sorted.begin(), sorted.end());
    // The median run's factor decides (a makespan grows with every duration), on the machine's
    // pooled cost model (interleaved has a calibration of its own).
    if (run["kind"] != "interleaved") {
      const CostModel pooled = parse_cost_model(j["machine_cost_model"].dump(), "pooled");
      const Schedule s = generate_schedule(run["kind"].get<std::string>(), 2, 2, 2);
      EXPECT_NEAR(predicted,
                  simulate(s, fidelity::scaled_costs(pooled, sorted[1]), {false, nullptr})
                      .critical_path.length_s,
                  1e-12);
      EXPECT_NEAR(run["pooled_makespan_s"].get<double>(),
                  simulate(s, pooled, {false, nullptr}).critical_path.length_s, 1e-12);
    }
    EXPECT_EQ(run["holds"].get<bool>(),
              run["inside_range"].get<bool>() ||
                  std::abs(run["relative_error"].get<double>()) <= run["tolerance"].get<double>());
    // The engine replays each measured run exactly; prediction accuracy is the machine's.
    EXPECT_LE(run["replay_max_start_error"].get<double>(), 0.01);
    EXPECT_TRUE(run["staleness_equal"].get<bool>());
    EXPECT_TRUE(run["peak_activations_equal"].get<bool>());
  }
  EXPECT_THAT(slurp(md), HasSubstr("| paci |"));
  EXPECT_THAT(slurp(md), HasSubstr("| zb-h1 |"));
  EXPECT_THAT(r.out, HasSubstr("predictions inside the measured range or within 5% of the median"));
}

// paci calibrate --drift: every stage alone over and over, windows of time, every sample in the
// details; a calibration that did not settle says which figure moved and by how much.
TEST(CliSharing, CalibrateWatchesTheDriftAndSaysWhenItCannotSettle) {
  const std::string details = temp_path("drift.json");
  auto r = run_paci(
      "calibrate -p 2 --repeats 2 --max-rounds 2 --drift 1.5 --drift-window 0.5 "
      "--after-runs 1 -m 2 -n 1" +
      std::string(kTiny) + corpus_flags() + "--details " + details);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("right after 1 training runs of paci"));
  EXPECT_THAT(r.out, HasSubstr("stage 1 U: median"));
  const auto d = nlohmann::json::parse(slurp(details));
  EXPECT_GE(d["windows"].size(), 2u);
  EXPECT_EQ(d["summary"].size(), 6u);  // 2 stages x F, B, U
  EXPECT_GT(d["alone"].size(), 2u);
  for (const auto& w : d["windows"])
    EXPECT_LE(w["stages"][0]["forward_s"]["min"].get<double>(),
              w["stages"][0]["forward_s"]["max"].get<double>());
  testing::expect_refused("calibrate -p 2 --drift 0" + std::string(kTiny),
                          "--drift must be 0 < seconds <= one week, got 0");
  testing::expect_refused("calibrate -p 2 --drift 2 --drift-window 3" + std::string(kTiny),
                          "--drift-window must be 0 < seconds <= --drift (2), got 3");
  // One round cannot settle; two rounds name the figure that moved most.
  const std::string cost = temp_path("unsettled.json"), more = temp_path("unsettled.details.json");
  r = run_paci("calibrate -p 2 --repeats 2 --max-rounds 1 --independent" + std::string(kTiny) +
               corpus_flags() + "-o " + cost);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("calibration not settled: 1 round(s) cannot show"));
  EXPECT_THAT(nlohmann::json::parse(slurp(cost))["description"].get<std::string>(),
              HasSubstr("not settled"));
  r = run_paci("calibrate -p 2 --repeats 2 --max-rounds 2 --independent" + std::string(kTiny) +
               corpus_flags() + "-o " + cost + " --details " + more);
  ASSERT_EQ(r.status, 0) << r.err;
  const auto m = nlohmann::json::parse(slurp(more));
  ASSERT_TRUE(m.contains("largest_move_last_round"));
  EXPECT_THAT(m["largest_move_last_round"]["figure"].get<std::string>(), HasSubstr("stage "));
  EXPECT_GE(m["largest_move_last_round"]["moved"].get<double>(), 0.0);
  if (!m["stable"].get<bool>()) {
    EXPECT_THAT(m["not_settled"].get<std::string>(), HasSubstr("median still moved"));
  }
}

// Interleaved where it cannot run is left out with its reason; the other rows still run (and
// --chunks, interleaved's, does not reach them).
TEST(CliSharing, FidelitySaysWhyItSkipsInterleaved) {
  const auto r = run_paci(
      "fidelity -p 2 -m 3 -n 1 --kinds 1f1b,interleaved --chunks 2 --repeats 1 "
      "--calibration-repeats 1" +
      std::string(kTiny) + corpus_flags());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("skipped: interleaved: "));
  EXPECT_THAT(r.out, HasSubstr("multiple of"));
  EXPECT_THAT(r.out, HasSubstr("| 1f1b |"));
}

}  // namespace
}  // namespace paci
