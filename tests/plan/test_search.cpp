// paci plan's search: pruning by the bound never changes the answer (against simulating every
// candidate, on spaces small enough to enumerate), neither do the threads; the constraints hold;
// the bottleneck partition is the best of all contiguous partitions (against brute force); a space
// where nothing fits says what would.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <tuple>

#include <functional>
#include <optional>

#include "plan/report/report.hpp"
#include "plan/search/search.hpp"
#include "schedules/analysis.hpp"
#include "schedules/generators.hpp"

namespace paci::plan {
namespace {

using ::testing::HasSubstr;

SearchSpace small_space(const std::string& model, const std::string& gpu, std::int64_t gpus,
                        std::int64_t batch) {
  SearchSpace s;
  s.model = model_preset(model);
  s.cluster = cluster_preset(gpu);
  s.gpus = gpus;
  s.global_batch = batch;
  return s;
}

std::vector<std::string> summary(const std::vector<PlanResult>& plans) {
  std::vector<std::string> out;
  for (const PlanResult& p : plans) {
    std::string partition;
    for (const auto l : p.config.partition) partition += std::to_string(l) + ",";
    out.push_back(p.config.kind + " t" + std::to_string(p.config.tp) + " p" +
                  std::to_string(p.config.pp) + " b" + std::to_string(p.config.microbatch_size) +
                  " v" + std::to_string(p.config.chunks) + " " +
                  std::string(to_string(p.config.recompute)) + " " + partition + " " +
                  std::to_string(p.step_s) + " " + std::to_string(p.peak_memory_bytes));
  }
  return out;
}

TEST(PlanSearch, PruningNeverChangesTheAnswer) {
  struct Case {
    SearchSpace space;
    std::int32_t max_staleness;
  };
  std::vector<Case> cases;
  cases.push_back({small_space("gpt3-1.3b", "a100-80gb", 16, 32), -1});
  cases.push_back({small_space("llama3-8b", "h100-80gb", 8, 16), -1});
  cases.push_back({small_space("gpt2-medium", "a100-40gb", 8, 64), 0});
  cases.back().space.recompute = {Recompute::none};
  // Few micro-batches per stage (the asynchronous step's window is short) and a staleness limit
  // that keeps PACI and 2BW but not PipeDream.
  cases.push_back({small_space("gpt3-2.7b", "a100-40gb", 32, 32), 1});
  cases.push_back({small_space("llama2-7b", "h100-80gb", 16, 16), -1});
  cases.back().space.microbatch_size = {1, 2};
  // ZB-V (searched when listed): two stages a device, its own partition.
  cases.push_back({small_space("llama3-8b", "h100-80gb", 8, 16), 0});
  cases.back().space.kinds = {"zb-v", "zb-h1", "1f1b"};
  // DualPipeV (searched when listed): the V, its overlapped pairs under the bound too.
  cases.push_back({small_space("llama3-8b", "h100-80gb", 8, 32), 0});
  cases.back().space.kinds = {"dualpipev", "zb-v", "1f1b"};
  // DualPipe (searched when listed): two copies, each device's lowest stage in either of them.
  cases.push_back({small_space("llama3-8b", "h100-80gb", 8, 32), 0});
  cases.back().space.kinds = {"dualpipe", "dualpipev", "1f1b"};
  // Dense first layers (DeepSeek-V3's kind), more of them than a first stage of 4 pipeline stages
  // holds: a later stage's cost depends on where it starts, and the bound must stay below the
  // simulated step there too.
  cases.push_back({small_space("mixtral-8x7b", "h200", 8, 16), 0});
  cases.back().space.model.layers = 8;
  cases.back().space.model.dense_layers = 3;
  cases.back().space.model.dense_ffn = 14336;
  cases.back().space.pp = {4};
  cases.back().space.partition = {2, 2, 2, 2};
  cases.back().space.kinds = {"1f1b", "zb-h1", "gpipe"};
  const auto best = [](const std::optional<PlanResult>& p) {
    return p ? summary({*p}) : std::vector<std::string>{};
  };
  for (const Case& c : cases) {
    SearchOptions exhaustive;
    exhaustive.prune = false;
    exhaustive.jobs = 1;
    exhaustive.max_staleness = c.max_staleness;
    SearchOptions pruned = exhaustive;
    pruned.prune = true;
    const SearchResult a = search(c.space, exhaustive), b = search(c.space, pruned);
    ASSERT_FALSE(a.plans.empty()) << c.space.model.name;
    EXPECT_EQ(a.configurations, b.configurations);
    EXPECT_EQ(a.rejected.pruned, 0);
    // Every configuration's bound is at most its simulated step.
    EXPECT_GE(a.least_step_over_bound, 1 - 1e-9) << c.space.model.name;
    EXPECT_LT(a.least_step_over_bound, 1.01) << c.space.model.name << ": the bound is loose";
    EXPECT_GT(b.rejected.pruned, 0) << c.space.model.name << ": the bound pruned nothing";
    EXPECT_LT(b.simulated, a.simulated);
    EXPECT_EQ(summary(a.plans), summary(b.plans)) << c.space.model.name;
    EXPECT_EQ(summary(a.frontier), summary(b.frontier)) << c.space.model.name;
    EXPECT_EQ(best(a.best_synchronous), best(b.best_synchronous)) << c.space.model.name;
    EXPECT_EQ(best(a.best_asynchronous), best(b.best_asynchronous)) << c.space.model.name;
    // The threads change nothing either.
    pruned.jobs = 3;
    const SearchResult t = search(c.space, pruned);
    EXPECT_EQ(summary(t.plans), summary(b.plans));
    EXPECT_EQ(summary(t.frontier), summary(b.frontier));
  }
}

// HSDP's sharding group is searched when listed: each ZeRO stage 1-3 configuration once per
// group, a group equal to the replicas being the default, one that does not divide them invalid.
TEST(PlanSearch, ListedShardGroupsAreSearched) {
  SearchSpace s = small_space("llama3-8b", "h100-80gb", 16, 32);
  s.tp = {2};
  s.pp = {1};
  s.microbatch_size = {1};
  s.kinds = {"1f1b"};
  s.recompute = {Recompute::full};
  s.cp = {1};
  s.sequence_parallel = {true};
  s.tp_comm_overlap = {false};
  s.overlap_grad_reduce = {true};
  s.zero = {1, 3};
  SearchOptions o;
  o.jobs = 1;
  const SearchResult whole = search(s, o);
  s.shard_group = {0, 4, 8, 3};  // 8: all the replicas (the default again); 3 divides nothing
  const SearchResult r = search(s, o);
  EXPECT_EQ(whole.configurations, 2);
  EXPECT_EQ(r.configurations, 6);
  EXPECT_EQ(r.rejected.invalid, 2);
  std::set<std::pair<std::int32_t, std::int64_t>> seen;
  for (const PlanResult& p : r.plans) seen.insert({p.config.zero, p.config.shard_group});
  EXPECT_TRUE(seen.count({1, 4}) && seen.count({3, 4}) && seen.count({3, 0}));
  // One group with the ZeRO stages left open (0 among them): it goes with the stages that shard.
  s.zero = {0, 1, 2, 3};
  s.shard_group = {4};
  const auto fixed = fixed_but_switches(s);
  ASSERT_TRUE(fixed.has_value());
  EXPECT_EQ(fixed->zero, 1);
  EXPECT_EQ(fixed->shard_group, 4);
  const SearchResult open = search(s, o);
  ASSERT_FALSE(open.plans.empty());
  EXPECT_TRUE(std::any_of(open.plans.begin(), open.plans.end(),
                          [](const PlanResult& p) { return p.config.shard_group == 4; }));
}

// Activation offloading is searched when listed, where Megatron-LM runs it (p = 1, no
// recomputation); elsewhere those configurations run without it when 0 is listed, and are invalid
// when only offloading values are.
TEST(PlanSearch, ListedOffloadLayersAreSearchedWhereTheyCanRun) {
  SearchSpace s = small_space("llama3-8b", "h100-80gb", 16, 32);
  s.tp = {2};
  s.pp = {1, 2};
  s.microbatch_size = {1};
  s.kinds = {"1f1b"};
  s.recompute = {Recompute::none, Recompute::full};
  s.cp = {1};
  s.sequence_parallel = {true};
  s.tp_comm_overlap = {false};
  s.overlap_grad_reduce = {true};
  s.zero = {1};
  SearchOptions o;
  o.jobs = 1;
  o.top = 100;
  const SearchResult without = search(s, o);
  EXPECT_EQ(without.configurations, 4);
  s.offload_layers = {0, 8, 16};
  const SearchResult with = search(s, o);
  EXPECT_EQ(with.configurations, 6);  // p = 1 without recomputation: three; the rest once each
  EXPECT_EQ(with.rejected.invalid, 0);
  std::set<std::tuple<std::int32_t, Recompute, std::int32_t>> seen;
  for (const PlanResult& p : with.plans)
    seen.insert({p.config.pp, p.config.recompute, p.config.offload_layers});
  EXPECT_TRUE(seen.count({1, Recompute::none, 16}) && seen.count({1, Recompute::none, 8}) &&
              seen.count({2, Recompute::full, 0}));
  for (const PlanResult& p : with.plans)
    if (p.config.offload_layers > 0) {
      EXPECT_EQ(p.config.pp, 1);
    }
  s.offload_layers = {16};  // fixed: where it cannot run, invalid
  const SearchResult fixed = search(s, o);
  EXPECT_EQ(fixed.configurations, 4);
  EXPECT_EQ(fixed.rejected.invalid, 3);
  ASSERT_EQ(fixed.plans.size(), 1u);
  EXPECT_EQ(fixed.plans[0].config.offload_layers, 16);
  EXPECT_EQ(fixed.rejected.out_of_host_memory, 0);
  // A host with less memory than the offloaded activations: rejected for the host's memory, not
  // the GPU's, and said so when nothing is left.
  s.cluster.host_memory_bytes = 1e9;
  const SearchResult small_host = search(s, o);
  EXPECT_TRUE(small_host.plans.empty());
  EXPECT_EQ(small_host.rejected.out_of_host_memory, 1);
  EXPECT_EQ(small_host.rejected.out_of_memory, 0);
  EXPECT_GT(small_host.rejected.least_host_excess_bytes, 0);
  EXPECT_NE(nothing_fits(small_host).find("host memory"), std::string::npos)
      << nothing_fits(small_host);
}

// Expert parallelism is searched for a mixture of experts (every e dividing the experts and the
// GPUs of a stage), fixed when given, and 1 for a dense model.
// DualPipe is searched by default for a mixture of experts (with the V), for a dense model when
// listed; its plans hold p model stages of layers (one copy's) and run on an even p.
TEST(PlanSearch, SearchesDualPipeForAMixtureOfExpertsAndWhenListed) {
  const auto has = [](const std::vector<std::string>& kinds, const char* kind) {
    return std::find(kinds.begin(), kinds.end(), kind) != kinds.end();
  };
  EXPECT_TRUE(has(default_kinds(model_preset("mixtral-8x7b")), "dualpipe"));
  EXPECT_FALSE(has(default_kinds(model_preset("llama3-8b")), "dualpipe"));
  SearchSpace s = small_space("llama3-8b", "h100-80gb", 8, 32);
  s.kinds = {"dualpipe"};
  s.recompute = {Recompute::full};
  SearchOptions o;
  o.jobs = 1;
  o.top = 1000;
  const SearchResult r = search(s, o);
  ASSERT_FALSE(r.plans.empty());
  for (const PlanResult& p : r.plans) {
    EXPECT_EQ(p.config.kind, "dualpipe");
    EXPECT_EQ(p.config.pp % 2, 0);
    EXPECT_EQ(static_cast<std::int32_t>(p.config.partition.size()), p.config.pp);
    EXPECT_EQ(static_cast<std::int32_t>(p.stages.size()), 2 * p.config.pp);
  }
}

// When nothing fits, the peak the error names is one found: a simulated configuration's own
// peak, not the lower bound that let it be simulated (two stages a device: the bound takes the
// larger stage's activations, the simulation both).
TEST(PlanSearch, NothingFitsNamesTheSimulatedPeakOfWhatWasSimulated) {
  SearchSpace s = small_space("llama3-8b", "h100-80gb", 8, 32);
  s.tp = {1};
  s.pp = {4};
  s.cp = {1};
  s.microbatch_size = {1};
  s.kinds = {"dualpipe"};
  s.recompute = {Recompute::none};
  s.zero = {1};
  s.overlap_grad_reduce = {true};
  SearchOptions o;
  o.jobs = 1;
  o.memory_limit_bytes = 1e15;
  const SearchResult all = search(s, o);
  ASSERT_EQ(all.plans.size(), 1u);
  const std::int64_t peak = all.plans[0].peak_memory_bytes;
  o.memory_limit_bytes = static_cast<double>(peak - 1);
  const SearchResult none = search(s, o);
  ASSERT_TRUE(none.plans.empty());
  EXPECT_EQ(none.simulated, 1);  // its bound was within the limit
  EXPECT_EQ(none.smallest_peak_bytes, peak);
}

TEST(PlanSearch, SearchesExpertParallelismForAMixtureOfExperts) {
  SearchSpace s = small_space("mixtral-8x7b", "h100-80gb", 16, 32);
  s.pp = {1, 2};
  s.kinds = {"1f1b"};
  s.recompute = {Recompute::full};
  s.cp = {1};
  SearchOptions o;
  o.jobs = 1;
  o.top = 1000;
  o.memory_limit_bytes = 1e15;  // the whole space (e = 1 keeps all 8 experts on each GPU)
  const SearchResult r = search(s, o);
  std::set<std::int32_t> eps;
  for (const PlanResult& p : r.plans) {
    const std::int64_t stage_gpus = std::int64_t{p.config.tp} * p.config.cp * p.config.dp();
    EXPECT_EQ(8 % p.config.ep, 0);
    EXPECT_EQ(stage_gpus % p.config.ep, 0);
    eps.insert(p.config.ep);
  }
  EXPECT_TRUE(eps.count(1) && eps.count(2) && eps.count(8)) << eps.size();
  for (const PlanResult& p : r.plans) EXPECT_LT(p.config.zero, 3);  // FSDP has no experts
  s.ep = {4};
  const SearchResult four = search(s, o);
  ASSERT_FALSE(four.plans.empty());
  for (const PlanResult& p : four.plans) EXPECT_EQ(p.config.ep, 4);
  // Every knob given: one configuration, e among them; with e missing a mixture of experts is
  // searched.
  SearchSpace fixed = s;
  fixed.tp = {1};
  fixed.pp = {1};
  fixed.cp = {1};
  fixed.microbatch_size = {1};
  fixed.zero = {1};
  fixed.sequence_parallel = {false};
  fixed.tp_comm_overlap = {false};
  fixed.overlap_grad_reduce = {true};
  const auto one = single_configuration(fixed);
  ASSERT_TRUE(one.has_value());
  EXPECT_EQ(one->ep, 4);
  fixed.ep.clear();
  EXPECT_FALSE(single_configuration(fixed).has_value());
  SearchSpace dense = small_space("llama3-8b", "h100-80gb", 16, 32);
  dense.pp = {2};
  dense.kinds = {"1f1b"};
  const SearchResult plain = search(dense, o);
  ASSERT_FALSE(plain.plans.empty());
  for (const PlanResult& p : plain.plans) EXPECT_EQ(p.config.ep, 1);
}

TEST(PlanSearch, KeepsToTheConstraintsAndReportsTheFrontier) {
  SearchSpace s = small_space("gpt3-1.3b", "a100-80gb", 16, 32);
  SearchOptions o;
  o.max_staleness = 0;
  o.memory_limit_bytes = 30.0 * (1 << 30);
  const SearchResult r = search(s, o);
  ASSERT_FALSE(r.plans.empty());
  for (const PlanResult& p : r.plans) {
    EXPECT_EQ(p.max_staleness, 0) << p.config.kind;
    EXPECT_LE(static_cast<double>(p.peak_memory_bytes), o.memory_limit_bytes);
    EXPECT_TRUE(p.fits);
  }
  for (std::size_t i = 1; i < r.plans.size(); ++i)
    EXPECT_LE(r.plans[i - 1].step_s, r.plans[i].step_s);
  // No frontier plan dominates another; the fastest plan is on it.
  for (const PlanResult& a : r.frontier)
    for (const PlanResult& b : r.frontier)
      EXPECT_FALSE(a.step_s <= b.step_s && a.peak_memory_bytes <= b.peak_memory_bytes &&
                   (a.step_s < b.step_s || a.peak_memory_bytes < b.peak_memory_bytes));
  EXPECT_DOUBLE_EQ(r.frontier.front().step_s, r.plans.front().step_s);
  EXPECT_GT(r.rejected.too_stale, 0);
  // With staleness allowed, an asynchronous plan competes and the comparison is spelled out.
  o.max_staleness = -1;
  const SearchResult any = search(s, o);
  ASSERT_TRUE(any.best_synchronous && any.best_asynchronous);
  EXPECT_THAT(search_text(any, s), HasSubstr("best synchronous"));
  const auto j = search_document(any, s, -1);
  EXPECT_EQ(j["format"], "paci.plan/1");
  EXPECT_EQ(j["search"]["configurations"].get<std::int64_t>(), any.configurations);
  EXPECT_EQ(j["plans"].size(), any.plans.size());
}

TEST(PlanSearch, SaysWhatWouldFitWhenNothingDoes) {
  SearchSpace s = small_space("llama3-70b", "a100-40gb", 8, 8);
  s.recompute = {Recompute::none};
  const SearchResult r = search(s, {});
  EXPECT_TRUE(r.plans.empty());
  ASSERT_TRUE(r.smallest);
  EXPECT_GT(static_cast<double>(r.smallest_peak_bytes), r.memory_limit_bytes);
  const std::string line = nothing_fits(r);
  EXPECT_THAT(line, HasSubstr("no configuration fits in"));
  EXPECT_THAT(line, HasSubstr("with --recompute full"));
}

TEST(PlanSearch, TheBottleneckPartitionIsTheBestContiguousOne) {
  PlanConfig c;
  c.model = model_preset("gpt3-350m");
  c.cluster = cluster_preset("a100-80gb");
  c.gpus = 4;
  c.global_batch = 16;
  c.pp = 4;
  c.kind = "1f1b";
  c.microbatch_size = 1;
  const ConfigCosts costs(c);
  const Schedule s = generate_schedule("1f1b", 4, 16, 1);
  std::vector<std::int32_t> in_flight;
  for (const auto& st : analyze(s).stages) in_flight.push_back(st.peak_activations);
  const double M = 16;
  const auto worst = [&](const std::vector<std::int32_t>& layers) {
    double w = 0;
    std::int32_t first = 0;
    for (std::int32_t i = 0; i < 4; ++i) {
      const StageCost k = costs.stage_cost(costs.stage(i, first, layers[i]));
      first += layers[i];
      w = std::max(w, M * (k.forward_s + k.backward_s) + k.update_s);
    }
    return w;
  };
  // Every composition of the 24 layers into 4 stages of at least one.
  double best = 1e300;
  for (std::int32_t a = 1; a <= 21; ++a)
    for (std::int32_t b = 1; a + b <= 22; ++b)
      for (std::int32_t d = 1; a + b + d <= 23; ++d)
        best = std::min(best, worst({a, b, d, 24 - a - b - d}));
  const auto found = bottleneck_partition(c, costs, in_flight, 0);
  ASSERT_EQ(found.size(), 4u);
  EXPECT_EQ(found[0] + found[1] + found[2] + found[3], 24);
  EXPECT_DOUBLE_EQ(worst(found), best);
  // A memory limit between the smallest and the largest stage's need moves layers off stage 0
  // (which holds 4 micro-batches in flight under 1F1B).
  const StageCost one = costs.stage_cost(costs.stage(0, 0, found[0]));
  const double need = static_cast<double>(one.static_bytes() + in_flight[0] * one.activation_bytes);
  const auto limited = bottleneck_partition(c, costs, in_flight, need - 1);
  ASSERT_EQ(limited.size(), 4u);
  EXPECT_LT(limited[0], found[0]);
  EXPECT_TRUE(bottleneck_partition(c, costs, in_flight, 1.0).empty());
  // Under that limit too, the best of every composition whose stages all fit.
  const auto fits = [&](const std::vector<std::int32_t>& layers) {
    std::int32_t first = 0;
    for (std::int32_t i = 0; i < 4; ++i) {
      const StageCost k = costs.stage_cost(costs.stage(i, first, layers[i]));
      first += layers[i];
      if (static_cast<double>(k.static_bytes() + in_flight[i] * k.activation_bytes) > need - 1)
        return false;
    }
    return true;
  };
  double best_fitting = 1e300;
  for (std::int32_t a = 1; a <= 21; ++a)
    for (std::int32_t b = 1; a + b <= 22; ++b)
      for (std::int32_t d = 1; a + b + d <= 23; ++d)
        if (fits({a, b, d, 24 - a - b - d}))
          best_fitting = std::min(best_fitting, worst({a, b, d, 24 - a - b - d}));
  EXPECT_TRUE(fits(limited));
  EXPECT_DOUBLE_EQ(worst(limited), best_fitting);
  // The search's shared table prices every stage as the configuration's own costs do.
  const StageCostTable table = stage_cost_table(c, costs);
  for (const auto& layers : {found, limited, std::vector<std::int32_t>{1, 1, 1, 21}}) {
    const auto a = table.stage_costs(layers), b = costs.stage_costs(layers);
    ASSERT_EQ(a.size(), b.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i].forward_s, b[i].forward_s);
      EXPECT_EQ(a[i].backward_s, b[i].backward_s);
      EXPECT_EQ(a[i].update_s, b[i].update_s);
      EXPECT_EQ(a[i].static_bytes(), b[i].static_bytes());
      EXPECT_EQ(a[i].activation_bytes, b[i].activation_bytes);
      EXPECT_EQ(a[i].workspace_bytes, b[i].workspace_bytes);
    }
  }
}

// The GEMMs' and the gradients' precision are the user's: every plan of a search runs them.
TEST(PlanSearch, PrecisionIsFixedForTheWholeSearch) {
  SearchSpace s = small_space("llama3-8b", "h100-80gb", 8, 32);
  s.precision = Precision::fp8;
  s.bf16_gradients = true;
  s.kinds = {"1f1b", "interleaved"};
  SearchOptions o;
  o.jobs = 1;
  const SearchResult r = search(s, o);
  ASSERT_FALSE(r.plans.empty());
  for (const PlanResult& p : r.plans) {
    EXPECT_EQ(p.config.precision, Precision::fp8);
    EXPECT_TRUE(p.config.bf16_gradients);
  }
  s.cluster = cluster_preset("a100-80gb");
  EXPECT_THROW(search(s, o), InputError);  // no FP8 on an A100
}

}  // namespace
}  // namespace paci::plan
