// Reading and writing schedules: canonical JSON ("format": "paci.schedule/1"), CSV (one row per
// device; PyTorch pipelining's compute-only CSV reads as is) and text (one line per device).
// Every reader throws InputError naming the source, the line or row, and the offending token.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "schedules/ir.hpp"

namespace paci {

// pytorch: PyTorch pipelining's compute-only CSV as its own loader reads it (no header, no U);
// read as csv.
enum class ScheduleFormat { json, csv, text, pytorch };

inline constexpr std::string_view kScheduleFormatTag = "paci.schedule/1";

std::string_view to_string(ScheduleFormat format);
ScheduleFormat parse_schedule_format(std::string_view text);  // "json" | "csv" | "text" | "pytorch"

// Why PyTorch's pipelining runtime cannot run `schedule` as written, in one line, or "" when it
// can: a weight policy other than current, optimizer steps inside the schedule (N > 1, or a
// device computing after its U), a stage off rank s mod P.
std::string pytorch_refusal(const Schedule& schedule);
// Of those, a schedule of two copies of the model (DualPipe), `kind` named.
std::string pytorch_two_copies_refusal(std::string_view kind);

// Serialises deterministically: parse(write(s)) == s, and write(parse(write(s))) == write(s)
// (pytorch: drops the metadata and the U's, and throws InputError with pytorch_refusal()'s line).
std::string write_schedule(const Schedule& schedule, ScheduleFormat format);

// Parses `content` in the given format. `source` names the input in error messages.
Schedule parse_schedule(std::string_view content, ScheduleFormat format, std::string_view source);

// Guesses the format: by extension (.json, .csv, .txt/.text) when `path` has one, else by content
// (a leading '{' is JSON; a comma in the first action line is CSV; otherwise text).
ScheduleFormat detect_schedule_format(std::string_view path, std::string_view content);

// Reads a schedule from a file, or from standard input when path is "-". Rejects empty and
// binary input with a clear InputError. Runs check_metadata() on the result.
Schedule read_schedule(const std::string& path);

// Writes to path atomically (temporary file, then rename), or to standard output for "-".
void write_schedule_file(const Schedule& schedule, const std::string& path, ScheduleFormat format);

// Reads a whole file, or standard input when path is "-". Throws InputError naming the file when
// it cannot be opened or read; checking the content is the caller's job.
std::string read_input(const std::string& path);

// Throws InputError "SOURCE: line L, column C: malformed JSON (...)" for an exception nlohmann
// threw while parsing `content` (saying "truncated" when the input ended too early).
[[noreturn]] void throw_json_error(std::string_view content, std::string_view source,
                                   const nlohmann::json::exception& error);

// Writes bytes to a file atomically: a temporary file in the same folder, then rename.
void write_file_atomic(const std::string& path, std::string_view content);

}  // namespace paci
