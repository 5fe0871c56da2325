// The executor's side of cuts (exec/cut.hpp), shared by exec/executor.cpp and exec/cut_record.cpp:
// the planned cuts of a run, their buffers (allocated before it starts), the hand-over between
// devices that capture a cut, and the restore of a resumed run.
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <span>
#include <vector>

#include "exec/cut.hpp"
#include "exec/executor.hpp"

namespace paci::exec {

struct Executor::CutRecorder {
  // Plans every cut of cut_every after `resumed_at` (the cut a resumed run starts at, or null)
  // and allocates the buffers for them.
  CutRecorder(const Schedule& schedule, const ExecConfig& config,
              const std::vector<std::unique_ptr<StageRuntime>>& stages, const CutPlan* resumed_at);

  // Whether the device may capture cut j: the previous cut's on_cut has returned (the stage
  // buffers are shared). Blocking, it waits for that, and throws Aborted once `aborted` is set.
  bool may_capture(std::size_t j, bool blocking, const std::atomic<bool>& aborted);
  // Keeps a copy of a message sent at `position` of device src when it crosses a planned cut
  // (j >= from).
  void keep_message(std::size_t from, std::int32_t src, std::int64_t position, std::int32_t dst,
                    const MessageKey& key, std::span<const float> data);
  // A device has copied its stages' state for cut j; the last one of the process calls on_cut.
  void captured(std::size_t j, const ExecConfig& config);
  void reset();  // before a run

  std::vector<CutPlan> plans;
  std::vector<std::vector<std::vector<float>>> messages;  // per plan, per message crossing it
  CutImage image;  // stages, runtime and losses of the cut being taken (plan, messages swapped in)
  std::size_t devices = 0;  // that capture each cut
  std::size_t first_step = 0;

 private:
  std::mutex mutex_;
  std::condition_variable written_changed_;
  std::vector<std::size_t> captured_;  // per plan: devices done
  std::size_t written_ = 0;            // cuts whose on_cut has returned
};

}  // namespace paci::exec
