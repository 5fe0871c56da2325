// Executor: allocation of the stage runtimes, the per-device worker, threaded and sequential runs,
// failure propagation, and the measured timeline and versions.
#include "exec/executor.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <atomic>
#include <csignal>
#include <limits>
#include <mutex>
#include <optional>
#include <thread>

#include "exec/cut_recorder.hpp"
#include "exec/rank_plan.hpp"
#include "exec/transport.hpp"
#include "schedules/lower.hpp"
#include "traces/metrics.hpp"

namespace paci::exec {

// Shared by the workers of one run; each field is written by one device only, or under `mutex`.
struct RunState {
  const Schedule& schedule;
  const ExecConfig& config;
  LoweredProgram program;  // what each device receives, computes and sends, in order
  RunClock clock;
  InProcessTransport local_transport;  // every message between stages of one process
  Transport* transport;                // local_transport, or the links to other processes
  // The transport between two devices: another process's device is reached through the links.
  Transport& between(std::int32_t src, std::int32_t dst) {
    return src == dst ? local_transport : *transport;
  }
  std::vector<float> losses;  // per micro-batch, written by the last stage's device
  std::mutex mutex;
  std::string error;                 // first failure
  std::atomic<bool> aborted{false};  // set with the first failure
  RunState(const Schedule& s, const ExecConfig& c)
      : schedule(s),
        config(c),
        program(lower(s)),
        // One thread replays every device: nobody could drain a full link, so none is bounded.
        local_transport(
            s.num_devices(),
            c.sequential ? std::numeric_limits<std::size_t>::max() : c.transport_capacity, &clock),
        transport(c.remote ? static_cast<Transport*>(c.remote) : &local_transport),
        losses(static_cast<std::size_t>(s.total_microbatches()), 0.0f) {}
};

class Executor::Device {
 public:
  Device(Executor& ex, RunState& run, std::int32_t device) : ex_(ex), run_(run), device_(device) {
    const std::size_t rows = ex.config_.batch * ex.config_.seq_len;
    const std::size_t width = rows * ex.config_.config.d_model;
    buffers_.resize(static_cast<std::size_t>(run.schedule.stages));
    for (std::int32_t s = 0; s < run.schedule.stages; ++s) {
      if (run.schedule.placement[static_cast<std::size_t>(s)] != device) continue;
      auto& b = buffers_[static_cast<std::size_t>(s)];
      b.tokens.resize(rows);
      b.targets.resize(rows);
      b.input.resize(width);
      b.d_output.resize(width);
      b.d_input.resize(width);
    }
    const auto& list = run.schedule.devices[static_cast<std::size_t>(device)];
    times_.resize(list.size());
    messages_.reserve(list.size());  // at most one cross-device input per action
    if (ex.config_.record_timeline) compute_.reserve(list.size());
  }

  bool done() const { return next_ >= list().size(); }

  // A resumed run: the device starts at its position of the cut.
  void start_at(std::int64_t position) { next_ = static_cast<std::size_t>(position); }

  // Runs the next action. Blocking: waits for its inputs; otherwise returns false if they have
  // not all arrived yet and no cut was taken (taking one is progress: it may let others take
  // the next).
  bool step(bool blocking) {
    bool took_cut = false;
    if (!take_cuts(blocking, took_cut)) return took_cut;
    const Action& a = list()[next_];
    const std::span<const Op> receives = program().receives(next_);
    if (!blocking)
      for (const Op& r : receives)
        if (!run_.between(r.message.src, device_).ready(device_, r.message.src, key_of(r.message)))
          return took_cut;
    if (run_.config.fail_at && *run_.config.fail_at == a) {
      if (run_.config.fail_kills) std::raise(SIGKILL);
      throw std::runtime_error("injected failure (--fail-at)");
    }
    for (const Op& r : receives) receive(r.message);
    StageRuntime& rt = ex_.stage(a.stage);
    auto& b = buffers_[static_cast<std::size_t>(a.stage)];
    const double start = run_.clock.now_s();
    std::int32_t version = rt.version();
    switch (a.kind) {
      case ActionKind::F:
        forward(rt, b, a.microbatch);
        version = rt.v_f(a.microbatch);
        break;
      case ActionKind::B:
        rt.backward(a.microbatch,
                    rt.model_stage().is_last() ? std::span<const float>() : b.d_output,
                    rt.model_stage().is_first() ? std::span<float>() : std::span<float>(b.d_input));
        version = rt.v_b(a.microbatch);
        break;
      case ActionKind::U:
        rt.update();
        version = rt.version();
        break;
      case ActionKind::I:
        rt.input_grad(
            a.microbatch, rt.model_stage().is_last() ? std::span<const float>() : b.d_output,
            rt.model_stage().is_first() ? std::span<float>() : std::span<float>(b.d_input));
        version = rt.version();  // the weights I reads (split backwards run current weights)
        break;
      case ActionKind::W:
        rt.weight_grad(a.microbatch);
        version = rt.v_b(a.microbatch);
        break;
    }
    const double end = run_.clock.now_s();
    if (run_.config.record_timeline) compute_.push_back({a, device_, start, end, version});
    sample_memory(end);
    if (a.kind == ActionKind::U && run_.config.after_update)
      run_.config.after_update(rt, run_.config.first_step + static_cast<std::size_t>(rt.version()));
    send_outputs(a, rt, b);
    // The device is free for its next action once its sends are queued (paci simulate --replay).
    times_[next_] = {start, end, run_.clock.now_s()};
    ++next_;
    return true;
  }

