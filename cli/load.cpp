// write_output.
#include "cli/load.hpp"

#include <iostream>
#include <stdexcept>

#include "schedules/formats.hpp"

namespace paci::cli {

void write_output(const std::string& path, const std::string& content) {
  if (path == "-") {
    std::cout << content << std::flush;
    if (!std::cout) throw std::runtime_error("cannot write to standard output");
    return;
  }
  write_file_atomic(path, content);
}

}  // namespace paci::cli
