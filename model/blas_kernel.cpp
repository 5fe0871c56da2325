// OpenBLAS kernel check: cpuid classes, the core-name table, the decision, and the one
// re-execution onto the right kernel. Everything but ensure_blas_kernel, blas_identity,
// read_blas_environment and detect_cpu_features is a pure function of its arguments.
#include "model/blas_kernel.hpp"

#include <cblas.h>
#include <fmt/format.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

namespace paci::model {
namespace {

constexpr const char* kCoretype = "OPENBLAS_CORETYPE";
constexpr const char* kChosen = "PACI_BLAS_KERNEL_CHOSEN";
constexpr const char* kReplaced = "PACI_BLAS_KERNEL_REPLACED";
constexpr const char* kTestFallback = "PACI_BLAS_TEST_FALLBACK";

char lower(char c) {
  return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
}

bool equal_ignoring_case(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (lower(a[i]) != lower(b[i])) return false;
  return true;
}

std::vector<std::string_view> words(std::string_view text) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && text[i] == ' ') ++i;
    const std::size_t start = i;
    while (i < text.size() && text[i] != ' ') ++i;
    if (i > start) out.push_back(text.substr(start, i - start));
  }
  return out;
}

// OpenBLAS 0.3.21's x86 core names (driver/others/dynamic.c and the single-target builds), by the
// widest vector unit their kernels use. Excavator and the other Bulldozer-family kernels are AVX
// (with FMA3/FMA4) kernels; Zen's are Haswell's AVX2 kernels.
constexpr std::array<std::pair<std::string_view, VectorClass>, 26> kKernelClasses{{
    {"Katmai", VectorClass::sse},        {"Coppermine", VectorClass::sse},
    {"Northwood", VectorClass::sse},     {"Prescott", VectorClass::sse},
    {"Banias", VectorClass::sse},        {"Atom", VectorClass::sse},
    {"Core2", VectorClass::sse},         {"Penryn", VectorClass::sse},
    {"Dunnington", VectorClass::sse},    {"Nehalem", VectorClass::sse},
    {"Athlon", VectorClass::sse},        {"Opteron", VectorClass::sse},
    {"Opteron_SSE3", VectorClass::sse},  {"Barcelona", VectorClass::sse},
    {"Nano", VectorClass::sse},          {"Bobcat", VectorClass::sse},
    {"Sandybridge", VectorClass::avx},   {"Bulldozer", VectorClass::avx},
    {"Piledriver", VectorClass::avx},    {"Steamroller", VectorClass::avx},
    {"Excavator", VectorClass::avx},     {"Haswell", VectorClass::avx2},
    {"Zen", VectorClass::avx2},          {"SkylakeX", VectorClass::avx512},
    {"Cooperlake", VectorClass::avx512}, {"SapphireRapids", VectorClass::avx512},
}};

void set_or_unset(const char* name, const std::optional<std::string>& value) {
  if (value)
    ::setenv(name, value->c_str(), 1);
  else
    ::unsetenv(name);
}

std::optional<std::string> get(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

}  // namespace

std::string_view to_string(VectorClass vector_class) {
  switch (vector_class) {
    case VectorClass::sse:
      return "SSE";
    case VectorClass::avx:
      return "AVX";
    case VectorClass::avx2:
      return "AVX2";
    case VectorClass::avx512:
      return "AVX-512";
  }
  return "?";
}

CpuFeatures detect_cpu_features() {
  CpuFeatures f;
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  f.avx = __builtin_cpu_supports("avx") != 0;
  f.avx2 = __builtin_cpu_supports("avx2") != 0;
  f.fma = __builtin_cpu_supports("fma") != 0;
  f.avx512f = __builtin_cpu_supports("avx512f") != 0;
  f.avx512bw = __builtin_cpu_supports("avx512bw") != 0;
  f.avx512vl = __builtin_cpu_supports("avx512vl") != 0;
  f.avx512dq = __builtin_cpu_supports("avx512dq") != 0;
  f.avx512cd = __builtin_cpu_supports("avx512cd") != 0;
#endif
  return f;
}