  // Appends what this device recorded to the run's results.
  void collect(ExecResult& result) {
    result.times[static_cast<std::size_t>(device_)] = std::move(times_);
    auto& t = result.timeline;
    t.compute.insert(t.compute.end(), compute_.begin(), compute_.end());
    t.messages.insert(t.messages.end(), messages_.begin(), messages_.end());
    t.memory.insert(t.memory.end(), memory_.begin(), memory_.end());
    result.device_peak_memory_bytes[static_cast<std::size_t>(device_)] = peak_memory_;
  }

  std::int32_t device() const { return device_; }
  const Action& current() const { return list()[std::min(next_, list().size() - 1)]; }

  void start_memory() { sample_memory(0.0); }

 private:
  struct Buffers {
    std::vector<std::int32_t> tokens, targets;
    std::vector<float> input, d_output, d_input;
  };

  const std::vector<Action>& list() const {
    return run_.schedule.devices[static_cast<std::size_t>(device_)];
  }
  const DeviceProgram& program() const {
    return run_.program.devices[static_cast<std::size_t>(device_)];
  }
  std::int32_t device_of(std::int32_t stage) const {
    return run_.schedule.placement[static_cast<std::size_t>(stage)];
  }
  void receive(const StageMessage& m) {
    auto& b = buffers_[static_cast<std::size_t>(m.consumer.stage)];
    const std::span<float> into = m.kind == DependencyKind::activation
                                      ? std::span<float>(b.input)
                                      : std::span<float>(b.d_output);
    const std::int32_t src = m.src;
    const double wait_start = run_.clock.now_s();
    const SendTimes sent = run_.between(src, device_).receive(device_, src, key_of(m), into);
    const double got = run_.clock.now_s();
    // Every message is recorded, trace or not: the report carries them for a replay.
    if (src != device_)
      messages_.push_back({m.producer, m.consumer, m.kind, src, device_,
                           static_cast<std::int64_t>(into.size() * sizeof(float)), sent.start_s,
                           sent.end_s, std::max(wait_start, sent.end_s), got});
  }

  void forward(StageRuntime& rt, Buffers& b, std::int32_t mb) {
    const model::Stage& st = rt.model_stage();
    if (st.is_first() || st.is_last())
      run_.config.data(static_cast<std::uint64_t>(mb), b.tokens, b.targets);
    const model::StageInput input = st.is_first() ? model::StageInput::tokens(b.tokens)
                                                  : model::StageInput::activations(b.input);
    const float loss = rt.forward(mb, input, b.targets);
    if (st.is_last()) record_loss(mb, loss);
  }

  void record_loss(std::int32_t mb, float loss) {
    run_.losses[static_cast<std::size_t>(mb)] = loss;
    const std::int32_t M = run_.schedule.microbatches;
    if ((mb + 1) % M != 0 || !run_.config.on_step) return;
    const std::int32_t step = mb / M;
    double sum = 0.0;
    for (std::int32_t i = step * M; i <= mb; ++i) sum += run_.losses[static_cast<std::size_t>(i)];
    run_.config.on_step({step, sum / M, run_.clock.now_s(), static_cast<std::int64_t>(mb) + 1});
  }

  void send_outputs(const Action& a, StageRuntime& rt, Buffers& b) {
    for (const Op& op : program().sends(next_)) {
      const std::int32_t dst = op.message.dst;
      const std::span<const float> data = op.message.kind == DependencyKind::activation
                                              ? rt.output(a.microbatch)
                                              : std::span<const float>(b.d_input);
      const MessageKey key = key_of(op.message);
      if (ex_.cuts_)
        ex_.cuts_->keep_message(next_cut_, device_, static_cast<std::int64_t>(next_), dst, key,
                                data);
      const double start = run_.clock.now_s();
      run_.between(device_, dst).send(device_, dst, key, data, {start, start});
    }
  }

