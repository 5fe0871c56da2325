// The BLAS kernel check through the real binary: paci --version names the kernel and who chose it;
// a simulated OpenBLAS fallback is corrected by one re-execution, a user's OPENBLAS_CORETYPE is
// respected silently, paci never re-executes twice; the train report and metrics carry "blas".
#include <cblas.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <sstream>
#include <string>

#include "model/blas_kernel.hpp"
#include "tests/cli/run.hpp"

namespace paci {
namespace {

using ::testing::HasSubstr;
using testing::Result;
using testing::slurp;
using testing::temp_path;

// paci with `environment` in front (an `env` command line: -u NAME to unset, NAME=VALUE to set).
// paci's own markers are always cleared, so that what this test binary inherited does not count.
Result run_with_environment(const std::string& environment, const std::string& args) {
  return testing::run_shell(
      std::string("env -u PACI_BLAS_KERNEL_CHOSEN -u PACI_BLAS_KERNEL_REPLACED ") + environment +
      " " + PACI_BINARY + " " + args);
}

// The kernel name in "blas: OpenBLAS 0.3.21, kernel SkylakeX (...)".
std::string kernel_in(const std::string& version_text) {
  const std::size_t start = version_text.find(", kernel ");
  if (start == std::string::npos) return "";
  const std::size_t name = start + std::string(", kernel ").size();
  return version_text.substr(name, version_text.find(' ', name) - name);
}

model::VectorClass this_cpu() {
  return model::cpu_vector_class(model::detect_cpu_features());
}

// Only a DYNAMIC_ARCH OpenBLAS reads OPENBLAS_CORETYPE.
bool dynamic_arch() {
  return model::blas_dynamic_arch(openblas_get_config());
}

const char* const kNotDynamicArch = "OpenBLAS without DYNAMIC_ARCH ignores OPENBLAS_CORETYPE";

TEST(CliBlas, VersionNamesTheKernel) {
  const Result r = run_with_environment("", "--version");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("\nblas: OpenBLAS "));
  EXPECT_THAT(r.out, HasSubstr(std::string("CPU: ") + std::string(model::to_string(this_cpu()))));
  EXPECT_NE(kernel_in(r.out), "") << r.out;
}

// The machine, simulated: OpenBLAS "picks" Prescott; paci re-runs itself on the kernel
// of the CPU's class and says so.
TEST(CliBlas, SimulatedFallbackIsCorrectedByPaci) {
  if (!dynamic_arch()) GTEST_SKIP() << kNotDynamicArch;
  const Result r =
      run_with_environment("OPENBLAS_CORETYPE=Prescott PACI_BLAS_TEST_FALLBACK=1", "--version");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err, "");
  const std::string kernel = kernel_in(r.out);
  EXPECT_EQ(model::kernel_class(kernel), this_cpu()) << r.out;
  if (this_cpu() == model::VectorClass::sse)
    EXPECT_THAT(r.out, HasSubstr("kernel Prescott (OpenBLAS's choice"));
  else
    EXPECT_THAT(r.out, HasSubstr("(chosen by paci: OpenBLAS picked Prescott;"));
}

TEST(CliBlas, UserCoretypeIsRespectedSilently) {
  if (!dynamic_arch()) GTEST_SKIP() << kNotDynamicArch;
  const Result r =
      run_with_environment("-u PACI_BLAS_TEST_FALLBACK OPENBLAS_CORETYPE=Prescott", "--version");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_THAT(r.out, HasSubstr("kernel Prescott (set by OPENBLAS_CORETYPE=Prescott;"));
}

// With paci's marker set, paci never re-executes: a kernel that still does not fit gets one
// warning line (here the marker names an old kernel on purpose, as an OpenBLAS that ignored the
// variable would leave it).
TEST(CliBlas, NeverReExecutesTwice) {
  if (!dynamic_arch()) GTEST_SKIP() << kNotDynamicArch;
  if (this_cpu() == model::VectorClass::sse) GTEST_SKIP() << "Prescott fits this CPU";
  const Result r = run_with_environment(
      "-u PACI_BLAS_TEST_FALLBACK OPENBLAS_CORETYPE=Prescott PACI_BLAS_KERNEL_CHOSEN=Prescott",
      "--version");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("kernel Prescott (chosen by paci;"));
  EXPECT_THAT(r.err, HasSubstr("warning: OpenBLAS runs its Prescott kernel on a CPU with "));
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

// The train report's "blas" object and the metrics' first line, under a simulated fallback.
TEST(CliBlas, TrainReportAndMetricsCarryTheKernel) {
  const std::string report = temp_path("blas_report.json"), metrics = temp_path("blas.jsonl");
  const std::string args =
      "train -k 1f1b -p 2 -m 2 --steps 2 --layers 2 --heads 2 --d-model 32 "
      "--seq-len 16 --batch 2 --quiet" +
      testing::corpus_flags() + "--report " + report + " --metrics " + metrics;
  const Result r = run_with_environment(
      dynamic_arch() ? "OPENBLAS_CORETYPE=Prescott PACI_BLAS_TEST_FALLBACK=1" : "", args);
  ASSERT_EQ(r.status, 0) << r.err;
  const auto blas = nlohmann::json::parse(slurp(report))["blas"];
  for (const char* key : {"library", "kernel", "chosen_by", "cpu"})
    EXPECT_TRUE(blas.contains(key)) << key << " missing in " << blas.dump();
  EXPECT_EQ(blas["cpu"], std::string(model::to_string(this_cpu())));
  if (dynamic_arch() && this_cpu() != model::VectorClass::sse) {
    EXPECT_EQ(blas["chosen_by"], "paci");
    EXPECT_EQ(blas["openblas_choice"], "Prescott");
  }
  std::istringstream lines(slurp(metrics));
  std::string first;
  ASSERT_TRUE(std::getline(lines, first));
  const auto head = nlohmann::json::parse(first);
  EXPECT_FALSE(head.contains("step")) << first;
  EXPECT_EQ(head["run"]["kind"], "1f1b");
  EXPECT_EQ(head["blas"], blas);
  int steps = 0;
  for (std::string line; std::getline(lines, line);)
    steps += nlohmann::json::parse(line).contains("loss") ? 1 : 0;
  EXPECT_EQ(steps, 2);
}

}  // namespace
}  // namespace paci
