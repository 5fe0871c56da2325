// One process per device on CPUs under mpirun: for every schedule at P=2 and P=4 the losses,
// versions and final weights equal the one-process executor's bit for bit; a schedule whose links
// reorder messages, processes given different settings and a wrong process count are refused in
// one line; a failing rank (--fail-at, a NaN) and a killed rank end the whole launch within 10 s
// with a non-zero exit and nothing half-written.
//
// Needs a paci built with MPI and mpirun on the PATH (scripts/setup.sh installs Open MPI and
// scripts/test.sh builds with PACI_MPI=ON, so CI always runs these).
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "tests/cli/run.hpp"

namespace paci {
namespace {

using ::testing::HasSubstr;
using testing::run_paci;
using testing::run_shell;
using testing::slurp;
using testing::temp_path;
using testing::write_text;

const char* const kTiny = " --layers 4 --heads 2 --d-model 32 --seq-len 16 --batch 2 --quiet ";

// mpirun as CI runs it: as root if need be, more processes than cores allowed.
// Under AddressSanitizer (scripts/sanitize.sh) the ranks run without LeakSanitizer: its exit-time
// tracer crashed now and then in ranks started by mpirun under the suite's load ("Tracer caught
// signal 11 ... LeakSanitizer has encountered a fatal error"), turning a refusal's exit 2 into 1,
// and what it would look at there is Open MPI's own teardown (scripts/sanitizers/lsan.supp). ASan
// and UBSan stay on in the ranks; the leak check stays on for every single-process test. The
// later detect_leaks wins over the one the suite sets; in a build without ASan it is ignored.
std::string mpirun(int processes) {
  return "ASAN_OPTIONS=\"${ASAN_OPTIONS:-}:detect_leaks=0\" "
         "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_"
         "mechanism=none mpirun --oversubscribe -np " +
         std::to_string(processes) + " ";
}

// Skips unless this paci has the MPI transport and mpirun is here.
bool have_mpi(std::string& why) {
  const auto version = run_paci("--version");
  if (version.out.find("mpi (") == std::string::npos) {
    why = "this paci was built without MPI";
    return false;
  }
  if (run_shell("command -v mpirun").status != 0) {
    why = "mpirun is not on the PATH";
    return false;
  }
  return true;
}

#define REQUIRE_MPI()                        \
  do {                                       \
    std::string why;                         \
    if (!have_mpi(why)) GTEST_SKIP() << why; \
  } while (false)

std::vector<double> step_losses(const std::string& metrics) {
  std::vector<double> out;
  std::istringstream in(slurp(metrics));
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j.contains("loss")) out.push_back(j["loss"].get<double>());
  }
  return out;
}

// paci's own error lines ("paci train: ..."), whatever mpirun adds around them.
std::vector<std::string> paci_lines(const std::string& err) {
  std::vector<std::string> lines;
  std::istringstream in(err);
  for (std::string line; std::getline(in, line);)
    if (line.rfind("paci train:", 0) == 0) lines.push_back(line);
  return lines;
}

// A run's report, metrics and checkpoint, all at `base` (a temporary path) with their suffixes.
std::string outputs_at(const std::string& base) {
  return fmt::format(" --report {0}.json --metrics {0}.jsonl --save {0}.state", base);
}

// (kind, P, model flags added to the tiny model's: empty, or a mixture of experts)
class CliMpi : public ::testing::TestWithParam<std::tuple<std::string, int, std::string>> {};

const char* const kMoe = "--experts 4 --top-k 2 --shared-expert --capacity-factor 1.0";

std::string case_name(const std::tuple<std::string, int, std::string>& param) {
  std::string kind = std::get<0>(param);  // test names take no '-'
  std::replace(kind.begin(), kind.end(), '-', '_');
  return kind + "_P" + std::to_string(std::get<1>(param)) +
         (std::get<2>(param).empty() ? "" : "_moe");
}

