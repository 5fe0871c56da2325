// BinaryReader and AtomicWriter over stdio and POSIX (mkstemp, fsync, rename), and zlib's CRC-32.
// A checkpoint is durable once commit() returns: data and the folder entry are both fsynced.
#include "model/checkpoint_io.hpp"
#include "model/check.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <stdexcept>
#include <vector>

namespace paci::model {

std::string describe_shape(const GptConfig& config) {
  std::string text =
      fmt::format("layers {}, heads {}, d_model {}, max_seq_len {}, vocab {}", config.layers,
                  config.heads, config.d_model, config.max_seq_len, config.vocab);
  return text + describe_moe(config.moe);
}

std::string describe_moe(const MoeConfig& m) {
  if (!m.enabled()) return "";
  return fmt::format(", {} experts of width {}, top-{}{}, capacity factor {}, aux loss {}",
                     m.experts, m.hidden, m.top_k, m.shared_expert ? " and a shared one" : "",
                     m.capacity_factor, m.aux_loss_coef);
}

std::uint32_t crc32_update(std::uint32_t crc, const void* data, std::size_t bytes) {
  // zlib returns its initial value (0) for a null buffer, which an empty span may hold: the CRC
  // so far would be lost.
  if (bytes == 0) return crc;
  return static_cast<std::uint32_t>(
      ::crc32_z(crc, static_cast<const Bytef*>(data), static_cast<z_size_t>(bytes)));
}

// ---- BinaryReader -------------------------------------------------------------------------------

BinaryReader::BinaryReader(std::string path) : path_(std::move(path)) {
  file_ = std::fopen(path_.c_str(), "rb");
  if (file_ == nullptr) {
    throw InputError(fmt::format("cannot open {}: {}", path_, std::strerror(errno)));
  }
  struct stat info {};
  if (::fstat(::fileno(file_), &info) != 0 || !S_ISREG(info.st_mode)) {
    std::fclose(file_);
    throw InputError(fmt::format("cannot open {}: not a regular file", path_));
  }
  size_bytes_ = static_cast<std::size_t>(info.st_size);
}

BinaryReader::~BinaryReader() {
  std::fclose(file_);
}

void BinaryReader::read(void* data, std::size_t bytes, std::string_view what) {
  if (bytes == 0) return;  // an empty buffer's data() may be null, which fread must not get
  if (bytes > size_bytes_ - position_ ||
      std::fread(data, 1, bytes, file_) != bytes) {  // the size check makes fread's a read error
    throw InputError(fmt::format("{}: truncated: {} needs {} bytes at offset {}, the file has {}",
                                 path_, what, bytes, position_, size_bytes_));
  }
  position_ += bytes;
}

void BinaryReader::seek(std::size_t offset) {
  if (offset > size_bytes_ || ::fseeko(file_, static_cast<off_t>(offset), SEEK_SET) != 0) {
    throw InputError(
        fmt::format("{}: cannot seek to offset {} of {} bytes", path_, offset, size_bytes_));
  }
  position_ = offset;
}

std::size_t checked_size(std::size_t a, char op, std::size_t b, std::string_view overflow_message) {
  std::size_t result = 0;
  if (op == '*' ? __builtin_mul_overflow(a, b, &result) : __builtin_add_overflow(a, b, &result))
    throw InputError(std::string(overflow_message));
  return result;
}

// ---- AtomicWriter -------------------------------------------------------------------------------

AtomicWriter::AtomicWriter(std::string path) : path_(std::move(path)) {
  std::vector<char> name(path_.begin(), path_.end());
  const std::string suffix = fmt::format(".tmp.{}.XXXXXX", ::getpid());
  name.insert(name.end(), suffix.begin(), suffix.end());
  name.push_back('\0');
  const int fd = ::mkstemp(name.data());
  if (fd < 0) fail(errno);
  temp_path_ = name.data();
  ::fchmod(fd, 0644);  // mkstemp creates 0600; a checkpoint is as readable as any output file
  file_ = ::fdopen(fd, "wb");
  if (file_ == nullptr) {
    const int error_number = errno;
    ::close(fd);
    fail(error_number);
  }
}

AtomicWriter::~AtomicWriter() {
  if (file_ != nullptr) std::fclose(file_);
  if (!temp_path_.empty()) std::remove(temp_path_.c_str());
}

void AtomicWriter::fail(int error_number) {
  if (file_ != nullptr) std::fclose(file_);
  file_ = nullptr;
  if (!temp_path_.empty()) std::remove(temp_path_.c_str());
  temp_path_.clear();
  throw std::runtime_error(fmt::format("cannot write {}: {}", path_, std::strerror(error_number)));
}

void AtomicWriter::write(const void* data, std::size_t bytes) {
  if (file_ == nullptr) fail(EBADF);
  if (bytes == 0) return;  // an empty buffer's data() may be null, which fwrite must not get
  if (std::fwrite(data, 1, bytes, file_) != bytes) fail(errno);
  crc_ = crc32_update(crc_, data, bytes);
  bytes_written_ += bytes;
}

void AtomicWriter::write_zeros(std::size_t bytes) {
  static constexpr std::array<char, 4096> kZeros{};
  while (bytes > 0) {
    const std::size_t n = std::min(bytes, kZeros.size());
    write(kZeros.data(), n);
    bytes -= n;
  }
}

void AtomicWriter::remove_stale_temporaries() const {
  // PATH.tmp.<pid>.XXXXXX, a regular file, of a process that no longer exists: what a writer
  // killed mid-write left. A live writer's (another process saving to the same path) is kept.
  const std::filesystem::path target(path_);
  const std::string prefix = target.filename().string() + ".tmp.";
  std::filesystem::path folder = target.parent_path();
  if (folder.empty()) folder = ".";
  std::error_code ec;
  for (std::filesystem::directory_iterator it(folder, ec), end; !ec && it != end;
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!name.starts_with(prefix)) continue;
    const std::string rest = name.substr(prefix.size());  // <pid>.XXXXXX
    const std::size_t dot = rest.find('.');
    if (dot == std::string::npos || dot == 0 || rest.size() - dot - 1 != 6 ||
        rest.find_first_not_of("0123456789") != dot)
      continue;
    const long pid = std::strtol(rest.substr(0, dot).c_str(), nullptr, 10);
    std::error_code status_error;
    if (pid <= 0 || pid > std::numeric_limits<pid_t>::max() ||
        !std::filesystem::is_regular_file(
            std::filesystem::symlink_status(it->path(), status_error)))
      continue;
    if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;  // alive, or unknown
    std::error_code ignored;
    std::filesystem::remove(it->path(), ignored);
  }
}

void AtomicWriter::commit() {
  if (file_ == nullptr) fail(EBADF);
  if (std::fflush(file_) != 0 || ::fsync(::fileno(file_)) != 0) fail(errno);
  const int closed = std::fclose(file_);
  file_ = nullptr;
  if (closed != 0) fail(errno);
  if (std::rename(temp_path_.c_str(), path_.c_str()) != 0) fail(errno);
  temp_path_.clear();
  remove_stale_temporaries();
  // Make the rename itself durable; a folder that cannot be opened only loses that guarantee.
  std::string folder = std::filesystem::path(path_).parent_path().string();
  if (folder.empty()) folder = ".";
  const int dir = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
}

}  // namespace paci::model
