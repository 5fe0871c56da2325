// VersionBook: the weight-version bookkeeping of one stage, whatever backend holds the weights.
// It records the version each forward and backward really read and the update that consumed each
// gradient, and decides which versions must be kept for in-flight backwards and in which stash
// slot, under the stage's weight policy:
//   current       the backward reads the current weights (PACI: maybe newer than its forward's)
//   stash         an update first keeps the current weights if an in-flight forward read them;
//                 the backward then reads the version its forward read (PipeDream)
//   double_buffer the same with at most two versions alive (PipeDream-2BW)
// The CPU StageRuntime and the CUDA pipeline both use it, so they record the same versions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "model/image.hpp"
#include "schedules/ir.hpp"

namespace paci::exec {

class VersionBook {
 public:
  static constexpr int kCurrent = -1;  // backward_source(): read the current weights

  // stash_slots: extra weight copies the stage may keep (analysed peak versions − 1); updates:
  // the stage's U actions; total_microbatches: every micro-batch of the run.
  VersionBook(std::int32_t stage, WeightPolicy policy, std::size_t stash_slots,
              std::int32_t updates, std::int64_t total_microbatches);

  std::int32_t version() const { return version_; }
  std::size_t stash_slots() const { return slot_version_.size(); }

  // F(mb) reads the current version.
  void forward(std::int32_t mb);
  // Where B(mb) reads its weights: kCurrent or a stash slot; *version_read is that version.
  int backward_source(std::int32_t mb, std::int32_t* version_read) const;
  // B(mb) is done: records what it read and the update its gradient goes into; frees a stash slot
  // no in-flight backward needs any more.
  void backward(std::int32_t mb, std::int32_t version_read);
  // U: returns the stash slot the caller must copy the current (pre-update) weights into before
  // stepping, or kCurrent when none is needed; then the version advances. Throws
  // std::runtime_error when the policy would need more versions than the stash holds.
  int update();

  std::int32_t v_f(std::int64_t mb) const { return v_f_[static_cast<std::size_t>(mb)]; }
  std::int32_t v_b(std::int64_t mb) const { return v_b_[static_cast<std::size_t>(mb)]; }
  std::int32_t update_of(std::int64_t mb) const { return update_[static_cast<std::size_t>(mb)]; }
  std::size_t stash_in_use() const { return stash_in_use_; }
  std::size_t peak_weight_versions() const { return 1 + peak_stash_in_use_; }

  // The whole book, for a cut of a run (exec/cut.hpp). load_image takes the values as they are:
  // StageRuntime::check_image compares the book with a replay of the stage's actions before the
  // cut, before anything reads it.
  void save_image(model::ImageWriter& out) const;
  void load_image(model::ImageReader& in);
  friend bool operator==(const VersionBook&, const VersionBook&) = default;

 private:
  std::int32_t stage_;
  WeightPolicy policy_;
  std::vector<std::int32_t> slot_version_;  // per stash slot: the version it holds, −1 when free
  std::vector<std::int64_t> readers_;       // per version: in-flight micro-batches whose F read it
  std::size_t stash_in_use_ = 0, peak_stash_in_use_ = 0;
  std::int32_t version_ = 0;
  std::vector<std::int32_t> v_f_, v_b_, update_;
};

// The split backward's bookkeeping, the same on both backends: which micro-batch each of a stage's
// weight-gradient stashes holds, from its I to its W, and the weight version its I read (W adds
// its gradient to that version's step). The runtime owns the stashes themselves.
class WeightStashBook {
 public:
  WeightStashBook() = default;  // a stage that does not split its backward: no stash
  WeightStashBook(std::int32_t stage, std::size_t stashes);

  std::size_t size() const { return microbatch_.size(); }
  std::size_t in_use() const;
  // I(mb) read `version`: the free stash it fills. std::logic_error when the stage has no stash
  // (it does not split its backward) or every stash is held.
  std::size_t hold(std::int64_t mb, std::int32_t version);
  struct Held {
    std::size_t stash = 0;
    std::int32_t version = -1;  // what mb's I read
  };
  // W(mb): the stash mb's I filled, now free again. std::logic_error when mb holds none.
  Held release(std::int64_t mb);
  // Whether an I of micro-batch mb that read `version` awaits its W.
  bool holds(std::int64_t mb, std::int32_t version) const;
  // The micro-batches whose I awaits its W, sorted.
  std::vector<std::int64_t> held() const;

  // For a cut of a run: the micro-batch of every stash (−1: free), then the versions.
  void save_image(model::ImageWriter& out) const;
  void load_image(model::ImageReader& in);

 private:
  std::size_t find(std::int64_t mb) const;
  std::int32_t stage_ = 0;
  std::vector<std::int64_t> microbatch_;  // per stash: the micro-batch it holds, −1 when free
  std::vector<std::int32_t> version_;     // per stash: the version its I read
};

}  // namespace paci::exec
