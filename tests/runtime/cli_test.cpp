// The `arbor` binary end to end (runtime/cli/): output documents and exit codes on the
// default model. Needs the `arbor` target of the same build tree.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <arbor/runtime.hpp>
#include <nlohmann/json.hpp>

#include "scratch_dir.hpp"
#include "workflows/plan.hpp"

namespace {

const std::string kArbor = std::string(ARBOR_BINARY_DIR) + "/arbor";
const std::string kSource = ARBOR_SOURCE_DIR;

struct Output {
  int status = -1;
  std::string out;  // stdout only
};

Output run(const std::string& args) {
  Output o;
  FILE* p = popen((kArbor + " " + args + " 2>/dev/null").c_str(), "r");
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) o.out.append(buf, n);
  const int rc = pclose(p);
  o.status = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  return o;
}

Output run_keeping_stderr(const std::string& args) {
  Output o;
  FILE* p = popen((kArbor + " " + args).c_str(), "r");
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) o.out.append(buf, n);
  const int rc = pclose(p);
  o.status = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  return o;
}

std::string stderr_of(const std::string& args) {
  std::string out;
  FILE* p = popen((kArbor + " " + args + " 2>&1 >/dev/null").c_str(), "r");
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  pclose(p);
  return out;
}

// Exit status, stdout and stderr of one command line.
struct Streams {
  int status = -1;
  std::string out, err;
};

