// walk: a launch's configuration to the best plan, one knob at a time.
#include "plan/search/compare.hpp"

#include <fmt/format.h>

#include <optional>

#include "base/errors.hpp"
#include "plan/report/report.hpp"
#include "plan/search/search.hpp"

namespace paci::plan {

namespace {

double gib(double bytes) {
  return bytes / (1024.0 * 1024 * 1024);
}

const char* on_off(bool on) {
  return on ? "on" : "off";
}

// One knob: whether two configurations differ in it, what the change is called, and applying it.
struct Knob {
  std::function<bool(const PlanConfig&, const PlanConfig&)> differs;
  std::function<std::string(const PlanConfig&, const PlanConfig&)> name;
  std::function<void(PlanConfig&, const PlanConfig&)> apply;
};

template <typename Field>
Knob field_knob(const char* label, Field field) {
  return {[=](const PlanConfig& a, const PlanConfig& b) { return a.*field != b.*field; },
          [=](const PlanConfig& a, const PlanConfig& b) {
            return fmt::format("{} {} -> {}", label, a.*field, b.*field);
          },
          [=](PlanConfig& a, const PlanConfig& b) { a.*field = b.*field; }};
}

Knob switch_knob(const char* label, bool PlanConfig::*field) {
  return {[=](const PlanConfig& a, const PlanConfig& b) { return a.*field != b.*field; },
          [=](const PlanConfig&, const PlanConfig& b) {
            return fmt::format("{} {}", label, on_off(b.*field));
          },
          [=](PlanConfig& a, const PlanConfig& b) { a.*field = b.*field; }};
}

std::vector<Knob> knobs() {
  std::vector<Knob> k = {
      field_knob("tensor parallel", &PlanConfig::tp),
      field_knob("context parallel", &PlanConfig::cp),
      switch_knob("context parallel all-gather", &PlanConfig::cp_all_gather),
      field_knob("pipeline stages", &PlanConfig::pp),
      {[](const PlanConfig& a, const PlanConfig& b) {
         return a.kind != b.kind || a.chunks != b.chunks;
       },
       [](const PlanConfig& a, const PlanConfig& b) {
         const auto named = [](const PlanConfig& c) {
           return c.kind == "interleaved" ? fmt::format("interleaved v={}", c.chunks) : c.kind;
         };
         return fmt::format("schedule {} -> {}", named(a), named(b));
       },
       [](PlanConfig& a, const PlanConfig& b) {
         a.kind = b.kind;
         a.chunks = b.chunks;
       }},
      field_knob("micro-batch", &PlanConfig::microbatch_size),
      {[](const PlanConfig& a, const PlanConfig& b) { return a.recompute != b.recompute; },
       [](const PlanConfig& a, const PlanConfig& b) {
         return fmt::format("recompute {} -> {}", to_string(a.recompute), to_string(b.recompute));
       },
       [](PlanConfig& a, const PlanConfig& b) { a.recompute = b.recompute; }},
      switch_knob("sequence parallelism", &PlanConfig::sequence_parallel),
      switch_knob("TP communication overlap", &PlanConfig::tp_comm_overlap),
      // The ZeRO stage with HSDP's group (a group needs a stage to shard).
      {[](const PlanConfig& a, const PlanConfig& b) {
         return a.zero != b.zero || a.shard_group != b.shard_group;
       },
       [](const PlanConfig& a, const PlanConfig& b) {
         const auto named = [](const PlanConfig& c) {
           return c.shard_group > 0 ? fmt::format("{} over groups of {}", c.zero, c.shard_group)
                                    : fmt::format("{}", c.zero);
         };
         return fmt::format("ZeRO {} -> {}", named(a), named(b));
       },
       [](PlanConfig& a, const PlanConfig& b) {
         a.zero = b.zero;
         a.shard_group = b.shard_group;
       }},
      switch_knob("overlapped gradient reduction", &PlanConfig::overlap_grad_reduce),
      // The pipeline sends as they run, given or the kind's runtime's.
      {[](const PlanConfig& a, const PlanConfig& b) {
         return a.pp > 1 && b.pp > 1 && a.p2p_overlapped() != b.p2p_overlapped();
       },
       [](const PlanConfig&, const PlanConfig& b) {
         return fmt::format("pipeline sends {}", b.p2p_overlapped() ? "overlapped" : "waited on");
       },
       [](PlanConfig& a, const PlanConfig& b) { a.overlap_p2p = b.p2p_overlapped(); }},
      field_knob("offloaded layers", &PlanConfig::offload_layers),
      field_knob("expert parallelism", &PlanConfig::ep),
  };
  return k;
}

bool same_shape(const PlanConfig& a, const PlanConfig& b) {
  return a.pp == b.pp && a.chunks == b.chunks && a.kind == b.kind;
}

// The configuration after a change from `was`: the pipeline's shape unchanged, its partition too
// (a change of the partition is a step of its own); a new shape takes the end's partition when it
// is the end's shape, else its best one.
PlanConfig shaped(PlanConfig c, const PlanConfig& was, const PlanConfig& to) {
  // An HSDP group that no longer divides the replicas (or has no ZeRO stage) gives way to all of
  // them; the ZeRO knob sets the end's.
  const std::int64_t replicas = c.dp() * c.cp;
  if (c.shard_group > 0 &&
      (c.zero == 0 || replicas % c.shard_group != 0 || c.shard_group == replicas))
    c.shard_group = 0;
  // Activation offloading where Megatron-LM cannot run it (p > 1, recomputation) gives way; the
  // offloading knob sets the end's.
  if (c.offload_layers > 0 && (c.pp != 1 || c.recompute != Recompute::none)) c.offload_layers = 0;
  if (same_shape(c, was))
    c.partition = was.partition;
  else if (same_shape(c, to))
    c.partition = to.partition;
  else
    c.partition.clear();
  return c;
}

std::optional<PlanResult> tried(const PlanConfig& c, double limit,
                                const std::function<std::string(const PlanConfig&)>& runnable) {
  try {
    check_config(c);  // a step of the walk may be no configuration at all (d = 0)
    if (runnable && !runnable(c).empty()) return std::nullopt;
    SimResult sim;
    return evaluate_best_partition(c, limit, {}, sim);
  } catch (const InputError&) {
    return std::nullopt;
  }
}

bool same(const PlanConfig& a, const PlanConfig& b) {
  for (const Knob& k : knobs())
    if (k.differs(a, b)) return false;
  return a.partition == b.partition || (a.partition.empty() && b.partition == default_partition(b));
}

}  // namespace

std::vector<GapStep> walk(const PlanResult& from, const PlanResult& to, double limit,
                          const std::function<std::string(const PlanConfig&)>& runnable) {
  std::vector<GapStep> steps;
  PlanConfig at = from.config;
  const PlanConfig& end = to.config;
  const std::vector<Knob> all = knobs();
  for (;;) {
    std::vector<const Knob*> left;
    for (const Knob& k : all)
      if (k.differs(at, end)) left.push_back(&k);
    if (left.empty()) break;
    std::optional<GapStep> best;
    for (const Knob* k : left) {
      PlanConfig next = at;
      k->apply(next, end);
      next = shaped(next, at, end);
      const auto r = tried(next, limit, runnable);
      if (!r) continue;
      // Fitting beats not fitting, then the faster.
      if (!best || (r->fits && !best->result.fits) ||
          (r->fits == best->result.fits && r->step_s < best->result.step_s))
        best = GapStep{k->name(at, end), *r};
    }
    if (!best) {  // no single change is valid: the rest together
      std::string names;
      for (const Knob* k : left) names += (names.empty() ? "" : ", ") + k->name(at, end);
      at = end;
      steps.push_back({names, to});
      return steps;
    }
    at = best->result.config;
    steps.push_back(std::move(*best));
  }
  if (!same(at, end)) {
    steps.push_back({"partition " + fmt::format("{}", fmt::join(at.partition, ",")) + " -> " +
                         fmt::format("{}", fmt::join(end.partition, ",")),
                     to});
  } else if (!steps.empty()) {
    steps.back().result = to;  // the same configuration: the search's own numbers
  }
  return steps;
}

std::string gap_text(const PlanResult& from, const PlanResult& to,
                     const std::vector<GapStep>& steps) {
  std::string out;
  if (steps.empty()) {
    out += "paci finds nothing faster: the launch is the best plan it found.\n";
    return out;
  }
  const double ratio = to.step_s > 0 ? from.step_s / to.step_s : 0;
  if (!from.fits)
    out += fmt::format("the launch does not fit ({:.1f} GiB over); the best plan that fits:\n",
                       gib(static_cast<double>(from.peak_memory_bytes) - from.memory_limit_bytes));
  else if (ratio > 1)
    out += fmt::format(
        "the best plan found is {:.2f}x faster ({:.3f} s -> {:.3f} s a step, MFU "
        "{:.1f}% -> {:.1f}%):\n",
        ratio, from.step_s, to.step_s, 100 * from.mfu, 100 * to.mfu);
  else
    out += fmt::format(
        "the launch is {:.3f} s a step and the best plan found {:.3f} s (it fits "
        "where the launch does not, or ties):\n",
        from.step_s, to.step_s);
  const std::string shown = plan_text(to);  // its configuration, step and memory lines
  std::size_t end = 0;
  for (int line = 0; line < 3 && end != std::string::npos; ++line) end = shown.find('\n', end + 1);
  out += shown.substr(0, end == std::string::npos ? shown.size() : end + 1);
  out += "why, one change at a time (the fastest valid change first):\n";
  double step = from.step_s;
  double peak = static_cast<double>(from.peak_memory_bytes);
  for (const GapStep& s : steps) {
    out += fmt::format(
        "  {:<44} {:8.3f} s -> {:8.3f} s ({:+6.1f}%)  peak {:5.1f} -> {:5.1f} GiB{}\n", s.change,
        step, s.result.step_s, step > 0 ? 100 * (s.result.step_s - step) / step : 0.0, gib(peak),
        gib(static_cast<double>(s.result.peak_memory_bytes)),
        s.result.fits ? "" : " (does not fit)");
    step = s.result.step_s;
    peak = static_cast<double>(s.result.peak_memory_bytes);
  }
  return out;
}

ordered_json walk_json(const std::vector<GapStep>& steps) {
  ordered_json out = ordered_json::array();
  for (const GapStep& s : steps)
    out.push_back({{"change", s.change},
                   {"step_s", s.result.step_s},
                   {"peak_memory_bytes", s.result.peak_memory_bytes},
                   {"fits", s.result.fits},
                   {"mfu", s.result.mfu},
                   {"bubble_ratio", s.result.bubble_ratio}});
  return out;
}

}  // namespace paci::plan
