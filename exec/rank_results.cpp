// Rank results as MessagePack (nlohmann::json): encode one device's part, merge all of them.
#include "exec/rank_results.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <tuple>

namespace paci::exec {

namespace {

using json = nlohmann::json;

json action_json(const Action& a) {
  return json::array({static_cast<int>(a.kind), a.stage, a.microbatch});
}

Action action_from(const json& j) {
  return Action{static_cast<ActionKind>(j.at(0).get<int>()), j.at(1).get<std::int32_t>(),
                j.at(2).get<std::int32_t>()};
}

void decode_into(const Schedule& schedule, const json& j, ExecResult& r, std::vector<bool>& seen) {
  const auto d = j.at("device").get<std::int32_t>();
  if (d < 0 || d >= schedule.num_devices())
    throw std::runtime_error(
        fmt::format("a rank result names device {} of {}", d, schedule.num_devices()));
  if (seen[static_cast<std::size_t>(d)])
    throw std::runtime_error(fmt::format("two rank results for device {}", d));
  seen[static_cast<std::size_t>(d)] = true;
  const auto& list = schedule.devices[static_cast<std::size_t>(d)];
  const json& times = j.at("times");
  if (times.size() != list.size())
    throw std::runtime_error(fmt::format("device {}'s result has {} action times for {} actions", d,
                                         times.size(), list.size()));
  auto& t = r.times[static_cast<std::size_t>(d)];
  for (const json& x : times)
    t.push_back({x.at(0).get<double>(), x.at(1).get<double>(), x.at(2).get<double>()});
  r.wall_s = std::max(r.wall_s, j.at("wall_s").get<double>());
  r.device_peak_memory_bytes[static_cast<std::size_t>(d)] = j.at("peak_memory").get<std::int64_t>();
  for (const json& x : j.at("compute"))
    r.timeline.compute.push_back({action_from(x.at(0)), d, x.at(1).get<double>(),
                                  x.at(2).get<double>(), x.at(3).get<std::int32_t>()});
  for (const json& x : j.at("messages"))
    r.timeline.messages.push_back({action_from(x.at(0)), action_from(x.at(1)),
                                   static_cast<DependencyKind>(x.at(2).get<int>()),
                                   x.at(3).get<std::int32_t>(), d, x.at(4).get<std::int64_t>(),
                                   x.at(5).get<double>(), x.at(6).get<double>(),
                                   x.at(7).get<double>(), x.at(8).get<double>()});
  for (const json& x : j.at("memory"))
    r.timeline.memory.push_back({d, x.at(0).get<double>(), x.at(1).get<std::int64_t>()});
  for (const json& x : j.at("stages")) {
    StageAnalysis sa;
    sa.stage = x.at("stage").get<std::int32_t>();
    if (sa.stage < 0 || sa.stage >= schedule.stages ||
        schedule.placement[static_cast<std::size_t>(sa.stage)] != d)
      throw std::runtime_error(fmt::format("device {}'s result reports stage {}", d, sa.stage));
    sa.device = d;
    sa.peak_activations = x.at("peak_activations").get<std::int64_t>();
    sa.peak_weight_versions = x.at("peak_weight_versions").get<std::int64_t>();
    sa.updates = x.at("updates").get<std::int32_t>();
    r.observed.stages.push_back(sa);
    const json& v = x.at("versions");
    if (static_cast<std::int64_t>(v.size()) != schedule.total_microbatches())
      throw std::runtime_error(fmt::format("stage {} reports {} versions for {} micro-batches",
                                           sa.stage, v.size(), schedule.total_microbatches()));
    for (std::size_t m = 0; m < v.size(); ++m)
      r.observed.versions.push_back({sa.stage, static_cast<std::int32_t>(m),
                                     v[m].at(0).get<std::int32_t>(), v[m].at(1).get<std::int32_t>(),
                                     v[m].at(2).get<std::int32_t>()});
    if (x.contains("aux_losses")) {
      auto aux = x.at("aux_losses").get<std::vector<float>>();
      if (static_cast<std::int64_t>(aux.size()) != schedule.total_microbatches())
        throw std::runtime_error(
            fmt::format("stage {} reports {} load-balancing losses for {} micro-batches", sa.stage,
                        aux.size(), schedule.total_microbatches()));
      r.stage_aux_losses.resize(static_cast<std::size_t>(schedule.stages));
      r.stage_aux_losses[static_cast<std::size_t>(sa.stage)] = std::move(aux);
      r.stage_expert_tokens.resize(static_cast<std::size_t>(schedule.stages));
      auto tokens = x.at("expert_tokens").get<std::vector<std::int64_t>>();
      for (const std::int64_t n : tokens)
        if (n < 0)
          throw std::runtime_error(
              fmt::format("stage {} reports a negative expert count", sa.stage));
      r.stage_expert_tokens[static_cast<std::size_t>(sa.stage)] = std::move(tokens);
    }
  }
  if (holds_a_last_stage(schedule, d)) {
    auto losses = j.at("losses").get<std::vector<float>>();
    if (static_cast<std::int64_t>(losses.size()) != schedule.total_microbatches())
      throw std::runtime_error(fmt::format("device {} reports {} losses for {} micro-batches", d,
                                           losses.size(), schedule.total_microbatches()));
    if (schedule.copies > 1) {  // this device's copy's micro-batches; step losses from all below
      r.microbatch_losses.resize(losses.size(), 0.0f);
      // Twins are on different devices: one copy's last stage here.
      const std::int32_t copy = schedule.copy_of_stage(last_stage_of(schedule, d));
      for (std::size_t m = 0; m < losses.size(); ++m)
        if (schedule.copy_of_microbatch(static_cast<std::int64_t>(m)) == copy)
          r.microbatch_losses[m] = losses[m];
      return;
    }
    r.microbatch_losses = std::move(losses);
    r.step_losses = j.at("step_losses").get<std::vector<double>>();
    if (static_cast<std::int32_t>(r.step_losses.size()) != schedule.steps)
      throw std::runtime_error(fmt::format("device {} reports {} step losses for {} steps", d,
                                           r.step_losses.size(), schedule.steps));
  }
}

}  // namespace

std::int32_t last_stage_device(const Schedule& s) {
  // Two copies: the first copy's, where validation (through the first copy) ends.
  return s.placement[static_cast<std::size_t>(s.stages_per_copy() - 1)];
}

std::int32_t last_stage_of(const Schedule& s, std::int32_t device) {
  for (std::int32_t st = 0; st < s.stages; ++st)
    if (s.last_stage(st) && s.placement[static_cast<std::size_t>(st)] == device) return st;
  return -1;
}

bool holds_a_last_stage(const Schedule& s, std::int32_t device) {
  return last_stage_of(s, device) >= 0;
}

std::string encode_rank_result(const Schedule& schedule, const ExecResult& result,
                               std::int32_t device) {
  json j;
  j["device"] = device;
  j["wall_s"] = result.wall_s;
  j["peak_memory"] = result.device_peak_memory_bytes.at(static_cast<std::size_t>(device));
  json times = json::array();
  for (const ActionTime& t : result.times.at(static_cast<std::size_t>(device)))
    times.push_back(json::array({t.start_s, t.end_s, t.device_free_s()}));
  j["times"] = std::move(times);
  json compute = json::array(), messages = json::array(), memory = json::array();
  for (const ComputeSlice& c : result.timeline.compute)
    if (c.device == device)
      compute.push_back(json::array({action_json(c.action), c.start_s, c.end_s, c.version}));
  for (const MessageSlice& m : result.timeline.messages)
    if (m.dst_device == device)
      messages.push_back(json::array({action_json(m.producer), action_json(m.consumer),
                                      static_cast<int>(m.kind), m.src_device, m.bytes,
                                      m.send_start_s, m.send_end_s, m.recv_start_s, m.recv_end_s}));
  for (const MemorySample& m : result.timeline.memory)
    if (m.device == device) memory.push_back(json::array({m.time_s, m.bytes}));
  j["compute"] = std::move(compute);
  j["messages"] = std::move(messages);
  j["memory"] = std::move(memory);
  json stages = json::array();
  for (const StageAnalysis& sa : result.observed.stages) {
    if (sa.device != device) continue;
    json versions = json::array();
    for (const VersionRecord& v : result.observed.versions)
      if (v.stage == sa.stage) versions.push_back(json::array({v.v_f, v.v_b, v.update}));
    stages.push_back({{"stage", sa.stage},
                      {"peak_activations", sa.peak_activations},
                      {"peak_weight_versions", sa.peak_weight_versions},
                      {"updates", sa.updates},
                      {"versions", std::move(versions)}});
    const auto s = static_cast<std::size_t>(sa.stage);
    if (s < result.stage_aux_losses.size() && !result.stage_aux_losses[s].empty()) {
      stages.back()["aux_losses"] = result.stage_aux_losses[s];
      stages.back()["expert_tokens"] = result.stage_expert_tokens.at(s);
    }
  }
  j["stages"] = std::move(stages);
  if (holds_a_last_stage(schedule, device)) {
    j["losses"] = result.microbatch_losses;
    j["step_losses"] = result.step_losses;  // as the backend summed them (the GPU in double)
  }
  const std::vector<std::uint8_t> bytes = json::to_msgpack(j);
  return {bytes.begin(), bytes.end()};
}

ExecResult merge_rank_results(const Schedule& schedule, std::span<const std::string> parts) {
  const auto devices = static_cast<std::size_t>(schedule.num_devices());
  ExecResult r;
  r.times.resize(devices);
  r.device_peak_memory_bytes.assign(devices, 0);
  r.timeline.source = "measured";
  r.timeline.num_devices = schedule.num_devices();
  std::vector<bool> seen(devices, false);
  for (const std::string& part : parts) {
    json j;
    try {
      j = json::from_msgpack(part);
      decode_into(schedule, j, r, seen);
    } catch (const json::exception& e) {
      throw std::runtime_error(fmt::format("a rank result does not decode: {}", e.what()));
    }
  }
  for (std::size_t d = 0; d < devices; ++d)
    if (!seen[d]) throw std::runtime_error(fmt::format("no rank result for device {}", d));
  std::sort(r.observed.stages.begin(), r.observed.stages.end(),
            [](const StageAnalysis& a, const StageAnalysis& b) { return a.stage < b.stage; });
  if (static_cast<std::int32_t>(r.observed.stages.size()) != schedule.stages)
    throw std::runtime_error(fmt::format("the rank results report {} of {} stages",
                                         r.observed.stages.size(), schedule.stages));
  std::sort(r.observed.versions.begin(), r.observed.versions.end(),
            [](const VersionRecord& a, const VersionRecord& b) {
              return std::tie(a.stage, a.microbatch) < std::tie(b.stage, b.microbatch);
            });
  r.observed.total_microbatches = schedule.total_microbatches();
  summarize_versions(r.observed);
  if (schedule.copies > 1)  // each copy's last stage sent its half: the CPU's sums of them
    for (std::int32_t k = 0; k < schedule.steps; ++k)
      r.step_losses.push_back(
          step_mean(std::span<const float>(r.microbatch_losses), schedule.microbatches, k));
  // Each part's samples are in time order: keep it, grouping by device.
  std::stable_sort(
      r.timeline.memory.begin(), r.timeline.memory.end(),
      [](const MemorySample& a, const MemorySample& b) { return a.device < b.device; });
  return r;
}

namespace {

constexpr std::string_view kStatesTag = "paci.stage_states/1";

void put_u64(std::string& out, std::uint64_t v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof(v));
}

void put_floats(std::string& out, std::span<const float> v) {
  out.append(reinterpret_cast<const char*>(v.data()), v.size_bytes());
}

// Reads from a byte string, refusing to run past its end.
struct Reader {
  std::string_view bytes;
  std::size_t at = 0;
  void take(void* into, std::size_t n) {
    if (bytes.size() - at < n)
      throw std::runtime_error(fmt::format(
          "stage states cut short: {} bytes needed at offset {} of {}", n, at, bytes.size()));
    std::memcpy(into, bytes.data() + at, n);
    at += n;
  }
  std::uint64_t u64() {
    std::uint64_t v = 0;
    take(&v, sizeof(v));
    return v;
  }
  std::vector<float> floats(std::uint64_t n) {
    if (n > (bytes.size() - at) / sizeof(float))
      throw std::runtime_error(
          fmt::format("stage states cut short: {} floats at offset {} of {}", n, at, bytes.size()));
    std::vector<float> v(n);
    take(v.data(), n * sizeof(float));
    return v;
  }
};

}  // namespace

