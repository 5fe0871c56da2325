// Tests of model/blas_kernel.hpp with injected inputs: the CPU class of each feature set, the class
// of each OpenBLAS core name, the library and chooser parsed from config and environment, the
// decision for every (CPU class, running kernel, who set it), the report text; and on this
// machine, that the running kernel is no older than the CPU (unless the user chose it).
#include "model/blas_kernel.hpp"

#include <cblas.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace paci::model {
namespace {

constexpr const char* kConfig =
    "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH NO_AFFINITY SkylakeX MAX_THREADS=64";

CpuFeatures avx512() {
  return {.avx = true,
          .avx2 = true,
          .fma = true,
          .avx512f = true,
          .avx512bw = true,
          .avx512vl = true,
          .avx512dq = true,
          .avx512cd = true};
}

TEST(BlasKernel, CpuClassOfEachFeatureSet) {
  EXPECT_EQ(cpu_vector_class(avx512()), VectorClass::avx512);
  EXPECT_EQ(cpu_vector_class({.avx = true, .avx2 = true, .fma = true}), VectorClass::avx2);
  EXPECT_EQ(cpu_vector_class({.avx = true}), VectorClass::avx);
  EXPECT_EQ(cpu_vector_class({}), VectorClass::sse);
  // Every one of F, BW, VL, DQ and CD is needed for the AVX-512 class (Xeon Phi has F and CD only).
  for (bool CpuFeatures::*missing :
       {&CpuFeatures::avx512f, &CpuFeatures::avx512bw, &CpuFeatures::avx512vl,
        &CpuFeatures::avx512dq, &CpuFeatures::avx512cd}) {
    CpuFeatures f = avx512();
    f.*missing = false;
    EXPECT_EQ(cpu_vector_class(f), VectorClass::avx2);
  }
  EXPECT_EQ(cpu_vector_class({.avx = true, .avx2 = true}), VectorClass::avx);  // no FMA
  EXPECT_EQ(cpu_vector_class({.avx = true, .fma = true}), VectorClass::avx);   // no AVX2
}

TEST(BlasKernel, ClassesAreOrderedAndEachHasAKernelOfThatClass) {
  EXPECT_LT(VectorClass::sse, VectorClass::avx);
  EXPECT_LT(VectorClass::avx, VectorClass::avx2);
  EXPECT_LT(VectorClass::avx2, VectorClass::avx512);
  EXPECT_EQ(kernel_for(VectorClass::avx512), "SkylakeX");
  EXPECT_EQ(kernel_for(VectorClass::avx2), "Haswell");
  EXPECT_EQ(kernel_for(VectorClass::avx), "Sandybridge");
  EXPECT_EQ(kernel_for(VectorClass::sse), "Prescott");
  for (VectorClass c :
       {VectorClass::sse, VectorClass::avx, VectorClass::avx2, VectorClass::avx512}) {
    EXPECT_EQ(kernel_class(kernel_for(c)), c) << to_string(c);
  }
  EXPECT_EQ(to_string(VectorClass::avx512), "AVX-512");
}

struct NamedKernel {
  std::string name;
  VectorClass vector_class;
};

const std::vector<NamedKernel>& named_kernels() {
  static const std::vector<NamedKernel> kernels{
      {"Prescott", VectorClass::sse},
      {"Core2", VectorClass::sse},
      {"Penryn", VectorClass::sse},
      {"Dunnington", VectorClass::sse},
      {"Nehalem", VectorClass::sse},
      {"Atom", VectorClass::sse},
      {"Opteron", VectorClass::sse},
      {"Barcelona", VectorClass::sse},
      {"Bobcat", VectorClass::sse},
      {"Sandybridge", VectorClass::avx},
      {"Bulldozer", VectorClass::avx},
      {"Piledriver", VectorClass::avx},
      {"Steamroller", VectorClass::avx},
      {"Excavator", VectorClass::avx},
      {"Haswell", VectorClass::avx2},
      {"Zen", VectorClass::avx2},
      {"SkylakeX", VectorClass::avx512},
      {"Cooperlake", VectorClass::avx512},
      {"SapphireRapids", VectorClass::avx512},
  };
  return kernels;
}

std::string upper(std::string s) {
  for (char& c : s)
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  return s;
}

TEST(BlasKernel, ClassOfEachCoreNameIgnoringCase) {
  for (const NamedKernel& k : named_kernels()) {
    EXPECT_EQ(kernel_class(k.name), k.vector_class) << k.name;
    EXPECT_EQ(kernel_class(upper(k.name)), k.vector_class) << k.name;
  }
  EXPECT_EQ(kernel_class("skylakex"), VectorClass::avx512);
  for (const char* unknown : {"Unknown", "", "ARMV8", "NEOVERSEN1", "Zen5", "SkylakeX2"})
    EXPECT_EQ(kernel_class(unknown), std::nullopt) << unknown;
}

TEST(BlasKernel, LibraryAndDynamicArchFromTheConfigString) {
  EXPECT_EQ(blas_library(kConfig), "OpenBLAS 0.3.21");
  EXPECT_EQ(blas_library("OpenBLAS 0.3.26.dev DYNAMIC_ARCH"), "OpenBLAS 0.3.26.dev");
  EXPECT_EQ(blas_library("  OpenBLAS   0.3.21  "), "OpenBLAS 0.3.21");
  EXPECT_EQ(blas_library("SomeBLAS"), "SomeBLAS");
  EXPECT_EQ(blas_library(""), "unknown BLAS");
  EXPECT_TRUE(blas_dynamic_arch(kConfig));
  EXPECT_FALSE(blas_dynamic_arch("OpenBLAS 0.3.21 NO_LAPACKE NO_AFFINITY HASWELL MAX_THREADS=64"));
}

TEST(BlasKernel, WhoChoseTheKernel) {
  EXPECT_EQ(kernel_chooser({}), KernelChooser::openblas);
  EXPECT_EQ(kernel_chooser({.coretype = "Haswell"}), KernelChooser::user);
  EXPECT_EQ(kernel_chooser({.coretype = "Prescott", .test_fallback = true}),
            KernelChooser::openblas);
  EXPECT_EQ(kernel_chooser({.coretype = "SkylakeX", .chosen = "SkylakeX"}), KernelChooser::paci);
  EXPECT_EQ(kernel_chooser({.coretype = "skylakex", .chosen = "SkylakeX"}), KernelChooser::paci);
  // A marker that no longer matches OPENBLAS_CORETYPE is stale (inherited from a paci that ran
  // this process with another variable): the variable is the user's again.
  EXPECT_EQ(kernel_chooser({.coretype = "Prescott", .chosen = "SkylakeX"}), KernelChooser::user);
  EXPECT_EQ(kernel_chooser({.coretype = "Prescott", .chosen = "SkylakeX", .test_fallback = true}),
            KernelChooser::openblas);
  EXPECT_EQ(kernel_chooser({.chosen = "SkylakeX"}), KernelChooser::openblas);
  EXPECT_EQ(to_string(KernelChooser::paci), "paci");
}

// Every CPU class against every running kernel older than it, of its class, newer than it and
// unknown; as OpenBLAS's own choice, the user's, and after paci chose once.
TEST(BlasKernel, DecisionForEveryCpuAndRunningKernel) {
  const std::vector<std::string> unknown{"Unknown", "ARMV8", "Zen5"};
  for (VectorClass cpu :
       {VectorClass::sse, VectorClass::avx, VectorClass::avx2, VectorClass::avx512}) {
    std::vector<std::pair<std::string, std::optional<VectorClass>>> running;
    for (const NamedKernel& k : named_kernels()) running.emplace_back(k.name, k.vector_class);
    for (const std::string& name : unknown) running.emplace_back(name, std::nullopt);
    for (const auto& [name, running_class] : running) {
      SCOPED_TRACE(std::string(to_string(cpu)) + " running " + name);
      const bool older = running_class && *running_class < cpu;

      const KernelDecision own = decide_kernel(cpu, name, std::nullopt, false);
      EXPECT_EQ(own.action, older ? KernelAction::switch_kernel : KernelAction::keep);
      EXPECT_EQ(own.kernel, older ? std::string(kernel_for(cpu)) : name);
      EXPECT_FALSE(own.reason.empty());

      const KernelDecision user = decide_kernel(cpu, name, std::string(name), false);
      EXPECT_EQ(user.action, KernelAction::keep);
      EXPECT_EQ(user.kernel, name);
      EXPECT_NE(user.reason.find("OPENBLAS_CORETYPE"), std::string::npos) << user.reason;

      const KernelDecision again = decide_kernel(cpu, name, std::nullopt, true);
      EXPECT_EQ(again.action, older ? KernelAction::warn : KernelAction::keep);
      EXPECT_EQ(again.kernel, name);
    }
  }
  // The machine: AVX-512 CPU, OpenBLAS on Prescott.
  const KernelDecision d = decide_kernel(VectorClass::avx512, "Prescott", std::nullopt, false);
  EXPECT_EQ(d.kernel, "SkylakeX");
  EXPECT_EQ(d.reason, "OpenBLAS picked Prescott (SSE) on a CPU with AVX-512");
}

TEST(BlasKernel, IdentityAndItsDescription) {
  const auto avx512_cpu = std::optional<VectorClass>(VectorClass::avx512);
  BlasIdentity own = identify_blas(kConfig, "SkylakeX", {}, avx512_cpu);
  EXPECT_EQ(own.library, "OpenBLAS 0.3.21");
  EXPECT_EQ(own.chosen_by, KernelChooser::openblas);
  EXPECT_EQ(describe(own), "OpenBLAS 0.3.21, kernel SkylakeX (OpenBLAS's choice; CPU: AVX-512)");

  const BlasIdentity paci = identify_blas(
      kConfig, "SkylakeX", {.coretype = "SkylakeX", .chosen = "SkylakeX", .replaced = "Prescott"},
      avx512_cpu);
  EXPECT_EQ(paci.chosen_by, KernelChooser::paci);
  EXPECT_EQ(paci.openblas_choice, "Prescott");
  EXPECT_EQ(describe(paci),
            "OpenBLAS 0.3.21, kernel SkylakeX (chosen by paci: OpenBLAS picked Prescott; CPU: "
            "AVX-512)");

  const BlasIdentity user =
      identify_blas(kConfig, "Prescott", {.coretype = "Prescott"}, avx512_cpu);
  EXPECT_EQ(user.chosen_by, KernelChooser::user);
  EXPECT_EQ(describe(user),
            "OpenBLAS 0.3.21, kernel Prescott (set by OPENBLAS_CORETYPE=Prescott; CPU: AVX-512)");

  // A simulated fallback before paci re-ran: OpenBLAS's choice.
  EXPECT_EQ(identify_blas(kConfig, "Prescott", {.coretype = "Prescott", .test_fallback = true},
                          avx512_cpu)
                .chosen_by,
            KernelChooser::openblas);

  // paci chose, but this OpenBLAS ignored the variable.
  const BlasIdentity ignored = identify_blas(
      "OpenBLAS 0.3.21 HASWELL", "Haswell",
      {.coretype = "SkylakeX", .chosen = "SkylakeX", .replaced = "Haswell"}, avx512_cpu);
  EXPECT_EQ(describe(ignored),
            "OpenBLAS 0.3.21, kernel Haswell (paci chose SkylakeX, which this OpenBLAS ignored; "
            "CPU: AVX-512)");
  EXPECT_EQ(describe(identify_blas("OpenBLAS 0.3.21", "ARMV8", {}, std::nullopt)),
            "OpenBLAS 0.3.21, kernel ARMV8 (OpenBLAS's choice; CPU: not x86)");
}

// This machine: whatever chose the kernel (OpenBLAS, or paci in tests/main.cpp), it is no older
// than the CPU's widest vector unit. CI reruns the suite on older kernels on purpose, through
// OPENBLAS_CORETYPE: then there is nothing to check.
TEST(BlasKernel, RunningKernelFitsThisCpu) {
  const BlasIdentity id = blas_identity();
  if (id.chosen_by == KernelChooser::user)
    GTEST_SKIP() << "OPENBLAS_CORETYPE=" << id.requested << " set by the user: " << describe(id);
  if (!id.cpu) GTEST_SKIP() << "not an x86 CPU";
  const std::optional<VectorClass> running = kernel_class(id.kernel);
  if (!running) GTEST_SKIP() << "kernel " << id.kernel << " has no known class";
  if (!blas_dynamic_arch(openblas_get_config()))
    GTEST_SKIP() << "this OpenBLAS has one kernel (no DYNAMIC_ARCH): " << describe(id);
  EXPECT_GE(*running, *id.cpu) << describe(id);
  EXPECT_EQ(id.library.rfind("OpenBLAS ", 0), 0u) << openblas_get_config();
}

}  // namespace
}  // namespace paci::model
