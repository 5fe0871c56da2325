// The error a user's input causes — a missing or malformed file, a flag out of range, an
// impossible configuration — thrown with one line naming the input and the problem, by every
// folder; the paci command prints that line and exits 2. UsageError is the kind a command's flags
// cause (the command adds where its help is). A broken internal invariant is another type
// (model::ModelError, std::logic_error) and exits 1.
#pragma once

#include <stdexcept>

namespace paci {

struct InputError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct UsageError : InputError {
  using InputError::InputError;
};

}  // namespace paci
