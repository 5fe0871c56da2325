// GpuPipeline: the pipeline core's hooks on the GPU — the host issue loop over the stages'
// streams, the device-local transport, losses reported per step, and the measured timeline from
// CUDA events.
#include "exec/cuda/pipeline.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <cmath>
#include <deque>
#include <map>
#include <string>
#include <tuple>
#include <utility>

#include "cuda/check.hpp"
#include "cuda/device.hpp"
#include "exec/event_clock.hpp"
#include "exec/transport.hpp"
#include "schedules/lower.hpp"

namespace paci::exec::gpu {

namespace {

// How many optimizer steps the host may queue ahead of the GPU's last finished loss.
constexpr std::int32_t kStepsAhead = 3;

void copy_async(cudaStream_t stream, void* dst, const void* src, std::size_t bytes) {
  PACI_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream));
}

// EventClock's backend: CUDA events with timing (a deque: stable, move-only elements).
struct CudaEvents {
  using Handle = cudaEvent_t;
  std::deque<cuda::Event> events;

  Handle create() { return events.emplace_back().get(); }
  static bool query(Handle e) {
    const cudaError_t state = cudaEventQuery(e);
    if (state == cudaErrorNotReady) return false;
    PACI_CUDA_CHECK(state);
    return true;
  }
  static double elapsed_ms(Handle from, Handle to) {
    float ms = 0;
    PACI_CUDA_CHECK(cudaEventElapsedTime(&ms, from, to));
    return ms;
  }
};

// A stage's buffers: its tokens and targets, and the input gradient its B or I sends back.
struct GpuBuffers : StageTokens {
  cuda::DeviceTensor input_grad;  // empty on the first stage
  GpuBuffers() = default;
  explicit GpuBuffers(std::size_t rows) : StageTokens(rows) {}
  cuda::MutableTensorView d_input() { return input_grad.view(); }
};

// One schedule device: the core's record, and what its next action's stream must wait for.
struct GpuDevice : DeviceRun<int> {
  using DeviceRun::DeviceRun;
  std::int32_t last_stage = -1;
  int last_end = -1;  // the stamp of its last action's end
};

}  // namespace

// One run: the core's hooks for the GPU (exec/pipeline_core.hpp's advance()) and the issue loop's
// state. Timestamps are EventClock stamps: a bounded pool of events, times in double seconds.
class GpuPipeline::Run {
 public:
  Run(GpuPipeline& p)
      : p_(p),
        schedule_(p.schedule_),
        program_(lower(schedule_)),
        losses_(static_cast<std::size_t>(schedule_.total_microbatches())),
        step_event_(static_cast<std::size_t>(schedule_.steps), -1),
        remote_(p.config_.remote) {
    const std::size_t rows = p.config_.batch * p.config_.seq_len;
    const std::size_t width = rows * p.config_.config.d_model;
    buffers_.resize(static_cast<std::size_t>(schedule_.stages));
    for (std::int32_t s = 0; s < schedule_.stages; ++s) {
      if (!p.runs(s)) continue;  // another process runs it
      GpuBuffers& b = buffers_[static_cast<std::size_t>(s)];
      b = GpuBuffers(rows);
      if (!p.stage(s).is_first()) b.input_grad = cuda::DeviceTensor(p.config_.precision, width);
    }
    width_ = width;
    // A buffer for every message the host can have in flight, allocated now: a cudaMalloc mid-run
    // can wait behind NCCL transfers that wait on other processes. The lowered program's
    // message_bound() holds under any timing, but a buffer the host is done with may still be read
    // (or sent) on the GPU, which runs behind: free_buffer() then grows the pool (counted:
    // message_buffers_grown).
    preallocated_ = message_bound(program_);
    for (std::int64_t i = 0; i < preallocated_; ++i) add_buffer();
    devices_.reserve(static_cast<std::size_t>(schedule_.num_devices()));
    for (std::int32_t d = 0; d < schedule_.num_devices(); ++d)
      devices_.emplace_back(schedule_, program_, d);
  }

  Run(const Run&) = delete;  // the devices point into program_
  Run& operator=(const Run&) = delete;

