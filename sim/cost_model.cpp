// The cost model's accessors and checks, the uniform model, and its canonical JSON
// ("paci.costmodel/1"): one fixed layout on write with exact doubles, any layout on read, and
// errors naming the source and the line and column or the offending entry (stages[2].forward_s).
#include "sim/cost_model.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "schedules/formats.hpp"

namespace paci {

namespace {

using Json = nlohmann::ordered_json;

[[noreturn]] void fail(std::string_view source, std::string_view message) {
  throw InputError(fmt::format("{}: {}", source, message));
}

std::string plural(std::size_t n, std::string_view word) {
  return fmt::format("{} {}{}", n, word, n == 1 ? "" : "s");
}

void check_duration(double value, std::string_view what) {
  if (!std::isfinite(value)) throw InputError(fmt::format("{} is not finite ({})", what, value));
  if (value < 0) throw InputError(fmt::format("{} is negative ({})", what, value));
}

void check_bytes(std::int64_t value, std::string_view what) {
  if (value < 0) throw InputError(fmt::format("{} is negative ({})", what, value));
}

void check_bandwidth(double value, std::string_view what) {
  if (!(value > 0))  // also NaN
    throw InputError(
        fmt::format("{} must be positive, or inf for a free link (got {})", what, value));
}

void check_link(const LinkCost& link, std::string_view what) {
  check_duration(link.latency_s, fmt::format("{}.latency_s", what));
  check_bandwidth(link.bandwidth_bytes_per_s, fmt::format("{}.bandwidth_bytes_per_s", what));
}

// A stage's fields by JSON key, in the canonical order; the writer, the reader and the checks
// all walk these two tables.
struct DurationField {
  const char* key;
  double StageCost::*field;
};
struct BytesField {
  const char* key;
  std::int64_t StageCost::*field;
};
constexpr DurationField kDurations[] = {
    {"forward_s", &StageCost::forward_s},       {"backward_s", &StageCost::backward_s},
    {"input_grad_s", &StageCost::input_grad_s}, {"weight_grad_s", &StageCost::weight_grad_s},
    {"update_s", &StageCost::update_s},
};
constexpr BytesField kBytes[] = {
    {"activation_bytes", &StageCost::activation_bytes},
    {"activation_message_bytes", &StageCost::activation_message_bytes},
    {"gradient_message_bytes", &StageCost::gradient_message_bytes},
    {"weight_bytes", &StageCost::weight_bytes},
    {"gradient_bytes", &StageCost::gradient_bytes},
    {"optimizer_bytes", &StageCost::optimizer_bytes},
};

}  // namespace

double StageCost::duration_s(ActionKind kind) const {
  switch (kind) {
    case ActionKind::F:
      return forward_s;
    case ActionKind::B:
      return backward_s;
    case ActionKind::I:
      return input_grad_s;
    case ActionKind::W:
      return weight_grad_s;
    case ActionKind::U:
      return update_s;
  }
  throw std::logic_error("StageCost::duration_s: unknown action kind");
}

double pair_duration_s(const StageCost& forward, const StageCost& backward) {
  // The forward's communication behind the backward's compute, and the backward's behind the
  // forward's: neither behind its own.
  const double k = std::max(forward.pair_compute_slowdown, backward.pair_compute_slowdown);
  const double cf = forward.forward_comm_s, cb = backward.backward_comm_s;
  const double f = k * (forward.forward_s - cf), b = k * (backward.backward_s - cb);
  const double hidden = std::min(cf, b) + std::min(cb, f);
  return f + b + cf + cb - std::max(0.0, hidden);
}

double LinkCost::transfer_s(std::int64_t bytes) const {
  return latency_s + static_cast<double>(bytes) / bandwidth_bytes_per_s;
}

namespace {

double slowdown_from(const std::vector<double>& by_count, std::size_t computing) {
  if (computing == 0 || by_count.empty()) return 1.0;
  const std::size_t measured = by_count.size();
  if (computing <= measured) return by_count[computing - 1];
  return by_count.back() * static_cast<double>(computing) / static_cast<double>(measured);
}

void check_slowdowns(const std::vector<double>& by_count, const std::string& what) {
  if (by_count.empty()) throw InputError(fmt::format("{} is empty", what));
  for (std::size_t k = 0; k < by_count.size(); ++k) {
    const double x = by_count[k];
    if (!std::isfinite(x) || !(x > 0))
      throw InputError(fmt::format("{}[{}] must be a finite number > 0 (got {})", what, k, x));
  }
}

}  // namespace

double HostSharing::slowdown(std::size_t computing) const {
  return slowdown_from(slowdown_by_count, computing);
}

double HostSharing::slowdown(std::size_t position, std::size_t computing) const {
  return position < device_slowdown_by_count.size()
             ? slowdown_from(device_slowdown_by_count[position], computing)
             : slowdown(computing);
}

const LinkCost& CostModel::link(std::int32_t src_device, std::int32_t dst_device) const {
  for (const auto& l : links)
    if (l.src_device == src_device && l.dst_device == dst_device) return l.cost;
  return default_link;
}

void check_cost_model(const CostModel& model, const Schedule* schedule) {
  if (model.stages.empty()) throw InputError("the cost model has no stages");
  check_bytes(model.tokens_per_microbatch, "tokens_per_microbatch");
  for (std::size_t s = 0; s < model.stages.size(); ++s) {
    const StageCost& c = model.stages[s];
    for (const auto& [key, field] : kDurations)
      check_duration(c.*field, fmt::format("stages[{}].{}", s, key));
    for (const auto& [key, field] : kBytes)
      check_bytes(c.*field, fmt::format("stages[{}].{}", s, key));
    check_bytes(c.weight_grad_stash_bytes, fmt::format("stages[{}].weight_grad_stash_bytes", s));
    check_bytes(c.input_grad_release_bytes, fmt::format("stages[{}].input_grad_release_bytes", s));
    if (c.input_grad_release_bytes > c.activation_bytes)
      throw InputError(fmt::format(
          "stages[{}].input_grad_release_bytes ({}) is more than its activation_bytes ({}): a "
          "micro-batch cannot free at its I more than it holds",
          s, c.input_grad_release_bytes, c.activation_bytes));
    check_bytes(c.workspace_bytes, fmt::format("stages[{}].workspace_bytes", s));
    check_duration(c.forward_comm_s, fmt::format("stages[{}].forward_comm_s", s));
    check_duration(c.backward_comm_s, fmt::format("stages[{}].backward_comm_s", s));
    if (c.forward_comm_s > c.forward_s || c.backward_comm_s > c.backward_s)
      throw InputError(fmt::format(
          "stages[{}]: forward_comm_s ({}) or backward_comm_s ({}) is more than the forward ({}) "
          "or full backward ({}) it is part of",
          s, c.forward_comm_s, c.backward_comm_s, c.forward_s, c.backward_s));
    if (!(c.pair_compute_slowdown >= 1.0 && std::isfinite(c.pair_compute_slowdown)))
      throw InputError(fmt::format(
          "stages[{}].pair_compute_slowdown is {}: a pair's compute runs at most as fast as alone "
          "(1 or more)",
          s, c.pair_compute_slowdown));
  }
  check_link(model.default_link, "default_link");
  for (std::size_t i = 0; i < model.links.size(); ++i) {
    const LinkOverride& l = model.links[i];
    const std::string what = fmt::format("links[{}]", i);
    if (l.src_device < 0 || l.dst_device < 0)
      throw InputError(
          fmt::format("{} names a negative device ({} -> {})", what, l.src_device, l.dst_device));
    check_link(l.cost, what);
    for (std::size_t j = 0; j < i; ++j)
      if (model.links[j].src_device == l.src_device && model.links[j].dst_device == l.dst_device)
        throw InputError(fmt::format("{} overrides the link {} -> {} again (see links[{}])", what,
                                     l.src_device, l.dst_device, j));
  }
  for (std::size_t h = 0; h < model.hosts.size(); ++h) {
    const HostSharing& host = model.hosts[h];
    const std::string what = fmt::format("hosts[{}]", h);
    if (host.devices.empty()) throw InputError(fmt::format("{} lists no devices", what));
    check_slowdowns(host.slowdown_by_count, what + ".slowdown_by_count");
    const auto& own = host.device_slowdown_by_count;
    if (!own.empty() && own.size() != host.devices.size())
      throw InputError(fmt::format("{}.device_slowdown_by_count has {} lists for {} devices", what,
                                   own.size(), host.devices.size()));
    for (std::size_t i = 0; i < own.size(); ++i)
      check_slowdowns(own[i], fmt::format("{}.device_slowdown_by_count[{}]", what, i));
    for (std::int32_t d : host.devices) {
      if (d < 0) throw InputError(fmt::format("{} names a negative device ({})", what, d));
      for (std::size_t g = 0; g <= h; ++g) {
        const auto& others = model.hosts[g].devices;
        const auto n = std::count(others.begin(), others.end(), d);
        if (n > (g == h ? 1 : 0))
          throw InputError(fmt::format("device {} is in {} twice{}", d, what,
                                       g == h ? "" : fmt::format(" (also in hosts[{}])", g)));
      }
    }
  }
  if (schedule == nullptr) return;
  if (model.stages.size() != static_cast<std::size_t>(schedule->stages))
    throw InputError(fmt::format(
        "cost model has {}, the schedule has {}{}", plural(model.stages.size(), "stage"),
        schedule->stages,
        schedule->copies > 1
            ? fmt::format(" (two copies of {}: a cost model of one copy's {} serves both)",
                          schedule->stages_per_copy(), schedule->stages_per_copy())
            : ""));
  const std::int32_t devices = schedule->num_devices();
  for (std::size_t i = 0; i < model.links.size(); ++i) {
    const LinkOverride& l = model.links[i];
    if (l.src_device >= devices || l.dst_device >= devices)
      throw InputError(fmt::format("links[{}] names device {}, but the schedule has {} (0..{})", i,
                                   std::max(l.src_device, l.dst_device),
                                   plural(static_cast<std::size_t>(devices), "device"),
                                   devices - 1));
  }
  for (std::size_t h = 0; h < model.hosts.size(); ++h)
    for (std::int32_t d : model.hosts[h].devices)
      if (d >= devices)
        throw InputError(
            fmt::format("hosts[{}] names device {}, but the schedule has {} (0..{}); paci simulate "
                        "--host-slowdown none ignores the hosts",
                        h, d, plural(static_cast<std::size_t>(devices), "device"), devices - 1));
}

CostModel uniform_cost_model(std::int32_t stages, const UniformCosts& costs) {
  if (stages < 1) throw InputError(fmt::format("need at least one stage (got {})", stages));
  const auto duration = [](double value, std::string_view flag) {
    if (!std::isfinite(value) || value < 0)
      throw InputError(
          fmt::format("{} must be a finite number of seconds >= 0 (got {})", flag, value));
    return value;
  };
  const auto bytes = [](std::int64_t value, std::string_view flag) {
    if (value < 0) throw InputError(fmt::format("{} must be >= 0 (got {})", flag, value));
    return value;
  };
  StageCost stage;
  stage.forward_s = duration(costs.tf, "--tf");
  stage.backward_s = costs.tb ? duration(*costs.tb, "--tb") : 2 * stage.forward_s;
  if (costs.tw) {
    stage.weight_grad_s = duration(*costs.tw, "--tw");
    if (stage.weight_grad_s > stage.backward_s)
      throw InputError(fmt::format(
          "--tw ({} s) exceeds the backward time tb ({} s): W is a part of the backward",
          stage.weight_grad_s, stage.backward_s));
    stage.input_grad_s = stage.backward_s - stage.weight_grad_s;
  } else {
    stage.input_grad_s = stage.weight_grad_s = stage.backward_s / 2;
  }
  if (costs.tfb) {  // the communication that makes F&B shorter than F + B, shared F : B
    const double fb = duration(*costs.tfb, "--tfb"), alone = stage.forward_s + stage.backward_s;
    if (fb < std::max(stage.forward_s, stage.backward_s) || fb > alone)
      throw InputError(fmt::format(
          "--tfb ({} s) must lie between max(F, B) = {} s and F + B = {} s: an overlapped pair "
          "takes at least its longer action and at most both back to back",
          fb, std::max(stage.forward_s, stage.backward_s), alone));
    if (alone > 0) {
      stage.forward_comm_s = (alone - fb) * stage.forward_s / alone;
      stage.backward_comm_s = (alone - fb) * stage.backward_s / alone;
    }
  }
  stage.update_s = duration(costs.tu, "--tu");
  stage.activation_message_bytes = stage.gradient_message_bytes =
      bytes(costs.message_bytes, "--message-bytes");
  stage.activation_bytes = bytes(costs.activation_bytes, "--activation-bytes");
  stage.weight_bytes = stage.gradient_bytes = bytes(costs.weight_bytes, "--weight-bytes");
  if (stage.weight_bytes > INT64_MAX / 2)
    throw InputError(fmt::format("--weight-bytes is too large ({})", stage.weight_bytes));
  stage.optimizer_bytes = 2 * stage.weight_bytes;

  CostModel model;
  model.default_link.latency_s = duration(costs.latency_s, "--latency");
  if (!(costs.bandwidth_bytes_per_s > 0))
    throw InputError(fmt::format("--bandwidth must be positive bytes/s, or inf (got {})",
                                 costs.bandwidth_bytes_per_s));
  model.default_link.bandwidth_bytes_per_s = costs.bandwidth_bytes_per_s;
  model.tokens_per_microbatch = bytes(costs.tokens_per_microbatch, "--tokens-per-microbatch");
  model.stages.assign(static_cast<std::size_t>(stages), stage);
  model.description =
      fmt::format("uniform: F {} s, B {} s (I {} s + W {} s), U {} s per stage", stage.forward_s,
                  stage.backward_s, stage.input_grad_s, stage.weight_grad_s, stage.update_s);
  if (costs.tfb) model.description += fmt::format(", overlapped F&B {} s", *costs.tfb);
  return model;
}

// ---- JSON ------------------------------------------------------------------------------------

namespace {

Json link_json(const LinkCost& link) {
  Json out = Json::object();
  out["latency_s"] = link.latency_s;
  if (std::isinf(link.bandwidth_bytes_per_s) && link.bandwidth_bytes_per_s > 0)
    out["bandwidth_bytes_per_s"] = "inf";
  else
    out["bandwidth_bytes_per_s"] = link.bandwidth_bytes_per_s;
  return out;
}

// Reads typed members, naming them by path ("stages[2].forward_s") in InputErrors.
class Reader {
 public:
  explicit Reader(std::string_view source) : source_(source) {}

