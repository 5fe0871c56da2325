// calibrate(): every stage in its own thread, like a training run, timing its own F, B and U;
// then a ping-pong between two threads over the in-process transport.
#include "exec/calibrate.hpp"

#include <algorithm>
#include <thread>

#include "exec/transport.hpp"

namespace paci::exec {

namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Times F, B and U of one stage `repeats` times with synthetic inputs (data's micro-batch 0 for
// tokens and targets; a fixed pattern for received activations and gradients).
StageMeasurement measure_stage(const ExecConfig& config, std::int32_t stage, std::size_t repeats) {
  const std::int32_t P = static_cast<std::int32_t>(config.ranges.size());
  StageRuntimeConfig rc;
  rc.shape = {config.config, config.ranges[static_cast<std::size_t>(stage)], config.batch,
              config.seq_len};
  rc.stage = stage;
  rc.activation_capacity = 1;
  rc.threads = config.threads_per_device;
  rc.adamw = config.adamw;
  rc.lr = config.lr;
  rc.lr.total_steps = repeats + 2;
  rc.total_microbatches = static_cast<std::int64_t>(repeats) + 1;
  rc.updates = static_cast<std::int32_t>(repeats) + 1;
  StageRuntime rt(rc);
  model::init_gpt2(rt.layout(), rt.params(), config.seed);
  const std::size_t rows = config.batch * config.seq_len;
  const std::size_t width = rows * config.config.d_model;
  std::vector<std::int32_t> tokens(rows), targets(rows);
  config.data(0, tokens, targets);
  std::vector<float> input(width), d_output(width), d_input(width);
  for (std::size_t i = 0; i < width; ++i) {
    input[i] = 0.01f * static_cast<float>(static_cast<int>(i % 17) - 8);
    d_output[i] = 1e-4f * static_cast<float>(static_cast<int>(i % 13) - 6);
  }
  const bool first = stage == 0, last = stage == P - 1;
  std::vector<double> f, b, u;
  using clock = std::chrono::steady_clock;
  auto seconds = [](clock::time_point a, clock::time_point z) {
    return std::chrono::duration<double>(z - a).count();
  };
  for (std::size_t r = 0; r <= repeats; ++r) {  // r = 0 warms caches and pages up
    const auto mb = static_cast<std::int32_t>(r);
    const auto t0 = clock::now();
    rt.forward(mb,
               first ? model::StageInput::tokens(tokens) : model::StageInput::activations(input),
               targets);
    const auto t1 = clock::now();
    rt.backward(mb, last ? std::span<const float>() : std::span<const float>(d_output),
                first ? std::span<float>() : std::span<float>(d_input));
    const auto t2 = clock::now();
    rt.update();
    const auto t3 = clock::now();
    if (r == 0) continue;
    f.push_back(seconds(t0, t1));
    b.push_back(seconds(t1, t2));
    u.push_back(seconds(t2, t3));
  }
  StageMeasurement m;
  m.forward_s = median(f);
  m.backward_s = median(b);
  m.update_s = median(u);
  m.activation_bytes = rt.activation_slot_bytes();
  m.message_bytes = static_cast<std::int64_t>(width * sizeof(float));
  const auto weights = static_cast<std::int64_t>(rt.layout().bytes());
  m.weight_bytes = weights;
  m.gradient_bytes = weights;
  m.optimizer_bytes = 2 * weights;
  return m;
}

LinkMeasurement measure_link(std::size_t floats, std::size_t repeats) {
  InProcessTransport transport(2);
  const std::size_t rounds = std::max<std::size_t>(repeats, 20);
  std::vector<double> small, large;
  std::thread echo([&] {
    std::vector<float> buffer(floats);
    for (std::size_t r = 0; r < 2 * rounds; ++r) {
      const std::size_t n = r < rounds ? 1 : floats;
      const auto key = MessageKey{DependencyKind::activation, 0, static_cast<std::int32_t>(r)};
      transport.receive(1, 0, key, std::span<float>(buffer.data(), n));
      transport.send(1, 0, key, std::span<const float>(buffer.data(), n), {});
    }
  });
  std::vector<float> data(floats, 1.0f), back(floats);
  for (std::size_t r = 0; r < 2 * rounds; ++r) {
    const std::size_t n = r < rounds ? 1 : floats;
    const auto key = MessageKey{DependencyKind::activation, 0, static_cast<std::int32_t>(r)};
    const auto t0 = std::chrono::steady_clock::now();
    transport.send(0, 1, key, std::span<const float>(data.data(), n), {});
    transport.receive(0, 1, key, std::span<float>(back.data(), n));
    const double round_trip =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    (r < rounds ? small : large).push_back(round_trip / 2);
  }
  echo.join();
  LinkMeasurement link;
  link.latency_s = median(small);
  const double transfer = std::max(median(large) - link.latency_s, 1e-9);
  link.bandwidth_bytes_per_s = static_cast<double>(floats * sizeof(float)) / transfer;
  return link;
}

}  // namespace

Calibration calibrate(const ExecConfig& config, std::size_t repeats) {
  const std::size_t P = config.ranges.size();
  Calibration c;
  c.repeats = repeats;
  c.stages.resize(P);
  std::vector<std::thread> threads;
  std::vector<std::exception_ptr> errors(P);
  for (std::size_t s = 0; s < P; ++s)
    threads.emplace_back([&, s] {
      try {
        c.stages[s] = measure_stage(config, static_cast<std::int32_t>(s), repeats);
      } catch (...) {
        errors[s] = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
  c.link = measure_link(config.batch * config.seq_len * config.config.d_model, repeats);
  c.tokens_per_microbatch = static_cast<std::int64_t>(config.batch * config.seq_len);
  return c;
}

}  // namespace paci::exec
