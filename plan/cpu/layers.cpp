// The per-layer calibration file (paci.layers/1): reading it (any key order; one InputError line
// naming the field), writing it (a fixed layout), and the CPU cost model built from it.
#include "plan/cpu/layers.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "schedules/ir.hpp"

namespace paci::plan {

namespace {

using Json = nlohmann::ordered_json;

struct Reader {
  std::string_view source;
  [[noreturn]] void fail(const std::string& what) const {
    throw InputError(fmt::format("{}: {}", source, what));
  }
  const Json& at(const Json& j, const char* key, const std::string& where) const {
    if (!j.is_object() || !j.contains(key)) fail(fmt::format("{}{} is missing", where, key));
    return j[key];
  }
  double number(const Json& j, const char* key, const std::string& where, bool positive) const {
    const Json& v = at(j, key, where);
    if (!v.is_number()) fail(fmt::format("{}{} must be a number, got {}", where, key, v.dump()));
    const double x = v.get<double>();
    if (!std::isfinite(x) || x < 0 || (positive && x == 0))
      fail(fmt::format("{}{} must be a finite number {} 0, got {}", where, key,
                       positive ? ">" : ">=", v.dump()));
    return x;
  }
  std::int64_t count(const Json& j, const char* key, const std::string& where) const {
    const Json& v = at(j, key, where);
    if (!v.is_number_integer() || v.get<std::int64_t>() < 1 ||
        v.get<std::int64_t>() > (std::int64_t{1} << 31))
      fail(fmt::format("{}{} must be a whole number from 1 to 2^31, got {}", where, key, v.dump()));
    return v.get<std::int64_t>();
  }
  std::int64_t bytes(const Json& j, const char* key, const std::string& where) const {
    const Json& v = at(j, key, where);
    if (!v.is_number_integer() || v.get<std::int64_t>() < 0)
      fail(fmt::format("{}{} must be a whole number of bytes >= 0, got {}", where, key, v.dump()));
    return v.get<std::int64_t>();
  }
  PieceCalibration piece(const Json& j, const std::string& where) const {
    PieceCalibration p;
    p.forward_s = number(j, "forward_s", where, false);
    p.backward_s = number(j, "backward_s", where, false);
    p.input_grad_s = number(j, "input_grad_s", where, false);
    p.weight_grad_s = number(j, "weight_grad_s", where, false);
    p.update_s = number(j, "update_s", where, false);
    p.activation_bytes = bytes(j, "activation_bytes", where);
    p.weight_bytes = bytes(j, "weight_bytes", where);
    p.weight_grad_stash_bytes = bytes(j, "weight_grad_stash_bytes", where);
    return p;
  }
};

Json piece_json(const PieceCalibration& p) {
  return {{"forward_s", p.forward_s},       {"backward_s", p.backward_s},
          {"input_grad_s", p.input_grad_s}, {"weight_grad_s", p.weight_grad_s},
          {"update_s", p.update_s},         {"activation_bytes", p.activation_bytes},
          {"weight_bytes", p.weight_bytes}, {"weight_grad_stash_bytes", p.weight_grad_stash_bytes}};
}

}  // namespace

bool is_layer_calibration(std::string_view json) {
  try {
    const Json j = Json::parse(json);
    return j.is_object() && j.contains("format") && j["format"] == kLayersFormatTag;
  } catch (const Json::exception&) {
    return false;
  }
}

LayerCalibration parse_layer_calibration(std::string_view json, std::string_view source) {
  const Reader r{source};
  Json j;
  try {
    j = Json::parse(json);
  } catch (const Json::exception& e) {
    r.fail(fmt::format("malformed JSON ({})", e.what()));
  }
  if (!j.is_object() || !j.contains("format") || j["format"] != kLayersFormatTag)
    r.fail(
        fmt::format("not a per-layer calibration (expected \"format\": \"{}\")", kLayersFormatTag));
  LayerCalibration c;
  if (j.contains("description") && j["description"].is_string())
    c.description = j["description"].get<std::string>();
  const Json& m = r.at(j, "model", "");
  c.layers = r.count(m, "layers", "model.");
  c.heads = r.count(m, "heads", "model.");
  c.d_model = r.count(m, "d_model", "model.");
  c.seq_len = r.count(m, "seq_len", "model.");
  c.vocab = r.count(m, "vocab", "model.");
  c.batch = r.count(m, "batch", "model.");
  if (c.d_model % c.heads != 0)
    r.fail(fmt::format("model.d_model {} is not divisible by model.heads {}", c.d_model, c.heads));
  c.cores = static_cast<std::int32_t>(r.count(j, "cores", ""));
  c.message_bytes = r.bytes(j, "message_bytes", "");
  const Json& link = r.at(j, "link", "");
  c.link.latency_s = r.number(link, "latency_s", "link.", false);
  c.link.bandwidth_bytes_per_s = r.number(link, "bandwidth_bytes_per_s", "link.", true);
  const Json& threads = r.at(j, "threads", "");
  if (!threads.is_array() || threads.empty()) r.fail("threads must be a non-empty list");
  for (std::size_t i = 0; i < threads.size(); ++i) {
    const std::string where = fmt::format("threads[{}].", i);
    ThreadsCalibration t;
    t.threads_per_stage =
        static_cast<std::int32_t>(r.count(threads[i], "threads_per_stage", where));
    t.layer = r.piece(r.at(threads[i], "layer", where), where + "layer.");
    if (!(t.layer.forward_s > 0) || !(t.layer.backward_s > 0))
      r.fail(fmt::format("{}layer: forward_s and backward_s must be > 0", where));
    t.embedding = r.piece(r.at(threads[i], "embedding", where), where + "embedding.");
    t.head = r.piece(r.at(threads[i], "head", where), where + "head.");
    const Json& slow = r.at(threads[i], "slowdown_by_count", where);
    if (!slow.is_array() || slow.empty())
      r.fail(fmt::format("{}slowdown_by_count must be a non-empty list", where));
    t.slowdown_by_count.clear();
    for (const Json& x : slow) {
      if (!x.is_number() || !(x.get<double>() > 0) || !std::isfinite(x.get<double>()))
        r.fail(fmt::format("{}slowdown_by_count holds {}, not a number > 0", where, x.dump()));
      t.slowdown_by_count.push_back(x.get<double>());
    }
    if (std::abs(t.slowdown_by_count.front() - 1.0) > 1e-9)
      r.fail(fmt::format("{}slowdown_by_count starts with {}, not 1 (one thread alone)", where,
                         t.slowdown_by_count.front()));
    if (!c.threads.empty() && t.threads_per_stage <= c.threads.back().threads_per_stage)
      r.fail("threads must list increasing threads_per_stage");
    c.threads.push_back(std::move(t));
  }
  return c;
}

std::string write_layer_calibration(const LayerCalibration& c) {
  Json j;
  j["format"] = std::string(kLayersFormatTag);
  j["description"] = c.description;
  j["model"] = {{"layers", c.layers},   {"heads", c.heads}, {"d_model", c.d_model},
                {"seq_len", c.seq_len}, {"vocab", c.vocab}, {"batch", c.batch}};
  j["cores"] = c.cores;
  j["message_bytes"] = c.message_bytes;
  j["link"] = {{"latency_s", c.link.latency_s},
               {"bandwidth_bytes_per_s", c.link.bandwidth_bytes_per_s}};
  j["threads"] = Json::array();
  for (const ThreadsCalibration& t : c.threads)
    j["threads"].push_back({{"threads_per_stage", t.threads_per_stage},
                            {"layer", piece_json(t.layer)},
                            {"embedding", piece_json(t.embedding)},
                            {"head", piece_json(t.head)},
                            {"slowdown_by_count", t.slowdown_by_count}});
  return j.dump(2) + "\n";
}

std::int32_t threads_per_stage(const LayerCalibration& c, std::int32_t devices) {
  return std::max(1, c.cores / std::max(1, devices));
}

const ThreadsCalibration& threads_for(const LayerCalibration& c, std::int32_t devices) {
  const std::int32_t want = threads_per_stage(c, devices);
  const ThreadsCalibration* best = &c.threads.front();
  for (const ThreadsCalibration& t : c.threads)
    if (t.threads_per_stage <= want) best = &t;
  return *best;
}

CostModel cpu_cost_model(const LayerCalibration& c, const std::vector<std::int32_t>& layers,
                         const std::vector<std::int32_t>& placement) {
  const std::int32_t devices = *std::max_element(placement.begin(), placement.end()) + 1;
  const ThreadsCalibration& t = threads_for(c, devices);
  CostModel m;
  m.description = fmt::format(
      "paci plan on this CPU from a per-layer calibration ({}): {} stage(s) on {} device(s), {} "
      "thread(s) per stage",
      c.description, layers.size(), devices, t.threads_per_stage);
  m.tokens_per_microbatch = c.batch * c.seq_len;
  m.default_link = c.link;
  const auto S = layers.size();
  for (std::size_t s = 0; s < S; ++s) {
    const double n = static_cast<double>(layers[s]);
    const auto add = [](StageCost& k, const PieceCalibration& p, double times) {
      k.forward_s += times * p.forward_s;
      k.backward_s += times * p.backward_s;
      k.input_grad_s += times * p.input_grad_s;
      k.weight_grad_s += times * p.weight_grad_s;
      k.update_s += times * p.update_s;
      k.activation_bytes += static_cast<std::int64_t>(times) * p.activation_bytes;
      k.weight_bytes += static_cast<std::int64_t>(times) * p.weight_bytes;
      k.weight_grad_stash_bytes += static_cast<std::int64_t>(times) * p.weight_grad_stash_bytes;
    };
    StageCost k;
    add(k, t.layer, n);
    if (s == 0) add(k, t.embedding, 1);
    if (s + 1 == S) add(k, t.head, 1);
    k.gradient_bytes = k.weight_bytes;
    k.optimizer_bytes = 2 * k.weight_bytes;  // AdamW's two moments
    k.activation_message_bytes = s + 1 < S ? c.message_bytes : 0;
    k.gradient_message_bytes = s > 0 ? c.message_bytes : 0;
    m.stages.push_back(k);
  }
  if (t.slowdown_by_count.size() > 1 && devices > 1) {
    HostSharing host;
    for (std::int32_t d = 0; d < devices; ++d) host.devices.push_back(d);
    host.slowdown_by_count = t.slowdown_by_count;
    m.hosts.push_back(host);
  }
  return m;
}

}  // namespace paci::plan
