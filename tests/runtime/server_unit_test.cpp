// Unit tests of the server's pure parts: JSON errors with line:column, OpenAI request
// validation, response/chunk documents, SSE framing, UTF-8 joining, metrics text,
// config parsing and the Exchange channel.
#include <gtest/gtest.h>

#include "runtime/server/api_error.hpp"
#include "runtime/server/exchange.hpp"
#include "runtime/server/metrics.hpp"
#include "runtime/server/openai_api.hpp"
#include "runtime/server/server_config.hpp"

namespace arbor::server {
namespace {

using nlohmann::json;

TEST(ServerJson, MalformedJsonReportsLineAndColumn) {
  auto r = parse_json("{\n  \"a\": 1,\n  \"b\": tru\n}");
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().status, 400);
  EXPECT_EQ(r.error().code, "invalid_json");
  EXPECT_NE(r.error().message.find("line 3, column"), std::string::npos) << r.error().message;
}

TEST(ServerJson, EveryParseFailureIs400WithoutLibraryText) {
  for (const std::string& text : {std::string(R"({"max_tokens": 1e999})"), std::string(20000, '[') + "1" + std::string(20000, ']'),
                                  std::string("{\"a\": \"\xff\"}"), std::string("{\"a\": [1,"), std::string("\xFF\xFE{\0}\0", 6)}) {
    auto r = parse_json(text);
    ASSERT_FALSE(r.has_value()) << text.substr(0, 40);
    EXPECT_EQ(r.error().status, 400);
    EXPECT_EQ(r.error().code, "invalid_json");
    EXPECT_NE(r.error().message.find("line 1, column"), std::string::npos) << r.error().message;
    EXPECT_EQ(r.error().message.find("json.exception"), std::string::npos) << r.error().message;
  }
  EXPECT_NE(parse_json(R"({"t": 1e999})").error().message.find("number 1e999 is out of range"), std::string::npos);
}

TEST(ServerJson, ErrorBodyHasMessageTypeCode) {
  auto body = json::parse(error_body(invalid_param("/messages/0/role", "must be a role")));
  EXPECT_EQ(body["error"]["type"], "invalid_request_error");
  EXPECT_EQ(body["error"]["code"], "invalid_parameter");
  EXPECT_EQ(body["error"]["param"], "/messages/0/role");
  EXPECT_EQ(body["error"]["message"], "'/messages/0/role' must be a role");
}

TEST(ServerJson, ErrorBodyReplacesInvalidUtf8) {
  std::string bad = "x\xff";
  auto body = json::parse(error_body(bad_request("c", bad)), nullptr, false);
  ASSERT_FALSE(body.is_discarded());
}

CompletionRequest parse_ok(const std::string& text, bool chat = true) {
  auto r = parse_completion_request(json::parse(text), chat, 256);
  EXPECT_TRUE(r.has_value()) << (r ? "" : r.error().message);
  return r.value_or(CompletionRequest{});
}

ApiError parse_bad(const std::string& text, bool chat = true) {
  auto r = parse_completion_request(json::parse(text), chat, 256);
  EXPECT_FALSE(r.has_value()) << text;
  return r ? ApiError{} : r.error();
}

TEST(ServerOpenAi, ResponseFormatBecomesTheSchemaToEnforceInTheOrderWritten) {
  const std::string text = R"({"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema",
      "json_schema":{"name":"n","strict":true,"schema":{"type":"object","properties":{"b":{"type":"null"},"a":{"type":"null"}}}}}})";
  auto r = parse_completion_request(json::parse(text), true, 256, text);
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_EQ(r->generate.json_schema, R"({"type":"object","properties":{"b":{"type":"null"},"a":{"type":"null"}}})");
  EXPECT_EQ(parse_ok(R"({"prompt":"x","response_format":{"type":"json_object"}})", false).generate.json_schema,
            R"({"type":"object"})");
  EXPECT_FALSE(parse_ok(R"({"prompt":"x","response_format":{"type":"text"}})", false).generate.json_schema);
  EXPECT_FALSE(parse_ok(R"({"prompt":"x","response_format":null})", false).generate.json_schema);
  EXPECT_EQ(parse_bad(R"({"prompt":"x","response_format":"json"})", false).param, "/response_format");
  EXPECT_EQ(parse_bad(R"({"prompt":"x","response_format":{"type":"json_schema","json_schema":{"name":1,"schema":{}}}})",
                      false).param,
            "/response_format/json_schema/name");
  const ApiError e = parse_bad(R"({"prompt":"x","response_format":{"type":"json_schema","json_schema":{"schema":
      {"type":"array","uniqueItems":true,"contains":{"type":"null"}}}}})", false);
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.param, "/response_format/json_schema/schema/uniqueItems");
  EXPECT_NE(e.message.find("/response_format/json_schema/schema/contains"), std::string::npos) << e.message;
}