VectorClass cpu_vector_class(const CpuFeatures& f) {
  if (f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq && f.avx512cd) return VectorClass::avx512;
  if (f.avx2 && f.fma) return VectorClass::avx2;
  if (f.avx) return VectorClass::avx;
  return VectorClass::sse;
}

std::string_view kernel_for(VectorClass vector_class) {
  switch (vector_class) {
    case VectorClass::avx512:
      return "SkylakeX";
    case VectorClass::avx2:
      return "Haswell";
    case VectorClass::avx:
      return "Sandybridge";
    case VectorClass::sse:
      return "Prescott";
  }
  return "Prescott";
}

std::optional<VectorClass> kernel_class(std::string_view core_name) {
  for (const auto& [name, vector_class] : kKernelClasses)
    if (equal_ignoring_case(name, core_name)) return vector_class;
  return std::nullopt;
}

std::string blas_library(std::string_view config) {
  const std::vector<std::string_view> w = words(config);
  if (w.empty()) return "unknown BLAS";
  if (w.size() >= 2 && equal_ignoring_case(w[0], "OpenBLAS"))
    return fmt::format("{} {}", w[0], w[1]);
  return std::string(w[0]);
}

bool blas_dynamic_arch(std::string_view config) {
  for (std::string_view w : words(config))
    if (w == "DYNAMIC_ARCH") return true;
  return false;
}

std::string_view to_string(KernelChooser chooser) {
  switch (chooser) {
    case KernelChooser::openblas:
      return "openblas";
    case KernelChooser::user:
      return "user";
    case KernelChooser::paci:
      return "paci";
  }
  return "?";
}

BlasEnvironment read_blas_environment() {
  BlasEnvironment e;
  e.coretype = get(kCoretype);
  e.chosen = get(kChosen);
  e.replaced = get(kReplaced);
  e.test_fallback = get(kTestFallback) == std::optional<std::string>("1");
  return e;
}

KernelChooser kernel_chooser(const BlasEnvironment& e) {
  if (!e.coretype) return KernelChooser::openblas;
  if (e.chosen && equal_ignoring_case(*e.chosen, *e.coretype)) return KernelChooser::paci;
  return e.test_fallback ? KernelChooser::openblas : KernelChooser::user;
}

KernelDecision decide_kernel(VectorClass cpu, std::string_view running_kernel,
                             const std::optional<std::string>& user_coretype, bool chosen_by_paci) {
  const std::string running(running_kernel);
  if (user_coretype)
    return {KernelAction::keep, running,
            fmt::format("set by OPENBLAS_CORETYPE={}: the user's choice is kept", *user_coretype)};
  const std::optional<VectorClass> running_class = kernel_class(running_kernel);
  if (!running_class)
    return {KernelAction::keep, running, fmt::format("unknown kernel {}: left alone", running)};
  if (*running_class > cpu)
    return {KernelAction::keep, running,
            fmt::format("{} ({}) is newer than the CPU's class ({}): kept", running,
                        to_string(*running_class), to_string(cpu))};
  if (*running_class == cpu)
    return {KernelAction::keep, running,
            fmt::format("{} ({}) fits the CPU ({})", running, to_string(cpu), to_string(cpu))};
  if (chosen_by_paci)
    return {KernelAction::warn, running,
            fmt::format("{} ({}) is still older than the CPU ({}) after paci chose a kernel: this "
                        "OpenBLAS ignores OPENBLAS_CORETYPE (not a DYNAMIC_ARCH build?)",
                        running, to_string(*running_class), to_string(cpu))};
  return {KernelAction::switch_kernel, std::string(kernel_for(cpu)),
          fmt::format("OpenBLAS picked {} ({}) on a CPU with {}", running,
                      to_string(*running_class), to_string(cpu))};
}

BlasIdentity identify_blas(std::string_view config, std::string_view running_kernel,
                           const BlasEnvironment& environment, std::optional<VectorClass> cpu) {
  BlasIdentity id;
  id.library = blas_library(config);
  id.kernel = std::string(running_kernel);
  id.chosen_by = kernel_chooser(environment);
  id.cpu = cpu;
  if (id.chosen_by == KernelChooser::user) id.requested = *environment.coretype;
  if (id.chosen_by == KernelChooser::paci) {
    id.requested = *environment.chosen;
    id.openblas_choice = environment.replaced.value_or("");
  }
  return id;
}

