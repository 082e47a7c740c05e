#include "workflows/template.hpp"

#include <gtest/gtest.h>

namespace arbor::workflows {
namespace {

TEST(Template, RendersEveryVariableKind) {
  auto t = Template::compile("{{inputs.topic}}|{{ item }}|{{index}}|{{outputs.a}}|{{previous}}|{{children}}");
  ASSERT_TRUE(t.has_value()) << t.error().message;
  EXPECT_EQ(t->variables().size(), 6u);
  Context ctx;
  ctx.inputs["topic"] = "chips";
  ctx.item = "q";
  ctx.index = 4;
  ctx.outputs["a"] = "A";
  ctx.previous = "P";
  ctx.children = std::vector<ChildOutput>{{"w[0]", "x"}, {"w[1]", "y"}};
  auto r = t->render(ctx);
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_EQ(*r, "chips|q|4|A|P|## w[0]\nx\n\n## w[1]\ny");
}

TEST(Template, PlainTextHasNoVariables) {
  auto t = Template::compile("no braces } { here");
  ASSERT_TRUE(t.has_value());
  EXPECT_TRUE(t->variables().empty());
  EXPECT_EQ(*t->render({}), "no braces } { here");
}

TEST(Template, MissingValueIsAnErrorNamingTheVariable) {
  auto t = Template::compile("a {{item}} b");
  ASSERT_TRUE(t.has_value());
  auto r = t->render({});
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, ErrorCode::invalid_argument);
  EXPECT_NE(r.error().message.find("{{item}}"), std::string::npos);
  auto o = Template::compile("{{outputs.x}}")->render({});
  ASSERT_FALSE(o.has_value());
  EXPECT_NE(o.error().message.find("agent 'x'"), std::string::npos);
}

TEST(Template, CompileErrorsCarryOffsets) {
  auto unclosed = Template::compile("abc {{item");
  ASSERT_FALSE(unclosed.has_value());
  EXPECT_EQ(unclosed.error().offset, 4u);
  auto unknown = Template::compile("x{{itme}}");
  ASSERT_FALSE(unknown.has_value());
  EXPECT_EQ(unknown.error().offset, 1u);
  EXPECT_NE(unknown.error().message.find("did you mean 'item'"), std::string::npos);
  EXPECT_FALSE(Template::compile("{{}}").has_value());
  EXPECT_FALSE(Template::compile("{{inputs.}}").has_value());
  EXPECT_FALSE(Template::compile("{{outputs.a b}}").has_value());
}

TEST(Template, RenderPartialKeepsUnknownVariables) {
  auto t = Template::compile("{{inputs.a}} and {{item}}");
  Context ctx;
  ctx.inputs["a"] = "1";
  EXPECT_EQ(t->render_partial(ctx), "1 and {{item}}");
}

}  // namespace
}  // namespace arbor::workflows
