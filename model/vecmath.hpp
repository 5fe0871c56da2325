// Branch-free exp and tanh in float that GCC vectorises inside `#pragma omp simd` loops (glibc's
// expf/tanhf do not vectorise without -ffast-math). Pure functions of their argument: the same bits
// whether a lane runs vectorised or scalar (the model is built with -ffp-contract=off).
#pragma once

#include <bit>
#include <cstdint>

namespace paci::model {

// e^x with a relative error of about 2 ulp (Cody-Waite reduction, Cephes' degree-6 polynomial).
// Below -87.3 it returns the smallest normal float (≈1.2e-38) instead of a denormal or 0; above
// 88.37 it returns e^88.37 (≈2.4e38, finite). Softmax and tanh never notice either clamp.
#pragma omp declare simd notinbranch
inline float fast_exp(float x) {
  x = x < -87.33654f ? -87.33654f : x;
  x = x > 88.37626f ? 88.37626f : x;
  // n = round(x·log2(e)) by the 1.5·2^23 trick (round to nearest even, |x·log2e| < 2^22).
  const float shifter = 12582912.0f;
  const float n = (x * 1.44269504088896341f + shifter) - shifter;
  const float r = (x - n * 0.693359375f) - n * -2.12194440e-4f;  // x − n·ln2, ln2 in two parts
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float er = (p * (r * r) + r) + 1.0f;
  const std::int32_t bits = (static_cast<std::int32_t>(n) + 127) << 23;  // 2^n, n in [-126, 127]
  return er * std::bit_cast<float>(bits);
}

// tanh(x) = 1 − 2/(e^{2x} + 1); absolute error about 2e-7, exact ±1 for |x| > 9.
#pragma omp declare simd notinbranch
inline float fast_tanh(float x) {
  return 1.0f - 2.0f / (fast_exp(2.0f * x) + 1.0f);
}

}  // namespace paci::model
