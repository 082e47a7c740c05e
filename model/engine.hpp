// The transformer forward pass over paged KV: one call runs a batch of sequences,
// each contributing some new tokens (a prefill chunk or one decode token), writes
// their K/V into their pages, and returns logits where asked.
//
// Contract
// - Rows of all sequences are stacked into one activation matrix, so every weight
//   matrix is read once per step whatever the batch (decode batching turns GEMV back
//   into GEMM: KV rule 12).
// - A sequence's tokens sit at absolute positions [start_pos, start_pos + n); the
//   positions < start_pos must already be in its pages (computed earlier, by this
//   sequence or by whoever cached that prefix: KV rules 1, 14). Its page table must
//   cover start_pos + n positions, and the pages it writes (positions >= start_pos)
//   must be private to it (KV rule 10): the engine writes them without checking.
// - Not thread-safe: one owner (the cache actor) calls it. Internally it uses its
//   thread pool for every kernel.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "cache/kv_geometry.hpp"
#include "common/result.hpp"
#include "kernels/cpu/attention.hpp"
#include "kernels/cpu/thread_pool.hpp"
#include "model/llama_config.hpp"
#include "model/llama_weights.hpp"

namespace arbor::cache {
class PagePool;
}

namespace arbor::model {

using TokenId = cache::TokenId;

enum class LogitsMode { none, last, all };

struct SequenceStep {
  std::span<const TokenId> tokens;        // new tokens
  int start_pos = 0;                      // tokens already cached for this sequence
  std::span<const cache::PageId> pages;   // the sequence's page table
  LogitsMode logits = LogitsMode::last;
};

class Engine {
 public:
  // `weights` (and the file behind them) must outlive the engine. `precision` picks
  // how activations enter the int8 matmuls (see kernels/cpu/matmul.hpp).
  Engine(const LlamaConfig& config, const LlamaWeights& weights, int num_threads,
         kernels::MatmulPrecision precision = kernels::MatmulPrecision::accurate);

  const LlamaConfig& config() const { return config_; }
  kernels::ThreadPool& pool() { return pool_; }
  // The KV geometry this model needs, for a given page size.
  cache::KvGeometry kv_geometry(int page_size) const;

  // Runs one step. Logits rows come out in batch order: for each sequence, none, its
  // last row, or all its rows (LogitsMode), each `vocab_size` floats.
  // invalid_argument (nothing written) when a token id is out of range, a page table
  // is too short, positions exceed the context length, or the pool's geometry does
  // not match the model.
  Result<void> forward(std::span<const SequenceStep> batch, cache::PagePool& kv,
                       std::vector<float>& logits);

 private:
  Result<void> check_batch(std::span<const SequenceStep> batch, const cache::PagePool& kv) const;
  void embed(std::span<const SequenceStep> batch);
  void attention_block(int layer, std::span<const SequenceStep> batch, cache::PagePool& kv);
  void ffn_block(int layer);
  void store_kv(int layer, std::span<const SequenceStep> batch, cache::PagePool& kv);
  void attend(int layer, std::span<const SequenceStep> batch, const cache::PagePool& kv);
  void compute_logits(std::span<const SequenceStep> batch, std::vector<float>& logits);
  void reserve_rows(std::int64_t rows);

  LlamaConfig config_;
  const LlamaWeights& weights_;
  kernels::ThreadPool pool_;
  kernels::MatmulPrecision precision_;
  std::int64_t num_rows_ = 0;     // rows in the current step
  std::int64_t capacity_rows_ = 0;
  // Scratch activations, [rows][dim] each.
  std::vector<float> x_, xn_, q_, k_, v_, attn_, gate_, up_, tmp_;
  std::vector<const std::uint16_t*> k_pages_, v_pages_;  // every sequence's, back to back
  std::vector<kernels::PagedAttentionArgs> attention_args_;
};

}  // namespace arbor::model