TEST_P(CliMpi, EqualsOneProcessBitForBit) {
  REQUIRE_MPI();
  const auto& [kind, P, model] = GetParam();
  const std::string tag = case_name(GetParam());
  const std::string flags = fmt::format(" train -k {} -p {} -m 4 -n 3 --val-every 2", kind, P) +
                            kTiny + model + " " + testing::corpus_flags();
  const std::string a = temp_path(tag + "one"), b = temp_path(tag + "many");
  const auto one = run_paci(flags + outputs_at(a));
  ASSERT_EQ(one.status, 0) << one.err;
  const auto many = run_shell(mpirun(P) + PACI_BINARY + flags + outputs_at(b));
  ASSERT_EQ(many.status, 0) << many.out << many.err;
  const auto losses = step_losses(a + ".jsonl");
  ASSERT_GE(losses.size(), 3u);                  // PipeDream updates after every micro-batch
  EXPECT_EQ(step_losses(b + ".jsonl"), losses);  // the same doubles
  const auto ra = nlohmann::json::parse(slurp(a + ".json"));
  const auto rb = nlohmann::json::parse(slurp(b + ".json"));
  EXPECT_EQ(rb["loss"], ra["loss"]);
  // A mixture of experts' load-balancing losses: every process's stages.
  EXPECT_EQ(rb.contains("aux_loss"), !model.empty());
  EXPECT_EQ(rb.value("aux_loss", nlohmann::json()), ra.value("aux_loss", nlohmann::json()));
  EXPECT_EQ(rb.value("expert_load", nlohmann::json()), ra.value("expert_load", nlohmann::json()));
  EXPECT_EQ(rb["val_loss"], ra["val_loss"]);
  EXPECT_EQ(rb["versions"], ra["versions"]);
  EXPECT_EQ(rb["processes"], P);
  for (std::size_t s = 0; s < static_cast<std::size_t>(P); ++s)
    EXPECT_EQ(rb["stages"][s]["peak_activations"], ra["stages"][s]["peak_activations"]);
  const std::string weights = slurp(a + ".state");
  ASSERT_FALSE(weights.empty());
  EXPECT_TRUE(slurp(b + ".state") == weights) << "checkpoints differ";
  // Every process measured its own device: every action and every message is in the timeline.
  EXPECT_EQ(rb["timeline"]["actions"].size(), ra["timeline"]["actions"].size());
  EXPECT_EQ(rb["timeline"]["messages"].size(), ra["timeline"]["messages"].size());
}

INSTANTIATE_TEST_SUITE_P(EverySchedule, CliMpi,
                         ::testing::Combine(::testing::Values("gpipe", "1f1b", "pipedream", "2bw",
                                                              "paci", "zb-h1", "zb-h2"),
                                            ::testing::Values(2, 4), ::testing::Values("")),
                         [](const auto& info) { return case_name(info.param); });
// ZB-V and DualPipeV: 2P model stages, so P = 2 (four stages) on the tiny model's four blocks;
// DualPipeV's overlapped pairs run back to back on a CPU, its outputs sent as each finishes.
INSTANTIATE_TEST_SUITE_P(VShape, CliMpi,
                         ::testing::Combine(::testing::Values("zb-v", "dualpipev"),
                                            ::testing::Values(2), ::testing::Values("")),
                         [](const auto& info) { return case_name(info.param); });
// DualPipe: two copies of the model, each device holding a stage of each; every stage's gradients
// cross to its twin's process before the update, and each copy's last stage holds half of every
// step's losses (the report, the metrics and the validation loss from the merged results).
INSTANTIATE_TEST_SUITE_P(TwoCopies, CliMpi,
                         ::testing::Combine(::testing::Values("dualpipe"), ::testing::Values(2),
                                            ::testing::Values("", kMoe)),
                         [](const auto& info) { return case_name(info.param); });
// A mixture of experts (4 experts, top-2, a shared one, capacity 1.0: some tokens dropped) over
// a flushed, an asynchronous and a paired schedule: the routing and the load-balancing loss's
// gradient are the same bits in every process.
INSTANTIATE_TEST_SUITE_P(MixtureOfExperts, CliMpi,
                         ::testing::Combine(::testing::Values("1f1b", "paci", "dualpipev"),
                                            ::testing::Values(2), ::testing::Values(kMoe)),
                         [](const auto& info) { return case_name(info.param); });

// Expert parallelism (--ep e): P·e processes, each device's experts split over e of them, the
// tokens and every other tensor whole in each. (kind, P, e): a flushed, an asynchronous and a
// split-backward schedule; every loss, routing count and the checkpoint bit for bit one process's.
class CliMpiExperts : public ::testing::TestWithParam<std::tuple<std::string, int, int>> {};

