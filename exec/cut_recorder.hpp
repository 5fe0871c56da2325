// The executor's side of cuts (exec/cut.hpp), shared by exec/executor.cpp and exec/cut_record.cpp:
// the planned cuts of a run, their buffers (allocated before it starts), the hand-over between
// devices that capture a cut, and the restore of a resumed run.
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <span>
#include <vector>

#include "exec/cut.hpp"
#include "exec/executor.hpp"

namespace paci::exec {

struct Executor::CutRecorder {
  // The cuts of cut_every after `resumed` (the cut a resumed run starts at, or null), with
  // buffers for two at a time: cut j + 2 is planned once cut j is written. That is enough: a
  // message that crosses cut j + 1 and was sent before its sender's position of cut j crosses
  // cut j too (positions never move back), so it is copied over from cut j's when cut j is
  // written; any other is sent after its sender has taken cut j, hence after cut j - 1 was
  // written and cut j + 1 planned.
  CutRecorder(const Schedule& schedule, const ExecConfig& config,
              const std::vector<std::unique_ptr<StageRuntime>>& stages, const CutImage* resumed);

  std::size_t count() const { return updates_.size(); }
  // Device d's position of cut j: valid once the device has taken cut j - 1.
  std::int64_t position(std::size_t j, std::int32_t device) const {
    return slots_[j % 2].plan.positions[static_cast<std::size_t>(device)];
  }
  // Whether a device may take cut j: the previous cut's on_cut has returned (the stage buffers
  // are shared). Blocking, it waits for that, and throws Aborted once `aborted` is set.
  bool may_capture(std::size_t j, bool blocking, const std::atomic<bool>& aborted);
  // Keeps a copy of a message sent at `position` of device src, before its position of cut j,
  // when it crosses cut j.
  void keep_message(std::size_t j, std::int32_t src, std::int64_t position, std::int32_t dst,
                    const MessageKey& key, std::span<const float> data);
  // A device has copied its stages' state for cut j; the last one calls on_cut, carries the
  // messages that also cross cut j + 1 over and plans cut j + 2.
  void captured(std::size_t j, const ExecConfig& config);
  void reset();  // before a run: the first two cuts planned

  CutImage image;  // stages, runtime and losses of the cut being taken (plan, messages swapped in)
  std::size_t devices = 0;  // that take each cut
  std::size_t first_step = 0;

 private:
  struct Slot {
    CutPlan plan;
    std::vector<std::vector<float>> messages;  // per plan.messages entry
  };
  void plan_into(std::size_t j);
  // Copies the data of every message of `from` that crosses cut j too into cut j's buffers.
  void carry(const CutPlan& from, const std::vector<std::vector<float>>& data, std::size_t j);

  CutPlanner planner_;
  std::vector<std::int32_t> updates_;  // per cut to take: the update it follows
  std::array<Slot, 2> slots_;          // cut j in slot j % 2
  std::size_t width_ = 0;              // floats per message
  const CutImage* resumed_ = nullptr;
  std::mutex mutex_;
  std::condition_variable written_changed_;
  std::vector<std::size_t> captured_;  // per cut: devices done
  std::size_t written_ = 0;            // cuts whose on_cut has returned
};

}  // namespace paci::exec
