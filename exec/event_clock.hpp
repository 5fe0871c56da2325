// EventClock: the timestamps of a long GPU run from a bounded pool of reusable events.
//
// The GPU pipeline stamps the start and end of every action and message (about a million events
// on a long run). Two problems if each stamp keeps its own event and is timed at the end against
// one origin: the events are never reused, and cudaEventElapsedTime answers in float
// milliseconds, which after an hour resolve only about a quarter of a millisecond.
//
// Here a stamp is an id. resolve() queries the stamps still pending; each completed one gets its
// time in double seconds, measured from an anchor (a recently completed stamp whose time is
// known) rather than from the origin, and its event goes back to the pool. The anchor moves
// forward at every resolve(), so each float measurement spans only the time between two
// resolves (the pipeline resolves at every reported step): durations and gaps keep the timer's
// microseconds however long the run. The absolute times add up one float rounding per anchor
// hop; that drift stays within what a single origin's rounding would be (T·2⁻²⁴ after T).
// A completed stamp needs no waiting: pending(id) is empty once resolve() has seen it complete,
// which is what lets its event be recorded again for another stamp.
//
// Host-only and templated on the event backend, so the CPU tests run it with a simulated clock:
//   Handle create();                          a new event
//   bool query(Handle);                       has the work it recorded completed?
//   double elapsed_ms(Handle from, Handle to) to − from, both completed (float ms on CUDA)
#pragma once

#include <cmath>
#include <cstddef>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace paci::exec {

template <typename Backend>
class EventClock {
 public:
  using Handle = typename Backend::Handle;

  explicit EventClock(Backend backend = {}) : backend_(std::move(backend)) {}

  // A new stamp and the event to record it with, now: an event never recorded reads as
  // completed, so no resolve may run between a stamp and its record. The first stamp is the
  // origin, time 0.
  int stamp() {
    std::size_t slot;
    if (free_.empty()) {
      slot = handles_.size();
      handles_.push_back(backend_.create());
    } else {
      slot = free_.back();
      free_.pop_back();
    }
    const int id = static_cast<int>(slot_of_.size());
    slot_of_.push_back(static_cast<int>(slot));
    seconds_.push_back(kUnknown);
    pending_.push_back(id);
    ++since_resolve_;
    return id;
  }

  // The event of a stamp that may still be pending, to record, wait on or hand to a link; empty
  // once the stamp has completed (its event may since time another stamp).
  std::optional<Handle> pending(int id) const {
    check(id);
    if (!std::isnan(seconds_[static_cast<std::size_t>(id)])) return std::nullopt;
    return handles_[static_cast<std::size_t>(slot_of_[static_cast<std::size_t>(id)])];
  }
  // The event of a stamp just made (stamp() then handle() before any resolve()).
  Handle handle(int id) const {
    const std::optional<Handle> h = pending(id);
    if (!h) throw std::logic_error("EventClock: stamp " + std::to_string(id) + " has completed");
    return *h;
  }

  // resolve() when the pool has no free event and enough stamps were made since the last one
  // that the scans cost O(1) per stamp however far the GPU lags. Like resolve(), call it only
  // when every stamp made so far has been recorded.
  bool resolve_if_due() {
    if (!free_.empty() || pending_.size() < kResolveAtLeast || since_resolve_ < pending_.size() / 2)
      return false;
    resolve();
    return true;
  }

  // Times every pending stamp that has completed and returns their events to the pool. Call it
  // only when every stamp made so far has been recorded.
  void resolve() {
    since_resolve_ = 0;
    if (anchor_ < 0) {  // the origin is the first anchor, once it has completed
      if (pending_.empty() || !backend_.query(slot_handle(0))) return;
      seconds_[0] = 0.0;
      anchor_ = 0;
      pending_.erase(pending_.begin());
    }
    // Pending stamps are compacted in place; each completed one is timed and its event freed,
    // except the latest, which becomes the anchor (the old anchor's event is freed then).
    const Handle anchor = slot_handle(anchor_);
    const double anchor_s = seconds_[static_cast<std::size_t>(anchor_)];
    std::size_t kept = 0;
    for (const int id : pending_) {
      if (!backend_.query(slot_handle(id))) {
        pending_[kept++] = id;
        continue;
      }
      const double s = anchor_s + backend_.elapsed_ms(anchor, slot_handle(id)) * 1e-3;
      seconds_[static_cast<std::size_t>(id)] = s;
      if (s > seconds_[static_cast<std::size_t>(anchor_)]) {
        release(anchor_);
        anchor_ = id;
      } else {
        release(id);
      }
    }
    pending_.resize(kept);
  }

  // Seconds from the origin to a stamp that resolve() has seen complete.
  double seconds(int id) const {
    check(id);
    const double s = seconds_[static_cast<std::size_t>(id)];
    if (std::isnan(s))
      throw std::logic_error("EventClock: stamp " + std::to_string(id) + " has not completed");
    return s;
  }

  std::size_t stamps() const { return slot_of_.size(); }
  std::size_t events() const { return handles_.size(); }  // created: the pool's size
  std::size_t unresolved() const { return pending_.size(); }

 private:
  static constexpr double kUnknown = std::numeric_limits<double>::quiet_NaN();
  static constexpr std::size_t kResolveAtLeast = 64;

  void check(int id) const {
    if (id < 0 || static_cast<std::size_t>(id) >= slot_of_.size())
      throw std::logic_error("EventClock: no stamp " + std::to_string(id));
  }
  void release(int id) {
    free_.push_back(static_cast<std::size_t>(slot_of_[static_cast<std::size_t>(id)]));
    slot_of_[static_cast<std::size_t>(id)] = -1;
  }
  Handle slot_handle(int id) const {
    return handles_[static_cast<std::size_t>(slot_of_[static_cast<std::size_t>(id)])];
  }

  Backend backend_;
  std::vector<Handle> handles_;  // the pool, by slot
  std::vector<std::size_t> free_;
  std::vector<int> slot_of_;     // per stamp: its slot while it holds one, else −1
  std::vector<double> seconds_;  // per stamp: NaN until resolved
  std::vector<int> pending_;     // stamps not yet seen complete, in stamp order
  int anchor_ = -1;              // a completed stamp that keeps its event: the timing base
  std::size_t since_resolve_ = 0;
};

}  // namespace paci::exec