TEST(ServerOpenAi, ParsesChatRequest) {
  auto r = parse_ok(R"({"model":"m","messages":[{"role":"system","content":"S"},
      {"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}],
      "max_tokens":7,"temperature":0.5,"top_p":0.9,"seed":42,"stop":["x","y"],"stream":true,
      "stream_options":{"include_usage":true},"user":"ignored"})");
  ASSERT_EQ(r.generate.messages.size(), 2u);
  EXPECT_EQ(r.generate.messages[0].role, "system");
  EXPECT_EQ(r.generate.messages[1].content, "ab");
  EXPECT_EQ(r.generate.sampling.max_tokens, 7);
  EXPECT_DOUBLE_EQ(r.generate.sampling.temperature, 0.5);
  EXPECT_DOUBLE_EQ(r.generate.sampling.top_p, 0.9);
  EXPECT_EQ(r.generate.sampling.seed, 42u);
  EXPECT_EQ(r.generate.sampling.stop, (std::vector<std::string>{"x", "y"}));
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_EQ(r.generate.tenant, "default");  // the body never sets the tenant
}

TEST(ServerOpenAi, ParsesCompletionRequestAndCapsDefaultMaxTokens) {
  auto r = parse_ok(R"({"prompt":"once upon","stop":"."})", false);
  ASSERT_TRUE(r.generate.raw_prompt);
  EXPECT_EQ(*r.generate.raw_prompt, "once upon");
  EXPECT_EQ(r.generate.sampling.stop, std::vector<std::string>{"."});
  EXPECT_EQ(r.generate.sampling.max_tokens, 128);
}

TEST(ServerOpenAi, RejectsInvalidParametersWithTheirPointer) {
  struct Case {
    const char* body;
    const char* param;
  } cases[] = {
      {R"({})", "/messages"},
      {R"({"messages":[]})", "/messages"},
      {R"({"messages":[{"role":"robot","content":"x"}]})", "/messages/0/role"},
      {R"({"messages":[{"role":"tool","content":"x"}]})", "/messages/0/tool_call_id"},
      {R"({"messages":[{"role":"user"}]})", "/messages/0/content"},
      {R"({"messages":[{"role":"user","content":[{"type":"image_url"}]}]})", "/messages/0/content/0"},
      {R"({"messages":[{"role":"user","content":"x"}],"max_tokens":-1})", "/max_tokens"},
      {R"({"messages":[{"role":"user","content":"x"}],"max_tokens":100000})", "/max_tokens"},
      {R"({"messages":[{"role":"user","content":"x"}],"max_tokens":"5"})", "/max_tokens"},
      {R"({"messages":[{"role":"user","content":"x"}],"temperature":100.5})", "/temperature"},
      {R"({"messages":[{"role":"user","content":"x"}],"top_p":1.5})", "/top_p"},
      {R"({"messages":[{"role":"user","content":"x"}],"seed":-1})", "/seed"},
      {R"({"messages":[{"role":"user","content":"x"}],"stop":[1]})", "/stop"},
      {R"({"messages":[{"role":"user","content":"x"}],"stop":["a","b","c","d","e"]})", "/stop"},
      {R"({"messages":[{"role":"user","content":"x"}],"n":2})", "/n"},
      {R"({"messages":[{"role":"user","content":"x"}],"stream":"yes"})", "/stream"},
      {R"({"messages":[{"role":"user","content":"x"}],"model":5})", "/model"},
  };
  for (const auto& c : cases) {
    ApiError e = parse_bad(c.body);
    EXPECT_EQ(e.status, 400) << c.body;
    EXPECT_EQ(e.param, c.param) << c.body << " -> " << e.message;
  }
  EXPECT_EQ(parse_bad(R"({"prompt":5})", false).param, "/prompt");
  EXPECT_EQ(parse_bad(R"([1,2])").status, 400);
}

