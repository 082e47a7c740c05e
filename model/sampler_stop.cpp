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

StopChecker::StopChecker(const SamplingSettings& settings, std::vector<std::int32_t> end_of_generation_ids)
    : end_of_generation_ids_(std::move(end_of_generation_ids)),
      stop_strings_(settings.stop),
      max_tokens_(settings.max_tokens) {
  std::erase_if(stop_strings_, [](const std::string& s) { return s.empty(); });
  for (const auto& s : stop_strings_) max_stop_len_ = std::max(max_stop_len_, s.size());
}

StopReason StopChecker::push(std::int32_t id, std::string_view piece) {
  if (reason_ != StopReason::none) return reason_;
  ++num_tokens_;
  const auto& eog = end_of_generation_ids_;
  if (std::find(eog.begin(), eog.end(), id) != eog.end()) return reason_ = StopReason::end_of_generation;
  // A new match must end inside the new piece, so it starts at most max_stop_len - 1
  // bytes before it.
  const std::size_t old_size = text_.size();
  text_ += piece;
  const std::size_t from = old_size >= max_stop_len_ ? old_size - max_stop_len_ + 1 : 0;
  std::size_t cut = std::string::npos;
  for (const auto& s : stop_strings_) cut = std::min(cut, text_.find(s, from));
  if (cut != std::string::npos) {
    text_.resize(cut);
    emitted_ = std::min(emitted_, text_.size());
    return reason_ = StopReason::stop_string;
  }
  if (max_tokens_ >= 0 && num_tokens_ >= max_tokens_) return reason_ = StopReason::max_tokens;
  return StopReason::none;
}

std::size_t StopChecker::safe_end() const {
  if (reason_ != StopReason::none) return text_.size();
  std::size_t end = text_.size();
  // Hold back the longest suffix that could still grow into a stop string.
  for (const auto& s : stop_strings_) {
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
