// timeline_json() and read_measured_timeline(): the measured report's per-action and per-message
// times, written compactly (arrays with a field list) and read back with every entry checked.
#include "traces/report_timeline.hpp"

#include <fmt/format.h>
#include <cmath>
#include <limits>
#include <tuple>

#include "schedules/analysis.hpp"

namespace paci {

namespace {

using nlohmann::json;

constexpr const char* kActionFields[] = {"start_s", "end_s", "free_s"};
constexpr const char* kMessageFields[] = {"producer",   "consumer",     "src_device",
                                          "dst_device", "bytes",        "send_start_s",
                                          "send_end_s", "recv_start_s", "recv_end_s"};

[[noreturn]] void fail(std::string_view source, const std::string& message) {
  throw InputError(fmt::format("{}: {}", source, message));
}

class Reader {
 public:
  explicit Reader(std::string_view source) : source_(source) {}

  const json& member(const json& object, const char* key, const std::string& where) const {
    if (!object.is_object()) fail(source_, fmt::format("{} must be an object", where));
    const auto it = object.find(key);
    if (it == object.end())
      fail(source_, fmt::format("{} has no '{}'{}", where, key,
                                where == "the report" && std::string_view(key) == "timeline"
                                    ? " (write it with paci train --report from this version)"
                                    : ""));
    return *it;
  }
  const json& array(const json& value, const std::string& what, std::size_t size) const {
    if (!value.is_array()) fail(source_, fmt::format("{} must be an array", what));
    if (size != kAnySize && value.size() != size)
      fail(source_, fmt::format("{} has {} entries, expected {}", what, value.size(), size));
    return value;
  }
  double seconds(const json& value, const std::string& what) const {
    if (!value.is_number()) fail(source_, fmt::format("{} must be a number", what));
    const double x = value.get<double>();
    if (!std::isfinite(x) || x < 0 || x > kLongestRun_s)
      fail(source_,
           fmt::format("{} must be a time from 0 to {:g} s (got {})", what, kLongestRun_s, x));
    return x;
  }
  std::int64_t integer(const json& value, const std::string& what) const {
    if (!value.is_number_integer() ||
        (value.is_number_unsigned() &&
         value.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX)))
      fail(source_, fmt::format("{} must be an integer", what));
    return value.get<std::int64_t>();
  }
  Action action(const json& value, const std::string& what) const {
    if (!value.is_string()) fail(source_, fmt::format("{} must be an action such as 0F3", what));
    try {
      return parse_action(value.get<std::string>());
    } catch (const InputError& e) {
      fail(source_, fmt::format("{}: {}", what, e.what()));
    }
  }

  static constexpr std::size_t kAnySize = std::numeric_limits<std::size_t>::max();
  static constexpr double kLongestRun_s = 1e9;  // about 30 years

 private:
  std::string_view source_;
};

void check_schedule_summary(const json& report, const Schedule& s, const Reader& r,
                            std::string_view source) {
  const json& source_key = r.member(report, "source", "the report");
  if (source_key != "measured")
    fail(source, fmt::format("source is {}, not \"measured\": only a measured run can be replayed",
                             source_key.dump()));
  const json& summary = r.member(report, "schedule", "the report");
  const ordered_json want = schedule_summary_json(s);
  for (const char* key : {"kind", "stages", "devices", "microbatches", "steps", "actions"}) {
    const json& have = r.member(summary, key, "the report's schedule");
    if (have != json(want[key]))
      fail(source, fmt::format("the report is a run of another schedule: its {} is {}, the "
                               "schedule file's is {}",
                               key, have.dump(), want[key].dump()));
  }
}

// Same counts are not the same schedule: the versions every F and B read (a property of each
// device's order) must be the schedule's own.
void check_versions(const json& report, const Schedule& s, const Reader& r,
                    std::string_view source) {
  const json& versions =
      r.array(r.member(report, "versions", "the report"), "versions", Reader::kAnySize);
  const Analysis want = analyze(s);
  if (versions.size() != want.versions.size())
    fail(source, fmt::format("the report is a run of another schedule: {} version records, the "
                             "schedule file has {}",
                             versions.size(), want.versions.size()));
  for (std::size_t i = 0; i < versions.size(); ++i) {
    const VersionRecord& v = want.versions[i];
    const json& have = versions[i];
    // An integer field equal to `want` (json::value() would convert any number, UB for 1e300,
    // and throw its own type_error for a string).
    const auto equals = [&](const char* key, std::int64_t want) {
      const auto it = have.find(key);
      return it != have.end() && it->is_number_integer() && *it == want;
    };
    if (!have.is_object() || !equals("stage", v.stage) || !equals("mb", v.microbatch) ||
        !equals("v_f", v.v_f) || !equals("v_b", v.v_b))
      fail(source, fmt::format("the report is a run of another schedule: versions[{}] is {}, the "
                               "schedule file's stage {} micro-batch {} reads v_f {}, v_b {}",
                               i, have.dump(), v.stage, v.microbatch, v.v_f, v.v_b));
  }
}

}  // namespace

