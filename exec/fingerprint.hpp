// Fingerprints: what the processes of one launch compare at start-up, so that processes given
// different files or flags refuse to run together instead of exchanging messages of other shapes.
// Every process hashes the same text (64-bit FNV-1a): the schedule's canonical text form, chained
// with the settings a command's processes must share.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "schedules/ir.hpp"

namespace paci::exec {

struct TrainOptions;  // exec/train_setup.hpp
struct TrainSetup;

// 64-bit FNV-1a of `text`, continuing from `hash` (chain calls to fingerprint several parts).
inline constexpr std::uint64_t kFingerprintStart = 14695981039346656037ull;
std::uint64_t fingerprint(std::string_view text, std::uint64_t hash = kFingerprintStart);

// The fingerprint of the schedule's canonical text form.
std::uint64_t schedule_fingerprint(const Schedule& schedule);

// paci train, one process per device: the schedule, then each setting that shapes a message or
// the data (sizes, precision, the partition, seeds, the data position), decides the collective
// calls after the run (validation, --save, --export-llmc) or the numbers (optimizer, LR schedule).
std::uint64_t run_fingerprint(const TrainSetup& t, const TrainOptions& options);

// Every process's fingerprint, in device order. Throws InputError naming the first process that
// differs from process 0 on process 0; the others throw QuietExit (exit code 2), so one line says
// it.
void check_fingerprints(std::span<const std::uint64_t> prints, std::int32_t local_device);

}  // namespace paci::exec
