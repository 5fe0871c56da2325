// The launch scripts `paci plan -o DIR` writes: run with PACI_DRY_RUN=1 by bash, they print the
// command they would launch; nodes, processes per node, the environment, absolute paths and the
// model are checked on that command. scripts/interop.sh feeds the same commands to the tools.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "interop/launch.hpp"
#include "tests/interop/plans.hpp"

namespace paci::interop {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

class InteropLaunch : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = std::filesystem::temp_directory_path() /
           fmt::format("paci_{}_{}_{}", info->test_suite_name(), info->name(), ::getpid());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string text(const std::string& name) const {
    std::ifstream in(dir_ / name);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
  }
  // The words the script would launch, from bash itself (PACI_DRY_RUN=1).
  std::vector<std::string> dry_run(const std::string& name, const std::string& env = "") const {
    const std::string cmd =
        fmt::format("cd / && env PACI_DRY_RUN=1 MEGATRON_LM=/opt/mlm {} bash '{}'", env,
                    (dir_ / name).string());
    FILE* pipe = ::popen(cmd.c_str(), "r");
    EXPECT_NE(pipe, nullptr);
    std::vector<std::string> words;
    char line[65536];
    while (pipe && std::fgets(line, sizeof line, pipe)) {
      std::string w(line);
      if (!w.empty() && w.back() == '\n') w.pop_back();
      words.push_back(w);
    }
    EXPECT_EQ(pipe ? ::pclose(pipe) : -1, 0) << cmd;
    return words;
  }
  std::filesystem::path dir_;
};

std::vector<std::string> after(const std::vector<std::string>& words, const std::string& word) {
  const auto it = std::find(words.begin(), words.end(), word);
  return it == words.end() ? std::vector<std::string>{}
                           : std::vector<std::string>(it + 1, words.end());
}

std::string first_after(const std::vector<std::string>& words, const std::string& word) {
  const std::vector<std::string> rest = after(words, word);
  return rest.empty() ? "" : rest.front();
}

TEST_F(InteropLaunch, MegatronAcrossNodes) {
  plan::PlanResult p = test::plan_of("llama3-70b", "1f1b", 64, 8, 4);  // 8 nodes of 8
  EXPECT_THAT(write_launch_files(p, dir_.string()), SizeIs(0));
  EXPECT_THAT(text("megatron.sh"), HasSubstr("\nexport CUDA_DEVICE_MAX_CONNECTIONS=1\n"));
  const std::vector<std::string> w = dry_run("megatron.sh", "NODE_RANK=3 MASTER_ADDR=n0");
  ASSERT_THAT(w, SizeIs(testing::Gt(12U)));
  EXPECT_THAT(std::vector<std::string>(w.begin(), w.begin() + 11),
              ElementsAre("torchrun", "--nnodes", "8", "--nproc-per-node", "8", "--node-rank", "3",
                          "--master-addr", "n0", "--master-port", "29500"));
  EXPECT_EQ(w[11], "/opt/mlm/pretrain_gpt.py");
  const std::vector<std::string> flags = after(w, "/opt/mlm/pretrain_gpt.py");
  EXPECT_EQ(first_after(flags, "--tensor-model-parallel-size"), "8");
  EXPECT_THAT(flags, Contains("--mock-data"));  // no DATA_PATH: mock data of the model's vocabulary
  EXPECT_EQ(first_after(flags, "--vocab-size"), "128256");
  // Real data when given.
  const std::vector<std::string> real =
      dry_run("megatron.sh", "DATA_PATH=/data/c4_text TOKENIZER_MODEL=/tok");
  EXPECT_EQ(first_after(real, "--data-path"), "/data/c4_text");
  EXPECT_THAT(real, testing::Not(Contains("--mock-data")));
}

TEST_F(InteropLaunch, TorchtitanLoadsTheCsvItsFolderHolds) {
  plan::PlanResult p = test::plan_of("llama3-8b", "zb-h1", 8, 1, 4);
  // A relative folder: the script must still name the CSV absolutely.
  const std::filesystem::path cwd = std::filesystem::current_path();
  std::filesystem::current_path(dir_);
  const std::vector<std::string> notes = write_launch_files(p, ".");
  std::filesystem::current_path(cwd);
  ASSERT_THAT(notes, ElementsAre(HasSubstr("megatron.sh not written: Megatron-LM cannot run a "
                                           "zb-h1 schedule")));
  const std::vector<std::string> w = dry_run("torchtitan.sh");
  EXPECT_THAT(std::vector<std::string>(w.begin(), w.begin() + 5),
              ElementsAre("torchrun", "--nnodes", "1", "--nproc-per-node", "8"));
  const std::vector<std::string> csv = after(w, "--parallelism.pipeline-parallel-schedule-csv");
  ASSERT_THAT(csv, testing::Not(IsEmpty()));
  EXPECT_TRUE(std::filesystem::path(csv.front()).is_absolute()) << csv.front();
  EXPECT_TRUE(std::filesystem::exists(csv.front())) << csv.front();
  EXPECT_EQ(w.back(), "activation-checkpoint:full");  // the subcommand after every option
  EXPECT_EQ(first_after(w, "--config"), "llama3_8b");
}

TEST_F(InteropLaunch, NothingForAToolThatCannotRunThePlan) {
  const std::vector<std::string> notes =
      write_launch_files(test::plan_of("llama3-8b", "paci", 8, 1, 4), dir_.string());
  EXPECT_THAT(notes, SizeIs(3U));
  for (const char* f : {"schedule.csv", "megatron.sh", "torchtitan.sh"})
    EXPECT_FALSE(std::filesystem::exists(dir_ / f)) << f;
}

}  // namespace
}  // namespace paci::interop
