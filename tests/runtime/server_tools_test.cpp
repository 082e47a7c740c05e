// OpenAI tools on /v1/chat/completions over the real runtime and model: tools,
// tool_choice, assistant tool_calls and "tool" messages in, message.tool_calls and
// delta.tool_calls out (runtime/server/chat_tools.hpp, runtime/generation.cpp).
#include <gtest/gtest.h>

#include "model/json_schema.hpp"
#include "real_server_fixture.hpp"

namespace arbor::server::test {
namespace {

constexpr const char* kKey = "tools-key-alpha-1";
constexpr const char* kAdmin = "tools-key-admin-2";

const nlohmann::ordered_json kTools = nlohmann::ordered_json::parse(R"([
  {"type":"function","function":{"name":"get_weather","description":"The current weather in a city.",
   "parameters":{"type":"object","properties":{"city":{"type":"string","maxLength":40},
                 "unit":{"enum":["celsius","fahrenheit"]}},"required":["city","unit"],"additionalProperties":false}}},
  {"type":"function","function":{"name":"add","description":"Adds two integers.",
   "parameters":{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},
                 "required":["a","b"],"additionalProperties":false}}}])");

const std::string kSystem =
    "You are a helpful assistant with access to tools. When a question needs a tool, call it; "
    "when a tool result comes back, answer the user in one short sentence.";

nlohmann::ordered_json base_body(const std::string& user, int max_tokens = 64) {
  nlohmann::ordered_json b;
  b["model"] = "m";
  b["temperature"] = 0;
  b["max_tokens"] = max_tokens;
  b["messages"] = nlohmann::ordered_json::array(
      {{{"role", "system"}, {"content", kSystem}}, {{"role", "user"}, {"content", user}}});
  b["tools"] = kTools;
  return b;
}

// Whether `arguments` (JSON text) validates against tool `name`'s parameters.
std::string argument_errors(const std::string& name, const std::string& arguments) {
  for (const auto& t : kTools)
    if (t["function"]["name"] == name) {
      auto schema = model::JsonSchema::compile(t["function"]["parameters"], model::SchemaUse::validation);
      if (!schema) return schema.error().message;
      auto value = nlohmann::ordered_json::parse(arguments, nullptr, false);
      if (value.is_discarded()) return "not JSON: " + arguments;
      return model::describe(schema->validate(value));
    }
  return "no tool named " + name;
}

// A stream's tool_calls deltas put together by index: [{id, name, arguments}].
nlohmann::json reassembled_calls(const std::string& body, std::string* finish) {
  nlohmann::json calls = nlohmann::json::array();
  for (const auto& p : sse_payloads(body)) {
    if (p == "[DONE]") break;
    auto j = nlohmann::json::parse(p, nullptr, false);
    if (j.is_discarded() || j["choices"].empty()) continue;
    const auto& c = j["choices"][0];
    if (!c["finish_reason"].is_null()) *finish = c["finish_reason"];
    if (!c["delta"].contains("tool_calls")) continue;
    for (const auto& d : c["delta"]["tool_calls"]) {
      const std::size_t i = d["index"];
      while (calls.size() <= i) calls.push_back({{"id", ""}, {"name", ""}, {"arguments", ""}});
      if (d.contains("id")) calls[i]["id"] = d["id"];
      if (d.contains("function") && d["function"].contains("name")) calls[i]["name"] = d["function"]["name"];
      if (d.contains("function") && d["function"].contains("arguments"))
        calls[i]["arguments"] = calls[i]["arguments"].get<std::string>() + d["function"]["arguments"].get<std::string>();
    }
  }
  return calls;
}

class ServerTools : public RealServerTest<ServerTools> {
 protected:
  void SetUp() override {
    auto c = parse_server_config(std::string(R"({"port":0,"admin_key":")") + kAdmin + R"(","keys":{")" + kKey +
                                 R"(":"alpha"},"limits":{"max_tokens":256}})");
    ASSERT_TRUE(c.has_value()) << c.error().message;
    start_server(*c);
  }
  void expect_idle() { RealServerTest::expect_idle(kAdmin); }
  Reply post(const nlohmann::ordered_json& body) {
    return request(port_, "POST", "/v1/chat/completions", body.dump(), kKey);
  }
  // A 400 whose param is `pointer`.
  void expect_400(const nlohmann::ordered_json& body, const std::string& pointer) {
    auto r = post(body);
    ASSERT_EQ(r.status, 400) << body.dump() << "\n" << r.body;
    EXPECT_EQ(r.json()["error"]["param"], pointer) << r.body;
    EXPECT_FALSE(r.json()["error"]["message"].get<std::string>().empty());
  }
};

