// Per-tenant FIFO queues in a ring, for fair admission (see batch_engine.hpp).
//
// Each tenant with queued items has one lane; lanes form a ring in which a tenant
// joins at the back when its first item arrives and leaves when its lane empties.
// The BatchEngine serves the front lane and rotate()s it to the back after serving it,
// so tenants take turns (round-robin) however many items each has queued.
#pragma once

#include <cstddef>
#include <deque>
#include <list>
#include <string>

namespace arbor::actors {

template <class Item>
class FairQueue {
 public:
  struct Lane {
    std::string tenant;
    std::deque<Item> items;  // FIFO within the tenant
  };

  void push(const std::string& tenant, Item item) {
    for (auto& lane : lanes_)
      if (lane.tenant == tenant) return lane.items.push_back(std::move(item));
    lanes_.push_back(Lane{tenant, {}});
    lanes_.back().items.push_back(std::move(item));
  }

  bool empty() const { return lanes_.empty(); }
  std::size_t size() const {
    std::size_t n = 0;
    for (const auto& lane : lanes_) n += lane.items.size();
    return n;
  }
  const Lane* lane(const std::string& tenant) const {
    for (const auto& l : lanes_)
      if (l.tenant == tenant) return &l;
    return nullptr;
  }

  // The ring, front = next tenant to serve. Callers may erase items; drop_empty() then
  // removes lanes left without items (the ring order of the others is kept).
  std::list<Lane>& lanes() { return lanes_; }
  const std::list<Lane>& lanes() const { return lanes_; }
  void rotate() {
    if (lanes_.size() > 1) lanes_.splice(lanes_.end(), lanes_, lanes_.begin());
  }
  void drop_empty() {
    lanes_.remove_if([](const Lane& l) { return l.items.empty(); });
  }

 private:
  std::list<Lane> lanes_;
};

}  // namespace arbor::actors