ordered_json timeline_json(const ActionTimes& times, const std::vector<MessageSlice>& messages) {
  ordered_json j;
  j["action_fields"] = kActionFields;
  j["actions"] = ordered_json::array();
  for (const auto& device : times) {
    ordered_json list = ordered_json::array();
    for (const ActionTime& t : device)
      list.push_back(ordered_json::array({t.start_s, t.end_s, t.device_free_s()}));
    j["actions"].push_back(std::move(list));
  }
  j["message_fields"] = kMessageFields;
  j["messages"] = ordered_json::array();
  for (const MessageSlice& m : messages)
    j["messages"].push_back(ordered_json::array(
        {to_string(m.producer), to_string(m.consumer), m.src_device, m.dst_device, m.bytes,
         m.send_start_s, m.send_end_s, m.recv_start_s, m.recv_end_s}));
  return j;
}

MeasuredTimeline read_measured_timeline(const nlohmann::json& report, const Schedule& s,
                                        std::string_view source) {
  const Reader r(source);
  check_schedule_summary(report, s, r, source);
  check_versions(report, s, r, source);
  const json& timeline = r.member(report, "timeline", "the report");
  MeasuredTimeline out;
  const std::size_t D = s.devices.size();
  const json& actions = r.array(r.member(timeline, "actions", "timeline"), "timeline.actions", D);
  out.times.resize(D);
  for (std::size_t d = 0; d < D; ++d) {
    const std::string where = fmt::format("timeline.actions[{}]", d);
    const json& list = r.array(actions[d], where, s.devices[d].size());
    for (std::size_t i = 0; i < list.size(); ++i) {
      const std::string what = fmt::format("{}[{}] ({})", where, i, to_string(s.devices[d][i]));
      const json& t = r.array(list[i], what, 3);
      ActionTime time{r.seconds(t[0], what + ".start_s"), r.seconds(t[1], what + ".end_s"),
                      r.seconds(t[2], what + ".free_s")};
      if (time.end_s < time.start_s || time.free_s < time.end_s)
        fail(source, fmt::format("{} is not ordered (start {} s, end {} s, free {} s)", what,
                                 time.start_s, time.end_s, time.free_s));
      out.times[d].push_back(time);
    }
  }
  const json& messages =
      r.array(r.member(timeline, "messages", "timeline"), "timeline.messages", Reader::kAnySize);
  for (std::size_t k = 0; k < messages.size(); ++k) {
    const std::string what = fmt::format("timeline.messages[{}]", k);
    const json& m = r.array(messages[k], what, std::size(kMessageFields));
    MessageSlice slice;
    slice.producer = r.action(m[0], what + ".producer");
    slice.consumer = r.action(m[1], what + ".consumer");
    const std::int64_t src = r.integer(m[2], what + ".src_device");
    const std::int64_t dst = r.integer(m[3], what + ".dst_device");
    for (const auto& [action, device, name] : {std::tuple{slice.producer, src, "producer"},
                                               std::tuple{slice.consumer, dst, "consumer"}}) {
      // A U receives only its twin's gradients (two copies of the model).
      const bool update_allowed = s.copies > 1 && std::string_view(name) == "consumer";
      if (action.stage >= s.stages || (action.kind == ActionKind::U && !update_allowed) ||
          action.microbatch >= s.total_microbatches())
        fail(source, fmt::format("{}: the {} {} is not an action of the schedule", what, name,
                                 to_string(action)));
      if (device != s.placement[static_cast<std::size_t>(action.stage)])
        fail(source,
             fmt::format("{}: the {} {} runs on device {}, not {}", what, name, to_string(action),
                         s.placement[static_cast<std::size_t>(action.stage)], device));
    }
    slice.kind = slice.consumer.kind == ActionKind::U   ? DependencyKind::twin_gradients
                 : slice.producer.kind == ActionKind::F ? DependencyKind::activation
                                                        : DependencyKind::gradient;
    slice.src_device = static_cast<std::int32_t>(src);
    slice.dst_device = static_cast<std::int32_t>(dst);
    slice.bytes = r.integer(m[4], what + ".bytes");
    if (slice.bytes < 0) fail(source, fmt::format("{}.bytes is negative ({})", what, slice.bytes));
    slice.send_start_s = r.seconds(m[5], what + ".send_start_s");
    slice.send_end_s = r.seconds(m[6], what + ".send_end_s");
    slice.recv_start_s = r.seconds(m[7], what + ".recv_start_s");
    slice.recv_end_s = r.seconds(m[8], what + ".recv_end_s");
    if (slice.send_end_s < slice.send_start_s || slice.recv_end_s < slice.recv_start_s)
      fail(source,
           fmt::format("{} is not ordered (send {}..{} s, receive {}..{} s)", what,
                       slice.send_start_s, slice.send_end_s, slice.recv_start_s, slice.recv_end_s));
    out.messages.push_back(slice);
  }
  return out;
}

}  // namespace paci
