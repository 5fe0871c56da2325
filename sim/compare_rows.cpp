// simulate_row and the CSV/grid helpers behind compare and sweep.
#include "sim/compare_rows.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <charconv>
#include <cmath>
#include <optional>
#include <tuple>

#include "base/errors.hpp"
#include "schedules/generators.hpp"
#include "sim/engine.hpp"

namespace paci {

CompareRow simulate_row(const std::string& kind, std::int32_t P, std::int32_t M, std::int32_t N,
                        const CostModel& costs, std::int32_t chunks) {
  const Schedule s = generate_schedule(kind, P, M, N, chunks);
  SimOptions options;
  options.record_timeline = false;
  const SimResult result = simulate(s, costs, options);
  const RunSummary run = run_summary(s, costs, result);
  CompareRow row;
  row.kind = kind;
  row.stages = P;
  row.microbatches = M;
  row.steps = N;
  row.makespan_s = run.timing.makespan_s;
  const double mb = static_cast<double>(s.total_microbatches());
  row.microbatches_per_s = row.makespan_s > 0 ? mb / row.makespan_s : 0.0;
  row.tokens_per_s = row.microbatches_per_s * static_cast<double>(costs.tokens_per_microbatch);
  row.bubble_ratio = run.timing.bubble_ratio;
  row.steady_bubble_ratio = run.timing.steady_bubble_ratio;
  row.zb_bubble_ratio = run.timing.zb_bubble_ratio;
  row.peak_memory_bytes = *std::max_element(result.device_peak_memory_bytes.begin(),
                                            result.device_peak_memory_bytes.end());
  for (const auto& st : run.observed.stages) {
    row.max_staleness = std::max(row.max_staleness, st.max_staleness);
    row.max_update_delay = std::max(row.max_update_delay, st.max_update_delay);
  }
  return row;
}

std::vector<std::string> parse_kinds(const std::string& text) {
  if (text.empty() || text == "all") return generator_kinds();
  std::vector<std::string> kinds;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    const std::string kind = text.substr(start, comma - start);
    const auto& known = generator_kinds();
    if (std::find(known.begin(), known.end(), kind) == known.end())
      throw UsageError(fmt::format("--kinds: unknown schedule kind '{}' (expected {})", kind,
                                   fmt::join(known, ", ")));
    kinds.push_back(kind);
    start = comma + 1;
  }
  return kinds;
}

namespace {

std::int32_t parse_int(std::string_view text, const std::string& flag) {
  std::int32_t value = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || ptr != text.data() + text.size() || value <= 0)
    throw UsageError(fmt::format("--{}: '{}' is not a positive integer", flag, text));
  return value;
}

}  // namespace

std::vector<std::int32_t> parse_grid(const std::string& text, const std::string& flag) {
  std::vector<std::int32_t> values;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    const std::string_view item(text.data() + start, comma - start);
    const std::size_t c1 = item.find(':');
    if (c1 == std::string_view::npos) {
      values.push_back(parse_int(item, flag));
    } else {
      const std::size_t c2 = item.find(':', c1 + 1);
      const std::int32_t a = parse_int(item.substr(0, c1), flag);
      const std::int32_t b = parse_int(
          item.substr(c1 + 1, c2 == std::string_view::npos ? item.npos : c2 - c1 - 1), flag);
      const std::int32_t step =
          c2 == std::string_view::npos ? 1 : parse_int(item.substr(c2 + 1), flag);
      if (b < a) throw UsageError(fmt::format("--{}: empty range '{}'", flag, item));
      if ((b - a) / step > 100000)
        throw UsageError(fmt::format("--{}: range '{}' too large", flag, item));
      for (std::int32_t v = a; v <= b; v += step) values.push_back(v);
    }
    start = comma + 1;
  }
  std::sort(values.begin(), values.end());
  values.erase(std::unique(values.begin(), values.end()), values.end());
  return values;
}

std::string csv_header() {
  return "kind,stages,microbatches,steps,makespan_s,microbatches_per_s,tokens_per_s,bubble_ratio,"
         "steady_bubble_ratio,peak_memory_bytes,max_staleness,max_update_delay,speedup_vs_1f1b\n";
}

std::string csv_row(const CompareRow& r) {
  const std::string steady =
      std::isfinite(r.steady_bubble_ratio) ? fmt::format("{:.9g}", r.steady_bubble_ratio) : "";
  return fmt::format("{},{},{},{},{:.9g},{:.9g},{:.9g},{:.9g},{},{},{},{},{:.9g}\n", r.kind,
                     r.stages, r.microbatches, r.steps, r.makespan_s, r.microbatches_per_s,
                     r.tokens_per_s, r.bubble_ratio, steady, r.peak_memory_bytes, r.max_staleness,
                     r.max_update_delay, r.speedup_vs_1f1b);
}

