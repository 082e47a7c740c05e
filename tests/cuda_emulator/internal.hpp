// What the emulator's parts share (not part of the emulated API).
#pragma once

#include <cstddef>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "cuda_emulator.hpp"

// A graph node: work recorded from a stream, and its kind ("kernel", "memcpy", ...).
struct GraphNode {
  std::string kind;
  std::function<void()> work;
};

struct CUstream_st {
  unsigned flags = 0;
  bool capturing = false, capture_invalidated = false;
  std::vector<GraphNode> captured;  // while capturing
  std::deque<GraphNode> queued;     // issued and not yet run, oldest first
};

namespace cuda_emulator {

// Records `e` as the last error (cudaGetLastError returns and clears it) and returns it.
cudaError_t set_last_error(cudaError_t e);

// Allocations by start address (start -> bytes), and whether [p, p + bytes) lies
// inside one of them (the caller holds the lock that guards the map).
using Allocations = std::map<const char*, std::size_t>;
inline bool inside_one(const Allocations& allocations, const void* p, std::size_t bytes) {
  const char* c = static_cast<const char*>(p);
  auto it = allocations.upper_bound(c);
  if (it == allocations.begin()) return false;
  --it;
  return c >= it->first && c + bytes <= it->first + it->second;
}

// True when [p, p + bytes) lies inside one live cudaMalloc allocation.
bool is_device_range(const void* p, std::size_t bytes);
// True when [p, p + bytes) lies inside one live cudaMallocHost allocation.
bool is_pinned_range(const void* p, std::size_t bytes);

// Runs the stream's queued work in order: all of it, or until `done` holds after a node
// (stream.cpp). run_all_queued: every stream's (what a device-wide wait does).
void run_queued(cudaStream_t stream, const std::function<bool()>& done = {});
void run_all_queued();

// OS threads that run a grid's blocks (and share out a cublasSgemm):
// ARBOR_CUDA_EMULATOR_THREADS, else the cores, at most 4. Each thread has its own fibers,
// stacks and __shared__ variables (thread_local).
unsigned worker_threads();

// Prints "cuda emulator: <message>" to stderr and aborts: a kernel did what CUDA leaves
// undefined (a deadlock, a shuffle with an absent lane), so nothing after it can be trusted.
[[noreturn]] void fatal(const char* format, ...) __attribute__((format(printf, 1, 2)));

}  // namespace cuda_emulator
