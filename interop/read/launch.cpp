// split_launch: a launch's words, the launcher's apart from the tool's.
#include "interop/read/launch.hpp"

#include <fmt/format.h>

#include "base/errors.hpp"
#include "interop/read/options.hpp"

namespace paci::interop {

namespace {

bool is_assignment(const std::string& w) {
  const auto eq = w.find('=');
  if (eq == std::string::npos || eq == 0 || w.starts_with("-")) return false;
  for (std::size_t i = 0; i < eq; ++i)
    if (!(std::isalnum(static_cast<unsigned char>(w[i])) || w[i] == '_')) return false;
  return true;
}

std::string base_name(const std::string& w) {
  const auto slash = w.rfind('/');
  return slash == std::string::npos ? w : w.substr(slash + 1);
}

bool is_python(const std::string& w) {
  const std::string b = base_name(w);
  return b == "python" || b.starts_with("python3");
}

// torchrun's options that take no value (torch.distributed.run's parser).
bool torchrun_switch(std::string_view o) {
  for (const char* s :
       {"--standalone", "--no-python", "--no_python", "-m", "--module", "--run-path", "--run_path",
        "--tee", "--virtual-local-rank", "--virtual_local_rank"})
    if (o == s) return true;
  return false;
}

}  // namespace

LaunchWords split_launch(const std::vector<std::string>& words, std::string_view what) {
  LaunchWords out;
  std::size_t i = 0;
  if (i < words.size() && words[i] == "env") ++i;
  while (i < words.size() && is_assignment(words[i])) out.env.push_back(words[i++]);
  if (i >= words.size() || words[i].starts_with("-")) {
    out.options.assign(words.begin() + static_cast<std::ptrdiff_t>(i), words.end());
    return out;
  }
  bool torchrun = base_name(words[i]) == "torchrun";
  out.launcher.push_back(words[i]);
  if (is_python(words[i])) {
    ++i;
    while (i < words.size() && words[i].starts_with("-") && words[i] != "-m")
      out.launcher.push_back(words[i++]);
    if (i + 1 < words.size() && words[i] == "-m") {
      if (words[i + 1] == "torch.distributed.run") {
        torchrun = true;
        out.launcher.push_back(words[i++]);
        out.launcher.push_back(words[i++]);
      } else {
        out.program = words[i + 1];
        i += 2;
      }
    }
  } else {
    ++i;
  }
  if (torchrun) {
    while (i < words.size() && words[i].starts_with("-")) {
      std::string o = words[i++];
      std::optional<std::string> value;
      if (const auto eq = o.find('='); eq != std::string::npos) {
        value = o.substr(eq + 1);
        o.resize(eq);
      } else if (!torchrun_switch(o)) {
        if (i >= words.size())
          throw InputError(fmt::format("{}: torchrun's {} has no value", what, o));
        value = words[i++];
      }
      out.launcher.push_back(o);
      if (value) out.launcher.push_back(*value);
      const auto number = [&](std::optional<std::int64_t>& field) {
        if (value->find_first_not_of("0123456789") != std::string::npos || value->empty())
          throw InputError(
              fmt::format("{}: torchrun's {} is '{}'; paci needs a number (or give paci --gpus)",
                          what, o, *value));
        field = to_integer(*value, o);
      };
      if (o == "--nnodes") number(out.nnodes);
      if (o == "--nproc-per-node" || o == "--nproc_per_node") number(out.nproc_per_node);
    }
    if (i < words.size() && out.program.empty()) out.program = words[i++];
  } else if (out.program.empty()) {
    if (i > 0 && !is_python(out.launcher.back())) {
      out.program = out.launcher.back();  // the program itself (pretrain_gpt.py)
      out.launcher.pop_back();
    } else if (i < words.size()) {
      out.program = words[i++];
    }
  }
  out.options.assign(words.begin() + static_cast<std::ptrdiff_t>(i), words.end());
  return out;
}

std::int64_t launch_gpus(const LaunchContext& c, const LaunchWords& w, std::string_view tool) {
  if (c.gpus && (*c.gpus < 1 || *c.gpus > kLargestInteger))
    throw InputError(fmt::format("--gpus {}: give 1 to 2^31 - 1 GPUs", *c.gpus));
  if (c.gpus) {
    if (w.nproc_per_node && *c.gpus != w.nproc_per_node.value() * w.nnodes.value_or(1))
      throw InputError(fmt::format("--gpus {} but the launch's torchrun starts {} processes",
                                   *c.gpus, w.nproc_per_node.value() * w.nnodes.value_or(1)));
    return *c.gpus;
  }
  if (w.nproc_per_node) {
    const std::int64_t gpus = *w.nproc_per_node * w.nnodes.value_or(1);
    if (gpus < 1 || gpus > kLargestInteger)
      throw InputError(
          fmt::format("the launch's torchrun starts {} processes: paci plans 1 to "
                      "2^31 - 1 GPUs",
                      gpus));
    return gpus;
  }
  throw UsageError(fmt::format(
      "--gpus is missing: {}'s options do not say how many GPUs run it (give --gpus, or the "
      "launch's torchrun --nnodes and --nproc-per-node)",
      tool));
}

}  // namespace paci::interop
