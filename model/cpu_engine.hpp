// The CPU engine: the forward pass on the CPU kernels (kernels/cpu/), over a host KV
// pool. Its thread pool runs every kernel; the int8 matmuls take activations at the
// chosen precision (kernels/cpu/matmul.hpp).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/cpu/attention.hpp"
#include "kernels/cpu/thread_pool.hpp"
#include "kernels/weight_matrix.hpp"
#include "model/engine.hpp"
#include "model/llama_weights.hpp"

namespace arbor::model {

class CpuEngine final : public Engine {
 public:
  // `weights` (and the file behind them) must outlive the engine. num_threads 0 = all
  // hardware threads.
  CpuEngine(const LlamaConfig& config, const LlamaWeights& weights, int num_threads,
            kernels::MatmulPrecision precision = kernels::MatmulPrecision::accurate);

  const LlamaConfig& config() const override { return config_; }
  Device device() const override { return Device::cpu; }
  std::string describe() const override;
  // Host memory; any host-accessible pool works with this engine.
  std::shared_ptr<cache::PageAllocator> page_allocator() override { return allocator_; }
  kernels::cpu::ThreadPool& pool() { return pool_; }

  Result<void> forward(std::span<const SequenceStep> batch, cache::PagePool& kv, StepOutput& out) override;

 private:
  void embed(std::span<const SequenceStep> batch);
  void attention_block(int layer, std::span<const SequenceStep> batch, cache::PagePool& kv);
  void ffn_block(int layer);
  void store_kv(int layer, std::span<const SequenceStep> batch, cache::PagePool& kv);
  void attend(int layer, std::span<const SequenceStep> batch, const cache::PagePool& kv);
  void compute_logits(std::span<const SequenceStep> batch, StepOutput& out);
  void reserve_rows(std::int64_t rows);

  LlamaConfig config_;
  const LlamaWeights& weights_;
  kernels::cpu::ThreadPool pool_;
  kernels::MatmulPrecision precision_;
  std::shared_ptr<cache::HostPageAllocator> allocator_ = std::make_shared<cache::HostPageAllocator>();
  std::int64_t num_rows_ = 0;     // rows in the current step
  std::int64_t capacity_rows_ = 0;
  // Scratch activations, [rows][dim] each.
  std::vector<float> x_, xn_, q_, k_, v_, attn_, gate_, up_, tmp_;
  std::vector<float> all_logits_;   // every output row's logits, when some reduce to a drawn token
  std::vector<std::vector<float>> draw_scratch_;  // draw_token's, one per pool thread
  std::vector<const std::uint16_t*> k_pages_, v_pages_;  // every sequence's, back to back
  std::vector<kernels::cpu::PagedAttentionArgs> attention_args_;
};

}  // namespace arbor::model
