// search(): enumerate, bound, simulate what the bound cannot rule out, in parallel batches taken
// in the order of the bound (the bounds: plan/search/bounds.cpp; the partitions:
// plan/search/partition.cpp).
#include "plan/search/search.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <thread>
#include <tuple>

#include "plan/search/bounds.hpp"
#include "plan/search/partition.hpp"
#include "schedules/generators.hpp"

namespace paci::plan {

const std::vector<std::string>& all_kinds() {
  // The mirrored zb-v, dualpipev and dualpipe are searched by default for mixtures of experts
  // only (below): their configurations are often among the fastest, so the bound prunes few of
  // them, and with zb-v the whole default space of Llama 3 405B on 16,384 H100s took 3.2 s instead
  // of 1.8 (docs/results/bench_plan.md).
  static const std::vector<std::string> kinds = {"gpipe", "1f1b",  "pipedream", "2bw",
                                                 "paci",  "zb-h1", "zb-h2",     "interleaved"};
  return kinds;
}

const std::vector<std::string>& default_kinds(const ModelSpec& model) {
  // A mixture of experts' all-to-alls are what DualPipe's overlapped pairs hide (DeepSeek-V3's
  // reason for it): searched, DualPipe's two copies of the weights too, not left to be listed
  // (docs/results/moe.md weighs them against the eight kinds).
  static const std::vector<std::string> with_v = [] {
    std::vector<std::string> k = all_kinds();
    k.insert(k.end(), {"zb-v", "dualpipev", "dualpipe"});
    return k;
  }();
  return model.moe() ? with_v : all_kinds();
}

namespace {

template <typename T>
std::vector<T> divisors(T n, T at_most) {
  std::vector<T> out;
  for (T k = 1; k <= n / k; ++k)
    if (n % k == 0) {
      if (k <= at_most) out.push_back(k);
      if (n / k != k && n / k <= at_most) out.push_back(n / k);
    }
  std::sort(out.begin(), out.end());
  return out;
}

using ScheduleKey = std::tuple<std::string, std::int32_t, std::int64_t, std::int32_t, std::int32_t>;

// A configuration with its partition, the bound on its step and on its peak memory.
struct Candidate {
  PlanConfig config;
  const ScheduleInfo* schedule = nullptr;
  double step_bound_s = 0;
  std::int64_t memory_bound_bytes = 0, static_bytes = 0;
  std::int32_t staleness = 0;
  std::string key;  // orders equal plans the same way every time
};

std::string config_key(const PlanConfig& c) {
  std::string partition;
  for (const std::int32_t l : c.partition) partition += fmt::format("{},", l);
  return fmt::format("{}|t{}|c{}{}|p{}|v{}|b{}|{}|sp{}|o{}{}|z{}|h{}|g{}|f{}|e{}|{}", c.kind, c.tp,
                     c.cp, c.cp_all_gather ? "ag" : "", c.pp, c.chunks, c.microbatch_size,
                     to_string(c.recompute), c.sequence_parallel, c.tp_comm_overlap,
                     c.p2p_overlapped() ? "" : "w", c.zero, c.shard_group, c.overlap_grad_reduce,
                     c.offload_layers, c.ep, partition);
}

bool better(const PlanResult& a, const std::string& ka, const PlanResult& b,
            const std::string& kb) {
  if (a.step_s != b.step_s) return a.step_s < b.step_s;
  return ka < kb;
}

// Pareto order over (step, peak memory, staleness): whether x dominates y (no worse in all, better
// in one).
bool dominates(double xs, std::int64_t xm, std::int32_t xt, double ys, std::int64_t ym,
               std::int32_t yt) {
  return xs <= ys && xm <= ym && xt <= yt && (xs < ys || xm < ym || xt < yt);
}

// What the search keeps: the top list and the frontier, each plan with its key.
struct Kept {
  std::vector<std::pair<PlanResult, std::string>> top, frontier;
  std::size_t limit = 10;

