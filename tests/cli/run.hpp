// Runs the paci binary in a shell and captures its exit status, stdout and stderr.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace paci::testing {

struct Result {
  int status = -1;
  std::string out, err;
};

inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "paci_" + std::to_string(::getpid()) + "_" + name;
}

inline void write_text(const std::string& path, const std::string& content) {
  std::ofstream(path, std::ios::binary) << content;
}

// Runs `command` (a shell line) with `stdin_text` on standard input, in the test's temporary
// directory, and captures its exit status, stdout and stderr.
inline Result run_shell(const std::string& command, const std::string& stdin_text = "") {
  const std::string in = temp_path("stdin"), out = temp_path("stdout"), err = temp_path("stderr");
  write_text(in, stdin_text);
  const std::string cmd = std::string("cd ") + ::testing::TempDir() + " && ( " + command + " ) <" +
                          in + " >" + out + " 2>" + err;
  const int raw = std::system(cmd.c_str());
  Result r;
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

// `args` is appended to the binary path; it may contain pipes and redirections of its own.
inline Result run_paci(const std::string& args, const std::string& stdin_text = "") {
  return run_shell(std::string(PACI_BINARY) + " " + args, stdin_text);
}

// paci `args` refuses to run: exit status 2, `fragment` in its one line on standard error.
inline void expect_refused(const std::string& args, const std::string& fragment) {
  const Result r = run_paci(args);
  EXPECT_EQ(r.status, 2) << args << ": " << r.err;
  EXPECT_THAT(r.err, ::testing::HasSubstr(fragment)) << args;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << ": " << r.err;
}

// " --data TRAIN --val-data VAL ": a small corpus, tokenized once per test binary.
inline const std::string& corpus_flags() {
  static const std::string flags = [] {
    std::string text;
    for (int i = 0; i < 400; ++i)
      text += "In the beginning God created the heaven and the earth. Verse " + std::to_string(i) +
              ".\n";
    const std::string txt = temp_path("corpus.txt"), train = temp_path("corpus_train.bin"),
                      val = temp_path("corpus_val.bin");
    write_text(txt, text);
    const auto r = run_paci("data tokenize " + txt + " --train " + train + " --val " + val);
    EXPECT_EQ(r.status, 0) << r.err;
    return " --data " + train + " --val-data " + val + " ";
  }();
  return flags;
}

}  // namespace paci::testing
