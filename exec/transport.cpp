// InProcessTransport: per-link bounded queues with keyed receive and prompt abort.
#include "exec/transport.hpp"

#include <fmt/format.h>
#include <algorithm>

namespace paci::exec {

InProcessTransport::InProcessTransport(std::int32_t devices, std::size_t capacity,
                                       const RunClock* clock)
    : devices_(devices), capacity_(std::max<std::size_t>(capacity, 1)), clock_(clock) {
  links_.resize(static_cast<std::size_t>(devices) * static_cast<std::size_t>(devices));
  for (auto& l : links_) l = std::make_unique<Link>();
}

InProcessTransport::Link& InProcessTransport::link(std::int32_t src, std::int32_t dst) {
  if (src < 0 || dst < 0 || src >= devices_ || dst >= devices_)
    throw std::out_of_range(fmt::format("no link from device {} to device {}", src, dst));
  return *links_[static_cast<std::size_t>(src * devices_ + dst)];
}

void InProcessTransport::send(std::int32_t src, std::int32_t dst, const MessageKey& key,
                              std::span<const float> data, SendTimes times) {
  Link& l = link(src, dst);
  std::unique_lock lock(l.mutex);
  l.changed.wait(lock, [&] { return aborted_ || l.queue.size() < capacity_; });
  if (aborted_) throw Aborted();
  std::vector<float> buffer;
  if (!l.spare.empty()) {
    buffer = std::move(l.spare.back());
    l.spare.pop_back();
  }
  buffer.assign(data.begin(), data.end());
  if (clock_ != nullptr) times.end_s = clock_->now_s();
  l.queue.push_back({key, std::move(buffer), times});
  const std::int64_t now = ++in_flight_;
  for (std::int64_t peak = peak_in_flight_; now > peak;)
    if (peak_in_flight_.compare_exchange_weak(peak, now)) break;
  l.changed.notify_all();
}

SendTimes InProcessTransport::receive(std::int32_t dst, std::int32_t src, const MessageKey& key,
                                      std::span<float> out) {
  Link& l = link(src, dst);
  std::unique_lock lock(l.mutex);
  auto find = [&] {
    return std::find_if(l.queue.begin(), l.queue.end(),
                        [&](const Entry& e) { return e.key == key; });
  };
  auto it = l.queue.end();
  l.changed.wait(lock, [&] { return aborted_ || (it = find()) != l.queue.end(); });
  if (aborted_) throw Aborted();
  if (it->data.size() != out.size())
    throw std::logic_error(
        fmt::format("message of {} floats where {} were expected", it->data.size(), out.size()));
  std::copy(it->data.begin(), it->data.end(), out.begin());
  const SendTimes times = it->times;
  l.spare.push_back(std::move(it->data));
  l.queue.erase(it);
  --in_flight_;
  l.changed.notify_all();
  return times;
}

bool InProcessTransport::ready(std::int32_t dst, std::int32_t src, const MessageKey& key) {
  Link& l = link(src, dst);
  std::lock_guard lock(l.mutex);
  return std::any_of(l.queue.begin(), l.queue.end(), [&](const Entry& e) { return e.key == key; });
}

void InProcessTransport::abort() {
  aborted_ = true;
  for (auto& l : links_) {
    std::lock_guard lock(l->mutex);
    l->changed.notify_all();
  }
}

}  // namespace paci::exec
