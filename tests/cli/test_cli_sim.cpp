// simulate, compare and sweep end to end: the done-when numbers, report keys, traces,
// and bad cost models rejected with exit 2.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/cli/run.hpp"
#include "traces/chrome_trace.hpp"

namespace paci {
namespace {

using ::testing::HasSubstr;
using testing::run_paci;
using testing::temp_path;
using testing::write_text;

TEST(CliSim, CompareShowsOneFOneBBubbleAndPaciLead) {
  const auto r = run_paci("compare --stages 8 --microbatches 8 --steps 8 --tf 1 --tb 2 -f json");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  double flush_bubble = -1, paci_speedup = -1;
  for (const auto& row : j["rows"]) {
    if (row["kind"] == "1f1b") flush_bubble = row["bubble_ratio"];
    if (row["kind"] == "paci") paci_speedup = row["speedup_vs_1f1b"];
  }
  EXPECT_NEAR(flush_bubble, 7.0 / 15.0, 1e-12);
  EXPECT_GT(paci_speedup, 1.6);
  const auto longer = run_paci("compare -p 8 -m 8 -n 256 --kinds 1f1b,paci -f csv");
  ASSERT_EQ(longer.status, 0) << longer.err;
  EXPECT_THAT(longer.out, HasSubstr("paci,8,8,256,"));
  const auto table = run_paci("compare -p 8 -m 8 -n 8");
  EXPECT_EQ(table.status, 0);
  EXPECT_THAT(table.out, HasSubstr("46.67%"));
}

// A GPT's stages differ, so compare cannot split them into interleaved's chunks: it says so, and
// --interleaved-cost gives interleaved its own P·v stages (its report equals simulate's).
TEST(CliSim, CompareTakesInterleavedsOwnCostModel) {
  const std::string four = temp_path("cmp_cost4.json"), eight = temp_path("cmp_cost8.json");
  ASSERT_EQ(run_paci("costmodel --preset gpt2-small --stages 4 -o " + four).status, 0);
  ASSERT_EQ(run_paci("costmodel --preset gpt2-small --stages 8 -o " + eight).status, 0);
  const auto without = run_paci("compare -p 4 -m 8 --cost " + four);
  ASSERT_EQ(without.status, 0) << without.err;
  EXPECT_THAT(without.out, HasSubstr("skipped: interleaved splits"));
  EXPECT_THAT(without.out, HasSubstr("skipped: zb-v splits"));
  const auto with =
      run_paci("compare -p 4 -m 8 -n 2 -f json --cost " + four + " --interleaved-cost " + eight);
  ASSERT_EQ(with.status, 0) << with.err;
  const auto j = nlohmann::json::parse(with.out);
  // zb-v and dualpipev too: the 2P stages of --interleaved-cost; dualpipe: the P stages twice.
  ASSERT_EQ(j["rows"].size(), 11u);
  const std::string schedule = temp_path("cmp_interleaved.json");
  ASSERT_EQ(run_paci("schedule -k interleaved -p 4 -m 8 -n 2 -o " + schedule).status, 0);
  const std::string report = temp_path("cmp_interleaved.report.json");
  ASSERT_EQ(
      run_paci("simulate " + schedule + " --cost " + eight + " --quiet --json " + report).status,
      0);
  const auto simulated = nlohmann::json::parse(testing::slurp(report))["makespan_s"];
  // DualPipe's copies hold the GPT's stages again: simulate takes the one copy's cost model too.
  const std::string dualpipe = temp_path("cmp_dualpipe.json"),
                    dualpipe_report = temp_path("cmp_dualpipe.report.json");
  ASSERT_EQ(run_paci("schedule -k dualpipe -p 4 -m 8 -n 2 -o " + dualpipe).status, 0);
  ASSERT_EQ(
      run_paci("simulate " + dualpipe + " --cost " + four + " --quiet --json " + dualpipe_report)
          .status,
      0);
  const auto dualpipe_simulated =
      nlohmann::json::parse(testing::slurp(dualpipe_report))["makespan_s"];
  int checked = 0;
  for (const auto& row : j["rows"]) {
    if (row["kind"] == "interleaved") {
      EXPECT_EQ(row["makespan_s"], simulated);
      ++checked;
    }
    if (row["kind"] == "dualpipe") {
      EXPECT_EQ(row["makespan_s"], dualpipe_simulated);
      ++checked;
    }
  }
  EXPECT_EQ(checked, 2);
  // Not P·v stages: one line.
  const auto bad = run_paci("compare -p 4 -m 8 --cost " + four + " --interleaved-cost " + four);
  EXPECT_EQ(bad.status, 2);
  EXPECT_THAT(bad.err, HasSubstr("needs P·v of them"));
}

TEST(CliSim, SimulateWritesTheSharedReportAndATrace) {
  const std::string schedule = temp_path("sim_paci.json");
  ASSERT_EQ(run_paci("schedule -k paci -p 4 -m 4 -n 4 -o " + schedule).status, 0);
  const std::string report = temp_path("sim_report.json"), trace = temp_path("sim_trace.json");
  const auto r = run_paci("simulate " + schedule + " --tf 1 --tb 2 --latency 0.01 --json " +
                          report + " --trace " + trace);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("makespan"));
  const auto j = nlohmann::json::parse(testing::slurp(report));
  for (const char* key : {"source", "schedule", "makespan_s", "bubble_ratio", "steady_bubble_ratio",
                          "throughput", "stages", "versions"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_EQ(j["source"], "simulated");
  for (const char* key : {"stage", "busy_s", "utilization", "peak_memory_bytes", "peak_activations",
                          "peak_weight_versions", "max_staleness", "mean_staleness"})
    EXPECT_TRUE(j["stages"][0].contains(key)) << key;
  EXPECT_EQ(j["versions"].size(), 4u * 16u);
  const auto analysis = run_paci("analyze " + schedule + " --json -");
  const auto a = nlohmann::json::parse(analysis.out);
  EXPECT_EQ(a["versions"], j["versions"]);
  EXPECT_EQ(check_trace_text(testing::slurp(trace)), std::vector<std::string>{});
}

TEST(CliSim, SweepWritesCsv) {
  const std::string out = temp_path("sweep.csv");
  const auto r = run_paci("sweep --stages 2:4 --microbatches 1,2,4 --steps 4 -o " + out);
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string csv = testing::slurp(out);
  const auto rows = std::count(csv.begin(), csv.end(), '\n');
  // 3 P x 3 M x 11 kinds, minus 2bw where M < P (P=2: M=1; P=3: M=1,2; P=4: M=1,2),
  // interleaved where P does not divide M (P=2: M=1; P=3: M=1,2,4; P=4: M=1,2), dualpipev
  // where M < 2P (all but P=2, M=4) and dualpipe there too (the same 8: P=3 odd, M < 2P),
  // plus header.
  EXPECT_EQ(rows, 1 + 99 - 5 - 6 - 8 - 8);
  EXPECT_THAT(csv, HasSubstr("kind,stages,microbatches,steps,makespan_s"));
  EXPECT_EQ(run_paci("sweep --stages 4:2 --microbatches 1").status, 2);
  EXPECT_EQ(run_paci("sweep --stages x --microbatches 1").status, 2);
}

TEST(CliSim, BadCostModelsExitTwo) {
  const std::string schedule = temp_path("sim_1f1b.json");
  ASSERT_EQ(run_paci("schedule -k 1f1b -p 4 -m 4 -o " + schedule).status, 0);
  const std::string three = temp_path("cost3.json");
  ASSERT_EQ(run_paci("costmodel --preset tiny --stages 3 -o " + three).status, 0);
  auto r = run_paci("simulate " + schedule + " --cost " + three);
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.err, HasSubstr("3 stages"));
  r = run_paci("simulate " + schedule + " --cost " + three + " --tf 2");
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.err, HasSubstr("cannot be combined"));
  r = run_paci("simulate " + schedule + " --tf -1");
  EXPECT_EQ(r.status, 2);
  r = run_paci("simulate " + schedule + " --bandwidth 0");
  EXPECT_EQ(r.status, 2);
  const std::string truncated = temp_path("cost_truncated.json");
  write_text(truncated, testing::slurp(three).substr(0, 40));
  r = run_paci("simulate " + schedule + " --cost " + truncated);
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1);
}

}  // namespace
}  // namespace paci
