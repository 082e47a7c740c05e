// The emulated graphs: stream capture records each operation issued to the stream as a
// node (a copy of its arguments), a graph launch queues the nodes, to run in order. Capture rules
// the backend must respect on a GPU are enforced: no nested or unended capture, nothing
// that waits for the capturing stream, and (stricter than CUDA, which allows pinned
// memory) no host<->device copy or cuBLAS call inside it.
#include <atomic>
#include <cstdio>
#include <utility>

#include "internal.hpp"

struct CUgraph_st {
  std::vector<GraphNode> nodes;
};
struct CUgraphExec_st {
  std::vector<GraphNode> nodes;
};

namespace cuda_emulator {
namespace {
std::atomic<std::uint64_t> graphs{0};
std::atomic<std::uint64_t> captures{0};
}  // namespace

std::uint64_t graphs_launched() { return graphs.load(); }
std::uint64_t graphs_captured() { return captures.load(); }

bool capturing(cudaStream_t stream) { return stream != nullptr && stream->capturing; }

void record(cudaStream_t stream, const char* kind, std::function<void()> work) {
  stream->captured.push_back({kind, std::move(work)});
}

cudaError_t refuse_in_capture(cudaStream_t stream, const char* what) {
  std::fprintf(stderr, "cuda emulator: %s on a capturing stream (the capture is invalidated)\n", what);
  stream->capture_invalidated = true;
  return set_last_error(cudaErrorStreamCaptureUnsupported);
}

}  // namespace cuda_emulator

using cuda_emulator::set_last_error;

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode) {
  if (stream == nullptr) return set_last_error(cudaErrorStreamCaptureUnsupported);  // the legacy stream
  if (stream->capturing) return set_last_error(cudaErrorIllegalState);
  stream->capturing = true;
  stream->capture_invalidated = false;
  stream->captured.clear();
  return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  if (stream == nullptr || !stream->capturing) return set_last_error(cudaErrorIllegalState);
  stream->capturing = false;
  auto nodes = std::exchange(stream->captured, {});
  *graph = nullptr;
  if (stream->capture_invalidated) return set_last_error(cudaErrorStreamCaptureInvalidated);
  *graph = new CUgraph_st{std::move(nodes)};
  ++cuda_emulator::captures;
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long) {
  if (graph == nullptr) return set_last_error(cudaErrorInvalidValue);
  *exec = new CUgraphExec_st{graph->nodes};
  return cudaSuccess;
}

cudaError_t cudaGraphExecUpdate(cudaGraphExec_t exec, cudaGraph_t graph, cudaGraphExecUpdateResultInfo* info) {
  if (exec == nullptr || graph == nullptr) return set_last_error(cudaErrorInvalidValue);
  bool same = exec->nodes.size() == graph->nodes.size();
  for (std::size_t i = 0; same && i < graph->nodes.size(); ++i) same = exec->nodes[i].kind == graph->nodes[i].kind;
  if (info != nullptr) *info = {same ? cudaGraphExecUpdateSuccess : cudaGraphExecUpdateErrorTopologyChanged, {}, {}};
  if (!same) return set_last_error(cudaErrorGraphExecUpdateFailure);
  exec->nodes = graph->nodes;
  return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  if (exec == nullptr) return set_last_error(cudaErrorInvalidValue);
  if (cuda_emulator::capturing(stream)) return cuda_emulator::refuse_in_capture(stream, "a graph launch");
  ++cuda_emulator::graphs;
  // The launch runs the nodes as they are now: a later update changes later launches only.
  cuda_emulator::issue(stream, "graph", [nodes = exec->nodes]() mutable {
    for (GraphNode& node : nodes) node.work();
  });
  return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  delete graph;
  return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  delete exec;
  return cudaSuccess;
}
