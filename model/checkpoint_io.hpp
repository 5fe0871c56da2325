// Binary file plumbing shared by the checkpoint formats (checkpoint_llmc, checkpoint_state): a
// reader whose every failure is one InputError naming the file, and an atomic writer (temporary
// file in the same folder, fsync, rename) that never leaves a half-written file at the target path.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "model/check.hpp"  // InputError
#include "model/config.hpp"

namespace paci::model {

// "layers 4, heads 4, d_model 128, max_seq_len 128, vocab 256": a shape in error messages.
std::string describe_shape(const GptConfig& config);
// ", E experts of width H, top-K, ..." for a mixture of experts; "" for a dense model.
std::string describe_moe(const MoeConfig& moe);

// zlib's CRC-32 (polynomial 0xEDB88320) of `bytes` continuing from `crc` (0 to start).
std::uint32_t crc32_update(std::uint32_t crc, const void* data, std::size_t bytes);

// a * b (op '*') or a + b (op '+'), or InputError(overflow_message) when it overflows: the sizes a
// file's header claims, checked before anything is sized by them.
std::size_t checked_size(std::size_t a, char op, std::size_t b, std::string_view overflow_message);

class BinaryReader {
 public:
  // Throws InputError "cannot open PATH: reason" (missing file, a directory, no permission).
  explicit BinaryReader(std::string path);
  ~BinaryReader();
  BinaryReader(const BinaryReader&) = delete;
  BinaryReader& operator=(const BinaryReader&) = delete;

  const std::string& path() const { return path_; }
  std::size_t size_bytes() const { return size_bytes_; }
  std::size_t position() const { return position_; }

  // Reads exactly `bytes` at the current position, or throws InputError
  // "PATH: truncated: WHAT needs N bytes at offset O, the file has S".
  void read(void* data, std::size_t bytes, std::string_view what);
  void seek(std::size_t offset);  // offset ≤ size_bytes()

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
  std::size_t size_bytes_ = 0;
  std::size_t position_ = 0;
};

class AtomicWriter {
 public:
  // Creates a unique temporary file next to `path` (PATH.tmp.<pid>.XXXXXX). Throws
  // std::runtime_error "cannot write PATH: reason" here or in any later call; the target path is
  // only ever replaced whole by commit().
  explicit AtomicWriter(std::string path);
  ~AtomicWriter();  // without commit(): closes and removes the temporary file
  AtomicWriter(const AtomicWriter&) = delete;
  AtomicWriter& operator=(const AtomicWriter&) = delete;

  void write(const void* data, std::size_t bytes);
  void write_zeros(std::size_t bytes);
  std::uint32_t crc32() const { return crc_; }  // of every byte written so far
  std::size_t bytes_written() const { return bytes_written_; }

  // Flushes, fsyncs, closes and renames the temporary file onto the target path. Then removes
  // what writers killed mid-write left next to it (PATH.tmp.<pid>.XXXXXX of a process that no
  // longer exists: nothing can remove those when the process dies).
  void commit();

 private:
  void remove_stale_temporaries() const;
  [[noreturn]] void fail(int error_number);

  std::string path_;
  std::string temp_path_;
  std::FILE* file_ = nullptr;
  std::uint32_t crc_ = 0;
  std::size_t bytes_written_ = 0;
};

}  // namespace paci::model
