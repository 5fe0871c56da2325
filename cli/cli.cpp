// Subcommand table, top-level help, and the one place that turns exceptions into exit codes.
#include "cli/cli.hpp"

#include <fmt/format.h>
#include <iostream>

#include "cli/common.hpp"
#include "exec/remote.hpp"
#ifdef PACI_HAVE_MPI
#include "exec/mpi/mpi_links.hpp"
#endif
#include "model/blas_kernel.hpp"
#include "model/check.hpp"
#include "schedules/index.hpp"

namespace paci::cli {

const std::vector<Command>& commands() {
  static const std::vector<Command> table = {
      {"schedule",
       "generate a schedule (GPipe, 1F1B, PipeDream, PACI, Zero Bubble, V, DualPipe) as JSON, CSV "
       "or text",
       run_schedule},
      {"validate", "check a schedule file: completeness, optimizer steps, weight policy, deadlock",
       run_validate},
      {"analyze", "static analysis: activations, weight versions, staleness, update delay",
       run_analyze},
      {"simulate", "discrete-event simulation: makespan, bubble, memory, staleness, trace",
       run_simulate},
      {"compare", "simulate every schedule at one (P, M, N) and compare them", run_compare},
      {"sweep", "simulate schedules over grids of P and M, writing CSV", run_sweep},
      {"train", "train the GPT on a schedule with one worker thread per stage", run_train},
      {"calibrate", "measure F, B, U and the transport here; write a cost model", run_calibrate},
      {"fidelity", "calibrate, simulate and run every schedule; compare predicted and measured",
       run_fidelity},
      {"costmodel", "analytic cost model of a GPT split into stages, for paci simulate",
       run_costmodel},
      {"plan", "the fastest training configuration on a GPU cluster (or this CPU), searched",
       run_plan},
      {"data", "tokenize text into llm.c token shards, inspect shards", run_data},
  };
  return table;
}

bool given(const po::variables_map& vm, const char* name) {
  return vm.count(name) && !vm[name].defaulted();
}

std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  while (true) {
    const std::size_t comma = std::min(text.find(',', pos), text.size());
    out.push_back(text.substr(pos, comma - pos));
    if (comma == text.size()) return out;
    pos = comma + 1;
  }
}

std::vector<long long> parse_count_list(const std::string& text, const std::string& flag,
                                        long long at_most) {
  std::vector<long long> out;
  for (const std::string& item : split_commas(text)) {
    std::size_t used = 0;
    long long value = 0;
    try {
      value = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (item.empty() || used != item.size() || value < 1 || value > at_most)
      throw UsageError(fmt::format("--{} '{}': '{}' is not a whole number from 1 to {}", flag, text,
                                   item, at_most));
    out.push_back(value);
  }
  return out;
}

void check_chunks_flag(std::int32_t chunks) {
  if (chunks < 1)
    throw UsageError(
        fmt::format("--chunks must be at least 1 (model stages per device), got {}", chunks));
}

bool parse_options(const std::string& command, const std::string& usage,
                   const po::options_description& options,
                   const po::positional_options_description& positional,
                   const std::vector<std::string>& args, po::variables_map& vm) {
  po::options_description all;
  all.add_options()("help,h", "show this help");
  all.add(options);
  try {
    po::store(po::command_line_parser(args).options(all).positional(positional).run(), vm);
    if (vm.count("help")) {
      std::cout << "usage: paci " << command << " " << usage << "\n\n" << all << "\n";
      return false;
    }
    po::notify(vm);
  } catch (const po::error& e) {
    throw UsageError(e.what());
  }
  return true;
}

namespace {

void print_help() {
  std::cout << "paci — pipeline-parallel schedules: generate, validate, analyse, simulate\n\n"
               "usage: paci <command> [options]   (paci <command> --help for its options)\n"
               "       paci --version               (and the backends this build has)\n\n"
               "commands:\n";
  for (const auto& c : commands()) std::cout << fmt::format("  {:<10} {}\n", c.name, c.summary);
  std::cout << "\nexit status: 0 success, 2 bad usage or bad input, 1 failure while running\n";
}

// The version, what this build can run (paci train --device, one process per GPU or per device
// on CPUs), and the BLAS kernel this process runs.
void print_version() {
  std::cout << "paci " << PACI_VERSION << "\nbackends: cpu"
#ifdef PACI_HAVE_CUDA
            << ", cuda"
#endif
#ifdef PACI_HAVE_NCCL
            << ", nccl (one process per GPU)"
#endif
#ifdef PACI_HAVE_MPI
            << ", mpi (one process per device on CPUs: " << exec::mpi::Session::library() << ")"
#endif
            << "\n"
            << "blas: " << model::describe(model::blas_identity()) << "\n";
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    print_help();
    return 2;
  }
  if (args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    print_help();
    return 0;
  }
  if (args[0] == "--version") {
    print_version();
    return 0;
  }
  const std::string name = args[0];
  const Command* command = nullptr;
  for (const auto& c : commands())
    if (c.name == name) command = &c;
  if (command == nullptr) {
    std::cerr << fmt::format("paci: error: unknown command '{}' (see paci --help)\n", name);
    return 2;
  }
  args.erase(args.begin());
  try {
    return command->run(args);
  } catch (...) {
    return report_failure(name, std::current_exception());
  }
}

int report_failure(const std::string& command, std::exception_ptr error, bool print) {
  try {
    std::rethrow_exception(error);
  } catch (const exec::QuietExit& e) {
    return e.exit_code;  // said already, by this process or the one that failed
  } catch (const UsageError& e) {
    if (print)
      std::cerr << fmt::format("paci {}: error: {} (see paci {} --help)\n", command, e.what(),
                               command);
    return 2;
  } catch (const InputError& e) {
    if (print) std::cerr << fmt::format("paci {}: error: {}\n", command, e.what());
    return 2;
  } catch (const std::exception& e) {
    if (print) std::cerr << fmt::format("paci {}: failed: {}\n", command, e.what());
    return 1;
  }
}

}  // namespace paci::cli