Streams run_streams(const std::string& args) {
  // One file per process: ctest runs the Cli tests as parallel processes.
  const std::string err_file = std::string(ARBOR_BINARY_DIR) + "/cli_test_stderr_" + std::to_string(getpid()) + ".txt";
  Output o = run_keeping_stderr(args + " 2>" + err_file);
  Streams s{o.status, o.out, ""};
  {
    std::ifstream in(err_file, std::ios::binary);
    s.err.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  std::filesystem::remove(err_file);
  return s;
}

#define REQUIRE_ARBOR() \
  if (!std::filesystem::exists(kArbor)) GTEST_SKIP() << "build the 'arbor' target to run this test"

TEST(Cli, GenerateJsonHasTheDocumentedFields) {
  REQUIRE_ARBOR();
  const Output o = run("generate --prompt 'What is the capital of France?' --max-tokens 12 --json");
  ASSERT_EQ(o.status, 0);
  const auto j = nlohmann::json::parse(o.out);
  for (const char* key : {"text", "tokens", "prompt_tokens", "cached_tokens", "generated_tokens", "prefill_ms",
                          "decode_ms"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_EQ(j["tokens"].size(), j["generated_tokens"].get<std::size_t>());
  EXPECT_NE(j["text"].get<std::string>().find("Paris"), std::string::npos) << j["text"];
}

TEST(Cli, GenerateJsonSchemaConstrainsTheOutputOrNamesWhatItCannotEnforce) {
  REQUIRE_ARBOR();
  const std::string schema =
      R"({"type":"object","properties":{"city":{"type":"string","maxLength":24}},"required":["city"],)"
      R"("additionalProperties":false})";
  const Output o = run("generate --prompt 'What is the capital of France? Answer in JSON.' --max-tokens 40 --json "
                       "--json-schema '" + schema + "'");
  ASSERT_EQ(o.status, 0) << o.out;
  const auto j = nlohmann::json::parse(o.out);
  ASSERT_TRUE(j.contains("json")) << o.out;
  ASSERT_TRUE(j["json"].is_object()) << o.out;
  ASSERT_TRUE(j["json"]["city"].is_string()) << o.out;
  EXPECT_LE(j["json"]["city"].get<std::string>().size(), 24u * 4);
  EXPECT_EQ(nlohmann::json::parse(j["text"].get<std::string>()), j["json"]);  // the text is the document

  const std::string file = std::string(ARBOR_BINARY_DIR) + "/cli_schema.json";
  std::ofstream(file) << R"({"type":"integer","multipleOf":3})";
  const Streams bad = run_streams("generate --prompt hi --max-tokens 4 --json-schema @" + file);
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.err.find("/multipleOf"), std::string::npos) << bad.err;
  const Streams missing = run_streams("generate --prompt hi --json-schema @/nonexistent/schema.json");
  EXPECT_EQ(missing.status, 2);
  EXPECT_NE(missing.err.find("cannot read '/nonexistent/schema.json'"), std::string::npos) << missing.err;
}

TEST(Cli, BadInputExitsTwoWithAClearMessage) {
  REQUIRE_ARBOR();
  const std::string truncated = std::string(ARBOR_BINARY_DIR) + "/cli_truncated.gguf";
  {
    std::ifstream in(ARBOR_DEFAULT_MODEL, std::ios::binary);
    std::ofstream out(truncated, std::ios::binary);
    std::string head(1 << 20, '\0');
    in.read(head.data(), std::streamsize(head.size()));
    out.write(head.data(), in.gcount());
  }
  EXPECT_EQ(run("generate --prompt hi --model " + truncated).status, 2);
  EXPECT_NE(stderr_of("generate --prompt hi --model " + truncated).find("truncated"), std::string::npos);

  std::string words;
  for (int i = 0; i < 9000; ++i) words += "word ";
  EXPECT_EQ(run("generate --max-tokens 4 --prompt '" + words + "'").status, 2);
  EXPECT_NE(stderr_of("generate --max-tokens 4 --prompt '" + words + "'").find("too long"), std::string::npos);

  EXPECT_EQ(run("generate --prompt hi --kv-mem 1 --max-tokens 4").status, 2);
  EXPECT_EQ(run("generate --prompt hi --eviction random").status, 2);
  EXPECT_EQ(run("run").status, 2);
  EXPECT_EQ(run("frobnicate").status, 2);
}

TEST(Cli, RunJsonReportsRunsAndCache) {
  REQUIRE_ARBOR();
  const Output o = run("run " + kSource + "/workflows/examples/tenant_a.json " + kSource +
                       "/workflows/examples/tenant_b.json --json");
  ASSERT_EQ(o.status, 0) << o.out;
  const auto j = nlohmann::json::parse(o.out);
  ASSERT_EQ(j["runs"].size(), 2u);
  for (const auto& r : j["runs"]) {
    EXPECT_EQ(r["status"], "ok");
    for (const auto& a : r["agents"])
      for (const char* key : {"id", "parent", "status", "output", "prompt_tokens", "cached_tokens",
                              "computed_tokens", "generated_tokens", "ttft_ms", "duration_ms"})
        EXPECT_TRUE(a.contains(key)) << key;
  }
  // Identical prefix text in two tenants: each tenant hits only its own pages.
  EXPECT_EQ(j["runs"][0]["agents"][0]["cached_tokens"], 0);
  EXPECT_EQ(j["runs"][1]["agents"][0]["cached_tokens"], 0);
  EXPECT_GT(j["runs"][0]["agents"][1]["cached_tokens"].get<int>(), 0);
  for (const char* key : {"prompt_tokens", "cached_tokens", "computed_tokens", "hit_ratio", "pages_total",
                          "pages_used", "pages_locked", "evictions", "tenants"})
    EXPECT_TRUE(j["cache"].contains(key)) << key;
  EXPECT_EQ(j["cache"]["pages_locked"], 0);
}

// --json lists each run's tool calls and results in order (tool_events).
TEST(Cli, RunJsonListsToolEvents) {
  REQUIRE_ARBOR();
  const Output o = run("run " + kSource + "/workflows/examples/tool_calculator.json --input 'orders=[\"7 chairs at 49.90 each\"]' --json");
  ASSERT_EQ(o.status, 0) << o.out;
  const auto j = nlohmann::json::parse(o.out);
  const auto& events = j["runs"][0]["tool_events"];
  ASSERT_GE(events.size(), 2u) << events.dump();
  EXPECT_EQ(events[0]["type"], "tool_call");
  EXPECT_EQ(events[0]["agent_id"], "order[0]");
  EXPECT_EQ(events[0]["tool"], "calculator");
  EXPECT_TRUE(events[0]["arguments"].contains("expression")) << events.dump();
  EXPECT_EQ(events[1]["type"], "tool_result");
  EXPECT_TRUE(events[1]["status"] == "ok" || events[1]["status"] == "error") << events.dump();
  EXPECT_GT(events[1]["bytes"].get<int>(), 0);
  EXPECT_TRUE(events[1].contains("ms"));
}

TEST(Cli, PerplexityReportsLikeLlamaCpp) {
  REQUIRE_ARBOR();
  const Output o = run("perplexity " + kSource + "/workflows/examples/docs/transistor_history.md --ctx 256");
  ASSERT_EQ(o.status, 0) << o.out;
  const auto at = o.out.find("Final estimate: PPL = ");
  ASSERT_NE(at, std::string::npos) << o.out;
  const double ppl = std::stod(o.out.substr(at + 22));
  EXPECT_GT(ppl, 1.0);
  EXPECT_LT(ppl, 30.0);
}

// Every subcommand, with the arguments it requires (cheap ones: with an unknown flag
// nothing runs; the benchmarks are bounded in case one did).
const std::vector<std::string> kCommands = {
    "run WF.json --tool-pin-ttl 30000",
    "generate --prompt hi --max-tokens 1",
    "serve --port 0",
    "validate WF.json",
    "tokenize --text hi",
    "perplexity FILE.txt",
    "bench engine --reps 1",
    "bench workflow --agents 1 --max-tokens 1",
    "bench serve --clients 1 --requests-per-client 1 --max-tokens 1",
    "bench constrained --batch 1 --max-tokens 1 --reps 1",
    "bench tools --agents 1 --pressure 1 --ttl 1000 --max-tokens 1",
    "bench cluster --nodes 1 --requests 1 --max-tokens 1",
    "node --listen 127.0.0.1:0"};

std::string command_name(const std::string& command_line) {
  // "bench serve --clients 1" -> "bench serve"; "run WF.json" -> "run"
  std::string name;
  std::size_t at = 0;
  for (int words = 0; words < 2; ++words) {
    const std::size_t end = command_line.find(' ', at);
    const std::string word = command_line.substr(at, end == std::string::npos ? std::string::npos : end - at);
    if (word.empty() || word[0] == '-' || word.find('.') != std::string::npos) break;
    name += (name.empty() ? "" : " ") + word;
    if (end == std::string::npos) break;
    at = end + 1;
  }
  return name;
}

TEST(Cli, AnUnknownFlagIsNamedWithExitTwoOnEverySubcommand) {
  REQUIRE_ARBOR();
  for (const std::string& command : kCommands) {
    for (const char* flag : {"--frobnicate", "-x", "--frobnicate=1"}) {
      const Streams s = run_streams(command + " " + flag);
      EXPECT_EQ(s.status, 2) << command << " " << flag << "\n" << s.err;
      EXPECT_NE(s.err.find(std::string(flag).substr(0, std::string(flag).find('='))), std::string::npos)
          << command << " " << flag << "\n" << s.err;
      EXPECT_EQ(s.out, "") << command << " " << flag;
    }
  }
}

TEST(Cli, HelpOnEverySubcommandGoesToStdoutWithEachOptionAndItsDefault) {
  REQUIRE_ARBOR();
  const arbor::RuntimeConfig runtime_defaults;
  for (const std::string& command : kCommands) {
    const std::string name = command_name(command);
    for (const char* flag : {"-h", "--help"}) {
      const Streams s = run_streams(name + " " + flag);
      EXPECT_EQ(s.status, 0) << name << " " << flag << "\n" << s.err;
      EXPECT_EQ(s.err, "") << name << " " << flag;
      EXPECT_NE(s.out.find("Usage: arbor " + name + " [OPTIONS]"), std::string::npos) << name << "\n" << s.out;
      // Each flag the command line above gives is listed.
      for (std::size_t at = command.find("--"); at != std::string::npos; at = command.find("--", at + 2)) {
        const std::string option = command.substr(at, command.find(' ', at) - at);
        EXPECT_NE(s.out.find("  " + option + " "), std::string::npos) << name << ": " << option << "\n" << s.out;
      }
    }
  }
  // The runtime flags with RuntimeConfig's defaults, and the generation defaults.
  const Streams generate = run_streams("generate --help");
  const arbor::SamplingOptions sampling;
  for (const std::string& line : std::vector<std::string>{"--max-tokens N ", "default " + std::to_string(sampling.max_tokens) + "]", "--temperature T ",
        "--kv-mem MB ", "default " + std::to_string(runtime_defaults.kv_memory_mb) + "]", "--threads N ",
        "--page-size N ", "--eviction POLICY ", "default " + std::string(to_string(runtime_defaults.eviction)) + "]", "--no-cache",
        "--precision MODE "})
    EXPECT_NE(generate.out.find(line), std::string::npos) << line << "\n" << generate.out;
  EXPECT_EQ(sampling.temperature, 0.0);  // shown as "default 0"
  EXPECT_NE(generate.out.find("greedy [in 0..100, default 0]"), std::string::npos) << generate.out;
  const Streams run_help = run_streams("help run");
  const arbor::SamplingSettings generation;
  EXPECT_EQ(run_help.status, 0);
  EXPECT_NE(run_help.out.find("max_tokens " + std::to_string(generation.max_tokens) + ", temperature 0 (greedy)"),
            std::string::npos)
      << run_help.out;
  EXPECT_NE(run_help.out.find("--input KEY=VALUE ..."), std::string::npos) << run_help.out;
  EXPECT_NE(run_help.out.find("Exit codes: 0"), std::string::npos) << run_help.out;
  // The top level, three ways.
  for (const char* top : {"--help", "-h", "help"}) {
    const Streams s = run_streams(top);
    EXPECT_EQ(s.status, 0) << top;
    for (const char* command : {"bench", "generate", "perplexity", "run", "serve", "tokenize", "validate"})
      EXPECT_NE(s.out.find(std::string("  ") + command + " "), std::string::npos) << top << ": " << command;
  }
  const Streams none = run_streams("");
  EXPECT_EQ(none.status, 2);
  EXPECT_NE(none.err.find("Usage: arbor"), std::string::npos);
  const Streams unknown = run_streams("frobnicate");
  EXPECT_EQ(unknown.status, 2);
  EXPECT_NE(unknown.err.find("unknown command 'frobnicate'"), std::string::npos) << unknown.err;
  const Streams unknown_bench = run_streams("bench frobnicate");
  EXPECT_EQ(unknown_bench.status, 2);
  EXPECT_NE(unknown_bench.err.find("unknown command 'frobnicate' (commands: engine, workflow, serve"),
            std::string::npos)
      << unknown_bench.err;
}

TEST(Cli, ABadValueNamesTheFlag) {
  REQUIRE_ARBOR();
  const std::pair<std::string, std::string> cases[] = {
      {"generate --prompt hi --threads abc", "--threads: expects an integer in 0..4096, got 'abc'"},
      {"run WF.json --threads abc", "--threads: expects an integer in 0..4096, got 'abc'"},
      {"serve --threads abc", "--threads: expects an integer in 0..4096, got 'abc'"},
      {"bench engine --threads abc", "--threads: expects an integer in 0..4096, got 'abc'"},
      {"bench engine --shared-batch 0", "--shared-batch: expects an integer in 1..256, got '0'"},
      {"bench engine --batch 1,65", "--batch: expects a comma list of integers in 1..64, got '65' in '1,65'"},
      {"bench engine --prompt 0", "--prompt: expects a comma list of integers in 1..32768, got '0'"},
      {"bench workflow --prefix-documents 0", "--prefix-documents: expects an integer in 1..16, got '0'"},
      {"generate --prompt hi --temperature 1e999", "--temperature: expects a number in 0..100, got '1e999'"},
      {"generate --prompt hi --max-tokens many", "--max-tokens: expects an integer"},
      // The sampling flags' ranges: sampling_limits (common/sampling_settings.hpp).
      {"generate --prompt hi --top-p 1.5", "--top-p: expects a number in 0..1, got '1.5'"},
      {"generate --prompt hi --top-k 1048577", "--top-k: expects an integer in 0..1048576, got '1048577'"},
      {"run WF.json --eviction random", "--eviction: expects one of lru|lfu|workflow, got 'random'"},
      {"run WF.json --tool-pin-ttl 4000000", "--tool-pin-ttl: expects an integer in 0..3600000, got '4000000'"},
      {"serve --port 70000", "--port: expects an integer in 0..65535, got '70000'"},
      {"bench serve --clients 0", "--clients: expects a comma list of integers in 1..64, got '0'"},
      {"perplexity FILE.txt --ctx", "--ctx"}};
  for (const auto& [args, message] : cases) {
    const Streams s = run_streams(args);
    EXPECT_EQ(s.status, 2) << args;
    EXPECT_NE(s.err.find(message), std::string::npos) << args << "\n" << s.err;
  }
}

TEST(Cli, LogLevelDebugTracesEveryStepOnStderrOnly) {
  REQUIRE_ARBOR();
  for (const std::string args : {"generate --prompt hi --max-tokens 3 --log-level debug",
                                 "--log-level debug generate --prompt hi --max-tokens 3"}) {
    const Streams s = run_streams(args);
    EXPECT_EQ(s.status, 0) << args << "\n" << s.err;
    EXPECT_NE(s.err.find("[debug] step 1: batch 1 rows (0 decode, 1 prefill of"), std::string::npos) << args << "\n" << s.err;
    EXPECT_NE(s.err.find("[debug] step 3: batch 1 rows (1 decode"), std::string::npos) << args << "\n" << s.err;
    EXPECT_EQ(s.out.find("step 1"), std::string::npos) << args << "\n" << s.out;
  }
  const Streams quiet = run_streams("generate --prompt hi --max-tokens 3");
  EXPECT_EQ(quiet.err.find("[debug]"), std::string::npos) << quiet.err;
  const Streams bad = run_streams("--log-level loud generate --prompt hi");
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.err.find("--log-level: unknown log level 'loud' (use trace, debug, info"), std::string::npos) << bad.err;
}

TEST(Cli, KvPoolHintsUseTheFlagsName) {
  REQUIRE_ARBOR();
  const Streams s = run_streams("generate --prompt hi --kv-mem 1 --max-tokens 4");
  EXPECT_EQ(s.status, 2);
  EXPECT_NE(s.err.find("raise --kv-mem or lower --max-tokens"), std::string::npos) << s.err;
  EXPECT_EQ(s.err.find("kv_memory_mb"), std::string::npos) << s.err;
}

// Two tiny workflows: one declares `topic` (no default, so it runs only if the input
// reaches it), the other declares nothing.
std::pair<std::string, std::string> two_workflows() {
  const std::string dir = std::string(ARBOR_BINARY_DIR) + "/cli_inputs";
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/topic.json") << R"({"name": "cli_topic", "inputs": {"topic": {"type": "string"}},
    "defaults": {"generation": {"max_tokens": 2, "temperature": 0}},
    "agents": [{"id": "a", "task": "Name one fact about {{inputs.topic}}."}]})";
  std::ofstream(dir + "/plain.json") << R"({"name": "cli_plain",
    "defaults": {"generation": {"max_tokens": 2, "temperature": 0}},
    "agents": [{"id": "b", "task": "Say hello."}]})";
  return {dir + "/topic.json", dir + "/plain.json"};
}

