// The emulated streams: work issued to a created stream waits in its queue until the host
// waits for it, so a result read too early, or a pinned buffer reused while a queued copy
// still reads it, shows as wrong bytes. Also pinned host memory and events.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <set>

#include "internal.hpp"

struct CUevent_st {
  cudaStream_t stream = nullptr;
  std::shared_ptr<bool> pending = std::make_shared<bool>(false);  // recorded, not reached yet
};

namespace cuda_emulator {
namespace {

// Guards the streams, their queues and the pinned allocations. Recursive: queued work
// runs with it held and may issue or wait in turn (a graph's nodes, a blocking call).
std::recursive_mutex& streams_mutex() {
  static std::recursive_mutex m;
  return m;
}
std::set<CUstream_st*>& streams() {
  static std::set<CUstream_st*> s;
  return s;
}
Allocations& pinned() {
  static Allocations p;
  return p;
}

}  // namespace

bool is_pinned_range(const void* p, std::size_t bytes) {
  std::lock_guard lock(streams_mutex());
  return inside_one(pinned(), p, bytes);
}

void issue(cudaStream_t stream, const char* kind, std::function<void()> work) {
  if (capturing(stream)) {
    record(stream, kind, std::move(work));
    return;
  }
  std::lock_guard lock(streams_mutex());
  if (stream == nullptr) {  // the legacy stream waits for the others, and runs now
    run_all_queued();
    work();
    return;
  }
  stream->queued.push_back({kind, std::move(work)});
}

void run_queued(cudaStream_t stream, const std::function<bool()>& done) {
  if (stream == nullptr) return;
  std::lock_guard lock(streams_mutex());
  while (!stream->queued.empty()) {
    GraphNode node = std::move(stream->queued.front());
    stream->queued.pop_front();
    node.work();
    if (done && done()) return;
  }
}

void run_all_queued() {
  std::lock_guard lock(streams_mutex());
  for (CUstream_st* s : streams()) run_queued(s);
}

}  // namespace cuda_emulator

using cuda_emulator::set_last_error;

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned flags) {
  std::lock_guard lock(cuda_emulator::streams_mutex());
  *stream = new CUstream_st;
  (*stream)->flags = flags;
  cuda_emulator::streams().insert(*stream);
  return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t* stream) { return cudaStreamCreateWithFlags(stream, cudaStreamDefault); }

// The stream's queued work still runs (now, here), as it completes on a GPU.
cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  std::lock_guard lock(cuda_emulator::streams_mutex());
  if (cuda_emulator::streams().count(stream) == 0) return set_last_error(cudaErrorInvalidValue);
  cuda_emulator::run_queued(stream);
  cuda_emulator::streams().erase(stream);
  delete stream;
  return cudaSuccess;
}

// A capturing stream cannot be waited for.
cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  if (cuda_emulator::capturing(stream)) return cuda_emulator::refuse_in_capture(stream, "cudaStreamSynchronize");
  if (stream == nullptr) cuda_emulator::run_all_queued();
  cuda_emulator::run_queued(stream);
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize() {
  cuda_emulator::run_all_queued();
  return cudaSuccess;
}

cudaError_t cudaMallocHost(void** ptr, std::size_t bytes) {
  *ptr = nullptr;
  if (bytes == 0) return cudaSuccess;
  void* p = nullptr;
  if (posix_memalign(&p, 4096, bytes) != 0) return set_last_error(cudaErrorMemoryAllocation);
  std::lock_guard lock(cuda_emulator::streams_mutex());
  cuda_emulator::pinned()[static_cast<const char*>(p)] = bytes;
  *ptr = p;
  return cudaSuccess;
}

// Waits for every stream first (cudaFreeHost synchronizes, as cudaFree does).
cudaError_t cudaFreeHost(void* ptr) {
  if (ptr == nullptr) return cudaSuccess;
  std::lock_guard lock(cuda_emulator::streams_mutex());
  cuda_emulator::run_all_queued();
  if (cuda_emulator::pinned().erase(static_cast<const char*>(ptr)) == 0) return set_last_error(cudaErrorInvalidValue);
  std::free(ptr);
  return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned) {
  *event = new CUevent_st;
  return cudaSuccess;
}

// A pending record still completes (its state outlives the event).
cudaError_t cudaEventDestroy(cudaEvent_t event) {
  delete event;
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  if (event == nullptr) return set_last_error(cudaErrorInvalidValue);
  event->stream = stream;
  event->pending = std::make_shared<bool>(true);
  cuda_emulator::issue(stream, "event", [pending = event->pending] { *pending = false; });
  return cudaSuccess;
}

// Runs the recording stream up to the record (not past it): later work stays queued.
cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  if (event == nullptr) return set_last_error(cudaErrorInvalidValue);
  if (!*event->pending) return cudaSuccess;
  cuda_emulator::run_queued(event->stream, [pending = event->pending] { return !*pending; });
  return cudaSuccess;
}
