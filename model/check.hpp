// The model library's error types and check macro: a failed check throws ModelError whose
// message names the file, the line, the failing expression and a formatted explanation.
// Everything in paci::model reports bad shapes, ranges and states this way (never asserts).
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>
#include <utility>

#include "base/errors.hpp"

namespace paci::model {

// what(): "file:line: check failed: expression: explanation" (for bug reports); explanation():
// the explanation alone (for a user whose input tripped the check).
class ModelError : public std::runtime_error {
 public:
  explicit ModelError(const std::string& what, std::string explanation = {})
      : std::runtime_error(what),
        explanation_(explanation.empty() ? what : std::move(explanation)) {}
  const std::string& explanation() const { return explanation_; }

 private:
  std::string explanation_;
};

// Bad input from the user's side (a missing or malformed data, model or checkpoint file, an
// impossible request): paci's one InputError (base/errors.hpp); ModelError, a broken internal
// invariant, exits 1.
using paci::InputError;

[[noreturn]] inline void fail_check(const char* file, int line, const char* expression,
                                    const std::string& message) {
  throw ModelError(fmt::format("{}:{}: check failed: {}: {}", file, line, expression, message),
                   message);
}

}  // namespace paci::model

// PACI_MODEL_CHECK(n > 0, "batch must be positive, got {}", n);
#define PACI_MODEL_CHECK(condition, ...)                                                     \
  do {                                                                                       \
    if (!(condition)) {                                                                      \
      ::paci::model::fail_check(__FILE__, __LINE__, #condition, ::fmt::format(__VA_ARGS__)); \
    }                                                                                        \
  } while (false)