  ExecResult execute() {
    PACI_CUDA_CHECK(cudaDeviceSynchronize());
    if (remote_) remote_->barrier();  // the processes' clocks start together
    const int origin = clock_.stamp();
    record(origin, p_.stage(p_.first_local_stage()).stream());
    RunClock clock;
    for (GpuDevice& dev : devices_)
      if (local(dev.device)) dev.log.memory(origin, memory_bytes(dev.device), record_timeline());
    bool all_done = false;
    while (!all_done) {
      all_done = true;
      bool progress = false;
      for (GpuDevice& dev : devices_) {
        if (!local(dev.device)) continue;
        current_device_ = dev.device;
        while (!dev.done() && advance(*this, dev, false)) {
          progress = true;
          if (remote_) bound_run_ahead(dev);
        }
        if (!dev.done()) all_done = false;
      }
      current_device_ = -1;
      report_steps(clock, false);
      if (!all_done && !progress)
        for (const GpuDevice& dev : devices_)
          if (local(dev.device) && !dev.done()) throw deadlock(dev.device, dev.current());
    }
    current_device_ = -1;
    if (remote_) {  // never block on the GPU without watching the links
      for (const GpuDevice& dev : devices_)
        if (dev.last_end >= 0) wait_event(dev.last_end);
      remote_->wait_idle();
    }
    PACI_CUDA_CHECK(cudaDeviceSynchronize());
    report_steps(clock, true);
    clock_.resolve();  // everything has completed: every stamp gets its time
    const double wall_s = clock.now_s();
    ExecResult result =
        result_of(schedule_, std::span<const double>(losses_.data(), losses_.size()), p_.stages_);
    result.wall_s = wall_s;
    result.peak_messages_in_flight = peak_in_use_;
    result.message_buffers_preallocated = preallocated_;
    result.message_buffers_grown = static_cast<std::int64_t>(messages_.size()) - preallocated_;
    collect(result);
    return result;
  }

  // Where a failure happened, for its message: the action being queued, or none, when the
  // failure surfaced while reporting losses or waiting for the GPU.
  std::string failure_context() const {
    if (current_device_ < 0) return "GPU run";
    return at_action(current_device_,
                     devices_[static_cast<std::size_t>(current_device_)].current());
  }

  // The core's hooks.
  struct Taken {
    cuda::TensorView view;  // the last input's data
    cudaStream_t stream = nullptr;
  };
  const TrainingConfig& config() const { return p_.config_; }
  GpuStageRuntime& stage(std::int32_t s) { return p_.stage(s); }
  GpuBuffers& buffers(std::int32_t s) { return buffers_[static_cast<std::size_t>(s)]; }
  double* loss(std::int32_t mb) { return &losses_[static_cast<std::size_t>(mb)]; }
  std::int64_t memory_bytes(std::int32_t device) const {
    return p_.stages_.memory_bytes(schedule_, device);
  }
  int stamp(const GpuStageRuntime& rt) { return stamp_on(rt.stream()); }
  int free_stamp(int end) const { return end; }

  // Whether every message the device's next action needs from this process has been queued.
  bool inputs_ready(GpuDevice&, std::span<const Op> receives, bool) {
    clock_.resolve_if_due();  // every stamp so far is recorded: reuse the completed events
    inputs_.clear();
    for (const Op& r : receives) {
      if (!local(r.message.src)) continue;
      const auto it = pending_.find(key(r.message));
      if (it == pending_.end()) return false;
      inputs_.push_back(it);
    }
    return true;
  }

  // Messages from other processes are queued now, in the program's order (the order their links
  // carry them), never waited for on the host; the stage's stream waits for every input.
  Taken take(GpuDevice& dev, std::span<const Op> receives, GpuStageRuntime& rt) {
    for (const Op& r : receives)
      if (!local(r.message.src)) inputs_.push_back(receive_remote(r.message));
    const cudaStream_t stream = rt.stream();
    if (dev.last_end >= 0 && dev.last_stage != rt.stage()) wait_on(dev.last_end, stream);
    Taken taken{{}, stream};
    for (const auto& it : inputs_) {
      wait_on(it->second.send_end, stream);
      taken.view = std::as_const(messages_[it->second.buffer]).data.view();
    }
    return taken;
  }

