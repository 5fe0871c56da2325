// Test-only double-precision reference of every GPT-2 layer and of the whole model (plain loops,
// no BLAS, no threads), plus the one shared closeness checker |a − b| ≤ atol + rtol·|b| that every
// model test uses. Finite differences run on these references, so their own error is ~1e-9.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "model/config.hpp"
#include "model/layout.hpp"

namespace paci::model::reference {

using Vec = std::vector<double>;

struct Tolerance {
  double atol = 0;
  double rtol = 0;
};

// The one checker: every element must satisfy |actual − expected| ≤ atol + rtol·|expected|.
// On failure names the first bad index, and reports the worst excess over the bound.
template <typename A, typename E>
::testing::AssertionResult all_close(std::span<const A> actual, std::span<const E> expected,
                                     Tolerance tol, const std::string& what) {
  if (actual.size() != expected.size()) {
    return ::testing::AssertionFailure()
           << what << ": size " << actual.size() << " vs " << expected.size();
  }
  std::size_t bad = 0, first = actual.size();
  double worst = 0;
  for (std::size_t i = 0; i < actual.size(); ++i) {
    const double a = static_cast<double>(actual[i]), e = static_cast<double>(expected[i]);
    const double excess = std::fabs(a - e) - (tol.atol + tol.rtol * std::fabs(e));
    if (!(excess <= 0)) {  // also catches NaN
      if (bad++ == 0) first = i;
      worst = std::max(worst, excess);
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << what << ": " << bad << " of " << actual.size() << " elements off; first at " << first
         << " (" << static_cast<double>(actual[first]) << " vs "
         << static_cast<double>(expected[first]) << "), worst excess " << worst << " over atol "
         << tol.atol << " + rtol " << tol.rtol << "·|b|";
}

template <typename A, typename E>
::testing::AssertionResult all_close(const std::vector<A>& actual, const std::vector<E>& expected,
                                     Tolerance tol, const std::string& what) {
  return all_close(std::span<const A>(actual), std::span<const E>(expected), tol, what);
}

// ---- layers, each (rows, channels) row-major as in model/ops.hpp -------------------------------
Vec encoder(const std::vector<std::int32_t>& tokens, const Vec& wte, const Vec& wpe, std::size_t B,
            std::size_t T, std::size_t C);
Vec layernorm(const Vec& x, const Vec& weight, const Vec& bias, std::size_t R, std::size_t C);
// out(R,OC) = x(R,C)·W(OC,C)ᵀ + bias (bias may be empty)
Vec matmul(const Vec& x, const Vec& weight, const Vec& bias, std::size_t R, std::size_t C,
           std::size_t OC);
// qkv (B,T,3C) → (B,T,C), causal, scale 1/√HS
Vec attention(const Vec& qkv, std::size_t B, std::size_t T, std::size_t C, std::size_t NH);
Vec gelu(const Vec& x);
// mean over rows of −log softmax(logits)[target]
double crossentropy(const Vec& logits, const std::vector<std::int32_t>& targets, std::size_t R,
                    std::size_t V);

// A mixture-of-experts MLP (config.hpp, MoeConfig) of block `prefix` ("h.3."): returns its
// output (R,C) for ln2 (R,C), and adds the block's load-balancing loss to *aux.
Vec moe_mlp(const GptConfig& config, const ParamLayout& layout, const Vec& params,
            const std::string& prefix, const Vec& ln2, std::size_t R, double* aux);

// The whole model (one stage {0, L} layout) in double: the mean loss plus the mixture-of-experts
// blocks' load-balancing losses (what the backward differentiates), optionally the logits and
// those losses alone.
double gpt_loss(const GptConfig& config, const ParamLayout& layout, const Vec& params,
                const std::vector<std::int32_t>& tokens, const std::vector<std::int32_t>& targets,
                std::size_t B, std::size_t T, Vec* logits = nullptr, double* aux_loss = nullptr);

// Reads a binary fixture that a PyTorch script wrote (scripts/make_*_fixture.py), field by field.
class FixtureReader {
 public:
  explicit FixtureReader(const std::string& path) : in_(path, std::ios::binary) {
    if (!in_) throw std::runtime_error("cannot open " + path);
  }
  template <typename T>
  std::vector<T> read(std::size_t n) {
    std::vector<T> v(n);
    in_.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(n * sizeof(T)));
    if (!in_) throw std::runtime_error("fixture ends early");
    return v;
  }
  template <typename T>
  T one() {
    return read<T>(1)[0];
  }
  bool at_end() { return in_.peek() == std::char_traits<char>::eof(); }

 private:
  std::ifstream in_;
};

// Random helpers (deterministic per seed).
Vec random_vec(std::size_t n, std::uint64_t seed, double scale = 1.0);
std::vector<float> to_float(const Vec& v);
Vec to_double(std::span<const float> v);
std::vector<std::int32_t> random_ids(std::size_t n, std::size_t vocab, std::uint64_t seed);

}  // namespace paci::model::reference
