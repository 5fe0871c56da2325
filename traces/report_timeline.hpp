// The measured report's "timeline" key: every action's start, end and the moment its device was
// free again, and every cross-device message's send and receive times — what `paci simulate
// --replay` needs to replay a measured run. Written by `paci train --report`, read back here with
// every value checked against the schedule it claims to be a run of.
#pragma once

#include <string_view>
#include <vector>

#include "schedules/ir.hpp"
#include "traces/report.hpp"
#include "traces/timeline.hpp"

namespace paci {

// {"action_fields": [...], "actions": [[[start, end, free], ...] per device],
//  "message_fields": [...], "messages": [["0F3", "1F3", src, dst, bytes, send_start, send_end,
//  recv_start, recv_end], ...]}
ordered_json timeline_json(const ActionTimes& times, const std::vector<MessageSlice>& messages);

struct MeasuredTimeline {
  ActionTimes times;                   // aligned with the schedule's device lists
  std::vector<MessageSlice> messages;  // in the report's order
};

// Reads report["timeline"] of a measured report (already parsed) as a run of `schedule`: the
// report's schedule summary must match it (kind, stages, devices, micro-batches, steps, actions),
// and so must the versions every F and B read (they follow from each device's order),
// every device's action count must equal its list's, times must be finite with
// start <= end, and every message must name actions of the schedule on the devices it claims.
// Throws InputError starting with `source` and naming the offending entry.
MeasuredTimeline read_measured_timeline(const nlohmann::json& report, const Schedule& schedule,
                                        std::string_view source);

}  // namespace paci
