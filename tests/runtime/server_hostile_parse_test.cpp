// Hostile request bodies and workflows against `arbor serve` over the real Runtime:
// every parse failure (number out of the double range, nesting far deeper than any
// stack, invalid UTF-8, truncation, UTF-16) is a 400 that says what and where, with
// no library exception text; prefix files never leave workflow_dir (no '..', no
// symbolic link, never the config file, no server path in the error); and after every
// request the server is idle again: no admission slot, page or sequence held.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "scratch_dir.hpp"
#include "runtime/server/server.hpp"
#include "real_server_fixture.hpp"
#include "runtime_test_util.hpp"
#include "server_test_util.hpp"

namespace arbor::server::test {
namespace {

namespace fs = std::filesystem;

constexpr const char* kAlpha = "hostile-key-alpha-1";
constexpr const char* kAdmin = "hostile-key-admin-2";
constexpr int kMaxInflight = 4;

class ServerHostileParse : public RealServerTest<ServerHostileParse> {
 protected:
  void SetUp() override {
    root_ = arbor::testing::scratch_dir("server_hostile_parse");
    fs::remove_all(root_);
    served_ = root_ / "served";
    fs::create_directories(served_);
    std::ofstream(served_ / "doc.md") << "Transistors replaced vacuum tubes.";
    std::ofstream(root_ / "secret.txt") << "TOP-SECRET";
    fs::create_symlink(root_ / "secret.txt", served_ / "link.md");
  }
  void TearDown() override {
    server_.reset();
    fs::remove_all(root_);
  }

  // Starts the server from a config file (as `arbor serve --config` does), placed in
  // `config_dir`; `workflow_dir` "" leaves it unset.
  void start(const std::string& workflow_dir, const fs::path& config_dir) {
    nlohmann::json c = {{"port", 0},
                        {"admin_key", kAdmin},
                        {"keys", {{kAlpha, "alpha"}}},
                        {"limits", {{"max_tokens", 64}, {"max_inflight", kMaxInflight}}}};
    if (!workflow_dir.empty()) c["workflow_dir"] = workflow_dir;
    config_path_ = (config_dir / "server.json").string();
    std::ofstream(config_path_) << c.dump();
    auto config = load_server_config(config_path_);
    ASSERT_TRUE(config.has_value()) << config.error().message;
    start_server(*config);
  }
  void start() { start(served_.string(), root_); }

  void expect_idle() { RealServerTest::expect_idle(kAdmin); }
  // A 400 with this code whose message contains `part` and no library text; then idle.
  std::string expect_400(const Reply& r, const std::string& code, const std::string& part) {
    EXPECT_EQ(r.status, 400) << r.body.substr(0, 400);
    const auto j = r.json();
    EXPECT_EQ(j["error"]["code"], code) << r.body.substr(0, 400);
    const std::string message = j["error"]["message"].is_string() ? j["error"]["message"].get<std::string>() : "";
    EXPECT_NE(message.find(part), std::string::npos) << message;
    EXPECT_EQ(message.find("json.exception"), std::string::npos) << message;
    expect_idle();
    return message;
  }
  Reply post_run(const nlohmann::json& body) { return request(port_, "POST", "/v1/runs", body.dump(), kAlpha); }
  Reply post_raw(const std::string& target, const std::string& body) {
    return request(port_, "POST", target, body, kAlpha);
  }

  static std::string workflow_text(const std::string& extra = "") {
    return R"({"name": "h", "defaults": {"generation": {"max_tokens": 2}}, )" + extra +
           R"("agents": [{"id": "a", "task": "Say hi."}]})";
  }
  static nlohmann::json with_document(const std::string& file) {
    auto wf = nlohmann::json::parse(workflow_text());
    wf["prefixes"]["p"]["documents"] = {{{"file", file}}};
    wf["agents"][0]["prefix"] = "p";
    return {{"workflow", wf}};
  }

