// A conversation with tools: the tools block is a second system block after the shared
// prefix, so the prefix's ids (and KV pages) stay those of agents without tools, and
// agents with the same prefix and tools share the tools block too.
#include <gtest/gtest.h>

#include "actors/conversation.hpp"
#include "actors_test_util.hpp"
#include "model/tool_format.hpp"

namespace arbor::actors {
namespace {

using testing::real_chat;
using testing::real_model;

TEST(ConversationTools, TheToolsBlockFollowsThePrefixWithoutChangingItsIds) {
  const std::vector<model::ToolSignature> tools = {
      {"calculator", "Arithmetic.", R"({"type":"object","properties":{"expression":{"type":"string"}}})"}};
  const std::string block = model::tools_system_text(tools);
  Conversation plain(real_model()->tokenizer(), real_chat()), a(real_model()->tokenizer(), real_chat()),
      b(real_model()->tokenizer(), real_chat());
  plain.start("Shared rules.", "Task one");
  a.start("Shared rules.", "Task one", block);
  b.start("Shared rules.", "Another task", block);
  ASSERT_FALSE(plain.system_ids().empty());
  EXPECT_EQ(a.system_ids(), plain.system_ids());
  EXPECT_TRUE(std::equal(plain.system_ids().begin(), plain.system_ids().end(), a.prompt().begin()));
  // a and b agree up to their tasks: the prefix and the whole tools block.
  const auto mismatch = std::mismatch(a.prompt().begin(), a.prompt().end(), b.prompt().begin(), b.prompt().end());
  const std::string common = real_model()->tokenizer().decode(
      std::vector<std::int32_t>(a.prompt().begin(), mismatch.first));
  EXPECT_NE(common.find("</tools>"), std::string::npos) << common;
  const std::vector<model::ChatMessage> msgs = {{"system", "Shared rules."}, {"system", block}, {"user", "Task one"}};
  EXPECT_EQ(real_model()->tokenizer().decode(a.prompt()), real_chat().render(msgs));
}

}  // namespace
}  // namespace arbor::actors
