// Fuzz target: a cost model file (paci simulate --cost), read as parse_cost_model() reads it. An
// accepted model must survive the writer exactly (write_cost_model's promise), and checking it
// against a schedule of its stage count, and simulating that schedule under it, either succeed or
// throw InputError.
#include <cstddef>
#include <cstdint>

#include "schedules/generators.hpp"
#include "sim/cost_model.hpp"
#include "sim/engine.hpp"
#include "tests/fuzz/fuzz.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace paci;
  CostModel model;
  if (!fuzz::accepts([&] { model = parse_cost_model(fuzz::bytes(data, size), "fuzz"); })) return 0;
  const std::string written = write_cost_model(model);
  CostModel again;
  fuzz::require(fuzz::accepts([&] { again = parse_cost_model(written, "rewritten"); }),
                "the reader refuses what the writer made of a cost model it accepted");
  fuzz::require(again == model, "a cost model changed through write_cost_model and back");
  const auto stages = static_cast<std::int32_t>(model.stages.size());
  if (stages <= 8) {  // a schedule of that many stages, one device each
    const Schedule schedule = generate_schedule("1f1b", stages, 2, 1);
    if (fuzz::accepts([&] { check_cost_model(model, &schedule); })) {
      fuzz::accepts([&] { simulate(schedule, model); });
    }
  }
  return 0;
}
