// Every example loads and plans; fan-out ids, inheritance, overrides, resolution.
#include "workflows/plan_builder.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "workflow_test_util.hpp"

namespace arbor::workflows {
namespace {

using testing::errors_of;
using testing::expect_diag;
using testing::kExamplesDir;
using testing::load;

Plan load_example(const std::string& name, const InputOverrides& overrides = {}) {
  auto r = load_workflow_file(kExamplesDir + "/" + name, overrides);
  EXPECT_TRUE(r.has_value()) << (r ? "" : r.error().format());
  return r ? *r : Plan{};
}

std::vector<std::string> child_ids(const AgentPlan& a) {
  std::vector<std::string> out;
  for (const auto& c : a.children) out.push_back(c.id);
  return out;
}

TEST(Examples, ResearchTeam) {
  Plan p = load_example("research_team.json");
  EXPECT_EQ(p.name, "research_team");
  EXPECT_EQ(p.tenant, "demo");
  EXPECT_EQ(p.num_agents(), 9u);
  ASSERT_EQ(p.agents.size(), 1u);
  const AgentPlan& lead = p.agents[0];
  EXPECT_FALSE(lead.task.has_value());
  ASSERT_TRUE(lead.fan_in.has_value());
  EXPECT_EQ(lead.generation.max_tokens, 48);
  ASSERT_EQ(lead.children.size(), 8u);
  for (std::size_t i = 0; i < 8; ++i) {
    const AgentPlan& r = lead.children[i];
    EXPECT_EQ(r.id, "researcher[" + std::to_string(i) + "]");
    EXPECT_EQ(r.parent_id, "lead");
    EXPECT_EQ(r.prefix_id, "background");
    EXPECT_EQ(r.index, i);
    EXPECT_EQ(r.generation.max_tokens, 32);
    EXPECT_EQ(r.generation.seed, 7u);
    EXPECT_EQ(r.max_retries, 1);
    EXPECT_EQ(r.timeout_ms, 60000);
  }
  EXPECT_EQ(*lead.children[0].item, "Who built the first transistor, and when?");
  // One shared prefix: the system text (input substituted) then the file document.
  const PrefixSpec& bg = p.prefixes.at("background");
  EXPECT_EQ(bg.system.rfind("You are a member of a research team studying the transistor.", 0), 0u);
  EXPECT_EQ(bg.documents.rfind("# A short history of the transistor\n\nThe transistor is", 0), 0u);
  EXPECT_EQ(bg.text, bg.system + "\n\n" + bg.documents);
  EXPECT_GT(bg.documents.size(), 4000u);
  EXPECT_TRUE(p.warnings.empty()) << p.warnings[0].message;
}

TEST(Examples, NestedTeams) {
  Plan p = load_example("nested_teams.json");
  EXPECT_EQ(p.num_agents(), 13u);
  ASSERT_EQ(p.agents.size(), 1u);
  const AgentPlan& director = p.agents[0];
  EXPECT_EQ(child_ids(director), (std::vector<std::string>{"hardware_lead", "chip_lead", "industry_lead"}));
  for (const auto& lead : director.children) {
    ASSERT_EQ(lead.children.size(), 3u);
    EXPECT_TRUE(lead.fan_in.has_value());
    EXPECT_EQ(*lead.children[2].item, "future");
  }
  EXPECT_EQ(child_ids(director.children[1]),
            (std::vector<std::string>{"chip_worker[0]", "chip_worker[1]", "chip_worker[2]"}));
  EXPECT_EQ(director.children[1].children[0].parent_id, "chip_lead");
  EXPECT_TRUE(p.warnings.empty());
}

TEST(Examples, RefineLoop) {
  Plan p = load_example("refine_loop.json");
  EXPECT_EQ(p.num_agents(), 2u);
  const AgentPlan& writer = p.agents[0];
  EXPECT_EQ(writer.turns.size(), 2u);
  EXPECT_TRUE(writer.turns[1].uses(VarKind::previous));
  const AgentPlan& editor = p.agents[1];
  EXPECT_EQ(editor.depends_on, std::vector<std::string>{"writer"});
  EXPECT_EQ(editor.output_sources.at("writer"), std::vector<std::string>{"writer"});
  EXPECT_EQ(editor.generation.max_tokens, 16);
  EXPECT_TRUE(p.warnings.empty());
}

TEST(Examples, MapReduce) {
  Plan p = load_example("map_reduce.json");
  EXPECT_EQ(p.num_agents(), 6u);
  EXPECT_EQ(child_ids(p.agents[0]),
            (std::vector<std::string>{"map[0]", "map[1]", "map[2]", "map[3]", "map[4]"}));
  EXPECT_EQ(*p.agents[0].children[4].item, "Moore's law");
  EXPECT_TRUE(p.warnings.empty());
}

TEST(Examples, TwoTenantsShareAnIdenticalPrefixText) {
  Plan a = load_example("tenant_a.json"), b = load_example("tenant_b.json");
  EXPECT_EQ(a.tenant, "tenant-a");
  EXPECT_EQ(b.tenant, "tenant-b");
  EXPECT_EQ(a.num_agents(), 2u);
  EXPECT_EQ(b.num_agents(), 2u);
  EXPECT_EQ(a.prefixes.at("support").text, b.prefixes.at("support").text);
  EXPECT_NE(a.inputs.at("question").text, b.inputs.at("question").text);
  EXPECT_TRUE(a.warnings.empty());
  EXPECT_TRUE(b.warnings.empty());
}

TEST(Overrides, ReplaceDefaultsAndDriveFanOut) {
  Plan p = load_example("map_reduce.json", {{"terms", "[\"diode\", \"relay\"]"}});
  EXPECT_EQ(p.num_agents(), 3u);
  EXPECT_EQ(*p.agents[0].children[1].item, "relay");
  Plan q = load_example("map_reduce.json", {{"terms", "alpha, beta ,gamma"}});
  EXPECT_EQ(q.inputs.at("terms").text, "alpha, beta, gamma");
  EXPECT_EQ(q.agents[0].children.size(), 3u);
  Plan r = load_example("research_team.json", {{"topic", "semiconductors"}});
  EXPECT_NE(r.prefixes.at("background").system.find("studying semiconductors."), std::string::npos);
}

TEST(Overrides, BadOverridesAreDiagnosed) {
  const std::string wf = R"({"name": "x", "inputs": {"n": {"default": 3}, "b": {"type": "boolean"}},
  "agents": [{"id": "a", "task": "{{inputs.n}}"}]})";
  auto d = errors_of(wf, {{"n", "three"}, {"nn", "1"}});
  expect_diag(d, "/inputs/n", 1, 31, "--input n=three: expected a number");
  expect_diag(d, "/inputs", 1, 25, "the workflow declares no input 'nn'");
  expect_diag(d, "/inputs/b", 1, 52, "input 'b' has no default: pass --input b=VALUE");
  auto ok = load(wf, {{"n", "4.5"}, {"b", "true"}});
  ASSERT_TRUE(ok.has_value()) << ok.error().format();
  EXPECT_EQ(ok->inputs.at("n").text, "4.5");
}

