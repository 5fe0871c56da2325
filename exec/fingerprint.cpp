// fingerprint(), the schedule's and a training run's fingerprints, and their comparison.
#include "exec/fingerprint.hpp"

#include <fmt/format.h>

#include "exec/remote.hpp"
#include "exec/train_setup.hpp"
#include "schedules/formats.hpp"

namespace paci::exec {

std::uint64_t fingerprint(std::string_view text, std::uint64_t hash) {
  for (const char c : text) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 1099511628211ull;
  }
  return hash;
}

std::uint64_t schedule_fingerprint(const Schedule& schedule) {
  return fingerprint(write_schedule(schedule, ScheduleFormat::text));
}

std::uint64_t run_fingerprint(const TrainSetup& t, const TrainOptions& f) {
  const auto& c = t.exec.config;
  // The shape of every message and of the data; then what decides the collective calls after the
  // run (validation, what is gathered for the outputs) and the numbers (optimizer, LR schedule).
  std::string settings = fmt::format(
      "{} {} {} {} {} {} {} {} {} {} {} {} | {} {} {} {} {} | {} {} {} {} {} {} {} {} {} {}",
      c.layers, c.heads, c.d_model, c.vocab, c.max_seq_len, t.exec.batch, t.exec.seq_len,
      f.precision, t.exec.seed, t.data_seed, t.first_microbatch, f.data_order, f.val_every,
      f.val_microbatches, t.val != nullptr, !f.save_path.empty(), !f.export_path.empty(), f.lr,
      f.min_lr, f.weight_decay, f.beta1, f.beta2, f.eps, f.clip, f.warmup_steps, f.lr_decay,
      t.total_steps);
  const auto& m = c.moe;
  settings += fmt::format(" | moe {} {} {} {} {} {} ep {}", m.experts, m.top_k, m.hidden,
                          m.shared_expert, m.capacity_factor, m.aux_loss_coef, f.ep);
  // The data and the starting weights, by their sizes and names (not their bytes).
  settings += fmt::format(" | {} {} {} {}", t.train ? t.train->size() : 0,
                          t.val ? t.val->size() : 0, f.init_path, f.resume_path);
  for (const auto& r : t.exec.ranges)
    settings += fmt::format(" {}:{}", r.first_layer, r.num_layers);
  return fingerprint(settings, schedule_fingerprint(t.schedule));
}

void check_fingerprints(std::span<const std::uint64_t> prints, std::int32_t local_device) {
  for (std::size_t r = 1; r < prints.size(); ++r) {
    if (prints[r] == prints[0]) continue;
    const std::string why = fmt::format(
        "process {} runs another schedule or other settings than process 0 (fingerprint {:016x} "
        "against {:016x}): give every process the same schedule and flags",
        r, prints[r], prints[0]);
    if (local_device == 0) throw InputError(why);
    throw QuietExit(why, 2);
  }
}

}  // namespace paci::exec
