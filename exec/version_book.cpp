// VersionBook: versions read, stash slots kept and freed.
#include "exec/version_book.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <stdexcept>

namespace paci::exec {

VersionBook::VersionBook(std::int32_t stage, WeightPolicy policy, std::size_t stash_slots,
                         std::int32_t updates, std::int64_t total_microbatches)
    : stage_(stage),
      policy_(policy),
      slot_version_(policy == WeightPolicy::current ? 0 : stash_slots, -1),
      readers_(static_cast<std::size_t>(std::max(updates, 0)) + 1, 0),
      v_f_(static_cast<std::size_t>(total_microbatches), -1),
      v_b_(static_cast<std::size_t>(total_microbatches), -1),
      update_(static_cast<std::size_t>(total_microbatches), -1) {}

void VersionBook::forward(std::int32_t mb) {
  v_f_[static_cast<std::size_t>(mb)] = version_;
  ++readers_[static_cast<std::size_t>(version_)];
}

int VersionBook::backward_source(std::int32_t mb, std::int32_t* version_read) const {
  const std::int32_t forward_version = v_f_[static_cast<std::size_t>(mb)];
  if (policy_ == WeightPolicy::current || forward_version == version_) {
    *version_read = version_;
    return kCurrent;
  }
  for (std::size_t i = 0; i < slot_version_.size(); ++i)
    if (slot_version_[i] == forward_version) {
      *version_read = forward_version;
      return static_cast<int>(i);
    }
  throw std::logic_error(
      fmt::format("stage {}: version {} read by F of micro-batch {} was not kept", stage_,
                  forward_version, mb));
}

void VersionBook::backward(std::int32_t mb, std::int32_t version_read) {
  v_b_[static_cast<std::size_t>(mb)] = version_read;
  update_[static_cast<std::size_t>(mb)] = version_;
  const std::int32_t forward_version = v_f_[static_cast<std::size_t>(mb)];
  if (--readers_[static_cast<std::size_t>(forward_version)] == 0 && forward_version != version_)
    for (auto& v : slot_version_)
      if (v == forward_version) {
        v = -1;  // no in-flight backward needs it any more
        --stash_in_use_;
      }
}

int VersionBook::update() {
  int slot = kCurrent;
  if (policy_ != WeightPolicy::current && readers_[static_cast<std::size_t>(version_)] > 0) {
    // In-flight forwards read the current version: it must be kept for their backwards.
    const auto free = std::find(slot_version_.begin(), slot_version_.end(), -1);
    if (free == slot_version_.end())
      throw std::runtime_error(fmt::format(
          "stage {} needs more than {} weight versions alive (the schedule's weight policy "
          "allows fewer)",
          stage_, slot_version_.size() + 1));
    *free = version_;
    slot = static_cast<int>(free - slot_version_.begin());
    peak_stash_in_use_ = std::max(peak_stash_in_use_, ++stash_in_use_);
  }
  ++version_;
  return slot;
}

void VersionBook::save_image(model::ImageWriter& out) const {
  out.put(version_);
  out.put(static_cast<std::uint64_t>(stash_in_use_));
  out.put(static_cast<std::uint64_t>(peak_stash_in_use_));
  out.put(std::span<const std::int32_t>(slot_version_));
  out.put(std::span<const std::int64_t>(readers_));
  for (const auto* record : {&v_f_, &v_b_, &update_})
    out.put(std::span<const std::int32_t>(*record));
}

void VersionBook::load_image(model::ImageReader& in) {
  version_ = in.get<std::int32_t>();
  stash_in_use_ = in.get<std::uint64_t>();
  peak_stash_in_use_ = in.get<std::uint64_t>();
  in.get(std::span<std::int32_t>(slot_version_));
  in.get(std::span<std::int64_t>(readers_));
  for (auto* record : {&v_f_, &v_b_, &update_}) in.get(std::span<std::int32_t>(*record));
}

WeightStashBook::WeightStashBook(std::int32_t stage, std::size_t stashes)
    : stage_(stage), microbatch_(stashes, -1), version_(stashes, 0) {}

std::size_t WeightStashBook::in_use() const {
  return static_cast<std::size_t>(
      std::ranges::count_if(microbatch_, [](auto mb) { return mb >= 0; }));
}

std::size_t WeightStashBook::find(std::int64_t mb) const {
  for (std::size_t i = 0; i < microbatch_.size(); ++i)
    if (microbatch_[i] == mb) return i;
  if (mb < 0 && microbatch_.empty())
    throw std::logic_error(fmt::format("stage {} does not split its backward", stage_));
  if (mb < 0)
    throw std::logic_error(fmt::format("stage {}: every weight-gradient stash is held", stage_));
  throw std::logic_error(
      fmt::format("stage {}: no input gradient of micro-batch {} awaits its W", stage_, mb));
}

std::size_t WeightStashBook::hold(std::int64_t mb, std::int32_t version) {
  const std::size_t i = find(-1);  // a free stash: the activation slots bound how many are held
  microbatch_[i] = mb;
  version_[i] = version;
  return i;
}

WeightStashBook::Held WeightStashBook::release(std::int64_t mb) {
  const std::size_t i = find(mb);
  microbatch_[i] = -1;
  return {i, version_[i]};
}

bool WeightStashBook::holds(std::int64_t mb, std::int32_t version) const {
  for (std::size_t i = 0; i < microbatch_.size(); ++i)
    if (microbatch_[i] == mb && version_[i] == version) return true;
  return false;
}

std::vector<std::int64_t> WeightStashBook::held() const {
  std::vector<std::int64_t> out;
  for (const std::int64_t mb : microbatch_)
    if (mb >= 0) out.push_back(mb);
  std::ranges::sort(out);
  return out;
}

void WeightStashBook::save_image(model::ImageWriter& out) const {
  out.put(std::span<const std::int64_t>(microbatch_));
  out.put(std::span<const std::int32_t>(version_));
}

void WeightStashBook::load_image(model::ImageReader& in) {
  in.get(std::span<std::int64_t>(microbatch_));
  in.get(std::span<std::int32_t>(version_));
}

}  // namespace paci::exec
