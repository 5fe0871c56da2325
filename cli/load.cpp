// load_valid_schedule and write_output.
#include "cli/load.hpp"

#include <fmt/format.h>
#include <iostream>

#include "schedules/formats.hpp"
#include "schedules/index.hpp"
#include "schedules/validate.hpp"

namespace paci::cli {

Schedule load_valid_schedule(const std::string& path) {
  Schedule schedule = read_schedule(path);
  const std::string source = path == "-" ? "<stdin>" : path;
  try {
    validate(schedule);
  } catch (const ScheduleError& e) {
    throw InputError(fmt::format("{}: invalid schedule: {}\n{}", source, e.what(),
                                 render_grid(schedule, e.marked)));
  } catch (const InputError& e) {
    throw InputError(fmt::format("{}: invalid schedule: {}", source, e.what()));
  }
  return schedule;
}

void write_output(const std::string& path, const std::string& content) {
  if (path == "-") {
    std::cout << content << std::flush;
    if (!std::cout) throw std::runtime_error("cannot write to standard output");
    return;
  }
  write_file_atomic(path, content);
}

}  // namespace paci::cli
