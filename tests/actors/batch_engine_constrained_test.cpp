// Constrained decoding through the scheduler, on the real model: sequences with a JSON
// Schema batch with free ones; every constrained output is a complete document that
// parses and validates (checked here with the validator, independently of the
// scheduler's own check); caching does not change a token; a schema compiles once per
// text; a schema the engine cannot enforce fails at submit naming its pointer.
#include <gtest/gtest.h>

#include "model/json_schema.hpp"
#include "batch_engine_test_util.hpp"

namespace arbor::actors {
namespace {

using namespace testing;

// Bounded schemas (every string has a maxLength, every array a maxItems) so that 160
// tokens always complete them.
const std::vector<std::string> kSchemas = {
    // object: required, enum, integer bounds, boolean
    R"({"type":"object","properties":{"name":{"type":"string","maxLength":24},
        "role":{"enum":["lead","researcher","writer"]},"age":{"type":"integer","minimum":18,"maximum":99},
        "remote":{"type":"boolean"}},"required":["name","role","age","remote"],"additionalProperties":false})",
    // array with minItems / maxItems of bounded strings
    R"({"type":"array","items":{"type":"string","maxLength":16},"minItems":2,"maxItems":4})",
    // nesting: an object holding an array of objects
    R"({"type":"object","properties":{"team":{"type":"string","maxLength":20},
        "members":{"type":"array","minItems":1,"maxItems":3,"items":{"type":"object",
        "properties":{"id":{"type":"integer","minimum":1,"maximum":9},"tag":{"enum":["a","b"]}},
        "required":["id","tag"],"additionalProperties":false}}},"required":["team","members"],
        "additionalProperties":false})",
    // multi-byte UTF-8: enum values and a bounded free string (the prompt is in French)
    R"({"type":"object","properties":{"ville":{"enum":["Zürich","São Paulo","東京"]},
        "plat":{"type":"string","minLength":1,"maxLength":12}},"required":["ville","plat"],
        "additionalProperties":false})",
};

const std::vector<std::string> kAsks = {
    "Describe a member of a research team as JSON.", "List a few fruits as a JSON array.",
    "Describe a small team as JSON.", "Décris une ville et son plat typique en JSON, en français.",
};

SeqRequest request(const std::string& ask, const std::string& schema, int max_tokens) {
  SeqRequest req;
  req.tenant = "t";
  req.prompt = chat_prompt("You reply with one JSON document and nothing else.", ask);
  req.sampling.max_tokens = max_tokens;
  req.json_schema = schema;
  return req;
}

// The schemas' requests and two free ones, all in one batch.
std::vector<std::uint64_t> submit_mixed(Harness& h) {
  std::vector<std::uint64_t> ids;
  for (std::size_t i = 0; i < kSchemas.size(); ++i) ids.push_back(h.submit(request(kAsks[i], kSchemas[i], 160)));
  ids.push_back(h.submit(request("Name three colours.", "", 24)));
  ids.push_back(h.submit(request("Describe a team member as JSON.", "", 24)));
  return ids;
}

void expect_valid(const SeqResult& r, const std::string& schema_text) {
  SCOPED_TRACE(schema_text);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.finish_reason, FinishReason::stop) << r.text;
  ASSERT_FALSE(r.json.empty()) << "no complete document: " << r.text;
  EXPECT_EQ(r.json, r.text);
  const auto value = model::Json::parse(r.json, nullptr, false);
  ASSERT_FALSE(value.is_discarded()) << r.json;
  auto schema = model::JsonSchema::parse(schema_text, model::SchemaUse::validation);
  ASSERT_TRUE(schema) << schema.error().message;
  EXPECT_EQ(model::describe(schema->validate(value)), "") << r.json;
}

