// Format names, format detection, input checks (empty, binary), reading from files or stdin,
// atomic writing, and the dispatch to the JSON / CSV / text readers and writers. Also the helpers
// every format shares (fast action writing, token parsing that recognises PyTorch's actions).
#include "schedules/formats.hpp"

#include <unistd.h>

#include <fmt/format.h>
#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <system_error>

#include "schedules/format_rows.hpp"

namespace paci {

namespace detail {

std::string_view trim(std::string_view text) {
  while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
  while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
  return text;
}

void fail(std::string_view source, std::string_view message) {
  throw InputError(fmt::format("{}: {}", source, message));
}

void check_metadata_in(const Schedule& schedule, std::string_view source) {
  try {
    check_metadata(schedule);
  } catch (const InputError& e) {
    fail(source, e.what());
  }
}

void append_int(std::string& out, std::int64_t value) {
  char buffer[24];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  out.append(buffer, result.ptr);
}

void append_action(std::string& out, const Action& action) {
  append_int(out, action.stage);
  out.push_back(kind_letter(action.kind));
  if (action.kind != ActionKind::U) append_int(out, action.microbatch);
}

std::size_t append_cell(std::string& out, const std::vector<Action>& list, std::size_t i) {
  if (list[i].overlap != Overlap::first || i + 1 >= list.size() ||
      list[i + 1].overlap != Overlap::second) {
    append_action(out, list[i]);
    return 1;
  }
  out.push_back('(');
  append_action(out, list[i]);
  out.push_back(';');
  append_action(out, list[i + 1]);
  out += ")OVERLAP_F_B";
  return 2;
}

// True when content is valid UTF-8 without NUL bytes (no overlongs, surrogates or > U+10FFFF).
bool is_text(std::string_view content) {
  const auto* p = reinterpret_cast<const unsigned char*>(content.data());
  const auto* const end = p + content.size();
  while (p < end) {
    const unsigned char c = *p;
    if (c >= 0x01 && c < 0x80) {
      ++p;
      continue;
    }
    int extra = 0;
    unsigned char low = 0x80, high = 0xBF;  // allowed range of the second byte
    if (c >= 0xC2 && c <= 0xDF) {
      extra = 1;
    } else if (c >= 0xE0 && c <= 0xEF) {
      extra = 2;
      if (c == 0xE0) low = 0xA0;
      if (c == 0xED) high = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      extra = 3;
      if (c == 0xF0) low = 0x90;
      if (c == 0xF4) high = 0x8F;
    } else {
      return false;  // NUL, a stray continuation byte, or a byte never used in UTF-8
    }
    if (end - p <= extra) return false;
    if (p[1] < low || p[1] > high) return false;
    for (int i = 2; i <= extra; ++i)
      if (p[i] < 0x80 || p[i] > 0xBF) return false;
    p += extra + 1;
  }
  return true;
}

namespace {

// PyTorch pipelining's non-compute actions: <stage><NAME>[<microbatch>].
bool is_pytorch_non_compute(std::string_view token) {
  static constexpr std::array<std::string_view, 10> kNames = {
      "UNSHARD", "RESHARD",     "SEND_F",        "RECV_F",        "SEND_B",
      "RECV_B",  "REDUCE_GRAD", "SEND_F_RECV_B", "SEND_B_RECV_F", "WAIT_REDUCE_GRAD"};
  std::size_t begin = 0;
  while (begin < token.size() && token[begin] >= '0' && token[begin] <= '9') ++begin;
  std::size_t end = token.size();
  while (end > begin && token[end - 1] >= '0' && token[end - 1] <= '9') --end;
  if (begin == 0) return false;
  const std::string_view name = token.substr(begin, end - begin);
  return std::find(kNames.begin(), kNames.end(), name) != kNames.end();
}

}  // namespace

void parse_token(std::string_view token, std::vector<Action>& out) {
  try {
    parse_cell(token, out);
  } catch (const InputError&) {
    if (is_pytorch_non_compute(token))
      throw InputError(
          fmt::format("unsupported action '{}' (paci reads compute-only schedules)", token));
    throw;
  }
}

}  // namespace detail

namespace {

constexpr std::string_view kUtf8Bom = "\xEF\xBB\xBF";

std::string_view strip_bom(std::string_view content) {
  if (content.substr(0, kUtf8Bom.size()) == kUtf8Bom) content.remove_prefix(kUtf8Bom.size());
  return content;
}

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

// Reads all of `file`; throws InputError naming the source on a read error.
std::string read_all(std::FILE* file, std::string_view source, std::size_t size_hint) {
  std::string content;
  content.reserve(size_hint);
  char buffer[1 << 16];
  while (true) {
    const std::size_t n = std::fread(buffer, 1, sizeof buffer, file);
    content.append(buffer, n);
    if (n < sizeof buffer) break;
  }
  if (std::ferror(file)) {
    const int err = errno;
    detail::fail(source, fmt::format("cannot read: {}", std::strerror(err)));
  }
  return content;
}

}  // namespace

std::string_view to_string(ScheduleFormat format) {
  switch (format) {
    case ScheduleFormat::json:
      return "json";
    case ScheduleFormat::csv:
      return "csv";
    case ScheduleFormat::text:
      return "text";
    case ScheduleFormat::pytorch:
      return "pytorch";
  }
  return "?";
}

ScheduleFormat parse_schedule_format(std::string_view text) {
  if (text == "json") return ScheduleFormat::json;
  if (text == "csv") return ScheduleFormat::csv;
  if (text == "text") return ScheduleFormat::text;
  if (text == "pytorch") return ScheduleFormat::pytorch;
  throw InputError(
      fmt::format("unknown schedule format '{}' (expected json, csv, text or pytorch)", text));
}

std::string write_schedule(const Schedule& schedule, ScheduleFormat format) {
  switch (format) {
    case ScheduleFormat::json:
      return detail::write_json(schedule);
    case ScheduleFormat::csv:
      return detail::write_csv(schedule);
    case ScheduleFormat::text:
      return detail::write_text(schedule);
    case ScheduleFormat::pytorch:
      return detail::write_pytorch_csv(schedule);
  }
  throw std::logic_error("write_schedule: unknown format");
}

Schedule parse_schedule(std::string_view content, ScheduleFormat format, std::string_view source) {
  if (!detail::is_text(content)) detail::fail(source, "binary file, not a schedule");
  content = strip_bom(content);
  if (detail::trim(content).empty()) detail::fail(source, "empty file");
  switch (format) {
    case ScheduleFormat::json:
      return detail::parse_json(content, source);
    case ScheduleFormat::csv:
    case ScheduleFormat::pytorch:
      return detail::parse_csv(content, source);
    case ScheduleFormat::text:
      return detail::parse_text(content, source);
  }
  throw std::logic_error("parse_schedule: unknown format");
}

ScheduleFormat detect_schedule_format(std::string_view path, std::string_view content) {
  const std::string extension = lower(std::filesystem::path(path).extension().string());
  if (extension == ".json") return ScheduleFormat::json;
  if (extension == ".csv") return ScheduleFormat::csv;
  if (extension == ".txt" || extension == ".text") return ScheduleFormat::text;

  content = strip_bom(content);
  const std::string_view trimmed = detail::trim(content);
  if (!trimmed.empty() && trimmed.front() == '{') return ScheduleFormat::json;
  std::size_t pos = 0;
  while (pos < content.size()) {
    std::size_t end = content.find('\n', pos);
    if (end == std::string_view::npos) end = content.size();
    const std::string_view line = detail::trim(content.substr(pos, end - pos));
    pos = end + 1;
    if (line.empty() || line.front() == '#') continue;
    return line.find(',') != std::string_view::npos ? ScheduleFormat::csv : ScheduleFormat::text;
  }
  return ScheduleFormat::text;
}

void throw_json_error(std::string_view content, std::string_view source,
                      const nlohmann::json::exception& error) {
  const auto* parse = dynamic_cast<const nlohmann::json::parse_error*>(&error);
  if (parse == nullptr) {  // e.g. out_of_range: "number overflow parsing '1e999'"
    std::string_view what = error.what();
    if (const std::size_t close = what.find("] "); close != std::string_view::npos)
      what.remove_prefix(close + 2);
    detail::fail(source, fmt::format("malformed JSON ({})", what));
  }
  const auto& e = *parse;
  // e.byte counts the bytes read, the offending one included.
  const std::size_t pos = std::min<std::size_t>(e.byte == 0 ? 0 : e.byte - 1, content.size());
  const std::string_view before = content.substr(0, pos);
  const auto line = 1 + std::count(before.begin(), before.end(), '\n');
  const std::size_t newline = before.rfind('\n');
  const std::size_t column = pos - (newline == std::string_view::npos ? 0 : newline + 1) + 1;
  // nlohmann's message: "[json.exception.parse_error.101] parse error at ...: DESCRIPTION".
  std::string_view description = e.what();
  const std::size_t at = description.find("parse error");
  const std::size_t colon = description.find(": ", at == std::string_view::npos ? 0 : at);
  if (colon != std::string_view::npos) description.remove_prefix(colon + 2);
  // A parser that stopped past the last byte ran out of input: say the file is truncated.
  std::string_view truncated = "";
  if (e.byte > content.size())
    truncated = description.find("unexpected end of input") == std::string_view::npos
                    ? "truncated: unexpected end of input; "
                    : "truncated: ";
  detail::fail(source, fmt::format("line {}, column {}: malformed JSON ({}{})", line, column,
                                   truncated, description));
}

std::string read_input(const std::string& path) {
  if (path == "-") return read_all(stdin, "<stdin>", 0);
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) {
    const int err = errno;
    detail::fail(path, fmt::format("cannot open: {}", std::strerror(err)));
  }
  std::string content;
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  try {
    content = read_all(file, path, ec ? 0 : static_cast<std::size_t>(size));
  } catch (...) {
    std::fclose(file);
    throw;
  }
  std::fclose(file);
  return content;
}

