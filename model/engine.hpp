// The transformer forward pass over paged KV, as an interface every backend implements
// (model/cpu_engine.hpp; the CUDA engine with -DARBOR_CUDA=ON). One call runs a batch
// of sequences, each contributing some new tokens (a prefill chunk or one decode
// token), writes their K/V into their pages, and returns logits where asked.
// model/engine_factory.hpp picks the backend.
//
// Contract (every backend)
// - Rows of all sequences are stacked into one activation matrix, so every weight
//   matrix is read once per step whatever the batch (decode batching turns GEMV back
//   into GEMM: KV rule 12).
// - A sequence's tokens sit at absolute positions [start_pos, start_pos + n); the
//   positions < start_pos must already be in its pages (computed earlier, by this
//   sequence or by whoever cached that prefix: KV rules 1, 14). Its page table must
//   cover start_pos + n positions, and the pages it writes (positions >= start_pos)
//   must be private to it (KV rule 10): the engine writes them without checking.
// - The pool's storage comes from the engine's page_allocator() (for the CPU engine,
//   any host allocator will do); pages hold f16 K/V in the layout of
//   cache/kv_geometry.hpp, whichever memory they live in.
// - Logits come back in host memory. A row that asks for its next token instead
//   (LogitsMode::last_token) returns only the id its `draw` picks (greedy or sampled:
//   model/token_draw.hpp's rule, one rule on every backend), so a device backend
//   draws where the logits are and copies one integer back instead of vocab_size floats.
//   Such a row may carry a token mask (`allowed`, a JSON Schema's next tokens): its
//   draw then sees the tokens the mask does not allow at -infinity, so constrained
//   decoding draws on the device too (the mask goes up, 1 bit a token; no logits down).
// - Overlap: submit() queues a step and, on a device, returns before it has run;
//   collect() waits for the oldest step not yet collected and returns its outputs. So
//   the caller schedules step N+1 (admission, radix matching, page reservation) while
//   step N runs, and a row of step N+1 may take its token as a future_token: a token
//   the step submitted just before draws, read where it lies (on a device, never
//   copied to the host and back). Steps run in submission order; a page that a
//   queued step writes may be released and given to a later step (it runs after).
// - Late masks: a constrained row whose token is a future token cannot have its mask
//   yet (the mask follows the token the step before draws). It is submitted with
//   `mask_later`: the step's forward is queued at once, its draws wait for
//   supply_masks(), which the caller calls once it has collected the step before and
//   advanced its constraints. So a step of constrained rows runs on the device while
//   the host waits for the one before and computes masks.
// - Not thread-safe: one owner (the cache actor) calls it.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cache/kv_geometry.hpp"
#include "cache/page_allocator.hpp"
#include "common/result.hpp"
#include "model/device.hpp"
#include "model/llama_config.hpp"
#include "model/token_draw.hpp"

namespace arbor::cache {
class PagePool;
}

namespace arbor::model {

using TokenId = cache::TokenId;

// none: no output; last / all: the last row's / every row's logits; last_token: the
// token the step's TokenDraw picks from the last row's logits (model/token_draw.hpp:
// the argmax when greedy) instead of the logits.
enum class LogitsMode { none, last, all, last_token };

// The share of a device's free memory (after the weights and the step workspace) that
// an automatically sized KV pool takes; the rest is headroom for the CUDA runtime and
// libraries (vLLM's gpu_memory_utilization plays the same role, 0.9 by default).
inline constexpr double kDeviceKvFraction = 0.9;

struct SequenceStep {
  std::span<const TokenId> tokens;        // new tokens
  int start_pos = 0;                      // tokens already cached for this sequence
  std::span<const cache::PageId> pages;   // the sequence's page table
  LogitsMode logits = LogitsMode::last;
  TokenDraw draw = {};                    // for LogitsMode::last_token (default: greedy)
  // For LogitsMode::last_token: the tokens its draw may pick, token_mask_words(vocab)
  // words (model/token_mask.hpp); empty: every token.
  std::span<const std::uint64_t> allowed = {};
  // For LogitsMode::last_token, with `allowed` empty: its mask comes after submit(),
  // through supply_masks() (the contract's "Late masks").
  bool mask_later = false;
};

// A future token: the id that the step submitted just before this one returns as its
// i-th token (LogitsMode::last_token rows, in batch order). Only submit() takes them.
inline constexpr TokenId future_token(std::size_t i) { return -TokenId(i) - 1; }
inline constexpr bool is_future_token(TokenId t) { return t < 0; }
inline constexpr std::size_t future_index(TokenId t) { return std::size_t(-(t + 1)); }

// How many output rows a step asks for: its token count for `all`, 1 for `last` and
// `last_token`, 0 for `none`; they are its last rows.
inline std::size_t output_rows(const SequenceStep& s) {
  return s.logits == LogitsMode::all ? s.tokens.size() : s.logits == LogitsMode::none ? 0 : 1;
}

// What one forward() returns, in batch order.
struct StepOutput {
  std::vector<float> logits;     // rows of LogitsMode::last / all sequences, vocab_size floats each
  std::vector<TokenId> tokens;   // one per LogitsMode::last_token sequence
};

// Steps a device engine ran as graphs: replayed as captured before (a steady decode
// step: one launch call on the host), or captured (and the graph updated or instantiated).
struct GraphCounts {
  std::uint64_t replayed = 0, captured = 0;
};

class Engine {
 public:
  virtual ~Engine() = default;

