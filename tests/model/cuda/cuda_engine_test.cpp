// The CUDA engine against the CPU engine on the same weights: a tiny F32 model (page
// sizes 1/4/16), a synthetic model in SmolLM2-135M's shape (Q4_1, all 30 layers) and
// one in Llama-3-8B's shape (Q4_0, 2 of its 32 layers: GQA 32/8, head_dim 128, a
// 128256-token vocabulary), Q8_0 and F16 (uploaded as F32) ones. Logits within a stated tolerance (1e-3 for F32 weights;
// 0.02 for quantized ones, where the CPU's int8 activations alone move logits by up to
// ~1e-3 against f32 ones on these models), greedy tokens equal for
// the first steps (unless the CPU itself sees a near tie), prefix-from-cache equal to a
// full prefill on the device (KV rule 14), and a clear error for a host KV pool.
#include "model/cuda/cuda_engine.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "cache/page_pool.hpp"
#include "tests/kernels/cuda/cuda_test_util.hpp"
#include "tests/max_abs_diff.hpp"
#include "model/cpu_engine.hpp"
#include "model/kv_sequence.hpp"
#include "model/synthetic_model.hpp"
#include "model/token_mask.hpp"
#include "tests/model/token_rows_check.hpp"
#include "tests/model/future_tokens_check.hpp"
#include "tests/model/late_masks_check.hpp"
#include "tests/model/tiny_llama.hpp"

