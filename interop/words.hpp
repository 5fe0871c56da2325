// Shell words: quoting for the launch scripts and --emit's lines, splitting for --from-megatron.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace paci::interop {

// One word as POSIX sh reads it back: as is when it is made of [A-Za-z0-9_@%+=:,./-], else in
// single quotes.
std::string shell_quote(std::string_view word);
std::string shell_join(const std::vector<std::string>& words);  // quoted, space-separated

// Splits a command line as POSIX sh does for words: whitespace outside quotes separates; single
// quotes keep everything; double quotes keep everything but \" \\ \$ \`; a backslash outside
// quotes escapes the next character (and a backslash-newline joins lines); '#' beginning a word
// starts a comment to the end of the line. No expansion: "$X" or
// a backquote gets InputError naming it, as does an unterminated quote. `what` names the input.
std::vector<std::string> shell_split(std::string_view text, std::string_view what);

// " (environment: A=1 B=2)" or "" for none.
std::string env_comment(const std::vector<std::pair<std::string, std::string>>& env);

}  // namespace paci::interop
