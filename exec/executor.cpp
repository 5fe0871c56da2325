// Executor: the CPU backend of the pipeline core — a worker per device (a thread, all of them in
// one thread for a sequential replay, or this process's one device), blocking queues between
// them, the run clock, failure propagation, and the cuts of a run.
#include "exec/executor.hpp"

#include <fmt/format.h>
#include <atomic>
#include <limits>
#include <mutex>
#include <thread>

#include "exec/cut_recorder.hpp"
#include "exec/transport.hpp"

namespace paci::exec {

namespace {

// A stage's buffers on its device: the input activation and output gradient it receives, the
// input gradient it sends back, and (two copies) its twin's gradients before each update.
struct CpuBuffers : StageTokens {
  std::vector<float> input, d_output, input_grad, twin;
  CpuBuffers() = default;
  CpuBuffers(std::size_t rows, std::size_t width)
      : StageTokens(rows), input(width), d_output(width), input_grad(width) {}
  std::span<float> d_input() { return input_grad; }
};

// One device of the run, and what it keeps beside the core's record.
struct CpuDevice : DeviceRun<double> {
  CpuDevice(const Schedule& schedule, const LoweredProgram& program, std::int32_t d)
      : DeviceRun(schedule, program, d) {
    messages.reserve(list.size());  // at most one cross-device input per action
  }
  std::vector<MessageSlice> messages;  // received from other devices
  std::size_t next_cut = 0;            // the next of the run's cuts to take
};

struct Taken {
  std::span<const float> view;
};

}  // namespace

// One run: the core's hooks for the CPU (exec/pipeline_core.hpp's advance()), and the state the
// workers share; each field is written by one device only, or under `mutex_`.
class Executor::Run {
 public:
  explicit Run(Executor& ex)
      : ex_(ex),
        schedule_(ex.schedule_),
        config_(ex.config_),
        program_(lower(schedule_)),
        // One thread replays every device: nobody could drain a full link, so none is bounded.
        local_transport_(schedule_.num_devices(),
                         config_.sequential ? std::numeric_limits<std::size_t>::max()
                                            : config_.transport_capacity,
                         &clock_),
        transport_(config_.remote ? static_cast<Transport*>(config_.remote) : &local_transport_),
        losses_(static_cast<std::size_t>(schedule_.total_microbatches()), 0.0f),
        forwards_done_(static_cast<std::size_t>(schedule_.steps)) {
    const std::size_t rows = config_.batch * config_.seq_len;
    buffers_.resize(static_cast<std::size_t>(schedule_.stages));
    for (std::int32_t s = 0; s < schedule_.stages; ++s) {
      if (!ex.runs(s)) continue;
      auto& b = buffers_[static_cast<std::size_t>(s)];
      b = {rows, rows * config_.config.d_model};
      if (schedule_.copies > 1) b.twin.resize(ex.stages_[s].layout().size());
      if (schedule_.last_stage(s))
        local_forwards_ += schedule_.microbatches / schedule_.copies;  // a copy's half, or all
    }
  }

  Run(const Run&) = delete;  // the devices point into program_
  Run& operator=(const Run&) = delete;

  ExecResult execute();

  // The core's hooks.
  const TrainingConfig& config() const { return config_; }
  StageRuntime& stage(std::int32_t s) { return ex_.stages_[s]; }
  CpuBuffers& buffers(std::int32_t s) { return buffers_[static_cast<std::size_t>(s)]; }
  float* loss(std::int32_t mb) { return &losses_[static_cast<std::size_t>(mb)]; }
  std::int64_t memory_bytes(std::int32_t device) const {
    return ex_.stages_.memory_bytes(schedule_, device);
  }
  double stamp(const StageRuntime&) const { return clock_.now_s(); }
  double free_stamp(double) const { return clock_.now_s(); }

  bool inputs_ready(const CpuDevice& dev, std::span<const Op> receives, bool wait) {
    if (wait) return true;  // take() waits
    for (const Op& r : receives)
      if (!between(r.message.src, dev.device).ready(dev.device, r.message.src, key_of(r.message)))
        return false;
    return true;
  }

