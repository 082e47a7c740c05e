// The JSON Schema agrees with the loader: every example validates against it, and a
// broken document does not. Uses Debian's python3-jsonschema.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

namespace {

const std::string kWorkflows = std::string(ARBOR_SOURCE_DIR) + "/workflows";

bool have_jsonschema() {
  return std::system("python3 -c 'import jsonschema' >/dev/null 2>&1") == 0;
}

// Exit status of validating `files` (a shell glob) against the schema.
int validate(const std::string& files) {
  std::string script =
      "import json, glob, sys, jsonschema\n"
      "schema = json.load(open(sys.argv[1]))\n"
      "jsonschema.Draft202012Validator.check_schema(schema)\n"
      "v = jsonschema.Draft202012Validator(schema)\n"
      "paths = sorted(glob.glob(sys.argv[2]))\n"
      "assert paths, 'no files match ' + sys.argv[2]\n"
      "bad = 0\n"
      "for p in paths:\n"
      "    for e in v.iter_errors(json.load(open(p))):\n"
      "        print(p, list(e.absolute_path), e.message); bad += 1\n"
      "sys.exit(3 if bad else 0)\n";
  std::string cmd = "python3 -c \"$SCRIPT\" '" + kWorkflows + "/schema/workflow.schema.json' '" + files + "'";
  setenv("SCRIPT", script.c_str(), 1);
  int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

TEST(Schema, EveryExampleValidates) {
  if (!have_jsonschema()) GTEST_SKIP() << "python3 or python3-jsonschema is missing (apt-get install python3-jsonschema)";
  EXPECT_EQ(validate(kWorkflows + "/examples/*.json"), 0);
}

TEST(Schema, RejectsAnInvalidWorkflow) {
  if (!have_jsonschema()) GTEST_SKIP() << "python3 or python3-jsonschema is missing (apt-get install python3-jsonschema)";
  std::string path = std::string(ARBOR_BINARY_DIR) + "/schema_bad_workflow.json";
  FILE* f = std::fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs(R"({"name": "x", "agents": [{"id": "a", "task": "t", "generation": {"top_p": 1.5}, "tmeout_ms": 1}]})", f);
  std::fclose(f);
  EXPECT_EQ(validate(path), 3);
}

}  // namespace
