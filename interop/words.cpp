// shell_quote, shell_split.
#include "interop/words.hpp"

#include <fmt/format.h>

#include "base/errors.hpp"

namespace paci::interop {

namespace {

bool plain(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
         std::string_view("_@%+=:,./-").find(c) != std::string_view::npos;
}

}  // namespace

std::string shell_quote(std::string_view word) {
  bool simple = !word.empty();
  for (const char c : word) simple = simple && plain(c);
  if (simple) return std::string(word);
  std::string out = "'";
  for (const char c : word) {
    if (c == '\'')
      out += "'\\''";
    else
      out += c;
  }
  return out + "'";
}

std::string shell_join(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& w : words) {
    if (!out.empty()) out += ' ';
    out += shell_quote(w);
  }
  return out;
}

std::vector<std::string> shell_split(std::string_view text, std::string_view what) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  const auto refuse_expansion = [&](char c) {
    throw InputError(fmt::format(
        "{}: '{}' asks the shell to expand something; paci reads the words as given (write the "
        "value itself)",
        what, c));
  };
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      if (in_word) words.push_back(std::move(word));
      word.clear();
      in_word = false;
    } else if (c == '#' && !in_word) {  // a comment, to the end of the line
      const std::size_t end = text.find('\n', i);
      i = end == std::string_view::npos ? text.size() : end;
    } else if (c == '\\') {
      if (i + 1 >= text.size()) throw InputError(fmt::format("{}: ends with a backslash", what));
      if (text[++i] != '\n') {
        word += text[i];
        in_word = true;
      }
    } else if (c == '\'') {
      const std::size_t end = text.find('\'', i + 1);
      if (end == std::string_view::npos)
        throw InputError(fmt::format("{}: a single quote is not closed", what));
      word.append(text.substr(i + 1, end - i - 1));
      i = end;
      in_word = true;
    } else if (c == '"') {
      std::size_t j = i + 1;
      for (; j < text.size() && text[j] != '"'; ++j) {
        if (text[j] == '$' || text[j] == '`') refuse_expansion(text[j]);
        if (text[j] == '\\' && j + 1 < text.size() &&
            std::string_view("\"\\$`").find(text[j + 1]) != std::string_view::npos)
          ++j;
        word += text[j];
      }
      if (j >= text.size()) throw InputError(fmt::format("{}: a double quote is not closed", what));
      i = j;
      in_word = true;
    } else if (c == '$' || c == '`') {
      refuse_expansion(c);
    } else {
      word += c;
      in_word = true;
    }
  }
  if (in_word) words.push_back(std::move(word));
  return words;
}

std::string env_comment(const std::vector<std::pair<std::string, std::string>>& env) {
  if (env.empty()) return "";
  std::string out = " (environment:";
  for (const auto& [name, value] : env) out += fmt::format(" {}={}", name, value);
  return out + ")";
}

}  // namespace paci::interop
