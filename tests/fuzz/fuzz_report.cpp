// Fuzz target: a measured report read back by `paci simulate --replay REPORT`: parsed, its timeline
// read as a run of a schedule (read_measured_timeline), turned into replay inputs, replayed by the
// simulator and compared with the measured times, as cmd_simulate.cpp does. The schedule is the
// one the seeds were measured on (tests/fuzz/make_seeds.sh): the report's kind among those, at
// P=2, M=2, N=1.
#include <array>
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "schedules/formats.hpp"
#include "schedules/generators.hpp"
#include "sim/cost_model.hpp"
#include "sim/engine.hpp"
#include "sim/replay.hpp"
#include "tests/fuzz/fuzz.hpp"
#include "traces/metrics.hpp"
#include "traces/report_timeline.hpp"

namespace {

// The schedule the report claims to be a run of, when it is one of the seeds' kinds.
std::string seed_kind(const nlohmann::json& report) {
  static const std::array<std::string, 4> kinds{"1f1b", "paci", "pipedream", "zb-h1"};
  if (report.is_object() && report.contains("schedule") && report["schedule"].is_object() &&
      report["schedule"].contains("kind") && report["schedule"]["kind"].is_string())
    for (const std::string& kind : kinds)
      if (report["schedule"]["kind"] == kind) return kind;
  return kinds[0];
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace paci;
  const std::string_view text = fuzz::bytes(data, size);
  nlohmann::json report;
  if (!fuzz::accepts([&] {
        try {
          report = nlohmann::json::parse(text);
        } catch (const nlohmann::json::exception& e) {
          throw_json_error(text, "fuzz", e);
        }
      }))
    return 0;
  const Schedule schedule = generate_schedule(seed_kind(report), 2, 2, 1);
  MeasuredTimeline measured;
  ReplayInputs replay;
  if (!fuzz::accepts([&] {
        measured = read_measured_timeline(report, schedule, "fuzz");
        replay = replay_inputs(schedule, measured, "fuzz");
      }))
    return 0;
  // An accepted report replays: nothing below may throw.
  const CostModel costs = uniform_cost_model(schedule.stages, {});
  SimOptions options;
  options.replay = &replay;
  const SimResult result = simulate(schedule, costs, options);
  const double makespan = timing_metrics(schedule, measured.times).makespan_s;
  compare_replay(schedule, measured, replay, result.times, 0.01 * makespan);
  return 0;
}