// Sampling ranges are the one check_sampling (common/sampling_settings.hpp), each error
// in the OpenAI shape with its param; the server's own max_tokens cap comes on top.
TEST(ServerOpenAi, SamplingRangesAreTheSharedOnesWithTheServerCapOnTop) {
  const std::string msgs = R"("messages":[{"role":"user","content":"x"}])";
  ApiError e = parse_bad("{" + msgs + R"(,"top_p":1.5})");
  EXPECT_EQ(e.param, "/top_p");
  EXPECT_EQ(e.code, "invalid_parameter");
  EXPECT_EQ(e.message, "'/top_p' must be in 0..1 (got 1.5)");
  e = parse_bad("{" + msgs + R"(,"max_completion_tokens":-2})");
  EXPECT_EQ(e.param, "/max_completion_tokens");
  EXPECT_EQ(e.message, "'/max_completion_tokens' must be in 0..1048576 (got -2)");
  EXPECT_EQ(parse_bad("{" + msgs + R"(,"max_tokens":257})").message,
            "'/max_tokens' must be at most 256 (this server's limits.max_tokens)");
  EXPECT_EQ(parse_bad("{" + msgs + R"(,"top_k":1e3})").message, "'/top_k' must be an integer");
  // Accepted since issue 13 (the union of the front ends' old ranges).
  auto ok = parse_completion_request(json::parse("{" + msgs + R"(,"max_tokens":0,"temperature":2.5,"top_p":0})"),
                                     true, 256);
  ASSERT_TRUE(ok) << ok.error().message;
  EXPECT_EQ(ok->generate.sampling.max_tokens, 0);
  EXPECT_EQ(ok->generate.sampling.temperature, 2.5);
  EXPECT_EQ(ok->generate.sampling.top_p, 0.0);
}

TEST(ServerOpenAi, ResponseCarriesUsageWithCachedTokens) {
  GenerateResult g;
  g.text = "hi";
  g.prompt_tokens = 10;
  g.cached_tokens = 6;
  g.generated_tokens = 2;
  g.finish_reason = FinishReason::length;
  auto j = completion_response(true, "id1", 5, "m", g);
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["choices"][0]["message"]["content"], "hi");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(j["usage"]["total_tokens"], 12);
  EXPECT_EQ(j["usage"]["prompt_tokens_details"]["cached_tokens"], 6);
  auto t = completion_response(false, "id2", 5, "m", g);
  EXPECT_EQ(t["object"], "text_completion");
  EXPECT_EQ(t["choices"][0]["text"], "hi");
}

TEST(ServerOpenAi, ChunksAndSseFraming) {
  auto first = completion_chunk(true, "c", 1, "m", "", true, "");
  EXPECT_EQ(first["choices"][0]["delta"]["role"], "assistant");
  EXPECT_TRUE(first["choices"][0]["finish_reason"].is_null());
  auto last = completion_chunk(true, "c", 1, "m", "", false, "stop");
  EXPECT_TRUE(last["choices"][0]["delta"].empty());
  EXPECT_EQ(last["choices"][0]["finish_reason"], "stop");
  const std::string frame = sse_data(completion_chunk(true, "c", 1, "m", "a\nb", false, ""), "ev");
  EXPECT_EQ(frame.rfind("event: ev\ndata: {", 0), 0u);
  EXPECT_EQ(frame.substr(frame.size() - 2), "\n\n");
  EXPECT_EQ(frame.find('\n', 16), frame.size() - 2);  // the newline in the text is escaped
}