  // The action that read the inputs is queued: their buffers are free once the stream passes it.
  void consumed(GpuDevice& dev, Taken& taken, const Action& a, int start) {
    for (const auto& it : inputs_) {
      Message& m = messages_[it->second.buffer];
      m.consumed.record(taken.stream);
      m.used_before = true;
      m.in_use = false;
      // Counted at its send; one from another process is not counted, as on the CPU.
      if (local(it->second.src_device)) --in_use_;
      if (it->second.src_device != dev.device)  // always: the report carries them for a replay
        recorded_.push_back(
            {it->second.producer, a, static_cast<DependencyKind>(std::get<0>(it->first)),
             it->second.src_device, dev.device, it->second.send_start, it->second.send_end, start});
      pending_.erase(it);
    }
    inputs_.clear();
  }

  void finished(GpuDevice& dev, const Action& a, GpuStageRuntime& rt, int end) {
    dev.last_end = end;
    dev.last_stage = a.stage;
    if (a.kind == ActionKind::F && rt.is_last() &&
        (a.microbatch + 1) % schedule_.microbatches == 0) {
      step_event_[static_cast<std::size_t>(a.microbatch / schedule_.microbatches)] = end;
      ++steps_queued_;
    }
  }

  // A copy of the data into a pooled buffer on the producer's stream; to another process, the
  // buffer is free again once the link has sent it.
  void send(GpuDevice& dev, const Op& op, cuda::TensorView data, GpuStageRuntime& rt) {
    const std::size_t i = free_buffer();
    Message& m = messages_[i];
    m.in_use = true;
    peak_in_use_ = std::max(peak_in_use_, ++in_use_);
    const cudaStream_t stream = rt.stream();
    if (m.used_before) m.consumed.wait_on(stream);  // its last reader has finished with it
    const int start = stamp_on(stream);
    copy_async(stream, m.data.view().data, data.data,
               data.count * cuda::element_bytes(data.precision));
    const int end = stamp_on(stream);
    const std::int32_t dst = op.message.dst;
    if (!local(dst)) {
      remote_->send(dst, std::as_const(m.data).view(), clock_.handle(end), m.consumed.get());
      m.used_before = true;
      m.in_use = false;
      --in_use_;
      return;
    }
    pending_[key(op.message)] = {i, op.message.producer, dev.device, start, end};
  }

 private:
  struct Message {
    cuda::DeviceTensor data;
    cuda::Event consumed;  // recorded on the consumer's stream after the action that read it
    bool used_before = false;
    bool in_use = false;
  };
  struct PendingMessage {
    std::size_t buffer = 0;
    Action producer;
    std::int32_t src_device = 0;
    int send_start = -1, send_end = -1;
  };
  struct RecordedMessage {
    Action producer, consumer;
    DependencyKind kind;
    std::int32_t src = 0, dst = 0;
    int send_start = -1, send_end = -1, received = -1;
  };
  using Key = std::tuple<int, std::int32_t, std::int32_t>;  // kind, producer stage, micro-batch
  static Key key(const StageMessage& m) {
    return {static_cast<int>(m.kind), m.producer.stage, m.producer.microbatch};
  }
  bool record_timeline() const { return p_.config_.record_timeline; }

  // A new timestamp, recorded on `stream` now.
  int stamp_on(cudaStream_t stream) {
    const int id = clock_.stamp();
    record(id, stream);
    return id;
  }
  void record(int id, cudaStream_t stream) {
    PACI_CUDA_CHECK(cudaEventRecord(clock_.handle(id), stream));
  }
  // Makes `stream` wait for a stamp's work; nothing to wait for once it has completed.
  void wait_on(int id, cudaStream_t stream) {
    if (const auto e = clock_.pending(id)) PACI_CUDA_CHECK(cudaStreamWaitEvent(stream, *e, 0));
  }
  // Whether this process runs schedule device d.
  bool local(std::int32_t d) const { return !remote_ || d == remote_->local_device(); }
  // Waits for a stamp; with remote links, watching them for a failed peer.
  void wait_event(int id) {
    const auto e = clock_.pending(id);
    if (!e) return;
    if (remote_)
      remote_->wait(*e);
    else
      PACI_CUDA_CHECK(cudaEventSynchronize(*e));
  }

