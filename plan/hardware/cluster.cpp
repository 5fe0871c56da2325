// The cluster file ("paci.cluster/1"): its checks, its canonical JSON (one fixed layout on write
// with exact doubles, any key order on read), and the compiled-in presets. Every bad input is one
// InputError line starting with its source and naming the field (nvlink.latency_s).
#include "plan/hardware/cluster.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "schedules/formats.hpp"
#include "schedules/ir.hpp"

namespace paci::plan {

// The preset files' texts, compiled in by plan/CMakeLists.txt (cluster_presets_data.cpp under the
// build folder): the generated file defines these three with the same declarations.
namespace detail {
extern const std::size_t kEmbeddedClusterCount;
extern const char* const
    kEmbeddedClusterNames[];  // "h100-80gb": plan/hardware/clusters/h100-80gb.json
extern const char* const kEmbeddedClusterTexts[];
}  // namespace detail

namespace {

using Json = nlohmann::ordered_json;

[[noreturn]] void fail(std::string_view source, std::string_view message) {
  throw InputError(fmt::format("{}: {}", source, message));
}

// What a number must be: a positive number, a share in (0, 1], or a count of at least 1.
enum class Bound { positive, fraction, count };

// The fields by JSON key, in the canonical order; the writer, the reader and the checks all walk
// these tables. A GPU field is a double or an int32 (the other pointer is null).
struct GpuField {
  const char* key;
  double ClusterSpec::*number;
  std::int32_t ClusterSpec::*count;
  Bound bound;
  bool optional = false;  // may be left out (0): then not written either
};
constexpr GpuField kGpuFields[] = {
    {"peak_flops", &ClusterSpec::peak_flops, nullptr, Bound::positive},
    {"gemm_efficiency", &ClusterSpec::gemm_efficiency, nullptr, Bound::fraction},
    {"memory_bytes", &ClusterSpec::memory_bytes, nullptr, Bound::positive},
    {"memory_bandwidth_bytes_per_s", &ClusterSpec::memory_bandwidth_bytes_per_s, nullptr,
     Bound::positive},
    {"memory_efficiency", &ClusterSpec::memory_efficiency, nullptr, Bound::fraction},
    {"kernel_launch_s", &ClusterSpec::kernel_launch_s, nullptr, Bound::positive},
    {"sms", nullptr, &ClusterSpec::sms, Bound::count},
    // Required unless attention_by_seq is given (check_cluster).
    {"flash_forward_efficiency", &ClusterSpec::flash_forward_efficiency, nullptr, Bound::fraction,
     true},
    {"flash_backward_efficiency", &ClusterSpec::flash_backward_efficiency, nullptr, Bound::fraction,
     true},
    {"gpus_per_node", nullptr, &ClusterSpec::gpus_per_node, Bound::count},
    {"fp8_peak_flops", &ClusterSpec::fp8_peak_flops, nullptr, Bound::positive, true},
    {"fp8_gemm_efficiency", &ClusterSpec::fp8_gemm_efficiency, nullptr, Bound::fraction, true},
    {"mxfp8_gemm_efficiency", &ClusterSpec::mxfp8_gemm_efficiency, nullptr, Bound::fraction, true},
    {"host_bandwidth_bytes_per_s", &ClusterSpec::host_bandwidth_bytes_per_s, nullptr,
     Bound::positive, true},
    {"host_efficiency", &ClusterSpec::host_efficiency, nullptr, Bound::fraction, true},
    {"host_memory_bytes", &ClusterSpec::host_memory_bytes, nullptr, Bound::positive, true},
};
struct LinkField {
  const char* key;
  double LinkSpec::*number;
  Bound bound;
  bool optional = false;  // may be left out (0): then not written either
};
constexpr LinkField kLinkFields[] = {
    {"bandwidth_bytes_per_s", &LinkSpec::bandwidth_bytes_per_s, Bound::positive},
    {"efficiency", &LinkSpec::efficiency, Bound::fraction},
    {"p2p_efficiency", &LinkSpec::p2p_efficiency, Bound::fraction},
    {"latency_s", &LinkSpec::latency_s, Bound::positive},
    {"oversubscription", &LinkSpec::oversubscription, Bound::count, true},
    {"nodes_per_leaf", &LinkSpec::nodes_per_leaf, Bound::count, true},
};
constexpr const char* kBusbwKey = "allreduce_busbw_by_bytes";
constexpr const char* kAttentionKey = "attention_by_seq";
constexpr const char* kAttentionRow =
    "[seq, causal_forward, causal_backward, full_forward, full_backward]";
struct LinkMember {
  const char* key;
  LinkSpec ClusterSpec::*link;
};
constexpr LinkMember kLinks[] = {{"nvlink", &ClusterSpec::nvlink},
                                 {"network", &ClusterSpec::network}};

void check_number(double value, Bound bound, std::string_view what) {
  switch (bound) {
    case Bound::positive:
      if (!(std::isfinite(value) && value > 0))  // also NaN
        throw InputError(fmt::format("{} must be a positive number, got {}", what, value));
      return;
    case Bound::fraction:
      if (!(std::isfinite(value) && value > 0 && value <= 1))
        throw InputError(fmt::format("{} must be in (0, 1], got {}", what, value));
      return;
    case Bound::count:
      if (!(value >= 1))
        throw InputError(fmt::format("{} must be at least 1, got {}", what, value));
      return;
  }
}

void check_link(const LinkSpec& link, std::string_view name) {
  for (const auto& [key, number, bound, optional] : kLinkFields)
    if (!(optional && link.*number == 0))
      check_number(link.*number, bound, fmt::format("{}.{}", name, key));
  if (link.oversubscription != 0 && !std::isfinite(link.oversubscription))
    throw InputError(
        fmt::format("{}.oversubscription must be finite, got {}", name, link.oversubscription));
  if (link.nodes_per_leaf != 0 && !(std::isfinite(link.nodes_per_leaf) &&
                                    link.nodes_per_leaf == std::floor(link.nodes_per_leaf)))
    throw InputError(fmt::format("{}.nodes_per_leaf must be a whole number of nodes, got {}", name,
                                 link.nodes_per_leaf));
  if ((link.oversubscription > 0) != (link.nodes_per_leaf > 0))
    throw InputError(fmt::format(
        "{}.oversubscription and {}.nodes_per_leaf go together: the share of bandwidth between "
        "leaf switches and how many nodes share a leaf",
        name, name));
  const auto& table = link.allreduce_busbw_by_bytes;
  for (std::size_t i = 0; i < table.size(); ++i) {
    const auto [bytes, busbw] = table[i];
    const std::string what = fmt::format("{}.{}[{}]", name, kBusbwKey, i);
    if (!(std::isfinite(bytes) && bytes > 0 && std::isfinite(busbw) && busbw > 0))
      throw InputError(
          fmt::format("{} must be a pair of positive numbers [bytes, bytes_per_s], "
                      "got [{}, {}]",
                      what, bytes, busbw));
    if (i > 0 && !(bytes > table[i - 1].first))
      throw InputError(fmt::format("{}: sizes must increase, got {} bytes after {}", what, bytes,
                                   table[i - 1].first));
  }
}

// The attention core's rates: the two shares of peak, or the table by sequence length instead.
void check_attention(const ClusterSpec& c) {
  const auto& table = c.attention_by_seq;
  const bool shares = c.flash_forward_efficiency > 0 || c.flash_backward_efficiency > 0;
  if (table.empty()) {
    if (!shares)
      throw InputError(
          fmt::format("missing the attention core's rates: give flash_forward_efficiency and "
                      "flash_backward_efficiency, or {}",
                      kAttentionKey));
    check_number(c.flash_forward_efficiency, Bound::fraction, "flash_forward_efficiency");
    check_number(c.flash_backward_efficiency, Bound::fraction, "flash_backward_efficiency");
    return;
  }
  if (shares)
    throw InputError(fmt::format(
        "{} replaces flash_forward_efficiency and flash_backward_efficiency: give one or the "
        "other",
        kAttentionKey));
  for (std::size_t i = 0; i < table.size(); ++i) {
    const AttentionRate& r = table[i];
    const std::string what = fmt::format("{}[{}]", kAttentionKey, i);
    for (const double v :
         {r.seq, r.causal_forward, r.causal_backward, r.full_forward, r.full_backward})
      if (!(std::isfinite(v) && v > 0))
        throw InputError(fmt::format("{} must be {} of positive numbers", what, kAttentionRow));
    for (const double v : {r.causal_forward, r.causal_backward, r.full_forward, r.full_backward})
      if (v > c.peak_flops)
        throw InputError(fmt::format("{}: a rate of {} TFLOP/s is above peak_flops ({} TFLOP/s)",
                                     what, v / 1e12, c.peak_flops / 1e12));
    if (i > 0 && !(r.seq > table[i - 1].seq))
      throw InputError(
          fmt::format("{}: lengths must increase, got {} after {}", what, r.seq, table[i - 1].seq));
  }
}

// Every key a file may hold, for the message about an unknown one.
std::string known_keys(bool link) {
  std::string out;
  const auto add = [&out](std::string_view key) {
    if (!out.empty()) out += ", ";
    out += key;
  };
  if (link) {
    for (const auto& field : kLinkFields) add(field.key);
    add(kBusbwKey);
    return out;
  }
  for (const char* key : {"format", "name", "description"}) add(key);
  for (const auto& field : kGpuFields) add(field.key);
  add(kAttentionKey);
  for (const auto& member : kLinks) add(member.key);
  add("sources");
  return out;
}

// The keys "sources" may name: the top-level fields, and nvlink.<field>, network.<field>.
bool is_source_key(std::string_view key) {
  if (key == "name" || key == "description" || key == kAttentionKey) return true;
  for (const auto& field : kGpuFields)
    if (key == field.key) return true;
  for (const auto& member : kLinks) {
    if (key == member.key) return true;
    const std::string prefix = std::string(member.key) + ".";
    if (key.substr(0, prefix.size()) != prefix) continue;
    const std::string_view rest = key.substr(prefix.size());
    if (rest == kBusbwKey) return true;
    for (const auto& field : kLinkFields)
      if (rest == field.key) return true;
  }
  return false;
}

// Reads typed members, naming them by path ("nvlink.latency_s") in InputErrors.
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
  double number(const Json& value, const std::string& what) const {
    if (!value.is_number()) fail(source_, fmt::format("{} must be a number", what));
    return value.get<double>();
  }
  std::int32_t int32(const Json& value, const std::string& what) const {
    if (!value.is_number_integer()) fail(source_, fmt::format("{} must be an integer", what));
    if (value.is_number_unsigned()
            ? value.get<std::uint64_t>() > INT32_MAX
            : (value.get<std::int64_t>() < INT32_MIN || value.get<std::int64_t>() > INT32_MAX))
      fail(source_, fmt::format("{} is out of range", what));
    return static_cast<std::int32_t>(value.get<std::int64_t>());
  }
  std::string string(const Json& value, const std::string& what) const {
    if (!value.is_string()) fail(source_, fmt::format("{} must be a string", what));
    return value.get<std::string>();
  }
  const Json& object(const Json& value, const std::string& what) const {
    if (!value.is_object()) fail(source_, fmt::format("{} must be an object", what));
    return value;
  }
  // An object whose every key passes `known`; the first other key is an error.
  template <typename Known>
  void only_known_keys(const Json& object, std::string_view where, Known known, bool link) const {
    for (const auto& item : object.items())
      if (!known(item.key()))
        fail(source_,
             fmt::format("unknown key '{}'{} (known: {})", item.key(),
                         where.empty() ? "" : fmt::format(" in {}", where), known_keys(link)));
  }
  LinkSpec link(const Json& value, std::string_view name) const {
    const Json& fields = object(value, std::string(name));
    only_known_keys(
        fields, name,
        [](std::string_view key) {
          return key == kBusbwKey || std::any_of(std::begin(kLinkFields), std::end(kLinkFields),
                                                 [&](const LinkField& f) { return key == f.key; });
        },
        true);
    LinkSpec out;
    for (const auto& [key, number, bound, optional] : kLinkFields) {
      if (optional && !fields.contains(key)) continue;
      out.*number = this->number(member(fields, key, name), fmt::format("{}.{}", name, key));
    }
    if (const auto it = fields.find(kBusbwKey); it != fields.end()) {
      const std::string what = fmt::format("{}.{}", name, kBusbwKey);
      if (!it->is_array()) fail(source_, fmt::format("{} must be an array", what));
      for (std::size_t i = 0; i < it->size(); ++i) {
        const Json& pair = (*it)[i];
        if (!pair.is_array() || pair.size() != 2 || !pair[0].is_number() || !pair[1].is_number())
          fail(source_,
               fmt::format("{}[{}] must be a [bytes, bytes_per_s] pair of numbers", what, i));
        out.allreduce_busbw_by_bytes.emplace_back(pair[0].get<double>(), pair[1].get<double>());
      }
    }
    return out;
  }