  Taken take(CpuDevice& dev, std::span<const Op> receives, StageRuntime&) {
    const Action& a = dev.list[dev.next];
    CpuBuffers& b = buffers(a.stage);
    for (const Op& r : receives) {
      const StageMessage& m = r.message;
      const std::span<float> into = m.kind == DependencyKind::activation ? std::span<float>(b.input)
                                    : m.kind == DependencyKind::twin_gradients
                                        ? std::span<float>(b.twin)
                                        : std::span<float>(b.d_output);
      const double wait_start = clock_.now_s();
      const SendTimes sent = between(m.src, dev.device).receive(dev.device, m.src, key_of(m), into);
      const double got = clock_.now_s();
      // Every message is recorded, trace or not: the report carries them for a replay. (From
      // another process the send is stamped by its clock: a receive starts no later than it ends
      // here, whatever the clocks' skew.)
      if (m.src != dev.device)
        dev.messages.push_back({m.producer, m.consumer, m.kind, m.src, dev.device,
                                static_cast<std::int64_t>(into.size() * sizeof(float)),
                                sent.start_s, sent.end_s,
                                std::min(std::max(wait_start, sent.end_s), got), got});
    }
    if (a.kind == ActionKind::U)  // the twin's gradients (two copies), or nothing
      return {receives.empty() ? std::span<const float>() : std::span<const float>(b.twin)};
    return {a.kind == ActionKind::F ? std::span<const float>(b.input)
                                    : std::span<const float>(b.d_output)};
  }

  void consumed(CpuDevice&, Taken&, const Action&, double) {}

  void finished(CpuDevice&, const Action& a, StageRuntime& rt, double) {
    if (a.kind == ActionKind::F && rt.is_last()) report_step(a.microbatch);
    if (a.kind == ActionKind::U && config_.after_update)
      config_.after_update(rt, config_.first_step + static_cast<std::size_t>(rt.version()));
  }

  void send(CpuDevice& dev, const Op& op, std::span<const float> data, StageRuntime&) {
    const std::int32_t dst = op.message.dst;
    const MessageKey key = key_of(op.message);
    if (ex_.cuts_)
      ex_.cuts_->keep_message(dev.next_cut, dev.device, static_cast<std::int64_t>(dev.next), dst,
                              key, data);
    const double start = clock_.now_s();
    between(dev.device, dst).send(dev.device, dst, key, data, {start, start});
  }

 private:
  // The transport between two devices: another process's device is reached through the links.
  Transport& between(std::int32_t src, std::int32_t dst) {
    return src == dst ? local_transport_ : *transport_;
  }

  // Runs the device's next action (blocking: waits for its inputs; otherwise false if they have
  // not all arrived yet and no cut was taken: taking one is progress, it may let others take the
  // next).
  bool step(CpuDevice& dev, bool blocking) {
    bool took_cut = false;
    if (!take_cuts(dev, blocking, took_cut)) return took_cut;
    return advance(*this, dev, blocking) || took_cut;
  }

  // A last stage's forward: once every loss of its step is in losses_ (two copies: both last
  // stages', on two devices), the step's mean loss, reported. A process running one copy's last
  // stage alone (two copies, one process per device) never has them all: its step losses come
  // from the merged results (exec/rank_results.hpp).
  void report_step(std::int32_t mb) {
    const std::int32_t M = schedule_.microbatches;
    const std::int32_t step = mb / M;
    // acq_rel: the forward that completes the count sees every other one's loss.
    if (forwards_done_[static_cast<std::size_t>(step)].fetch_add(1, std::memory_order_acq_rel) +
                1 !=
            local_forwards_ ||
        !config_.on_step)
      return;
    const bool whole = local_forwards_ == M;  // else one copy's half: progress, no loss
    config_.on_step({step,
                     whole ? step_mean(std::span<const float>(losses_), M, step)
                           : std::numeric_limits<double>::quiet_NaN(),
                     clock_.now_s(), static_cast<std::int64_t>(step + 1) * M, whole});
  }