  // One process per device: the host may queue at most kStepsAhead steps' worth of this
  // device's actions beyond the last one the GPU finished. Waiting on an own earlier action
  // cannot deadlock: every message it needs comes from an action that precedes it in the
  // schedule's (acyclic) order, and the peers queue those without waiting on this process.
  void bound_run_ahead(const GpuDevice& dev) {
    const std::size_t per_step = std::max<std::size_t>(
        1, dev.list.size() / static_cast<std::size_t>(std::max(1, schedule_.steps)));
    const std::size_t window = static_cast<std::size_t>(kStepsAhead) * per_step;
    if (dev.next > window) wait_event(dev.log.end_at(dev.next - 1 - window));
  }

  // Queues the receive of a message from another process into a free buffer; from then on it is
  // pending like a message from a stage of this process.
  std::map<Key, PendingMessage>::iterator receive_remote(const StageMessage& d) {
    const std::size_t i = free_buffer();
    Message& m = messages_[i];
    m.in_use = true;
    const int start = clock_.stamp(), end = clock_.stamp();  // the link records both now
    remote_->receive(d.src, m.data.view(), clock_.handle(start), clock_.handle(end));
    return pending_.insert_or_assign(key(d), PendingMessage{i, d.producer, d.src, start, end})
        .first;
  }

  // A buffer whose last reader has finished on the GPU (so reusing it orders nothing new), else
  // a new one: the pool grows to the messages really in flight.
  std::size_t free_buffer() {
    for (std::size_t i = 0; i < messages_.size(); ++i) {
      Message& m = messages_[i];
      if (m.in_use) continue;
      if (!m.used_before || CudaEvents::query(m.consumed.get())) return i;
    }
    return add_buffer();
  }

  std::size_t add_buffer() {
    messages_.push_back(
        {cuda::DeviceTensor(p_.config_.precision, width_), cuda::Event(), false, false});
    return messages_.size() - 1;
  }

  // Reports finished steps in order; waits for the GPU when the host has queued too far ahead,
  // or for everything when `all` is set.
  void report_steps(const RunClock& clock, bool all) {
    while (reported_ < schedule_.steps) {
      const int id = step_event_[static_cast<std::size_t>(reported_)];
      if (id < 0) return;
      const std::int32_t queued_ahead = steps_queued_ - reported_;
      if (all || queued_ahead > kStepsAhead) {
        wait_event(id);
      } else if (const auto e = clock_.pending(id); e && !CudaEvents::query(*e)) {
        return;
      }
      const std::int32_t M = schedule_.microbatches;
      const double loss =
          step_mean(std::span<const double>(losses_.data(), losses_.size()), M, reported_);
      if (!std::isfinite(loss))
        throw std::runtime_error(
            fmt::format("loss is {} at optimizer step {} (micro-batches {}..{})", loss,
                        p_.config_.first_step + static_cast<std::size_t>(reported_), reported_ * M,
                        (reported_ + 1) * M - 1));
      if (p_.config_.on_step)
        p_.config_.on_step(
            {reported_, loss, clock.now_s(), static_cast<std::int64_t>(reported_ + 1) * M});
      ++reported_;
      clock_.resolve();  // an anchor per step: each float measurement spans about a step
    }
  }

  void collect(ExecResult& result) const {
    const auto seconds = [&](int id) { return clock_.seconds(id); };
    for (const GpuDevice& dev : devices_)
      if (local(dev.device))  // another process's part is merged later
        dev.log.collect(result, dev.device, dev.list, record_timeline(), seconds);
    const auto bytes =
        static_cast<std::int64_t>(width_ * cuda::element_bytes(p_.config_.precision));
    for (const RecordedMessage& m : recorded_) {
      const double received = seconds(m.received);
      result.timeline.messages.push_back({m.producer, m.consumer, m.kind, m.src, m.dst, bytes,
                                          seconds(m.send_start), seconds(m.send_end), received,
                                          received});
    }
  }

