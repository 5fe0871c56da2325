// GpuPipeline: stage allocation, the host issue loop over the stages' streams, the device-local
// transport, losses reported per step, and the measured timeline from CUDA events.
#include "exec/cuda/pipeline.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <cmath>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <utility>

#include "cuda/check.hpp"
#include "cuda/device.hpp"
#include "exec/event_clock.hpp"
#include "exec/rank_plan.hpp"
#include "exec/transport.hpp"
#include "model/init.hpp"
#include "schedules/lower.hpp"
#include "traces/metrics.hpp"

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

}  // namespace

// One run: the issue loop's state. Timestamps are EventClock stamps: a bounded pool of events,
// times in double seconds.
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
    for (std::int32_t s = 0; s < schedule_.stages; ++s) {
      StageBuffers b;
      if (!p.runs(s)) {  // another process runs it
        buffers_.push_back(std::move(b));
        continue;
      }
      b.tokens.resize(rows);
      b.targets.resize(rows);
      if (!p.stage(s).is_first()) b.d_input = cuda::DeviceTensor(p.config_.precision, width);
      buffers_.push_back(std::move(b));
    }
    width_ = width;
    // Every message buffer the run can need, allocated now: a cudaMalloc mid-run can wait behind
    // NCCL transfers that wait on other processes. message_bound() holds under any
    // timing; free_buffer() grows the pool only when every free buffer is still being read on
    // the GPU (counted: message_buffers_grown).
    preallocated_ = message_bound(schedule_, p.analysis_);
    for (std::int64_t i = 0; i < preallocated_; ++i) add_buffer();
    devices_.resize(static_cast<std::size_t>(schedule_.num_devices()));
    for (std::size_t d = 0; d < devices_.size(); ++d) {
      devices_[d].times.resize(schedule_.devices[d].size());
      devices_[d].versions.resize(schedule_.devices[d].size());
    }
  }

  ExecResult execute() {
    PACI_CUDA_CHECK(cudaDeviceSynchronize());
    if (remote_) remote_->barrier();  // the processes' clocks start together
    const int origin = clock_.stamp();
    record(origin, p_.stage(p_.first_local_stage()).stream());
    RunClock clock;
    for (std::size_t d = 0; d < devices_.size(); ++d)
      if (local(static_cast<std::int32_t>(d))) sample_memory(static_cast<std::int32_t>(d), origin);
    bool all_done = false;
    while (!all_done) {
      all_done = true;
      bool progress = false;
      for (std::size_t d = 0; d < devices_.size(); ++d) {
        if (!local(static_cast<std::int32_t>(d))) continue;
        auto& dev = devices_[d];
        const auto& list = schedule_.devices[d];
        while (dev.next < list.size() && issue(static_cast<std::int32_t>(d))) {
          progress = true;
          if (remote_) bound_run_ahead(static_cast<std::int32_t>(d));
        }
        if (dev.next < list.size()) all_done = false;
      }
      current_device_ = -1;
      report_steps(clock, false);
      if (!all_done && !progress) {
        for (std::size_t d = 0; d < devices_.size(); ++d)
          if (local(static_cast<std::int32_t>(d)) && devices_[d].next < schedule_.devices[d].size())
            throw std::runtime_error(
                fmt::format("deadlock: device {} waits at {}", d,
                            to_string(schedule_.devices[d][devices_[d].next])));
      }
    }
    current_device_ = -1;
    if (remote_) {  // never block on the GPU without watching the links
      for (const DeviceState& dev : devices_)
        if (dev.last_end >= 0) wait_event(dev.last_end);
      remote_->wait_idle();
    }
    PACI_CUDA_CHECK(cudaDeviceSynchronize());
    report_steps(clock, true);
    clock_.resolve();  // everything has completed: every stamp gets its time
    ExecResult result;
    result.wall_s = clock.now_s();
    result.peak_messages_in_flight = peak_in_use_;
    result.message_buffers_preallocated = preallocated_;
    result.message_buffers_grown = static_cast<std::int64_t>(messages_.size()) - preallocated_;
    collect(result);
    return result;
  }

  // Where a failure happened, for its message: the action being queued, or (−1) none, when the
  // failure surfaced while reporting losses or waiting for the GPU.
  std::string failure_context() const {
    if (current_device_ < 0) return "GPU run";
    const auto& list = schedule_.devices[static_cast<std::size_t>(current_device_)];
    const Action& a =
        list[std::min(devices_[static_cast<std::size_t>(current_device_)].next, list.size() - 1)];
    return fmt::format("device {}, stage {}, action {}", current_device_, a.stage, to_string(a));
  }

 private:
  struct StageBuffers {
    std::vector<std::int32_t> tokens, targets;
    cuda::DeviceTensor d_input;  // B's input gradient, copied into messages
  };
  struct Message {
    cuda::DeviceTensor data;
    cuda::Event consumed;  // recorded on the consumer's stream after the action that read it
    bool used_before = false;
    bool in_use = false;
    int send_start = -1, send_end = -1;  // event ids of the last send into this buffer
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
  struct DeviceState {
    std::size_t next = 0;
    std::int32_t last_stage = -1;
    int last_end = -1;
    std::vector<std::pair<int, int>> times;  // per action: start and end event ids
    std::vector<std::int32_t> versions;      // per action: the version it read (U: created)
    std::vector<std::pair<int, std::int64_t>> memory;  // (event id, bytes in use from then on)
    std::int64_t peak_memory = 0;
  };
  using Key = std::tuple<int, std::int32_t, std::int32_t>;  // kind, producer stage, micro-batch
  static Key key(const StageMessage& m) {
    return {static_cast<int>(m.kind), m.producer.stage, m.producer.microbatch};
  }

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
  void bound_run_ahead(std::int32_t device) {
    const DeviceState& dev = devices_[static_cast<std::size_t>(device)];
    const std::size_t per_step =
        std::max<std::size_t>(1, schedule_.devices[static_cast<std::size_t>(device)].size() /
                                     static_cast<std::size_t>(std::max(1, schedule_.steps)));
    const std::size_t window = static_cast<std::size_t>(kStepsAhead) * per_step;
    if (dev.next > window) wait_event(dev.times[dev.next - 1 - window].second);
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
  std::int32_t device_of(std::int32_t stage) const {
    return schedule_.placement[static_cast<std::size_t>(stage)];
  }

  // Queues the device's next action if every message it needs has been queued.
  bool issue(std::int32_t device) {
    current_device_ = device;
    clock_.resolve_if_due();  // every stamp so far is recorded: reuse the completed events
    DeviceState& dev = devices_[static_cast<std::size_t>(device)];
    const Action& a = schedule_.devices[static_cast<std::size_t>(device)][dev.next];
    const std::span<const Op> receives =
        program_.devices[static_cast<std::size_t>(device)].receives(dev.next);
    std::vector<std::map<Key, PendingMessage>::iterator> inputs;
    for (const Op& r : receives) {
      if (!local(r.message.src)) continue;
      const auto it = pending_.find(key(r.message));
      if (it == pending_.end()) return false;
      inputs.push_back(it);
    }
    if (p_.config_.fail_at && *p_.config_.fail_at == a)
      throw std::runtime_error("injected failure (--fail-at)");
    // Messages from other processes: queued now, in the program's order (the order their links
    // carry them), never waited for on the host.
    for (const Op& r : receives)
      if (!local(r.message.src)) inputs.push_back(receive_remote(r.message));
    GpuStageRuntime& rt = p_.stage(a.stage);
    StageBuffers& b = buffers_[static_cast<std::size_t>(a.stage)];
    const cudaStream_t stream = rt.stream();
    if (dev.last_end >= 0 && dev.last_stage != a.stage) wait_on(dev.last_end, stream);
    cuda::TensorView received;
    for (const auto& it : inputs) {
      const Message& m = messages_[it->second.buffer];
      wait_on(it->second.send_end, stream);
      received = m.data.view();
    }
    const int start = stamp_on(stream);
    switch (a.kind) {
      case ActionKind::F: {
        if (rt.is_first() || rt.is_last())
          p_.config_.data(static_cast<std::uint64_t>(a.microbatch), b.tokens, b.targets);
        const cuda::StageInput input = rt.is_first() ? cuda::StageInput::tokens(b.tokens)
                                                     : cuda::StageInput::activations(received);
        rt.forward(a.microbatch, input, b.targets,
                   &losses_[static_cast<std::size_t>(a.microbatch)]);
        break;
      }
      case ActionKind::B:
        rt.backward(a.microbatch, rt.is_last() ? cuda::TensorView() : received,
                    rt.is_first() ? cuda::MutableTensorView() : b.d_input.view());
        break;
      case ActionKind::U:
        rt.update();
        break;
      case ActionKind::I:
        rt.input_grad(a.microbatch, rt.is_last() ? cuda::TensorView() : received,
                      rt.is_first() ? cuda::MutableTensorView() : b.d_input.view());
        break;
      case ActionKind::W:
        rt.weight_grad(a.microbatch);
        break;
    }
    const int end = stamp_on(stream);
    for (const auto& it : inputs) {
      Message& m = messages_[it->second.buffer];
      m.consumed.record(stream);
      m.used_before = true;
      m.in_use = false;
      --in_use_;
      if (it->second.src_device != device)  // always: the report carries them for a replay
        recorded_.push_back(
            {it->second.producer, a, static_cast<DependencyKind>(std::get<0>(it->first)),
             it->second.src_device, device, it->second.send_start, it->second.send_end, start});
      pending_.erase(it);
    }
    dev.times[dev.next] = {start, end};
    // The version each action read (U: created; I reads the current weights, W adds to them).
    dev.versions[dev.next] = a.kind == ActionKind::F ? rt.versions().v_f(a.microbatch)
                             : a.kind == ActionKind::B || a.kind == ActionKind::W
                                 ? rt.versions().v_b(a.microbatch)
                                 : rt.version();
    dev.last_end = end;
    dev.last_stage = a.stage;
    sample_memory(device, end);
    if (a.kind == ActionKind::F && rt.is_last() &&
        (a.microbatch + 1) % schedule_.microbatches == 0) {
      step_event_[static_cast<std::size_t>(a.microbatch / schedule_.microbatches)] = end;
      ++steps_queued_;
    }
    send_outputs(device, a, rt, b);
    ++dev.next;
    return true;
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
        {cuda::DeviceTensor(p_.config_.precision, width_), cuda::Event(), false, false, -1, -1});
    return messages_.size() - 1;
  }

  void send_outputs(std::int32_t device, const Action& a, GpuStageRuntime& rt, StageBuffers& b) {
    const DeviceProgram& program = program_.devices[static_cast<std::size_t>(device)];
    for (const Op& op : program.sends(devices_[static_cast<std::size_t>(device)].next)) {
      const cuda::TensorView data = op.message.kind == DependencyKind::activation
                                        ? rt.output(a.microbatch)
                                        : b.d_input.view();
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
      if (!local(dst)) {  // to another process: the buffer is free again once the send is done
        remote_->send(dst, std::as_const(m.data).view(), clock_.handle(end), m.consumed.get());
        m.used_before = true;
        m.in_use = false;
        --in_use_;
        continue;
      }
      pending_[key(op.message)] = {i, a, device, start, end};
    }
  }

  void sample_memory(std::int32_t device, int event_id) {
    DeviceState& dev = devices_[static_cast<std::size_t>(device)];
    const std::int64_t bytes = p_.stages_.memory_bytes(schedule_, device);
    dev.peak_memory = std::max(dev.peak_memory, bytes);
    if (p_.config_.record_timeline && (dev.memory.empty() || dev.memory.back().second != bytes))
      dev.memory.emplace_back(event_id, bytes);
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
      double sum = 0.0;
      for (std::int32_t i = reported_ * M; i < (reported_ + 1) * M; ++i)
        sum += losses_[static_cast<std::size_t>(i)];
      const double loss = sum / M;
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

  void collect(ExecResult& result) {
    result.times.resize(devices_.size());
    result.device_peak_memory_bytes.assign(devices_.size(), 0);
    result.timeline.source = "measured";
    result.timeline.num_devices = schedule_.num_devices();
    for (std::size_t d = 0; d < devices_.size(); ++d) {
      if (!local(static_cast<std::int32_t>(d))) continue;  // another process's part
      const DeviceState& dev = devices_[d];
      const auto& list = schedule_.devices[d];
      for (std::size_t i = 0; i < list.size(); ++i) {
        const ActionTime t{clock_.seconds(dev.times[i].first), clock_.seconds(dev.times[i].second)};
        result.times[d].push_back(t);
        if (!p_.config_.record_timeline) continue;
        result.timeline.compute.push_back(
            {list[i], static_cast<std::int32_t>(d), t.start_s, t.end_s, dev.versions[i]});
      }
      for (const auto& [id, bytes] : dev.memory)
        result.timeline.memory.push_back({static_cast<std::int32_t>(d), clock_.seconds(id), bytes});
      result.device_peak_memory_bytes[d] = dev.peak_memory;
    }
    const auto bytes =
        static_cast<std::int64_t>(width_ * cuda::element_bytes(p_.config_.precision));
    for (const RecordedMessage& m : recorded_) {
      const double received = clock_.seconds(m.received);
      result.timeline.messages.push_back({m.producer, m.consumer, m.kind, m.src, m.dst, bytes,
                                          clock_.seconds(m.send_start), clock_.seconds(m.send_end),
                                          received, received});
    }
    result.microbatch_losses.assign(losses_.data(), losses_.data() + losses_.size());
    result.step_losses = step_means(std::span<const double>(losses_.data(), losses_.size()),
                                    schedule_.microbatches, schedule_.steps);
  }

  GpuPipeline& p_;
  const Schedule& schedule_;
  LoweredProgram program_;  // what each device receives, computes and sends, in order
  cuda::PinnedBuffer<double> losses_;
  std::vector<int> step_event_;  // per step: end event of its last loss, −1 until queued
  std::int32_t reported_ = 0, steps_queued_ = 0;
  std::vector<StageBuffers> buffers_;
  std::size_t width_ = 0;
  std::vector<DeviceState> devices_;
  EventClock<CudaEvents> clock_;
  std::deque<Message> messages_;
  std::int64_t preallocated_ = 0, in_use_ = 0, peak_in_use_ = 0;
  std::map<Key, PendingMessage> pending_;
  std::vector<RecordedMessage> recorded_;
  std::int32_t current_device_ = -1;
  RemoteLinks* remote_ = nullptr;
};

GpuPipeline::GpuPipeline(const Schedule& schedule, const GpuExecConfig& config)
    : schedule_(schedule), config_(config) {
  check_runnable(schedule, config);
  std::string reason;
  if (cuda::device_count(&reason) == 0) throw InputError(fmt::format("--device cuda: {}", reason));
  analysis_ = analyze(schedule);
  if (config.remote) check_launch(schedule, schedule.num_devices());  // links agree in order
  stages_.allocate(schedule, plan_stages(schedule, analysis_, config),
                   config.remote ? config.remote->local_device() : -1, [&](const StagePlan& plan) {
                     GpuStageConfig rc;
                     static_cast<StagePlan&>(rc) = plan;
                     rc.precision = config.precision;
                     auto rt = std::make_unique<GpuStageRuntime>(rc);
                     if (config.init_stage) {
                       config.init_stage(plan.stage, *rt);
                     } else {
                       std::vector<float> params(rt->layout().size());
                       model::init_gpt2(rt->layout(), params, config.seed);
                       rt->set_params(params);
                     }
                     return rt;
                   });
}

GpuPipeline::~GpuPipeline() = default;

ExecResult GpuPipeline::run() {
  Run run(*this);
  try {
    ExecResult result = run.execute();
    result.observed = observed_analysis(schedule_, stages_.observations());
    return result;
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
  if (weights.size() != stages_.size())
    throw std::invalid_argument("evaluate: one weight view per stage");
  RemoteLinks* remote = config_.remote;
  const std::size_t rows = config_.batch * config_.seq_len;
  std::vector<std::int32_t> tokens(rows), targets(rows);
  const auto& stages = stages_.all();
  std::vector<std::optional<cuda::ActivationSlot>> slots(stages.size());
  for (std::size_t s = 0; s < stages.size(); ++s)
    if (stages[s]) slots[s].emplace(stages[s]->compute().make_slot());
  const auto device_of = [&](std::size_t s) { return schedule_.placement[s]; };
  // One process per device: an activation from another process arrives here.
  cuda::DeviceTensor incoming;
  cuda::Event start, arrived, ready, sent;
  if (remote) incoming = cuda::DeviceTensor(config_.precision, rows * config_.config.d_model);
  double sum = 0.0;
  for (std::uint64_t i = 0; i < count; ++i) {
    data(first + i, tokens, targets);
    cuda::TensorView x;
    for (std::size_t s = 0; s < stages.size(); ++s) {
      if (!stages[s]) continue;  // another process runs it
      cuda::Stage& st = stages[s]->compute();
      const cudaStream_t stream = stages[s]->stream();
      if (s > 0 && !stages[s - 1]) {
        remote->receive(device_of(s - 1), incoming.view(), start.get(), arrived.get());
        remote->wait(arrived.get());  // watched: the stage's own syncs would wait unwatched
        arrived.wait_on(stream);
        x = std::as_const(incoming).view();
      }
      const cuda::StageInput input =
          s == 0 ? cuda::StageInput::tokens(tokens) : cuda::StageInput::activations(x);
      if (st.is_last()) {
        sum += st.forward_loss(weights[s], input, targets, 1.0f, *slots[s]);
        continue;
      }
      x = st.forward(weights[s], input, *slots[s]);
      if (!stages[s + 1]) {  // to the process running the next stage
        ready.record(stream);
        remote->send(device_of(s + 1), x, ready.get(), sent.get());
        remote->wait(sent.get());
      } else {
        st.synchronize();  // the next stage reads x on its own stream
      }
    }
  }
  if (!stages.back()) return 0.0;  // the loss is known where the last stage runs
  return count ? sum / static_cast<double>(count) : 0.0;
}

RunSummary GpuPipeline::summary(const ExecResult& result) const {
  return measured_summary(schedule_, result, config_);
}

}  // namespace paci::exec::gpu
