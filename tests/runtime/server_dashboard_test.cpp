// The dashboard in headless Chromium: after some traffic the page loads, runs its
// script without console errors, shows live figures (its DOM is checked), and a
// screenshot is saved as build/server_dashboard.png; a router's page shows its nodes.
// Skips without chromium.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "runtime/server/server.hpp"
#include "runtime_test_util.hpp"
#include "server_test_util.hpp"

namespace arbor::server::test {
namespace {

std::string find_chromium() {
  for (const char* name : {"chromium", "chromium-browser", "google-chrome"}) {
    const std::string probe = std::string("command -v ") + name + " >/dev/null 2>&1";
    if (std::system(probe.c_str()) == 0) return name;
  }
  return "";
}

// What headless Chromium made of the page at 127.0.0.1:port: the DOM after its script
// ran, the browser's log, and the size of a screenshot saved as build/<name>.png.
struct Page {
  std::string dom, log;
  std::uintmax_t screenshot_bytes = 0;
};

Page render(const std::string& chromium, int port, const std::string& name) {
  const std::string dir = ARBOR_BINARY_DIR;
  const std::string profile = dir + "/" + name + "_profile";
  const std::string screenshot = dir + "/" + name + ".png";
  const std::string url = "http://127.0.0.1:" + std::to_string(port) + "/";
  std::filesystem::remove(screenshot);
  const std::string flags = " --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --no-first-run"
                            " --user-data-dir=" + profile + " --window-size=1280,1100 --virtual-time-budget=6000"
                            " --enable-logging=stderr --v=0 ";
  const std::string dom_file = dir + "/" + name + "_dom.html", log_file = dir + "/" + name + "_chromium.log";
  const std::string dump = "timeout 120 " + chromium + flags + "--dump-dom " + url + " > " + dom_file + " 2> " + log_file;
  Page page;
  EXPECT_EQ(std::system(dump.c_str()), 0) << arbor::testing::read_text(log_file);
  const std::string shot = "timeout 120 " + chromium + flags + "--screenshot=" + screenshot + " " + url +
                           " > /dev/null 2>> " + log_file;
  EXPECT_EQ(std::system(shot.c_str()), 0) << arbor::testing::read_text(log_file);
  page.dom = arbor::testing::read_text(dom_file);
  page.log = arbor::testing::read_text(log_file);
  if (std::filesystem::exists(screenshot)) page.screenshot_bytes = std::filesystem::file_size(screenshot);
  std::filesystem::remove_all(profile);
  return page;
}

TEST(ServerDashboard, LoadsInHeadlessChromiumWithoutConsoleErrors) {
  const std::string chromium = find_chromium();
  if (chromium.empty()) GTEST_SKIP() << "chromium is not installed; run scripts/install_test_tools.sh";
  auto runtime = Runtime::create(arbor::testing::small_config());
  ASSERT_TRUE(runtime.has_value()) << runtime.error().describe();
  auto backend = make_runtime_backend(**runtime);
  ServerConfig config;  // no keys: the page polls without one
  config.port = 0;
  config.workflow_dir = arbor::testing::kExamples;
  auto server = Server::start(config, *backend);
  ASSERT_TRUE(server.has_value()) << server.error().message;
  const int port = (*server)->port();

  // Traffic to show: two chats sharing a system prompt and a small workflow run.
  const std::string system = "You are a helpful assistant who answers in one short sentence about electronics.";
  ASSERT_EQ(request(port, "POST", "/v1/chat/completions", chat_body(system, "What is a transistor?", 4)).status, 200);
  ASSERT_EQ(request(port, "POST", "/v1/chat/completions", chat_body(system, "What is a diode?", 4)).status, 200);
  nlohmann::json run;
  run["workflow"] = nlohmann::json::parse(arbor::testing::example_with_max_tokens("research_team", 4));
  run["inputs"] = {{"questions", {"Who built the first transistor?", "What is a MOSFET?"}}};
  auto started = request(port, "POST", "/v1/runs", run.dump());
  ASSERT_EQ(started.status, 202) << started.body;
  const std::string id = started.json()["id"];
  ASSERT_EQ(request(port, "GET", "/v1/runs/" + id + "/events").status, 200);  // until it ends

  const Page page = render(chromium, port, "server_dashboard");
  const std::string& dom = page.dom;
  const std::string& log = page.log;
  // The script set data-loaded after rendering every panel from live data.
  EXPECT_NE(dom.find("data-loaded=\"1\""), std::string::npos) << dom.substr(0, 3000);
  EXPECT_NE(dom.find("<svg"), std::string::npos);              // the radix tree picture
  EXPECT_NE(dom.find(">default<"), std::string::npos);         // the tenant row
  EXPECT_NE(dom.find(">" + id + "<"), std::string::npos);      // the run row
  EXPECT_NE(dom.find("/ "), std::string::npos);
  // The page logs nothing: any console line is an error or a warning.
  EXPECT_EQ(log.find(":CONSOLE("), std::string::npos) << log;
  EXPECT_EQ(log.find("Uncaught"), std::string::npos) << log;
  EXPECT_GT(page.screenshot_bytes, 10000u);
  EXPECT_NE(dom.find("id=\"nodesection\" hidden"), std::string::npos);  // not a router: no nodes table
  (*server)->stop();
}

TEST(ServerDashboard, ShowsARoutersNodes) {
  const std::string chromium = find_chromium();
  if (chromium.empty()) GTEST_SKIP() << "chromium is not installed; run scripts/install_test_tools.sh";
  FakeBackend backend;
  backend.set_nodes(R"([
    {"node":"127.0.0.1:7101","up":true,"inflight":2,"indexed_pages":40,"routed":{"prefix":7,"balance":1,"cold":2},
     "matched_tokens":900,"retried":0,"rejoins":0,"runs":1,"runs_routed":{"prefix":3,"balance":0,"cold":1},
     "runs_retried":0,"pages_total":512,"pages_free":400,"queued_requests":3,"hit_ratio":0.75},
    {"node":"127.0.0.1:7102","up":false,"inflight":0,"indexed_pages":0,"routed":{"prefix":0,"balance":0,"cold":4},
     "matched_tokens":0,"retried":1,"rejoins":2,"runs":0,"runs_routed":{"prefix":0,"balance":0,"cold":0},
     "runs_retried":1,"pages_total":null,"pages_free":null,"queued_requests":null,"hit_ratio":null}])");
  ServerConfig config;
  config.port = 0;
  auto server = Server::start(config, backend);
  ASSERT_TRUE(server.has_value()) << server.error().message;
  const Page page = render(chromium, (*server)->port(), "server_dashboard_nodes");
  EXPECT_NE(page.dom.find("data-loaded=\"1\""), std::string::npos) << page.dom.substr(0, 3000);
  EXPECT_EQ(page.log.find(":CONSOLE("), std::string::npos) << page.log;
  // One row per node, with the router's decisions and the node's own figures.
  EXPECT_NE(page.dom.find("<td>127.0.0.1:7101</td><td>up</td><td>2</td><td>1</td><td>3</td><td>112 / 512</td>"
                          "<td>40</td><td>75.0%</td><td>7 / 1 / 2</td><td>3 / 0 / 1</td><td>0</td><td>0</td><td>0</td>"),
            std::string::npos)
      << page.dom;
  EXPECT_NE(page.dom.find("<td>127.0.0.1:7102</td><td>down</td><td>0</td><td>0</td><td>\u2013</td><td>\u2013</td>"
                          "<td>0</td><td>\u2013</td><td>0 / 0 / 4</td><td>0 / 0 / 0</td><td>1</td><td>1</td><td>2</td>"),
            std::string::npos)
      << page.dom;
  EXPECT_EQ(page.dom.find("id=\"nodesection\" hidden"), std::string::npos);
  (*server)->stop();
}

}  // namespace
}  // namespace arbor::server::test