namespace arbor::model {
namespace {

using ::arbor::testing::max_abs_diff;

// A model held in memory: the bytes, the parsed file, config and weights.
struct Loaded {
  std::vector<std::byte> bytes;
  std::optional<GgufFile> file;
  LlamaConfig config;
  LlamaWeights weights;
};

std::unique_ptr<Loaded> load(std::vector<std::byte> bytes) {
  auto m = std::make_unique<Loaded>();
  m->bytes = std::move(bytes);
  auto file = GgufFile::parse(m->bytes);
  EXPECT_TRUE(file) << file.error().message;
  m->file.emplace(std::move(*file));
  auto config = read_llama_config(*m->file);
  EXPECT_TRUE(config) << config.error().message;
  m->config = *config;
  auto weights = bind_llama_weights(*m->file, m->config);
  EXPECT_TRUE(weights) << weights.error().message;
  m->weights = std::move(*weights);
  return m;
}

std::unique_ptr<Loaded> synthetic(const std::string& shape_name, int layers, kernels::GgmlType type) {
  auto shape = synthetic_shape(shape_name);
  EXPECT_TRUE(shape);
  shape->layers = layers;
  auto writer = synthetic_llama(*shape, type, 42);
  EXPECT_TRUE(writer) << writer.error().message;
  return load(writer->serialize());
}

std::vector<TokenId> random_tokens(int n, int vocab, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<TokenId> t(static_cast<std::size_t>(n));
  for (auto& x : t) x = TokenId(rng() % std::uint32_t(vocab));
  return t;
}

// One engine with its own pool (on the engine's allocator).
struct Side {
  std::unique_ptr<Engine> engine;
  std::unique_ptr<cache::PagePool> pool;
  Side(std::unique_ptr<Engine> e, int page_size, int num_pages) : engine(std::move(e)) {
    if (!engine) return;
    pool = std::make_unique<cache::PagePool>(engine->kv_geometry(page_size), num_pages, *engine->page_allocator());
    EXPECT_EQ(pool->storage_error(), nullptr);
  }
};

std::unique_ptr<Engine> cuda_engine(const Loaded& m,
                                    kernels::MatmulPrecision precision = kernels::MatmulPrecision::accurate) {
  auto e = make_cuda_engine(m.config, m.weights, precision);
  EXPECT_TRUE(e) << e.error().message;
  return e ? std::move(*e) : nullptr;
}

// cuda_engine() made with ARBOR_CUDA_GRAPHS and ARBOR_CUDA_GRAPH_REPLAY set to `graphs`
// and `replay` ("0" or "1"; the engine reads them when it is made).
std::unique_ptr<Engine> cuda_engine_with_graphs(const Loaded& m, const char* graphs, const char* replay = "1") {
  setenv("ARBOR_CUDA_GRAPHS", graphs, 1);
  setenv("ARBOR_CUDA_GRAPH_REPLAY", replay, 1);
  auto e = cuda_engine(m);
  unsetenv("ARBOR_CUDA_GRAPHS");
  unsetenv("ARBOR_CUDA_GRAPH_REPLAY");
  return e;
}

// The steps `engine` ran as graphs since it counted `before`.
GraphCounts graph_steps_since(const Engine& engine, const GraphCounts& before) {
  const GraphCounts now = engine.graph_counts();
  return {now.replayed - before.replayed, now.captured - before.captured};
}

// Prefill in chunks, then greedy decode of two sequences batched, on both backends (the
// CPU's accurate matmuls, the GPU's of `gpu_precision`). Logits within `tol` everywhere;
// greedy tokens equal while the CPU's top two differ by more than 2 * tol (a closer
// call may go either way).
void compare_backends(const Loaded& m, int page_size, int prompt, int chunk, int steps, float tol,
                      kernels::MatmulPrecision gpu_precision = kernels::MatmulPrecision::accurate) {
  Side cpu(std::make_unique<CpuEngine>(m.config, m.weights, 4), page_size, 512);
  Side gpu(cuda_engine(m, gpu_precision), page_size, 512);
  ASSERT_TRUE(gpu.engine);
  const auto tokens = random_tokens(prompt, m.config.vocab_size, 5);
  KvSequence cs[2], gs[2];
  for (int i = 0; i < 2; ++i) {
    const std::vector<TokenId> p(tokens.begin(), tokens.end() - i);  // two lengths: other page offsets
    auto a = prefill(*cpu.engine, *cpu.pool, cs[i], p, chunk, LogitsMode::all);
    auto b = prefill(*gpu.engine, *gpu.pool, gs[i], p, chunk, LogitsMode::all);
    ASSERT_TRUE(a && b) << (a ? b.error().message : a.error().message);
    EXPECT_LE(max_abs_diff(*a, *b), tol) << "prefill of sequence " << i;
  }
  const int vocab = m.config.vocab_size;
  std::vector<TokenId> next = {1, 2};
  bool same_path = true;
  for (int s = 0; s < steps && same_path; ++s) {
    KvSequence* cp[] = {&cs[0], &cs[1]};
    KvSequence* gp[] = {&gs[0], &gs[1]};
    auto a = decode_step(*cpu.engine, *cpu.pool, cp, next);
    auto b = decode_step(*gpu.engine, *gpu.pool, gp, next);
    ASSERT_TRUE(a && b) << (a ? b.error().message : a.error().message);
    EXPECT_LE(max_abs_diff(*a, *b), tol) << "decode step " << s;
    for (int i = 0; i < 2; ++i) {
      std::span<const float> ca(a->data() + std::size_t(i) * vocab, std::size_t(vocab));
      std::span<const float> gb(b->data() + std::size_t(i) * vocab, std::size_t(vocab));
      const auto ta = TokenId(std::max_element(ca.begin(), ca.end()) - ca.begin());
      const auto tb = TokenId(std::max_element(gb.begin(), gb.end()) - gb.begin());
      if (ta != tb) {
        EXPECT_LT(ca[std::size_t(ta)] - ca[std::size_t(tb)], 2 * tol) << "step " << s << ": greedy tokens differ";
        same_path = false;
      }
      next[std::size_t(i)] = ta;
    }
  }
  for (int i = 0; i < 2; ++i) {
    release(cs[i], *cpu.pool);
    release(gs[i], *gpu.pool);
  }
  EXPECT_EQ(gpu.pool->num_used(), 0);
}

// F32 weights: f32 matmuls on both sides; the prefill chunks' attention tiles round
// queries and softmax weights to f16 on the device (tensor cores): logits of this model
// span -32..56 and move by up to ~4e-3 (~1e-4 of that range; f32 attention: < 1e-3).
TEST(CudaEngine, TinyF32ModelMatchesCpuAtEveryPageSize) {
  ARBOR_REQUIRE_CUDA();
  auto m = load(testing::write_tiny_llama(testing::TinyLlamaShape{}, 7));
  for (int page_size : {1, 4, 16}) {
    SCOPED_TRACE("page size " + std::to_string(page_size));
    compare_backends(*m, page_size, 45, 13, 6, 1e-2f);
  }
}

TEST(CudaEngine, SmolLM2ShapeQ4_1MatchesCpu) {
  ARBOR_REQUIRE_CUDA();
  auto m = synthetic("smollm2-135m", 30, kernels::GgmlType::Q4_1);
  compare_backends(*m, 16, 70, 32, 8, 0.02f);
}

TEST(CudaEngine, Llama3_8BShapeQ4_0MatchesCpu) {
  ARBOR_REQUIRE_CUDA();
  auto m = synthetic("llama3-8b", 2, kernels::GgmlType::Q4_0);
  compare_backends(*m, 16, 40, 40, 4, 0.02f);
}

TEST(CudaEngine, Q8_0ShapeMatchesCpu) {
  ARBOR_REQUIRE_CUDA();
  auto m = synthetic("smollm2-135m", 4, kernels::GgmlType::Q8_0);
  compare_backends(*m, 16, 33, 9, 4, 0.02f);
}

// Precision fast: the decode GEMV rounds activations to int8 per 32 values (llama.cpp's
// q8_1; the CPU's fast path rounds them likewise). Against the CPU's accurate logits
// that rounding noise stays within 0.15 (4 layers; Q8_0 ~0.07, Q4_0 and Q4_1 < 0.02)
// for Q4_0 (the 8B shape), Q4_1 and Q8_0, where a kernel error moves logits by whole
// units.
TEST(CudaEngine, PrecisionFastRoundsGemvActivationsToInt8WithinItsNoiseOfTheCpu) {
  ARBOR_REQUIRE_CUDA();
  constexpr auto kFast = kernels::MatmulPrecision::fast;
  auto llama = synthetic("llama3-8b", 2, kernels::GgmlType::Q4_0);
  auto engine = cuda_engine(*llama, kFast);
  ASSERT_TRUE(engine);
  EXPECT_NE(engine->describe().find("int8 activations"), std::string::npos) << engine->describe();
  EXPECT_NE(cuda_engine(*llama)->describe().find("f32 activations"), std::string::npos);
  compare_backends(*llama, 16, 40, 40, 4, 0.15f, kFast);
  for (auto type : {kernels::GgmlType::Q4_1, kernels::GgmlType::Q8_0}) {
    SCOPED_TRACE(kernels::type_name(type));
    compare_backends(*synthetic("smollm2-135m", 4, type), 16, 33, 9, 4, 0.15f, kFast);
  }
}

// A type the device does not keep as stored (F16 here; BF16, Q4_K and Q6_K take the same
// path) is dequantized on the host and uploaded as F32: the CPU's F16 kernels then agree
// to F32 accuracy.
TEST(CudaEngine, F16WeightsUploadedAsF32MatchCpu) {
  ARBOR_REQUIRE_CUDA();
  auto m = synthetic("smollm2-135m", 2, kernels::GgmlType::F16);
  compare_backends(*m, 16, 21, 8, 3, 1e-3f);
}

// Token rows draw their token on the device (greedy and sampled); the other rows' logits still come
// back, in batch order (the shared check of tests/model/token_rows_check.hpp).
TEST(CudaEngine, TokenRowsFollowTheirLogits) {
  ARBOR_REQUIRE_CUDA();
  auto m = load(testing::write_tiny_llama(testing::TinyLlamaShape{}, 7));
  Side gpu(cuda_engine(*m), 16, 64);
  ASSERT_TRUE(gpu.engine);
  testing::expect_token_rows_follow_logits(*gpu.engine, *gpu.pool, 1e-5f);
  EXPECT_EQ(gpu.pool->num_used(), 0);
}

// Runs an overlap check (a function of engine, pool, tolerance) on the tiny F32 model,
// whose steps launch kernel by kernel, and on the quantized SmolLM2 shape, whose steps
// are CUDA graphs (updated in place while the launch before is still queued).
template <class Check>
void on_launched_and_graphed_steps(Check check) {
  auto tiny = load(testing::write_tiny_llama(testing::TinyLlamaShape{}, 7));
  auto quantized = synthetic("smollm2-135m", 2, kernels::GgmlType::Q4_1);
  for (const auto* m : {&tiny, &quantized}) {
    Side gpu(cuda_engine(**m), 16, 64);
    ASSERT_TRUE(gpu.engine);
    EXPECT_TRUE(gpu.engine->asynchronous());
    check(*gpu.engine, *gpu.pool, 1e-5f);
    EXPECT_EQ(gpu.pool->num_used(), 0);
  }
}

// Overlap: a step queued behind another (not yet collected) reads that step's argmax ids
// on the device as its future tokens (the shared check of
// tests/model/future_tokens_check.hpp).
TEST(CudaEngine, SubmittedStepsTakeFutureTokensFromTheStepBefore) {
  ARBOR_REQUIRE_CUDA();
  on_launched_and_graphed_steps(testing::expect_future_tokens_follow_argmax);
}

// Late masks: the step's forward is queued and its draws wait for supply_masks(); a step
// like it with no late masks must not replay its graph (the shared check of
// tests/model/late_masks_check.hpp).
TEST(CudaEngine, LateMasksDrawAsMasksGivenUpFront) {
  ARBOR_REQUIRE_CUDA();
  on_launched_and_graphed_steps(testing::expect_late_masks_draw_as_masks_given_up_front);
}

// Kernels per layer of a batch-1 decode step over a short context (each costs the
// device a launch latency, in a CUDA graph too): the Q, K, V GEMV, RoPE fused with the
// K/V store, attention (one split: no merge), output GEMV, residual fused with the next
// norm, the gate and up GEMV gating its outputs (SwiGLU), the down GEMV, residual + norm:
// 8 (17 before the fusions, 10 before the last two).
// Counted on the emulator, as the difference between SmolLM2-shaped Q4_1 models of 1
// and 2 layers.
TEST(CudaEngine, ABatchOneDecodeStepLaunchesEightKernelsPerLayer) {
#ifndef ARBOR_CUDA_EMULATED
  GTEST_SKIP() << "counts the CUDA emulator's launches";
#else
  ARBOR_REQUIRE_CUDA();
  auto launches_of_a_decode_step = [](int layers) -> std::uint64_t {
    auto m = synthetic("smollm2-135m", layers, kernels::GgmlType::Q4_1);  // quantized: GEMV kernels
    Side gpu(cuda_engine(*m), 16, 64);
    if (!gpu.engine) return 0;
    KvSequence seq;
    const auto prompt = random_tokens(9, m->config.vocab_size, 3);
    EXPECT_TRUE(prefill(*gpu.engine, *gpu.pool, seq, prompt, 16));
    KvSequence* one[] = {&seq};
    const TokenId next = 1;
    const std::uint64_t before = ::cuda_emulator::grids_launched();
    EXPECT_TRUE(decode_step(*gpu.engine, *gpu.pool, one, std::span(&next, 1)));
    const std::uint64_t launched = ::cuda_emulator::grids_launched() - before;
    release(seq, *gpu.pool);
    return launched;
  };
  const std::uint64_t one = launches_of_a_decode_step(1), two = launches_of_a_decode_step(2);
  ASSERT_GT(one, 0u);
  EXPECT_EQ(two - one, 8u) << "a 1-layer step launches " << one << ", a 2-layer one " << two;
#endif
}

// Decode steps of a quantized model run as one CUDA graph each (ARBOR_CUDA_GRAPHS=0:
// launch by launch) with the same logits bit for bit, whether the graph is captured (a
// slot's first, a batch in another row bucket) or replayed as it was (a steady step: no
// capture, though positions grow and the page table gains a page; ARBOR_CUDA_GRAPH_REPLAY=0:
// captured every step); prefill steps of more than kQuantizedGemmMaxRows rows (cuBLAS
// GEMMs) are never captured.
TEST(CudaEngine, SteadyDecodeStepsReplayTheirGraphWithTheLogitsOfDirectLaunches) {
#ifndef ARBOR_CUDA_EMULATED
  GTEST_SKIP() << "counts the CUDA emulator's graph launches";
#else
  ARBOR_REQUIRE_CUDA();
  auto m = synthetic("smollm2-135m", 2, kernels::GgmlType::Q4_1);
  const auto tokens = random_tokens(150, m->config.vocab_size, 4);  // prefill steps past the GEMM kernel
  struct Graphs {
    std::uint64_t launched = 0, captured = 0;
    GraphCounts counted;
  };
  // An engine made with `graphs` and `replay` (cuda_engine_with_graphs), the words its
  // describe() must hold.
  auto run = [&](const char* graphs, const char* replay, const char* described, Graphs& seen) {
    Side gpu(cuda_engine_with_graphs(*m, graphs, replay), 16, 64);
    std::vector<std::vector<float>> logits;
    if (!gpu.engine) return logits;
    EXPECT_NE(gpu.engine->describe().find(described), std::string::npos) << gpu.engine->describe();
    const std::uint64_t launched = ::cuda_emulator::graphs_launched();
    const std::uint64_t captured = ::cuda_emulator::graphs_captured();
    KvSequence seqs[3];
    for (int i = 0; i < 3; ++i) {
      auto p = prefill(*gpu.engine, *gpu.pool, seqs[i], std::span(tokens).first(std::size_t(150 - i)), 512);
      EXPECT_TRUE(p) << p.error().message;
      logits.push_back(p ? *p : std::vector<float>{});
    }
    EXPECT_EQ(::cuda_emulator::graphs_launched(), launched) << "a prefill step with cuBLAS GEMMs was captured";
    // Slots alternate: steps 0, 2, 4... use one, 1, 3, 5... the other. Captured: 0 and 1
    // (the slots' first), 2 (one row), 4 (three rows again in its slot); the rest replay,
    // across the page boundary at position 160.
    for (int s = 0; s < 14; ++s) {
      std::vector<KvSequence*> batch = {&seqs[0]};
      if (s != 2) batch = {&seqs[0], &seqs[1], &seqs[2]};
      const std::vector<TokenId> next(batch.size(), TokenId(5 + s));
      auto d = decode_step(*gpu.engine, *gpu.pool, batch, next);
      EXPECT_TRUE(d) << d.error().message;
      logits.push_back(d ? *d : std::vector<float>{});
    }
    seen = {::cuda_emulator::graphs_launched() - launched, ::cuda_emulator::graphs_captured() - captured,
            gpu.engine->graph_counts()};
    for (KvSequence& seq : seqs) release(seq, *gpu.pool);
    EXPECT_EQ(gpu.pool->num_used(), 0);
    return logits;
  };
  Graphs with, without, every_step;
  const auto direct = run("0", "1", "CUDA graphs: off", without);
  const auto graphed = run("1", "1", "CUDA graphs: on;", with);
  const auto recaptured = run("1", "0", "CUDA graphs: on, captured every step", every_step);
  EXPECT_EQ(without.launched, 0u);
  EXPECT_EQ(with.launched, 14u) << "one graph launch per decode step";
  EXPECT_EQ(with.captured, 4u);
  EXPECT_EQ(with.counted.captured, 4u);
  EXPECT_EQ(with.counted.replayed, 10u);
  EXPECT_EQ(every_step.captured, 14u);
  EXPECT_EQ(every_step.counted.replayed, 0u);
  ASSERT_EQ(graphed.size(), direct.size());
  ASSERT_EQ(recaptured.size(), direct.size());
  for (std::size_t i = 0; i < direct.size(); ++i) {
    EXPECT_EQ(graphed[i], direct[i]) << "step " << i;
    EXPECT_EQ(recaptured[i], direct[i]) << "step " << i;
  }
#endif
}

// A decode batch is padded to a bucket of rows (1, 2, 4, 8, then multiples of 16) when
// its graph may replay, so agents leaving within a bucket keep the graph: 7, 6 then 5
// rows (bucket 8) are captured once per slot and replay after, with the logits of direct
// launches of 7, 6 and 5 rows bit for bit (which the padding rows' K/V stores, without
// rope_store_kv's guard on their negative page, break), every page released.
TEST(CudaEngine, ABatchThatShrinksWithinItsRowBucketKeepsReplayingItsGraph) {
#ifndef ARBOR_CUDA_EMULATED
  GTEST_SKIP() << "counts the CUDA emulator's graph captures";
#else
  ARBOR_REQUIRE_CUDA();
  auto m = synthetic("smollm2-135m", 2, kernels::GgmlType::Q4_1);
  const auto tokens = random_tokens(40, m->config.vocab_size, 6);
  auto run = [&](const char* graphs, GraphCounts& counted) {
    Side gpu(cuda_engine_with_graphs(*m, graphs), 16, 64);
    std::vector<std::vector<float>> logits;
    if (!gpu.engine) return logits;
    KvSequence seqs[7];
    for (int i = 0; i < 7; ++i) {
      auto p = prefill(*gpu.engine, *gpu.pool, seqs[i], std::span(tokens).first(std::size_t(20 + 3 * i)), 512);
      EXPECT_TRUE(p) << p.error().message;
    }
    const GraphCounts before = gpu.engine->graph_counts();
    for (int s = 0; s < 12; ++s) {
      const int rows = 7 - s / 4;
      std::vector<KvSequence*> batch;
      for (int i = 0; i < rows; ++i) batch.push_back(&seqs[i]);
      const std::vector<TokenId> next(batch.size(), TokenId(9 + s));
      auto d = decode_step(*gpu.engine, *gpu.pool, batch, next);
      EXPECT_TRUE(d) << d.error().message;
      logits.push_back(d ? *d : std::vector<float>{});
    }
    counted = graph_steps_since(*gpu.engine, before);
    for (KvSequence& seq : seqs) release(seq, *gpu.pool);
    EXPECT_EQ(gpu.pool->num_used(), 0);
    return logits;
  };
  GraphCounts direct_counts, graph_counts;
  const auto direct = run("0", direct_counts);
  const auto graphed = run("1", graph_counts);
  EXPECT_EQ(direct_counts.captured + direct_counts.replayed, 0u);
  EXPECT_EQ(graph_counts.captured, 2u) << "the first step of each slot";
  EXPECT_EQ(graph_counts.replayed, 10u);
  ASSERT_EQ(graphed.size(), direct.size());
  for (std::size_t i = 0; i < direct.size(); ++i) EXPECT_EQ(graphed[i], direct[i]) << "step " << i;
#endif
}

// Constrained rows (a token mask each) in steady decode steps: the masks change every
// step while the graph replays, and each step's tokens are those of direct launches,
// each allowed by its own step's mask (a replay that read a stale mask would break both).
TEST(CudaEngine, MaskedTokenRowsDrawUnderEachStepsMaskWhenTheirGraphReplays) {
  ARBOR_REQUIRE_CUDA();
  auto m = synthetic("smollm2-135m", 2, kernels::GgmlType::Q4_1);
  const int vocab = m->config.vocab_size;
  const auto tokens = random_tokens(30, vocab, 8);
  constexpr int kSeqs = 3, kSteps = 10;
  // Step s, row i: a third of the vocabulary, another third each time.
  auto mask_of = [&](int s, int i) {
    TokenMask mask(vocab);
    for (TokenId t = 0; t < vocab; ++t)
      if ((t + s + i) % 3 == 0) mask.allow(t);
    return mask;
  };
  auto run = [&](const char* graphs, GraphCounts& counted) {
    Side gpu(cuda_engine_with_graphs(*m, graphs), 16, 64);
    std::vector<TokenId> drawn;
    if (!gpu.engine) return drawn;
    KvSequence seqs[kSeqs];
    std::vector<TokenId> next(kSeqs);
    for (int i = 0; i < kSeqs; ++i) {
      auto p = prefill(*gpu.engine, *gpu.pool, seqs[i], std::span(tokens).first(std::size_t(20 + i)), 512);
      EXPECT_TRUE(p) << p.error().message;
      next[std::size_t(i)] = TokenId(i + 1);
    }
    const GraphCounts before = gpu.engine->graph_counts();
    for (int s = 0; s < kSteps; ++s) {
      std::vector<TokenMask> masks;
      std::vector<SequenceStep> steps;
      for (int i = 0; i < kSeqs; ++i) masks.push_back(mask_of(s, i));
      for (int i = 0; i < kSeqs; ++i) {
        EXPECT_TRUE(reserve_pages(seqs[i], *gpu.pool, int(seqs[i].tokens.size()) + 1));
        steps.push_back({std::span(&next[std::size_t(i)], 1), int(seqs[i].tokens.size()), seqs[i].pages,
                         LogitsMode::last_token});
        steps.back().allowed = masks[std::size_t(i)].words();
      }
      StepOutput out;
      auto ok = gpu.engine->forward(steps, *gpu.pool, out);
      EXPECT_TRUE(ok) << ok.error().message;
      if (!ok || out.tokens.size() != std::size_t(kSeqs)) break;
      for (int i = 0; i < kSeqs; ++i) {
        const TokenId t = out.tokens[std::size_t(i)];
        EXPECT_TRUE(masks[std::size_t(i)].allows(t)) << "step " << s << " row " << i << ": " << t << " is masked";
        seqs[i].tokens.push_back(next[std::size_t(i)]);
        next[std::size_t(i)] = t;
        drawn.push_back(t);
      }
    }
    counted = graph_steps_since(*gpu.engine, before);
    for (KvSequence& seq : seqs) release(seq, *gpu.pool);
    EXPECT_EQ(gpu.pool->num_used(), 0);
    return drawn;
  };
  GraphCounts direct_counts, graph_counts;
  const auto direct = run("0", direct_counts);
  const auto graphed = run("1", graph_counts);
  EXPECT_EQ(direct.size(), std::size_t(kSeqs * kSteps));
  EXPECT_EQ(graphed, direct);
  EXPECT_EQ(direct_counts.captured + direct_counts.replayed, 0u);
  // Captured: the first step of each slot only (each slot's drawn-token buffer, the other
  // slot's future tokens, is allocated before the first step and stays put).
  EXPECT_EQ(graph_counts.captured, 2u);
  EXPECT_EQ(graph_counts.replayed, std::uint64_t(kSteps - 2));
}

// KV rule 14 on the device: a reader that takes the owner's full pages and computes only
// the rest gets the logits of one full prefill.
TEST(CudaEngine, PrefixFromCachePlusSuffixEqualsFullPrefill) {
  ARBOR_REQUIRE_CUDA();
  auto m = synthetic("smollm2-135m", 6, kernels::GgmlType::Q4_1);
  Side gpu(cuda_engine(*m), 16, 64);
  ASSERT_TRUE(gpu.engine);
  const auto tokens = random_tokens(57, m->config.vocab_size, 9);
  KvSequence full;
  auto reference = prefill(*gpu.engine, *gpu.pool, full, tokens, 512, LogitsMode::all);
  ASSERT_TRUE(reference) << reference.error().message;
  const int vocab = m->config.vocab_size;
  for (int shared_pages : {1, 3}) {
    const int reused = shared_pages * 16;
    KvSequence reader;
    borrow_prefix(reader, full, shared_pages, *gpu.pool);
    std::span<const TokenId> rest(tokens.begin() + reused, tokens.end());
    auto logits = prefill(*gpu.engine, *gpu.pool, reader, rest, 512, LogitsMode::all);
    ASSERT_TRUE(logits) << logits.error().message;
    std::span<const float> expected(reference->begin() + std::ptrdiff_t(std::size_t(reused) * vocab), reference->end());
    EXPECT_LE(max_abs_diff(*logits, expected), 1e-3f) << shared_pages << " shared pages";
    release(reader, *gpu.pool);
  }
  release(full, *gpu.pool);
  EXPECT_EQ(gpu.pool->num_used(), 0);
}

// Sub-agents over one SharedPrefix: readers holding the owner's full pages decode in one
// batch (their rows tiled, the prefix pages read once per tile) and get the logits of
// readers that each computed the whole context in pages of their own (no tiles).
TEST(CudaEngine, DecodeOverSharedPrefixPagesEqualsDecodeOverPrivateCopies) {
  ARBOR_REQUIRE_CUDA();
  auto m = synthetic("smollm2-135m", 4, kernels::GgmlType::Q4_1);
  Side gpu(cuda_engine(*m), 16, 128);
  ASSERT_TRUE(gpu.engine);
  const int vocab = m->config.vocab_size, readers = 5, shared_pages = 3, steps = 3;
  const auto prefix = random_tokens(shared_pages * 16 + 5, vocab, 21);
  KvSequence owner;
  ASSERT_TRUE(prefill(*gpu.engine, *gpu.pool, owner, prefix, 512));
  std::vector<KvSequence> shared(readers), own(readers);
  for (int i = 0; i < readers; ++i) {
    const auto suffix = random_tokens(3 + 4 * i, vocab, 30 + std::uint32_t(i));
    KvSequence& s = shared[std::size_t(i)];
    borrow_prefix(s, owner, shared_pages, *gpu.pool);
    std::vector<TokenId> rest(prefix.begin() + shared_pages * 16, prefix.end());
    rest.insert(rest.end(), suffix.begin(), suffix.end());
    ASSERT_TRUE(prefill(*gpu.engine, *gpu.pool, s, rest, 512));
    std::vector<TokenId> whole(prefix);
    whole.insert(whole.end(), suffix.begin(), suffix.end());
    ASSERT_TRUE(prefill(*gpu.engine, *gpu.pool, own[std::size_t(i)], whole, 512));
  }
  std::vector<TokenId> next(std::size_t(readers), 0);
  for (int i = 0; i < readers; ++i) next[std::size_t(i)] = TokenId(7 * i + 1);
  for (int step = 0; step < steps; ++step) {
    std::vector<KvSequence*> a, b;
    for (int i = 0; i < readers; ++i) {
      a.push_back(&shared[std::size_t(i)]);
      b.push_back(&own[std::size_t(i)]);
    }
    auto tiled = decode_step(*gpu.engine, *gpu.pool, a, next);
    auto alone = decode_step(*gpu.engine, *gpu.pool, b, next);
    ASSERT_TRUE(tiled && alone);
    EXPECT_LE(max_abs_diff(*tiled, *alone), 1e-3f) << "decode step " << step;
    for (int i = 0; i < readers; ++i) {
      std::span<const float> row(alone->data() + std::size_t(i) * vocab, std::size_t(vocab));
      next[std::size_t(i)] = TokenId(std::max_element(row.begin(), row.end()) - row.begin());
    }
  }
  for (int i = 0; i < readers; ++i) {
    release(shared[std::size_t(i)], *gpu.pool);
    release(own[std::size_t(i)], *gpu.pool);
  }
  release(owner, *gpu.pool);
  EXPECT_EQ(gpu.pool->num_used(), 0);
}

TEST(CudaEngine, AHostPoolIsRefusedWithWhatToDo) {
  ARBOR_REQUIRE_CUDA();
  auto m = load(testing::write_tiny_llama(testing::TinyLlamaShape{}, 7));
  auto engine = cuda_engine(*m);
  ASSERT_TRUE(engine);
  cache::HostPageAllocator host;
  cache::PagePool pool(engine->kv_geometry(16), 8, host);
  KvSequence seq;
  const std::vector<TokenId> tokens = {1, 2, 3};
  auto r = prefill(*engine, pool, seq, tokens, 8);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::invalid_argument);
  EXPECT_NE(r.error().message.find("page_allocator()"), std::string::npos) << r.error().message;
  release(seq, pool);
}

}  // namespace
}  // namespace arbor::model