  // At its position of the next planned cut, the device copies its stages' state into the cut's
  // image (waiting, when blocking, until the previous cut is written); `took` says whether it
  // took one. False when not blocking and it would have to wait.
  bool take_cuts(bool blocking, bool& took) {
    CutRecorder* cuts = ex_.cuts_.get();
    while (cuts && next_cut_ < cuts->count() &&
           static_cast<std::int64_t>(next_) == cuts->position(next_cut_, device_)) {
      if (!cuts->may_capture(next_cut_, blocking, run_.aborted)) return false;
      CutImage& image = cuts->image;
      for (std::int32_t s = 0; s < run_.schedule.stages; ++s) {
        if (device_of(s) != device_) continue;
        const StageRuntime& rt = ex_.stage(s);
        rt.copy_state_to(image.stages[static_cast<std::size_t>(s)]);
        rt.save_image(image.runtime[static_cast<std::size_t>(s)]);
        if (s == run_.schedule.stages - 1) std::ranges::copy(run_.losses, image.losses.begin());
      }
      cuts->captured(next_cut_++, run_.config);
      took = true;
    }
    return true;
  }

  void sample_memory(double now) {
    const std::int64_t bytes = ex_.stages_.memory_bytes(run_.schedule, device_);
    peak_memory_ = std::max(peak_memory_, bytes);
    if (run_.config.record_timeline && (memory_.empty() || memory_.back().bytes != bytes))
      memory_.push_back({device_, now, bytes});
  }