TEST(Overrides, ParseKeyValueStrings) {
  auto o = parse_input_overrides({"a=1", "b=x=y", "c="});
  ASSERT_TRUE(o.has_value());
  EXPECT_EQ(o->at("b"), "x=y");
  EXPECT_EQ(o->at("c"), "");
  EXPECT_FALSE(parse_input_overrides({"novalue"}).has_value());
  EXPECT_FALSE(parse_input_overrides({"=v"}).has_value());
  EXPECT_FALSE(parse_input_overrides({"a=1", "a=2"}).has_value());
}

TEST(FanOut, NestedFanOutIdsAreQualifiedAndItemsInherited) {
  auto r = load(R"({"name": "x", "agents": [
  {"id": "team", "for_each": ["red", "blue"], "fan_in": "{{children}}", "agents": [
    {"id": "helper", "task": "{{item}} {{index}}", "agents": [
      {"id": "worker", "for_each": [10, 20, 30], "task": "{{item}}"}], "fan_in": "{{children}}"}]}]})");
  ASSERT_TRUE(r.has_value()) << r.error().format();
  EXPECT_EQ(r->num_agents(), 2u * (1 + 1 + 3));
  const AgentPlan* w = r->find("team[1]/helper/worker[2]");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(*w->item, "30");
  EXPECT_EQ(w->parent_id, "team[1]/helper");
  const AgentPlan* h = r->find("team[1]/helper");
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(*h->item, "blue");  // inherited from the nearest for_each
  EXPECT_EQ(*h->index, 1u);
}