  GpuPipeline& p_;
  const Schedule& schedule_;
  LoweredProgram program_;  // what each device receives, computes and sends, in order
  cuda::PinnedBuffer<double> losses_;
  std::vector<int> step_event_;  // per step: end event of its last loss, −1 until queued
  std::int32_t reported_ = 0, steps_queued_ = 0;
  std::vector<GpuBuffers> buffers_;
  std::size_t width_ = 0;
  std::vector<GpuDevice> devices_;
  EventClock<CudaEvents> clock_;
  std::deque<Message> messages_;
  std::int64_t preallocated_ = 0, in_use_ = 0, peak_in_use_ = 0;
  std::map<Key, PendingMessage> pending_;
  std::vector<std::map<Key, PendingMessage>::iterator> inputs_;  // the next action's messages
  std::vector<RecordedMessage> recorded_;
  std::int32_t current_device_ = -1;
  RemoteLinks* remote_ = nullptr;
};

GpuPipeline::GpuPipeline(const Schedule& schedule, const GpuExecConfig& config)
    : Pipeline(
          schedule, config,
          [&] {
            if (schedule.copies > 1)
              throw InputError(fmt::format(
                  "--device cuda: the GPU backend does not run {}'s two copies of the model yet "
                  "(their gradient exchange before each update is the CPU executor's only); "
                  "dualpipev runs there",
                  schedule.kind));
            std::string reason;
            if (cuda::device_count(&reason) == 0)
              throw InputError(fmt::format("--device cuda: {}", reason));
          },
          [&](const StagePlan& plan) {
            GpuStageConfig rc;
            static_cast<StagePlan&>(rc) = plan;
            rc.precision = config.precision;
            return rc;
          }) {}

GpuPipeline::~GpuPipeline() = default;

ExecResult GpuPipeline::run() {
  Run run(*this);
  try {
    return run.execute();
  } catch (const std::exception& e) {
    if (config_.remote)
      config_.remote->abort();  // the peers stop waiting for us; our blocked transfers end
    else
      cudaDeviceSynchronize();  // let queued work drain; a sticky error is already in e
    throw std::runtime_error(fmt::format("{}: {}", run.failure_context(), e.what()));
  }
}

double GpuPipeline::evaluate(const std::vector<cuda::TensorView>& weights, const DataFn& data,
                             std::uint64_t first, std::uint64_t count) {
  // Activations to and from the processes running the neighbouring stages, and between this
  // process's stages (each computes on its own stream).
  struct Hops {
    RemoteLinks* remote;
    const Schedule& schedule;
    StageSet<GpuStageRuntime>& stages;
    cuda::DeviceTensor incoming;
    cuda::Event start, arrived, ready, sent;
    std::int32_t device_of(std::int32_t s) const {
      return schedule.placement[static_cast<std::size_t>(s)];
    }
    cuda::TensorView receive(std::int32_t s, std::int32_t) {
      remote->receive(device_of(s - 1), incoming.view(), start.get(), arrived.get());
      remote->wait(arrived.get());  // watched: the stage's own syncs would wait unwatched
      arrived.wait_on(stages[s].stream());
      return std::as_const(incoming).view();
    }
    void send(std::int32_t s, std::int32_t, cuda::TensorView x) {
      ready.record(stages[s].stream());
      remote->send(device_of(s + 1), x, ready.get(), sent.get());
      remote->wait(sent.get());
    }
    void pass(const GpuStageRuntime& rt) { rt.compute().synchronize(); }  // the next stage reads x
  };
  const std::size_t rows = config_.batch * config_.seq_len;
  Hops hops{config_.remote, schedule_, stages_, {}, {}, {}, {}, {}};
  if (config_.remote)
    hops.incoming = cuda::DeviceTensor(config_.precision, rows * config_.config.d_model);
  return evaluate_stages(stages_, weights, rows, data, first, count, hops);
}

}  // namespace paci::exec::gpu
