// What only the "cuda" device has: its report and the automatic sizing of a device KV
// pool, on a synthetic SmolLM2-shaped model (the real weights do not travel to GPU
// machines). The cases every device shares (cache on == cache off, no page leaked after a
// failure, timeout or cancel) are tests/runtime/device_runs_test.cpp, on cpu and cuda.
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

std::unique_ptr<Runtime> cuda_runtime(bool overlap = true) {
  RuntimeConfig c;
  c.model_path = synthetic_model_path();
  c.device = DeviceChoice::cuda;
  c.kv_memory_mb = 512;
  c.overlap = overlap;
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

// The device report, a generation, and the graph steps in the cache stats.
TEST(CudaRuntime, ReportsTheDeviceAndGenerates) {
  ARBOR_REQUIRE_CUDA();
  auto rt = cuda_runtime();
  ASSERT_TRUE(rt);
  EXPECT_EQ(rt->device(), "cuda");
  EXPECT_EQ(rt->device_info().rfind("cuda (", 0), 0u) << rt->device_info();
  auto out = rt->generate(raw("The quick brown fox jumps over the lazy dog.", 12));
  ASSERT_TRUE(out) << out.error().describe();
  EXPECT_EQ(out->generated_tokens, 12u);
  // Its decode steps replay their graph after the first in each step slot: steady steps
  // cost the host one launch call (CudaEngine.SteadyDecodeSteps... counts them exactly).
  const CacheStats stats = rt->cache_stats();
  EXPECT_GT(stats.graph_steps_replayed, stats.graph_steps_captured);
  EXPECT_LE(stats.graph_steps_replayed + stats.graph_steps_captured, stats.batched_steps);
  expect_clean(*rt);
}

// A request under a JSON Schema on the device: each step carries its mask and the
// device draws under it. The synthetic model's vocabulary is 256 byte tokens, an end
// token and ~49,000 fillers its random weights favour as much as any: only the mask
// keeps the document to one of the enum's values, closed by the end token. Beside a
// free request, with steps overlapped (the schema's row, fed the token in flight, gets
// its mask late: Engine::supply_masks) and waiting: the same outputs.
TEST(CudaRuntime, ASchemaRequestDrawsUnderItsMaskOnTheDevice) {
  ARBOR_REQUIRE_CUDA();
  GenerateRequest colour = raw("Pick a colour:", 16), free = raw("The quick brown fox", 24);
  colour.json_schema = R"({"enum":["red","green","blue"]})";
  std::vector<GenerateResult> outputs;
  for (bool overlap : {true, false}) {
    auto rt = cuda_runtime(overlap);
    ASSERT_TRUE(rt);
    auto a = rt->start_generate(free);
    auto b = rt->start_generate(colour);
    ASSERT_TRUE(a && b) << (a ? b.error().describe() : a.error().describe());
    auto free_out = a->result();
    auto colour_out = b->result();
    ASSERT_TRUE(free_out && colour_out) << (free_out ? colour_out.error().describe() : free_out.error().describe());
    ASSERT_TRUE(colour_out->json) << colour_out->text;
    EXPECT_TRUE(*colour_out->json == "red" || *colour_out->json == "green" || *colour_out->json == "blue")
        << colour_out->text;
    EXPECT_EQ(colour_out->text, colour_out->json->dump());
    EXPECT_EQ(colour_out->finish_reason, FinishReason::stop) << colour_out->text;
    EXPECT_EQ(free_out->generated_tokens, 24u);
    outputs.push_back(*free_out);
    outputs.push_back(*colour_out);
    expect_clean(*rt);
  }
  EXPECT_EQ(outputs[0].tokens, outputs[2].tokens) << "the free request, overlapped and waiting";
  EXPECT_EQ(outputs[1].tokens, outputs[3].tokens) << "the schema's request, overlapped and waiting";
}

// Overlap on the device: a team's decode steps queued behind each other, greedy rows fed
// the step before's argmax on the device, give every agent the output of steps that
// each wait for the one before (--no-overlap), and free every page.
TEST(CudaRuntime, OverlappedStepsGiveTheOutputsOfStepsThatWait) {
  ARBOR_REQUIRE_CUDA();
  auto overlapped = cuda_runtime(true), waiting = cuda_runtime(false);
  ASSERT_TRUE(overlapped && waiting);
  EXPECT_NE(overlapped->device_info().find("steps overlapped: on"), std::string::npos) << overlapped->device_info();
  EXPECT_NE(waiting->device_info().find("steps overlapped: off"), std::string::npos) << waiting->device_info();
  const auto workflow = team_workflow("team", long_system("rivers", 1), 3, 8);
  expect_same_outputs(run_text(*overlapped, workflow), run_text(*waiting, workflow));
  expect_clean(*overlapped);
  expect_clean(*waiting);
}

}  // namespace
}  // namespace arbor::testing