  virtual const LlamaConfig& config() const = 0;
  // Device::cpu or Device::cuda (never automatic), and words for people: the device
  // and what the engine uses of it ("cpu (AVX-512, 2 threads)").
  virtual Device device() const = 0;
  virtual std::string describe() const = 0;
  // The allocator the KV pool passed to forward() must take its storage from (the
  // scheduler builds its PrefixCache on it). Shared: it must outlive every pool on it.
  virtual std::shared_ptr<cache::PageAllocator> page_allocator() = 0;
  // How many bytes the KV pool may take when its size is left to the engine: on a
  // device, kDeviceKvFraction of the memory free now (weights loaded) less the
  // workspace a step of `max_step_tokens` rows needs; nullopt for host memory (the
  // caller picks the size).
  virtual std::optional<std::size_t> kv_budget_bytes(int max_step_tokens) const {
    (void)max_step_tokens;
    return std::nullopt;
  }

  // The KV geometry this model needs, for a given page size.
  cache::KvGeometry kv_geometry(int page_size) const;

  // Runs one step. Outputs come out in batch order: for each sequence, none, its last
  // row's logits, all its rows' logits, or its last row's drawn token (LogitsMode).
  // invalid_argument (nothing written) when a token id is out of range, a page table
  // is too short, a sampled draw is malformed (uniform outside [0, 1), a NaN temperature
  // or top_p), or the pool's geometry does not match the model; too_long when positions
  // exceed the context length.
  // Nothing may be submitted and not yet collected.
  virtual Result<void> forward(std::span<const SequenceStep> batch, cache::PagePool& kv, StepOutput& out) = 0;

  // The step split in two (the contract's "Overlap"). submit() checks the batch as
  // forward() does (nothing queued when it fails), resolves its future tokens and queues
  // it; the batch's spans need only live until it returns. At most kMaxStepsInFlight
  // steps are submitted and not collected (internal error beyond). collect()
  // returns the oldest one's outputs, or the error it failed with on the device.
  // Defaults, for a host backend: submit() runs the step at once.
  static constexpr std::size_t kMaxStepsInFlight = 2;
  virtual Result<void> submit(std::span<const SequenceStep> batch, cache::PagePool& kv);
  virtual Result<void> collect(StepOutput& out);
  // The masks of the rows with `mask_later` of the step submitted last, in batch order
  // (token_mask_words(vocab) words each; empty: no mask): its draws run then. Due once
  // for such a step, after submit() and before it is collected or another is submitted
  // (internal error otherwise, and invalid_argument, nothing queued, for a wrong count
  // or size). The spans need only live until it returns.
  virtual Result<void> supply_masks(std::span<const std::span<const std::uint64_t>> masks);
  // True when submit() returns before the step has run, so work between submit and
  // collect overlaps it (a device backend); false when it runs inside submit().
  virtual bool asynchronous() const { return false; }
  // Its steps that went through graphs so far (none on a backend without them).
  virtual GraphCounts graph_counts() const { return {}; }

 protected:
  // The checks of forward()'s contract that need no backend (each engine calls it
  // first); token ids below 0 are future tokens, valid when below `futures` (the
  // token count of the step submitted before).
  Result<void> check_batch(std::span<const SequenceStep> batch, const cache::PagePool& kv,
                           std::size_t futures = 0) const;
  // supply_masks()'s argument checks: `late` masks, each empty or `words` long.
  static Result<void> check_late_masks(std::span<const std::span<const std::uint64_t>> masks, std::size_t late,
                                       std::size_t words);

 private:
  void defer_draws(std::span<SequenceStep> steps);

  std::deque<StepOutput> submitted_;       // the default submit()'s outputs, oldest first
  std::vector<StepOutput> spare_;          // buffers collect() took back, for the next steps
  std::vector<TokenId> previous_tokens_;   // the tokens the last submit()'s step drew
  // The last step submitted, when it has rows with mask_later: it ran with every token
  // row's logits kept (LogitsMode::last); supply_masks() draws their tokens. Per
  // batch row: its output rows, and for a token row its draw and mask.
  struct DeferredRow {
    std::size_t outputs = 0;
    bool token = false, late = false;
    TokenDraw draw;
    std::vector<std::uint64_t> mask;
  };
  std::vector<DeferredRow> deferred_;
  std::vector<float> draw_scratch_;
};

}  // namespace arbor::model