  Executor& ex_;
  RunState& run_;
  std::int32_t device_;
  std::size_t next_ = 0;
  std::size_t next_cut_ = 0;  // the next of ex_.cuts_'s cuts to take
  std::vector<Buffers> buffers_;
  std::vector<ActionTime> times_;
  std::vector<ComputeSlice> compute_;
  std::vector<MessageSlice> messages_;
  std::vector<MemorySample> memory_;
  std::int64_t peak_memory_ = 0;
};

Executor::Executor(const Schedule& schedule, const ExecConfig& config)
    : schedule_(schedule), config_(config) {
  check_runnable(schedule, config);
  analysis_ = analyze(schedule);
  if (config.remote) {
    check_launch(schedule, schedule.num_devices());  // every link keeps its sending order
    if (config.sequential)
      throw InputError("--sequential replays every device in one process: not one per process");
  }
  stages_.allocate(schedule, plan_stages(schedule, analysis_, config),
                   config.remote ? config.remote->local_device() : -1, [&](const StagePlan& plan) {
                     StageRuntimeConfig rc;
                     static_cast<StagePlan&>(rc) = plan;
                     rc.threads = config.threads_per_device;
                     auto rt = std::make_unique<StageRuntime>(rc);
                     if (config.resume_from) return rt;  // restore() sets every stage below
                     if (config.init_stage)
                       config.init_stage(plan.stage, *rt);
                     else
                       model::init_gpt2(rt->layout(), rt->params(), config.seed);
                     return rt;
                   });
  if (config.cut_every < 0) throw InputError("cut_every must be positive (0: no cuts)");
  if ((config.cut_every > 0 || config.resume_from) && config.remote)
    throw InputError(
        "cuts of a run (periodic checkpoints of it, resuming at one) need one process");
  if (config.cut_every > 0 && !config.on_cut) throw std::invalid_argument("cut_every needs on_cut");
  if (config.resume_from) restore(*config.resume_from);
  if (config.cut_every > 0)
    cuts_ =
        std::make_unique<CutRecorder>(schedule, config, stages_.all(), config.resume_from.get());
}

Executor::~Executor() = default;

ExecResult Executor::run() {
  RunState run(schedule_, config_);
  HostLinks* const remote = config_.remote;
  struct ClockGuard {  // the links stamp sends with this run's clock while it lasts
    HostLinks* links;
    ~ClockGuard() {
      if (links) links->clock = nullptr;
    }
  } clock_guard{remote};
  if (remote) {
    remote->barrier();  // the processes' clocks start together
    run.clock = RunClock();
    remote->clock = &run.clock;
  }
  std::vector<std::unique_ptr<Device>> devices;
  for (std::int32_t d = 0; d < schedule_.num_devices(); ++d) {
    if (remote && d != remote->local_device()) continue;  // another process runs it
    devices.push_back(std::make_unique<Device>(*this, run, d));
    devices.back()->start_memory();
  }
  if (cuts_) cuts_->reset();
  if (const auto& image = config_.resume_from) {  // every device at its position of the cut
    for (auto& d : devices)
      d->start_at(image->plan.positions[static_cast<std::size_t>(d->device())]);
    for (std::size_t i = 0; i < image->plan.messages.size(); ++i) {
      const CutMessage& m = image->plan.messages[i];
      run.local_transport.send(m.src, m.dst, m.key, image->messages[i], {0.0, 0.0});
    }
    run.losses = image->losses;
  }
  auto fail = [&](const Device& device, const std::exception& e) {
    run.aborted = true;
    std::lock_guard lock(run.mutex);
    if (run.error.empty())
      run.error = fmt::format("device {}, stage {}, action {}: {}", device.device(),
                              device.current().stage, to_string(device.current()), e.what());
    run.transport->abort();
  };
  if (remote) {  // this process's one device, in this thread
    Device& device = *devices.front();
    try {
      while (!device.done()) device.step(true);
    } catch (const QuietExit&) {
      throw;  // the peer reports its own failure
    } catch (const std::exception& e) {
      fail(device, e);  // tells the peers
      throw std::runtime_error(run.error);
    }
  } else if (config_.sequential) {
    bool progress = true;
    while (progress) {
      progress = false;
      for (auto& d : devices) {
        try {
          while (!d->done() && d->step(false)) progress = true;
        } catch (const std::exception& e) {
          fail(*d, e);
          throw std::runtime_error(run.error);
        }
      }
    }
    for (auto& d : devices)
      if (!d->done())
        throw std::runtime_error(
            fmt::format("deadlock: device {} waits at {}", d->device(), to_string(d->current())));
  } else {
    std::vector<std::thread> threads;
    for (auto& d : devices)
      threads.emplace_back([&, device = d.get()] {
        try {
          while (!device->done()) device->step(true);
        } catch (const Aborted&) {
        } catch (const std::exception& e) {
          fail(*device, e);
        }
      });
    for (auto& t : threads) t.join();
    if (!run.error.empty()) throw std::runtime_error(run.error);
  }
  ExecResult result;
  result.wall_s = run.clock.now_s();
  result.peak_messages_in_flight = run.local_transport.peak_in_flight();
  const auto num_devices = static_cast<std::size_t>(schedule_.num_devices());
  result.times.resize(num_devices);  // one process per device: only this device's are filled
  result.device_peak_memory_bytes.assign(num_devices, 0);
  result.timeline.source = "measured";
  result.timeline.num_devices = schedule_.num_devices();
  for (auto& d : devices) d->collect(result);
  result.microbatch_losses = run.losses;
  result.step_losses =
      step_means(std::span<const float>(run.losses), schedule_.microbatches, schedule_.steps);
  result.observed = observed_analysis(schedule_, stages_.observations());
  return result;
}

double Executor::evaluate(const std::vector<std::span<const float>>& params, const DataFn& data,
                          std::uint64_t first, std::uint64_t count) {
  if (params.size() != stages_.size())
    throw std::invalid_argument("evaluate: one weight span per stage");
  HostLinks* const remote = config_.remote;
  const std::size_t rows = config_.batch * config_.seq_len;
  std::vector<std::int32_t> tokens(rows), targets(rows);
  const auto& stages = stages_.all();
  std::vector<std::optional<model::ActivationSlot>> slots(stages.size());
  for (std::size_t s = 0; s < stages.size(); ++s)
    if (stages[s]) slots[s].emplace(stages[s]->model_stage().make_slot());
  const auto device_of = [&](std::size_t s) { return schedule_.placement[s]; };
  std::vector<float> incoming;  // an activation from another process
  if (remote) incoming.resize(rows * config_.config.d_model);
  double sum = 0.0;
  for (std::uint64_t i = 0; i < count; ++i) {
    data(first + i, tokens, targets);
    std::span<const float> x;
    for (std::size_t s = 0; s < stages.size(); ++s) {
      if (!stages[s]) continue;  // another process runs it
      const MessageKey key{DependencyKind::activation, static_cast<std::int32_t>(s) - 1,
                           static_cast<std::int32_t>(i)};
      if (s > 0 && !stages[s - 1]) {
        remote->receive(device_of(s), device_of(s - 1), key, incoming);
        x = incoming;
      }
      model::Stage& st = stages[s]->model_stage();
      const model::StageInput input =
          s == 0 ? model::StageInput::tokens(tokens) : model::StageInput::activations(x);
      if (st.is_last()) {
        sum += st.forward_loss(params[s], input, targets, 1.0f, *slots[s]);
        continue;
      }
      x = st.forward(params[s], input, *slots[s]);
      if (!stages[s + 1])  // to the process running the next stage
        remote->send(device_of(s), device_of(s + 1),
                     {DependencyKind::activation, static_cast<std::int32_t>(s),
                      static_cast<std::int32_t>(i)},
                     x, {});
    }
  }
  if (!stages.back()) return 0.0;  // the loss is known where the last stage runs
  return count ? sum / static_cast<double>(count) : 0.0;
}

RunSummary Executor::summary(const ExecResult& result) const {
  return measured_summary(schedule_, result, config_);
}

}  // namespace paci::exec
