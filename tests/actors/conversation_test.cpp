#include "actors/conversation.hpp"

#include <gtest/gtest.h>

#include "actors_test_util.hpp"

namespace arbor::actors {
namespace {

using testing::real_chat;
using testing::real_model;

TEST(Conversation, SiblingsShareTheSystemIdsExactly) {
  Conversation a(real_model()->tokenizer(), real_chat()), b(real_model()->tokenizer(), real_chat());
  a.start("Shared rules. Be brief.", "Task one");
  b.start("Shared rules. Be brief.", "A different task");
  ASSERT_FALSE(a.system_ids().empty());
  EXPECT_EQ(a.system_ids(), b.system_ids());
  EXPECT_TRUE(std::equal(a.system_ids().begin(), a.system_ids().end(), b.prompt().begin()));
  // The ids decode to the template's rendering.
  const std::vector<model::ChatMessage> msgs = {{"system", "Shared rules. Be brief."}, {"user", "Task one"}};
  EXPECT_EQ(real_model()->tokenizer().decode(a.prompt()), real_chat().render(msgs));
}

TEST(Conversation, FollowUpTurnExtendsThePreviousPromptAndReply) {
  Conversation c(real_model()->tokenizer(), real_chat());
  c.start("Rules.", "First question");
  const auto first = c.prompt();
  const std::vector<std::int32_t> reply = real_model()->tokenizer().encode("An answer.", false);
  c.add_turn(reply, "An answer.", "Second question");
  const auto& next = c.prompt();
  ASSERT_GT(next.size(), first.size() + reply.size());
  EXPECT_TRUE(std::equal(first.begin(), first.end(), next.begin()));
  EXPECT_TRUE(std::equal(reply.begin(), reply.end(), next.begin() + std::ptrdiff_t(first.size())));
  const std::vector<model::ChatMessage> msgs = {
      {"system", "Rules."}, {"user", "First question"}, {"assistant", "An answer."}, {"user", "Second question"}};
  EXPECT_EQ(real_model()->tokenizer().decode(next), real_chat().render(msgs));
}

TEST(Conversation, OtherTemplateFamiliesFallBackToAFullRender) {
  const auto llama2 = model::ChatTemplate::of(model::ChatTemplateFamily::llama2);
  Conversation c(real_model()->tokenizer(), llama2);
  c.start("Rules.", "Q1");
  c.add_turn({}, "A1", "Q2");
  const std::vector<model::ChatMessage> msgs = {{"system", "Rules."}, {"user", "Q1"}, {"assistant", "A1"}, {"user", "Q2"}};
  EXPECT_EQ(real_model()->tokenizer().decode(c.prompt()), llama2.render(msgs));
}

}  // namespace
}  // namespace arbor::actors