TEST(Cli, SeveralWorkflowsEachTakeTheInputsTheyDeclare) {
  REQUIRE_ARBOR();
  const auto [topic, plain] = two_workflows();
  const Streams s = run_streams("run " + topic + " " + plain + " --input topic=rust --json");
  ASSERT_EQ(s.status, 0) << s.err;
  const auto j = nlohmann::json::parse(s.out);
  ASSERT_EQ(j["runs"].size(), 2u);
  EXPECT_EQ(j["runs"][0]["workflow"], "cli_topic");
  EXPECT_EQ(j["runs"][0]["status"], "ok");
  EXPECT_EQ(j["runs"][1]["status"], "ok");

  const Streams none = run_streams("run " + topic + " " + plain + " --input topik=rust");
  EXPECT_EQ(none.status, 2);
  EXPECT_NE(none.err.find("--input topik=rust: none of the 2 workflows declares an input 'topik' "
                          "(topic.json declares topic; plain.json declares none)"),
            std::string::npos)
      << none.err;
  EXPECT_EQ(run_streams("run " + topic + " " + plain).status, 2);  // topic has no default
}

// Runs `arbor ARGS` with stderr on a pseudo-terminal; returns what it wrote there.
std::string stderr_on_a_terminal(const std::vector<std::string>& args) {
  int master = -1, slave = -1;
  if (openpty(&master, &slave, nullptr, nullptr, nullptr) != 0) return "openpty failed";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, slave, STDERR_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addclose(&actions, master);
  std::vector<std::string> argv_text = {kArbor};
  argv_text.insert(argv_text.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_text) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, kArbor.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(slave);
  std::string out;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(5);
  while (spawned == 0 && std::chrono::steady_clock::now() < deadline) {
    pollfd p{master, POLLIN, 0};
    if (poll(&p, 1, 1000) <= 0) continue;
    char buf[4096];
    const ssize_t n = read(master, buf, sizeof buf);
    if (n <= 0) break;  // EIO once the child closed the terminal
    out.append(buf, std::size_t(n));
  }
  close(master);
  if (spawned == 0) waitpid(pid, nullptr, 0);
  return out;
}

