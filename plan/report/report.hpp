// An evaluated plan for people and for files: a few lines of text, the paci.plan/1 JSON, the
// simulated steps as a timeline with each action's collectives, recomputation and reduction drawn
// inside it, and the schedule and cost model that paci simulate turns back into the plan's time.
#pragma once

#include <string>
#include <vector>

#include "plan/evaluate/evaluate.hpp"
#include "plan/search/search.hpp"
#include "traces/report.hpp"
#include "traces/timeline.hpp"

namespace paci::plan {

inline constexpr std::string_view kPlanFormatTag = "paci.plan/1";

// One plan's keys: kind, tp, pp, dp, chunks, microbatch_size, microbatches, recompute,
// sequence_parallel, distributed_optimizer, overlap_grad_reduce, attention, step_s, tokens_per_s,
// model_tflops_per_gpu, mfu, bubble_ratio, peak_memory_bytes, memory_limit_bytes, fits,
// memory_per_stage (per pipeline device), max_staleness, and a per-stage breakdown.
ordered_json plan_json(const PlanResult& plan);
// {"format": "paci.plan/1", "model": {...}, "cluster": {...}, "gpus", "global_batch",
//  "plans": [...]} (the model and cluster of the first plan).
ordered_json plans_document(const std::vector<PlanResult>& plans);

// A search's paci.plan/1 document: the model and cluster, "plans" (fastest first), "frontier",
// "rejected" (counts by reason), "search" (configurations, simulated, pruned, seconds, jobs,
// memory_limit_bytes, max_staleness) and, when nothing fit, "smallest" and "alternatives".
ordered_json search_document(const SearchResult& result, const SearchSpace& space,
                             std::int32_t max_staleness);
// The search for people: what was searched and how fast, the top plans, the frontier, why the
// others lost, and the best synchronous plan against the best asynchronous one, spelled out.
std::string search_text(const SearchResult& result, const SearchSpace& space);
// One line when nothing fit: the smallest peak found and what another knob would make of it.
std::string nothing_fits(const SearchResult& result);
// The frontier as CSV: a header, then one plan per line (its knobs and numbers).
std::string frontier_csv(const std::vector<PlanResult>& frontier);

// A few lines: the configuration, step and throughput, memory (and by how much it does not fit),
// the per-stage breakdown of one micro-batch.
std::string plan_text(const PlanResult& plan);

// The simulated timeline (evaluate with record_timeline) with phases inside each action: the
// tensor-parallel collectives and recomputation of an F or B (drawn as one slice each at the
// action's end), the optimizer step and the data-parallel reduction of a U.
Timeline plan_timeline(const PlanResult& plan, const SimResult& simulated);

// DIR/schedule.json, DIR/costmodel.json and DIR/plan.json (the folder is created):
// `paci simulate DIR/schedule.json --cost DIR/costmodel.json` gives the plan's makespan.
void write_plan_files(const PlanResult& plan, const std::string& dir);

// paci plan -o DIR: write_plan_files, then `document` as DIR/plan.json, the timeline as
// DIR/trace.json, the frontier as JSON and CSV and its plot (DIR/frontier.svg). Returns a note when
// the plot could not be drawn, else "".
std::string write_plan_outputs(const PlanResult& best, const Timeline& timeline,
                               const ordered_json& document,
                               const std::vector<PlanResult>& frontier, const std::string& dir);

}  // namespace paci::plan
