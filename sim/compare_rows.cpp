// simulate_row and the CSV/grid helpers behind compare and sweep.
#include "sim/compare_rows.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <charconv>
#include <cmath>

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

}  // namespace paci
