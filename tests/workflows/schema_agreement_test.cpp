// workflows/schema/workflow.schema.json and the C++ shape checks (parse_spec) must
// agree, so that an editor that validates against the schema and `arbor validate`
// never disagree about a document's shape. The check runs in C++ with Arbor's own JSON
// Schema validator (model/json_schema.hpp, itself tested against the JSON-Schema-Test-
// Suite): every example is valid for both, and for thousands of one-mistake mutations of
// the examples (a member removed or added, a value of another type, a number or string
// at its limits) both say the same. A field added to one side only fails this test.
//
// Not compared: the inside of output_schema (the schema says "an object"; which
// keywords the engine can enforce is checked in C++ only, and documented so), and the
// cross-reference checks (ids, templates, cycles), which come after parse_spec.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "common/json_pointer.hpp"
#include "model/json_schema.hpp"
#include "workflows/parser.hpp"

namespace arbor::workflows {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const fs::path kWorkflows = fs::path(ARBOR_SOURCE_DIR) / "workflows";

std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const model::JsonSchema& workflow_schema() {
  static const model::JsonSchema schema = [] {
    std::vector<model::SchemaError> errors;
    auto s = model::JsonSchema::compile(model::Json::parse(read(kWorkflows / "schema/workflow.schema.json")),
                                        model::SchemaUse::validation, &errors);
    EXPECT_TRUE(s) << model::describe(errors);
    return s ? std::move(*s) : model::JsonSchema();
  }();
  return schema;
}

std::vector<fs::path> examples() {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(kWorkflows / "examples"))
    if (e.path().extension() == ".json") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

// The shape checks' verdict, and their messages for a failure report.
std::pair<bool, std::string> parser_accepts(const json& doc) {
  const std::string text = doc.dump(1);
  Diagnostics diag("mutant.json");
  parse_spec(doc, PositionIndex::build(text), diag);
  return {!diag.has_errors(), diag.format()};
}

bool schema_accepts(const json& doc) { return workflow_schema().is_valid(doc); }

// Every value's pointer, except those inside an output_schema.
void collect(const json& v, const std::string& pointer, std::vector<std::string>& out) {
  out.push_back(pointer);
  if (v.is_object()) {
    for (const auto& [k, x] : v.items())
      if (k != "output_schema") collect(x, pointer_append(pointer, k), out);
  } else if (v.is_array()) {
    for (std::size_t i = 0; i < v.size(); ++i) collect(v[i], pointer + "/" + std::to_string(i), out);
  }
}

// Values a mistake could put anywhere: every JSON type, and numbers and strings at the
// edges of the ranges the workflow format uses.
const std::vector<json>& replacements() {
  static const std::vector<json> values = {
      json("text"), json(""), json("9bad id"), json(0), json(-1), json(1), json(2.5), json(0.5),
      json(8193), json(86400001), json(true), json(nullptr), json::array(), json::array({"a"}),
      json::array({1, 2}), json::object(), json::object({{"input", "topic"}}),
      json::object({{"text", "t"}})};
  return values;
}

const std::vector<std::string>& member_names() {
  static const std::vector<std::string> names = {
      "tmeout_ms", "task", "fan_in", "turns", "agents", "prefix", "for_each", "depends_on", "generation",
      "max_retries", "timeout_ms", "layout", "output_schema", "system", "documents", "text", "file", "title",
      "max_tokens", "temperature", "top_p", "top_k", "seed", "stop", "type", "default", "description", "tenant",
      "input", "name", "id", "inputs", "prefixes", "defaults"};
  return names;
}

// One mistake at a random place: replace a value, remove a member, or add one.
json mutate(json doc, std::mt19937& rng, std::string& what) {
  std::vector<std::string> pointers;
  collect(doc, "", pointers);
  const std::string at = pointers[rng() % pointers.size()];
  json& target = doc[json::json_pointer(at)];
  const auto pick = [&](std::size_t n) { return std::size_t(rng() % n); };
  switch (pick(3)) {
    case 0: {
      if (at.empty()) break;
      const json& v = replacements()[pick(replacements().size())];
      what = at + " := " + v.dump();
      target = v;
      return doc;
    }
    case 1: {
      if (at.empty()) break;
      const auto slash = at.rfind('/');
      json& parent = doc[json::json_pointer(at.substr(0, slash))];
      if (!parent.is_object()) break;
      what = "remove " + at;
      parent.erase(json::json_pointer(at).back());
      return doc;
    }
    default: break;
  }
  if (!target.is_object()) target = json::object();
  const std::string name = member_names()[pick(member_names().size())];
  const json& v = replacements()[pick(replacements().size())];
  what = pointer_append(at, name) + " += " + v.dump();
  target[name] = v;
  return doc;
}

TEST(WorkflowSchemaAgreement, EveryExampleIsValidForTheSchemaAndTheParser) {
  const auto files = examples();
  ASSERT_GE(files.size(), 5u);
  for (const auto& f : files) {
    const json doc = json::parse(read(f));
    EXPECT_TRUE(schema_accepts(doc)) << f << ": " << model::describe(workflow_schema().validate(doc));
    const auto [ok, diagnostics] = parser_accepts(doc);
    EXPECT_TRUE(ok) << f << ":\n" << diagnostics;
  }
}

TEST(WorkflowSchemaAgreement, OneMistakeMutantsGetTheSameVerdict) {
  std::mt19937 rng(20261202);
  int accepted = 0, rejected = 0, disagreements = 0;
  for (const auto& f : examples()) {
    const json original = json::parse(read(f));
    for (int i = 0; i < 400; ++i) {
      std::string what;
      const json doc = mutate(original, rng, what);
      const bool by_schema = schema_accepts(doc);
      const auto [by_parser, diagnostics] = parser_accepts(doc);
      if (by_schema != by_parser && ++disagreements > 20) continue;  // enough to read
      EXPECT_EQ(by_schema, by_parser)
          << f.filename() << " with " << what << ": the schema says " << (by_schema ? "valid" : "invalid")
          << ", parse_spec says " << (by_parser ? "valid" : "invalid:\n" + diagnostics)
          << (by_schema ? "" : "\nschema: " + model::describe(workflow_schema().validate(doc)));
      (by_schema ? accepted : rejected)++;
    }
  }
  // Both verdicts must be exercised for the comparison to mean anything.
  EXPECT_GT(accepted, 300);
  EXPECT_GT(rejected, 1000);
  EXPECT_EQ(disagreements, 0);
  std::cout << accepted << " mutants valid, " << rejected << " invalid, " << disagreements << " disagreements\n";
}

}  // namespace
}  // namespace arbor::workflows
