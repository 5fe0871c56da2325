// Shared by the checkpoint tests: a fixture with a private temporary folder, raw file bytes in and
// out, an InputError matcher, and stage sections whose buffers carry distinct bit patterns.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "model/checkpoint_state.hpp"
#include "model/layout.hpp"
#include "schedules/ir.hpp"

namespace paci::model::testing_util {

class CheckpointTest : public testing::Test {
 protected:
  void SetUp() override {
    const auto* info = testing::UnitTest::GetInstance()->current_test_info();
    dir_ = std::filesystem::temp_directory_path() /
           fmt::format("paci_{}_{}_{}", info->test_suite_name(), info->name(), ::getpid());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::filesystem::path dir_;
};

inline std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

inline void write_bytes(const std::string& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Runs fn, expecting an InputError whose message contains every fragment.
inline void expect_input_error(const std::function<void()>& fn,
                               const std::vector<std::string>& fragments) {
  try {
    fn();
    ADD_FAILURE() << "expected InputError containing '" << fragments.front() << "', got no error";
  } catch (const InputError& e) {
    for (const std::string& f : fragments) EXPECT_PRED_FORMAT2(testing::IsSubstring, f, e.what());
  }
}

// Sections for a partition of config's blocks: float i of buffer b of stage s is
// i/8 − (100·s + 10·b), with −0, a denormal, infinity and a NaN payload in floats 0-3, so that
// bits, not values, must survive. Stage s has optimizer_steps 10 + s.
inline std::vector<StageState> make_stages(const GptConfig& config,
                                           const std::vector<std::size_t>& blocks) {
  std::vector<StageState> stages;
  std::size_t first = 0;
  for (std::size_t s = 0; s < blocks.size(); ++s) {
    const ParamLayout layout(config, {first, blocks[s]});
    StageState stage{{first, blocks[s]}, 10 + s, {}, {}, {}};
    std::size_t b = 0;
    for (std::vector<float>* buffer : {&stage.weights, &stage.first_moment, &stage.second_moment}) {
      buffer->resize(layout.size());
      for (std::size_t i = 0; i < buffer->size(); ++i) {
        (*buffer)[i] = static_cast<float>(i) * 0.125f - static_cast<float>(100 * s + 10 * b);
      }
      (*buffer)[0] = -0.0f;
      (*buffer)[1] = std::numeric_limits<float>::denorm_min();
      (*buffer)[2] = std::numeric_limits<float>::infinity();
      const std::uint32_t nan_bits = 0x7fc01234u;
      std::memcpy(&(*buffer)[3], &nan_bits, sizeof nan_bits);
      ++b;
    }
    stages.push_back(std::move(stage));
    first += blocks[s];
  }
  return stages;
}

inline std::vector<StageStateView> views(const std::vector<StageState>& stages) {
  std::vector<StageStateView> out;
  for (const StageState& s : stages) out.push_back(s.view());
  return out;
}

inline bool same_bits(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size_bytes()) == 0;
}

}  // namespace paci::model::testing_util
