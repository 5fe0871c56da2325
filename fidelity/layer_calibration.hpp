// paci calibrate --per-layer: the pieces of a GPT's stages — a layer, what the embedding adds to
// the first stage and the head to the last — timed alone on this machine for every number of
// threads a stage gets when 1, 2 or 4 stage threads share its cores, with the slowdown of k of
// them computing at once and the link between them: a per-layer calibration (paci.layers/1) from
// which paci plan costs any partition of the layers over the stage threads.
#pragma once

#include <string>

#include "exec/calibrate.hpp"
#include "plan/cpu/layers.hpp"

namespace paci::fidelity {

// `config`'s model, batch, data and optimizer; its ranges and threads are replaced. Needs at
// least 3 layers (a first, a middle and a last stage of one layer each); InputError otherwise.
// `max_devices`: the most stage threads planned (4).
plan::LayerCalibration calibrate_layers(const exec::ExecConfig& config,
                                        const exec::CalibrationOptions& options, std::int32_t cores,
                                        std::int32_t max_devices, std::string description);

}  // namespace paci::fidelity