TEST(Cli, RunShowsTotalDoneAndFailedAgentsOnATerminal) {
  REQUIRE_ARBOR();
  const auto [topic, plain] = two_workflows();
  const std::string err = stderr_on_a_terminal({"run", topic, plain, "--input", "topic=rust"});
  // The last drawing, when both runs ended (format: CliProgress tests).
  const std::string last = "[arbor] agents 2: 0 running, 2 done, 0 failed, 0 waiting | ";
  EXPECT_NE(err.find(last), std::string::npos) << err;
}

// Starts `arbor serve ARGS`, returns its first stdout line (the "listening" banner), then
// stops it with SIGTERM.
std::string serve_banner(const std::vector<std::string>& args) {
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) return "pipe failed";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addclose(&actions, pipe_fds[0]);
  std::vector<std::string> argv_text = {kArbor, "serve"};
  argv_text.insert(argv_text.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_text) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, kArbor.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(pipe_fds[1]);
  std::string out;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(2);
  while (spawned == 0 && out.find('\n') == std::string::npos && std::chrono::steady_clock::now() < deadline) {
    pollfd p{pipe_fds[0], POLLIN, 0};
    if (poll(&p, 1, 1000) <= 0) continue;
    char buf[512];
    const ssize_t n = read(pipe_fds[0], buf, sizeof buf);
    if (n <= 0) break;
    out.append(buf, std::size_t(n));
  }
  close(pipe_fds[0]);
  if (spawned == 0) {
    kill(pid, SIGTERM);
    waitpid(pid, nullptr, 0);
  }
  return out.substr(0, out.find('\n'));
}

