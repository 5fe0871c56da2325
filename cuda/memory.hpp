// RAII owners of every CUDA resource the backend uses: device and pinned host buffers (sizes in
// size_t elements), streams, events, cuBLAS and cuBLASLt handles. Move-only; a moved-from owner
// holds nothing. Destructors never throw (a failed free is ignored: the context is being torn
// down).
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <span>
#include <utility>

#include "cuda/check.hpp"

namespace paci::cuda {

// `count` elements of T in device memory (cudaMalloc, 256-byte aligned). Uninitialised.
template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t count) : count_(count) {
    if (count > 0) PACI_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&data_), bytes()));
  }
  ~DeviceBuffer() {
    if (data_ != nullptr) cudaFree(data_);
  }
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), count_(std::exchange(other.count_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(count_, other.count_);
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  T* data() { return data_; }
  const T* data() const { return data_; }
  std::size_t size() const { return count_; }
  std::size_t bytes() const { return count_ * sizeof(T); }
  bool empty() const { return count_ == 0; }

 private:
  T* data_ = nullptr;
  std::size_t count_ = 0;
};

// `count` elements of T in page-locked host memory (cudaMallocHost), for asynchronous copies.
template <typename T>
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  explicit PinnedBuffer(std::size_t count) : count_(count) {
    if (count > 0) PACI_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&data_), bytes()));
  }
  ~PinnedBuffer() {
    if (data_ != nullptr) cudaFreeHost(data_);
  }
  PinnedBuffer(PinnedBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), count_(std::exchange(other.count_, 0)) {}
  PinnedBuffer& operator=(PinnedBuffer&& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(count_, other.count_);
    return *this;
  }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;

  T* data() { return data_; }
  const T* data() const { return data_; }
  std::size_t size() const { return count_; }
  std::size_t bytes() const { return count_ * sizeof(T); }
  T& operator[](std::size_t i) { return data_[i]; }

 private:
  T* data_ = nullptr;
  std::size_t count_ = 0;
};

// A non-blocking stream (does not synchronise with the legacy default stream).
class Stream {
 public:
  Stream() { PACI_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }
  ~Stream() {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  Stream(Stream&& other) noexcept : stream_(std::exchange(other.stream_, nullptr)) {}
  Stream& operator=(Stream&& other) noexcept {
    std::swap(stream_, other.stream_);
    return *this;
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  cudaStream_t get() const { return stream_; }
  void synchronize() const { PACI_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

 private:
  cudaStream_t stream_ = nullptr;
};

// An event with timing enabled: record on a stream, wait on it from another, or time between two.
class Event {
 public:
  Event() { PACI_CUDA_CHECK(cudaEventCreate(&event_)); }
  ~Event() {
    if (event_ != nullptr) cudaEventDestroy(event_);
  }
  Event(Event&& other) noexcept : event_(std::exchange(other.event_, nullptr)) {}
  Event& operator=(Event&& other) noexcept {
    std::swap(event_, other.event_);
    return *this;
  }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  cudaEvent_t get() const { return event_; }
  void record(cudaStream_t stream) { PACI_CUDA_CHECK(cudaEventRecord(event_, stream)); }
  void synchronize() const { PACI_CUDA_CHECK(cudaEventSynchronize(event_)); }
  // Makes `stream` wait (on the device) for the work recorded before this event.
  void wait_on(cudaStream_t stream) const {
    PACI_CUDA_CHECK(cudaStreamWaitEvent(stream, event_, 0));
  }
  // Seconds from `start` to this event; both must have completed.
  double seconds_since(const Event& start) const {
    float ms = 0;
    PACI_CUDA_CHECK(cudaEventElapsedTime(&ms, start.event_, event_));
    return static_cast<double>(ms) * 1e-3;
  }

 private:
  cudaEvent_t event_ = nullptr;
};

// A cuBLAS handle bound to one stream.
class CublasHandle {
 public:
  explicit CublasHandle(cudaStream_t stream) {
    PACI_CUBLAS_CHECK(cublasCreate(&handle_));
    PACI_CUBLAS_CHECK(cublasSetStream(handle_, stream));
  }
  ~CublasHandle() {
    if (handle_ != nullptr) cublasDestroy(handle_);
  }
  CublasHandle(CublasHandle&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
  CublasHandle& operator=(CublasHandle&& other) noexcept {
    std::swap(handle_, other.handle_);
    return *this;
  }
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;

  cublasHandle_t get() const { return handle_; }

 private:
  cublasHandle_t handle_ = nullptr;
};

// A cuBLASLt handle (stream-free: each cublasLtMatmul names its stream).
class CublasLtHandle {
 public:
  CublasLtHandle() { PACI_CUBLAS_CHECK(cublasLtCreate(&handle_)); }
  ~CublasLtHandle() {
    if (handle_ != nullptr) cublasLtDestroy(handle_);
  }
  CublasLtHandle(CublasLtHandle&& other) noexcept
      : handle_(std::exchange(other.handle_, nullptr)) {}
  CublasLtHandle& operator=(CublasLtHandle&& other) noexcept {
    std::swap(handle_, other.handle_);
    return *this;
  }
  CublasLtHandle(const CublasLtHandle&) = delete;
  CublasLtHandle& operator=(const CublasLtHandle&) = delete;

  cublasLtHandle_t get() const { return handle_; }

 private:
  cublasLtHandle_t handle_ = nullptr;
};

// Host ↔ device copies on a stream. The host side may be pageable; these wait for the stream, so
// the host data is usable (or reusable) when they return.
template <typename T>
void copy_to_device(cudaStream_t stream, T* device, std::span<const T> host) {
  PACI_CUDA_CHECK(
      cudaMemcpyAsync(device, host.data(), host.size_bytes(), cudaMemcpyHostToDevice, stream));
  PACI_CUDA_CHECK(cudaStreamSynchronize(stream));
}
template <typename T>
void copy_to_host(cudaStream_t stream, std::span<T> host, const T* device) {
  PACI_CUDA_CHECK(
      cudaMemcpyAsync(host.data(), device, host.size_bytes(), cudaMemcpyDeviceToHost, stream));
  PACI_CUDA_CHECK(cudaStreamSynchronize(stream));
}

}  // namespace paci::cuda
