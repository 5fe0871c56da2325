// The schedule commands end to end through the binary: help, exit codes, pipes, and one clear
// line on stderr for each kind of bad input.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/cli/run.hpp"

namespace paci {
namespace {

using ::testing::HasSubstr;
using testing::run_paci;
using ::testing::StartsWith;
using testing::temp_path;
using testing::write_text;

std::size_t lines(const std::string& s) {
  return static_cast<std::size_t>(std::count(s.begin(), s.end(), '\n'));
}

TEST(Cli, HelpAndUsage) {
  auto r = run_paci("--help");
  EXPECT_EQ(r.status, 0);
  EXPECT_THAT(r.out, HasSubstr("schedule"));
  EXPECT_THAT(r.out, HasSubstr("analyze"));
  for (const char* cmd : {"schedule", "validate", "analyze"}) {
    r = run_paci(std::string(cmd) + " --help");
    EXPECT_EQ(r.status, 0) << cmd;
    EXPECT_THAT(r.out, HasSubstr("usage: paci " + std::string(cmd))) << cmd;
  }
  r = run_paci("frobnicate");
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.err, HasSubstr("unknown command 'frobnicate'"));
  r = run_paci("schedule --kind paci --stages 4");  // --microbatches missing
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.err, HasSubstr("microbatches"));
  EXPECT_EQ(lines(r.err), 1u);
}

TEST(Cli, DoneWhenPipeline) {
  // paci schedule --kind paci --stages 8 --microbatches 4 --steps 4 | paci analyze -
  const auto r = run_paci(
      "schedule --kind paci --stages 8 --microbatches 4 --steps 4 | " PACI_BINARY " analyze -");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j =
      run_paci("schedule --kind paci --stages 8 --microbatches 4 --steps 4 | " PACI_BINARY
               " analyze - --json -");
  ASSERT_EQ(j.status, 0) << j.err;
  const auto report = nlohmann::json::parse(j.out);
  std::vector<int> max_staleness;
  for (const auto& st : report["stages"]) max_staleness.push_back(st["max_staleness"]);
  EXPECT_EQ(max_staleness, (std::vector<int>{2, 2, 2, 1, 1, 1, 1, 0}));
  EXPECT_EQ(report["versions"].size(), 8u * 16u);
  EXPECT_EQ(report["schedule"]["kind"], "paci");
  // The table shows the same column.
  EXPECT_THAT(r.out, HasSubstr("max_stale"));
}

TEST(Cli, EveryFormatReadsBackFromFilesAndStdin) {
  for (const char* ext : {"json", "csv", "txt"}) {
    const std::string path = temp_path(std::string("s.") + ext);
    auto r = run_paci("schedule --kind 1f1b --stages 3 --microbatches 5 --steps 2 -o " + path);
    ASSERT_EQ(r.status, 0) << r.err;
    r = run_paci("validate " + path);
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_THAT(r.out, HasSubstr("valid"));
    r = run_paci("validate -", testing::slurp(path));
    EXPECT_EQ(r.status, 0) << ext << ": " << r.err;
  }
}

TEST(Cli, SideBySideAnalysis) {
  std::string files;
  for (const char* kind : {"gpipe", "1f1b", "pipedream", "2bw", "paci"}) {
    const std::string path = temp_path(std::string(kind) + ".json");
    ASSERT_EQ(run_paci(std::string("schedule -k ") + kind + " -p 4 -m 4 -n 3 -o " + path).status,
              0);
    files += " " + path;
  }
  const auto r = run_paci("analyze" + files);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("pipedream"));
  EXPECT_THAT(r.out, HasSubstr("double_buffer"));
  // Stage 0 of gpipe holds M=4 activations; pipedream's stage 0 holds P=4 weight versions.
  EXPECT_THAT(r.out, HasSubstr("4 / 1 / 0 / 0"));
  EXPECT_THAT(r.out, HasSubstr("4 / 4 / 0 / 3"));
}

struct BadInput {
  std::string name, content, expected;
};

