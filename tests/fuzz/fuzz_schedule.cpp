// Fuzz target: a schedule file in one format (PACI_FUZZ_FORMAT: json, csv or text), read as
// `paci validate` and `paci analyze` read it. An accepted schedule must survive the writer: parsing
// what write_schedule() makes of it gives it back, and validate() and analyze() either accept it or
// throw InputError.
#include <cstddef>
#include <cstdint>

#include "schedules/analysis.hpp"
#include "schedules/formats.hpp"
#include "schedules/validate.hpp"
#include "tests/fuzz/fuzz.hpp"

#ifndef PACI_FUZZ_FORMAT
#error "compile with -DPACI_FUZZ_FORMAT=json|csv|text"
#endif

namespace {

constexpr paci::ScheduleFormat kFormat = paci::ScheduleFormat::PACI_FUZZ_FORMAT;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace paci;
  Schedule schedule;
  if (!fuzz::accepts([&] {
        schedule = parse_schedule(fuzz::bytes(data, size), kFormat, "fuzz");
        check_metadata(schedule);
      }))
    return 0;
  const std::string written = write_schedule(schedule, kFormat);
  Schedule again;
  fuzz::require(fuzz::accepts([&] { again = parse_schedule(written, kFormat, "rewritten"); }),
                "the reader refuses what the writer made of a schedule it accepted");
  fuzz::require(again == schedule, "a schedule changed through write_schedule and back");
  if (fuzz::accepts([&] { validate(schedule); })) {
    fuzz::accepts([&] { analyze(schedule); });
  }
  return 0;
}