  fs::path root_, served_;
  std::string config_path_;
};

TEST_F(ServerHostileParse, OverflowingNumberInWorkflowTextNeverLocksTheServerOut) {
  start();
  const nlohmann::json body = {{"workflow", workflow_text(R"("description": "d", "x": 1e999, )")}};
  // More requests than admission slots: each must give its slot back.
  for (int i = 0; i < 3 * kMaxInflight; ++i) {
    const Reply r = post_run(body);
    ASSERT_EQ(r.status, 400) << "request " << i << ": " << r.body;
  }
  expect_400(post_run(body), "invalid_workflow", "invalid JSON: number 1e999 is out of range");
  const Reply chat = request(port_, "POST", "/v1/chat/completions", chat_body("", "Hi", 2), kAlpha);
  EXPECT_EQ(chat.status, 200) << chat.body;
  expect_idle();
}

TEST_F(ServerHostileParse, EveryBodyParseFailureIsA400WithWhere) {
  start();
  for (const char* target : {"/v1/chat/completions", "/v1/completions", "/v1/runs"}) {
    expect_400(post_raw(target, R"({"max_tokens": 1e999, "messages": []})"), "invalid_json",
               "line 1, column 16: number 1e999 is out of range");
    expect_400(post_raw(target, "{\"prompt\": \"caf\xC3(\"}"), "invalid_json", "ill-formed UTF-8");
    expect_400(post_raw(target, R"({"messages": [{"role": "user", "content": "Hi"})"), "invalid_json",
               "unexpected end of input");
    expect_400(post_raw(target, std::string("\xFF\xFE{\0}\0", 6)), "invalid_json", "UTF-16 little-endian");
  }
  expect_400(post_run({{"workflow", nlohmann::json::parse(workflow_text())}, {"inputs", {{"n", 1}}}}), "invalid_workflow",
             "the workflow declares no input 'n'");
}

TEST_F(ServerHostileParse, DeepNestingIsA400NotAStackOverflow) {
  start();
  const std::string arrays = std::string(20'000, '[') + std::string(20'000, ']');
  // Under a field of the workflow object, of the workflow text, and of the inputs.
  expect_400(post_raw("/v1/runs", R"({"workflow": {"name": "h", "description": )" + arrays + "}}"), "invalid_json",
             "nested more than 64 levels");
  expect_400(post_run({{"workflow", R"({"name": "h", "description": )" + arrays + "}"}}), "invalid_workflow",
             "nested more than 64 levels");
  const std::string deep_inputs = std::string(100'000, '[') + std::string(100'000, ']');
  expect_400(post_raw("/v1/runs", R"({"workflow": {}, "inputs": {"x": )" + deep_inputs + "}}"), "invalid_json",
             "nested more than 64 levels");
  expect_400(post_raw("/v1/chat/completions", R"({"messages": )" + arrays + "}"), "invalid_json", "64 levels");
  // A list input given as deep JSON text.
  auto wf = nlohmann::json::parse(workflow_text(R"("inputs": {"l": {"type": "list"}}, )"));
  wf["agents"][0]["for_each"] = {{"input", "l"}};
  expect_400(post_run({{"workflow", wf}, {"inputs", {{"l", deep_inputs}}}}), "invalid_workflow", "64 levels");
}

TEST_F(ServerHostileParse, WithoutWorkflowDirNoFileIsRead) {
  start("", root_);
  const std::string message = expect_400(post_run(with_document("doc.md")), "invalid_workflow",
                                         "this server reads no prefix files (its config sets no workflow_dir)");
  EXPECT_EQ(message.find(root_.string()), std::string::npos) << message;
  expect_400(post_run(with_document("server.json")), "invalid_workflow", "reads no prefix files");
}

TEST_F(ServerHostileParse, PrefixFilesStayInsideWorkflowDir) {
  start(served_.string(), served_);  // the config file lies inside workflow_dir
  const std::vector<std::pair<std::string, std::string>> refused = {
      {"link.md", "is a symbolic link"},
      {"../secret.txt", "goes up with '..'"},
      {"/etc/hostname", "is not a relative path"},
      {"server.json", "is one of the server's own files"},
      {"missing.md", "does not exist"},
  };
  for (const auto& [file, why] : refused) {
    const std::string message = expect_400(post_run(with_document(file)), "invalid_workflow",
                                           "prefix document '" + file + "' " + why);
    EXPECT_EQ(message.find(root_.string()), std::string::npos) << message;  // no server path
    EXPECT_EQ(message.find("TOP-SECRET"), std::string::npos);
  }
  const Reply ok = post_run(with_document("doc.md"));
  ASSERT_EQ(ok.status, 202) << ok.body;
  const std::string id = ok.json()["id"];
  EXPECT_TRUE(eventually([&] { return request(port_, "GET", "/v1/runs/" + id, "", kAlpha).json()["status"] == "ok"; }, 60));
  expect_idle();
}

}  // namespace
}  // namespace arbor::server::test
