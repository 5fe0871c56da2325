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

}  // namespace paci::exec
