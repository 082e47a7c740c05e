// Stop conditions for generation: end-of-generation token ids, stop strings (matched on
// the decoded text, also across token boundaries; the text is cut where the stop string
// starts), and a token budget. Also tells a streaming caller which bytes are safe to
// emit: never a possible beginning of a stop string, never half a UTF-8 sequence.
//
// One StopChecker per sequence; not thread-safe. push() is O(piece + sum of stop lengths).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace arbor::model {

enum class StopReason { none, end_of_generation, stop_string, max_tokens };
const char* to_string(StopReason reason);

struct StopConfig {
  std::vector<std::int32_t> end_of_generation_ids;
  std::vector<std::string> stop_strings;  // empty strings are ignored
  int max_tokens = -1;                    // < 0: no limit
};

class StopChecker {
 public:
  explicit StopChecker(StopConfig config);

  // Records one generated token and its bytes (Tokenizer::token_to_piece). Returns the
  // reason to stop, or none. An end-of-generation token adds no text. After a stop,
  // further pushes are ignored and return the same reason.
  StopReason push(std::int32_t id, std::string_view piece);

  StopReason reason() const { return reason_; }
  int num_tokens() const { return num_tokens_; }
  // All text so far (cut at the stop string once one matched).
  const std::string& text() const { return text_; }
  // The bytes that became safe to show since the last call; after a stop, everything left.
  std::string take_ready();

 private:
  std::size_t safe_end() const;

  StopConfig config_;
  std::string text_;
  std::size_t emitted_ = 0;
  std::size_t max_stop_len_ = 0;
  int num_tokens_ = 0;
  StopReason reason_ = StopReason::none;
};

}  // namespace arbor::model
