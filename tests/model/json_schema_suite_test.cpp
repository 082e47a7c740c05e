// The official JSON Schema Test Suite (draft 7, tests/data/json-schema-test-suite):
// the validator agrees with every case; the generation automaton, for every schema it
// can enforce, accepts a case's compact text exactly when the reference does.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "json_reference.hpp"
#include "model/json_grammar.hpp"

namespace arbor::model {
namespace {

const std::string kSuiteDir = std::string(ARBOR_SOURCE_DIR) + "/tests/data/json-schema-test-suite/draft7";

// Cases Arbor does differently, on purpose: 2020-12 applies the siblings of $ref.
const std::set<std::string> kDivergent = {"ref.json: ref overrides any sibling keywords"};

// Schemas that need what Arbor rejects: remote references and $id-based resolution.
const std::set<std::string> kUnsupported = {
    "ref.json: remote ref, containing refs itself",
    "ref.json: Recursive references between schemas",
};

TEST(JsonSchemaSuite, ValidatorAndAutomatonAgreeWithTheSuite) {
  ASSERT_TRUE(std::filesystem::is_directory(kSuiteDir)) << kSuiteDir;
  int num_cases = 0, num_checked = 0, num_automaton = 0;
  std::set<std::string> unsupported_seen;
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(kSuiteDir)) files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  for (const auto& path : files) {
    std::ifstream in(path);
    const Json groups = Json::parse(in);
    for (const auto& group : groups) {
      const std::string name = path.filename().string() + ": " + group["description"].get<std::string>();
      ++num_cases;
      if (kDivergent.contains(name)) continue;
      auto schema = JsonSchema::compile(group["schema"], SchemaUse::validation);
      if (!schema) {
        EXPECT_TRUE(kUnsupported.contains(name)) << name << ": " << schema.error().message;
        unsupported_seen.insert(name);
        continue;
      }
      std::vector<SchemaError> errors;
      auto generation = JsonSchema::compile(group["schema"], SchemaUse::generation);
      std::shared_ptr<const JsonGrammar> grammar;
      if (generation)
        if (auto g = JsonGrammar::compile(*generation, &errors)) grammar = *g;
      for (const auto& test : group["tests"]) {
        SCOPED_TRACE(name + " / " + test["description"].get<std::string>());
        const Json& data = test["data"];
        EXPECT_EQ(schema->is_valid(data), test["valid"].get<bool>()) << data.dump();
        ++num_checked;
        if (!grammar) continue;
        const std::string text = data.dump();
        EXPECT_EQ(grammar->accepts(text), testing::reference_accepts(*generation, text)) << text;
        ++num_automaton;
      }
    }
  }
  EXPECT_GT(num_checked, 350);
  EXPECT_GT(num_automaton, 180);
  std::cout << num_cases << " schemas, " << num_checked << " validator checks, " << num_automaton
            << " automaton checks, " << unsupported_seen.size() << " schemas rejected as unsupported\n";
}

}  // namespace
}  // namespace arbor::model