TEST_P(CliMpiExperts, EqualsOneProcessBitForBit) {
  REQUIRE_MPI();
  const auto& [kind, P, ep] = GetParam();
  std::string tag = fmt::format("ep_{}_P{}_e{}", kind, P, ep);
  std::replace(tag.begin(), tag.end(), '-', '_');
  const std::string flags = fmt::format(" train -k {} -p {} -m 4 -n 3 --val-every 2", kind, P) +
                            kTiny + kMoe + " " + testing::corpus_flags();
  const std::string a = temp_path(tag + "one"), b = temp_path(tag + "many");
  const auto one = run_paci(flags + outputs_at(a));
  ASSERT_EQ(one.status, 0) << one.err;
  const auto many =
      run_shell(mpirun(P * ep) + PACI_BINARY + flags + fmt::format(" --ep {}", ep) + outputs_at(b));
  ASSERT_EQ(many.status, 0) << many.out << many.err;
  const auto losses = step_losses(a + ".jsonl");
  ASSERT_GE(losses.size(), 3u);
  EXPECT_EQ(step_losses(b + ".jsonl"), losses);
  const auto ra = nlohmann::json::parse(slurp(a + ".json"));
  const auto rb = nlohmann::json::parse(slurp(b + ".json"));
  for (const char* key : {"loss", "aux_loss", "expert_load", "val_loss", "versions"})
    EXPECT_EQ(rb[key], ra[key]) << key;
  EXPECT_EQ(rb["processes"], P * ep);
  EXPECT_EQ(rb["expert_parallel"], ep);
  // The parts' experts assembled into whole stages: the same file, byte for byte.
  const std::string state = slurp(a + ".state");
  ASSERT_FALSE(state.empty());
  EXPECT_TRUE(slurp(b + ".state") == state) << "checkpoints differ";
  // Each process holds its part of the experts: less memory than a whole device's.
  for (std::size_t d = 0; d < static_cast<std::size_t>(P); ++d)
    EXPECT_LT(rb["devices"][d]["peak_memory_bytes"].get<double>(),
              ra["devices"][d]["peak_memory_bytes"].get<double>());
}

INSTANTIATE_TEST_SUITE_P(Kinds, CliMpiExperts,
                         ::testing::Values(std::tuple{std::string("1f1b"), 2, 2},
                                           std::tuple{std::string("paci"), 2, 2},
                                           std::tuple{std::string("zb-h1"), 1, 4}),
                         [](const auto& info) {
                           std::string kind = std::get<0>(info.param);
                           std::replace(kind.begin(), kind.end(), '-', '_');
                           return fmt::format("{}_P{}_ep{}", kind, std::get<1>(info.param),
                                              std::get<2>(info.param));
                         });

// DualPipe with stages of different sizes, at P = 2 and 4: a link carries whole gradient buffers
// of two sizes besides the activations, the larger sometimes ahead of the one its receiver waits
// for (each message is probed for its size); then replays of the measured runs, twins included.
TEST(CliMpiLaunch, DualPipeWithUnequalStagesEqualsOneProcess) {
  REQUIRE_MPI();
  for (const auto& [P, partition] : {std::pair{2, "1,7"}, std::pair{4, "1,1,1,5"}}) {
    const std::string flags =
        fmt::format(
            " train -k dualpipe -p {} -m {} -n 2 --partition {} --layers 8 --heads 2 "
            "--d-model 32 --seq-len 16 --batch 2 --quiet ",
            P, 2 * P, partition) +
        testing::corpus_flags();
    const std::string a = temp_path(fmt::format("dp_uneq{}_one", P)),
                      b = temp_path(fmt::format("dp_uneq{}_many", P));
    const auto one = run_paci(flags + outputs_at(a));
    ASSERT_EQ(one.status, 0) << one.err;
    const auto many = run_shell(mpirun(P) + PACI_BINARY + flags + outputs_at(b));
    ASSERT_EQ(many.status, 0) << many.out << many.err;
    EXPECT_EQ(step_losses(b + ".jsonl"), step_losses(a + ".jsonl")) << "P=" << P;
    EXPECT_TRUE(slurp(b + ".state") == slurp(a + ".state")) << "P=" << P;
    const std::string schedule = temp_path(fmt::format("dp_uneq{}.json", P));
    ASSERT_EQ(
        run_paci(fmt::format("schedule -k dualpipe -p {} -m {} -n 2 -o {}", P, 2 * P, schedule))
            .status,
        0);
    // One process: every action replayed where it started, the twins' messages among the inputs.
    const auto replay = run_paci("simulate " + schedule + " --replay " + a + ".json");
    EXPECT_EQ(replay.status, 0) << replay.err;
    EXPECT_THAT(replay.out, HasSubstr("; 0 of ")) << replay.out;
    // One process per device (their clocks a few microseconds apart): it replays.
    const auto processes = run_paci("simulate " + schedule + " --replay " + b + ".json");
    EXPECT_EQ(processes.status, 0) << processes.err;
    EXPECT_THAT(processes.out, HasSubstr("replay of")) << processes.out;
  }
}

