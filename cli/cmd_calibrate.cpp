// paci calibrate — measures per-stage F, B, U and the transport on this machine and writes a cost
// model (paci.costmodel/1) that paci simulate reads.
#include <fmt/format.h>
#include <unistd.h>
#include <iostream>

#include "cli/calibration.hpp"
#include "cli/common.hpp"
#include "cli/load.hpp"
#include "cli/machine.hpp"
#include "cli/train_setup.hpp"
#include "exec/calibrate.hpp"
#include "sim/cost_model.hpp"

namespace paci::cli {

namespace {

std::string describe(const exec::Calibration& c, const TrainSetup& t) {
  char host[256] = "this machine";
  gethostname(host, sizeof host - 1);
  std::string partition;
  for (const auto& r : t.exec.ranges)
    partition += (partition.empty() ? "" : ",") + std::to_string(r.num_layers);
  std::string sharing;
  for (std::size_t k = 1; k < c.slowdown_by_count.size(); ++k)
    sharing += fmt::format("{}{:.3f}", k == 1 ? "" : ",", c.slowdown_by_count[k]);
  return fmt::format(
      "calibrated on {} ({}): gpt L={} d={} heads={} T={} V={} B={}, partition {}, {} thread(s) "
      "per "
      "stage; each stage alone: medians of {} repeats x {} rounds{}; slowdown with 2.. "
      "stages computing at once: {}",
      host, machine_line(), t.exec.config.layers, t.exec.config.d_model, t.exec.config.heads,
      t.exec.seq_len, t.exec.config.vocab, t.exec.batch, partition, t.exec.threads_per_device,
      c.repeats, c.rounds, c.stable ? "" : " (not settled)", sharing.empty() ? "-" : sharing);
}

}  // namespace

int run_calibrate(const std::vector<std::string>& args) {
  TrainFlags f;
  std::string output = "-", details_path;
  exec::CalibrationOptions o;
  bool independent = false;
  po::options_description options("options");
  auto add = options.add_options();
  add("output,o", po::value(&output)->default_value("-"), "cost model JSON (- for stdout)");
  add("repeats", po::value(&o.repeats)->default_value(o.repeats),
      "timed repeats per action and round (median)");
  add("max-rounds", po::value(&o.max_rounds)->default_value(o.max_rounds),
      "rounds of repeats at most, until every median moves by less than 1% in a round");
  add("independent", po::bool_switch(&independent),
      "do not measure how stages slow each other down (every device independent)");
  add("details", po::value(&details_path), "write every measured figure with its spread (JSON)");
  add_train_options(options, f);
  po::variables_map vm;
  if (!parse_options("calibrate",
                     "--stages P [model flags, --partition, --threads] [--repeats R] [-o C]",
                     options, {}, args, vm))
    return 0;
  if (o.repeats == 0 || o.repeats > 100000) throw InputError("--repeats must be 1..100000");
  if (o.max_rounds == 0 || o.max_rounds > 1000) throw InputError("--max-rounds must be 1..1000");
  o.measure_sharing = !independent;
  const TrainSetup t = make_train_setup(f, vm);
  const exec::Calibration c = exec::calibrate(t.exec, o);
  const CostModel model = cost_model_from_calibration(c, describe(c, t));
  check_cost_model(model);
  if (!details_path.empty()) {
    ordered_json details = calibration_json(c);
    details["machine"] = machine_json();
    write_output(details_path, details.dump(2) + "\n");
  }
  write_output(output, write_cost_model(model));
  if (!f.quiet && output != "-")
    std::cerr << fmt::format("paci calibrate: wrote {} ({} stages)\n{}", output,
                             model.stages.size(), calibration_summary(c));
  return 0;
}

}  // namespace paci::cli