TEST(BatchEngineConstrained, BatchedWithFreeSequencesEveryOutputValidatesAndCachingChangesNothing) {
  Harness on(config(256, true)), off(config(256, false));
  const auto a = submit_mixed(on);
  const auto b = submit_mixed(off);
  on.drain_checked();
  off.drain();
  for (std::size_t i = 0; i < kSchemas.size(); ++i) {
    expect_valid(on.results.at(a[i]), kSchemas[i]);
    std::cout << "  " << on.results.at(a[i]).json << "\n";
  }
  for (std::size_t i = kSchemas.size(); i < a.size(); ++i) {
    EXPECT_EQ(on.results.at(a[i]).json, "");  // free text is not a document
  }
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(on.results.at(a[i]).tokens, off.results.at(b[i]).tokens) << i;
    EXPECT_EQ(on.results.at(a[i]).json, off.results.at(b[i]).json) << i;
  }
  // The multi-byte enum was written byte-exact (a UTF-8 character across tokens).
  const auto city = model::Json::parse(on.results.at(a[3]).json)["ville"].get<std::string>();
  EXPECT_TRUE(city == "Zürich" || city == "São Paulo" || city == "東京") << city;
  on.expect_clean();
  off.expect_clean();
}

TEST(BatchEngineConstrained, StreamedPiecesAddUpToTheDocument) {
  Harness h(config());
  const auto id = h.submit(request(kAsks[3], kSchemas[3], 160));
  h.drain();
  expect_valid(h.results.at(id), kSchemas[3]);
  EXPECT_EQ(h.streamed[id], h.results.at(id).json);
}

TEST(BatchEngineConstrained, ASchemaCompilesOncePerText) {
  Harness h(config());
  std::vector<std::uint64_t> ids;
  for (int i = 0; i < 8; ++i) ids.push_back(h.submit(request(kAsks[1], kSchemas[1], 4)));
  EXPECT_EQ(h.s->snapshot().schemas_compiled, 1u);  // 8 requests, one schema text
  ids.push_back(h.submit(request(kAsks[0], kSchemas[0], 4)));
  EXPECT_EQ(h.s->snapshot().schemas_compiled, 2u);
  h.drain();
  for (auto id : ids) EXPECT_TRUE(h.results.at(id).ok) << h.results.at(id).error;
  h.expect_clean();
}

TEST(BatchEngineConstrained, ASchemaTheEngineCannotEnforceFailsAtSubmitNamingItsPointer) {
  Harness h(config());
  const auto bad = h.submit(request(kAsks[0], R"({"type":"object","properties":{"n":{"type":"integer","multipleOf":3}}})", 16));
  const auto malformed = h.submit(request(kAsks[0], R"({"type":"object",)", 16));
  ASSERT_TRUE(h.results.contains(bad));  // answered at once, before any step
  EXPECT_FALSE(h.results.at(bad).ok);
  EXPECT_EQ(h.results.at(bad).error_code, std::int32_t(ErrorCode::invalid_argument));
  EXPECT_NE(h.results.at(bad).error.find("/properties/n/multipleOf"), std::string::npos) << h.results.at(bad).error;
  ASSERT_TRUE(h.results.contains(malformed));
  EXPECT_FALSE(h.results.at(malformed).ok);
  EXPECT_EQ(h.results.at(malformed).error_code, std::int32_t(ErrorCode::invalid_argument));
  EXPECT_FALSE(h.s->has_work());
  EXPECT_EQ(h.s->snapshot().schemas_compiled, 0u);
}

TEST(BatchEngineConstrained, ABudgetThatRunsOutLeavesNoDocumentAndStopStringsDoNotCutOne) {
  Harness h(config());
  const auto cut = h.submit(request(kAsks[0], kSchemas[0], 3));
  auto with_stop = request(kAsks[0], kSchemas[0], 160);
  with_stop.sampling.stop = {"\""};  // every document of this schema holds a quote
  const auto stopped = h.submit(std::move(with_stop));
  h.drain();
  const auto& r = h.results.at(cut);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.finish_reason, FinishReason::length);
  EXPECT_EQ(r.generated_tokens, 3u);
  EXPECT_EQ(r.json, "");
  EXPECT_FALSE(r.text.empty());
  expect_valid(h.results.at(stopped), kSchemas[0]);
  h.expect_clean();
}

}  // namespace
}  // namespace arbor::actors
