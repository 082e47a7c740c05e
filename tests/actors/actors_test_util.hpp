// Shared by the actors tests: the real default model, loaded once per process.
#pragma once

#include <gtest/gtest.h>

#include <memory>

#include "model/chat_template.hpp"
#include "model/engine_factory.hpp"
#include "model/model.hpp"

namespace arbor::actors::testing {

inline std::shared_ptr<const model::Model> real_model() {
  static auto m = [] {
    auto r = model::Model::load(ARBOR_DEFAULT_MODEL);
    EXPECT_TRUE(r) << r.error().message;
    return r ? *r : nullptr;
  }();
  return m;
}

// A CPU engine on the real model (2 threads), for a BatchEngineConfig.
inline std::shared_ptr<model::Engine> cpu_engine() {
  auto e = model::make_engine(*real_model(), {model::Device::cpu, 2, kernels::MatmulPrecision::accurate});
  EXPECT_TRUE(e) << e.error().message;
  return e ? std::shared_ptr<model::Engine>(std::move(*e)) : nullptr;
}

inline const model::ChatTemplate& real_chat() {
  static auto c = model::ChatTemplate::from_gguf(real_model()->file());
  return c;
}

}  // namespace arbor::actors::testing
