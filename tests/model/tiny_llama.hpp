// A tiny random-weight Llama written as a GGUF file in memory, and a naive dense
// forward pass over it (f32 everywhere, full softmax, no pages): the reference the
// paged, batched engine is tested against.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/matmul.hpp"
#include "model/gguf.hpp"
#include "model/gguf_writer.hpp"
#include "model/llama_config.hpp"
#include "model/llama_weights.hpp"

namespace arbor::model::testing {

struct TinyLlamaShape {
  int vocab = 97, hidden = 64, layers = 2, heads = 4, kv_heads = 2, ffn = 96, context = 512;
  float theta = 10000.f;
};

inline std::vector<std::byte> write_tiny_llama(const TinyLlamaShape& s, std::uint32_t seed) {
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_string("general.name", "tiny-test-llama");
  w.set_u32("llama.context_length", std::uint32_t(s.context));
  w.set_u32("llama.embedding_length", std::uint32_t(s.hidden));
  w.set_u32("llama.block_count", std::uint32_t(s.layers));
  w.set_u32("llama.feed_forward_length", std::uint32_t(s.ffn));
  w.set_u32("llama.attention.head_count", std::uint32_t(s.heads));
  w.set_u32("llama.attention.head_count_kv", std::uint32_t(s.kv_heads));
  w.set_f32("llama.rope.freq_base", s.theta);
  w.set_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  auto add = [&](const std::string& name, std::vector<std::int64_t> dims, float scale, float offset) {
    std::int64_t n = 1;
    for (auto d : dims) n *= d;
    std::vector<float> v(static_cast<std::size_t>(n));
    for (auto& x : v) x = offset + scale * normal(rng);
    auto ok = w.add_f32_tensor(name, dims, v);
    if (!ok) throw std::runtime_error(ok.error().message);
  };
  const int kv_dim = s.hidden / s.heads * s.kv_heads;
  add("token_embd.weight", {s.hidden, s.vocab}, 1.f, 0.f);
  add("output_norm.weight", {s.hidden}, 0.1f, 1.f);
  for (int l = 0; l < s.layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    const float in_scale = 1.f / std::sqrt(float(s.hidden));
    add(p + "attn_norm.weight", {s.hidden}, 0.1f, 1.f);
    add(p + "attn_q.weight", {s.hidden, s.hidden}, in_scale, 0.f);
    add(p + "attn_k.weight", {s.hidden, kv_dim}, in_scale, 0.f);
    add(p + "attn_v.weight", {s.hidden, kv_dim}, in_scale, 0.f);
    add(p + "attn_output.weight", {s.hidden, s.hidden}, in_scale, 0.f);
    add(p + "ffn_norm.weight", {s.hidden}, 0.1f, 1.f);
    add(p + "ffn_gate.weight", {s.hidden, s.ffn}, in_scale, 0.f);
    add(p + "ffn_up.weight", {s.hidden, s.ffn}, in_scale, 0.f);
    add(p + "ffn_down.weight", {s.ffn, s.hidden}, 1.f / std::sqrt(float(s.ffn)), 0.f);
  }
  return w.serialize();
}

// Dense reference forward: logits for every position of `tokens`, [n][vocab].
inline std::vector<float> naive_forward(const LlamaConfig& c, const LlamaWeights& w,
                                        const std::vector<std::int32_t>& tokens) {
  const int n = int(tokens.size()), H = c.hidden, D = c.head_dim, KV = c.num_kv_heads * D;
  auto matvec = [](const kernels::WeightMatrix& m, const std::vector<float>& x) {
    std::vector<float> y(static_cast<std::size_t>(m.rows)), row(static_cast<std::size_t>(m.cols));
    for (std::int64_t r = 0; r < m.rows; ++r) {
      kernels::cpu::dequantize_row(m, r, row.data());
      double acc = 0;
      for (std::int64_t i = 0; i < m.cols; ++i) acc += double(row[std::size_t(i)]) * x[std::size_t(i)];
      y[std::size_t(r)] = float(acc);
    }
    return y;
  };
  auto rmsnorm = [&](const std::vector<float>& x, const float* g) {
    double ss = 0;
    for (float v : x) ss += double(v) * v;
    const float inv = float(1.0 / std::sqrt(ss / double(x.size()) + c.rms_eps));
    std::vector<float> y(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) y[i] = x[i] * inv * g[i];
    return y;
  };
  auto rope = [&](float* v, int pos) {  // adjacent pairs (GGUF llama layout)
    for (int i = 0; i < c.rope_dim / 2; ++i) {
      const double angle = pos * std::pow(double(c.rope_theta), -2.0 * i / c.rope_dim);
      const double a = v[2 * i], b = v[2 * i + 1];
      v[2 * i] = float(a * std::cos(angle) - b * std::sin(angle));
      v[2 * i + 1] = float(a * std::sin(angle) + b * std::cos(angle));
    }
  };
  std::vector<std::vector<float>> x(static_cast<std::size_t>(n), std::vector<float>(std::size_t(H)));
  for (int t = 0; t < n; ++t) kernels::cpu::dequantize_row(w.token_embd, tokens[std::size_t(t)], x[std::size_t(t)].data());
  for (const LlamaLayerWeights& L : w.layers) {
    std::vector<std::vector<float>> q(static_cast<std::size_t>(n)), k(static_cast<std::size_t>(n)), v(static_cast<std::size_t>(n));
    for (int t = 0; t < n; ++t) {
      auto xn = rmsnorm(x[std::size_t(t)], L.attn_norm);
      q[std::size_t(t)] = matvec(L.wq, xn);
      k[std::size_t(t)] = matvec(L.wk, xn);
      v[std::size_t(t)] = matvec(L.wv, xn);
      for (int h = 0; h < c.num_heads; ++h) rope(&q[std::size_t(t)][std::size_t(h * D)], t);
      for (int h = 0; h < c.num_kv_heads; ++h) rope(&k[std::size_t(t)][std::size_t(h * D)], t);
    }
    for (int t = 0; t < n; ++t) {
      std::vector<float> att(static_cast<std::size_t>(H), 0.f);
      for (int h = 0; h < c.num_heads; ++h) {
        const int kvh = h / c.group_size();
        std::vector<double> s(static_cast<std::size_t>(t + 1));
        double mx = -1e300;
        for (int j = 0; j <= t; ++j) {
          double d = 0;
          for (int i = 0; i < D; ++i) d += double(q[std::size_t(t)][std::size_t(h * D + i)]) * k[std::size_t(j)][std::size_t(kvh * D + i)];
          s[std::size_t(j)] = d / std::sqrt(double(D));
          mx = std::max(mx, s[std::size_t(j)]);
        }
        double sum = 0;
        for (auto& e : s) sum += (e = std::exp(e - mx));
        for (int j = 0; j <= t; ++j)
          for (int i = 0; i < D; ++i)
            att[std::size_t(h * D + i)] += float(s[std::size_t(j)] / sum * v[std::size_t(j)][std::size_t(kvh * D + i)]);
      }
      auto o = matvec(L.wo, att);
      for (int i = 0; i < H; ++i) x[std::size_t(t)][std::size_t(i)] += o[std::size_t(i)];
    }
    (void)KV;
    for (int t = 0; t < n; ++t) {
      auto xn = rmsnorm(x[std::size_t(t)], L.ffn_norm);
      auto g = matvec(L.gate, xn), u = matvec(L.up, xn);
      for (std::size_t i = 0; i < g.size(); ++i) g[i] = g[i] / (1.f + std::exp(-g[i])) * u[i];
      auto d = matvec(L.down, g);
      for (int i = 0; i < H; ++i) x[std::size_t(t)][std::size_t(i)] += d[std::size_t(i)];
    }
  }
  std::vector<float> logits;
  for (int t = 0; t < n; ++t) {
    auto y = matvec(w.output, rmsnorm(x[std::size_t(t)], w.output_norm));
    logits.insert(logits.end(), y.begin(), y.end());
  }
  return logits;
}

}  // namespace arbor::model::testing