  void add(const PlanResult& p, const std::string& key) {
    top.emplace_back(p, key);
    std::sort(top.begin(), top.end(), [](const auto& a, const auto& b) {
      return better(a.first, a.second, b.first, b.second);
    });
    if (top.size() > limit) top.pop_back();
    for (const auto& [q, qk] : frontier) {
      if (dominates(q.step_s, q.peak_memory_bytes, q.max_staleness, p.step_s, p.peak_memory_bytes,
                    p.max_staleness))
        return;
      if (q.step_s == p.step_s && q.peak_memory_bytes == p.peak_memory_bytes &&
          q.max_staleness == p.max_staleness && qk < key)
        return;
    }
    std::erase_if(frontier, [&](const auto& e) {
      const PlanResult& q = e.first;
      return dominates(p.step_s, p.peak_memory_bytes, p.max_staleness, q.step_s,
                       q.peak_memory_bytes, q.max_staleness) ||
             (q.step_s == p.step_s && q.peak_memory_bytes == p.peak_memory_bytes &&
              q.max_staleness == p.max_staleness);
    });
    frontier.emplace_back(p, key);
  }

  // The top list and the frontier, each fastest first, into `result`.
  void move_into(SearchResult& result) {
    result.plans.clear();
    result.frontier.clear();
    for (auto& [p, key] : top) result.plans.push_back(std::move(p));
    std::sort(frontier.begin(), frontier.end(), [](const auto& a, const auto& b) {
      return better(a.first, a.second, b.first, b.second);
    });
    for (auto& [p, key] : frontier) result.frontier.push_back(std::move(p));
  }

  // Whether a candidate with these bounds can neither enter the top list nor the frontier, nor
  // be the best of its class (synchronous or asynchronous) so far in `result`.
  // The bound is a sum of the same durations the simulation adds in another order, so it may
  // exceed a plan's simulated step by a rounding error: it rules out only past that margin (a plan
  // tied with a kept one must be simulated, the tie being broken by configuration).
  bool rules_out(const Candidate& c, const SearchResult& result) const {
    const double step = c.step_bound_s * (1 - 1e-9);
    if (top.size() < limit || !(step > top.back().first.step_s)) return false;
    const auto& best =
        asynchronous_kind(c.config.kind) ? result.best_asynchronous : result.best_synchronous;
    if (!best || !(step > best->step_s)) return false;
    return std::any_of(frontier.begin(), frontier.end(), [&](const auto& e) {
      const PlanResult& q = e.first;
      return dominates(q.step_s, q.peak_memory_bytes, q.max_staleness, step, c.memory_bound_bytes,
                       c.staleness);
    });
  }
};

}  // namespace

void rank_plans(const std::vector<PlanResult>& plans, std::size_t top, SearchResult& result) {
  Kept kept;
  kept.limit = std::max<std::size_t>(top, 1);
  for (const PlanResult& p : plans) {
    const std::string key = config_key(p.config);
    kept.add(p, key);
    auto& best =
        asynchronous_kind(p.config.kind) ? result.best_asynchronous : result.best_synchronous;
    if (!best || better(p, key, *best, config_key(best->config))) best = p;
  }
  kept.move_into(result);
}

SearchResult search(const SearchSpace& space, const SearchOptions& options) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  check_model(space.model);
  check_cluster(space.cluster, space.cluster.name);
  check_precision(space.cluster, space.precision);
  if (space.gpus < 1)
    throw InputError(fmt::format("--gpus must be at least 1, got {}", space.gpus));
  if (space.global_batch < 1)
    throw InputError(fmt::format("--global-batch must be at least 1, got {}", space.global_batch));
  // Every knob but the switches given: that configuration's own error (a degree that does not
  // divide, a batch, a partition) is the answer, whatever the switches.
  if (const std::optional<PlanConfig> c = fixed_but_switches(space)) check_config(*c);
  SearchResult result;
  result.memory_limit_bytes = options.memory_limit_bytes > 0
                                  ? options.memory_limit_bytes
                                  : space.cluster.memory_bytes - kFrameworkReserveBytes;
  if (!(result.memory_limit_bytes > 0))
    throw InputError(fmt::format("the memory limit must be positive, got {:.3g} bytes",
                                 result.memory_limit_bytes));
  const double limit = result.memory_limit_bytes;
  const ModelSpec& m = space.model;
  const auto L = static_cast<std::int32_t>(m.layers);

