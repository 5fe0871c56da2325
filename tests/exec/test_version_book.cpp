// VersionBook alone: replaying each stage's own F, B and U in its device order through the book
// gives exactly the versions, updates and peak weight versions the static analysis predicts, for
// every generator. The CPU executor and the CUDA pipeline both rely on this.
#include <gtest/gtest.h>

#include <string>

#include "exec/version_book.hpp"
#include "schedules/analysis.hpp"
#include "schedules/generators.hpp"

namespace paci::exec {
namespace {

void expect_book_matches_analysis(const Schedule& s, const std::string& what) {
  const Analysis want = analyze(s);
  for (std::int32_t stage = 0; stage < s.stages; ++stage) {
    const auto& sa = want.stages[static_cast<std::size_t>(stage)];
    VersionBook book(stage, s.weight_policy, static_cast<std::size_t>(sa.peak_weight_versions - 1),
                     s.steps, s.total_microbatches());
    for (const Action& a : s.devices[static_cast<std::size_t>(s.placement[stage])]) {
      if (a.stage != stage) continue;
      switch (a.kind) {
        case ActionKind::F:
          book.forward(a.microbatch);
          break;
        case ActionKind::B: {
          std::int32_t read = -1;
          book.backward_source(a.microbatch, &read);
          book.backward(a.microbatch, read);
          break;
        }
        case ActionKind::U:
          book.update();
          break;
        default:
          FAIL() << what << ": unexpected " << to_string(a);
      }
    }
    EXPECT_EQ(book.version(), sa.updates) << what << " stage " << stage;
    EXPECT_EQ(static_cast<std::int64_t>(book.peak_weight_versions()), sa.peak_weight_versions)
        << what << " stage " << stage;
    EXPECT_EQ(book.stash_in_use(), 0u) << what << " stage " << stage;
    for (const VersionRecord& r : want.versions) {
      if (r.stage != stage) continue;
      EXPECT_EQ(book.v_f(r.microbatch), r.v_f) << what << " " << stage << "F" << r.microbatch;
      EXPECT_EQ(book.v_b(r.microbatch), r.v_b) << what << " " << stage << "B" << r.microbatch;
      EXPECT_EQ(book.update_of(r.microbatch), r.update)
          << what << " " << stage << "U" << r.microbatch;
    }
  }
}

TEST(VersionBook, ReplayEqualsTheStaticAnalysisForEveryGenerator) {
  for (const char* kind : {"gpipe", "1f1b", "pipedream", "2bw", "paci"})
    for (std::int32_t P : {1, 2, 4, 7})
      for (std::int32_t M : {1, 2, 3, 8}) {
        if (std::string(kind) == "2bw" && M < P) continue;
        const Schedule s = generate_schedule(kind, P, M, 5);
        expect_book_matches_analysis(
            s, std::string(kind) + " P=" + std::to_string(P) + " M=" + std::to_string(M));
      }
}

TEST(VersionBook, RefusesAnUpdateThatWouldNeedAnotherStashedVersion) {
  // Two forwards read version 0; with no stash slot, stashing before the update is impossible.
  VersionBook book(0, WeightPolicy::stash, 0, 2, 2);
  book.forward(0);
  EXPECT_THROW(book.update(), std::runtime_error);
  // Under current weights nothing is kept and the backward reads the new version.
  VersionBook current(0, WeightPolicy::current, 0, 2, 2);
  current.forward(0);
  EXPECT_EQ(current.update(), VersionBook::kCurrent);
  std::int32_t read = -1;
  EXPECT_EQ(current.backward_source(0, &read), VersionBook::kCurrent);
  EXPECT_EQ(read, 1);
}

}  // namespace
}  // namespace paci::exec
