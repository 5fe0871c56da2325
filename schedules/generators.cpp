// The five generators: two flushed (GPipe, 1F1B) and three continuous 1F1B variants that differ in
// how often a stage steps its optimizer and which weights its backward reads.
#include "schedules/generators.hpp"

#include <fmt/format.h>
#include <algorithm>

namespace paci {

const std::vector<std::string>& generator_kinds() {
  static const std::vector<std::string> kinds = {"gpipe", "1f1b", "pipedream", "2bw", "paci"};
  return kinds;
}

namespace {

Action forward(std::int32_t stage, std::int64_t mb) {
  return {ActionKind::F, stage, static_cast<std::int32_t>(mb)};
}
Action backward(std::int32_t stage, std::int64_t mb) {
  return {ActionKind::B, stage, static_cast<std::int32_t>(mb)};
}
Action update(std::int32_t stage) {
  return {ActionKind::U, stage, -1};
}

// One flushed step of stage s over micro-batches [base, base+M).
void flushed_step(std::vector<Action>& out, std::int32_t P, std::int32_t s, std::int64_t base,
                  std::int32_t M, bool one_f_one_b) {
  const std::int32_t warmup = one_f_one_b ? std::min(P - 1 - s, M) : M;
  for (std::int32_t i = 0; i < warmup; ++i) out.push_back(forward(s, base + i));
  for (std::int32_t i = 0; i < M - warmup; ++i) {
    out.push_back(forward(s, base + warmup + i));
    out.push_back(backward(s, base + i));
  }
  for (std::int32_t i = M - warmup; i < M; ++i) out.push_back(backward(s, base + i));
  out.push_back(update(s));
}

// Continuous 1F1B over T micro-batches at stage s, with U after every `every`-th backward.
void continuous(std::vector<Action>& out, std::int32_t P, std::int32_t s, std::int64_t T,
                std::int32_t every) {
  const std::int64_t warmup = std::min<std::int64_t>(P - 1 - s, T);
  std::int64_t backwards = 0;
  auto do_backward = [&](std::int64_t mb) {
    out.push_back(backward(s, mb));
    if (++backwards % every == 0) out.push_back(update(s));
  };
  for (std::int64_t i = 0; i < warmup; ++i) out.push_back(forward(s, i));
  for (std::int64_t i = 0; i < T - warmup; ++i) {
    out.push_back(forward(s, warmup + i));
    do_backward(i);
  }
  for (std::int64_t i = T - warmup; i < T; ++i) do_backward(i);
}

}  // namespace

Schedule generate_schedule(std::string_view kind, std::int32_t P, std::int32_t M, std::int32_t N) {
  const auto& kinds = generator_kinds();
  if (std::find(kinds.begin(), kinds.end(), kind) == kinds.end())
    throw InputError(fmt::format("unknown schedule kind '{}' (expected one of: {})", kind,
                                 fmt::join(kinds, ", ")));
  if (P <= 0) throw InputError(fmt::format("--stages must be positive, got {}", P));
  if (M <= 0) throw InputError(fmt::format("--microbatches must be positive, got {}", M));
  if (N <= 0) throw InputError(fmt::format("--steps must be positive, got {}", N));
  const std::int64_t total = static_cast<std::int64_t>(M) * N;
  // About 12 bytes an action: past 2^27 actions (1.5 GiB) a schedule is a mistake, not a plan.
  constexpr std::int64_t kMaxActions = std::int64_t{1} << 27;
  const std::int64_t actions = static_cast<std::int64_t>(P) * (2 * total + total);
  if (total > INT32_MAX / 4 || actions > kMaxActions)
    throw InputError(
        fmt::format("P={} stages x {} micro-batches is about {} actions, more than the "
                    "{} paci generates",
                    P, total, actions, kMaxActions));
  if (kind == "2bw" && M < P)
    throw InputError(fmt::format(
        "2bw needs at least as many micro-batches per step as stages (M >= P), got M={} P={}", M,
        P));

  Schedule s;
  s.kind = std::string(kind);
  s.stages = P;
  s.microbatches = M;
  s.steps = N;
  s.placement.resize(static_cast<std::size_t>(P));
  s.devices.resize(static_cast<std::size_t>(P));
  if (kind == "pipedream") {
    s.microbatches = 1;
    s.steps = static_cast<std::int32_t>(total);
    s.weight_policy = WeightPolicy::stash;
  } else if (kind == "2bw") {
    s.weight_policy = WeightPolicy::double_buffer;
  }
  for (std::int32_t stage = 0; stage < P; ++stage) {
    s.placement[static_cast<std::size_t>(stage)] = stage;
    auto& list = s.devices[static_cast<std::size_t>(stage)];
    list.reserve(static_cast<std::size_t>(2 * total + s.steps));
    if (kind == "gpipe" || kind == "1f1b") {
      for (std::int32_t step = 0; step < N; ++step)
        flushed_step(list, P, stage, static_cast<std::int64_t>(step) * M, M, kind == "1f1b");
    } else {
      continuous(list, P, stage, total, s.microbatches);
    }
  }
  return s;
}

}  // namespace paci
