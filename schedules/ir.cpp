// Action text form, weight policies and metadata checks of the schedule IR.
#include "schedules/ir.hpp"

#include <fmt/format.h>
#include <charconv>

namespace paci {

char kind_letter(ActionKind kind) {
  static constexpr char kLetters[kNumActionKinds] = {'F', 'B', 'I', 'W', 'U'};
  return kLetters[static_cast<int>(kind)];
}

std::string to_string(const Action& action) {
  if (action.kind == ActionKind::U) return fmt::format("{}U", action.stage);
  return fmt::format("{}{}{}", action.stage, kind_letter(action.kind), action.microbatch);
}

namespace {

// Parses a non-negative decimal that fits in int32; returns false otherwise.
bool parse_index(std::string_view digits, std::int32_t& out) {
  if (digits.empty() || digits.size() > 10) return false;
  for (char c : digits)
    if (c < '0' || c > '9') return false;
  std::int64_t value = 0;
  auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (ec != std::errc() || ptr != digits.data() + digits.size() || value > INT32_MAX) return false;
  out = static_cast<std::int32_t>(value);
  return true;
}

}  // namespace

Action parse_action(std::string_view token) {
  auto bad = [&]() {
    return InputError(fmt::format(
        "bad action '{}' (expected <stage><F|B|I|W><microbatch> such as 0F3, or <stage>U)", token));
  };
  if (token.find("OVERLAP_F_B") != std::string_view::npos)
    throw InputError(fmt::format(
        "action '{}' is an overlapped pair (PyTorch's OVERLAP_F_B), not one action", token));
  std::size_t pos = 0;
  while (pos < token.size() && token[pos] >= '0' && token[pos] <= '9') ++pos;
  if (pos == 0 || pos == token.size()) throw bad();
  Action action;
  if (!parse_index(token.substr(0, pos), action.stage)) throw bad();
  const char letter = token[pos];
  const std::string_view rest = token.substr(pos + 1);
  switch (letter) {
    case 'F':
      action.kind = ActionKind::F;
      break;
    case 'B':
      action.kind = ActionKind::B;
      break;
    case 'I':
      action.kind = ActionKind::I;
      break;
    case 'W':
      action.kind = ActionKind::W;
      break;
    case 'U':
      if (!rest.empty()) throw bad();
      action.kind = ActionKind::U;
      action.microbatch = -1;
      return action;
    default:
      throw bad();
  }
  if (!parse_index(rest, action.microbatch)) throw bad();
  return action;
}

void parse_cell(std::string_view token, std::vector<Action>& out) {
  static constexpr std::string_view kPair = "OVERLAP_F_B";
  if (token.empty() || token.front() != '(') {
    out.push_back(parse_action(token));
    return;
  }
  const auto bad = [&](std::string_view why) {
    return InputError(fmt::format(
        "bad overlapped pair '{}': {} (expected (<stage>F<microbatch>;<stage>B<microbatch>){}, "
        "a forward and a full backward, as PyTorch's DualPipeV writes it)",
        token, why, kPair));
  };
  const std::size_t close = token.find(')');
  if (close == std::string_view::npos) throw bad("no closing parenthesis");
  if (token.substr(close + 1) != kPair) throw bad(fmt::format("it does not end in ){}", kPair));
  const std::string_view inside = token.substr(1, close - 1);
  const std::size_t semicolon = inside.find(';');
  if (semicolon == std::string_view::npos || inside.find(';', semicolon + 1) != inside.npos)
    throw bad("it does not hold exactly two actions");
  Action forward = parse_action(inside.substr(0, semicolon));
  Action backward = parse_action(inside.substr(semicolon + 1));
  if (forward.kind != ActionKind::F || backward.kind != ActionKind::B)
    throw bad(fmt::format("{} and {} are not a forward and a full backward", to_string(forward),
                          to_string(backward)));
  forward.overlap = Overlap::first;
  backward.overlap = Overlap::second;
  out.push_back(forward);
  out.push_back(backward);
}

std::string_view to_string(WeightPolicy policy) {
  switch (policy) {
    case WeightPolicy::current:
      return "current";
    case WeightPolicy::stash:
      return "stash";
    case WeightPolicy::double_buffer:
      return "double_buffer";
  }
  return "?";
}

WeightPolicy parse_weight_policy(std::string_view text) {
  if (text == "current") return WeightPolicy::current;
  if (text == "stash") return WeightPolicy::stash;
  if (text == "double_buffer") return WeightPolicy::double_buffer;
  throw InputError(
      fmt::format("unknown weight policy '{}' (expected current, stash or double_buffer)", text));
}

std::size_t Schedule::num_actions() const {
  std::size_t n = 0;
  for (const auto& list : devices) n += list.size();
  return n;
}

bool Schedule::has_overlap() const {
  for (const auto& list : devices)
    for (const Action& a : list)
      if (a.overlap != Overlap::none) return true;
  return false;
}

bool operator==(const Schedule& a, const Schedule& b) {
  if (a.kind != b.kind || a.stages != b.stages || a.placement != b.placement ||
      a.microbatches != b.microbatches || a.steps != b.steps ||
      a.weight_policy != b.weight_policy || a.copies != b.copies ||
      a.devices.size() != b.devices.size())
    return false;
  for (std::size_t d = 0; d < a.devices.size(); ++d) {
    const auto& x = a.devices[d];
    const auto& y = b.devices[d];
    if (x.size() != y.size()) return false;
    for (std::size_t i = 0; i < x.size(); ++i)
      if (!(x[i] == y[i]) || x[i].overlap != y[i].overlap) return false;
  }
  return true;
}

void check_metadata(const Schedule& s) {
  if (s.stages <= 0)
    throw InputError(fmt::format("stage count must be positive, got {}", s.stages));
  if (s.microbatches <= 0)
    throw InputError(
        fmt::format("micro-batches per step must be positive, got {}", s.microbatches));
  if (s.steps <= 0) throw InputError(fmt::format("step count must be positive, got {}", s.steps));
  if (s.total_microbatches() > INT32_MAX)
    throw InputError(fmt::format("{} micro-batches in all is too many", s.total_microbatches()));
  if (static_cast<std::int64_t>(s.placement.size()) != s.stages)
    throw InputError(
        fmt::format("placement lists {} stages, schedule has {}", s.placement.size(), s.stages));
  if (s.devices.empty()) throw InputError("schedule has no devices");
  if (s.copies != 1 && s.copies != 2)
    throw InputError(
        fmt::format("copies must be 1 or 2 (DualPipe's two directions), got {}", s.copies));
  if (s.copies == 2 && (s.stages % 2 != 0 || s.microbatches % 2 != 0))
    throw InputError(fmt::format(
        "two copies need an even stage count and an even number of micro-batches per step (each "
        "copy holds half the stages and runs half the micro-batches), got {} stages and M={}",
        s.stages, s.microbatches));
  std::vector<bool> used(s.devices.size(), false);
  for (std::int32_t stage = 0; stage < s.stages; ++stage) {
    const std::int32_t device = s.placement[static_cast<std::size_t>(stage)];
    if (device < 0 || device >= s.num_devices())
      throw InputError(fmt::format("stage {} is placed on device {}, but there are {} devices",
                                   stage, device, s.num_devices()));
    used[static_cast<std::size_t>(device)] = true;
  }
  for (std::size_t d = 0; d < used.size(); ++d)
    if (!used[d]) throw InputError(fmt::format("device {} holds no stage", d));
  for (std::int32_t stage = 0; stage < s.stages_per_copy() && s.copies == 2; ++stage)
    if (s.placement[static_cast<std::size_t>(stage)] ==
        s.placement[static_cast<std::size_t>(s.twin(stage))])
      throw InputError(fmt::format(
          "stages {} and {} hold the same layers in the two copies but are both on device {}: a "
          "device holding both would hold its layers twice",
          stage, s.twin(stage), s.placement[static_cast<std::size_t>(stage)]));
}

}  // namespace paci