  // The knobs' ranges.
  std::vector<std::int32_t> tps = space.tp;
  if (tps.empty())
    for (const std::int32_t t :
         divisors<std::int32_t>(space.cluster.gpus_per_node, space.cluster.gpus_per_node))
      if (m.heads % t == 0 && m.d_model % t == 0 &&
          (m.moe() ? m.shared_expert_ffn % t == 0 : m.ffn % t == 0) &&
          (m.kv_heads % t == 0 || t % m.kv_heads == 0) && space.gpus % t == 0)
        tps.push_back(t);
  const std::vector<std::string>& kinds = space.kinds.empty() ? default_kinds(m) : space.kinds;
  // One pipeline stage: no kind runs less work than 1F1B nor holds less memory (GPipe and 2BW
  // hold more, PipeDream also updates after every micro-batch), so the whole range tries 1F1B.
  const std::vector<std::string> one_stage{"1f1b"};
  const std::vector<Recompute> recomputes =
      space.recompute.empty()
          ? std::vector<Recompute>{Recompute::none, Recompute::selective, Recompute::full}
          : space.recompute;

  std::map<ScheduleKey, ScheduleInfo> schedules;
  const auto schedule_for = [&](const PlanConfig& c) -> const ScheduleInfo& {
    const ScheduleKey key{c.kind, c.pp, c.microbatches(), c.chunks, simulated_steps(c)};
    auto [it, inserted] = schedules.try_emplace(key);
    if (!inserted) return it->second;
    return it->second = schedule_info(c);
  };

