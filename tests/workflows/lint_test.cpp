// Layout lint: warnings only; the plan stays valid.
#include "workflows/lint.hpp"

#include <gtest/gtest.h>

#include "workflow_test_util.hpp"

namespace arbor::workflows {
namespace {

using testing::load;

const Diagnostic* find_warning(const Plan& p, const std::string& pointer, const std::string& part) {
  for (const auto& w : p.warnings)
    if (w.pointer == pointer && w.message.find(part) != std::string::npos) return &w;
  return nullptr;
}

TEST(Lint, TaskBeforeSharedPrefix) {
  auto r = load(R"({"name": "x", "prefixes": {"p": {"system": "s"}}, "agents": [
  {"id": "a", "prefix": "p", "task": "t", "layout": "task_first", "for_each": [1, 2]}]})");
  ASSERT_TRUE(r.has_value()) << r.error().format();
  EXPECT_EQ(r->agents[0].layout, Layout::task_first);
  const Diagnostic* w = find_warning(*r, "/agents/0/layout", "puts its task before the shared prefix 'p'");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->severity, Severity::warning);
  EXPECT_EQ(w->line, 2);
  EXPECT_EQ(w->column, 53);
  EXPECT_EQ(r->warnings.size(), 1u);  // reported once for both instances
}

TEST(Lint, PerAgentVariableInsidePrefix) {
  auto r = load(R"({"name": "x", "inputs": {"t": {"default": "T"}},
  "prefixes": {"p": {"system": "About {{inputs.t}} for {{item}}", "documents": [{"text": "doc {{index}}"}]}},
  "agents": [{"id": "a", "prefix": "p", "task": "{{item}}", "for_each": [1, 2]}]})");
  ASSERT_TRUE(r.has_value()) << r.error().format();
  // Inputs are run-wide, so they are substituted; per-agent variables stay literal.
  EXPECT_EQ(r->prefixes.at("p").system, "About T for {{item}}");
  const Diagnostic* w = find_warning(*r, "/prefixes/p/system", "per-agent variable {{item}}");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->line, 2);
  EXPECT_EQ(w->column, 56);
  EXPECT_NE(find_warning(*r, "/prefixes/p/documents/0/text", "{{index}}"), nullptr);
}

TEST(Lint, PrefixUsedByOneAgentOrNone) {
  auto r = load(R"({"name": "x", "prefixes": {"solo": {"system": "s"}, "unused": {"system": "u"}},
  "agents": [{"id": "a", "prefix": "solo", "task": "t"}]})");
  ASSERT_TRUE(r.has_value()) << r.error().format();
  const Diagnostic* solo = find_warning(*r, "/prefixes/solo", "used by only one agent ('a')");
  ASSERT_NE(solo, nullptr);
  EXPECT_EQ(solo->line, 1);
  EXPECT_EQ(solo->column, 28);
  EXPECT_NE(find_warning(*r, "/prefixes/unused", "not used by any agent"), nullptr);
  EXPECT_EQ(r->warnings.size(), 2u);
}

TEST(Lint, FanOutInstancesCountAsSharers) {
  auto r = load(R"({"name": "x", "prefixes": {"p": {"system": "s"}},
  "agents": [{"id": "a", "prefix": "p", "task": "{{item}}", "for_each": ["x", "y"]}]})");
  ASSERT_TRUE(r.has_value());
  EXPECT_TRUE(r->warnings.empty());
}

TEST(Lint, WarningsFormatWithFileAndSeverity) {
  Diagnostic d{Severity::warning, "/prefixes/p", 3, 4, "m"};
  EXPECT_EQ(d.format("wf.json"), "wf.json:3:4: warning: /prefixes/p: m");
  Diagnostic e{Severity::error, "/a", 1, 2, "m"};
  EXPECT_EQ(e.format("wf.json"), "wf.json:1:2: /a: m");
}

}  // namespace
}  // namespace arbor::workflows
