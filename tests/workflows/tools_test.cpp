// Tool definitions (workflows/tools.hpp): the built-ins, what add() refuses, read_file's
// confinement, the workflow fields and the check of an agent's tool names.
#include "workflows/tools.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "scratch_dir.hpp"
#include "workflow_test_util.hpp"
#include "workflows/documents.hpp"

namespace arbor::workflows {
namespace {

namespace fs = std::filesystem;

Tool echo(const std::string& name, const std::string& parameters = R"({"type":"object"})") {
  return Tool{{name, "echoes", parameters}, [](const model::Json& a, const ToolContext&) -> ToolOutput { return a.dump(); }};
}

std::string add_error(ToolRegistry& r, Tool t) {
  auto ok = r.add(std::move(t));
  EXPECT_FALSE(ok.has_value());
  return ok ? "" : ok.error().message;
}

TEST(ToolRegistry, BuiltinsAreCalculatorAndReadFile) {
  const auto r = ToolRegistry::builtins();
  EXPECT_EQ(r.names(), (std::vector<std::string>{"calculator", "read_file"}));
  const Tool* calc = r.find("calculator");
  ASSERT_NE(calc, nullptr);
  EXPECT_EQ(calc->handler(model::Json{{"expression", "(2+3)*4"}}, {}).value_or("?"), "20");
  auto bad = calc->handler(model::Json{{"expression", "1/0"}}, {});
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error(), "cannot evaluate '1/0': division by zero at column 3");
  EXPECT_FALSE(calc->handler(model::Json{{"expr", "1"}}, {}));  // the argument is named
}

TEST(ToolRegistry, RefusesClashesBadNamesAndSchemasItCannotEnforce) {
  auto r = ToolRegistry::builtins();
  EXPECT_NE(add_error(r, echo("calculator")).find("tool 'calculator' is already registered"), std::string::npos);
  EXPECT_NE(add_error(r, echo("bad name")).find("must be 1..64 letters"), std::string::npos);
  EXPECT_NE(add_error(r, echo("")).find("must be 1..64 letters"), std::string::npos);
  EXPECT_NE(add_error(r, echo("t", R"({"type":"string"})")).find("must be a JSON Schema of an object"), std::string::npos);
  EXPECT_NE(add_error(r, echo("t", "{nope")).find("parameters is not JSON"), std::string::npos);
  EXPECT_NE(add_error(r, echo("t", R"({"type":"object","properties":{"n":{"type":"number","multipleOf":3}}})"))
                .find("/properties/n/multipleOf"),
            std::string::npos);
  Tool no_handler = echo("t");
  no_handler.handler = nullptr;
  EXPECT_NE(add_error(r, no_handler).find("has no handler"), std::string::npos);
  ASSERT_TRUE(r.add(echo("weather", R"({"type": "object", "properties": {"city": {"type": "string"}}})")));
  EXPECT_EQ(r.find("weather")->signature.parameters, R"({"type":"object","properties":{"city":{"type":"string"}}})");
  EXPECT_EQ(r.names().back(), "weather");
}

class ReadFileTool : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = arbor::testing::scratch_dir("read_file_tool_test");
    fs::remove_all(root_);
    fs::create_directories(root_ / "run" / "notes");
    std::ofstream(root_ / "run" / "notes" / "a.txt") << "alpha";
    std::ofstream(root_ / "secret.txt") << "SECRET";
    fs::create_symlink(root_ / "secret.txt", root_ / "run" / "link.txt");
  }
  void TearDown() override { fs::remove_all(root_); }

  ToolOutput read(const DocumentAccess& files, const std::string& path) const {
    return ToolRegistry::builtins().find("read_file")->handler(model::Json{{"path", path}}, ToolContext{files});
  }
  fs::path root_;
};