std::optional<CostModel> chunk_cost_model(const CostModel& costs, std::int32_t v) {
  const auto work = [](const StageCost& c) {
    return std::tie(c.forward_s, c.backward_s, c.input_grad_s, c.weight_grad_s, c.update_s,
                    c.forward_comm_s, c.backward_comm_s, c.pair_compute_slowdown,
                    c.activation_bytes, c.weight_bytes, c.gradient_bytes, c.optimizer_bytes);
  };
  for (const StageCost& c : costs.stages)
    if (work(c) != work(costs.stages.front())) return std::nullopt;
  CostModel out = costs;
  const std::size_t P = costs.stages.size();
  out.stages.clear();
  for (std::size_t k = 0; k < P * static_cast<std::size_t>(v); ++k) {
    StageCost c = costs.stages[k % P];
    for (double* t : {&c.forward_s, &c.backward_s, &c.input_grad_s, &c.weight_grad_s, &c.update_s,
                      &c.forward_comm_s, &c.backward_comm_s})
      *t /= v;
    for (std::int64_t* b :
         {&c.activation_bytes, &c.weight_bytes, &c.gradient_bytes, &c.optimizer_bytes,
          &c.weight_grad_stash_bytes, &c.input_grad_release_bytes, &c.workspace_bytes})
      *b /= v;
    c.activation_message_bytes = costs.stages.front().activation_message_bytes;
    c.gradient_message_bytes = costs.stages.back().gradient_message_bytes;
    out.stages.push_back(c);
  }
  out.stages.front().gradient_message_bytes = 0;   // the first stage sends no gradient
  out.stages.back().activation_message_bytes = 0;  // the last no activation
  return out;
}

CostModel two_copy_cost_model(const CostModel& one_copy) {
  CostModel out = one_copy;
  out.stages.insert(out.stages.end(), one_copy.stages.begin(), one_copy.stages.end());
  return out;
}

std::vector<CompareRow> compare_rows(const std::vector<std::string>& kinds, std::int32_t P,
                                     std::int32_t M, std::int32_t N, const CostModel& costs,
                                     std::vector<std::string>* skipped,
                                     const CostModel* chunk_costs) {
  const CompareRow baseline = simulate_row("1f1b", P, M, N, costs);
  std::vector<CompareRow> rows;
  for (const auto& kind : kinds) {
    if (kind == "2bw" && M < P) {
      if (skipped) skipped->push_back(fmt::format("2bw needs M >= P (M={}, P={})", M, P));
      continue;
    }
    std::optional<CostModel> chunks;
    if (kind == "interleaved") {
      if (M % P != 0) {
        if (skipped)
          skipped->push_back(fmt::format(
              "interleaved needs M to be a multiple of P (Megatron's constraint; M={}, P={})", M,
              P));
        continue;
      }
      chunks =
          chunk_costs ? std::optional(*chunk_costs) : chunk_cost_model(costs, kInterleavedChunks);
      if (!chunks) {
        if (skipped)
          skipped->push_back(fmt::format(
              "interleaved splits each device's layers into {} chunks, whose costs a cost model "
              "with unequal stages does not give (give them with --interleaved-cost, or use "
              "uniform costs)",
              kInterleavedChunks));
        continue;
      }
    }
    if (kind == "dualpipev" && M < 2 * P) {
      if (skipped)
        skipped->push_back(
            fmt::format("dualpipev needs M >= 2P (DualPipe's bound; M={}, P={})", M, P));
      continue;
    }
    if (kind == "dualpipe") {  // a stage of each of two copies per device
      if (P % 2 != 0 || M % 2 != 0 || M < 2 * P) {
        if (skipped)
          skipped->push_back(fmt::format(
              "dualpipe needs P even, M even and M >= 2P (DualPipe's asserts; M={}, P={})", M, P));
        continue;
      }
      chunks = two_copy_cost_model(costs);
    }
    if (v_shaped(kind)) {  // two half-stages per device, in a V
      if (chunk_costs && chunk_costs->stages.size() == 2 * static_cast<std::size_t>(P))
        chunks = *chunk_costs;
      else
        chunks = chunk_cost_model(costs, 2);
      if (!chunks) {
        if (skipped)
          skipped->push_back(fmt::format(
              "{} splits each device's layers into 2 model stages, whose costs a cost model "
              "with unequal stages does not give (give them with --interleaved-cost, 2P stages, "
              "or use uniform costs)",
              kind));
        continue;
      }
    }
    const std::int32_t v = chunks ? static_cast<std::int32_t>(chunks->stages.size()) / P : 1;
    CompareRow row =
        kind == "1f1b" ? baseline : simulate_row(kind, P, M, N, chunks ? *chunks : costs, v);
    row.speedup_vs_1f1b = row.makespan_s > 0 ? baseline.makespan_s / row.makespan_s : 0.0;
    rows.push_back(row);
  }
  return rows;
}

}  // namespace paci