Schedule read_schedule(const std::string& path) {
  const std::string content = read_input(path);
  const std::string source = path == "-" ? "<stdin>" : path;
  return parse_schedule(content, detect_schedule_format(path == "-" ? "" : path, content), source);
}

void write_schedule_file(const Schedule& schedule, const std::string& path, ScheduleFormat format) {
  const std::string content = write_schedule(schedule, format);
  if (path != "-") {
    write_file_atomic(path, content);
    return;
  }
  if (std::fwrite(content.data(), 1, content.size(), stdout) != content.size() ||
      std::fflush(stdout) != 0) {
    const int err = errno;
    throw std::runtime_error(
        fmt::format("cannot write to standard output: {}", std::strerror(err)));
  }
}

void write_file_atomic(const std::string& path, std::string_view content) {
  const std::string temp = fmt::format("{}.tmp.{}", path, ::getpid());
  std::FILE* file = std::fopen(temp.c_str(), "wb");
  if (file == nullptr) {
    const int err = errno;
    throw std::runtime_error(fmt::format("cannot write {}: {}", path, std::strerror(err)));
  }
  bool ok = std::fwrite(content.data(), 1, content.size(), file) == content.size();
  ok = std::fflush(file) == 0 && ok;
  int err = errno;
  if (std::fclose(file) != 0 && ok) {
    ok = false;
    err = errno;
  }
  std::error_code ec;
  if (!ok) {
    std::filesystem::remove(temp, ec);
    throw std::runtime_error(fmt::format("cannot write {}: {}", path, std::strerror(err)));
  }
  std::filesystem::rename(temp, path, ec);
  if (ec) {
    std::error_code ignored;
    std::filesystem::remove(temp, ignored);
    throw std::runtime_error(fmt::format("cannot write {}: {}", path, ec.message()));
  }
}

}  // namespace paci