// Every JSON text the CLI reads (a workflow for validate and run, serve's config) that
// does not parse exits 2 with what is wrong and where, never an abort (exit 134).
TEST(Cli, UnparsableJsonExitsTwoWithWhatAndWhere) {
  REQUIRE_ARBOR();
  const std::string dir = std::string(ARBOR_BINARY_DIR) + "/cli_hostile_json";
  std::filesystem::create_directories(dir);
  const std::string tail = R"("agents": [{"id": "a", "task": "t"}]})";
  std::string utf16 = "\xFF\xFE";
  for (char c : "{\"name\": \"x\", " + tail) utf16 += c, utf16 += '\0';
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{\"name\": \"x\",\n \"defaults\": {\"timeout_ms\": 1e999}, " + tail, ":2:29: (root): invalid JSON: number 1e999 is out of range"},
      {"{\"name\": \"x\", \"description\": " + std::string(20000, '[') + std::string(20000, ']') + ", " + tail,
       "nested more than 64 levels"},
      {utf16, "the text is UTF-16 little-endian (byte order mark FF FE)"},
      {"\xEF\xBB\xBF\xEF\xBB\xBF{\"name\": \"x\", " + tail, "two UTF-8 byte order marks"},
      {"{\"name\": \"x\", \"agents\": [", "unexpected end of input"},
      {"{\"name\": \"\xC3(\", " + tail, "ill-formed UTF-8"},
  };
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const std::string path = dir + "/wf" + std::to_string(i) + ".json";
    std::ofstream(path, std::ios::binary) << cases[i].first;
    const Streams v = run_streams("validate " + path);
    EXPECT_EQ(v.status, 2) << path << "\n" << v.err;
    EXPECT_NE(v.err.find(cases[i].second), std::string::npos) << v.err.substr(0, 400);
    EXPECT_EQ(v.err.find("json.exception"), std::string::npos) << v.err.substr(0, 400);
  }
  const Streams r = run_streams("run " + dir + "/wf0.json");
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("number 1e999 is out of range"), std::string::npos) << r.err;

  for (const std::string& config : {std::string(R"({"port": 0, "limits": {"drain_seconds": 1e999}})"),
                                    R"({"port": 0, "runtime": )" + std::string(100, '[') + std::string(100, ']') + "}"}) {
    const std::string path = dir + "/config.json", err = dir + "/serve_err.txt";
    std::ofstream(path, std::ios::binary) << config;
    const int rc = std::system(("timeout 60 " + kArbor + " serve --config " + path + " > /dev/null 2> " + err).c_str());
    EXPECT_TRUE(WIFEXITED(rc) && WEXITSTATUS(rc) == 2) << rc;
    std::ifstream in(err);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_NE(text.find(path + ": invalid JSON at line 1, column"), std::string::npos) << text;
  }
}