BlasIdentity blas_identity() {
  std::optional<VectorClass> cpu;
#if defined(__x86_64__) || defined(__i386__)
  cpu = cpu_vector_class(detect_cpu_features());
#endif
  return identify_blas(openblas_get_config(), openblas_get_corename(), read_blas_environment(),
                       cpu);
}

std::string describe(const BlasIdentity& id) {
  std::string how;
  switch (id.chosen_by) {
    case KernelChooser::openblas:
      how = "OpenBLAS's choice";
      break;
    case KernelChooser::user:
      how = "set by OPENBLAS_CORETYPE=" + id.requested;
      break;
    case KernelChooser::paci:
      if (!equal_ignoring_case(id.kernel, id.requested))
        how = fmt::format("paci chose {}, which this OpenBLAS ignored", id.requested);
      else if (id.openblas_choice.empty())
        how = "chosen by paci";
      else
        how = "chosen by paci: OpenBLAS picked " + id.openblas_choice;
      break;
  }
  const std::string cpu = id.cpu ? std::string(to_string(*id.cpu)) : std::string("not x86");
  return fmt::format("{}, kernel {} ({}; CPU: {})", id.library, id.kernel, how, cpu);
}

void ensure_blas_kernel(char** argv) {
#if defined(__x86_64__) || defined(__i386__)
  const BlasEnvironment environment = read_blas_environment();
  const std::string running = openblas_get_corename();
  const VectorClass cpu = cpu_vector_class(detect_cpu_features());
  const KernelChooser chooser = kernel_chooser(environment);
  const std::optional<std::string> user_coretype =
      chooser == KernelChooser::user ? environment.coretype : std::nullopt;
  const KernelDecision decision =
      decide_kernel(cpu, running, user_coretype, chooser == KernelChooser::paci);
  if (decision.action == KernelAction::keep) return;
  // An OpenBLAS built without DYNAMIC_ARCH has one kernel and ignores OPENBLAS_CORETYPE: nothing
  // to switch to, and nothing to warn about on every command (paci --version names the kernel).
  if (!blas_dynamic_arch(openblas_get_config())) return;
  if (decision.action == KernelAction::warn) {
    std::fprintf(stderr,
                 "paci: warning: OpenBLAS runs its %s kernel on a CPU with %s although paci set "
                 "OPENBLAS_CORETYPE=%s (an OpenBLAS built without DYNAMIC_ARCH?): GEMMs will be "
                 "several times slower than this CPU allows\n",
                 running.c_str(), std::string(to_string(cpu)).c_str(),
                 environment.chosen.value_or("?").c_str());
    return;
  }
  // Re-run with the right kernel; OpenBLAS reads OPENBLAS_CORETYPE only when it loads.
  ::setenv(kCoretype, decision.kernel.c_str(), 1);
  ::setenv(kChosen, decision.kernel.c_str(), 1);
  ::setenv(kReplaced, running.c_str(), 1);
  const std::optional<std::string> test_fallback = get(kTestFallback);
  ::unsetenv(kTestFallback);
  std::fflush(nullptr);
  ::execv("/proc/self/exe", argv);
  const int error = errno;  // still here: the re-execution failed; put everything back
  set_or_unset(kCoretype, environment.coretype);
  set_or_unset(kChosen, environment.chosen);
  set_or_unset(kReplaced, environment.replaced);
  set_or_unset(kTestFallback, test_fallback);
  std::fprintf(stderr,
               "paci: warning: OpenBLAS runs its %s kernel on a CPU with %s, and re-running on %s "
               "failed (execv /proc/self/exe: %s): GEMMs will be several times slower than this "
               "CPU allows; set OPENBLAS_CORETYPE=%s to choose it\n",
               running.c_str(), std::string(to_string(cpu)).c_str(), decision.kernel.c_str(),
               std::strerror(error), decision.kernel.c_str());
#else
  (void)argv;
#endif
}

}  // namespace paci::model