TEST_F(ServerTools, InvalidToolsAre400sNamingTheirPointer) {
  auto unenforceable = base_body("hi");
  unenforceable["tools"][1]["function"]["parameters"]["properties"]["a"]["multipleOf"] = 3;
  expect_400(unenforceable, "/tools/1/function/parameters/properties/a/multipleOf");
  auto not_object = base_body("hi");
  not_object["tools"][0]["function"]["parameters"] = {{"type", "string"}};
  expect_400(not_object, "/tools/0/function/parameters");
  auto bad_type = base_body("hi");
  bad_type["tools"][0]["type"] = "retrieval";
  expect_400(bad_type, "/tools/0/type");
  auto bad_name = base_body("hi");
  bad_name["tools"][1]["function"]["name"] = "add numbers";
  expect_400(bad_name, "/tools/1/function/name");
  auto twice = base_body("hi");
  twice["tools"][1]["function"]["name"] = "get_weather";
  expect_400(twice, "/tools/1/function/name");
  auto unknown_choice = base_body("hi");
  unknown_choice["tool_choice"] = {{"type", "function"}, {"function", {{"name", "send_email"}}}};
  expect_400(unknown_choice, "/tool_choice/function/name");
  auto bad_choice = base_body("hi");
  bad_choice["tool_choice"] = "sometimes";
  expect_400(bad_choice, "/tool_choice");
  auto no_tools = base_body("hi");
  no_tools.erase("tools");
  no_tools["tool_choice"] = "required";
  expect_400(no_tools, "/tool_choice");
  auto with_format = base_body("hi");
  with_format["response_format"] = {{"type", "json_object"}};
  expect_400(with_format, "/response_format");
  // Messages: an unknown tool_call_id, arguments that are not a JSON object, a tool
  // message without its id.
  auto history = base_body("What is 2 + 3?");
  history["messages"].push_back({{"role", "assistant"},
                                 {"content", nullptr},
                                 {"tool_calls", {{{"id", "call_1"}, {"type", "function"},
                                                  {"function", {{"name", "add"}, {"arguments", R"({"a":2,"b":3})"}}}}}}});
  history["messages"].push_back({{"role", "tool"}, {"tool_call_id", "call_2"}, {"content", "5"}});
  expect_400(history, "/messages/3/tool_call_id");
  history["messages"][3].erase("tool_call_id");
  expect_400(history, "/messages/3/tool_call_id");
  history["messages"][3]["tool_call_id"] = "call_1";
  history["messages"][2]["tool_calls"][0]["function"]["arguments"] = "a=2, b=3";
  expect_400(history, "/messages/2/tool_calls/0/function/arguments");
  history["messages"][2]["tool_calls"][0]["function"]["arguments"] = R"({"a":2,"b":3})";
  EXPECT_EQ(post(history).status, 200);
  expect_idle();
}

// tool_choice required and named: the reply is a call, well formed, its arguments valid
// against the tool's schema; the counts are those of the whole reply.
TEST_F(ServerTools, AForcedCallReturnsToolCallsValidAgainstTheSchema) {
  auto body = base_body("What is the weather in Paris?");
  body["tool_choice"] = "required";
  auto r = post(body);
  ASSERT_EQ(r.status, 200) << r.body;
  const auto j = r.json();
  const auto& choice = j["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls") << r.body;
  EXPECT_TRUE(choice["message"]["content"].is_null()) << r.body;
  ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u) << r.body;
  const auto& call = choice["message"]["tool_calls"][0];
  EXPECT_EQ(call["id"].get<std::string>().rfind("call_", 0), 0u) << r.body;
  EXPECT_EQ(call["type"], "function");
  const std::string name = call["function"]["name"];
  EXPECT_EQ(argument_errors(name, call["function"]["arguments"]), "") << r.body;
  EXPECT_GT(j["usage"]["completion_tokens"].get<int>(), 0);
  EXPECT_EQ(j["usage"]["total_tokens"], j["usage"]["prompt_tokens"].get<int>() + j["usage"]["completion_tokens"].get<int>());
  // Named: that function, whatever the question.
  body["tool_choice"] = {{"type", "function"}, {"function", {{"name", "add"}}}};
  auto named = post(body);
  ASSERT_EQ(named.status, 200) << named.body;
  const auto ncall = named.json()["choices"][0]["message"]["tool_calls"][0];
  EXPECT_EQ(ncall["function"]["name"], "add") << named.body;
  EXPECT_EQ(argument_errors("add", ncall["function"]["arguments"]), "") << named.body;
  // A call cut by max_tokens is no call: finish_reason length, no tool_calls.
  body["max_tokens"] = 3;
  auto cut = post(body);
  ASSERT_EQ(cut.status, 200) << cut.body;
  EXPECT_EQ(cut.json()["choices"][0]["finish_reason"], "length") << cut.body;
  EXPECT_FALSE(cut.json()["choices"][0]["message"].contains("tool_calls")) << cut.body;
  EXPECT_EQ(cut.json()["usage"]["completion_tokens"], 3);
  expect_idle();
}

