// Canonical JSON schedules ("format": "paci.schedule/1"): a writer with one fixed layout (keys in
// order, one device's action list per line) and a reader that accepts any layout, reporting
// parse errors by line and column and naming the offending key or devices[d][i] entry.
#include <fmt/format.h>
#include <algorithm>
#include <cstdint>
#include <nlohmann/json.hpp>

#include "schedules/format_rows.hpp"
#include "schedules/formats.hpp"

namespace paci::detail {

namespace {

using Json = nlohmann::json;

const Json& member(const Json& object, const char* key, std::string_view source) {
  const auto it = object.find(key);
  if (it == object.end()) fail(source, fmt::format("missing key '{}'", key));
  return *it;
}

// An int32; `what` names the value in messages ("key 'stages'", "placement[2]").
std::int32_t to_int32(const Json& value, std::string_view what, std::string_view source) {
  if (!value.is_number_integer()) fail(source, fmt::format("{} must be an integer", what));
  const bool fits = value.is_number_unsigned() ? value.get<std::uint64_t>() <= INT32_MAX
                                               : value.get<std::int64_t>() >= INT32_MIN &&
                                                     value.get<std::int64_t>() <= INT32_MAX;
  if (!fits) fail(source, fmt::format("{} is out of range", what));
  return static_cast<std::int32_t>(value.get<std::int64_t>());
}

std::int32_t int_member(const Json& object, const char* key, std::string_view source) {
  return to_int32(member(object, key, source), fmt::format("key '{}'", key), source);
}

const std::string& string_member(const Json& object, const char* key, std::string_view source) {
  const Json& value = member(object, key, source);
  if (!value.is_string()) fail(source, fmt::format("key '{}' must be a string", key));
  return value.get_ref<const std::string&>();
}

}  // namespace

std::string write_json(const Schedule& s) {
  std::string out;
  out.reserve(512 + s.placement.size() * 4 + s.devices.size() * 8 + s.num_actions() * 14);
  out += "{\n  \"format\": \"";
  out += kScheduleFormatTag;
  out += "\",\n  \"kind\": ";
  out += Json(s.kind).dump(-1, ' ', false, Json::error_handler_t::replace);
  out += ",\n  \"stages\": ";
  append_int(out, s.stages);
  out += ",\n  \"placement\": [";
  for (std::size_t i = 0; i < s.placement.size(); ++i) {
    if (i > 0) out += ", ";
    append_int(out, s.placement[i]);
  }
  out += "],\n  \"microbatches\": ";
  append_int(out, s.microbatches);
  out += ",\n  \"steps\": ";
  append_int(out, s.steps);
  out += ",\n  \"weight_policy\": \"";
  out += to_string(s.weight_policy);
  out += "\"";
  if (s.copies != 1) {  // written when not 1: one-copy files stay as they were
    out += ",\n  \"copies\": ";
    append_int(out, s.copies);
  }
  out += ",\n  \"devices\": [";
  for (std::size_t d = 0; d < s.devices.size(); ++d) {
    out += d == 0 ? "\n    [" : ",\n    [";
    const auto& list = s.devices[d];
    for (std::size_t i = 0; i < list.size();) {
      out += i == 0 ? "\"" : ", \"";
      i += append_cell(out, list, i);
      out.push_back('"');
    }
    out.push_back(']');
  }
  out += s.devices.empty() ? "]\n}\n" : "\n  ]\n}\n";
  return out;
}

Schedule parse_json(std::string_view content, std::string_view source) {
  Json root;
  try {
    root = Json::parse(content.begin(), content.end());
  } catch (const Json::exception& e) {
    throw_json_error(content, source, e);
  }
  if (!root.is_object()) fail(source, "the top level must be a JSON object");

  const std::string& format = string_member(root, "format", source);
  if (format != kScheduleFormatTag)
    fail(source, fmt::format("unsupported format '{}' (expected {})", format, kScheduleFormatTag));

  Schedule s;
  s.kind = string_member(root, "kind", source);
  s.stages = int_member(root, "stages", source);
  const Json& placement = member(root, "placement", source);
  if (!placement.is_array()) fail(source, "key 'placement' must be an array of integers");
  s.placement.reserve(placement.size());
  for (std::size_t i = 0; i < placement.size(); ++i)
    s.placement.push_back(to_int32(placement[i], fmt::format("placement[{}]", i), source));
  s.microbatches = int_member(root, "microbatches", source);
  s.steps = int_member(root, "steps", source);
  const std::string& policy = string_member(root, "weight_policy", source);
  try {
    s.weight_policy = parse_weight_policy(policy);
  } catch (const InputError& e) {
    fail(source, e.what());
  }
  if (root.contains("copies")) s.copies = int_member(root, "copies", source);

  const Json& devices = member(root, "devices", source);
  if (!devices.is_array()) fail(source, "key 'devices' must be an array of action lists");
  s.devices.resize(devices.size());
  for (std::size_t d = 0; d < devices.size(); ++d) {
    const Json& list = devices[d];
    if (!list.is_array())
      fail(source, fmt::format("devices[{}] must be an array of action strings", d));
    auto& actions = s.devices[d];
    actions.reserve(list.size());
    for (std::size_t i = 0; i < list.size(); ++i) {
      const Json& token = list[i];
      if (!token.is_string()) fail(source, fmt::format("devices[{}][{}] must be a string", d, i));
      try {
        parse_token(token.get_ref<const std::string&>(), actions);
      } catch (const InputError& e) {
        fail(source, fmt::format("devices[{}][{}]: {}", d, i, e.what()));
      }
    }
  }
  check_metadata_in(s, source);
  return s;
}

}  // namespace paci::detail
