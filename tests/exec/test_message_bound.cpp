// The lowered program's message_bound() (schedules/lower.hpp), which sizes the GPU pipeline's
// message buffers before a run: no run of any schedule ever has more messages sent and not yet
// received at once, threaded (any timing) or replayed in one thread (each device runs as far as
// it can: the most in flight); and it is never looser than the bound the static analysis gives
// (twice the peak activations of every stage but the last), which sized the buffers before.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <string>

#include "exec/executor.hpp"
#include "exec/partition.hpp"
#include "schedules/analysis.hpp"
#include "schedules/generators.hpp"
#include "schedules/lower.hpp"
#include "synthetic.hpp"

namespace paci::exec {
namespace {

std::int64_t analysis_bound(const Schedule& s) {
  const Analysis a = analyze(s);
  std::int64_t bound = 0;
  for (std::int32_t st = 0; st + 1 < s.stages; ++st)
    bound += 2 * a.stages.at(static_cast<std::size_t>(st)).peak_activations;
  return bound;
}

TEST(MessageBound, NoRunHasMoreMessagesInFlight) {
  for (const std::string kind : {"gpipe", "1f1b", "pipedream", "2bw", "paci", "zb-h1", "zb-h2",
                                 "interleaved", "zb-v", "dualpipev"})
    for (const std::int32_t P : {2, 4})
      for (const std::int32_t M : {1, 4, 8}) {
        Schedule s;
        try {
          s = generate_schedule(kind, P, M, 2, kind == "interleaved" ? 2 : 0);
        } catch (const InputError&) {
          continue;  // a configuration the kind does not have
        }
        if (s.stages > 4) continue;  // the tiny model has 4 blocks
        const std::int64_t bound = message_bound(lower(s));
        EXPECT_LE(bound, analysis_bound(s)) << kind << " P=" << P << " M=" << M;
        for (const bool sequential : {false, true}) {
          SCOPED_TRACE(fmt::format("{} P={} M={}{}", kind, P, M, sequential ? " sequential" : ""));
          ExecConfig c;
          c.config = {.layers = 4, .heads = 2, .d_model = 8, .max_seq_len = 4, .vocab = 64};
          c.batch = 1;
          c.seq_len = 4;
          c.ranges = balanced_partition(c.config, static_cast<std::size_t>(s.stages), 1, 4);
          c.data = testing::synthetic;
          c.sequential = sequential;
          c.record_timeline = false;
          const ExecResult r = Executor(s, c).run();
          EXPECT_GT(r.peak_messages_in_flight, 0);
          EXPECT_LE(r.peak_messages_in_flight, bound);
          EXPECT_EQ(r.message_buffers_preallocated, 0);  // the CPU executor has no pool
        }
      }
}

}  // namespace
}  // namespace paci::exec