// The issue's own check: P=4 PACI for 20 steps, versions equal paci analyze's.
TEST(CliMpiLaunch, VersionsEqualTheAnalysis) {
  REQUIRE_MPI();
  const std::string schedule = temp_path("mpi_paci.json"), report = temp_path("mpi_paci_r.json");
  ASSERT_EQ(run_paci("schedule -k paci -p 4 -m 4 -n 20 -o " + schedule).status, 0);
  const auto r = run_shell(mpirun(4) + PACI_BINARY + " train --schedule " + schedule + kTiny +
                           testing::corpus_flags() + " --report " + report);
  ASSERT_EQ(r.status, 0) << r.err;
  const auto analysis = nlohmann::json::parse(run_paci("analyze " + schedule + " --json -").out);
  const auto measured = nlohmann::json::parse(slurp(report));
  EXPECT_EQ(measured["versions"], analysis["versions"]);
  EXPECT_EQ(measured["loss"].size(), 20u);
  const std::string one_report = temp_path("mpi_paci_one.json");
  const auto one = run_paci("train --schedule " + schedule + kTiny + testing::corpus_flags() +
                            " --report " + one_report);
  ASSERT_EQ(one.status, 0) << one.err;
  EXPECT_EQ(measured["loss"], nlohmann::json::parse(slurp(one_report))["loss"]);
}

// Several stages on one process (a placement such as 0,0,1,1, the V-shaped 0,1,1,0, or Megatron's
// interleaved 1F1B): their messages stay inside the process, the others go over MPI; the same
// numbers as one process.
TEST(CliMpiLaunch, StagesSharingAProcessTalkInsideIt) {
  REQUIRE_MPI();
  const std::string blocks = temp_path("mpi_blocks.txt"), vee = temp_path("mpi_vee.txt");
  write_text(blocks,
             "# paci.schedule/1 kind=custom stages=4 microbatches=2 steps=1 "
             "weight_policy=current placement=0,0,1,1\n"
             "0F0 1F0 0F1 1F1 1B0 0B0 1B1 0B1 0U 1U\n2F0 3F0 2F1 3F1 3B0 2B0 3B1 2B1 2U 3U\n");
  write_text(vee,
             "# paci.schedule/1 kind=custom stages=4 microbatches=2 steps=1 "
             "weight_policy=current placement=0,1,1,0\n"
             "0F0 0F1 3F0 3B0 3F1 3B1 0B0 0B1 0U 3U\n1F0 2F0 1F1 2F1 2B0 1B0 2B1 1B1 1U 2U\n");
  const std::string interleaved = temp_path("mpi_interleaved.json");
  ASSERT_EQ(run_paci("schedule -k interleaved -p 2 -m 4 -n 2 -o " + interleaved).status, 0);
  for (const std::string& schedule : {blocks, vee, interleaved}) {
    const std::string flags = " train --schedule " + schedule + kTiny + testing::corpus_flags();
    const std::string a = temp_path("mpi_shared_one"), b = temp_path("mpi_shared_many");
    const auto one = run_paci(flags + " --report " + a + ".json --save " + a + ".state");
    ASSERT_EQ(one.status, 0) << one.err;
    const auto many = run_shell(mpirun(2) + PACI_BINARY + flags + " --report " + b +
                                ".json --save " + b + ".state");
    ASSERT_EQ(many.status, 0) << many.err;
    const auto ra = nlohmann::json::parse(slurp(a + ".json"));
    const auto rb = nlohmann::json::parse(slurp(b + ".json"));
    EXPECT_EQ(rb["loss"], ra["loss"]) << schedule;
    EXPECT_EQ(rb["versions"], ra["versions"]) << schedule;
    EXPECT_TRUE(slurp(b + ".state") == slurp(a + ".state")) << schedule;
  }
}

