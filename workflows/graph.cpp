#include "workflows/graph.hpp"

#include <algorithm>
#include <set>

namespace arbor::workflows {

int AgentGraph::common_ancestor(int a, int b) const {
  std::set<int> up;
  for (int x = a; x >= 0; x = nodes[std::size_t(x)].parent) up.insert(x);
  for (int x = b; x >= 0; x = nodes[std::size_t(x)].parent)
    if (up.count(x)) return x;
  return -1;
}

WaitGraph::WaitGraph(const AgentGraph& graph) : graph_(graph), edges_(graph.nodes.size() * 2) {
  for (std::size_t i = 0; i < graph.nodes.size(); ++i) {
    const AgentNode& n = graph.nodes[i];
    int start = int(2 * i), finish = start + 1;
    for (const auto& d : n.deps) edges_[std::size_t(start)].push_back({2 * d.node + 1, d.pointer});
    if (n.parent >= 0) edges_[std::size_t(start)].push_back({2 * n.parent, ""});
    edges_[std::size_t(finish)].push_back({start, ""});
    for (int c : n.children) edges_[std::size_t(finish)].push_back({2 * c + 1, ""});
  }
}

std::vector<Cycle> WaitGraph::cycles() const {
  std::vector<Cycle> out;
  std::set<std::set<int>> seen;
  std::vector<int> color(edges_.size(), 0);  // 0 new, 1 on stack, 2 done
  std::vector<int> stack;
  std::vector<std::size_t> next(edges_.size(), 0);
  for (std::size_t root = 0; root < edges_.size(); ++root) {
    if (color[root]) continue;
    stack.push_back(int(root));
    color[root] = 1;
    while (!stack.empty()) {
      int v = stack.back();
      if (next[std::size_t(v)] == edges_[std::size_t(v)].size()) {
        color[std::size_t(v)] = 2;
        stack.pop_back();
        continue;
      }
      int w = edges_[std::size_t(v)][next[std::size_t(v)]++].to;
      if (color[std::size_t(w)] == 0) {
        color[std::size_t(w)] = 1;
        stack.push_back(w);
        continue;
      }
      if (color[std::size_t(w)] != 1) continue;
      // Back edge v -> w: the cycle is stack[w..v].
      std::vector<int> ring(std::find(stack.begin(), stack.end(), w), stack.end());
      std::set<int> agents;
      for (int x : ring) agents.insert(x / 2);
      if (!seen.insert(agents).second) continue;
      // Start the description at an explicit depends_on edge, which the user can change.
      Cycle c;
      std::size_t start = 0;
      for (std::size_t k = 0; k < ring.size() && c.pointer.empty(); ++k) {
        int to = ring[(k + 1) % ring.size()];
        for (const auto& e : edges_[std::size_t(ring[k])])
          if (e.to == to && !e.pointer.empty()) c.pointer = e.pointer, start = k;
      }
      std::rotate(ring.begin(), ring.begin() + long(start), ring.end());
      for (int x : ring) {
        const std::string& id = graph_.nodes[std::size_t(x / 2)].spec->id;
        if (c.agents.empty() || c.agents.back() != id) c.agents.push_back(id);
      }
      if (c.agents.size() == 1 || c.agents.back() != c.agents.front()) c.agents.push_back(c.agents.front());
      out.push_back(std::move(c));
    }
  }
  return out;
}

std::vector<bool> WaitGraph::finished_from(int vertex) const {
  std::vector<bool> reached(edges_.size(), false), finished(graph_.nodes.size(), false);
  std::vector<int> todo{vertex};
  reached[std::size_t(vertex)] = true;
  while (!todo.empty()) {
    int v = todo.back();
    todo.pop_back();
    for (const auto& e : edges_[std::size_t(v)])
      if (!reached[std::size_t(e.to)]) reached[std::size_t(e.to)] = true, todo.push_back(e.to);
  }
  for (std::size_t i = 0; i < graph_.nodes.size(); ++i) finished[i] = reached[2 * i + 1];
  return finished;
}

std::vector<bool> WaitGraph::finished_at_start(int a) const { return finished_from(2 * a); }

std::vector<bool> WaitGraph::finished_at_fan_in(int a) const {
  auto f = finished_from(2 * a + 1);
  f[std::size_t(a)] = false;
  return f;
}

}  // namespace arbor::workflows