 private:
  std::string_view source_;
};

Json link_json(const LinkSpec& link) {
  Json out = Json::object();
  for (const auto& [key, number, bound, optional] : kLinkFields)
    if (!(optional && link.*number == 0)) out[key] = link.*number;
  if (!link.allreduce_busbw_by_bytes.empty()) {
    Json table = Json::array();
    for (const auto& [bytes, busbw] : link.allreduce_busbw_by_bytes)
      table.push_back(Json::array({bytes, busbw}));
    out[kBusbwKey] = std::move(table);
  }
  return out;
}

}  // namespace

void check_cluster(const ClusterSpec& cluster, std::string_view source) {
  try {
    if (cluster.name.empty()) throw InputError("name must not be empty");
    for (const auto& [key, number, count, bound, optional] : kGpuFields) {
      const double value =
          number != nullptr ? cluster.*number : static_cast<double>(cluster.*count);
      if (!(optional && value == 0)) check_number(value, bound, key);
    }
    check_attention(cluster);
    if ((cluster.fp8_peak_flops > 0) != (cluster.fp8_gemm_efficiency > 0))
      throw InputError(
          "fp8_peak_flops and fp8_gemm_efficiency go together (leave both out for a GPU without "
          "FP8 tensor cores)");
    if (cluster.mxfp8_gemm_efficiency > 0 && cluster.fp8_peak_flops == 0)
      throw InputError("mxfp8_gemm_efficiency needs fp8_peak_flops (MXFP8 runs at the FP8 peak)");
    if ((cluster.host_bandwidth_bytes_per_s > 0) != (cluster.host_efficiency > 0))
      throw InputError(
          "host_bandwidth_bytes_per_s and host_efficiency go together: the GPU's link to its host "
          "memory and the share of it a copy reaches");
    if (cluster.host_memory_bytes > 0 && cluster.host_bandwidth_bytes_per_s == 0)
      throw InputError("host_memory_bytes needs host_bandwidth_bytes_per_s and host_efficiency");
    if (cluster.nvlink.oversubscription > 0 || cluster.nvlink.nodes_per_leaf > 0)
      throw InputError(
          "nvlink.oversubscription and nvlink.nodes_per_leaf describe the network between nodes: "
          "give them under network");
    for (const auto& [key, link] : kLinks) check_link(cluster.*link, key);
  } catch (const InputError& e) {
    fail(source, e.what());
  }
}