// A link whose receiver takes its messages in another order than the sender sends them would
// deadlock a transport that matches messages in order: process 0 says so, once, before anyone
// waits.
// A link whose consumer receives in another order than its producer sends (device 1 runs
// micro-batch 1 first; ZB-V's V does the same on its shared links): MPI delivers in sending order,
// and the receiver keeps a message that arrives ahead of its turn until its consumer asks.
TEST(CliMpiLaunch, KeepsAMessageThatArrivesAheadOfItsTurn) {
  REQUIRE_MPI();
  const std::string schedule = temp_path("mpi_reordered.txt");
  write_text(schedule,
             "# paci.schedule/1 kind=custom stages=2 microbatches=2 steps=1 "
             "weight_policy=current placement=0,1\n0F0 0F1 0B0 0B1 0U\n1F1 1F0 1B1 1B0 1U\n");
  const std::string one_metrics = temp_path("mpi_reordered_one.jsonl"),
                    many_metrics = temp_path("mpi_reordered_many.jsonl");
  const auto one = run_paci("train --schedule " + schedule + kTiny + testing::corpus_flags() +
                            " --metrics " + one_metrics);
  ASSERT_EQ(one.status, 0) << one.err;
  const auto r = run_shell(mpirun(2) + PACI_BINARY + " train --schedule " + schedule + kTiny +
                           testing::corpus_flags() + " --metrics " + many_metrics);
  ASSERT_EQ(r.status, 0) << r.err;
  const auto losses = step_losses(one_metrics);
  ASSERT_FALSE(losses.empty());
  EXPECT_EQ(step_losses(many_metrics), losses);  // the same doubles
}

TEST(CliMpiLaunch, RefusesProcessesWithDifferentSettingsOrCount) {
  REQUIRE_MPI();
  const std::string flags =
      " train -k 1f1b -p 2 -m 2 -n 1" + std::string(kTiny) + testing::corpus_flags();
  const std::string paci = PACI_BINARY;
  auto r = run_shell(mpirun(1) + paci + flags + " --seed 1 : -np 1 " + paci + flags + " --seed 2");
  EXPECT_EQ(r.status, 2) << r.err;
  auto lines = paci_lines(r.err);
  ASSERT_EQ(lines.size(), 1u) << r.err;
  EXPECT_THAT(lines[0], HasSubstr("process 1 runs another schedule or other settings"));
  r = run_shell(mpirun(3) + paci + flags);
  EXPECT_EQ(r.status, 2) << r.err;
  lines = paci_lines(r.err);
  ASSERT_EQ(lines.size(), 1u) << r.err;
  EXPECT_THAT(lines[0], HasSubstr("the launch has 3 processes but the schedule has 2 devices"));
  // What only one process meets (its data missing on its node) is said by that process.
  r = run_shell(mpirun(1) + paci + flags + " : -np 1 " + paci + flags +
                " --init /nonexistent/paci_model.bin");
  EXPECT_EQ(r.status, 2) << r.err;
  lines = paci_lines(r.err);
  ASSERT_EQ(lines.size(), 1u) << r.err;
  EXPECT_THAT(lines[0], HasSubstr("/nonexistent/paci_model.bin"));
}

// Runs `command` in the background, then `then` (a shell fragment that may use $M, mpirun's PID),
// and prints "elapsed_ms=N" from the end of `then` to mpirun's exit and "rc=N".
testing::Result run_timed(const std::string& command, const std::string& then = "") {
  return run_shell("( " + command + " ) & M=$!; " + then +
                   " start=$(date +%s%N); wait $M; rc=$?; end=$(date +%s%N); "
                   "echo elapsed_ms=$(( (end - start) / 1000000 )) rc=$rc");
}

int field(const std::string& out, const std::string& name) {
  const std::size_t at = out.rfind(name + "=");
  return at == std::string::npos ? -1 : std::stoi(out.substr(at + name.size() + 1));
}

