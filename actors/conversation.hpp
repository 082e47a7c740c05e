// Conversation: the token ids of one agent's chat, grown turn by turn so that every
// turn's prompt starts with exactly the ids of the turn before plus its reply (KV rule
// 3: the cached history is matched, only the new part is prefilled).
//
// Layout (KV rules 2, 6): the system segment (the SharedPrefix) is tokenized on its own,
// then each later segment on its own, ids concatenated. So every agent naming the same
// prefix starts with identical ids, whatever its task.
// Follow-up turns append the reply's generated ids as they were computed (not the
// re-tokenized text), the template's end-of-message marker, the new user message and
// the generation prompt. Templates whose assistant block does not start with the
// generation prompt fall back to re-rendering the whole chat (correct, less reuse).
// Not thread-safe; one per agent.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "model/chat_template.hpp"
#include "model/tokenizer.hpp"

namespace arbor::actors {

class Conversation {
 public:
  Conversation(const model::Tokenizer& tokenizer, const model::ChatTemplate& chat)
      : tokenizer_(&tokenizer), chat_(&chat) {}

  // First turn: `system` (may be empty = none) and the user message. `tools` (may be
  // empty) is a second system block right after `system` (model/tool_format.hpp): its
  // own segment, so the first block's ids stay those of every agent of the prefix.
  void start(const std::string& system, const std::string& user, const std::string& tools = "");
  // Next turn: the reply to the previous prompt (ids as generated, and its text), then
  // a new user message.
  void add_turn(std::span<const std::int32_t> reply_ids, const std::string& reply_text,
                const std::string& user);

  const std::vector<std::int32_t>& prompt() const { return ids_; }
  // BOS + the system segment: the ids every agent of the same prefix shares.
  const std::vector<std::int32_t>& system_ids() const { return system_ids_; }

 private:
  std::vector<std::int32_t> tokenize(const model::ChatSegment& segment) const;

  const model::Tokenizer* tokenizer_;
  const model::ChatTemplate* chat_;
  std::vector<model::ChatMessage> messages_;
  std::vector<std::int32_t> ids_;
  std::vector<std::int32_t> system_ids_;
  std::string generation_prompt_;  // text of the last generation-prompt segment
};

}  // namespace arbor::actors
