// The runtime and its workflows on every device ("cpu", "cuda"): the same cases, the same
// expectations. On each device, outputs with the prefix cache equal outputs without it,
// and every way a run can end early (an agent failing past its retries, a timeout, a
// cancel, a pool too small, a request that can never fit) ends with no page locked or
// leaked. The model is a small synthetic Llama written with the project's GGUF writer, so
// the cases run where the default model does not travel (a GPU machine) and stay quick
// on the CUDA emulator. The cuda cases skip, saying why, where no CUDA device is usable.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>

#include "fault_injection.hpp"
#include "model/device.hpp"
#include "model/synthetic_model.hpp"
#include "runtime_test_util.hpp"

namespace arbor::testing {
namespace {

// 4 layers, 4 query / 2 KV heads of 64, byte-level vocabulary of 512: a page of 16 tokens
// holds 32 KiB of K and V (F16), so 1 MiB of pool is 32 pages.
model::SyntheticShape small_llama() {
  return {.name = "small", .vocab = 512, .hidden = 256, .layers = 4, .heads = 4, .kv_heads = 2, .ffn = 768,
          .context = 4096};
}

// Written once into the temporary directory (a GPU machine runs binaries built
// elsewhere: ARBOR_BINARY_DIR need not exist there) and removed at exit.
struct TempModel {
  std::string path;
  TempModel() {
    path = (std::filesystem::temp_directory_path() / ("arbor_device_runs_" + std::to_string(getpid()) + ".gguf"))
               .string();
    auto writer = model::synthetic_llama(small_llama(), kernels::GgmlType::Q4_1, 11);
    EXPECT_TRUE(writer && writer->write_file(path));
  }
  ~TempModel() { std::filesystem::remove(path); }
};

const std::string& small_model_path() {
  static const TempModel model;
  return model.path;
}

class RuntimeOnDevice : public ::testing::TestWithParam<DeviceChoice> {
 protected:
  void SetUp() override {
    if (GetParam() == DeviceChoice::cuda && !(model::cuda_built() && model::cuda_device_count() > 0))
      GTEST_SKIP() << (model::cuda_built() ? "no CUDA device is usable here"
                                           : "this build has no CUDA backend (-DARBOR_CUDA=ON)")
                   << "; the cuda cases run on a GPU machine (scripts/device_check.sh) or the CUDA emulator";
  }