// A rank that fails ends every process promptly: one line names device, stage and action; the
// exit status is non-zero; the checkpoint and the report are left as they were.
TEST(CliMpiLaunch, AFailingRankEndsTheLaunchInOneLine) {
  REQUIRE_MPI();
  const std::string state = temp_path("mpi_fail.state"), report = temp_path("mpi_fail.json");
  write_text(state, "previous");
  std::remove(report.c_str());
  const std::string flags = " train -k paci -p 4 -m 4 -n 200" + std::string(kTiny) +
                            testing::corpus_flags() + " --save " + state + " --report " + report;
  const auto r = run_timed(mpirun(4) + PACI_BINARY + flags + " --fail-at 2B37");
  EXPECT_NE(field(r.out, "rc"), 0) << r.out << r.err;
  EXPECT_LT(field(r.out, "elapsed_ms"), 10000);
  const auto lines = paci_lines(r.err);
  ASSERT_EQ(lines.size(), 1u) << r.err;
  EXPECT_THAT(lines[0], HasSubstr("device 2, stage 2, action 2B37: injected failure"));
  EXPECT_EQ(slurp(state), "previous");
  EXPECT_EQ(slurp(report), "");
  // A NaN on the last stage's process: the same.
  const auto nan = run_timed(
      mpirun(2) + PACI_BINARY + " train -k 1f1b -p 2 -m 2 -n 6 --lr 1e30 --warmup-steps 0" +
      std::string(kTiny) + testing::corpus_flags() + " --save " + state + " --report " + report);
  EXPECT_NE(field(nan.out, "rc"), 0) << nan.err;
  EXPECT_LT(field(nan.out, "elapsed_ms"), 10000);
  EXPECT_EQ(slurp(report), "");
  const auto nan_lines = paci_lines(nan.err);
  ASSERT_EQ(nan_lines.size(), 1u) << nan.err;
  EXPECT_THAT(nan_lines[0], HasSubstr("loss is"));
  EXPECT_EQ(slurp(state), "previous");
}

// A rank killed with SIGKILL: mpirun names it and ends the others within 10 s.
TEST(CliMpiLaunch, AKilledRankEndsTheLaunch) {
  REQUIRE_MPI();
  const std::string pids = temp_path("mpi_pids");
  run_shell("rm -rf " + pids + " && mkdir -p " + pids);
  const std::string flags =
      " train -k 1f1b -p 2 -m 4 -n 100000" + std::string(kTiny) + testing::corpus_flags();
  // Each rank writes its PID, then becomes paci (exec keeps the PID).
  const std::string rank =
      "sh -c 'echo $$ > " + pids + "/$OMPI_COMM_WORLD_RANK; exec " + PACI_BINARY + flags + "'";
  const auto r = run_timed(mpirun(2) + rank, "for i in $(seq 200); do [ -s " + pids +
                                                 "/1 ] && break; sleep 0.05; done; sleep 2; "
                                                 "kill -9 $(cat " +
                                                 pids + "/1);");
  EXPECT_NE(field(r.out, "rc"), 0) << r.out << r.err;
  EXPECT_LT(field(r.out, "elapsed_ms"), 10000) << r.err;
  EXPECT_THAT(r.err, HasSubstr("rank 1"));
}

// paci calibrate under mpirun: the link between every pair of processes goes into the cost model
// (both directions, the median pair as the default), which paci simulate then reads.
TEST(CliMpiLaunch, CalibrateMeasuresTheLinkOfEveryPair) {
  REQUIRE_MPI();
  const std::string model = temp_path("mpi_costmodel.json"), links = temp_path("mpi_links.json");
  const std::string shape = " --layers 3 --heads 2 --d-model 32 --seq-len 16 --batch 2 ";
  auto r = run_shell(mpirun(3) + PACI_BINARY + " calibrate --stages 3 --repeats 2 --max-rounds 2" +
                     shape + testing::corpus_flags() + " -o " + model + " --quiet");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto m = nlohmann::json::parse(slurp(model));
  ASSERT_EQ(m["links"].size(), 6u);  // 3 pairs, both directions
  for (const auto& l : m["links"]) {
    EXPECT_NE(l["src_device"], l["dst_device"]);
    EXPECT_GT(l["latency_s"].get<double>(), 0.0);
    EXPECT_GT(l["bandwidth_bytes_per_s"].get<double>(), 0.0);
  }
  EXPECT_GT(m["default_link"]["latency_s"].get<double>(), 0.0);
  ASSERT_EQ(m["hosts"].size(), 1u);  // one node: the three devices share it
  EXPECT_EQ(m["hosts"][0]["devices"], nlohmann::json({0, 1, 2}));
  const std::string schedule = temp_path("mpi_calibrated.json");
  ASSERT_EQ(run_paci("schedule -k paci -p 3 -m 3 -n 2 -o " + schedule).status, 0);
  const auto simulated = run_paci("simulate " + schedule + " --cost " + model + " --quiet");
  EXPECT_EQ(simulated.status, 0) << simulated.err;
  r = run_shell(mpirun(2) + PACI_BINARY + " calibrate --links-only" + shape +
                testing::corpus_flags() + " --details " + links + " --quiet");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto pairs = nlohmann::json::parse(slurp(links));
  ASSERT_EQ(pairs["pairs"].size(), 1u);
  EXPECT_EQ(pairs["nodes"].size(), 2u);
  const auto& latency = pairs["pairs"][0]["latency_s"];
  EXPECT_LE(latency["min"].get<double>(), latency["median"].get<double>());
  EXPECT_LE(latency["median"].get<double>(), latency["max"].get<double>());
  const auto alone = run_paci("calibrate --links-only" + shape + testing::corpus_flags());
  EXPECT_EQ(alone.status, 2);
  EXPECT_THAT(alone.err, HasSubstr("run it under mpirun"));
}