TEST(FanOut, DependenciesResolveToInstancesInTheSameBranch) {
  auto r = load(R"({"name": "x", "agents": [
  {"id": "team", "for_each": ["a", "b"], "fan_in": "{{children}}", "agents": [
    {"id": "scout", "task": "t"},
    {"id": "writer", "depends_on": ["scout"], "task": "{{outputs.scout}}"}]},
  {"id": "judge", "depends_on": ["team"], "task": "{{outputs.team}}"}]})");
  ASSERT_TRUE(r.has_value()) << r.error().format();
  const AgentPlan* w = r->find("team[1]/writer");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->depends_on, std::vector<std::string>{"team[1]/scout"});
  EXPECT_EQ(w->output_sources.at("scout"), std::vector<std::string>{"team[1]/scout"});
  const AgentPlan* j = r->find("judge");
  EXPECT_EQ(j->depends_on, (std::vector<std::string>{"team[0]", "team[1]"}));
  // make_context joins a fan-out agent's outputs and fills {{children}} once all finished.
  Context ctx = make_context(*r, *j, {{"team[0]", "A"}, {"team[1]", "B"}});
  EXPECT_EQ(*j->task->render(ctx), "## team[0]\nA\n\n## team[1]\nB");
  const AgentPlan& team0 = r->agents[0];
  EXPECT_FALSE(make_context(*r, team0, {{"team[0]/scout", "s"}}).children.has_value());
  auto full = make_context(*r, team0, {{"team[0]/scout", "s"}, {"team[0]/writer", "w"}});
  ASSERT_TRUE(full.children.has_value());
  EXPECT_EQ(*team0.fan_in->render(full), "## team[0]/scout\ns\n\n## team[0]/writer\nw");
}

TEST(FanOut, TooManyInstancesIsAnError) {
  std::string items = "[";
  for (int i = 0; i < 70; ++i) items += (i ? "," : "") + std::to_string(i);
  items += "]";
  auto d = errors_of(R"({"name": "x", "agents": [{"id": "a", "for_each": )" + items +
                     R"(, "fan_in": "f", "agents": [{"id": "b", "for_each": )" + items + R"(, "task": "t"}]}]})");
  expect_diag(d, "/agents", 1, 25, "expands to 4970 agent instances");
}

TEST(Settings, AgentOverridesDefaultsOverridesBuiltins) {
  auto r = load(R"({"name": "x", "defaults": {"generation": {"temperature": 0.7, "stop": ["END"]}, "timeout_ms": 5},
  "agents": [{"id": "a", "task": "t", "generation": {"top_k": 40, "stop": []}, "max_retries": 3}]})");
  ASSERT_TRUE(r.has_value()) << r.error().format();
  const SamplingSettings& g = r->agents[0].generation;
  EXPECT_EQ(g.max_tokens, SamplingSettings{}.max_tokens);
  EXPECT_DOUBLE_EQ(g.temperature, 0.7);
  EXPECT_EQ(g.top_k, 40);
  EXPECT_TRUE(g.stop.empty());
  EXPECT_EQ(r->agents[0].max_retries, 3);
  EXPECT_EQ(r->agents[0].timeout_ms, 5);
  EXPECT_EQ(r->tenant, "default");
}

TEST(Loader, MissingFileIsADiagnostic) {
  auto r = load_workflow_file("/nonexistent/wf.json");
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().format().find("/nonexistent/wf.json:0:0: (root): cannot open"), std::string::npos);
  EXPECT_EQ(r.error().to_error().code, ErrorCode::invalid_argument);
}

}  // namespace
}  // namespace arbor::workflows

namespace arbor::workflows {
namespace {

TEST(Examples, ReadmeExampleIsValid) {
  std::ifstream f(std::string(ARBOR_SOURCE_DIR) + "/workflows/README.md");
  std::stringstream ss;
  ss << f.rdbuf();
  std::string readme = ss.str();
  std::size_t begin = readme.find("```json\n");
  ASSERT_NE(begin, std::string::npos);
  begin += 8;
  std::string json = readme.substr(begin, readme.find("```", begin) - begin);
  auto r = testing::load(json);
  ASSERT_TRUE(r.has_value()) << r.error().format();
  EXPECT_EQ(r->num_agents(), 4u);
  EXPECT_EQ(r->find("critic")->output_sources.at("lead"), std::vector<std::string>{"lead"});
}

}  // namespace
}  // namespace arbor::workflows