  // Enumerate: every combination, its validity, its partitions and their bounds.
  std::vector<Candidate> candidates;
  const auto invalid = [&](const std::string& why) {
    ++result.configurations;
    ++result.rejected.invalid;
    if (result.rejected.invalid_example.empty()) result.rejected.invalid_example = why;
  };
  std::optional<Candidate> smallest;
  for (const std::int32_t t : tps) {
    // Context parallelism: the c that keep t·c GPUs in the NVLink domain and split the sequence
    // into 2c chunks (FlashAttention's only).
    std::vector<std::int32_t> cps = space.cp;
    if (cps.empty()) {
      cps.push_back(1);
      if (space.flash_attention && t >= 1)
        for (std::int32_t c = 2; static_cast<std::int64_t>(t) * c <= space.cluster.gpus_per_node;
             ++c)
          if (space.cluster.gpus_per_node % (static_cast<std::int64_t>(t) * c) == 0 &&
              m.seq_len % (2 * c) == 0 && space.gpus % (static_cast<std::int64_t>(t) * c) == 0)
            cps.push_back(c);
    }
    for (const std::int32_t cp : cps) {
      const std::int64_t tc = static_cast<std::int64_t>(t) * std::max(cp, 1);
      std::vector<std::int32_t> pps = space.pp;
      if (pps.empty()) {
        if (space.gpus % tc != 0) {
          invalid(
              fmt::format("--gpus {} is not divisible by --tp {} x --cp {}", space.gpus, t, cp));
          continue;
        }
        pps = divisors<std::int32_t>(static_cast<std::int32_t>(space.gpus / tc), L);
      }
      for (const std::int32_t p : pps) {
        PlanConfig base = unsearched(space);
        base.tp = t;
        base.cp = cp;
        base.pp = p;
        if (t < 1 || p < 1 || cp < 1 || space.gpus % (tc * p) != 0) {
          invalid(fmt::format("--gpus {} is not divisible by --tp {} x --cp {} x --pp {}",
                              space.gpus, t, cp, p));
          continue;
        }
        const std::int64_t d = base.dp();
        std::vector<std::int64_t> bs = space.microbatch_size;
        if (bs.empty() && space.global_batch % d == 0)
          bs = divisors<std::int64_t>(space.global_batch / d, space.global_batch / d);
        if (bs.empty()) {
          invalid(
              fmt::format("--global-batch {} is not divisible by d = {}", space.global_batch, d));
          continue;
        }
        for (const std::int64_t b : bs) {
          // Stage costs by (recompute, SP, TP overlap, ZeRO, gradient overlap, all-gather CP):
          // the same for every non-interleaved kind at this (t, c, p, b).
          std::map<std::tuple<Recompute, bool, bool, std::int32_t, std::int64_t, bool, bool,
                              std::int32_t, std::int32_t>,
                   StageCostTable>
              tables;
          // Partitions by (stage-cost table, PipeDream's per-micro-batch updates); the limited
          // one by the micro-batches each stage holds in flight.
          struct Splits {
            PartitionTables tables;
            std::vector<std::int32_t> unlimited;
            std::map<std::vector<std::int32_t>, std::vector<std::int32_t>> limited;
          };
          std::map<std::pair<const StageCostTable*, bool>, Splits> splits;
          for (const std::string& kind : p == 1 && space.kinds.empty() ? one_stage : kinds) {
            std::vector<std::int32_t> vs{1};
            if (mirrored_kind(kind)) {
              vs = {2};  // two stages on each device (the V, or one of each of DualPipe's copies)
              const bool two_copies = kind == "dualpipe";
              if ((two_copies ? p : 2 * p) > L) {
                invalid(fmt::format("{} at p = {}: {} layers are too few for its {} model stages",
                                    kind, p, L, two_copies ? "p" : "2p"));
                continue;
              }
              if (two_copies && p % 2 != 0) {  // once, not once per other knob
                invalid(fmt::format("dualpipe at p = {}: its two copies need an even p", p));
                continue;
              }
            } else if (kind == "interleaved") {
              vs = space.chunks;
              // One device: interleaving changes nothing. Else the v whose p·v stages split the
              // layers evenly, or evenly but for one layer fewer on the first and the last stage
              // (Llama 3's and NeMo's 405B: 126 layers on 64 stages).
              if (vs.empty() && p > 1)
                for (std::int32_t v = 2; p * v <= L; ++v)
                  if (L % (p * v) == 0 || ((L + 2) % (p * v) == 0 && (L + 2) / (p * v) >= 2))
                    vs.push_back(v);
              if (vs.empty()) {
                invalid(
                    fmt::format("interleaved at p = {}: no chunk count v >= 2 with p x v "
                                "dividing the {} layers (or them + 2)",
                                p, L));
                continue;
              }
            }
            // A switch that changes nothing here (sequence parallelism at t = 1, its overlap
            // without it, ZeRO and the gradient overlap at d = 1, the overlap with ZeRO 3, which
            // always overlaps) is off, counted once, whatever was asked.
            const std::vector<bool> off{false};
            const std::vector<std::int32_t> unsharded{0};
            const std::vector<std::int64_t> whole{0};
            // The weights' replicas: the data-parallel and the context-parallel ones.
            const std::int64_t replicas = d * cp;
            // HSDP's groups, each once: all the replicas is the default (0).
            std::vector<std::int64_t> groups;
            for (const std::int64_t g : space.shard_group.empty() ? whole : space.shard_group) {
              const std::int64_t group = g == replicas ? 0 : g;
              if (std::find(groups.begin(), groups.end(), group) == groups.end())
                groups.push_back(group);
            }
            const auto& sps = t == 1 ? off : space.sequence_parallel;
            // ZeRO 3 with experts: Megatron-LM's FSDP does not run expert parallelism (refused).
            std::vector<std::int32_t> expert_zeros;
            for (const std::int32_t z : space.zero)
              if (z < 3) expert_zeros.push_back(z);
            const auto& zeros = replicas == 1                      ? unsharded
                                : m.moe() && !expert_zeros.empty() ? expert_zeros
                                                                   : space.zero;
            const auto& gathers = cp == 1 ? off : space.cp_all_gather;
            // Expert parallelism: as listed, else every e dividing the experts and the t·c·d
            // GPUs of a stage (1 for a dense model).
            std::vector<std::int32_t> eps = space.ep;
            if (eps.empty()) {
              eps = {1};
              if (m.moe())
                for (std::int32_t e = 2; e <= m.experts; ++e)
                  if (m.experts % e == 0 && (tc * d) % e == 0) eps.push_back(e);
            }
            // Activation offloading where Megatron-LM runs it (p = 1, no recomputation); where it
            // cannot, none, unless every value listed offloads (then those are invalid there).
            const std::vector<std::int32_t> kept_on_gpu{0};
            const auto offloads = [&](std::int32_t pp, Recompute rc,
                                      const std::string& k) -> const auto& {
              const auto& listed = space.offload_layers;
              const bool none_listed =
                  std::find(listed.begin(), listed.end(), 0) != listed.end() || listed.empty();
              return (pp != 1 || rc != Recompute::none || k != "1f1b") && none_listed ? kept_on_gpu
                                                                                      : listed;
            };
            for (const std::int32_t v : vs)
              for (const Recompute rc : recomputes)
                for (const bool sp : sps)
                  for (const bool tco : sp ? space.tp_comm_overlap : off)
                    for (const std::int32_t zero : zeros)
                      for (const std::int64_t group : zero == 0 ? whole : groups)
                        for (const bool ovl :
                             replicas == 1 || zero == 3 ? off : space.overlap_grad_reduce)
                          for (const bool gather : gathers)
                            for (const std::int32_t offload : offloads(p, rc, kind))
                              for (const std::int32_t ep : eps) {
                                PlanConfig c = base;
                                c.ep = ep;
                                c.offload_layers = offload;
                                c.cp_all_gather = gather;
                                c.microbatch_size = b;
                                c.kind = kind;
                                c.chunks = v;
                                c.recompute = rc;
                                c.sequence_parallel = sp;
                                c.tp_comm_overlap = tco;
                                c.overlap_p2p = space.overlap_p2p;
                                c.zero = zero;
                                c.shard_group = group;
                                c.overlap_grad_reduce = ovl;
                                c.partition = space.partition;
                                try {
                                  check_knobs(c);  // the model and the cluster checked above
                                } catch (const InputError& e) {
                                  invalid(e.what());
                                  continue;
                                }
                                if (options.runnable) {
                                  if (std::string why = options.runnable(c); !why.empty()) {
                                    ++result.configurations;
                                    ++result.rejected.not_runnable;
                                    if (result.rejected.not_runnable_example.empty())
                                      result.rejected.not_runnable_example = std::move(why);
                                    continue;
                                  }
                                }
                                const ScheduleInfo& info = schedule_for(c);
                                if (!info.error.empty()) {
                                  invalid(info.error);
                                  continue;
                                }
                                // A non-interleaved configuration's stage costs: shared by every
                                // kind with the same other knobs, computed for the first. Several
                                // stages on a device (interleaved, the V): each configuration's own
                                // costs and the default partition.
                                const bool interleaved =
                                    kind == "interleaved" || mirrored_kind(kind);
                                std::optional<ConfigCosts> own;
                                const StageCostTable* table = nullptr;
                                if (interleaved) {
                                  own.emplace(c);
                                } else {
                                  const auto key = std::make_tuple(rc, sp, tco, zero, c.shard_group,
                                                                   ovl, gather, offload, ep);
                                  auto it = tables.find(key);
                                  if (it == tables.end())
                                    it = tables.emplace(key, stage_cost_table(c, ConfigCosts(c)))
                                             .first;
                                  table = &it->second;
                                }
                                // With dense first layers a stage's cost depends on where it
                                // starts, not only its kind: the bounds are the exact costs, the
                                // table only guides the partition.
                                const auto stage_costs =
                                    [&](const std::vector<std::int32_t>& layers) {
                                      if (table && m.dense_layers == 0)
                                        return table->stage_costs(layers);
                                      if (!own) own.emplace(c);
                                      return own->stage_costs(layers);
                                    };
                                std::vector<std::vector<std::int32_t>> partitions;
                                if (!space.partition.empty() || kind == "interleaved") {
                                  partitions.push_back(default_partition(c));
                                } else if (mirrored_kind(kind)) {
                                  partitions.push_back(v_partition(c, *own));
                                } else {
                                  // Without a memory limit the partition is the same for every
                                  // kind on this table (PipeDream's per-micro-batch updates
                                  // aside); within it, for the kinds that hold as many
                                  // micro-batches in flight on each stage.
                                  auto [entry, fresh] =
                                      splits.try_emplace({table, kind == "pipedream"});
                                  Splits& split = entry->second;
                                  if (fresh) {
                                    split.tables = partition_tables(c, *table, info.in_flight);
                                    split.unlimited = partition_under(split.tables, 0);
                                  }
                                  partitions.push_back(split.unlimited);
                                  auto [held, new_flight] =
                                      split.limited.try_emplace(info.in_flight);
                                  if (new_flight) {
                                    split.tables.in_flight = info.in_flight;
                                    held->second = partition_under(split.tables, limit);
                                  }
                                  if (!held->second.empty() && held->second != partitions.front())
                                    partitions.push_back(held->second);
                                }
                                for (const auto& layers : partitions) {
                                  ++result.configurations;
                                  const Bounds bound = bounds(c, stage_costs(layers), info);
                                  // The candidate (a copy of the configuration, its key) is made
                                  // only for what is kept: most are out of memory.
                                  const auto candidate = [&] {
                                    Candidate cand;
                                    cand.config = c;
                                    cand.config.partition = layers;
                                    cand.schedule = &info;
                                    cand.staleness = info.max_staleness;
                                    cand.step_bound_s = bound.step_s;
                                    cand.memory_bound_bytes = bound.memory_bytes;
                                    cand.static_bytes = bound.static_bytes;
                                    cand.key = config_key(cand.config);
                                    return cand;
                                  };
                                  // Not simulated: its bound is the peak it is known by (a
                                  // simulated one's is its simulated peak, below).
                                  const auto rejected_smallest = [&] {
                                    if (!smallest ||
                                        bound.memory_bytes < smallest->memory_bound_bytes)
                                      smallest = candidate();
                                  };
                                  if (options.max_staleness >= 0 &&
                                      info.max_staleness > options.max_staleness) {
                                    ++result.rejected.too_stale;
                                    rejected_smallest();
                                    continue;
                                  }
                                  if (static_cast<double>(bound.memory_bytes) > limit) {
                                    result.rejected.add_out_of_memory(static_cast<std::int64_t>(
                                        static_cast<double>(bound.memory_bytes) - limit));
                                    rejected_smallest();
                                    continue;
                                  }
                                  candidates.push_back(candidate());
                                }
                              }
          }
        }
      }
    }
  }