// paci fidelity under mpirun adds the rows run one process per device, predicted with the links.
TEST(CliMpiLaunch, FidelityAddsRowsRunOneProcessPerDevice) {
  REQUIRE_MPI();
  const std::string out = temp_path("mpi_fidelity.json");
  const std::string flags =
      " fidelity --stages 2 --microbatches 2 --steps 2 --kinds 1f1b "
      "--processes paci --repeats 1 --calibration-repeats 2" +
      std::string(kTiny) + testing::corpus_flags() + " --json " + out;
  const auto r = run_shell(mpirun(2) + PACI_BINARY + flags);
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(slurp(out));
  ASSERT_EQ(j["runs"].size(), 2u);
  EXPECT_EQ(j["runs"][0]["processes"], 1);
  const auto& row = j["runs"][1];
  EXPECT_EQ(row["kind"], "paci");
  EXPECT_EQ(row["processes"], 2);
  EXPECT_GT(row["measured_makespan_s"].get<double>(), 0.0);
  EXPECT_GT(row["predicted_makespan_s"].get<double>(), 0.0);
  EXPECT_EQ(row["staleness_equal"], true);
  EXPECT_EQ(j["process_links"]["pairs"].size(), 1u);
  EXPECT_THAT(r.out, HasSubstr("paci, 2 processes (MPI)"));
  const auto alone = run_paci(flags);
  EXPECT_EQ(alone.status, 2);
  EXPECT_THAT(alone.err, HasSubstr("start paci fidelity under mpirun -np 2"));
}

