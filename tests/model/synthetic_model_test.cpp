// Synthetic models (random weights in real shapes): the file loads as a model (config,
// weights, tokenizer), the same seed writes the same bytes, and a forward pass keeps
// activations O(1): finite logits of a sane spread, so benchmarks and cross-backend
// tests on them exercise real numerics.
#include "model/synthetic_model.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "cache/page_pool.hpp"
#include "model/cpu_engine.hpp"
#include "model/kv_sequence.hpp"
#include "model/llama_config.hpp"
#include "model/llama_weights.hpp"
#include "model/tokenizer.hpp"

namespace arbor::model {
namespace {

TEST(SyntheticModel, LoadsInItsShapeAndComputesFiniteLogits) {
  for (kernels::GgmlType type : {kernels::GgmlType::Q4_0, kernels::GgmlType::Q4_1, kernels::GgmlType::Q8_0,
                                 kernels::GgmlType::F16}) {
    SCOPED_TRACE(kernels::type_name(type));
    auto shape = synthetic_shape("smollm2-135m");
    ASSERT_TRUE(shape);
    shape->layers = 3;
    auto writer = synthetic_llama(*shape, type, 7);
    ASSERT_TRUE(writer) << writer.error().message;
    const auto bytes = writer->serialize();
    auto file = GgufFile::parse(bytes);
    ASSERT_TRUE(file) << file.error().message;
    auto config = read_llama_config(*file);
    ASSERT_TRUE(config) << config.error().message;
    EXPECT_EQ(config->vocab_size, 49152);
    EXPECT_EQ(config->hidden, 576);
    EXPECT_EQ(config->num_layers, 3);
    EXPECT_EQ(config->num_heads, 9);
    EXPECT_EQ(config->num_kv_heads, 3);
    auto weights = bind_llama_weights(*file, *config);
    ASSERT_TRUE(weights) << weights.error().message;
    EXPECT_EQ(weights->layers[0].wq.type, type);
    auto tokenizer = Tokenizer::from_gguf(*file);
    ASSERT_TRUE(tokenizer) << tokenizer.error().message;
    EXPECT_EQ((*tokenizer)->vocab_size(), 49152);
    EXPECT_EQ((*tokenizer)->encode("hi", false).size(), 2u);  // byte tokens, no merges

    CpuEngine engine(*config, *weights, 2);
    cache::HostPageAllocator allocator;
    cache::PagePool pool(engine.kv_geometry(16), 8, allocator);
    KvSequence seq;
    const std::vector<TokenId> tokens = {104, 105, 256, 3000, 49151, 7};
    auto logits = prefill(engine, pool, seq, tokens, 16, LogitsMode::all);
    ASSERT_TRUE(logits) << logits.error().message;
    double sum = 0, sum2 = 0;
    for (float x : *logits) {
      ASSERT_TRUE(std::isfinite(x));
      sum += x;
      sum2 += double(x) * x;
    }
    const double n = double(logits->size()), stddev = std::sqrt(sum2 / n - (sum / n) * (sum / n));
    EXPECT_GT(stddev, 0.1);
    EXPECT_LT(stddev, 10.0);
    release(seq, pool);
  }
}

TEST(SyntheticModel, SameSeedSameBytesOtherSeedOtherBytes) {
  auto shape = synthetic_shape("llama3-8b");
  ASSERT_TRUE(shape);
  EXPECT_EQ(shape->vocab, 128256);
  EXPECT_EQ(shape->ffn, 14336);
  shape->layers = 1;
  shape->vocab = 300;  // small enough to write three times
  const auto a = synthetic_llama(*shape, kernels::GgmlType::Q4_0, 1)->serialize();
  const auto b = synthetic_llama(*shape, kernels::GgmlType::Q4_0, 1)->serialize();
  const auto c = synthetic_llama(*shape, kernels::GgmlType::Q4_0, 2)->serialize();
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

TEST(SyntheticModel, UnknownShapeAndUnsupportedTypeAreErrors) {
  auto shape = synthetic_shape("gpt-5");
  ASSERT_FALSE(shape);
  EXPECT_EQ(shape.error().code, ErrorCode::not_found);
  EXPECT_NE(shape.error().message.find("smollm2-135m, llama3-8b"), std::string::npos);
  auto writer = synthetic_llama(*synthetic_shape("smollm2-135m"), kernels::GgmlType::Q6_K, 1);
  ASSERT_FALSE(writer);
  EXPECT_EQ(writer.error().code, ErrorCode::invalid_argument);
}

}  // namespace
}  // namespace arbor::model
