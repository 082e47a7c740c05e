// Chat templates: renders {role, content} messages (plus the generation prompt) for the
// template families Arbor knows, recognised from tokenizer.chat_template's Jinja text.
// No Jinja engine: each family is hand-written to produce the bytes its template does.
//
// Segments (KV rule 2): render_segments() returns the text as ordered pieces: the
// system block first (the SharedPrefix), then one segment per following message, then
// the generation prompt. Tokenizing each segment on its own and concatenating the ids
// (tokenize_segments) makes the system block's ids independent of what follows it, so
// different tasks behind the same system block share an identical id prefix.
//
// Immutable after construction; all methods are const and thread-safe.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "model/gguf.hpp"
#include "model/tokenizer.hpp"

namespace arbor::model {

struct ChatMessage {
  std::string role;  // "system", "user", "assistant", or a tool role
  std::string content;
};

enum class ChatTemplateFamily { chatml, llama2, mistral, llama3, zephyr, phi3 };
const char* to_string(ChatTemplateFamily family);

enum class ChatSegmentKind { system, message, generation_prompt };

struct ChatSegment {
  ChatSegmentKind kind;
  std::string role;
  std::string text;
  int message_index;  // index into the input messages; -1 for an inserted default
                      // system message and for the generation prompt
  // Byte ranges of `text` holding message content: tokenize_segments keeps control
  // tokens there as plain text (no "<|im_start|>" injection through content).
  std::vector<std::pair<std::size_t, std::size_t>> content_ranges;
};

struct TokenizedChat {
  std::vector<std::int32_t> ids;
  std::vector<std::size_t> segment_ends;  // ids[segment_ends[i-1] .. segment_ends[i])
};

class ChatTemplate {
 public:
  // Recognises the family from Jinja text. Unknown or empty text gives ChatML with
  // is_fallback() set (callers should warn: the model may not follow ChatML).
  static ChatTemplate detect(std::string_view jinja_text);
  // Reads tokenizer.chat_template (absent: fallback ChatML).
  static ChatTemplate from_gguf(const GgufFile& file);
  static ChatTemplate of(ChatTemplateFamily family, std::string default_system = "");

  ChatTemplateFamily family() const { return family_; }
  bool is_fallback() const { return fallback_; }
  // Inserted when the first message is not a system message; empty = none.
  const std::string& default_system_message() const { return default_system_; }

  std::vector<ChatSegment> render_segments(std::span<const ChatMessage> messages,
                                           bool add_generation_prompt = true) const;
  std::string render(std::span<const ChatMessage> messages, bool add_generation_prompt = true) const;

 private:
  ChatTemplateFamily family_ = ChatTemplateFamily::chatml;
  bool fallback_ = false;
  std::string default_system_;
};

// Tokenizes each segment separately (the template's markers become control tokens,
// message content stays literal) and concatenates, prepending BOS when `add_bos`.
TokenizedChat tokenize_segments(const Tokenizer& tokenizer, std::span<const ChatSegment> segments,
                                bool add_bos);

}  // namespace arbor::model
