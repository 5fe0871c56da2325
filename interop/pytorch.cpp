// pytorch_refusal, pytorch_csv.
#include "interop/pytorch.hpp"

#include <fmt/format.h>

#include "base/errors.hpp"
#include "schedules/formats.hpp"
#include "schedules/generators.hpp"

namespace paci::interop {

std::string pytorch_refusal(const plan::PlanConfig& c) {
  if (plan::asynchronous_kind(c.kind))
    return fmt::format(
        "PyTorch's pipelining cannot run a {} schedule: it keeps one version of each stage's "
        "weights and steps the optimizer after the whole schedule, so the schedule would run as "
        "synchronous gradient accumulation, not as planned",
        c.kind);
  if (c.copies() > 1) return pytorch_two_copies_refusal(c.kind);
  if (c.kind == "1f1b" && c.microbatches() < c.pp)
    return fmt::format(
        "PyTorch's Schedule1F1B refuses {} micro-batches on {} stages (it needs at least one per "
        "stage); with so few, GPipe is the same schedule: --kind gpipe",
        c.microbatches(), c.pp);
  // Pipeline sends (docs/costmodel.md, "Pipeline messages"): GPipe and the multi-stage runtime
  // (which runs every CSV) wait only on what the next pass receives; 1F1B either way (Schedule1F1B
  // waits on its steady phase's fused send and receive, the CSV runtime does not).
  if (c.pp > 1 && !c.p2p_overlapped() && c.kind != "1f1b")
    return fmt::format(
        "PyTorch's pipelining overlaps its {} schedule's pipeline sends: plan --overlap-p2p on",
        c.kind);
  return "";
}

std::string pytorch_csv(const plan::PlanConfig& c) {
  if (const std::string why = pytorch_refusal(c); !why.empty()) throw InputError(why);
  const Schedule s = generate_schedule(c.kind, c.pp, static_cast<std::int32_t>(c.microbatches()), 1,
                                       c.kind == "interleaved" ? c.chunks : 0);
  return write_schedule(s, ScheduleFormat::pytorch);
}

}  // namespace paci::interop
