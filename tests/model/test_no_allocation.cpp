// Checks the promise that a running training step allocates nothing: after warm-up, forward,
// backward, AdamW and the activation store's acquire/release make no C++ heap allocation. Counts
// through a replacement of the global operator new that is active only inside the measured region.
#include <gtest/gtest.h>

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <new>

#include "model/gpt.hpp"

namespace {
std::atomic<bool> counting{false};
std::atomic<std::size_t> allocations{0};
}  // namespace

// Every form of the global operator new is replaced (plain, array, nothrow, aligned), each taking
// memory from malloc or aligned_alloc, and every operator delete releases with free: a form left
// to the library would pair its own allocation with this free (AddressSanitizer reports that as
// an alloc-dealloc mismatch; std::stable_sort's buffer uses the nothrow form).
namespace {
void* counted(std::size_t size, std::size_t align) noexcept {
  if (counting.load(std::memory_order_relaxed)) allocations.fetch_add(1);
  if (size == 0) size = 1;
  if (align <= alignof(std::max_align_t)) return std::malloc(size);
  return std::aligned_alloc(align, (size + align - 1) / align * align);  // a multiple of align
}
void* counted_or_throw(std::size_t size, std::size_t align) {
  if (void* p = counted(size, align)) return p;
  throw std::bad_alloc();
}
}  // namespace

void* operator new(std::size_t size) {
  return counted_or_throw(size, 0);
}
void* operator new[](std::size_t size) {
  return counted_or_throw(size, 0);
}
void* operator new(std::size_t size, std::align_val_t align) {
  return counted_or_throw(size, static_cast<std::size_t>(align));
}
void* operator new[](std::size_t size, std::align_val_t align) {
  return counted_or_throw(size, static_cast<std::size_t>(align));
}
void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
  return counted(size, 0);
}
void* operator new[](std::size_t size, const std::nothrow_t&) noexcept {
  return counted(size, 0);
}
void* operator new(std::size_t size, std::align_val_t align, const std::nothrow_t&) noexcept {
  return counted(size, static_cast<std::size_t>(align));
}
void* operator new[](std::size_t size, std::align_val_t align, const std::nothrow_t&) noexcept {
  return counted(size, static_cast<std::size_t>(align));
}
// The replacement new takes memory from malloc, so free is the matching release.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete[](void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete(void* p, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete(void* p, const std::nothrow_t&) noexcept {
  std::free(p);
}
void operator delete[](void* p, const std::nothrow_t&) noexcept {
  std::free(p);
}
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept {
  std::free(p);
}
#pragma GCC diagnostic pop

namespace paci::model {
namespace {

TEST(NoAllocation, TrainingStepAllocatesNothing) {
  for (std::size_t threads : {1, 2}) {
    SCOPED_TRACE(threads);
    StageShape shape;
    shape.config = {.layers = 2, .heads = 2, .d_model = 32, .max_seq_len = 16, .vocab = 256};
    shape.batch = 2;
    shape.seq_len = 16;
    StageShape first = shape, last = shape;
    first.range = {0, 1};
    last.range = {1, 1};
    Stage s0(first, threads), s1(last, threads);
    s0.enable_gemm_timing(true);
    ActivationStore store0(first, 2), store1(last, 2);
    std::vector<float> p0(s0.layout().size()), g0(p0.size()), p1(s1.layout().size()), g1(p1.size()),
        dx(shape.rows() * shape.config.d_model);
    init_gpt2(s0.layout(), p0, 1);
    init_gpt2(s1.layout(), p1, 1);
    AdamW opt0(s0.layout(), {}, threads), opt1(s1.layout(), {}, threads);
    std::vector<std::int32_t> tokens(shape.rows(), 3), targets(shape.rows(), 4);
    auto step = [&](std::int64_t mb) {
      auto out = s0.forward(p0, StageInput::tokens(tokens), store0.acquire(mb));
      s1.forward_loss(p1, StageInput::activations(out), targets, 0.5f, store1.acquire(mb));
      s1.backward(p1, g1, store1.at(mb), {}, dx);
      s0.backward(p0, g0, store0.at(mb), dx, {});
      store1.release(mb);
      store0.release(mb);
      opt0.step(p0, g0, 1e-3);
      opt1.step(p1, g1, 1e-3);
      zero(g0);
      zero(g1);
    };
    step(0);  // warm-up: OpenMP and OpenBLAS set up their threads and buffers
    allocations = 0;
    counting = true;
    step(1);
    step(2);
    counting = false;
    EXPECT_EQ(allocations.load(), 0u);
    EXPECT_GT(s0.gemm_stats().calls, 0u);
  }
}

}  // namespace
}  // namespace paci::model
