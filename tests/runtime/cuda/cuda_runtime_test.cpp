// The runtime on device "cuda": the scheduler, continuous batching, fan-out dedupe and
// pins run unchanged over a device KV pool. On a synthetic SmolLM2-shaped model (the
// real weights do not travel to GPU machines): outputs with the prefix cache equal
// outputs without it, and every case ends with no page locked or leaked (cancel too).
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>

#include "tests/kernels/cuda/cuda_test_util.hpp"
#include "model/synthetic_model.hpp"
#include "runtime/runtime_test_util.hpp"

namespace arbor::testing {
namespace {

// A 6-layer SmolLM2-shaped Q4_1 model, written once into the temporary directory (the
// GPU machine runs binaries built elsewhere: ARBOR_BINARY_DIR need not exist there) and
// removed at exit.
struct TempModel {
  std::string path;
  TempModel() {
    path = (std::filesystem::temp_directory_path() / ("arbor_cuda_runtime_test_" + std::to_string(getpid()) + ".gguf"))
               .string();
    auto shape = model::synthetic_shape("smollm2-135m");
    shape->layers = 6;
    auto writer = model::synthetic_llama(*shape, kernels::GgmlType::Q4_1, 3);
    EXPECT_TRUE(writer && writer->write_file(path));
  }
  ~TempModel() { std::filesystem::remove(path); }
};

const std::string& synthetic_model_path() {
  static const TempModel model;
  return model.path;
}

std::unique_ptr<Runtime> cuda_runtime(bool caching) {
  RuntimeConfig c;
  c.model_path = synthetic_model_path();
  c.device = DeviceChoice::cuda;
  c.kv_memory_mb = 512;
  c.prefix_caching = caching;
  return make_runtime(c);
}

GenerateRequest raw(const std::string& prompt, int max_tokens) {
  GenerateRequest r;
  r.raw_prompt = prompt;
  r.sampling.max_tokens = max_tokens;
  return r;
}

// Automatic sizing on a GPU: most of the memory left after the weights, never more
// than was free, and the pool works.
TEST(CudaRuntime, AutomaticKvPoolTakesMostOfTheFreeDeviceMemory) {
  ARBOR_REQUIRE_CUDA();
  RuntimeConfig c;
  c.model_path = synthetic_model_path();
  c.device = DeviceChoice::cuda;
  c.kv_memory_mb = 0;
  auto rt = make_runtime(c);
  ASSERT_TRUE(rt);
  EXPECT_NE(rt->device_info().find("(automatic)"), std::string::npos) << rt->device_info();
  EXPECT_GT(rt->kv_pool_bytes(), std::size_t(1) << 30) << "an H200-class device has tens of GiB free";
  auto out = rt->generate(raw("The quick brown fox jumps over the lazy dog.", 8));
  ASSERT_TRUE(out) << out.error().describe();
  EXPECT_GT(out->generated_tokens, 0u);
}

TEST(CudaRuntime, ReportsTheDeviceAndGenerates) {
  ARBOR_REQUIRE_CUDA();
  auto rt = cuda_runtime(true);
  ASSERT_TRUE(rt);
  EXPECT_EQ(rt->device(), "cuda");
  EXPECT_EQ(rt->device_info().rfind("cuda (", 0), 0u) << rt->device_info();
  auto out = rt->generate(raw("The quick brown fox jumps over the lazy dog.", 12));
  ASSERT_TRUE(out) << out.error().describe();
  EXPECT_EQ(out->generated_tokens, 12u);
  expect_clean(*rt);
}

TEST(CudaRuntime, CachedRunsEqualUncachedRuns) {
  ARBOR_REQUIRE_CUDA();
  auto cached = cuda_runtime(true), uncached = cuda_runtime(false);
  ASSERT_TRUE(cached && uncached);
  const std::string shared(300, 'a');  // several full pages of one shared prefix
  for (const char* suffix : {" first question?", " second question?", " first question?"}) {
    auto a = cached->generate(raw(shared + suffix, 8));
    auto b = uncached->generate(raw(shared + suffix, 8));
    ASSERT_TRUE(a && b);
    EXPECT_EQ(a->tokens, b->tokens) << suffix;
  }
  EXPECT_GT(cached->cache_stats().cached_tokens, 0u);
  EXPECT_EQ(uncached->cache_stats().cached_tokens, 0u);
  const auto with = run_text(*cached, team_workflow("team", "You are a careful assistant.", 4, 6));
  const auto without = run_text(*uncached, team_workflow("team", "You are a careful assistant.", 4, 6));
  ASSERT_EQ(with.status, RunStatus::ok) << to_json(with);
  ASSERT_EQ(without.status, RunStatus::ok) << to_json(without);
  ASSERT_EQ(with.agents.size(), without.agents.size());
  for (std::size_t i = 0; i < with.agents.size(); ++i) {
    const AgentResult* other = agent(without, with.agents[i].id);
    ASSERT_TRUE(other) << with.agents[i].id;
    EXPECT_EQ(with.agents[i].output, other->output) << with.agents[i].id;
  }
  expect_clean(*cached);
  expect_clean(*uncached);
}

TEST(CudaRuntime, CancelFreesEveryPage) {
  ARBOR_REQUIRE_CUDA();
  auto rt = cuda_runtime(true);
  ASSERT_TRUE(rt);
  auto handle = rt->start_generate(raw(std::string(200, 'b'), 2000));
  ASSERT_TRUE(handle);
  handle->cancel();
  EXPECT_EQ(handle->wait().finish_reason, FinishReason::cancelled);
  expect_clean(*rt);
}

}  // namespace
}  // namespace arbor::testing
