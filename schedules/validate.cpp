// validate(): metadata, index (range/placement/duplicates), completeness, optimizer-step structure,
// weight policy, and deadlock freedom via depth-first search on a CSR dependency graph.
#include "schedules/validate.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <boost/graph/compressed_sparse_row_graph.hpp>
#include <boost/graph/depth_first_search.hpp>
#include <utility>

#include "schedules/analysis.hpp"
#include "schedules/dependencies.hpp"
#include "schedules/formats.hpp"
#include "schedules/index.hpp"

namespace paci {
namespace {

using Graph =
    boost::compressed_sparse_row_graph<boost::directedS, boost::no_property, boost::no_property,
                                       boost::no_property, std::uint32_t, std::uint32_t>;
using Vertex = boost::graph_traits<Graph>::vertex_descriptor;
using Edge = boost::graph_traits<Graph>::edge_descriptor;

Action at(const Schedule& s, ActionPos p) {
  return s.devices[static_cast<std::size_t>(p.device)][static_cast<std::size_t>(p.index)];
}

void check_completeness(const Schedule& s, const ActionIndex& index, const DependencyRules& rules) {
  const std::int64_t T = s.total_microbatches();
  for (std::int32_t st = 0; st < s.stages; ++st) {
    for (std::int64_t m64 = 0; m64 < T; ++m64) {
      if (s.copy_of_microbatch(m64) != s.copy_of_stage(st)) continue;  // the other copy's
      const auto m = static_cast<std::int32_t>(m64);
      const ActionPos f = index.find({ActionKind::F, st, m});
      const ActionPos b = index.find({ActionKind::B, st, m});
      const ActionPos i = index.find({ActionKind::I, st, m});
      const ActionPos w = index.find({ActionKind::W, st, m});
      const Action expected_end = rules.backward_end(st, m);
      if (rules.split_backward(st, m) && b.valid())
        throw ScheduleError(
            fmt::format("stage {} splits micro-batch {}'s backward into I and W, but also has {}",
                        st, m, to_string(at(s, b))),
            {b});
      if (!rules.split_backward(st, m) && w.valid())
        throw ScheduleError(
            fmt::format("{} has no matching {}I{}: a W needs its I", to_string(at(s, w)), st, m),
            {w});
      const bool has_end = index.find(expected_end).valid();
      const bool has_read = index.find(rules.backward_read(st, m)).valid();
      if (!f.valid()) {
        std::vector<ActionPos> marks;
        for (ActionPos p : {b, i, w})
          if (p.valid()) marks.push_back(p);
        throw ScheduleError(
            fmt::format("stage {} never runs the forward {}F{} of micro-batch {}", st, st, m, m),
            marks);
      }
      if (!has_end || !has_read) {
        const Action missing = has_read ? expected_end : rules.backward_read(st, m);
        throw ScheduleError(fmt::format("{} has no backward: {} is missing", to_string(at(s, f)),
                                        to_string(missing)),
                            {f});
      }
    }
  }
}

// The j-th U of a stage must follow exactly (j+1)·M backwards of that stage (M / 2 with two
// copies: the step's half that runs on its copy), and there are N.
void check_updates(const Schedule& s, const DependencyRules& rules) {
  const std::int32_t M = s.microbatches / s.copies;
  std::vector<std::int64_t> since_update(static_cast<std::size_t>(s.stages), 0);
  std::vector<std::int32_t> updates(static_cast<std::size_t>(s.stages), 0);
  for (std::int32_t d = 0; d < s.num_devices(); ++d) {
    const auto& list = s.devices[static_cast<std::size_t>(d)];
    for (std::size_t k = 0; k < list.size(); ++k) {
      const Action& a = list[k];
      const auto st = static_cast<std::size_t>(a.stage);
      const ActionPos here{d, static_cast<std::int64_t>(k)};
      if (a.kind == ActionKind::U) {
        if (since_update[st] != M)
          throw ScheduleError(
              fmt::format(
                  "optimizer step {} (update {} of stage {}) follows {} backwards of the "
                  "stage; each step accumulates {}",
                  to_string(a), updates[st] + 1, a.stage, since_update[st],
                  s.copies > 1 ? fmt::format("M/2={} on each copy", M) : fmt::format("M={}", M)),
              {here});
        if (++updates[st] > s.steps)
          throw ScheduleError(
              fmt::format("stage {} has more than N={} optimizer steps", a.stage, s.steps), {here});
        since_update[st] = 0;
      } else if (a == rules.backward_end(a.stage, a.microbatch)) {
        ++since_update[st];
      }
    }
  }
  for (std::int32_t st = 0; st < s.stages; ++st)
    if (updates[static_cast<std::size_t>(st)] != s.steps)
      throw ScheduleError(fmt::format("stage {} has {} optimizer steps ({}U), expected N={}", st,
                                      updates[static_cast<std::size_t>(st)], st, s.steps),
                          {});
}

struct CycleFound {
  Vertex from, to;
};

struct CycleVisitor : boost::default_dfs_visitor {
  std::vector<Vertex>* parent;
  void tree_edge(Edge e, const Graph& g) { (*parent)[boost::target(e, g)] = boost::source(e, g); }
  void back_edge(Edge e, const Graph& g) {
    throw CycleFound{boost::source(e, g), boost::target(e, g)};
  }
};

// Each overlapped pair is a forward marked first and, right after it on the same device, a full
// backward marked second (parse_cell makes them so; a schedule built in code may not).
void check_pairs(const Schedule& s) {
  for (std::int32_t d = 0; d < s.num_devices(); ++d) {
    const auto& list = s.devices[static_cast<std::size_t>(d)];
    for (std::size_t k = 0; k < list.size(); ++k) {
      const Action& a = list[k];
      const ActionPos here{d, static_cast<std::int64_t>(k)};
      if (a.overlap == Overlap::first &&
          (k + 1 == list.size() || list[k + 1].overlap != Overlap::second))
        throw ScheduleError(
            fmt::format("{} opens an overlapped pair that has no second action", to_string(a)),
            {here});
      if (a.overlap == Overlap::second && (k == 0 || list[k - 1].overlap != Overlap::first))
        throw ScheduleError(
            fmt::format("{} closes an overlapped pair that was not opened", to_string(a)), {here});
      if (a.overlap == Overlap::first &&
          (a.kind != ActionKind::F || list[k + 1].kind != ActionKind::B))
        throw ScheduleError(
            fmt::format("overlapped pair ({};{}): a pair is a forward and a full backward "
                        "(DualPipe's F&B)",
                        to_string(a), to_string(list[k + 1])),
            {here, ActionPos{d, static_cast<std::int64_t>(k + 1)}});
    }
  }
}

std::int64_t check_deadlock(const Schedule& s, const ActionIndex& index,
                            const DependencyRules& rules) {
  std::vector<std::pair<std::uint32_t, std::uint32_t>> edges;
  edges.reserve(static_cast<std::size_t>(index.size()) * 2);
  DependencyRules::List deps;
  for (std::int32_t d = 0; d < s.num_devices(); ++d) {
    const auto& list = s.devices[static_cast<std::size_t>(d)];
    for (std::size_t k = 0; k < list.size(); ++k) {
      const auto v =
          static_cast<std::uint32_t>(index.vertex(ActionPos{d, static_cast<std::int64_t>(k)}));
      if (k > 0) edges.emplace_back(v - 1, v);
      // A pair starts when both its actions have their inputs: what its second waits for comes
      // before its first, too.
      const auto pair_start = list[k].overlap == Overlap::second ? v - 1 : v;
      const int n = rules.depends_on(list[k], deps, {d, static_cast<std::int64_t>(k)});
      for (int j = 0; j < n; ++j) {
        const std::int64_t u = index.vertex(deps[static_cast<std::size_t>(j)].action);
        if (u < 0)
          throw ScheduleError(
              fmt::format("{} depends on {}, which the schedule lacks", to_string(list[k]),
                          to_string(deps[static_cast<std::size_t>(j)].action)),
              {ActionPos{d, static_cast<std::int64_t>(k)}});
        // ... and its outputs leave when both are done.
        const ActionPos from = index.position(u);
        const bool opens_pair = at(s, from).overlap == Overlap::first;
        edges.emplace_back(static_cast<std::uint32_t>(u + (opens_pair ? 1 : 0)), pair_start);
      }
    }
  }
  const auto num_edges = static_cast<std::int64_t>(edges.size());
  const auto n = static_cast<std::uint32_t>(index.size());
  Graph g(boost::edges_are_unsorted_multi_pass, edges.begin(), edges.end(), n);
  edges.clear();
  edges.shrink_to_fit();
  std::vector<Vertex> parent(n);
  std::vector<boost::default_color_type> color(n);
  CycleVisitor visitor;
  visitor.parent = &parent;
  try {
    boost::depth_first_search(g,
                              boost::visitor(visitor).color_map(boost::make_iterator_property_map(
                                  color.begin(), boost::get(boost::vertex_index, g))));
  } catch (const CycleFound& cycle) {
    // The back edge from -> to closes a cycle: to -> ... -> from along DFS tree edges.
    std::vector<ActionPos> marks;
    for (Vertex v = cycle.from;; v = parent[v]) {
      marks.push_back(index.position(v));
      if (v == cycle.to) break;
    }
    std::reverse(marks.begin(), marks.end());
    std::string names;
    for (std::size_t k = 0; k < marks.size() && k < 12; ++k)
      names += (k ? " -> " : "") + to_string(at(s, marks[k]));
    if (marks.size() > 12) names += fmt::format(" -> ... ({} actions)", marks.size());
    names += " -> " + to_string(at(s, marks.front()));
    throw ScheduleError(
        fmt::format("deadlock: these actions wait for each other in a cycle: {}", names), marks);
  }
  return num_edges;
}

void check_weight_policy(const Schedule& s) {
  if (s.weight_policy != WeightPolicy::double_buffer) return;
  const Analysis analysis = analyze(s);
  for (const auto& st : analysis.stages)
    if (st.peak_weight_versions > 2)
      throw ScheduleError(
          fmt::format("stage {} needs {} weight versions alive at once; double_buffer allows 2",
                      st.stage, st.peak_weight_versions),
          {});
}

}  // namespace

ValidationSummary validate(const Schedule& s) {
  check_metadata(s);
  check_pairs(s);
  const ActionIndex index(s);
  const DependencyRules rules(s);
  check_completeness(s, index, rules);
  check_updates(s, rules);
  ValidationSummary summary;
  summary.actions = index.size();
  summary.dependency_edges = check_deadlock(s, index, rules);
  check_weight_policy(s);
  return summary;
}

Schedule load_valid_schedule(const std::string& path) {
  Schedule schedule = read_schedule(path);
  const std::string source = path == "-" ? "<stdin>" : path;
  try {
    validate(schedule);
  } catch (const ScheduleError& e) {
    throw InputError(fmt::format("{}: invalid schedule: {}\n{}", source, e.what(),
                                 render_grid(schedule, e.marked)));
  } catch (const InputError& e) {
    throw InputError(fmt::format("{}: invalid schedule: {}", source, e.what()));
  }
  return schedule;
}

}  // namespace paci
