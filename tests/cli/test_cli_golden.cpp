// Measured runs against golden files: the step losses, the versions every F and B read and the
// final weights of a few schedules, bitwise as a binary from before the executors interpreted the
// lowered program recorded them (tests/golden/executor_runs.json). The runs use OpenBLAS's Prescott
// kernel and one thread, the same code on every x86-64 CPU, so the file holds on any machine.
// Rewrite the file (after a change that is meant to change the numbers) with
//   PACI_GOLDEN_WRITE=1 build/tests/paci_tests --gtest_filter='CliGolden.*'
// and with PACI_GOLDEN_BINARY=path/to/paci to record another binary's runs.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/cli/run.hpp"

namespace paci {
namespace {

using testing::corpus_flags;
using testing::run_shell;
using testing::slurp;
using testing::temp_path;

std::uint64_t fnv1a(const std::string& bytes) {
  std::uint64_t h = 14695981039346656037ull;
  for (const char c : bytes) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ull;
  }
  return h;
}

// One run of `kind`: its step losses, versions and the FNV-1a of its exported weights.
nlohmann::json golden_run(const std::string& kind, const std::string& binary) {
  const std::string report = temp_path(kind + "_golden_report.json");
  const std::string weights = temp_path(kind + "_golden.llmc.bin");
  // No kernel choice or simulated fallback of the test's own environment reaches the run.
  const std::string env =
      "env -u PACI_BLAS_TEST_FALLBACK -u PACI_BLAS_KERNEL_CHOSEN -u PACI_BLAS_KERNEL_REPLACED "
      "OPENBLAS_CORETYPE=Prescott OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 ";
  const auto r = run_shell(env + binary + " train --kind " + kind +
                           " -p 2 -m 4 -n 3 --layers 4 --heads 2 --d-model 32 --seq-len 16 "
                           "--batch 2 --threads 1 --seed 7 --quiet" +
                           corpus_flags() + "--report " + report + " --export-llmc " + weights);
  if (r.status != 0) {
    ADD_FAILURE() << kind << ": exit " << r.status << ": " << r.err;
    return nullptr;
  }
  const auto j = nlohmann::json::parse(slurp(report));
  EXPECT_EQ(j.at("blas").at("kernel"), "Prescott") << kind;
  return {{"kind", kind},
          {"loss", j.at("loss")},
          {"versions", j.at("versions")},
          {"weights_fnv1a", fmt::format("{:016x}", fnv1a(slurp(weights)))}};
}

TEST(CliGolden, MeasuredRunsMatchTheGoldenFileBitwise) {
  const char* other = std::getenv("PACI_GOLDEN_BINARY");
  const std::string binary = other ? other : PACI_BINARY;
  nlohmann::json runs = nlohmann::json::array();
  for (const std::string kind : {"1f1b", "pipedream", "2bw", "paci", "zb-h1", "interleaved"})
    runs.push_back(golden_run(kind, binary));
  const std::string path = std::string(PACI_GOLDEN_DIR) + "/executor_runs.json";
  if (std::getenv("PACI_GOLDEN_WRITE")) {
    testing::write_text(path, runs.dump(1) + "\n");
    GTEST_SKIP() << "wrote " << path;
  }
  const auto golden = nlohmann::json::parse(slurp(path));
  ASSERT_EQ(golden.size(), runs.size());
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const std::string kind = runs[i]["kind"];
    EXPECT_EQ(golden[i]["kind"], kind);
    EXPECT_EQ(golden[i]["loss"], runs[i]["loss"]) << kind;
    EXPECT_EQ(golden[i]["versions"], runs[i]["versions"]) << kind;
    EXPECT_EQ(golden[i]["weights_fnv1a"], runs[i]["weights_fnv1a"]) << kind;
  }
}

}  // namespace
}  // namespace paci