  // Simulate in the order of the bound, a batch at a time, each batch's survivors in parallel.
  std::sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
    return std::tie(a.step_bound_s, a.key) < std::tie(b.step_bound_s, b.key);
  });
  result.jobs = options.jobs > 0 ? options.jobs : std::max(1u, std::thread::hardware_concurrency());
  Kept kept;
  kept.limit = std::max<std::size_t>(options.top, 1);
  const std::size_t batch = 4 * result.jobs;
  std::int64_t done = 0;
  for (std::size_t first = 0; first < candidates.size(); first += batch) {
    if (options.interrupted && options.interrupted->load()) {
      result.interrupted = true;
      break;
    }
    std::vector<const Candidate*> run;
    for (std::size_t i = first; i < std::min(candidates.size(), first + batch); ++i) {
      if (options.prune && kept.rules_out(candidates[i], result)) {
        ++result.rejected.pruned;
        continue;
      }
      run.push_back(&candidates[i]);
    }
    std::vector<std::optional<PlanResult>> out(run.size());
    std::vector<std::exception_ptr> errors(run.size());
    std::atomic<std::size_t> next{0};
    const auto work = [&] {
      for (std::size_t i = next++; i < run.size(); i = next++) {
        try {
          SimResult sim;
          PlanResult p = evaluate(run[i]->config, {}, sim, run[i]->schedule->schedule.get());
          p.schedule.devices.clear();  // the kept plans need no action lists
          out[i] = std::move(p);
        } catch (...) {
          errors[i] = std::current_exception();
        }
      }
    };
    std::vector<std::thread> threads;
    for (std::size_t j = 1; j < std::min(result.jobs, run.size()); ++j) threads.emplace_back(work);
    work();
    for (auto& th : threads) th.join();
    for (const auto& e : errors)
      if (e) std::rethrow_exception(e);
    for (std::size_t i = 0; i < run.size(); ++i) {
      ++result.simulated;
      PlanResult& p = *out[i];
      const double over = p.step_s / run[i]->step_bound_s;
      if (result.simulated == 1 || over < result.least_step_over_bound)
        result.least_step_over_bound = over;
      if (!smallest || p.peak_memory_bytes < smallest->memory_bound_bytes) {
        smallest = *run[i];
        smallest->memory_bound_bytes = p.peak_memory_bytes;
      }
      if (static_cast<double>(p.peak_memory_bytes) > limit) {
        result.rejected.add_out_of_memory(
            static_cast<std::int64_t>(static_cast<double>(p.peak_memory_bytes) - limit));
        continue;
      }
      if (!p.host_fits) {  // offloaded activations beyond the host memory per GPU
        result.rejected.add_out_of_host_memory(static_cast<std::int64_t>(
            static_cast<double>(p.host_memory_bytes) - p.config.cluster.host_memory_bytes));
        continue;
      }
      p.fits = true;
      kept.add(p, run[i]->key);
      auto& best =
          asynchronous_kind(p.config.kind) ? result.best_asynchronous : result.best_synchronous;
      if (!best || better(p, run[i]->key, *best, config_key(best->config))) best = p;
    }
    done = static_cast<std::int64_t>(std::min(candidates.size(), first + batch));
    if (options.progress) {
      SearchProgress progress;
      progress.done = done;
      progress.total = static_cast<std::int64_t>(candidates.size());
      progress.seconds = elapsed();
      if (!kept.top.empty()) progress.best_step_s = kept.top.front().first.step_s;
      options.progress(progress);
    }
  }
  kept.move_into(result);

  // Nothing fit: the configuration with the smallest peak (simulated, or the bound of one the
  // bound rejected), and what a knob outside the space
  // would make of it.
  if (result.plans.empty() && smallest) {
    result.smallest = smallest->config;
    result.smallest_peak_bytes = smallest->memory_bound_bytes;
    result.smallest_static_bytes = smallest->static_bytes;
    const ScheduleInfo& info = *smallest->schedule;
    const auto peak_with = [&](const std::string& what, auto change) {
      PlanConfig c = smallest->config;
      change(c);
      try {
        check_config(c);
        const ConfigCosts costs(c);
        result.alternatives.emplace_back(
            what, bounds(c, costs.stage_costs(c.partition), info).memory_bytes);
      } catch (const InputError&) {
      }
    };
    if (smallest->config.recompute != Recompute::full)
      peak_with("--recompute full", [](PlanConfig& c) { c.recompute = Recompute::full; });
    if (smallest->config.zero < 3 && smallest->config.dp() > 1)
      peak_with("--zero 3", [](PlanConfig& c) { c.zero = 3; });
    if (!smallest->config.sequence_parallel && smallest->config.tp > 1)
      peak_with("--sequence-parallel on", [](PlanConfig& c) { c.sequence_parallel = true; });
  }
  result.seconds = elapsed();
  return result;
}

}  // namespace paci::plan