// Greedy decoding: the streamed deltas put together are the whole reply's call.
TEST_F(ServerTools, StreamedToolCallDeltasReassembleToTheWholeCall) {
  auto body = base_body("What is the weather in Oslo, in celsius?");
  body["tool_choice"] = "required";
  auto whole = post(body);
  ASSERT_EQ(whole.status, 200) << whole.body;
  const auto call = whole.json()["choices"][0]["message"]["tool_calls"][0];
  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  auto streamed = post(body);
  ASSERT_EQ(streamed.status, 200) << streamed.body;
  std::string finish;
  const auto calls = reassembled_calls(streamed.body, &finish);
  EXPECT_EQ(finish, "tool_calls");
  ASSERT_EQ(calls.size(), 1u) << streamed.body;
  EXPECT_EQ(calls[0]["name"], call["function"]["name"]);
  EXPECT_EQ(calls[0]["arguments"], call["function"]["arguments"]);
  EXPECT_EQ(calls[0]["id"].get<std::string>().rfind("call_", 0), 0u);
  EXPECT_EQ(stream_text(streamed.body), "");  // no content: the reply is the call
  EXPECT_EQ(sse_payloads(streamed.body).back(), "[DONE]");
  const auto usage = nlohmann::json::parse(sse_payloads(streamed.body).end()[-2])["usage"];
  EXPECT_EQ(usage["completion_tokens"], whole.json()["usage"]["completion_tokens"]) << streamed.body;
  expect_idle();
}

// The loop a framework runs: a call, its result as a tool message, and the model
// answers; the second request reuses the first one's cached history.
TEST_F(ServerTools, AToolMessageContinuesTheConversationOverTheCachedHistory) {
  auto body = base_body("What is the weather in Paris?");
  body["tool_choice"] = {{"type", "function"}, {"function", {{"name", "get_weather"}}}};
  auto first = post(body);
  ASSERT_EQ(first.status, 200) << first.body;
  const auto message = nlohmann::ordered_json::parse(first.body)["choices"][0]["message"];
  const auto call = message["tool_calls"][0];
  body["messages"].push_back(message);
  body["messages"].push_back(
      {{"role", "tool"}, {"tool_call_id", call["id"]}, {"content", R"({"temperature": 18, "sky": "sunny"})"}});
  body["tool_choice"] = "none";
  auto second = post(body);
  ASSERT_EQ(second.status, 200) << second.body;
  const auto j = second.json();
  EXPECT_NE(j["choices"][0]["finish_reason"], "tool_calls") << second.body;
  EXPECT_FALSE(j["choices"][0]["message"].contains("tool_calls"));
  const std::string answer = j["choices"][0]["message"]["content"];
  EXPECT_FALSE(answer.empty()) << second.body;
  EXPECT_EQ(answer.find("<tool_call>"), std::string::npos) << answer;
  // Cached: every full page of the first request's prompt, its tools block included.
  // (The call rendered back is the bytes the model wrote, but re-tokenized: the ids the
  // constrained decoder picked may differ from the text's own, so the reply itself
  // may be prefilled again.)
  const int page = runtime_->config().page_size;
  const int first_prompt = first.json()["usage"]["prompt_tokens"];
  const int cached = j["usage"]["prompt_tokens_details"]["cached_tokens"];
  EXPECT_GE(cached, first_prompt / page * page) << second.body;
  EXPECT_GT(first_prompt, 2 * page);
  expect_idle();
}

}  // namespace
}  // namespace arbor::server::test
