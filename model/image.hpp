// A flat byte image of runtime state that no file format describes field by field: what a
// consistent cut of an asynchronous pipeline keeps of each stage (exec/cut.hpp). One function
// per object writes its image through an ImageWriter; the same function with a counting writer
// (no buffer) sizes it, so the size is known before a run and nothing allocates during it.
// ImageReader reads it back in the same order and throws InputError naming `what` when the
// image is shorter or longer than the object expects.
#pragma once

#include <fmt/format.h>

#include <cstddef>
#include <cstring>
#include <span>
#include <string>
#include <type_traits>
#include <utility>

#include "model/check.hpp"

namespace paci::model {

class ImageWriter {
 public:
  ImageWriter() = default;  // counts only
  explicit ImageWriter(std::span<std::byte> out) : out_(out), counting_(false) {}

  template <class T>
  void put(std::span<const T> values) {
    static_assert(std::is_trivially_copyable_v<T>);
    const std::size_t n = values.size_bytes();
    if (!counting_) {
      PACI_MODEL_CHECK(n <= out_.size() - pos_, "image buffer of {} bytes is too small",
                       out_.size());
      if (n > 0) std::memcpy(out_.data() + pos_, values.data(), n);
    }
    pos_ += n;
  }
  template <class T>
  void put(const T& value) {
    put(std::span<const T>(&value, 1));
  }
  std::size_t size() const { return pos_; }

 private:
  std::span<std::byte> out_;
  std::size_t pos_ = 0;
  bool counting_ = true;
};

class ImageReader {
 public:
  ImageReader(std::span<const std::byte> in, std::string what) : in_(in), what_(std::move(what)) {}

  template <class T>
  void get(std::span<T> values) {
    static_assert(std::is_trivially_copyable_v<T>);
    const std::size_t n = values.size_bytes();
    if (n > in_.size() - pos_)
      throw InputError(fmt::format("{}: image of {} bytes ends early", what_, in_.size()));
    if (n > 0) std::memcpy(values.data(), in_.data() + pos_, n);
    pos_ += n;
  }
  template <class T>
  T get() {
    T value{};
    get(std::span<T>(&value, 1));
    return value;
  }
  // Throws InputError when bytes are left over (the image is of another object).
  void finish() const {
    if (pos_ != in_.size())
      throw InputError(fmt::format("{}: image of {} bytes, {} expected", what_, in_.size(), pos_));
  }
  // For range checks of the values read: InputError naming the image.
  void check(bool condition, const std::string& problem) const {
    if (!condition) throw InputError(fmt::format("{}: {}", what_, problem));
  }

 private:
  std::span<const std::byte> in_;
  std::size_t pos_ = 0;
  std::string what_;
};

}  // namespace paci::model
