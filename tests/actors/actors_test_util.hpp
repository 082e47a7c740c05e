// Shared by the actors tests: the real default model, loaded once per process.
#pragma once

#include <gtest/gtest.h>

#include <memory>

#include "model/chat_template.hpp"
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

inline const model::ChatTemplate& real_chat() {
  static auto c = model::ChatTemplate::from_gguf(real_model()->file());
  return c;
}

}  // namespace arbor::actors::testing
