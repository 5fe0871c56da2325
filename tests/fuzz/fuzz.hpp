// What every libFuzzer target here shares (docs/reliability.md). A reader given bad input must
// throw the documented InputError (paci's or the model's: the CLI prints it as one line and exits
// 2); any other exception, a crash, a leak, undefined behaviour, a hang or an allocation past
// libFuzzer's -rss_limit_mb is a finding.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>

#include "model/check.hpp"
#include "schedules/ir.hpp"

namespace paci::fuzz {

inline std::string_view bytes(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Runs `read`; returns true when it succeeded, false when it threw an InputError. Any other
// exception aborts with its message, which libFuzzer reports as a crash with this input.
template <class Read>
bool accepts(Read&& read) {
  try {
    read();
    return true;
  } catch (const InputError&) {
    return false;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "finding: the reader threw something other than InputError: %s\n",
                 e.what());
    std::abort();
  }
}

// A property every accepted input must have; a failure aborts with `what`.
inline void require(bool holds, const char* what) {
  if (!holds) {
    std::fprintf(stderr, "finding: %s\n", what);
    std::abort();
  }
}

// The readers that take a path get the input through one file per process, rewritten for every
// input ($TMPDIR, else /tmp; removed at exit).
class InputFile {
 public:
  InputFile() {
    const char* dir = std::getenv("TMPDIR");
    path_ = std::string(dir != nullptr && *dir != '\0' ? dir : "/tmp") + "/paci-fuzz-" +
            std::to_string(::getpid()) + ".bin";
  }
  ~InputFile() { std::remove(path_.c_str()); }
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  const std::string& write(std::string_view content) const {
    std::FILE* f = std::fopen(path_.c_str(), "wb");
    require(f != nullptr, "cannot create the fuzz input file");
    require(content.empty() || std::fwrite(content.data(), 1, content.size(), f) == content.size(),
            "cannot write the fuzz input file");
    require(std::fclose(f) == 0, "cannot close the fuzz input file");
    return path_;
  }

 private:
  std::string path_;
};

}  // namespace paci::fuzz
