#include "actors/conversation.hpp"

namespace arbor::actors {

std::vector<std::int32_t> Conversation::tokenize(const model::ChatSegment& segment) const {
  return model::tokenize_segments(*tokenizer_, std::span(&segment, 1), false).ids;
}

void Conversation::start(const std::string& system, const std::string& user, const std::string& tools) {
  messages_.clear();
  if (!system.empty()) messages_.push_back({"system", system});
  if (!tools.empty()) messages_.push_back({"system", tools});
  messages_.push_back({"user", user});
  const auto segments = chat_->render_segments(messages_, true);
  const auto chat = model::tokenize_segments(*tokenizer_, segments, tokenizer_->add_bos());
  ids_ = chat.ids;
  system_ids_.clear();
  if (!segments.empty() && segments.front().kind == model::ChatSegmentKind::system)
    system_ids_.assign(ids_.begin(), ids_.begin() + std::ptrdiff_t(chat.segment_ends.front()));
  generation_prompt_ = segments.empty() ? std::string() : segments.back().text;
}

void Conversation::add_turn(std::span<const std::int32_t> reply_ids, const std::string& reply_text,
                            const std::string& user) {
  messages_.push_back({"assistant", reply_text});
  messages_.push_back({"user", user});
  // Render only the tail: a placeholder system message keeps the template from
  // inserting its default one.
  const std::vector<model::ChatMessage> tail = {{"system", "x"}, {"assistant", reply_text}, {"user", user}};
  const auto segments = chat_->render_segments(tail, true);
  const bool incremental = segments.size() == 4 && !segments[1].content_ranges.empty() &&
                           segments[1].text.substr(0, segments[1].content_ranges.front().first) ==
                               generation_prompt_;
  if (!incremental) {
    const auto all = chat_->render_segments(messages_, true);
    ids_ = model::tokenize_segments(*tokenizer_, all, tokenizer_->add_bos()).ids;
    generation_prompt_ = all.back().text;
    return;
  }
  ids_.insert(ids_.end(), reply_ids.begin(), reply_ids.end());
  model::ChatSegment end_marker = segments[1];
  end_marker.text = segments[1].text.substr(segments[1].content_ranges.back().second);
  end_marker.content_ranges.clear();
  for (const model::ChatSegment* seg : std::initializer_list<const model::ChatSegment*>{&end_marker, &segments[2], &segments[3]}) {
    const auto ids = tokenize(*seg);
    ids_.insert(ids_.end(), ids.begin(), ids.end());
  }
  generation_prompt_ = segments[3].text;
}

}  // namespace arbor::actors
