#include "model/sampler_stop.hpp"

#include <algorithm>

#include "model/unicode.hpp"

namespace arbor::model {

const char* to_string(StopReason reason) {
  switch (reason) {
    case StopReason::none: return "none";
    case StopReason::end_of_generation: return "end_of_generation";
    case StopReason::stop_string: return "stop_string";
    case StopReason::max_tokens: return "max_tokens";
  }
  return "unknown";
}

StopChecker::StopChecker(StopConfig config) : config_(std::move(config)) {
  std::erase_if(config_.stop_strings, [](const std::string& s) { return s.empty(); });
  for (const auto& s : config_.stop_strings) max_stop_len_ = std::max(max_stop_len_, s.size());
}

StopReason StopChecker::push(std::int32_t id, std::string_view piece) {
  if (reason_ != StopReason::none) return reason_;
  ++num_tokens_;
  const auto& eog = config_.end_of_generation_ids;
  if (std::find(eog.begin(), eog.end(), id) != eog.end()) return reason_ = StopReason::end_of_generation;
  // A new match must end inside the new piece, so it starts at most max_stop_len - 1
  // bytes before it.
  const std::size_t old_size = text_.size();
  text_ += piece;
  const std::size_t from = old_size >= max_stop_len_ ? old_size - max_stop_len_ + 1 : 0;
  std::size_t cut = std::string::npos;
  for (const auto& s : config_.stop_strings) cut = std::min(cut, text_.find(s, from));
  if (cut != std::string::npos) {
    text_.resize(cut);
    emitted_ = std::min(emitted_, text_.size());
    return reason_ = StopReason::stop_string;
  }
  if (config_.max_tokens >= 0 && num_tokens_ >= config_.max_tokens) return reason_ = StopReason::max_tokens;
  return StopReason::none;
}

std::size_t StopChecker::safe_end() const {
  if (reason_ != StopReason::none) return text_.size();
  std::size_t end = text_.size();
  // Hold back the longest suffix that could still grow into a stop string.
  for (const auto& s : config_.stop_strings) {
    for (std::size_t n = std::min(s.size() - 1, text_.size()); n > 0; --n) {
      if (text_.compare(text_.size() - n, n, s, 0, n) == 0) {
        end = std::min(end, text_.size() - n);
        break;
      }
    }
  }
  // Hold back an unfinished trailing character: the next token may complete it.
  return end - unicode::utf8_incomplete_tail(std::string_view(text_).substr(0, end));
}

std::string StopChecker::text() const { return unicode::to_valid_utf8(text_); }

std::string StopChecker::take_ready() {
  const std::size_t end = std::max(safe_end(), emitted_);
  std::string out = unicode::to_valid_utf8(std::string_view(text_).substr(emitted_, end - emitted_));
  emitted_ = end;
  return out;
}

}  // namespace arbor::model
