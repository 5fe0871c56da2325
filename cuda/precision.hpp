// Compute precisions of the CUDA backend and precision-tagged device arrays. fp32 computes in
// float throughout; bf16 keeps weights (a cast copy of the fp32 master), activations and activation
// gradients in bfloat16, with fp32 accumulation, fp32 parameter gradients and fp32 AdamW state.
#pragma once

#include <cstddef>
#include <string_view>

#include "cuda/bf16.hpp"
#include "cuda/memory.hpp"
#include "model/check.hpp"

namespace paci::cuda {

enum class Precision { fp32, bf16 };

inline std::size_t element_bytes(Precision p) {
  return p == Precision::fp32 ? sizeof(float) : sizeof(bf16);
}
inline std::string_view to_string(Precision p) {
  return p == Precision::fp32 ? "fp32" : "bf16";
}
// "fp32" or "bf16"; throws model::ModelError otherwise.
inline Precision parse_precision(std::string_view text) {
  if (text == "fp32") return Precision::fp32;
  PACI_MODEL_CHECK(text == "bf16", "precision must be fp32 or bf16, not '{}'", text);
  return Precision::bf16;
}

template <typename T>
constexpr Precision precision_of();
template <>
constexpr Precision precision_of<float>() {
  return Precision::fp32;
}
template <>
constexpr Precision precision_of<bf16>() {
  return Precision::bf16;
}

// A read-only device array of `count` elements in `precision`.
struct TensorView {
  const void* data = nullptr;
  std::size_t count = 0;
  Precision precision = Precision::fp32;

  bool empty() const { return count == 0; }
  template <typename T>
  const T* as() const {
    PACI_MODEL_CHECK(precision == precision_of<T>(), "tensor holds {}, not {}",
                     to_string(precision), to_string(precision_of<T>()));
    return static_cast<const T*>(data);
  }
  template <typename T>
  static TensorView of(const T* data, std::size_t count) {
    return {data, count, precision_of<T>()};
  }
};

// A writable device array of `count` elements in `precision`.
struct MutableTensorView {
  void* data = nullptr;
  std::size_t count = 0;
  Precision precision = Precision::fp32;

  bool empty() const { return count == 0; }
  operator TensorView() const { return {data, count, precision}; }
  template <typename T>
  T* as() const {
    PACI_MODEL_CHECK(precision == precision_of<T>(), "tensor holds {}, not {}",
                     to_string(precision), to_string(precision_of<T>()));
    return static_cast<T*>(data);
  }
  template <typename T>
  static MutableTensorView of(T* data, std::size_t count) {
    return {data, count, precision_of<T>()};
  }
};

// An owned device array of `count` elements in a precision chosen at run time.
class DeviceTensor {
 public:
  DeviceTensor() = default;
  DeviceTensor(Precision precision, std::size_t count)
      : bytes_(count * element_bytes(precision)), count_(count), precision_(precision) {}

  std::size_t size() const { return count_; }
  std::size_t bytes() const { return bytes_.bytes(); }
  Precision precision() const { return precision_; }
  TensorView view() const { return {bytes_.data(), count_, precision_}; }
  MutableTensorView view() { return {bytes_.data(), count_, precision_}; }
  template <typename T>
  T* as() {
    return view().as<T>();
  }
  template <typename T>
  const T* as() const {
    return view().as<T>();
  }

 private:
  DeviceBuffer<unsigned char> bytes_;
  std::size_t count_ = 0;
  Precision precision_ = Precision::fp32;
};

}  // namespace paci::cuda
