// Internal to schedules/format*.cpp: the per-format entry points, the helpers they share (fast
// action writing, token parsing with PyTorch-aware errors), and the "rows of tokens" reader that
// CSV and text both use. Not part of the public API; include schedules/formats.hpp instead.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "schedules/ir.hpp"

namespace paci::detail {

inline bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f';
}
std::string_view trim(std::string_view text);

// True when text is valid UTF-8 without NUL bytes (no overlongs, surrogates or > U+10FFFF).
bool is_text(std::string_view text);

// Throws InputError("SOURCE: MESSAGE").
[[noreturn]] void fail(std::string_view source, std::string_view message);

// Runs check_metadata(), prefixing its message with the source.
void check_metadata_in(const Schedule& schedule, std::string_view source);

// Appends the text form of an action (same as to_string) without allocating.
void append_action(std::string& out, const Action& action);
// Appends the cell of list[i] (the action, or the overlapped pair it opens, as cell_text writes
// it) and returns how many actions it covers.
std::size_t append_cell(std::string& out, const std::vector<Action>& list, std::size_t i);
void append_int(std::string& out, std::int64_t value);

// Parses one cell (an action, or an overlapped pair) onto `out`. Throws InputError without
// location: "bad action '...' (...)" from parse_action, or "unsupported action '...' (...)" for
// PyTorch's communication/sharding actions.
void parse_token(std::string_view token, std::vector<Action>& out);

// The "# paci.schedule/1 kind=... placement=..." line (no newline).
std::string metadata_header(const Schedule& schedule);

// One token of a row: its text and its 1-based position for error messages.
struct Cell {
  std::string_view text;
  std::int32_t index = 0;
};

// What differs between CSV and text: how a line splits into tokens, and what a line and a token
// are called in error messages ("row"/"cell" or "line"/"token").
struct RowsDialect {
  std::string_view line_word;
  std::string_view token_word;
  void (*split)(std::string_view line, std::vector<Cell>& cells);  // clears cells first
};

// Reads comment/header/device lines, infers missing metadata and applies the legacy B+W rule.
Schedule parse_rows(std::string_view content, const RowsDialect& dialect, std::string_view source);

std::string write_json(const Schedule& schedule);
Schedule parse_json(std::string_view content, std::string_view source);
std::string write_csv(const Schedule& schedule);
Schedule parse_csv(std::string_view content, std::string_view source);
std::string write_text(const Schedule& schedule);
// PyTorch pipelining's compute-only CSV: no header, one row per rank, no U (PyTorch steps the
// optimizer after the schedule). InputError with pytorch_refusal()'s line when it cannot run.
std::string write_pytorch_csv(const Schedule& schedule);
Schedule parse_text(std::string_view content, std::string_view source);

}  // namespace paci::detail