  // At its position of the next planned cut, the device copies its stages' state into the cut's
  // image (waiting, when blocking, until the previous cut is written); `took` says whether it
  // took one. False when not blocking and it would have to wait.
  bool take_cuts(CpuDevice& dev, bool blocking, bool& took) {
    CutRecorder* cuts = ex_.cuts_.get();
    while (cuts && dev.next_cut < cuts->count() &&
           static_cast<std::int64_t>(dev.next) == cuts->position(dev.next_cut, dev.device)) {
      if (!cuts->may_capture(dev.next_cut, blocking, aborted_)) return false;
      CutImage& image = cuts->image;
      for (std::int32_t s = 0; s < schedule_.stages; ++s) {
        if (schedule_.placement[static_cast<std::size_t>(s)] != dev.device) continue;
        const StageRuntime& rt = stage(s);
        rt.copy_state_to(image.stages[static_cast<std::size_t>(s)]);
        rt.save_image(image.runtime[static_cast<std::size_t>(s)]);
        if (s == schedule_.stages - 1) std::ranges::copy(losses_, image.losses.begin());
      }
      cuts->captured(dev.next_cut++, config_);
      took = true;
    }
    return true;
  }

  void fail(const CpuDevice& dev, const std::exception& e) {
    aborted_ = true;
    std::lock_guard lock(mutex_);
    if (error_.empty())
      error_ = fmt::format("{}: {}", at_action(dev.device, dev.current()), e.what());
    transport_->abort();
  }

  void run_workers(std::vector<std::unique_ptr<CpuDevice>>& devices);

