// CommGuard: one lock between the calls that enqueue work on a set of communicators (NCCL sends,
// receives, collectives) and the abort that frees them, which a watchdog thread may start at any
// moment. A call runs under the lock and first checks for an abort, so no communicator is freed
// while a call is inside it, and every call after an abort throws the recorded reason instead of
// touching it. The abort waits for a running call at most `patience`: a call stuck inside the
// library (a dead peer during a connection) is what the abort is meant to break, so then it aborts
// without the lock. Host logic only (exec/cuda/nccl_links.cpp uses it; CPU tests check it).
#pragma once

#include <atomic>
#include <chrono>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>

namespace paci::exec {

class CommGuard {
 public:
  // Runs call() under the lock; throws std::runtime_error(reason) once aborted.
  template <typename Call>
  decltype(auto) use(Call&& call) {
    // A pending abort goes first: std::mutex is not fair, and callers that take the lock back to
    // back would otherwise keep the abort's try_lock out until its patience ran out.
    while (abort_requested_ && !aborted_) std::this_thread::yield();
    std::lock_guard lock(mutex_);
    throw_if_aborted();
    return std::forward<Call>(call)();
  }

  // Records `reason` and runs abort_all() once (later aborts do nothing), under the lock when it
  // can be had within `patience`. Returns whether this call aborted. Thread-safe.
  template <typename AbortAll>
  bool abort(const std::string& reason, AbortAll&& abort_all,
             std::chrono::milliseconds patience = std::chrono::seconds(10)) noexcept {
    // Polled with try_lock (a timed mutex's timed wait is pthread_mutex_clocklock, which
    // ThreadSanitizer does not see). Without the lock, a call is stuck inside a communicator:
    // abort anyway.
    abort_requested_ = true;
    std::unique_lock lock(mutex_, std::try_to_lock);
    const auto deadline = std::chrono::steady_clock::now() + patience;
    while (!lock.owns_lock() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      (void)lock.try_lock();
    }
    {
      std::lock_guard guard(reason_mutex_);
      if (aborted_) return false;
      reason_ = reason;
      aborted_ = true;
    }
    std::forward<AbortAll>(abort_all)();
    return true;
  }

  bool aborted() const { return aborted_; }
  void throw_if_aborted() const {
    if (!aborted_) return;
    std::lock_guard guard(reason_mutex_);
    throw std::runtime_error(reason_);
  }

 private:
  std::mutex mutex_;
  mutable std::mutex reason_mutex_;
  std::atomic<bool> aborted_{false}, abort_requested_{false};
  std::string reason_;
};

}  // namespace paci::exec
