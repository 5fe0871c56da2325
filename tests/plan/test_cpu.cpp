// The CPU plan: the per-layer calibration file reads back what it wrote and names a bad field; a
// stage's cost is the sum of its pieces; the search simulates every configuration, ranks them as
// their own simulations do, and respects the staleness and memory limits.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "plan/cpu/cpu.hpp"
#include "plan/cpu/layers.hpp"
#include "plan/report/report.hpp"
#include "schedules/ir.hpp"

namespace paci::plan {
namespace {

using ::testing::HasSubstr;

// A made-up calibration of a 4-layer GPT on 2 cores: the head costs as much as two layers, so
// the balanced split of the layers is not the balanced split of the work.
LayerCalibration calibration() {
  LayerCalibration c;
  c.description = "test";
  c.layers = 4;
  c.heads = 4;
  c.d_model = 128;
  c.seq_len = 128;
  c.vocab = 256;
  c.batch = 16;
  c.cores = 2;
  c.message_bytes = 16 * 128 * 128 * 4;
  c.link = {20e-6, 5e9};
  for (const std::int32_t threads : {1, 2}) {
    ThreadsCalibration t;
    t.threads_per_stage = threads;
    const double k = threads == 1 ? 1.0 : 0.6;
    t.layer = {0.010 * k, 0.020 * k, 0.010 * k, 0.010 * k, 0.001, 4 << 20, 800000, 1 << 20};
    t.embedding = {0.001 * k, 0.002 * k, 0.001 * k, 0.001 * k, 0.0002, 1 << 20, 150000, 0};
    t.head = {0.020 * k, 0.040 * k, 0.020 * k, 0.020 * k, 0.0002, 8 << 20, 130000, 1 << 20};
    t.slowdown_by_count =
        threads == 1 ? std::vector<double>{1.0, 1.1, 1.6, 2.1} : std::vector<double>{1.0};
    c.threads.push_back(t);
  }
  return c;
}

TEST(LayerCalibrationFile, ReadsBackWhatItWrote) {
  const LayerCalibration c = calibration();
  const std::string text = write_layer_calibration(c);
  EXPECT_TRUE(is_layer_calibration(text));
  EXPECT_FALSE(is_layer_calibration(R"({"format": "paci.cluster/1"})"));
  EXPECT_FALSE(is_layer_calibration("not json"));
  const LayerCalibration back = parse_layer_calibration(text, "f.json");
  EXPECT_EQ(back.threads.size(), 2u);
  EXPECT_EQ(write_layer_calibration(back), text);
}

TEST(LayerCalibrationFile, NamesTheBadField) {
  const auto refused = [](const std::string& text, const std::string& fragment) {
    try {
      parse_layer_calibration(text, "f.json");
      ADD_FAILURE() << "accepted: " << text;
    } catch (const InputError& e) {
      EXPECT_THAT(e.what(), HasSubstr("f.json: "));
      EXPECT_THAT(e.what(), HasSubstr(fragment));
    }
  };
  nlohmann::json j = nlohmann::json::parse(write_layer_calibration(calibration()));
  refused("{", "malformed JSON");
  refused(R"({"format": "paci.costmodel/1"})", "not a per-layer calibration");
  nlohmann::json bad = j;
  bad["threads"][1]["layer"].erase("backward_s");
  refused(bad.dump(), "threads[1].layer.backward_s is missing");
  bad = j;
  bad["threads"][0]["head"]["forward_s"] = -1;
  refused(bad.dump(), "threads[0].head.forward_s must be a finite number >= 0");
  bad = j;
  bad["threads"][0]["slowdown_by_count"] = {1.0, 0.0};
  refused(bad.dump(), "slowdown_by_count holds 0.0");
  bad = j;
  bad["threads"][1]["threads_per_stage"] = 1;
  refused(bad.dump(), "increasing threads_per_stage");
  bad = j;
  bad["model"].erase("layers");
  refused(bad.dump(), "model.layers is missing");
  bad = j;
  bad["link"]["bandwidth_bytes_per_s"] = 0;
  refused(bad.dump(), "link.bandwidth_bytes_per_s must be a finite number > 0");
}

TEST(CpuCostModel, StagesAreTheSumOfTheirPiecesOnTheirThreads) {
  const LayerCalibration c = calibration();
  // Two stage threads on two cores: one thread each, sharing the machine.
  const CostModel two = cpu_cost_model(c, {1, 3}, {0, 1});
  ASSERT_EQ(two.stages.size(), 2u);
  EXPECT_NEAR(two.stages[0].forward_s, 0.010 + 0.001, 1e-12);
  EXPECT_NEAR(two.stages[1].forward_s, 3 * 0.010 + 0.020, 1e-12);
  EXPECT_NEAR(two.stages[1].backward_s, 3 * 0.020 + 0.040, 1e-12);
  EXPECT_EQ(two.stages[0].weight_bytes, 800000 + 150000);
  EXPECT_EQ(two.stages[0].optimizer_bytes, 2 * two.stages[0].weight_bytes);
  EXPECT_EQ(two.stages[0].gradient_message_bytes, 0);
  EXPECT_EQ(two.stages[0].activation_message_bytes, c.message_bytes);
  EXPECT_EQ(two.stages[1].activation_message_bytes, 0);
  ASSERT_EQ(two.hosts.size(), 1u);
  EXPECT_EQ(two.hosts[0].devices, (std::vector<std::int32_t>{0, 1}));
  EXPECT_EQ(two.hosts[0].slowdown_by_count, c.threads[0].slowdown_by_count);
  // One stage thread gets both cores: the faster calibration, nothing shared.
  const CostModel one = cpu_cost_model(c, {4}, {0});
  EXPECT_NEAR(one.stages[0].forward_s, 0.6 * (4 * 0.010 + 0.001 + 0.020), 1e-12);
  EXPECT_TRUE(one.hosts.empty());
  EXPECT_EQ(threads_per_stage(c, 4), 1);
  EXPECT_EQ(threads_for(c, 4).threads_per_stage, 1);
  EXPECT_EQ(threads_for(c, 1).threads_per_stage, 2);
}

TEST(CpuSearch, SimulatesEveryConfigurationAndRanksThem) {
  const LayerCalibration c = calibration();
  SearchOptions o;
  o.memory_limit_bytes = 1e12;
  o.top = 100;
  const SearchResult r = search_cpu({c, {}, {}, {}, 8, {}}, o);
  // p = 1: 7 kinds (interleaved has no v); p = 2: 7 kinds x 3 partitions + interleaved v = 2;
  // p = 4: 7 kinds (interleaved would need 8 layers).
  EXPECT_EQ(r.configurations, 8 + 22 + 8);
  EXPECT_EQ(r.rejected.invalid, 2);
  EXPECT_EQ(r.simulated, 36);
  EXPECT_EQ(r.plans.size(), 36u);
  EXPECT_EQ(r.rejected.pruned, 0);
  for (std::size_t i = 1; i < r.plans.size(); ++i)
    EXPECT_LE(r.plans[i - 1].step_s, r.plans[i].step_s);
  // Each plan's step is its own simulation's.
  for (const PlanResult& p : r.plans) {
    SimResult sim;
    EXPECT_DOUBLE_EQ(evaluate_cpu(c, p.config, {}, sim).step_s, p.step_s);
    // The executor's sends travel while its stages compute, whatever the kind.
    EXPECT_TRUE(p.config.p2p_overlapped()) << p.config.kind;
    EXPECT_FALSE(p.costs.blocking_sends);
  }
  // The head weighs two layers: 1F1B on two threads does best with three layers beside the
  // embedding and one beside the head.
  const auto best_1f1b = std::find_if(r.plans.begin(), r.plans.end(), [](const PlanResult& p) {
    return p.config.kind == "1f1b" && p.config.pp == 2;
  });
  ASSERT_NE(best_1f1b, r.plans.end());
  EXPECT_EQ(best_1f1b->config.partition, (std::vector<std::int32_t>{3, 1}));
  ASSERT_TRUE(r.best_synchronous && r.best_asynchronous);
  EXPECT_TRUE(asynchronous_kind(r.best_asynchronous->config.kind));
  EXPECT_FALSE(asynchronous_kind(r.best_synchronous->config.kind));
}

TEST(CpuSearch, HoldsTheStalenessAndMemoryLimits) {
  const LayerCalibration c = calibration();
  SearchOptions o;
  o.memory_limit_bytes = 1e12;
  o.max_staleness = 0;
  const SearchResult fresh = search_cpu({c, {2}, {}, {}, 8, {}}, o);
  ASSERT_FALSE(fresh.plans.empty());
  EXPECT_GT(fresh.rejected.too_stale, 0);
  for (const PlanResult& p : fresh.plans) {
    EXPECT_EQ(p.max_staleness, 0);
    EXPECT_EQ(p.config.pp, 2);
  }
  o.max_staleness = -1;
  o.memory_limit_bytes = 1e6;  // below any stage's weights
  const SearchResult none = search_cpu({c, {}, {"1f1b"}, {}, 8, {}}, o);
  EXPECT_TRUE(none.plans.empty());
  EXPECT_EQ(none.rejected.out_of_memory, none.simulated);
  EXPECT_GT(none.rejected.least_excess_bytes, 0);
  EXPECT_THAT(nothing_fits(none), HasSubstr("no configuration fits in 0.0 GiB: the smallest peak"));
  EXPECT_THAT(nothing_fits(none), HasSubstr("more memory (--memory-limit)"));
}

TEST(CpuSearch, ADeepModelsPartitionsAreRefusedNotEnumerated) {
  LayerCalibration c = calibration();
  c.layers = 48;
  SearchOptions o;
  o.memory_limit_bytes = 1e12;
  try {
    search_cpu({c, {}, {}, {}, 8, {}}, o);
    ADD_FAILURE() << "48 layers' partitions enumerated";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("fix --pp, --kind or --partition"));
  }
  EXPECT_EQ(search_cpu({c, {2}, {"1f1b"}, {}, 8, {}}, o).simulated, 47);
}

TEST(CpuSearch, AGivenPartitionIsTheOnlyOneAndMustFit) {
  const LayerCalibration c = calibration();
  SearchOptions o;
  o.memory_limit_bytes = 1e12;
  const SearchResult r = search_cpu({c, {2}, {"gpipe"}, {}, 4, {2, 2}}, o);
  ASSERT_EQ(r.plans.size(), 1u);
  EXPECT_EQ(r.plans[0].config.partition, (std::vector<std::int32_t>{2, 2}));
  EXPECT_EQ(r.plans[0].microbatches, 4);
  EXPECT_EQ(train_command(r.plans[0], 20),
            "paci train --kind gpipe --stages 2 --microbatches 4 --steps 20 --partition 2,2 "
            "--layers 4 --heads 4 --d-model 128 --seq-len 128 --vocab 256 --batch 16");
  o.memory_limit_bytes = static_cast<double>(r.plans[0].peak_memory_bytes) - 1;
  EXPECT_TRUE(search_cpu({c, {2}, {"gpipe"}, {}, 4, {2, 2}}, o).plans.empty());
  o.memory_limit_bytes = 1e12;
  const SearchResult bad = search_cpu({c, {2}, {"gpipe"}, {}, 4, {1, 2}}, o);
  EXPECT_TRUE(bad.plans.empty());
  EXPECT_THAT(bad.rejected.invalid_example, HasSubstr("adds up to 3 layers"));
}

}  // namespace
}  // namespace paci::plan