  Executor& ex_;
  const Schedule& schedule_;
  const ExecConfig& config_;
  LoweredProgram program_;  // what each device receives, computes and sends, in order
  RunClock clock_;
  InProcessTransport local_transport_;  // every message between stages of one process
  Transport* transport_;                // local_transport_, or the links to other processes
  std::vector<float> losses_;           // per micro-batch, written by the last stage's device
  std::vector<std::atomic<std::int32_t>> forwards_done_;  // per step: last-stage forwards run
  std::int32_t local_forwards_ = 0;  // of a step's, those this process's last stages run
  std::vector<CpuBuffers> buffers_;  // per stage this process runs
  std::mutex mutex_;
  std::string error_;                 // first failure
  std::atomic<bool> aborted_{false};  // set with the first failure
};

void Executor::Run::run_workers(std::vector<std::unique_ptr<CpuDevice>>& devices) {
  if (config_.remote) {  // this process's one device, in this thread
    CpuDevice& dev = *devices.front();
    try {
      while (!dev.done()) step(dev, true);
    } catch (const QuietExit&) {
      throw;  // the peer reports its own failure
    } catch (const std::exception& e) {
      fail(dev, e);  // tells the peers
      throw std::runtime_error(error_);
    }
  } else if (config_.sequential) {
    bool progress = true;
    while (progress) {
      progress = false;
      for (auto& d : devices) {
        try {
          while (!d->done() && step(*d, false)) progress = true;
        } catch (const std::exception& e) {
          fail(*d, e);
          throw std::runtime_error(error_);
        }
      }
    }
    for (auto& d : devices)
      if (!d->done()) throw deadlock(d->device, d->current());
  } else {
    std::vector<std::thread> threads;
    for (auto& d : devices)
      threads.emplace_back([&, dev = d.get()] {
        try {
          while (!dev->done()) step(*dev, true);
        } catch (const Aborted&) {
        } catch (const std::exception& e) {
          fail(*dev, e);
        }
      });
    for (auto& t : threads) t.join();
    if (!error_.empty()) throw std::runtime_error(error_);
  }
}

ExecResult Executor::Run::execute() {
  HostLinks* const remote = config_.remote;
  struct ClockGuard {  // the links stamp sends with this run's clock while it lasts
    HostLinks* links;
    ~ClockGuard() {
      if (links) links->clock = nullptr;
    }
  } clock_guard{remote};
  if (remote) {
    remote->barrier();  // the processes' clocks start together
    clock_ = RunClock();
    remote->clock = &clock_;
  }
  std::vector<std::unique_ptr<CpuDevice>> devices;
  for (std::int32_t d = 0; d < schedule_.num_devices(); ++d) {
    if (remote && d != remote->local_device()) continue;  // another process runs it
    devices.push_back(std::make_unique<CpuDevice>(schedule_, program_, d));
    devices.back()->log.memory(0.0, memory_bytes(d), config_.record_timeline);
  }
  if (ex_.cuts_) ex_.cuts_->reset();
  if (const auto& image = config_.resume_from) {  // every device at its position of the cut
    for (auto& d : devices)
      d->start_at(
          static_cast<std::size_t>(image->plan.positions[static_cast<std::size_t>(d->device)]));
    for (std::size_t i = 0; i < image->plan.messages.size(); ++i) {
      const CutMessage& m = image->plan.messages[i];
      local_transport_.send(m.src, m.dst, m.key, image->messages[i], {0.0, 0.0});
    }
    losses_ = image->losses;
    // The last stages' forwards run before the cut count toward their steps' reports.
    for (auto& d : devices)
      for (std::size_t i = 0; i < d->next; ++i) {
        const Action& a = d->list[i];
        if (a.kind == ActionKind::F && stage(a.stage).is_last())
          forwards_done_[static_cast<std::size_t>(a.microbatch / schedule_.microbatches)]++;
      }
  }
  run_workers(devices);
  const double wall_s = clock_.now_s();
  ExecResult result = result_of(schedule_, std::span<const float>(losses_), ex_.stages_);
  result.wall_s = wall_s;
  result.peak_messages_in_flight = local_transport_.peak_in_flight();
  for (auto& d : devices) {
    d->log.collect(result, d->device, d->list, config_.record_timeline, [](double s) { return s; });
    result.timeline.messages.insert(result.timeline.messages.end(), d->messages.begin(),
                                    d->messages.end());
  }
  return result;
}

Executor::Executor(const Schedule& schedule, const ExecConfig& config)
    : Pipeline(
          schedule, config,
          [&] {
            if (config.remote && config.sequential)
              throw InputError(
                  "--sequential replays every device in one process: not one per process");
          },
          [&](const StagePlan& plan) {
            StageRuntimeConfig rc;
            static_cast<StagePlan&>(rc) = plan;
            rc.threads = config.threads_per_device;
            if (config.remote != nullptr) {  // expert parallelism: this process's part
              rc.shape.experts = config.remote->expert_shard();
              rc.exchange = config.remote->expert_exchange();
            }
            return rc;
          },
          !config.resume_from) {  // restore() sets every stage of a resumed run below
  if (config.cut_every < 0) throw InputError("cut_every must be positive (0: no cuts)");
  if ((config.cut_every > 0 || config.resume_from) && config.remote)
    throw InputError(
        "cuts of a run (periodic checkpoints of it, resuming at one) need one process");
  if ((config.cut_every > 0 || config.resume_from) && schedule.copies > 1)
    throw InputError(fmt::format(
        "cuts of a run (periodic checkpoints of it, resuming at one) are not taken of {}'s two "
        "copies of the model: save at the end (--save without --save-every), or train it with "
        "--kind dualpipe, whose --save-every saves whole steps",
        schedule.kind));
  if (config.cut_every > 0 && !config.on_cut) throw std::invalid_argument("cut_every needs on_cut");
  if (config.resume_from) restore(*config.resume_from);
  if (config.cut_every > 0)
    cuts_ =
        std::make_unique<CutRecorder>(schedule, config, stages_.all(), config.resume_from.get());
}

Executor::~Executor() = default;

ExecResult Executor::run() {
  return Run(*this).execute();
}

double Executor::evaluate(const std::vector<std::span<const float>>& params, const DataFn& data,
                          std::uint64_t first, std::uint64_t count) {
  // Activations to and from the processes running the neighbouring stages.
  struct Hops {
    HostLinks* remote;
    const Schedule& schedule;
    std::vector<float> incoming;
    std::int32_t device_of(std::int32_t s) const {
      return schedule.placement[static_cast<std::size_t>(s)];
    }
    std::span<const float> receive(std::int32_t s, std::int32_t mb) {
      remote->receive(device_of(s), device_of(s - 1), {DependencyKind::activation, s - 1, mb},
                      incoming);
      return incoming;
    }
    void send(std::int32_t s, std::int32_t mb, std::span<const float> x) {
      remote->send(device_of(s), device_of(s + 1), {DependencyKind::activation, s, mb}, x, {});
    }
    void pass(const StageRuntime&) {}
  };
  const std::size_t rows = config_.batch * config_.seq_len;
  Hops hops{config_.remote, schedule_, {}};
  if (config_.remote) hops.incoming.resize(rows * config_.config.d_model);
  // Two copies hold the same weights: copy 0's stages evaluate the model.
  return evaluate_stages(stages_, params, rows, data, first, count, hops,
                         static_cast<std::size_t>(schedule_.stages_per_copy()));
}

}  // namespace paci::exec
