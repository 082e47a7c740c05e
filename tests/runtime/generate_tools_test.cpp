// Tools through the embedding API (GenerateRequest::tools / tool_choice, the OpenAI
// server's seam): a forced call comes back in GenerateResult::tool_calls; a cancel
// between the text and the call leaves nothing behind; tool_choice none never calls;
// bad tools are invalid_argument.
#include <gtest/gtest.h>

#include "runtime_test_util.hpp"

namespace arbor::testing {
namespace {

const FunctionTool kWeather{"get_weather", "The current weather in a city.",
                            R"({"type":"object","properties":{"city":{"type":"string","maxLength":40}},)"
                            R"("required":["city"],"additionalProperties":false})"};
const FunctionTool kAdd{"add", "Adds two integers.",
                        R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},)"
                        R"("required":["a","b"],"additionalProperties":false})"};

GenerateRequest weather_request(ToolChoice choice) {
  GenerateRequest req;
  req.messages = {{"system", "You are a helpful assistant with tools."}, {"user", "What is the weather in Paris?"}};
  req.sampling.max_tokens = 48;
  req.tools = {kWeather, kAdd};
  req.tool_choice = choice;
  return req;
}

TEST(GenerateTools, ANamedCallComesBackInToolCalls) {
  auto rt = make_runtime();
  ASSERT_TRUE(rt);
  auto req = weather_request(ToolChoice::function);
  req.tool_choice_name = "add";
  auto r = rt->generate(req);
  ASSERT_TRUE(r) << r.error().describe();
  EXPECT_EQ(r->finish_reason, FinishReason::tool_calls);
  ASSERT_EQ(r->tool_calls.size(), 1u);
  EXPECT_EQ(r->tool_calls[0].name, "add");
  EXPECT_EQ(r->tool_calls[0].id.rfind("call_", 0), 0u);
  const auto args = nlohmann::json::parse(r->tool_calls[0].arguments, nullptr, false);
  ASSERT_TRUE(args.is_object()) << r->tool_calls[0].arguments;
  EXPECT_TRUE(args["a"].is_number_integer() && args["b"].is_number_integer()) << args.dump();
  EXPECT_GE(r->tokens.size(), r->generated_tokens);  // the reply: tag, call, closing tag
  EXPECT_EQ(nlohmann::json::parse(to_json(*r))["tool_calls"][0]["name"], "add");
  // The call sent back with its result continues the conversation.
  req.messages.push_back({"assistant", "", r->tool_calls});
  req.messages.push_back({"tool", "5", {}, r->tool_calls[0].id});
  req.tool_choice = ToolChoice::none;
  req.sampling.max_tokens = 8;
  auto next = rt->generate(req);
  ASSERT_TRUE(next) << next.error().describe();
  EXPECT_TRUE(next->tool_calls.empty());
  EXPECT_GE(next->cached_tokens, r->prompt_tokens / 16 * 16);
  expect_clean(*rt);
}

TEST(GenerateTools, ACancelledCallLeavesNothingBehind) {
  auto rt = make_runtime();
  ASSERT_TRUE(rt);
  for (auto choice : {ToolChoice::required, ToolChoice::automatic}) {
    auto handle = rt->start_generate(weather_request(choice));
    ASSERT_TRUE(handle);
    handle->cancel();
    auto r = handle->result();
    ASSERT_TRUE(r) << r.error().describe();
    EXPECT_TRUE(r->finish_reason == FinishReason::cancelled || r->finish_reason == FinishReason::tool_calls ||
                r->finish_reason == FinishReason::stop)
        << r->finish_reason;
  }
  expect_clean(*rt);
}

TEST(GenerateTools, ToolChoiceNoneNeverCalls) {
  auto rt = make_runtime();
  ASSERT_TRUE(rt);
  auto r = rt->generate(weather_request(ToolChoice::none));
  ASSERT_TRUE(r) << r.error().describe();
  EXPECT_TRUE(r->tool_calls.empty());
  EXPECT_NE(r->finish_reason, FinishReason::tool_calls);
  EXPECT_EQ(r->text.find("<tool_call>"), std::string::npos) << r->text;
  expect_clean(*rt);
}

TEST(GenerateTools, BadToolsAreInvalidArguments) {
  auto rt = make_runtime();
  ASSERT_TRUE(rt);
  auto expect_invalid = [&](const GenerateRequest& req, const std::string& says) {
    auto r = rt->generate(req);
    ASSERT_FALSE(r) << says;
    EXPECT_EQ(r.error().code, ErrorCode::invalid_argument);
    EXPECT_NE(r.error().message.find(says), std::string::npos) << r.error().message;
  };
  auto unknown = weather_request(ToolChoice::function);
  unknown.tool_choice_name = "send_email";
  expect_invalid(unknown, "send_email");
  auto none = weather_request(ToolChoice::required);
  none.tools.clear();
  expect_invalid(none, "needs tools");
  auto bad = weather_request(ToolChoice::automatic);
  bad.tools[1].parameters = R"({"type":"object","properties":{"a":{"type":"integer","multipleOf":3}}})";
  expect_invalid(bad, "multipleOf");
  auto raw = weather_request(ToolChoice::automatic);
  raw.raw_prompt = "hi";
  expect_invalid(raw, "raw_prompt");
  expect_clean(*rt);
}

}  // namespace
}  // namespace arbor::testing
