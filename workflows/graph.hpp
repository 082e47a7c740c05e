// The agents of a workflow as a graph: the spec tree flattened (one node per agent as
// written, before fan-out) and the "waits for" relation between agents, used to find
// deadlocks (dependency cycles) and which outputs exist when a template renders.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "workflows/spec.hpp"
#include "workflows/template.hpp"

namespace arbor::workflows {

struct AgentNode {
  const AgentSpec* spec = nullptr;
  int parent = -1;
  std::vector<int> children;
  int fan_out = -1;  // nearest ancestor-or-self with for_each; -1 = none
  struct Dep {
    int node;
    std::string pointer;  // the depends_on entry
  };
  std::vector<Dep> deps;
  std::optional<Template> task, fan_in;
  // for_each.output (dynamic fan-out), once validated: the source agent and the list's path.
  int dyn_source = -1;
  JsonPath dyn_path;
  std::vector<Template> turns;
};

struct AgentGraph {
  std::vector<AgentNode> nodes;  // parents before children
  std::map<std::string, int> by_id;

  // Lowest common ancestor in the spec tree (ancestor-or-self), -1 if none.
  int common_ancestor(int a, int b) const;
};

struct Cycle {
  std::vector<std::string> agents;  // "a", "b", ..., "a"
  std::string pointer;              // a depends_on entry on the cycle
};

// Node 2i = agent i starts, 2i+1 = agent i finishes. "x waits for y" edges:
//   start(a) -> finish(d) for d in depends_on(a)      (explicit)
//   start(child) -> start(parent)                       (spawned by the running parent)
//   finish(a) -> start(a);  finish(parent) -> finish(child)  (fan-in waits for children)
// A cycle in this graph is a deadlock, whether or not it is written as one.
class WaitGraph {
 public:
  explicit WaitGraph(const AgentGraph& graph);
  std::vector<Cycle> cycles() const;  // each distinct cycle once. O(V + E)
  // Agents certainly finished when agent `a` starts its task / reaches its fan_in.
  std::vector<bool> finished_at_start(int a) const;
  std::vector<bool> finished_at_fan_in(int a) const;

 private:
  struct Edge {
    int to;
    std::string pointer;  // non-empty for explicit depends_on
  };
  std::vector<bool> finished_from(int vertex) const;
  const AgentGraph& graph_;
  std::vector<std::vector<Edge>> edges_;
};

}  // namespace arbor::workflows
