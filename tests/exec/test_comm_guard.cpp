// CommGuard (exec/comm_guard.hpp), the lock between NCCL calls and the watchdog's abort: an
// abort never runs while a call is inside the communicators, every call after it throws the
// recorded reason, only the first abort runs, and an abort that cannot get the lock in time (a
// call stuck inside the library) goes ahead anyway.
#include "exec/comm_guard.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace paci::exec {
namespace {

TEST(CommGuard, AnAbortNeverOverlapsACallAndLaterCallsThrowItsReason) {
  for (int trial = 0; trial < 20; ++trial) {
    CommGuard guard;
    std::atomic<int> inside{0}, overlaps{0}, calls{0}, aborts{0};
    std::atomic<bool> freed{false}, used_after_free{false};
    std::vector<std::thread> callers;
    for (int t = 0; t < 3; ++t)
      callers.emplace_back([&] {
        for (;;) {
          try {
            guard.use([&] {
              ++inside;
              if (freed) used_after_free = true;  // a call on a freed communicator
              std::this_thread::sleep_for(std::chrono::microseconds(50));
              --inside;
              ++calls;
            });
          } catch (const std::runtime_error& e) {
            EXPECT_STREQ(e.what(), "no progress for 5 s");
            return;
          }
        }
      });
    std::thread watchdog([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(2 + trial % 5));
      for (int i = 0; i < 2; ++i)
        guard.abort(i == 0 ? "no progress for 5 s" : "a second reason", [&] {
          if (inside != 0) ++overlaps;
          freed = true;
          ++aborts;
        });
    });
    watchdog.join();
    for (auto& c : callers) c.join();
    EXPECT_EQ(overlaps, 0);
    EXPECT_FALSE(used_after_free);
    EXPECT_EQ(aborts, 1);
    EXPECT_TRUE(guard.aborted());
    EXPECT_THROW(guard.use([] {}), std::runtime_error);
  }
}

TEST(CommGuard, AnAbortGoesAheadWhenACallIsStuckInside) {
  CommGuard guard;
  std::atomic<bool> release{false}, entered{false};
  std::thread stuck([&] {
    guard.use([&] {
      entered = true;
      while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    });
  });
  while (!entered) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  bool ran = false;
  EXPECT_TRUE(guard.abort(
      "peer died", [&] { ran = true; }, std::chrono::milliseconds(50)));
  EXPECT_TRUE(ran);  // without the lock: that is what unblocks the stuck call
  release = true;
  stuck.join();
  try {
    guard.use([] {});
    ADD_FAILURE() << "a call after the abort ran";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "peer died");
  }
}

}  // namespace
}  // namespace paci::exec
