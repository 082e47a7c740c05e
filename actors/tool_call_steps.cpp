#include "actors/tool_call_steps.hpp"

#include "model/tool_format.hpp"

namespace arbor::actors {

std::vector<std::int32_t> plain_ids(const model::Tokenizer& tokenizer, std::string_view text) {
  return tokenizer.encode(text, false);
}

std::optional<CallHead> find_call_head(const model::Tokenizer& tokenizer, const SeqResult& r) {
  if (r.finish_reason != FinishReason::stop) return std::nullopt;
  std::string bytes;
  for (std::size_t k = 0; k < r.tokens.size(); ++k) {
    const std::size_t before = bytes.size();
    bytes += tokenizer.token_to_piece(r.tokens[k]);
    const std::size_t at = bytes.find(model::kToolCallOpen);
    if (at == std::string::npos) continue;
    const std::size_t tag_end = at + model::kToolCallOpen.size();
    CallHead head;
    head.ids.assign(r.tokens.begin(), r.tokens.begin() + std::ptrdiff_t(k + (bytes.size() == tag_end)));
    head.text = bytes.substr(0, tag_end);
    if (bytes.size() != tag_end) {
      const auto rest = plain_ids(tokenizer, std::string_view(head.text).substr(before));
      head.ids.insert(head.ids.end(), rest.begin(), rest.end());
    }
    const auto newline = plain_ids(tokenizer, model::kToolCallHead.substr(model::kToolCallOpen.size()));
    head.ids.insert(head.ids.end(), newline.begin(), newline.end());
    head.text += model::kToolCallHead.substr(model::kToolCallOpen.size());
    head.computed = k;
    return head;
  }
  return std::nullopt;
}

CallHead forced_call_head(const model::Tokenizer& tokenizer) {
  CallHead head;
  head.text = std::string(model::kToolCallHead);
  head.ids = plain_ids(tokenizer, head.text);
  return head;
}

std::vector<std::int32_t> call_tail_ids(const model::Tokenizer& tokenizer) {
  return plain_ids(tokenizer, model::kToolCallTail);
}

SeqRequest call_request(SeqRequest base, const std::vector<std::int32_t>& prompt,
                        const std::vector<std::int32_t>& head_ids, const std::string& call_schema, int max_tokens) {
  base.prompt = prompt;
  base.prompt.insert(base.prompt.end(), head_ids.begin(), head_ids.end());
  base.sampling.max_tokens = max_tokens;
  base.sampling.stop.clear();
  base.json_schema = call_schema;
  return base;
}

}  // namespace arbor::actors
