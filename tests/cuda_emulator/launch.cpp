// Kernel execution: each block's threads are fibers on the launching thread; a fiber
// gives way only at a barrier (__syncthreads, a warp shuffle), to the next fiber of the
// block, so between barriers every thread runs as far as CUDA lets it. Blocks are shared
// out to a few OS threads (worker_threads()), as independent as CUDA makes them. A warp shuffle is a barrier of 32 fibers, and kernels shuffle in their inner
// loops, so the switch is a few instructions (below) rather than swapcontext's system call.
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

#include "internal.hpp"

// switch_stack(&saved, next): pushes the callee-saved registers (System V x86-64: rbp,
// rbx, r12-r15, the SSE and x87 control words) on the current stack, stores the stack
// pointer in *saved, loads `next` and pops what was saved there.
extern "C" void cuda_emulator_switch_stack(void** saved, void* next);
asm(R"(
  .text
  .globl cuda_emulator_switch_stack
  .type cuda_emulator_switch_stack, @function
cuda_emulator_switch_stack:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size cuda_emulator_switch_stack, .-cuda_emulator_switch_stack
  .section .note.GNU-stack,"",@progbits
  .text
)");

namespace cuda_emulator {
namespace {

// Per fiber: kernels keep small arrays in registers on a GPU, on this stack here (and
// sanitizer builds make frames several times larger).
constexpr std::size_t kStackBytes = 256 << 10;
constexpr int kMaxThreadsPerBlock = 1024;

struct Fiber {
  void* sp = nullptr;  // the saved stack pointer while the fiber is switched out
  char* stack = nullptr;
  void* fake_stack = nullptr;  // AddressSanitizer's, while switched out
  ThreadIndex index;
  int linear = 0;  // thread index within the block, x fastest
  bool done = false;
};

struct Barrier {
  int arrived = 0;
  unsigned generation = 0;
};

struct Warp {
  Barrier barrier;
  unsigned mask = 0;       // the mask of the exchange in progress
  unsigned present = 0;    // lanes that exist (the last warp of a block may be partial)
  unsigned exited = 0;
  std::uint64_t slots[2][32] = {};  // by generation parity: a lane may read the last
                                    // exchange while faster lanes write the next
};

// One block in execution on this OS thread.
struct BlockRun {
  const LaunchConfig* config = nullptr;
  void (*body)(void*) = nullptr;
  void* context = nullptr;
  std::vector<Fiber> fibers;
  std::vector<Warp> warps;
  Barrier block_barrier;
  int live = 0;
  int idle_yields = 0;  // yields since the last arrival at a barrier or the last exit
  void* scheduler_sp = nullptr;
  void* scheduler_fake_stack = nullptr;
  const void* scheduler_stack = nullptr;  // the launching thread's stack, for AddressSanitizer
  std::size_t scheduler_stack_bytes = 0;
  Fiber* running = nullptr;
};

thread_local BlockRun* active = nullptr;

// Fiber stacks, one per thread of the largest block, mapped once per OS thread (pages
// are committed only when touched) and reused by every launch.
struct Stacks {
  char* base = nullptr;
  char* stack(int thread) {
    if (base == nullptr) {
      void* p = mmap(nullptr, kMaxThreadsPerBlock * kStackBytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (p == MAP_FAILED) fatal("cannot map %d fiber stacks", kMaxThreadsPerBlock);
      base = static_cast<char*>(p);
    }
    return base + std::size_t(thread) * kStackBytes;
  }
  ~Stacks() {
    if (base != nullptr) munmap(base, kMaxThreadsPerBlock * kStackBytes);
  }
};
thread_local Stacks stacks;

const char* where() { return active != nullptr ? active->config->file : "?"; }
int line() { return active != nullptr ? active->config->line : 0; }

// AddressSanitizer must be told of every stack switch (a null save: the fiber ends).
void before_switch(void** fake_stack_save, const void* to_stack, std::size_t to_bytes) {
#if defined(__SANITIZE_ADDRESS__)
  __sanitizer_start_switch_fiber(fake_stack_save, to_stack, to_bytes);
#endif
}
void after_switch(void* fake_stack, const void** from_stack, std::size_t* from_bytes) {
#if defined(__SANITIZE_ADDRESS__)
  __sanitizer_finish_switch_fiber(fake_stack, from_stack, from_bytes);
#endif
}

[[noreturn]] void deadlock(const BlockRun& run) {
  const ThreadIndex& i = run.running->index;
  fatal("the kernel launched at %s:%d deadlocked in block (%u,%u,%u): %d of its %zu threads wait at a barrier "
        "(__syncthreads or a warp shuffle) that the other %zu, which have exited or wait elsewhere, never reach",
        run.config->file, run.config->line, i.block.x, i.block.y, i.block.z, run.live, run.fibers.size(),
        run.fibers.size() - std::size_t(run.live));
}

// The next fiber after `from`, cyclically, that has not ended (`from` itself when it is
// the only one); null when every fiber has ended.
Fiber* next_live(BlockRun& run, const Fiber& from) {
  const std::size_t n = run.fibers.size();
  for (std::size_t k = 1; k <= n; ++k) {
    Fiber& f = run.fibers[(std::size_t(from.linear) + k) % n];
    if (!f.done) return &f;
  }
  return nullptr;
}

// Fibers switch to one another directly; `from` continues when a fiber switches back.
void switch_fibers(BlockRun& run, Fiber& from, Fiber& to) {
  run.running = &to;
  current_thread = &to.index;
  before_switch(&from.fake_stack, to.stack, kStackBytes);
  cuda_emulator_switch_stack(&from.sp, to.sp);
  after_switch(from.fake_stack, nullptr, nullptr);
}

// The running fiber waits: the next one runs. A whole cycle of fibers that all find
// their barrier unchanged is a deadlock.
void yield() {
  BlockRun& run = *active;
  if (++run.idle_yields > run.live + 1) deadlock(run);
  Fiber& self = *run.running;
  Fiber* next = next_live(run, self);
  if (next != &self) switch_fibers(run, self, *next);
}

// Where a new fiber starts (entered by the switch's `ret`). It never returns: at the
// end it hands over to the next live fiber, or to the scheduler after the last one.
[[noreturn]] void fiber_main() {
  BlockRun& run = *active;
  const void* from_stack = nullptr;
  std::size_t from_bytes = 0;
  after_switch(nullptr, &from_stack, &from_bytes);
  if (run.scheduler_stack == nullptr) {  // the block's first fiber is entered from the scheduler
    run.scheduler_stack = from_stack;
    run.scheduler_stack_bytes = from_bytes;
  }
  run.body(run.context);
  Fiber& f = *run.running;
  f.done = true;
  --run.live;
  run.idle_yields = 0;
  run.warps[std::size_t(f.linear / 32)].exited |= 1u << (f.linear % 32);
  void* discarded = nullptr;
  if (Fiber* next = next_live(run, f)) {
    run.running = next;
    current_thread = &next->index;
    before_switch(nullptr, next->stack, kStackBytes);
    cuda_emulator_switch_stack(&discarded, next->sp);
  } else {
    before_switch(nullptr, run.scheduler_stack, run.scheduler_stack_bytes);
    cuda_emulator_switch_stack(&discarded, run.scheduler_sp);
  }
  __builtin_unreachable();
}

// A fresh fiber's stack, as cuda_emulator_switch_stack expects to pop it: the control
// words, six registers, then fiber_main as the return address. fiber_main is entered
// with the stack 8 bytes off 16-byte alignment, as after a call.
void start_fiber(Fiber& f, char* stack) {
  f.stack = stack;
#if defined(__SANITIZE_ADDRESS__)
  // The last fiber on this stack never returned from fiber_main: its frame's redzones
  // are still poisoned (deeper frames returned, and unpoisoned themselves).
  ASAN_UNPOISON_MEMORY_REGION(stack + kStackBytes - (16 << 10), 16 << 10);
#endif
  auto** sp = reinterpret_cast<void**>(stack + kStackBytes);  // 16-byte aligned
  *--sp = nullptr;                                  // fiber_main's (unused) return address
  *--sp = reinterpret_cast<void*>(&fiber_main);
  for (int r = 0; r < 6; ++r) *--sp = nullptr;      // rbp, rbx, r12-r15
  *--sp = reinterpret_cast<void*>(std::uintptr_t(0x037F) << 32 | 0x1F80);  // x87 and SSE defaults
  f.sp = sp;
}

void wait_for(Barrier& b, int expected) {
  const unsigned generation = b.generation;
  active->idle_yields = 0;
  if (++b.arrived == expected) {
    b.arrived = 0;
    ++b.generation;
    return;
  }
  while (b.generation == generation) yield();
}

// Runs the block's fibers until the last one ends (it switches back here).
void run_block(BlockRun& run) {
  run.idle_yields = 0;
  run.scheduler_stack = nullptr;
  Fiber& first = run.fibers.front();
  run.running = &first;
  current_thread = &first.index;
  before_switch(&run.scheduler_fake_stack, first.stack, kStackBytes);
  cuda_emulator_switch_stack(&run.scheduler_sp, first.sp);
  after_switch(run.scheduler_fake_stack, nullptr, nullptr);
  current_thread = nullptr;
}

const char* bad_configuration(const LaunchConfig& c) {
  const unsigned long long threads = 1ull * c.block.x * c.block.y * c.block.z;
  if (c.grid.x == 0 || c.grid.y == 0 || c.grid.z == 0) return "an empty grid";
  if (c.grid.y > 65535 || c.grid.z > 65535) return "grid y or z above 65535";
  if (threads == 0 || threads > kMaxThreadsPerBlock) return "a block of 0 or more than 1024 threads";
  if (c.block.z > 64) return "block z above 64";
  if (c.shared_bytes > 0) return "dynamic shared memory (not emulated)";
  return nullptr;
}

}  // namespace

void sync_block() {
  if (active == nullptr) fatal("__syncthreads outside a kernel");
  wait_for(active->block_barrier, int(active->fibers.size()));
}

std::uint64_t warp_exchange(unsigned mask, std::uint64_t value, int source_lane) {
  if (active == nullptr) fatal("a warp shuffle outside a kernel");
  BlockRun& run = *active;
  const int lane = run.running->linear % 32;
  Warp& w = run.warps[std::size_t(run.running->linear / 32)];
  if ((mask & (1u << lane)) == 0) fatal("%s:%d: lane %d calls a warp shuffle whose mask 0x%08x leaves it out", where(), line(), lane, mask);
  if ((mask & ~w.present) != 0)
    fatal("%s:%d: a warp shuffle's mask 0x%08x names lanes that do not exist (the warp has 0x%08x)", where(), line(), mask,
          w.present);
  if ((mask & w.exited) != 0)
    fatal("%s:%d: a warp shuffle's mask 0x%08x names lanes that have exited (0x%08x): undefined in CUDA", where(), line(),
          mask, w.exited);
  if (w.barrier.arrived == 0) {
    w.mask = mask;
  } else if (w.mask != mask) {
    fatal("%s:%d: lanes of one warp shuffle with different masks at once (0x%08x, 0x%08x)", where(), line(), w.mask, mask);
  }
  const unsigned parity = w.barrier.generation & 1;
  w.slots[parity][lane] = value;
  wait_for(w.barrier, std::popcount(mask));
  if ((mask & (1u << source_lane)) == 0)
    fatal("%s:%d: lane %d reads lane %d, which is not in the shuffle's mask 0x%08x", where(), line(), lane, source_lane,
          mask);
  return w.slots[parity][source_lane];
}

unsigned worker_threads() {
  if (const char* v = std::getenv("ARBOR_CUDA_EMULATOR_THREADS"); v != nullptr && std::atoi(v) > 0)
    return unsigned(std::atoi(v));
  return std::clamp(std::thread::hardware_concurrency(), 1u, 4u);
}

namespace {

// Takes blocks from `next_block` until the grid is done.
void run_blocks(const LaunchConfig& config, void (*body)(void*), void* context,
                std::atomic<unsigned long long>& next_block) {
  const int threads = int(config.block.x * config.block.y * config.block.z);
  const unsigned long long total = 1ull * config.grid.x * config.grid.y * config.grid.z;
  BlockRun run;
  run.config = &config;
  run.body = body;
  run.context = context;
  run.fibers.resize(std::size_t(threads));
  run.warps.resize(std::size_t((threads + 31) / 32));
  for (int t = 0; t < threads; ++t) run.warps[std::size_t(t / 32)].present |= 1u << (t % 32);
  active = &run;
  for (unsigned long long b = next_block++; b < total; b = next_block++) {
    const uint3 block = {unsigned(b % config.grid.x), unsigned(b / config.grid.x % config.grid.y),
                         unsigned(b / (1ull * config.grid.x * config.grid.y))};
    run.live = threads;
    for (Warp& w : run.warps) w.exited = 0;
    for (int t = 0; t < threads; ++t) {
      Fiber& f = run.fibers[std::size_t(t)];
      f.linear = t;
      f.done = false;
      f.index.thread = {unsigned(t) % config.block.x, unsigned(t) / config.block.x % config.block.y,
                        unsigned(t) / (config.block.x * config.block.y)};
      f.index.block = block;
      f.index.lane = t % 32;
      f.index.block_dim = config.block;
      f.index.grid_dim = config.grid;
      start_fiber(f, stacks.stack(t));
    }
    run_block(run);
  }
  active = nullptr;
}

}  // namespace

namespace {
std::atomic<std::uint64_t> grids{0};
}  // namespace

std::uint64_t grids_launched() { return grids.load(); }

bool launch_accepted(const LaunchConfig& config) {
  if (active != nullptr) fatal("%s:%d: a kernel launched from inside a kernel (not emulated)", config.file, config.line);
  if (const char* why = bad_configuration(config)) {
    std::fprintf(stderr, "cuda emulator: the launch at %s:%d has %s\n", config.file, config.line, why);
    set_last_error(cudaErrorInvalidConfiguration);
    return false;
  }
  return true;
}

void run_grid(const LaunchConfig& config, void (*body)(void*), void* context) {
  if (!launch_accepted(config)) return;
  ++grids;
  const unsigned long long blocks = 1ull * config.grid.x * config.grid.y * config.grid.z;
  std::atomic<unsigned long long> next_block{0};
  std::vector<std::thread> helpers;
  for (unsigned w = 1; w < std::min<unsigned long long>(blocks, worker_threads()); ++w)
    helpers.emplace_back([&] { run_blocks(config, body, context, next_block); });
  run_blocks(config, body, context, next_block);
  for (std::thread& t : helpers) t.join();
}

}  // namespace cuda_emulator
