// Structured output through the Runtime, on the real model: generate() with a JSON
// Schema returns the parsed document; a workflow agent with an output_schema reports
// its output as JSON (in AgentResult and the run document), valid against the schema,
// the same with and without the prefix cache; an incomplete document fails the agent.
#include <gtest/gtest.h>

#include "model/json_schema.hpp"
#include "runtime_test_util.hpp"

namespace arbor::testing {
namespace {

const std::string kPerson =
    R"({"type":"object","properties":{"name":{"type":"string","maxLength":20},"age":{"type":"integer","minimum":0,"maximum":120}},"required":["name","age"],"additionalProperties":false})";

// Validates `value` against `schema` with the validator (not the generator's grammar).
std::string validation_errors(const nlohmann::ordered_json& value, const nlohmann::ordered_json& schema) {
  auto s = model::JsonSchema::compile(schema, model::SchemaUse::validation);
  if (!s) return s.error().message;
  return model::describe(s->validate(value));
}

TEST(StructuredOutput, GenerateReturnsTheParsedDocument) {
  auto rt = make_runtime();
  ASSERT_TRUE(rt);
  auto req = user_request("Describe a fictional person as JSON.", 64);
  req.json_schema = kPerson;
  auto r = rt->generate(req);
  ASSERT_TRUE(r) << r.error().describe();
  ASSERT_TRUE(r->json.has_value()) << r->text;
  EXPECT_EQ(*r->json, nlohmann::ordered_json::parse(r->text));
  EXPECT_EQ(validation_errors(*r->json, nlohmann::ordered_json::parse(kPerson)), "");
  EXPECT_EQ(r->finish_reason, FinishReason::stop);
  const auto doc = nlohmann::json::parse(to_json(*r));
  EXPECT_EQ(doc["json"], nlohmann::json::parse(r->text));
  // Free text has no document.
  req.json_schema.reset();
  req.sampling.max_tokens = 4;
  auto free = rt->generate(req);
  ASSERT_TRUE(free);
  EXPECT_FALSE(free->json.has_value());
  EXPECT_FALSE(nlohmann::json::parse(to_json(*free)).contains("json"));
  expect_clean(*rt);
}

TEST(StructuredOutput, ASchemaTheEngineCannotEnforceIsAnInvalidArgument) {
  auto rt = make_runtime();
  ASSERT_TRUE(rt);
  auto req = user_request("A number.");
  req.json_schema = R"({"type":"integer","multipleOf":7})";
  auto r = rt->generate(req);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::invalid_argument);
  EXPECT_NE(r.error().message.find("/multipleOf"), std::string::npos) << r.error().message;
  expect_clean(*rt);
}

TEST(StructuredOutput, TheExampleWorkflowsDocumentsValidateWithAndWithoutTheCache) {
  const std::string text = read_text(kExamples + "/structured_triage.json");
  const auto schema = nlohmann::ordered_json::parse(text)["agents"][0]["agents"][0]["output_schema"];
  auto rt = make_runtime();
  ASSERT_TRUE(rt);
  const auto on = run_text(*rt, text);
  ASSERT_EQ(on.status, RunStatus::ok) << on.error;
  RuntimeConfig off_config = small_config();
  off_config.prefix_caching = false;
  auto off_rt = make_runtime(off_config);
  ASSERT_TRUE(off_rt);
  const auto off = run_text(*off_rt, text);
  ASSERT_EQ(off.status, RunStatus::ok) << off.error;
  const auto doc = nlohmann::json::parse(to_json(on));
  int tickets = 0;
  for (std::size_t i = 0; i < on.agents.size(); ++i) {
    const AgentResult& a = on.agents[i];
    SCOPED_TRACE(a.id);
    const AgentResult* same = agent(off, a.id);
    ASSERT_NE(same, nullptr);
    EXPECT_EQ(a.output, same->output);  // greedy: caching changes no token
    if (a.id.rfind("lead/ticket[", 0) != 0 && a.id.rfind("ticket[", 0) != 0) {
      EXPECT_FALSE(a.json.has_value());  // the lead writes free text
      continue;
    }
    ++tickets;
    ASSERT_TRUE(a.json.has_value()) << a.output;
    EXPECT_EQ(*a.json, nlohmann::ordered_json::parse(a.output));
    EXPECT_EQ(validation_errors(*a.json, schema), "") << a.output;
    EXPECT_EQ(doc["agents"][i]["json"], nlohmann::json::parse(a.output));
    std::cout << "  " << a.id << ": " << a.output << "\n";
  }
  EXPECT_EQ(tickets, 4);
  expect_clean(*rt);
}

TEST(StructuredOutput, AnIncompleteDocumentFailsTheAgentWithTheReason) {
  auto rt = make_runtime();
  ASSERT_TRUE(rt);
  const auto r = run_text(*rt, R"({"name": "cut", "agents": [{"id": "a", "task": "Describe a person as JSON.",
    "max_retries": 0, "generation": {"max_tokens": 3}, "output_schema": )" + kPerson + "}]}");
  EXPECT_EQ(r.status, RunStatus::failed);
  const AgentResult* a = agent(r, "a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->status, AgentStatus::failed);
  EXPECT_FALSE(a->json.has_value());
  EXPECT_NE(a->error.find("not a complete JSON document"), std::string::npos) << a->error;
  EXPECT_NE(a->error.find("max_tokens"), std::string::npos) << a->error;
  expect_clean(*rt);
}

}  // namespace
}  // namespace arbor::testing
