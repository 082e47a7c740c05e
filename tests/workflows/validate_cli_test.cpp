// `arbor validate` end to end (runtime/cli/cmd_validate.cpp): output and exit codes.
// Needs the `arbor` binary of the same build tree; skipped when it was not built.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <string>

namespace {

const std::string kArbor = std::string(ARBOR_BINARY_DIR) + "/arbor";
const std::string kExamples = std::string(ARBOR_SOURCE_DIR) + "/workflows/examples";

// Runs `arbor validate ARGS`, returns the exit status; stdout+stderr into *out.
int validate(const std::string& args, std::string* out) {
  std::string cmd = kArbor + " validate " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out->append(buf, n);
  int rc = pclose(p);
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

TEST(ValidateCli, ValidExamplePrintsShape) {
  if (!std::filesystem::exists(kArbor)) GTEST_SKIP() << "build the 'arbor' target to run this test";
  std::string out;
  EXPECT_EQ(validate(kExamples + "/research_team.json", &out), 0);
  EXPECT_EQ(out, "ok: research_team: 9 agents, 1 shared prefixes\n");
  out.clear();
  EXPECT_EQ(validate(kExamples + "/map_reduce.json --input terms=a,b", &out), 0);
  EXPECT_EQ(out, "ok: map_reduce: 3 agents, 1 shared prefixes\n");
}

TEST(ValidateCli, InvalidWorkflowExitsTwoWithEveryDiagnostic) {
  if (!std::filesystem::exists(kArbor)) GTEST_SKIP() << "build the 'arbor' target to run this test";
  std::string path = std::string(ARBOR_BINARY_DIR) + "/cli_bad_workflow.json";
  FILE* f = std::fopen(path.c_str(), "w");
  std::fputs("{\"name\": \"x\",\n \"agents\": [{\"id\": \"a\", \"task\": \"{{item}}\", \"max_retries\": 12}]}\n", f);
  std::fclose(f);
  std::string out;
  EXPECT_EQ(validate(path, &out), 2);
  EXPECT_NE(out.find(path + ":2:34: /agents/0/task: {{item}} is only defined"), std::string::npos) << out;
  EXPECT_NE(out.find(path + ":2:60: /agents/0/max_retries: max_retries must be"), std::string::npos) << out;
  EXPECT_NE(out.find("2 error(s)"), std::string::npos) << out;
  out.clear();
  EXPECT_EQ(validate(kExamples + "/map_reduce.json --input nope", &out), 2);
}

TEST(ValidateCli, ToolNamesAreCheckedAgainstTheBuiltins) {
  if (!std::filesystem::exists(kArbor)) GTEST_SKIP() << "build the 'arbor' target to run this test";
  std::string out;
  EXPECT_EQ(validate(kExamples + "/tool_calculator.json", &out), 0);
  EXPECT_EQ(out, "ok: tool_calculator: 4 agents, 1 shared prefixes\n");
  std::string path = std::string(ARBOR_BINARY_DIR) + "/cli_unknown_tool.json";
  FILE* f = std::fopen(path.c_str(), "w");
  std::fputs("{\"name\": \"x\", \"agents\": [{\"id\": \"a\", \"task\": \"Hi\", \"tools\": [\"calculator\", \"shell\"]}]}\n", f);
  std::fclose(f);
  out.clear();
  EXPECT_EQ(validate(path, &out), 2);
  EXPECT_NE(out.find(path + ":0:0: /agents/0/tools/1: unknown tool 'shell' (agent 'a'); known tools: calculator, read_file"),
            std::string::npos)
      << out;
}

}  // namespace