TEST(Cli, ServeFlagsOverrideTheConfigFileOnlyWhenGiven) {
  REQUIRE_ARBOR();
  const std::string config = std::string(ARBOR_BINARY_DIR) + "/cli_serve_config.json";
  std::ofstream(config) << R"({"port": 0, "runtime": {"kv_memory_mb": 64}})";
  const std::string from_file = serve_banner({"--config", config});
  EXPECT_NE(from_file.find(", 64 MiB KV pool"), std::string::npos) << from_file;
  EXPECT_EQ(from_file.find(":8080 "), std::string::npos) << from_file;  // the file's port 0: any free port
  const std::string overridden = serve_banner({"--config", config, "--kv-mem", "32"});
  EXPECT_NE(overridden.find(", 32 MiB KV pool"), std::string::npos) << overridden;
}

// Every command that computes says on stderr which device it uses; --device names an
// unknown device or an unavailable one with exit 2.
// `arbor bench cluster` on 2 node processes: cache-aware routing computes exactly the
// ideal the bench derives from the tokenizer (each document's shared pages once), round-
// robin more; both served the same prompts.
TEST(Cli, BenchClusterComputesEachDocumentOnceWhenCacheAware) {
  REQUIRE_ARBOR();
  const Output o = run("bench cluster --nodes 2 --docs 2 --requests 4 --agents 2 --concurrency 1 --max-tokens 1");
  ASSERT_EQ(o.status, 0) << o.out;
  struct Row {
    std::size_t prompt = 0, computed = 0, ideal = 0, failed = 0;
    std::string per_node;
  };
  std::map<std::string, Row> rows;
  std::istringstream lines(o.out);
  std::string last;
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::string name, ratio, hit, wall;
    Row r;
    if ((words >> name) && (name == "cache-aware" || name == "round-robin") &&
        (words >> r.prompt >> r.computed >> r.ideal >> ratio >> hit >> wall >> r.failed)) {
      rows[last = name] = r;
    } else if (const auto at = line.find("jobs per node: "); at != std::string::npos && !last.empty()) {
      rows[last].per_node = line.substr(at + 15);
    }
  }
  ASSERT_EQ(rows.size(), 2u) << o.out;
  const Row& aware = rows["cache-aware"];
  const Row& robin = rows["round-robin"];
  EXPECT_EQ(aware.computed, aware.ideal) << o.out;
  EXPECT_GT(robin.computed, robin.ideal) << o.out;
  EXPECT_EQ(aware.prompt, robin.prompt);
  EXPECT_EQ(aware.failed + robin.failed, 0u);
  // Each document's first run cold, its second where the first ran.
  EXPECT_EQ(aware.per_node, "2 (prefix 1, cold 1); 2 (prefix 1, cold 1)") << o.out;
}

