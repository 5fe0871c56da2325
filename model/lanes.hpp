// Fixed-order reductions over one row with 8 independent accumulators: vectorisable without
// -ffast-math, and always the same bits (a row is reduced by one thread, in this order).
// Internal to model/ (included by the op sources only).
#pragma once

#include <cstddef>

namespace paci::model::lanes {

inline constexpr std::size_t kLanes = 8;

inline float combine(const float* acc) {
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

// Σ x[i]
inline float sum(const float* x, std::size_t n) {
  float acc[kLanes] = {};
  std::size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (std::size_t j = 0; j < kLanes; ++j) acc[j] += x[i + j];
  }
  float s = combine(acc);
  for (; i < n; ++i) s += x[i];
  return s;
}

// Σ a[i]·b[i]
inline float dot(const float* a, const float* b, std::size_t n) {
  float acc[kLanes] = {};
  std::size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (std::size_t j = 0; j < kLanes; ++j) acc[j] += a[i + j] * b[i + j];
  }
  float s = combine(acc);
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

// Σ (x[i] − mean)²
inline float squared_deviation(const float* x, float mean, std::size_t n) {
  float acc[kLanes] = {};
  std::size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (std::size_t j = 0; j < kLanes; ++j) {
      const float d = x[i + j] - mean;
      acc[j] += d * d;
    }
  }
  float s = combine(acc);
  for (; i < n; ++i) s += (x[i] - mean) * (x[i] - mean);
  return s;
}

// max x[i] (n > 0); exact, so the order does not matter.
inline float max(const float* x, std::size_t n) {
  float m = x[0];
  for (std::size_t i = 1; i < n; ++i) m = x[i] > m ? x[i] : m;
  return m;
}

}  // namespace paci::model::lanes