  const Json& member(const Json& object, const char* key, std::string_view where) const {
    const auto it = object.find(key);
    if (it == object.end())
      fail(source_, where.empty() ? fmt::format("missing key '{}'", key)
                                  : fmt::format("missing key '{}' in {}", key, where));
    return *it;
  }
  double number(const Json& object, const char* key, std::string_view where) const {
    const Json& value = member(object, key, where);
    if (!value.is_number()) fail(source_, fmt::format("{} must be a number", path(where, key)));
    return value.get<double>();
  }
  std::int64_t integer(const Json& value, const std::string& what) const {
    if (!value.is_number_integer()) fail(source_, fmt::format("{} must be an integer", what));
    if (value.is_number_unsigned() && value.get<std::uint64_t>() > INT64_MAX)
      fail(source_, fmt::format("{} is out of range", what));
    return value.get<std::int64_t>();
  }
  std::int64_t integer(const Json& object, const char* key, std::string_view where) const {
    return integer(member(object, key, where), path(where, key));
  }
  std::int32_t int32(const Json& object, const char* key, std::string_view where) const {
    const std::int64_t value = integer(object, key, where);
    if (value < INT32_MIN || value > INT32_MAX)
      fail(source_, fmt::format("{} is out of range", path(where, key)));
    return static_cast<std::int32_t>(value);
  }
  const Json& object(const Json& value, const std::string& what) const {
    if (!value.is_object()) fail(source_, fmt::format("{} must be an object", what));
    return value;
  }
  const Json& array(const Json& value, const std::string& what) const {
    if (!value.is_array()) fail(source_, fmt::format("{} must be an array", what));
    return value;
  }
  LinkCost link(const Json& object, std::string_view where) const {
    LinkCost link;
    link.latency_s = number(object, "latency_s", where);
    const Json& bandwidth = member(object, "bandwidth_bytes_per_s", where);
    if (bandwidth.is_string() && bandwidth.get_ref<const std::string&>() == "inf")
      link.bandwidth_bytes_per_s = std::numeric_limits<double>::infinity();
    else if (bandwidth.is_number())
      link.bandwidth_bytes_per_s = bandwidth.get<double>();
    else
      fail(source_,
           fmt::format("{} must be a number or \"inf\"", path(where, "bandwidth_bytes_per_s")));
    return link;
  }
  static std::string path(std::string_view where, std::string_view key) {
    return where.empty() ? std::string(key) : fmt::format("{}.{}", where, key);
  }

