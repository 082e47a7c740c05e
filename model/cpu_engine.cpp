#include "model/cpu_engine.hpp"

#include <cmath>
#include <string>
#include <utility>

#include "cache/page_pool.hpp"
#include "kernels/cpu/cpu_features.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/ops.hpp"
#include "model/token_mask.hpp"

namespace arbor::model {

namespace cpu = kernels::cpu;

CpuEngine::CpuEngine(const LlamaConfig& config, const LlamaWeights& weights, int num_threads,
                     kernels::MatmulPrecision precision)
    : config_(config), weights_(weights), pool_(num_threads), precision_(precision) {}

std::string CpuEngine::describe() const {
  return std::string("cpu (") + (cpu::use_avx512() ? "AVX-512" : "AVX2") + ", " +
         std::to_string(pool_.num_threads()) + " threads)";
}

void CpuEngine::reserve_rows(std::int64_t rows) {
  num_rows_ = rows;
  if (rows <= capacity_rows_) return;
  capacity_rows_ = rows;
  const std::size_t r = std::size_t(rows);
  const std::size_t kv_dim = std::size_t(config_.num_kv_heads) * config_.head_dim;
  x_.resize(r * config_.hidden);
  xn_.resize(r * config_.hidden);
  q_.resize(r * config_.hidden);
  attn_.resize(r * config_.hidden);
  tmp_.resize(r * config_.hidden);
  k_.resize(r * kv_dim);
  v_.resize(r * kv_dim);
  gate_.resize(r * config_.ffn_dim);
  up_.resize(r * config_.ffn_dim);
}

Result<void> CpuEngine::forward(std::span<const SequenceStep> batch, cache::PagePool& kv, StepOutput& out) {
  if (auto ok = check_batch(batch, kv); !ok) return ok;
  std::int64_t rows = 0;
  for (const SequenceStep& s : batch) rows += std::int64_t(s.tokens.size());
  reserve_rows(rows);
  embed(batch);
  for (int l = 0; l < config_.num_layers; ++l) {
    attention_block(l, batch, kv);
    ffn_block(l);
  }
  compute_logits(batch, out);
  return {};
}

void CpuEngine::embed(std::span<const SequenceStep> batch) {
  std::int64_t row = 0;
  for (const SequenceStep& s : batch)
    for (TokenId t : s.tokens)
      cpu::dequantize_row(weights_.token_embd, t, &x_[std::size_t(row++) * config_.hidden]);
}

void CpuEngine::attention_block(int layer, std::span<const SequenceStep> batch, cache::PagePool& kv) {
  const LlamaLayerWeights& w = weights_.layers[std::size_t(layer)];
  const int hidden = config_.hidden, kv_dim = config_.num_kv_heads * config_.head_dim;
  for (std::int64_t r = 0; r < num_rows_; ++r)
    cpu::rmsnorm(&x_[std::size_t(r) * hidden], w.attn_norm, hidden, config_.rms_eps,
                 &xn_[std::size_t(r) * hidden]);
  cpu::matmul(w.wq, xn_.data(), num_rows_, q_.data(), pool_, precision_);
  cpu::matmul(w.wk, xn_.data(), num_rows_, k_.data(), pool_, precision_);
  cpu::matmul(w.wv, xn_.data(), num_rows_, v_.data(), pool_, precision_);

  std::int64_t row = 0;
  for (const SequenceStep& s : batch)
    for (std::size_t j = 0; j < s.tokens.size(); ++j, ++row) {
      const int pos = s.start_pos + int(j);
      cpu::rope(&q_[std::size_t(row) * hidden], config_.num_heads, config_.head_dim, config_.rope_dim,
                pos, config_.rope_theta);
      cpu::rope(&k_[std::size_t(row) * kv_dim], config_.num_kv_heads, config_.head_dim,
                config_.rope_dim, pos, config_.rope_theta);
    }
  store_kv(layer, batch, kv);
  attend(layer, batch, kv);
  cpu::matmul(w.wo, attn_.data(), num_rows_, tmp_.data(), pool_, precision_);
  cpu::add_inplace(x_.data(), tmp_.data(), int(num_rows_ * hidden));
}

// One attention call for the whole batch: decode rows of sequences that share prefix
// pages read (and convert) each shared page once.
void CpuEngine::attend(int layer, std::span<const SequenceStep> batch, const cache::PagePool& kv) {
  const int hidden = config_.hidden;
  const cache::KvGeometry& g = kv.geometry();
  const std::size_t k_off = g.offset(layer, cache::KvKind::key, 0, 0);
  const std::size_t v_off = g.offset(layer, cache::KvKind::value, 0, 0);
  std::size_t total_pages = 0;
  for (const SequenceStep& s : batch) total_pages += std::size_t(g.pages_for(s.start_pos + int(s.tokens.size())));
  k_pages_.resize(total_pages);
  v_pages_.resize(total_pages);
  attention_args_.clear();
  std::int64_t row = 0;
  std::size_t first_page = 0;
  for (const SequenceStep& s : batch) {
    const int n = int(s.tokens.size());
    const int num_pages = g.pages_for(s.start_pos + n);
    for (int p = 0; p < num_pages; ++p) {
      const std::uint16_t* base = kv.page_data(s.pages[std::size_t(p)]);
      k_pages_[first_page + std::size_t(p)] = base + k_off;
      v_pages_[first_page + std::size_t(p)] = base + v_off;
    }
    cpu::PagedAttentionArgs a;
    a.q = &q_[std::size_t(row) * hidden];
    a.out = &attn_[std::size_t(row) * hidden];
    a.num_rows = n;
    a.first_pos = s.start_pos;
    a.num_q_heads = config_.num_heads;
    a.num_kv_heads = config_.num_kv_heads;
    a.head_dim = config_.head_dim;
    a.page_size = g.page_size;
    a.k_pages = k_pages_.data() + first_page;
    a.v_pages = v_pages_.data() + first_page;
    a.scale = 1.f / std::sqrt(float(config_.head_dim));
    attention_args_.push_back(a);
    row += n;
    first_page += std::size_t(num_pages);
  }
  cpu::paged_attention_batch(attention_args_.data(), int(attention_args_.size()), pool_);
}

// Writes the new rows' K and V (f16) into their slots: position p lives in page
// p / page_size at slot p % page_size (KV rule 9).
void CpuEngine::store_kv(int layer, std::span<const SequenceStep> batch, cache::PagePool& kv) {
  const cache::KvGeometry& g = kv.geometry();
  const int head_dim = config_.head_dim, kv_dim = config_.num_kv_heads * head_dim;
  std::int64_t row = 0;
  for (const SequenceStep& s : batch)
    for (std::size_t j = 0; j < s.tokens.size(); ++j, ++row) {
      const int pos = s.start_pos + int(j);
      std::uint16_t* page = kv.page_data(s.pages[std::size_t(pos / g.page_size)]);
      const int slot = pos % g.page_size;
      for (int h = 0; h < config_.num_kv_heads; ++h) {
        const std::size_t src = std::size_t(row) * kv_dim + std::size_t(h) * head_dim;
        cpu::fp32_to_fp16_row(&k_[src], page + g.offset(layer, cache::KvKind::key, h, slot), head_dim);
        cpu::fp32_to_fp16_row(&v_[src], page + g.offset(layer, cache::KvKind::value, h, slot), head_dim);
      }
    }
}

void CpuEngine::ffn_block(int layer) {
  const LlamaLayerWeights& w = weights_.layers[std::size_t(layer)];
  const int hidden = config_.hidden, ffn = config_.ffn_dim;
  for (std::int64_t r = 0; r < num_rows_; ++r)
    cpu::rmsnorm(&x_[std::size_t(r) * hidden], w.ffn_norm, hidden, config_.rms_eps,
                 &xn_[std::size_t(r) * hidden]);
  cpu::matmul(w.gate, xn_.data(), num_rows_, gate_.data(), pool_, precision_);
  cpu::matmul(w.up, xn_.data(), num_rows_, up_.data(), pool_, precision_);
  cpu::silu_mul(gate_.data(), up_.data(), int(num_rows_ * ffn));
  cpu::matmul(w.down, gate_.data(), num_rows_, tmp_.data(), pool_, precision_);
  cpu::add_inplace(x_.data(), tmp_.data(), int(num_rows_ * hidden));
}

// One vocabulary matmul over every row with an output; a last_token row's logits then
// give its token by the step's draw (model/token_draw.hpp, the sampler's own rule).
void CpuEngine::compute_logits(std::span<const SequenceStep> batch, StepOutput& out) {
  const int hidden = config_.hidden;
  const std::size_t vocab = std::size_t(config_.vocab_size);
  std::int64_t row = 0, out_rows = 0, token_rows = 0;
  for (const SequenceStep& s : batch) {
    const std::int64_t n = std::int64_t(s.tokens.size());
    for (std::int64_t j = n - std::int64_t(output_rows(s)); j < n; ++j, ++out_rows)
      cpu::rmsnorm(&x_[std::size_t(row + j) * hidden], weights_.output_norm, hidden, config_.rms_eps,
                   &xn_[std::size_t(out_rows) * hidden]);
    token_rows += s.logits == LogitsMode::last_token;
    row += n;
  }
  out.tokens.clear();
  std::vector<float>& all = token_rows > 0 ? all_logits_ : out.logits;
  all.resize(std::size_t(out_rows) * vocab);
  if (out_rows > 0) cpu::matmul(weights_.output, xn_.data(), out_rows, all.data(), pool_, precision_);
  if (token_rows == 0) return;
  out.logits.clear();
  std::vector<std::pair<std::size_t, const SequenceStep*>> draws;  // (output row, step) per token row
  std::size_t at = 0;
  for (const SequenceStep& s : batch) {
    const std::size_t n = output_rows(s);
    if (s.logits == LogitsMode::last_token)
      draws.push_back({at, &s});
    else
      out.logits.insert(out.logits.end(), all.begin() + std::ptrdiff_t(at * vocab),
                        all.begin() + std::ptrdiff_t((at + n) * vocab));
    at += n;
  }
  // Rows draw in parallel (a sampled row of 49,152 logits takes ~0.3 ms), each over its
  // logits with what its mask does not allow at -infinity.
  out.tokens.resize(draws.size());
  draw_scratch_.resize(std::size_t(pool_.num_threads()));
  pool_.parallel_for(std::int64_t(draws.size()), [&](int thread, std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) {
      const auto [row, step] = draws[std::size_t(i)];
      const std::span<float> logits(all.data() + row * vocab, vocab);
      if (!step->allowed.empty()) apply_token_mask(step->allowed, logits);
      out.tokens[std::size_t(i)] = draw_token(logits, step->draw, draw_scratch_[std::size_t(thread)]);
    }
  });
}

}  // namespace arbor::model
