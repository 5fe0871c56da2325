// Turning what paci calibrate measured (exec/) into a cost model the simulator reads (sim/), and
// the calibration as JSON and text for people.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "exec/calibrate.hpp"
#include "exec/train_setup.hpp"
#include "sim/cost_model.hpp"
#include "traces/report.hpp"

namespace paci::fidelity {

// Stage durations (alone) and bytes as measured; I and W as timed (half a backward each where
// they were not); the last stage sends no activation and the first no gradient; with a measured
// slowdown, every device on one shared host (CostModel::hosts). `placement`: the device of each
// stage (a schedule's; empty: one device per stage); a device holding several stages (interleaved)
// gets the mean of their measured slowdowns.
CostModel cost_model_from_calibration(const exec::Calibration& calibration, std::string description,
                                      const std::vector<std::int32_t>& placement = {});

// Every measured figure with its spread, for a JSON output (paci calibrate --details, fidelity).
ordered_json calibration_json(const exec::Calibration& calibration);

// One process per device (paci calibrate under mpirun): every pair's measured link in both
// directions (CostModel::links), the median pair as the default link, and the devices grouped into
// one host per node (`nodes`: each device's node; devices on one node share its cores as the
// calibration's stage threads did).
void apply_process_links(CostModel& model, std::span<const exec::PairLinkMeasurement> pairs,
                         std::span<const std::string> nodes);
// The pairs and nodes as JSON (paci calibrate --details; what paci fidelity reads back), and back.
ordered_json process_links_json(std::span<const exec::PairLinkMeasurement> pairs,
                                std::span<const std::string> nodes);
void process_links_from_json(const ordered_json& j, std::vector<exec::PairLinkMeasurement>& pairs,
                             std::vector<std::string>& nodes);
// A line per pair for people.
std::string process_links_summary(std::span<const exec::PairLinkMeasurement> pairs);

// A few lines for people: per stage F, B, U median [min, max], the slowdown per k, the link.
std::string calibration_summary(const exec::Calibration& calibration);

// One line for an unsettled calibration (empty when it settled): which figure still moved, by how
// much in the last round, the spread of its samples, and what that means for a prediction.
std::string settling_note(const exec::Calibration& calibration);

// A calibrated cost model's description: the host and machine, the model's shape and partition,
// the threads per stage, the repeats and rounds, the slowdown of sharing, and whether it settled.
std::string describe_calibration(const exec::Calibration& calibration, const exec::TrainSetup& t);

// paci calibrate: the setup's stages calibrated on this machine (sharing timed up to its
// schedule's devices), the cost model (described; with the links between processes measured over
// MPI when `pairs` and `nodes` are given; checked) and the details (calibration_json, the machine,
// the process links).
struct CalibratedModel {
  exec::Calibration calibration;
  CostModel model;
  ordered_json details;
};
CalibratedModel calibrate_setup(const exec::TrainSetup& t, const exec::CalibrationOptions& options,
                                const std::vector<exec::PairLinkMeasurement>* pairs,
                                const std::vector<std::string>* nodes);

}  // namespace paci::fidelity