std::string write_cluster(const ClusterSpec& cluster) {
  Json root = Json::object();
  root["format"] = std::string(kClusterFormatTag);
  root["name"] = cluster.name;
  root["description"] = cluster.description;
  for (const auto& [key, number, count, bound, optional] : kGpuFields) {
    if (optional && (number != nullptr ? cluster.*number == 0 : cluster.*count == 0)) continue;
    if (number != nullptr)
      root[key] = cluster.*number;
    else
      root[key] = cluster.*count;
  }
  if (!cluster.attention_by_seq.empty()) {
    Json table = Json::array();
    for (const AttentionRate& r : cluster.attention_by_seq)
      table.push_back(Json::array(
          {r.seq, r.causal_forward, r.causal_backward, r.full_forward, r.full_backward}));
    root[kAttentionKey] = std::move(table);
  }
  for (const auto& [key, link] : kLinks) root[key] = link_json(cluster.*link);
  return root.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

ClusterSpec parse_cluster(std::string_view json, std::string_view source) {
  const auto is_space = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
  if (std::all_of(json.begin(), json.end(), is_space)) fail(source, "empty file, not a cluster");
  Json root;
  try {
    root = Json::parse(json.begin(), json.end());
  } catch (const Json::exception& e) {
    throw_json_error(json, source, e);
  }
  const Reader r(source);
  r.object(root, "the top level");
  const std::string format = r.string(r.member(root, "format", ""), "format");
  if (format != kClusterFormatTag)
    fail(source, fmt::format("unsupported format '{}' (expected {})", format, kClusterFormatTag));
  r.only_known_keys(
      root, "",
      [](std::string_view key) {
        return key == "format" || key == "name" || key == "description" || key == "sources" ||
               key == kAttentionKey ||
               std::any_of(std::begin(kGpuFields), std::end(kGpuFields),
                           [&](const GpuField& f) { return key == f.key; }) ||
               std::any_of(std::begin(kLinks), std::end(kLinks),
                           [&](const LinkMember& m) { return key == m.key; });
      },
      false);

  ClusterSpec cluster;
  cluster.name = r.string(r.member(root, "name", ""), "name");
  if (const auto it = root.find("description"); it != root.end())
    cluster.description = r.string(*it, "description");
  for (const auto& [key, number, count, bound, optional] : kGpuFields) {
    if (optional && !root.contains(key)) continue;
    const Json& value = r.member(root, key, "");
    if (number != nullptr)
      cluster.*number = r.number(value, key);
    else
      cluster.*count = r.int32(value, key);
  }
  if (const auto it = root.find(kAttentionKey); it != root.end()) {
    if (!it->is_array()) fail(source, fmt::format("{} must be an array", kAttentionKey));
    for (std::size_t i = 0; i < it->size(); ++i) {
      const Json& row = (*it)[i];
      if (!row.is_array() || row.size() != 5 ||
          !std::all_of(row.begin(), row.end(), [](const Json& v) { return v.is_number(); }))
        fail(source, fmt::format("{}[{}] must be {} of numbers", kAttentionKey, i, kAttentionRow));
      cluster.attention_by_seq.push_back({row[0].get<double>(), row[1].get<double>(),
                                          row[2].get<double>(), row[3].get<double>(),
                                          row[4].get<double>()});
    }
  }
  for (const auto& [key, link] : kLinks) cluster.*link = r.link(r.member(root, key, ""), key);
  // "sources": where each value comes from, in words; read for its shape only.
  if (const auto it = root.find("sources"); it != root.end()) {
    r.object(*it, "sources");
    for (const auto& item : it->items()) {
      const std::string what = fmt::format("sources.{}", item.key());
      if (!is_source_key(item.key()))
        fail(source, fmt::format("{} names no field of a cluster (name a field such as "
                                 "peak_flops or nvlink.latency_s)",
                                 what));
      r.string(item.value(), what);
    }
  }
  check_cluster(cluster, source);
  return cluster;
}

ClusterSpec read_cluster(const std::string& path) {
  return parse_cluster(read_input(path), path == "-" ? "<stdin>" : path);
}

const std::vector<ClusterSpec>& cluster_presets() {
  static const std::vector<ClusterSpec> presets = [] {
    std::vector<ClusterSpec> out;
    for (std::size_t i = 0; i < detail::kEmbeddedClusterCount; ++i) {
      const std::string_view name = detail::kEmbeddedClusterNames[i];
      out.push_back(parse_cluster(detail::kEmbeddedClusterTexts[i],
                                  fmt::format("plan/hardware/clusters/{}.json (built in)", name)));
      if (out.back().name != name)
        throw std::logic_error(
            fmt::format("plan/hardware/clusters/{}.json is named '{}'", name, out.back().name));
    }
    return out;
  }();
  return presets;
}

ClusterSpec cluster_preset(std::string_view name) {
  std::string known;
  for (const ClusterSpec& preset : cluster_presets()) {
    if (preset.name == name) return preset;
    known += (known.empty() ? "" : ", ") + preset.name;
  }
  throw InputError(fmt::format("unknown GPU '{}' (known: {})", name, known));
}

}  // namespace paci::plan
