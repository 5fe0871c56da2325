// Which OpenBLAS kernel runs, whether it fits the CPU, and who chose it. Small pure functions
// (testable with injected CPU features, core names and environment values) and one impure step,
// ensure_blas_kernel(), that re-executes the process once onto the right kernel when OpenBLAS fell
// back to an older one. The user's OPENBLAS_CORETYPE is always respected.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace paci::model {

// The widest vector unit a CPU has or a kernel uses, ordered: sse < avx < avx2 < avx512.
enum class VectorClass { sse, avx, avx2, avx512 };

// "SSE", "AVX", "AVX2", "AVX-512".
std::string_view to_string(VectorClass vector_class);

// What cpuid (and the OS, which must have enabled the register state) says this CPU can run.
struct CpuFeatures {
  bool avx = false, avx2 = false, fma = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false, avx512cd = false;
};

// This CPU's features (__builtin_cpu_supports); all false on a CPU that is not x86.
CpuFeatures detect_cpu_features();

// AVX-512 F+BW+VL+DQ+CD -> avx512; AVX2+FMA -> avx2; AVX -> avx; otherwise sse.
VectorClass cpu_vector_class(const CpuFeatures& features);

// The OpenBLAS kernel that fits a class: SkylakeX, Haswell, Sandybridge, Prescott.
std::string_view kernel_for(VectorClass vector_class);

// The vector class of an OpenBLAS core name (openblas_get_corename()), compared
// case-insensitively; nullopt for a name this table does not know (such kernels are left alone).
std::optional<VectorClass> kernel_class(std::string_view core_name);

// "OpenBLAS 0.3.21" from openblas_get_config() ("OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH ...");
// the first word when the text is not in that form.
std::string blas_library(std::string_view config);

// Whether the configuration string says DYNAMIC_ARCH (only such builds read OPENBLAS_CORETYPE).
bool blas_dynamic_arch(std::string_view config);

// Who chose the running kernel: OpenBLAS's own detection, the user (OPENBLAS_CORETYPE), or paci.
enum class KernelChooser { openblas, user, paci };

// "openblas", "user", "paci".
std::string_view to_string(KernelChooser chooser);

// The environment variables that decide who chose the kernel.
//   OPENBLAS_CORETYPE         read by OpenBLAS when it loads; set by the user, or by paci.
//   PACI_BLAS_KERNEL_CHOSEN   set by paci with OPENBLAS_CORETYPE: the kernel paci chose.
//   PACI_BLAS_KERNEL_REPLACED set by paci: the kernel OpenBLAS had picked itself.
//   PACI_BLAS_TEST_FALLBACK   testing aid: "1" makes this OPENBLAS_CORETYPE count as OpenBLAS's
//                             own detection (a simulated fallback), not as the user's choice.
struct BlasEnvironment {
  std::optional<std::string> coretype = {}, chosen = {}, replaced = {};
  bool test_fallback = false;
};

// The variables above from this process's environment.
BlasEnvironment read_blas_environment();

// paci chose when OPENBLAS_CORETYPE equals what paci recorded (a marker with another
// OPENBLAS_CORETYPE is stale: the variable was changed since); otherwise a set OPENBLAS_CORETYPE
// is the user's, unless PACI_BLAS_TEST_FALLBACK makes it OpenBLAS's.
KernelChooser kernel_chooser(const BlasEnvironment& environment);

enum class KernelAction {
  keep,           // the running kernel stays
  switch_kernel,  // re-run with OPENBLAS_CORETYPE=kernel
  warn,           // keep, but say that the kernel is older than the CPU (paci's choice was ignored)
};

struct KernelDecision {
  KernelAction action = KernelAction::keep;
  std::string kernel;  // switch_kernel: the kernel to run; otherwise the running one
  std::string reason;  // one phrase, for messages and tests
};

// What to do about the running kernel. `user_coretype`: OPENBLAS_CORETYPE when the user set it
// (always kept); `chosen_by_paci`: paci already re-ran once (never switches again). A kernel older
// than the CPU's class is switched to kernel_for(cpu); same, newer and unknown kernels are kept.
KernelDecision decide_kernel(VectorClass cpu, std::string_view running_kernel,
                             const std::optional<std::string>& user_coretype, bool chosen_by_paci);

// What a report says about the BLAS.
struct BlasIdentity {
  std::string library;  // "OpenBLAS 0.3.21"
  std::string kernel;   // the running kernel, "SkylakeX"
  KernelChooser chosen_by = KernelChooser::openblas;
  std::string requested;           // user: their OPENBLAS_CORETYPE; paci: the kernel paci chose
  std::string openblas_choice;     // paci: the kernel OpenBLAS had picked itself
  std::optional<VectorClass> cpu;  // nullopt on a CPU that is not x86
};

BlasIdentity identify_blas(std::string_view config, std::string_view running_kernel,
                           const BlasEnvironment& environment, std::optional<VectorClass> cpu);

// This process's BLAS (openblas_get_config/corename, the environment, cpuid).
BlasIdentity blas_identity();

// "OpenBLAS 0.3.21, kernel SkylakeX (OpenBLAS's choice; CPU: AVX-512)", or "(chosen by paci:
// OpenBLAS picked Prescott; ...)", or "(set by OPENBLAS_CORETYPE=Prescott; ...)".
std::string describe(const BlasIdentity& identity);

// First thing in main: when OpenBLAS fell back to a kernel older than the CPU and the user did not
// set OPENBLAS_CORETYPE, sets it (and paci's marker) and re-executes /proc/self/exe with `argv`;
// does not return then. Never re-executes twice: if the kernel still does not fit after paci chose
// it, or if the re-execution fails, prints one warning line to stderr and returns.
void ensure_blas_kernel(char** argv);

}  // namespace paci::model