TEST(ServerMetrics, RendersCountersHistogramAndTenantFilter) {
  Metrics m;
  m.count_request("alpha", "/v1/chat/completions", 200);
  m.count_request("alpha", "/v1/chat/completions", 200);
  m.count_request("beta", "/v1/completions", 400);
  GenerateResult g;
  g.prompt_tokens = 100;
  g.cached_tokens = 75;
  g.computed_tokens = 25;
  g.generated_tokens = 4;
  g.ttft_ms = 30;  // falls in the 0.05 s bucket
  m.record_generation("alpha", g);
  CacheStats cache;
  cache.pages_total = 64;
  cache.pages_locked = 2;
  cache.tenants["alpha"].used_pages = 9;
  cache.tenants["beta"].used_pages = 1;
  const std::string all = m.render(cache, 0, std::nullopt);
  EXPECT_NE(all.find("arbor_requests_total{tenant=\"alpha\",route=\"/v1/chat/completions\",code=\"200\"} 2\n"),
            std::string::npos) << all;
  EXPECT_NE(all.find("arbor_cache_hit_ratio{tenant=\"alpha\"} 0.75\n"), std::string::npos);
  EXPECT_NE(all.find("arbor_time_to_first_token_seconds_bucket{tenant=\"alpha\",le=\"0.025\"} 0\n"), std::string::npos);
  EXPECT_NE(all.find("arbor_time_to_first_token_seconds_bucket{tenant=\"alpha\",le=\"0.05\"} 1\n"), std::string::npos);
  EXPECT_NE(all.find("arbor_time_to_first_token_seconds_bucket{tenant=\"alpha\",le=\"+Inf\"} 1\n"), std::string::npos);
  EXPECT_NE(all.find("arbor_time_to_first_token_seconds_count{tenant=\"alpha\"} 1\n"), std::string::npos);
  EXPECT_NE(all.find("arbor_cache_pages{state=\"locked\"} 2\n"), std::string::npos);
  EXPECT_NE(all.find("# TYPE arbor_time_to_first_token_seconds histogram\n"), std::string::npos);
  const std::string mine = m.render(cache, 0, std::string("beta"));
  EXPECT_EQ(mine.find("alpha"), std::string::npos) << mine;
  EXPECT_EQ(mine.find("arbor_cache_pages{"), std::string::npos);
  EXPECT_NE(mine.find("arbor_tenant_pages_used{tenant=\"beta\"} 1\n"), std::string::npos);
  EXPECT_EQ(escape_label("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
}

TEST(ServerConfigTest, ParsesKeysTenantsLimitsAndRuntime) {
  auto c = parse_server_config(R"({"host":"127.0.0.1","port":0,"admin_key":"admin-key-123",
      "keys":{"key-alpha-1":"alpha","key-beta-11":"beta"},
      "tenants":{"alpha":{"quota_pages":10,"max_concurrent":2,"max_tokens":64}},
      "limits":{"max_body_bytes":4096,"max_inflight":3},
      "runtime":{"kv_memory_mb":64,"page_size":16,"prefix_caching":false}})");
  ASSERT_TRUE(c.has_value()) << c.error().message;
  EXPECT_TRUE(c->auth);
  EXPECT_EQ(c->keys.at("key-beta-11"), "beta");
  EXPECT_EQ(c->tenant_limits.at("alpha").max_concurrent, 2);
  EXPECT_EQ(c->runtime.tenants.at("alpha").quota_pages, 10u);
  EXPECT_EQ(c->max_body_bytes, 4096u);
  EXPECT_EQ(c->max_inflight, 3);
  EXPECT_EQ(c->runtime.kv_memory_mb, 64u);
  EXPECT_FALSE(c->runtime.prefix_caching);
}

TEST(ServerConfigTest, RejectsTyposBadTypesAndShortKeys) {
  auto typo = parse_server_config(R"({"limits":{"max_inflght":3}})");
  ASSERT_FALSE(typo.has_value());
  EXPECT_NE(typo.error().message.find("/limits/max_inflght"), std::string::npos);
  auto type = parse_server_config(R"({"port":"80"})");
  ASSERT_FALSE(type.has_value());
  EXPECT_NE(type.error().message.find("/port"), std::string::npos);
  auto shortkey = parse_server_config(R"({"keys":{"abc":"t"}})");
  ASSERT_FALSE(shortkey.has_value());
  EXPECT_EQ(shortkey.error().message.find("abc"), std::string::npos);  // secrets are not echoed
  auto malformed = parse_server_config("{\n\"port\": }");
  ASSERT_FALSE(malformed.has_value());
  EXPECT_NE(malformed.error().message.find("line 2"), std::string::npos);
  auto none = parse_server_config("{}");
  ASSERT_TRUE(none.has_value());
  EXPECT_FALSE(none->auth);
}

TEST(ServerExchange, StreamsInOrderAndAbandonRunsCancelOnce) {
  int wakes = 0;
  Exchange ex([&] { ++wakes; });
  ex.send("dropped before the stream begins");
  ex.begin_stream();
  ex.send("a");
  ex.send("b");
  auto t = ex.take();
  EXPECT_EQ(t.mode, Exchange::Mode::stream);
  EXPECT_TRUE(t.head);
  EXPECT_EQ(t.data, "ab");
  EXPECT_FALSE(t.ended);
  int cancels = 0;
  ex.on_abandon([&] { ++cancels; });
  ex.abandon();
  ex.abandon();
  EXPECT_EQ(cancels, 1);
  ex.send("c");
  EXPECT_EQ(ex.take().data, "");
  EXPECT_GE(wakes, 3);

  Exchange late(nullptr);
  late.abandon();
  late.on_abandon([&] { ++cancels; });  // registered after the hang-up: runs at once
  EXPECT_EQ(cancels, 2);

  Exchange done(nullptr);
  done.respond(HttpReply{201, "text/plain", "x", {}});
  done.on_abandon([&] { ++cancels; });
  done.abandon();  // already answered: nothing to cancel
  EXPECT_EQ(cancels, 2);
  auto d = done.take();
  EXPECT_EQ(d.reply.status, 201);
}

}  // namespace
}  // namespace arbor::server