TEST_F(ReadFileTool, ReadsBelowTheRunsFolderOnly) {
  const auto run = DocumentAccess::confined_to((root_ / "run").string());
  EXPECT_EQ(read(run, "notes/a.txt").value_or("?"), "alpha");
  for (const std::string& path :
       std::vector<std::string>{"../secret.txt", "link.txt", (root_ / "secret.txt").string(), "notes", "missing.txt"}) {
    auto r = read(run, path);
    ASSERT_FALSE(r) << path;
    EXPECT_EQ(r.error().rfind("read_file '" + path + "'", 0), 0u) << r.error();
    EXPECT_EQ(r.error().find("SECRET"), std::string::npos);
  }
  // A local run's access is confined too: the tool's path comes from the model.
  EXPECT_FALSE(read_tool_file(DocumentAccess::confined_to((root_ / "run").string()), "../secret.txt"));
  auto none = read(DocumentAccess::no_files(), "notes/a.txt");
  ASSERT_FALSE(none);
  EXPECT_NE(none.error().find("this run reads no files"), std::string::npos);
}

using testing::errors_of;
using testing::load;

std::string agent_with(const std::string& fields) {
  return R"({"name": "t", "agents": [{"id": "a", "task": "Hi", )" + fields + "}]}";
}

TEST(ToolFields, AreParsedIntoThePlan) {
  auto plan = load(agent_with(R"("tools": ["calculator", "read_file"], "max_tool_calls": 2, "tool_timeout_ms": 500,
                                 "tool_choice": "required")"));
  ASSERT_TRUE(plan) << plan.error().format();
  const auto& a = plan->agents[0];
  EXPECT_EQ(a.tools, (std::vector<std::string>{"calculator", "read_file"}));
  EXPECT_EQ(a.tool_pointers, (std::vector<std::string>{"/agents/0/tools/0", "/agents/0/tools/1"}));
  EXPECT_EQ(a.max_tool_calls, 2);
  EXPECT_EQ(a.tool_timeout_ms, 500);
  EXPECT_TRUE(a.tool_required);
  auto plain = load(agent_with(R"("tools": ["calculator"])"));
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->agents[0].max_tool_calls, 4);
  EXPECT_FALSE(plain->agents[0].tool_required);
}

TEST(ToolFields, BadValuesAreDiagnosedWhereWritten) {
  auto d = errors_of(agent_with(R"("tools": ["calculator", "calculator"], "max_tool_calls": 0, "tool_choice": "always")"));
  EXPECT_NE(d.find("/agents/0/tools/1"), nullptr);
  EXPECT_NE(d.find("/agents/0/max_tool_calls"), nullptr);
  ASSERT_NE(d.find("/agents/0/tool_choice"), nullptr);
  EXPECT_NE(d.find("/agents/0/tool_choice")->message.find("\"auto\" or \"required\""), std::string::npos);
  auto lonely = errors_of(agent_with(R"("max_tool_calls": 2)"));
  ASSERT_NE(lonely.find("/agents/0/max_tool_calls"), nullptr);
  EXPECT_NE(lonely.find("/agents/0/max_tool_calls")->message.find("needs a 'tools' list"), std::string::npos);
  EXPECT_NE(errors_of(agent_with(R"("tools": "calculator")")).find("/agents/0/tools"), nullptr);
}

TEST(ToolFields, UnknownToolNamesListTheKnownOnes) {
  auto plan = load(R"({"name": "t", "inputs": {"xs": {"default": ["a", "b"]}},
    "agents": [{"id": "a", "task": "Hi", "tools": ["calculator"],
                "agents": [{"id": "w", "for_each": {"input": "xs"}, "task": "{{item}}", "tools": ["calculater"]}]}]})");
  ASSERT_TRUE(plan) << plan.error().format();
  auto d = check_agent_tools(*plan, ToolRegistry::builtins());
  ASSERT_EQ(d.items().size(), 1u);  // one per place written, not per fan-out instance
  EXPECT_EQ(d.items()[0].pointer, "/agents/0/agents/0/tools/0");
  EXPECT_NE(d.items()[0].message.find("unknown tool 'calculater' (agent 'w'); known tools: calculator, read_file"),
            std::string::npos);
}

}  // namespace
}  // namespace arbor::workflows