// `arbor bench workflow --prefix-documents 2`: each prompt holds both parts of the
// document (over 2,000 tokens of it), and with the cache the shared prefix is still
// computed once (computed == ideal), without it once per agent.
// The engine benchmark measures each prompt length and batch size asked for, each batch
// against batch 1, greedy decode at each batch size with steps waiting and overlapped,
// and sampled decode overlapped, and how many of those steps went through graphs.
TEST(Cli, BenchEngineMeasuresEachPromptLengthAndBatchSize) {
  REQUIRE_ARBOR();
  const Output o = run("bench engine --reps 1 --prompt 32,80 --batch 1,3 --shared-prefix 0 --precision fast --json");
  ASSERT_EQ(o.status, 0) << o.out;
  const auto j = nlohmann::json::parse(o.out);
  const auto& f = j["precision"]["fast"];
  for (const char* key : {"pp32_tokens_per_s", "pp80_tokens_per_s", "tg128_tokens_per_s",
                          "batch3_decode_tokens_per_s", "batch3_speedup"}) {
    ASSERT_TRUE(f.contains(key)) << key << " in " << o.out;
    EXPECT_GT(f[key].get<double>(), 0.0) << key;
  }
  EXPECT_FALSE(f.contains("pp512_tokens_per_s")) << o.out;
  EXPECT_FALSE(f.contains("batch8_decode_tokens_per_s")) << o.out;
  EXPECT_NEAR(f["batch3_speedup"].get<double>(),
              f["batch3_decode_tokens_per_s"].get<double>() / f["tg128_tokens_per_s"].get<double>(), 1e-9);
  for (const char* batch : {"batch1", "batch3"}) {
    const auto& g = j["greedy_decode"][batch];
    EXPECT_GT(g["waiting_tokens_per_s"].get<double>(), 0.0) << batch << " in " << o.out;
    EXPECT_GT(g["overlapped_tokens_per_s"].get<double>(), 0.0) << batch << " in " << o.out;
    EXPECT_GT(j["sampled_decode"][batch]["overlapped_tokens_per_s"].get<double>(), 0.0) << batch << " in " << o.out;
  }
  // The CPU engine runs no graphs (the CUDA engine's replays: CudaEngine.SteadyDecode...).
  EXPECT_EQ(j["graph_steps"]["replayed"], 0) << o.out;
  EXPECT_EQ(j["graph_steps"]["captured"], 0) << o.out;
}

// The structured-output benchmark: both kinds generate the same tokens, and each reports
// the scheduler's host time per step (a constrained step also computes masks and
// advances the automaton: not free).
TEST(Cli, BenchConstrainedReportsBothKindsAndTheirHostTimePerStep) {
  REQUIRE_ARBOR();
  const Output o = run("bench constrained --batch 1 --reps 1 --json");
  ASSERT_EQ(o.status, 0) << o.out;
  const auto j = nlohmann::json::parse(o.out);
  ASSERT_EQ(j["runs"].size(), 1u) << o.out;
  const auto& r = j["runs"][0];
  EXPECT_EQ(r["batch"], 1);
  EXPECT_GT(r["constrained_tokens"].get<int>(), 0) << o.out;
  EXPECT_EQ(r["constrained_tokens"], r["free_tokens"]) << o.out;
  for (const char* key : {"free_tokens_per_s", "constrained_tokens_per_s", "free_host_ms_per_step",
                          "constrained_host_ms_per_step"})
    EXPECT_GT(r[key].get<double>(), 0.0) << key << " in " << o.out;
}

// On synthetic weights (how scripts/device_check.sh runs it) a document need not close
// within the budget: the warm-up fails saying how to go on, and --partial-documents
// measures anyway. The report names the device.
TEST(Cli, BenchConstrainedOnSyntheticWeightsTakesPartialDocuments) {
  REQUIRE_ARBOR();
  const auto dir = arbor::testing::scratch_dir("cli_synth");
  std::filesystem::create_directories(dir);
  const std::string model = (dir / "smollm2.gguf").string();
  ASSERT_EQ(run("synth-model --shape smollm2-135m --type q4_1 --layers 1 --out " + model).status, 0);
  const std::string bench = "bench constrained --model " + model + " --batch 2 --max-tokens 8 --reps 1 --json";
  const std::string refused = stderr_of(bench);
  EXPECT_NE(refused.find("--partial-documents"), std::string::npos) << refused;
  EXPECT_NE(run(bench).status, 0);
  const Output o = run(bench + " --partial-documents");
  ASSERT_EQ(o.status, 0) << o.out;
  const auto j = nlohmann::json::parse(o.out);
  EXPECT_NE(j["device"].get<std::string>().find("cpu"), std::string::npos) << o.out;
  ASSERT_EQ(j["runs"].size(), 1u) << o.out;
  const auto& r = j["runs"][0];
  EXPECT_GT(r["constrained_tokens"].get<int>(), 0) << o.out;
  EXPECT_EQ(r["constrained_tokens"], r["free_tokens"]) << o.out;
  std::filesystem::remove_all(dir);
}