std::string encode_stage_states(std::span<const model::StageStateView> stages) {
  std::string out(kStatesTag);
  put_u64(out, stages.size());
  for (const model::StageStateView& s : stages) {
    put_u64(out, s.range.first_layer);
    put_u64(out, s.range.num_layers);
    put_u64(out, s.optimizer_steps);
    put_u64(out, s.weights.size());
    if (s.first_moment.size() != s.weights.size() || s.second_moment.size() != s.weights.size())
      throw std::invalid_argument("encode_stage_states: moments and weights differ in size");
    put_floats(out, s.weights);
    put_floats(out, s.first_moment);
    put_floats(out, s.second_moment);
  }
  return out;
}

void decode_stage_states(std::string_view bytes, std::vector<model::StageState>& out) {
  if (bytes.substr(0, kStatesTag.size()) != kStatesTag)
    throw std::runtime_error("not an encoding of stage states (tag missing)");
  Reader r{bytes, kStatesTag.size()};
  const std::uint64_t count = r.u64();
  for (std::uint64_t i = 0; i < count; ++i) {
    model::StageState s;
    s.range.first_layer = r.u64();
    s.range.num_layers = r.u64();
    s.optimizer_steps = r.u64();
    const std::uint64_t n = r.u64();
    s.weights = r.floats(n);
    s.first_moment = r.floats(n);
    s.second_moment = r.floats(n);
    out.push_back(std::move(s));
  }
  if (r.at != bytes.size())
    throw std::runtime_error(fmt::format("stage states: {} bytes left over", bytes.size() - r.at));
}

}  // namespace paci::exec
