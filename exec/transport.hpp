// Transport: moves activations forward and gradients backward between devices, tagged by kind,
// producing stage and micro-batch. The in-process transport (threads, bounded FIFO queues per
// link) is here; NCCL comes with the GPU backend. abort() wakes every waiter, which then throws.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <stdexcept>
#include <vector>

#include "schedules/dependencies.hpp"
#include "schedules/lower.hpp"

namespace paci::exec {

// Seconds since the run started (steady clock): every timestamp the executor records.
class RunClock {
 public:
  RunClock() : start_(std::chrono::steady_clock::now()) {}
  double now_s() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  std::chrono::steady_clock::time_point start_;
};

struct MessageKey {
  DependencyKind kind = DependencyKind::activation;
  std::int32_t producer_stage = 0;
  std::int32_t microbatch = 0;
  friend bool operator==(const MessageKey&, const MessageKey&) = default;
};

// The key a lowered message travels under (the producer's stage, the micro-batch).
inline MessageKey key_of(const StageMessage& m) {
  return {m.kind, m.producer.stage, m.producer.microbatch};
}

// Thrown by a transport call after abort(): another worker failed.
struct Aborted : std::runtime_error {
  Aborted() : std::runtime_error("aborted because another worker failed") {}
};

// When the message's sender started and finished sending it (RunClock seconds).
struct SendTimes {
  double start_s = 0.0;
  double end_s = 0.0;
};

class Transport {
 public:
  virtual ~Transport() = default;
  // Copies data onto the link src -> dst; blocks while the link is full.
  virtual void send(std::int32_t src, std::int32_t dst, const MessageKey& key,
                    std::span<const float> data, SendTimes times) = 0;
  // Blocks until the message `key` from src has arrived, copies it into out (same size) and
  // returns its send times.
  virtual SendTimes receive(std::int32_t dst, std::int32_t src, const MessageKey& key,
                            std::span<float> out) = 0;
  // True when receive() would not block (for the sequential replay).
  virtual bool ready(std::int32_t dst, std::int32_t src, const MessageKey& key) = 0;
  virtual void abort() = 0;
};

// One bounded FIFO per directed device pair, guarded by a mutex and two condition variables.
// A receiver takes the message with its key even when others came first (they stay queued), so
// a device may consume a link's messages in another order than they were sent.
class InProcessTransport final : public Transport {
 public:
  // clock: when given, a message's send end is stamped once its data is queued.
  InProcessTransport(std::int32_t devices, std::size_t capacity_per_link = 1024,
                     const RunClock* clock = nullptr);
  void send(std::int32_t src, std::int32_t dst, const MessageKey& key, std::span<const float> data,
            SendTimes times) override;
  SendTimes receive(std::int32_t dst, std::int32_t src, const MessageKey& key,
                    std::span<float> out) override;
  bool ready(std::int32_t dst, std::int32_t src, const MessageKey& key) override;
  void abort() override;
  // The most messages queued on all links at once so far.
  std::int64_t peak_in_flight() const { return peak_in_flight_; }

 private:
  struct Entry {
    MessageKey key;
    std::vector<float> data;
    SendTimes times;
  };
  struct Link {
    std::mutex mutex;
    std::condition_variable changed;
    std::deque<Entry> queue;
    std::vector<std::vector<float>> spare;  // recycled buffers: no allocation once warm
  };
  Link& link(std::int32_t src, std::int32_t dst);

  std::int32_t devices_;
  std::size_t capacity_;
  const RunClock* clock_;
  std::vector<std::unique_ptr<Link>> links_;
  std::atomic<bool> aborted_{false};
  std::atomic<std::int64_t> in_flight_{0}, peak_in_flight_{0};
};

}  // namespace paci::exec