  std::unique_ptr<Runtime> runtime(bool caching = true, std::size_t kv_memory_mb = 8) {
    RuntimeConfig c;
    c.model_path = small_model_path();
    c.device = GetParam();
    c.num_threads = 2;
    c.kv_memory_mb = kv_memory_mb;
    c.prefix_caching = caching;
    auto rt = make_runtime(c);
    if (rt) {
      EXPECT_EQ(rt->device(), GetParam() == DeviceChoice::cuda ? "cuda" : "cpu");
    }
    return rt;
  }
};

GenerateRequest raw(const std::string& prompt, int max_tokens) {
  GenerateRequest r;
  r.raw_prompt = prompt;
  r.sampling.max_tokens = max_tokens;
  return r;
}

TEST_P(RuntimeOnDevice, GenerationsWithTheCacheEqualGenerationsWithout) {
  auto cached = runtime(true), uncached = runtime(false);
  ASSERT_TRUE(cached && uncached);
  const std::string shared(300, 'a');  // several full pages of one shared prefix
  for (const char* suffix : {" first question?", " second question?", " first question?"}) {
    auto a = cached->generate(raw(shared + suffix, 8));
    auto b = uncached->generate(raw(shared + suffix, 8));
    ASSERT_TRUE(a && b);
    EXPECT_EQ(a->generated_tokens, 8u);
    EXPECT_EQ(a->tokens, b->tokens) << suffix;
  }
  EXPECT_GE(cached->cache_stats().cached_tokens, 2u * 288) << "the second and third prompts reuse 18 pages";
  EXPECT_EQ(uncached->cache_stats().cached_tokens, 0u);
  expect_clean(*cached);
  expect_clean(*uncached);
}

TEST_P(RuntimeOnDevice, WorkflowRunsWithTheCacheEqualRunsWithout) {
  auto cached = runtime(true), uncached = runtime(false);
  ASSERT_TRUE(cached && uncached);
  const auto workflow = team_workflow("team", long_system("rivers", 3), 4, 6);
  expect_same_outputs(run_text(*cached, workflow), run_text(*uncached, workflow));
  EXPECT_GT(cached->cache_stats().cached_tokens, 0u);
  expect_clean(*cached);
  expect_clean(*uncached);
}

TEST_P(RuntimeOnDevice, AgentFailingPastItsRetriesFailsTheRunAndFreesEveryPage) {
  auto rt = runtime();
  ASSERT_TRUE(rt);
  RuntimeTestAccess::inject_faults(*rt, {{"worker[1]", 5}});
  const auto r = run_text(*rt, team_workflow("fail", long_system("rivers", 3), 3, 4, R"({"max_retries": 1})"));
  EXPECT_EQ(r.status, RunStatus::failed);
  EXPECT_EQ(agent(r, "worker[1]")->status, AgentStatus::failed);
  EXPECT_EQ(agent(r, "worker[1]")->attempts, 2);
  EXPECT_NE(r.error.find("worker[1]"), std::string::npos) << r.error;
  expect_clean(*rt);
}

// 1 ms cannot cover a prefill of hundreds of tokens: every attempt is cut mid-flight.
TEST_P(RuntimeOnDevice, TimeoutMidGenerationFailsTheRunAndFreesEveryPage) {
  auto rt = runtime();
  ASSERT_TRUE(rt);
  const auto r = run_text(*rt, team_workflow("timeout", long_system("rivers", 20), 2, 24,
                                             R"({"max_retries": 0, "timeout_ms": 1})"));
  EXPECT_EQ(r.status, RunStatus::failed);
  EXPECT_NE(r.error.find("timed out"), std::string::npos) << r.error;
  expect_clean(*rt);
}

TEST_P(RuntimeOnDevice, CancelMidRunStopsEveryAgentAndFreesEveryPage) {
  auto rt = runtime();
  ASSERT_TRUE(rt);
  const auto r = cancel_at_first_token(*rt, team_workflow("cancel", long_system("rivers", 3), 3, 400));
  EXPECT_EQ(r.status, RunStatus::cancelled);
  std::size_t generated = 0;
  for (const auto& a : r.agents) generated += a.generated_tokens;
  EXPECT_LT(generated, 3u * 400);
  expect_clean(*rt);
  const auto again = run_text(*rt, team_workflow("after", long_system("rivers", 3), 1, 4));
  EXPECT_EQ(again.status, RunStatus::ok) << to_json(again);
  expect_clean(*rt);
}

TEST_P(RuntimeOnDevice, CancelRightAfterStartFreesEveryPage) {
  auto rt = runtime();
  ASSERT_TRUE(rt);
  auto handle = rt->start_generate(raw(std::string(200, 'b'), 2000));
  ASSERT_TRUE(handle);
  handle->cancel();
  EXPECT_EQ(handle->wait().finish_reason, FinishReason::cancelled);
  expect_clean(*rt);
}

// A pool of 64 pages: a worker needs 18 (270 prompt tokens and 8 generated), so without
// the cache four cannot run at once and queue; the boss's fan-in needs 41. Every agent
// still completes, with the same outputs as in a pool that holds them all.
TEST_P(RuntimeOnDevice, PoolTooSmallForEveryAgentAtOnceStillCompletesEveryAgent) {
  auto roomy = runtime(true, 8);
  ASSERT_TRUE(roomy);
  const auto workflow = team_workflow("rivers", long_system("rivers", 2), 4, 8);
  const auto reference = run_text(*roomy, workflow);
  for (bool caching : {false, true}) {
    SCOPED_TRACE(caching ? "caching on" : "caching off");
    auto rt = runtime(caching, 2);
    ASSERT_TRUE(rt);
    EXPECT_EQ(rt->cache_stats().pages_total, 64);
    expect_same_outputs(run_text(*rt, workflow), reference);
    expect_clean(*rt);
  }
}

TEST_P(RuntimeOnDevice, RequestThatCanNeverFitFailsClearly) {
  auto rt = runtime(true, 1);
  ASSERT_TRUE(rt);
  auto r = rt->generate(raw(std::string(600, 'c'), 8));  // 38 pages of a pool of 32
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::out_of_memory);
  EXPECT_NE(r.error().message.find("whole pool has 32"), std::string::npos) << r.error().message;
  expect_clean(*rt);
  EXPECT_TRUE(rt->generate(raw("a short prompt", 4))) << "the runtime still serves after the refusal";
}

INSTANTIATE_TEST_SUITE_P(Devices, RuntimeOnDevice, ::testing::Values(DeviceChoice::cpu, DeviceChoice::cuda),
                         [](const auto& info) { return std::string(info.param == DeviceChoice::cuda ? "cuda" : "cpu"); });

}  // namespace
}  // namespace arbor::testing
