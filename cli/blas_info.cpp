// blas_json and the metrics head line: this process's BLAS identity as JSON.
#include "cli/blas_info.hpp"

namespace paci::cli {

ordered_json blas_json(const model::BlasIdentity& identity) {
  ordered_json j;
  j["library"] = identity.library;
  j["kernel"] = identity.kernel;
  j["chosen_by"] = std::string(model::to_string(identity.chosen_by));
  j["cpu"] = identity.cpu ? std::string(model::to_string(*identity.cpu)) : "not x86";
  if (!identity.requested.empty()) j["requested"] = identity.requested;
  if (!identity.openblas_choice.empty()) j["openblas_choice"] = identity.openblas_choice;
  return j;
}

std::string metrics_head_line(const TrainSetup& t) {
  ordered_json j;
  j["run"] = {{"paci", PACI_VERSION},        {"kind", t.schedule.kind},
              {"stages", t.schedule.stages}, {"microbatches", t.schedule.microbatches},
              {"first_step", t.first_step},  {"last_step", t.last_step}};
  j["blas"] = blas_json(model::blas_identity());
  return j.dump() + "\n";
}

}  // namespace paci::cli
