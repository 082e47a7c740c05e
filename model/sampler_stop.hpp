// Stop conditions for generation: end-of-generation token ids, stop strings (matched on
// the decoded text, also across token boundaries; the text is cut where the stop string
// starts), and a token budget. Also tells a streaming caller which bytes are safe to
// emit: never a possible beginning of a stop string, never half a UTF-8 sequence.
//
// This is where a sequence's token bytes become text, so it is where the text becomes
// valid UTF-8: token pieces are raw bytes (a byte-level or byte-fallback token may hold
// part of a character, or bytes no character has). What it hands out, streamed or whole,
// is always valid UTF-8: an unfinished character is held back until a later token
// completes it, and at the end (or where it can never be completed) each ill-formed
// subsequence becomes U+FFFD (unicode::to_valid_utf8). The streamed chunks concatenate
// to text().
//
// One StopChecker per sequence; not thread-safe. push() is O(piece + sum of stop lengths).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/sampling_settings.hpp"

namespace arbor::model {

enum class StopReason { none, end_of_generation, stop_string, max_tokens };
const char* to_string(StopReason reason);

class StopChecker {
 public:
  // Stops at settings.stop (empty strings are ignored), after settings.max_tokens
  // tokens (< 0: no limit), or at any of the end-of-generation ids.
  StopChecker(const SamplingSettings& settings, std::vector<std::int32_t> end_of_generation_ids);

  // Records one generated token and its bytes (Tokenizer::token_to_piece). Returns the
  // reason to stop, or none. An end-of-generation token adds no text. After a stop,
  // further pushes are ignored and return the same reason.
  StopReason push(std::int32_t id, std::string_view piece);

  StopReason reason() const { return reason_; }
  int num_tokens() const { return num_tokens_; }
  // All text so far as valid UTF-8 (cut at the stop string once one matched); an
  // unfinished character at its end is U+FFFD (the final text of a cut sequence).
  std::string text() const;
  // The text that became safe to show since the last call, valid UTF-8; after a stop,
  // everything left.
  std::string take_ready();

 private:
  std::size_t safe_end() const;

  std::vector<std::int32_t> end_of_generation_ids_;
  std::vector<std::string> stop_strings_;
  int max_tokens_;
  std::string text_;  // raw token bytes
  std::size_t emitted_ = 0;
  std::size_t max_stop_len_ = 0;
  int num_tokens_ = 0;
  StopReason reason_ = StopReason::none;
};

}  // namespace arbor::model