TEST(Cli, BenchWorkflowPrefixDocumentsLengthenTheSharedPrefix) {
  REQUIRE_ARBOR();
  const Output o = run("bench workflow --agents 2 --max-tokens 1 --prefix-documents 2 --json");
  ASSERT_EQ(o.status, 0) << o.out;
  const auto j = nlohmann::json::parse(o.out);
  EXPECT_EQ(j["prefix_documents"], 2);
  ASSERT_EQ(j["runs"].size(), 2u) << o.out;
  const auto& on = j["runs"][0];
  const auto& off = j["runs"][1];
  ASSERT_EQ(on["cache"], true);
  EXPECT_GT(on["prompt_tokens"].get<int>(), 2 * 2000) << o.out;  // two agents
  EXPECT_EQ(on["computed_tokens"], on["ideal_prefill_tokens"]) << o.out;
  EXPECT_LT(on["computed_tokens"].get<int>(), on["prompt_tokens"].get<int>() * 6 / 10) << o.out;
  EXPECT_EQ(off["computed_tokens"], off["prompt_tokens"]) << o.out;
}

// --temperature makes the agents sample: the run still completes, and says so.
TEST(Cli, BenchWorkflowSamplesAtATemperature) {
  REQUIRE_ARBOR();
  const Output o = run("bench workflow --agents 2 --max-tokens 4 --temperature 0.8 --json");
  ASSERT_EQ(o.status, 0) << o.out;
  const auto j = nlohmann::json::parse(o.out);
  EXPECT_EQ(j["temperature"], 0.8);
  ASSERT_EQ(j["runs"].size(), 2u) << o.out;
  EXPECT_GT(j["runs"][0]["generated_tokens"].get<int>(), 0) << o.out;
  EXPECT_NE(run("bench workflow --agents 2 --temperature 3").status, 0) << "a temperature out of range is refused";
}

// The cluster's TLS flags are checked before a model loads or anything listens; a node
// without TLS listens on loopback only.
TEST(Cli, ClusterTlsFlagsAreCheckedBeforeAnythingListens) {
  REQUIRE_ARBOR();
  const std::string pki = kSource + "/tests/data/cluster_tls/";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"node --listen 0.0.0.0:0",
       "arbor node: refusing to listen on 0.0.0.0 without authentication; give --cluster-cert, --cluster-key and "
       "--cluster-ca (mutual TLS), or listen on 127.0.0.1"},
      {"node --listen 127.0.0.1:0 --cluster-cert " + pki + "member.pem", "go together: give all three"},
      {"node --listen 127.0.0.1:0 --cluster-cert " + pki + "member.pem --cluster-key " + pki +
           "rogue.key --cluster-ca " + pki + "cluster-ca.pem",
       "is not the key of the certificate"},
      {"serve --port 0 --cluster-cert " + pki + "member.pem --cluster-key " + pki + "member.key --cluster-ca " + pki +
           "cluster-ca.pem",
       "are for a router: give --nodes too"},
      {"serve --port 0 --nodes 127.0.0.1:1 --cluster-cert " + pki + "rogue.pem --cluster-key " + pki +
           "rogue.key --cluster-ca " + pki + "cluster-ca.pem",
       "does not verify against --cluster-ca"}};
  for (const auto& [args, message] : cases) {
    const Streams s = run_streams(args);
    EXPECT_EQ(s.status, 2) << args << "\n" << s.err;
    EXPECT_NE(s.err.find(message), std::string::npos) << args << "\n" << s.err;
    EXPECT_EQ(s.out, "") << args;  // nothing listened
  }
}

TEST(Cli, DeviceIsPrintedAndAnUnavailableOneIsNamed) {
  REQUIRE_ARBOR();
  const Streams cpu = run_streams("generate --prompt hi --max-tokens 1 --device cpu");
  ASSERT_EQ(cpu.status, 0) << cpu.err;
  EXPECT_NE(cpu.err.find("arbor generate: device cpu ("), std::string::npos) << cpu.err;
  const Streams automatic = run_streams("generate --prompt hi --max-tokens 1");
  ASSERT_EQ(automatic.status, 0) << automatic.err;
  EXPECT_NE(automatic.err.find("arbor generate: device "), std::string::npos) << automatic.err;
  EXPECT_NE(automatic.err.find("auto: "), std::string::npos) << automatic.err;

  const Streams bad = run_streams("generate --prompt hi --device gpu");
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.err.find("--device"), std::string::npos) << bad.err;
  if (automatic.err.find("device cuda") == std::string::npos) {  // no CUDA build or no device here
    const Streams cuda = run_streams("generate --prompt hi --device cuda");
    EXPECT_EQ(cuda.status, 2);
    EXPECT_NE(cuda.err.find("device 'cuda' was requested"), std::string::npos) << cuda.err;
    EXPECT_EQ(cuda.out, "");
  }
}

}  // namespace