// A whole model's state resumed under --ep (each process takes its part of the experts) goes on
// as one process does; the launch's refusals, each one line and exit 2; a killed rank ends it.
TEST(CliMpiLaunch, ExpertParallelResumesRefusesAndEnds) {
  REQUIRE_MPI();
  const std::string base = temp_path("ep_resume");
  const std::string model = std::string(kTiny) + kMoe + " " + testing::corpus_flags();
  ASSERT_EQ(
      run_paci(" train -k 1f1b -p 2 -m 2 -n 2" + model + " --save " + base + "0.state").status, 0);
  const std::string go_on =
      " train -k 1f1b -p 2 -m 2 -n 4 --resume " + base + "0.state" + model + " --save ";
  const auto one = run_paci(go_on + base + "1.state");
  ASSERT_EQ(one.status, 0) << one.err;
  const auto many = run_shell(mpirun(4) + PACI_BINARY + go_on + base + "2.state --ep 2");
  ASSERT_EQ(many.status, 0) << many.err;
  EXPECT_TRUE(slurp(base + "1.state") == slurp(base + "2.state")) << "checkpoints differ";

  const std::string flags = " train -k 1f1b -p 2 -m 2 -n 2" + model;
  auto r = run_shell(mpirun(3) + PACI_BINARY + flags + " --ep 2");
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("times --ep 2 need 4: start one process per device and expert "
                               "part (mpirun -np 4)"));
  r = run_shell(mpirun(4) + PACI_BINARY + flags + " --ep 2 --clip 1");
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_EQ(paci_lines(r.err).size(), 1u) << r.err;
  EXPECT_THAT(r.err, HasSubstr("--clip with --ep 2"));

  // A failure every part of a device meets (an injected one, a NaN loss): one line, from part 0,
  // and every process ends; a killed rank: mpirun ends the others.
  const auto failed = run_timed(mpirun(4) + PACI_BINARY + " train -k 1f1b -p 2 -m 4 -n 200" +
                                model + " --ep 2 --fail-at 1B37");
  EXPECT_NE(field(failed.out, "rc"), 0) << failed.out << failed.err;
  EXPECT_LT(field(failed.out, "elapsed_ms"), 10000);
  const auto lines = paci_lines(failed.err);
  ASSERT_EQ(lines.size(), 1u) << failed.err;
  EXPECT_THAT(lines[0], HasSubstr("action 1B37: injected failure"));
  const auto nan = run_timed(mpirun(4) + PACI_BINARY + " train -k 1f1b -p 2 -m 2 -n 6" + model +
                             " --ep 2 --lr 1e30 --warmup-steps 0");
  EXPECT_NE(field(nan.out, "rc"), 0) << nan.err;
  EXPECT_LT(field(nan.out, "elapsed_ms"), 10000);
  const auto nan_lines = paci_lines(nan.err);
  ASSERT_EQ(nan_lines.size(), 1u) << nan.err;
  EXPECT_THAT(nan_lines[0], HasSubstr("loss is"));
  const std::string pids = temp_path("ep_pids");
  run_shell("rm -rf " + pids + " && mkdir -p " + pids);
  const std::string rank = "sh -c 'echo $$ > " + pids + "/$OMPI_COMM_WORLD_RANK; exec " +
                           PACI_BINARY + " train -k 1f1b -p 2 -m 4 -n 100000" + model + " --ep 2'";
  const auto killed = run_timed(mpirun(4) + rank, "for i in $(seq 200); do [ -s " + pids +
                                                      "/3 ] && break; sleep 0.05; done; sleep 2; "
                                                      "kill -9 $(cat " +
                                                      pids + "/3);");
  EXPECT_NE(field(killed.out, "rc"), 0) << killed.out << killed.err;
  EXPECT_LT(field(killed.out, "elapsed_ms"), 10000) << killed.err;
  EXPECT_THAT(killed.err, HasSubstr("rank 3"));
}

// The parts of a device must route its tokens alike; a part given other data of the same size
// (the launch's fingerprint counts the data's bytes, not what they are) routes differently: the
// run stops at the first expert exchange, in one line naming it, every process ends.
TEST(CliMpiLaunch, ExpertPartsThatRouteDifferentlyStopInOneLine) {
  REQUIRE_MPI();
  const auto corpus = [](const std::string& name, const std::string& word) {
    std::string text;
    for (int i = 0; i < 400; ++i)
      text += "In the beginning God created the " + word + " and the earth. Verse " +
              std::to_string(i) + ".\n";
    const std::string txt = temp_path(name + ".txt");
    write_text(txt, text);
    const auto r = run_paci("data tokenize " + txt + " --train " + temp_path(name + "_train.bin") +
                            " --val " + temp_path(name + "_val.bin"));
    EXPECT_EQ(r.status, 0) << r.err;
  };
  corpus("route_a", "heaven");
  corpus("route_b", "HEAVEN");  // the same length: shards of the same size, other tokens
  ASSERT_EQ(slurp(temp_path("route_a_train.bin")).size(),
            slurp(temp_path("route_b_train.bin")).size());
  // Rank 1 (device 0's second expert part) reads the other corpus.
  const std::string rank =
      "sh -c 'c=route_a; [ \"$OMPI_COMM_WORLD_RANK\" = 1 ] && c=route_b; exec " +
      std::string(PACI_BINARY) + " train -k 1f1b -p 1 -m 2 -n 4" + kTiny + kMoe +
      " --ep 2 --data " + temp_path("") + "${c}_train.bin --val-data " + temp_path("") +
      "${c}_val.bin'";
  const auto r = run_timed(mpirun(2) + rank);
  EXPECT_NE(field(r.out, "rc"), 0) << r.out << r.err;
  EXPECT_LT(field(r.out, "elapsed_ms"), 10000) << r.err;
  const auto lines = paci_lines(r.err);
  ASSERT_EQ(lines.size(), 1u) << r.err;
  EXPECT_THAT(lines[0], HasSubstr("routes differently in its parts 0 and 1"));
}

}  // namespace
}  // namespace paci