TEST(Cli, BadInputIsOneClearLineWithExitTwo) {
  const std::string good = R"({"format": "paci.schedule/1", "kind": "custom", "stages": 1,
    "placement": [0], "microbatches": 1, "steps": 1, "weight_policy": "current",
    "devices": [["0F0", "0B0", "0U"]]})";
  const std::vector<BadInput> cases = {
      {"truncated.json", good.substr(0, good.size() / 2), "truncated.json"},
      {"version.json", R"({"format": "paci.schedule/9", "stages": 1})", "paci.schedule/9"},
      {"zero.json", R"({"format": "paci.schedule/1", "kind": "custom", "stages": 1,
        "placement": [0], "microbatches": 0, "steps": 1, "weight_policy": "current",
        "devices": [["0F0", "0B0", "0U"]]})",
       "micro-batches"},
      {"negative.csv", "# paci.schedule/1 stages=-2\n0F0,0B0,0U\n", "stage"},
      {"policy.json", R"({"format": "paci.schedule/1", "kind": "custom", "stages": 1,
        "placement": [0], "microbatches": 1, "steps": 1, "weight_policy": "sometimes",
        "devices": [["0F0", "0B0", "0U"]]})",
       "sometimes"},
      {"empty.csv", "", "empty"},
      {"binary.json",
       std::string("\x7f"
                   "ELF\x02\x01\x01\0\0\0",
                   10),
       "binary"},
      {"token.csv", "0F0,0Q0,0B0\n", "0Q0"},
  };
  for (const auto& c : cases) {
    const std::string path = temp_path(c.name);
    write_text(path, c.content);
    for (const char* cmd : {"validate", "analyze"}) {
      const auto r = run_paci(std::string(cmd) + " " + path);
      EXPECT_EQ(r.status, 2) << c.name << ": " << r.err;
      EXPECT_THAT(r.err, HasSubstr(c.expected)) << c.name;
      EXPECT_EQ(lines(r.err), 1u) << c.name << ": " << r.err;
      EXPECT_THAT(r.err, StartsWith("paci ")) << c.name;
    }
  }
  auto r = run_paci("validate " + temp_path("does-not-exist.json"));
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.err, HasSubstr("cannot open"));
  r = run_paci("schedule --kind zigzag --stages 2 --microbatches 2");
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.err, HasSubstr("unknown schedule kind 'zigzag'"));
  r = run_paci("schedule --kind 1f1b --stages 0 --microbatches 2");
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.err, HasSubstr("--stages must be positive"));
  r = run_paci("schedule --kind 1f1b --stages 2 --microbatches 2 --format yaml");
  EXPECT_EQ(r.status, 2);
}

TEST(Cli, InvalidSchedulesPrintTheMarkedGrid) {
  const std::string missing = temp_path("missing_b.txt");
  write_text(missing, "0F0 0F1 0B0 0U\n1F0 1B0 1F1 1B1 1U\n");
  auto r = run_paci("validate " + missing);
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.err, HasSubstr("0B1 is missing"));
  EXPECT_THAT(r.err, HasSubstr(">0F1<"));

  const std::string dup = temp_path("dup.csv");
  write_text(dup, "0F0,0F0,0B0,0U\n");
  r = run_paci("validate " + dup);
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.err, HasSubstr("appears twice"));

  const std::string range = temp_path("range.json");
  write_text(range, R"({"format": "paci.schedule/1", "kind": "custom", "stages": 1,
    "placement": [0], "microbatches": 1, "steps": 1, "weight_policy": "current",
    "devices": [["0F0", "5B0", "0U"]]})");
  r = run_paci("validate " + range);
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.err, HasSubstr("stage 5 out of range"));

  const std::string deadlock = temp_path("deadlock.txt");
  write_text(deadlock, "0F0 0B0 0F1 0B1 0U\n1F1 1B1 1F0 1B0 1U\n");
  r = run_paci("validate " + deadlock);
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.err, HasSubstr("deadlock"));
  EXPECT_THAT(r.err, HasSubstr(">1F1<"));
  EXPECT_THAT(r.err, HasSubstr("^^^"));
}

TEST(Cli, OutputIsWrittenAtomically) {
  const std::string path = temp_path("atomic.json");
  write_text(path, "previous");
  // A failing command leaves the previous file untouched and no temporary behind.
  auto r = run_paci("schedule --kind 2bw --stages 4 --microbatches 2 -o " + path);
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(testing::slurp(path), "previous");
  r = run_paci("schedule --kind 2bw --stages 4 --microbatches 4 -o " + path);
  EXPECT_EQ(r.status, 0);
  EXPECT_THAT(testing::slurp(path), StartsWith("{\n  \"format\": \"paci.schedule/1\""));
}

}  // namespace
}  // namespace paci
