// Fuzzes the OpenAI request path of the server without sockets: the body parser
// (parse_json), request validation for /v1/chat/completions and /v1/completions, the
// response and stream documents built from what was accepted, and the stop checker
// where token pieces become the streamed text (model/sampler_stop), and response_format
// (a JSON Schema the server accepts is one the engine can enforce).
//
// Invariants: nothing throws; an error is a 4xx with a message; an accepted request's
// values are in their documented ranges; documents serialize (invalid UTF-8 replaced);
// every streamed chunk is valid UTF-8, the chunks add up to the final text, and valid
// text comes out unchanged.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/sampling_settings.hpp"
#include "fuzz/fuzz_check.hpp"
#include "model/json_grammar.hpp"
#include "model/sampler_stop.hpp"
#include "model/unicode.hpp"
#include "runtime/server/openai_api.hpp"

namespace {

using namespace arbor::server;
constexpr int kCap = 1024;

using arbor::model::unicode::is_valid_utf8;

void check_accepted(const CompletionRequest& r, bool chat) {
  const auto& s = r.generate.sampling;
  // What the server accepts is in the one set of sampling ranges (check_sampling), under its cap.
  ARBOR_FUZZ_CHECK(s.max_tokens <= kCap, std::to_string(s.max_tokens));
  ARBOR_FUZZ_CHECK(arbor::check_sampling(s).has_value(), "sampling settings outside check_sampling's ranges");
  for (const auto& stop : s.stop) ARBOR_FUZZ_CHECK(!stop.empty(), "empty stop string");
  ARBOR_FUZZ_CHECK(chat ? !r.generate.messages.empty() && !r.generate.raw_prompt
                        : r.generate.raw_prompt.has_value(), "prompt shape");
  // An accepted response_format schema is one the engine enforces.
  if (r.generate.json_schema)
    ARBOR_FUZZ_CHECK(arbor::model::JsonGrammar::from_text(*r.generate.json_schema).has_value(), *r.generate.json_schema);
}

// The accepted text (any bytes) goes back out as an answer and as stream deltas.
void check_documents(const std::string& text, bool chat) {
  arbor::GenerateResult result;
  result.text = text;
  result.finish_reason = arbor::FinishReason::length;
  const std::string whole = dump(completion_response(chat, "id", 0, "m", result));
  ARBOR_FUZZ_CHECK(is_valid_utf8(whole), whole);
  const std::string frame = sse_data(completion_chunk(chat, "id", 0, "m", text, true, "stop"));
  ARBOR_FUZZ_CHECK(frame.find('\n') == frame.size() - 2, frame);  // one data line, then the blank line

  // Token pieces: the text cut every 1..4 bytes (cut widths from the text itself), then
  // an end-of-generation token.
  arbor::model::StopChecker checker({.max_tokens = -1}, {0});
  std::string streamed;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const std::size_t width = pos < text.size() ? 1 + static_cast<unsigned char>(text[pos]) % 4 : 0;
    checker.push(width ? 1 : 0, std::string_view(text).substr(pos, width));
    const std::string out = checker.take_ready();
    ARBOR_FUZZ_CHECK(is_valid_utf8(out), out);
    streamed += out;
    pos += width ? width : 1;
  }
  ARBOR_FUZZ_CHECK(streamed == checker.text(), "the stream does not add up to the text");
  if (is_valid_utf8(text)) ARBOR_FUZZ_CHECK(checker.text() == text, "valid text was changed");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  auto json = parse_json(body);
  if (!json) {
    ARBOR_FUZZ_CHECK(json.error().status == 400 && !json.error().message.empty(), json.error().message);
    ARBOR_FUZZ_CHECK(is_valid_utf8(error_body(json.error())), json.error().message);
    return 0;
  }
  for (bool chat : {true, false}) {
    auto request = parse_completion_request(*json, chat, kCap, body);
    if (!request) {
      const ApiError& e = request.error();
      ARBOR_FUZZ_CHECK(e.status >= 400 && e.status < 500 && !e.message.empty(), e.message);
      continue;
    }
    check_accepted(*request, chat);
    std::string text = request->generate.raw_prompt.value_or("");
    for (const auto& m : request->generate.messages) text += m.content;
    check_documents(text, chat);
  }
  return 0;
}
