// Device selection and the engine factory: names, what automatic picks, the error for
// cuda where the build or the machine has none, and that the factory's CPU engine is
// the CPU engine (same logits as one built directly).
#include "model/engine_factory.hpp"

#include <gtest/gtest.h>

#include "cache/page_pool.hpp"
#include "model/cpu_engine.hpp"
#include "model/kv_sequence.hpp"
#include "tests/model/tiny_llama.hpp"

namespace arbor::model {
namespace {

// The names Runtime::device() reports (the settings' names are parsed in arbor/config.hpp).
TEST(Device, Names) {
  EXPECT_STREQ(device_name(Device::cpu), "cpu");
  EXPECT_STREQ(device_name(Device::cuda), "cuda");
  EXPECT_STREQ(device_name(Device::automatic), "auto");
}

TEST(Device, AutomaticIsCudaExactlyWhenBuiltWithCudaAndADeviceIsPresent) {
  std::string reason;
  auto d = resolve_device(Device::automatic, &reason);
  ASSERT_TRUE(d);
  const bool cuda = cuda_built() && cuda_device_count() > 0;
  EXPECT_EQ(*d, cuda ? Device::cuda : Device::cpu);
  EXPECT_NE(reason.find("auto: "), std::string::npos) << reason;
  if (!cuda_built()) {
    EXPECT_NE(reason.find("-DARBOR_CUDA=ON"), std::string::npos) << reason;
  }
  auto cpu = resolve_device(Device::cpu);
  ASSERT_TRUE(cpu);
  EXPECT_EQ(*cpu, Device::cpu);
}

TEST(Device, CudaWithoutBuildOrDeviceIsAClearError) {
  if (cuda_built() && cuda_device_count() > 0) GTEST_SKIP() << "a CUDA device is present: cuda is available";
  auto d = resolve_device(Device::cuda);
  ASSERT_FALSE(d);
  EXPECT_EQ(d.error().code, ErrorCode::unsupported);
  const std::string& m = d.error().message;
  EXPECT_NE(m.find("device 'cuda' was requested"), std::string::npos) << m;
  EXPECT_NE(m.find("use device 'cpu' or 'auto'"), std::string::npos) << m;
  // Says which is missing: the build's CUDA backend, or a device.
  EXPECT_NE(m.find(cuda_built() ? "CUDA device" : "configure with -DARBOR_CUDA=ON"), std::string::npos) << m;
  EXPECT_EQ(cuda_device_count(), 0);
}

class Factory : public ::testing::Test {
 protected:
  void SetUp() override {
    bytes_ = testing::write_tiny_llama(testing::TinyLlamaShape{}, 11);
    auto file = GgufFile::parse(bytes_);
    ASSERT_TRUE(file) << file.error().message;
    file_.emplace(std::move(*file));
    auto config = read_llama_config(*file_);
    ASSERT_TRUE(config) << config.error().message;
    config_ = *config;
    auto weights = bind_llama_weights(*file_, config_);
    ASSERT_TRUE(weights) << weights.error().message;
    weights_ = std::move(*weights);
  }

  std::vector<float> logits_of(Engine& engine, const std::vector<TokenId>& tokens) {
    cache::PagePool pool(engine.kv_geometry(4), 64, *engine.page_allocator());
    KvSequence seq;
    auto logits = prefill(engine, pool, seq, tokens, 5, LogitsMode::all);
    EXPECT_TRUE(logits) << logits.error().message;
    release(seq, pool);
    return logits ? *logits : std::vector<float>{};
  }

  std::vector<std::byte> bytes_;
  std::optional<GgufFile> file_;
  LlamaConfig config_;
  LlamaWeights weights_;
};

TEST_F(Factory, CpuEngineComputesWhatTheCpuEngineDoes) {
  auto engine = make_engine(config_, weights_, {Device::cpu, 2, kernels::MatmulPrecision::accurate});
  ASSERT_TRUE(engine) << engine.error().message;
  EXPECT_EQ((*engine)->device(), Device::cpu);
  EXPECT_EQ((*engine)->describe().rfind("cpu (", 0), 0u) << (*engine)->describe();
  EXPECT_NE((*engine)->describe().find("2 threads"), std::string::npos) << (*engine)->describe();
  EXPECT_TRUE((*engine)->page_allocator()->host_accessible());

  CpuEngine direct(config_, weights_, 2);
  const std::vector<TokenId> tokens = {1, 5, 9, 2, 7, 3, 8, 4, 6, 0, 11, 12};
  const auto a = logits_of(**engine, tokens), b = logits_of(direct, tokens);
  ASSERT_EQ(a.size(), tokens.size() * std::size_t(config_.vocab_size));
  EXPECT_EQ(a, b);  // same kernels, same order: bit-identical
}

TEST_F(Factory, CudaRequestedWhereUnavailableFailsAndAutomaticFallsBack) {
  if (cuda_built() && cuda_device_count() > 0) GTEST_SKIP() << "a CUDA device is present: cuda is available";
  auto cuda = make_engine(config_, weights_, {Device::cuda, 1, kernels::MatmulPrecision::accurate});
  ASSERT_FALSE(cuda);
  EXPECT_EQ(cuda.error().code, ErrorCode::unsupported);
  EXPECT_NE(cuda.error().message.find("device 'cuda' was requested"), std::string::npos) << cuda.error().message;
  auto automatic = make_engine(config_, weights_, {Device::automatic, 1, kernels::MatmulPrecision::accurate});
  ASSERT_TRUE(automatic) << automatic.error().message;
  EXPECT_EQ((*automatic)->device(), Device::cpu);
}

}  // namespace
}  // namespace arbor::model