 private:
  std::string_view source_;
};

}  // namespace

std::string write_cost_model(const CostModel& model) {
  Json root = Json::object();
  root["format"] = std::string(kCostModelFormatTag);
  root["description"] = model.description;
  root["tokens_per_microbatch"] = model.tokens_per_microbatch;
  if (model.blocking_sends) root["blocking_sends"] = true;
  root["default_link"] = link_json(model.default_link);
  root["links"] = Json::array();
  for (const auto& l : model.links) {
    Json entry = Json::object();
    entry["src_device"] = l.src_device;
    entry["dst_device"] = l.dst_device;
    entry.update(link_json(l.cost));
    root["links"].push_back(std::move(entry));
  }
  if (!model.hosts.empty()) {
    root["hosts"] = Json::array();
    for (const auto& h : model.hosts) {
      Json entry = {{"devices", h.devices}, {"slowdown_by_count", h.slowdown_by_count}};
      if (!h.device_slowdown_by_count.empty())
        entry["device_slowdown_by_count"] = h.device_slowdown_by_count;
      root["hosts"].push_back(std::move(entry));
    }
  }
  root["stages"] = Json::array();
  for (std::size_t s = 0; s < model.stages.size(); ++s) {
    const StageCost& c = model.stages[s];
    Json entry = Json::object();
    entry["stage"] = s;
    for (const auto& [key, field] : kDurations) entry[key] = c.*field;
    for (const auto& [key, field] : kBytes) entry[key] = c.*field;
    if (c.weight_grad_stash_bytes != 0)
      entry["weight_grad_stash_bytes"] = c.weight_grad_stash_bytes;
    if (c.input_grad_release_bytes != 0)
      entry["input_grad_release_bytes"] = c.input_grad_release_bytes;
    if (c.workspace_bytes != 0) entry["workspace_bytes"] = c.workspace_bytes;
    if (c.forward_comm_s != 0) entry["forward_comm_s"] = c.forward_comm_s;
    if (c.backward_comm_s != 0) entry["backward_comm_s"] = c.backward_comm_s;
    if (c.pair_compute_slowdown != 1.0) entry["pair_compute_slowdown"] = c.pair_compute_slowdown;
    root["stages"].push_back(std::move(entry));
  }
  return root.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

CostModel parse_cost_model(std::string_view json, std::string_view source) {
  const auto is_space = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
  if (std::all_of(json.begin(), json.end(), is_space)) fail(source, "empty file, not a cost model");
  Json root;
  try {
    root = Json::parse(json.begin(), json.end());
  } catch (const Json::exception& e) {
    throw_json_error(json, source, e);
  }
  const Reader r(source);
  r.object(root, "the top level");
  const Json& format = r.member(root, "format", "");
  if (!format.is_string()) fail(source, "format must be a string");
  if (format.get_ref<const std::string&>() != kCostModelFormatTag)
    fail(source, fmt::format("unsupported format '{}' (expected {})",
                             format.get_ref<const std::string&>(), kCostModelFormatTag));

  CostModel model;
  if (const auto it = root.find("description"); it != root.end()) {
    if (!it->is_string()) fail(source, "description must be a string");
    model.description = it->get<std::string>();
  }
  if (root.contains("tokens_per_microbatch"))
    model.tokens_per_microbatch = r.integer(root, "tokens_per_microbatch", "");
  if (const auto it = root.find("blocking_sends"); it != root.end()) {
    if (!it->is_boolean()) fail(source, "blocking_sends must be true or false");
    model.blocking_sends = it->get<bool>();
  }
  model.default_link =
      r.link(r.object(r.member(root, "default_link", ""), "default_link"), "default_link");
  if (root.contains("links")) {
    const Json& links = r.array(root["links"], "links");
    for (std::size_t i = 0; i < links.size(); ++i) {
      const std::string where = fmt::format("links[{}]", i);
      const Json& entry = r.object(links[i], where);
      LinkOverride l;
      l.src_device = r.int32(entry, "src_device", where);
      l.dst_device = r.int32(entry, "dst_device", where);
      l.cost = r.link(entry, where);
      model.links.push_back(l);
    }
  }
  if (root.contains("hosts")) {
    const Json& hosts = r.array(root["hosts"], "hosts");
    for (std::size_t h = 0; h < hosts.size(); ++h) {
      const std::string where = fmt::format("hosts[{}]", h);
      const Json& entry = r.object(hosts[h], where);
      HostSharing host;
      const Json& devices = r.array(r.member(entry, "devices", where), where + ".devices");
      for (std::size_t i = 0; i < devices.size(); ++i) {
        const std::int64_t d = r.integer(devices[i], fmt::format("{}.devices[{}]", where, i));
        if (d < INT32_MIN || d > INT32_MAX)
          fail(source, fmt::format("{}.devices[{}] is out of range", where, i));
        host.devices.push_back(static_cast<std::int32_t>(d));
      }
      auto numbers = [&](const Json& list, const std::string& what) {
        std::vector<double> out;
        for (std::size_t k = 0; k < r.array(list, what).size(); ++k) {
          if (!list[k].is_number()) fail(source, fmt::format("{}[{}] must be a number", what, k));
          out.push_back(list[k].get<double>());
        }
        return out;
      };
      host.slowdown_by_count =
          numbers(r.member(entry, "slowdown_by_count", where), where + ".slowdown_by_count");
      if (entry.contains("device_slowdown_by_count")) {
        const std::string what = where + ".device_slowdown_by_count";
        const Json& lists = r.array(entry["device_slowdown_by_count"], what);
        for (std::size_t i = 0; i < lists.size(); ++i)
          host.device_slowdown_by_count.push_back(
              numbers(lists[i], fmt::format("{}[{}]", what, i)));
      }
      model.hosts.push_back(std::move(host));
    }
  }
  const Json& stages = r.array(r.member(root, "stages", ""), "stages");
  for (std::size_t s = 0; s < stages.size(); ++s) {
    const std::string where = fmt::format("stages[{}]", s);
    const Json& entry = r.object(stages[s], where);
    const std::int64_t index = r.integer(entry, "stage", where);
    if (index != static_cast<std::int64_t>(s))
      fail(source, fmt::format("{} is stage {}, expected stage {} (list every stage once, in "
                               "order; stage {} is missing or out of place)",
                               where, index, s, s));
    StageCost c;
    for (const auto& [key, field] : kDurations) c.*field = r.number(entry, key, where);
    for (const auto& [key, field] : kBytes) c.*field = r.integer(entry, key, where);
    if (entry.contains("weight_grad_stash_bytes"))
      c.weight_grad_stash_bytes = r.integer(entry, "weight_grad_stash_bytes", where);
    if (entry.contains("input_grad_release_bytes"))
      c.input_grad_release_bytes = r.integer(entry, "input_grad_release_bytes", where);
    if (entry.contains("workspace_bytes"))
      c.workspace_bytes = r.integer(entry, "workspace_bytes", where);
    if (entry.contains("forward_comm_s"))
      c.forward_comm_s = r.number(entry, "forward_comm_s", where);
    if (entry.contains("backward_comm_s"))
      c.backward_comm_s = r.number(entry, "backward_comm_s", where);
    if (entry.contains("pair_compute_slowdown"))
      c.pair_compute_slowdown = r.number(entry, "pair_compute_slowdown", where);
    model.stages.push_back(c);
  }
  try {
    check_cost_model(model);
  } catch (const InputError& e) {
    fail(source, e.what());
  }
  return model;
}

CostModel read_cost_model(const std::string& path) {
  return parse_cost_model(read_input(path), path == "-" ? "<stdin>" : path);
}

namespace {

struct Preset {
  const char* name;
  GptShape shape;  // layers, d_model, heads, seq_len, vocab, microbatch_size, dtype_bytes
};

const std::vector<Preset>& presets() {
  static const std::vector<Preset> table = {
      {"tiny", {4, 128, 4, 128, 256, 16, 4}},
      {"gpt2-small", {12, 768, 12, 1024, 50257, 1, 2}},
      {"gpt2-medium", {24, 1024, 16, 1024, 50257, 1, 2}},
      {"gpt2-large", {36, 1280, 20, 1024, 50257, 1, 2}},
      {"gpt2-xl", {48, 1600, 25, 1024, 50257, 1, 2}},
  };
  return table;
}

}  // namespace

GptShape gpt_shape_preset(const std::string& name) {
  std::string names;
  for (const auto& p : presets()) {
    if (p.name == name) return p.shape;
    names += fmt::format("{}{}", names.empty() ? "" : ", ", p.name);
  }
  throw InputError(fmt::format("unknown --preset '{}' (expected {})", name, names));
}

std::int32_t dtype_bytes(const std::string& dtype) {
  if (dtype == "fp32") return 4;
  if (dtype == "bf16" || dtype == "fp16") return 2;
  throw InputError(fmt::format("unknown --dtype '{}' (expected fp32, bf16 or fp16)", dtype));
}

}  // namespace paci
