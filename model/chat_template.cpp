#include "model/chat_template.hpp"

namespace arbor::model {

namespace {

bool contains(std::string_view text, std::string_view what) {
  return text.find(what) != std::string_view::npos;
}

// The default system message a ChatML template inserts when messages[0] is not a system
// message, e.g. SmolLM2's "You are a helpful AI assistant named SmolLM, ...".
std::string chatml_default_system(std::string_view t) {
  const std::size_t cond = t.find("!= 'system'");
  if (cond == std::string_view::npos) return {};
  for (std::string_view open : {"<|im_start|>system\n", "<|im_start|>system\\n"}) {
    const std::size_t start = t.find(open, cond);
    if (start == std::string_view::npos) continue;
    const std::size_t body = start + open.size();
    const std::size_t end = t.find("<|im_end|>", body);
    if (end == std::string_view::npos) return {};
    std::string text(t.substr(body, end - body));
    if (contains(text, "{{") || contains(text, "'")) return {};  // not a plain literal
    return text;
  }
  return {};
}

}  // namespace

const char* to_string(ChatTemplateFamily family) {
  switch (family) {
    case ChatTemplateFamily::chatml: return "chatml";
    case ChatTemplateFamily::llama2: return "llama2";
    case ChatTemplateFamily::mistral: return "mistral";
    case ChatTemplateFamily::llama3: return "llama3";
    case ChatTemplateFamily::zephyr: return "zephyr";
    case ChatTemplateFamily::phi3: return "phi3";
  }
  return "unknown";
}

ChatTemplate ChatTemplate::of(ChatTemplateFamily family, std::string default_system) {
  ChatTemplate t;
  t.family_ = family;
  t.default_system_ = std::move(default_system);
  return t;
}

ChatTemplate ChatTemplate::detect(std::string_view t) {
  if (contains(t, "<|im_start|>")) return of(ChatTemplateFamily::chatml, chatml_default_system(t));
  if (contains(t, "<|start_header_id|>")) return of(ChatTemplateFamily::llama3);
  if (contains(t, "[INST]"))
    return of(contains(t, "<<SYS>>") ? ChatTemplateFamily::llama2 : ChatTemplateFamily::mistral);
  if (contains(t, "<|user|>") && contains(t, "<|end|>")) return of(ChatTemplateFamily::phi3);
  if (contains(t, "<|user|>")) return of(ChatTemplateFamily::zephyr);
  ChatTemplate fallback = of(ChatTemplateFamily::chatml);
  fallback.fallback_ = true;
  return fallback;
}

ChatTemplate ChatTemplate::from_gguf(const GgufFile& file) {
  auto text = file.get_string("tokenizer.chat_template");
  return detect(text ? std::string_view(*text) : std::string_view());
}

std::vector<ChatSegment> ChatTemplate::render_segments(std::span<const ChatMessage> messages,
                                                       bool add_generation_prompt) const {
  std::vector<ChatSegment> out;
  const bool has_system = !messages.empty() && messages[0].role == "system";
  std::size_t first = 0;
  std::string system;
  int system_index = -1;
  if (has_system) {
    system = messages[0].content;
    system_index = 0;
    first = 1;
  } else if (!default_system_.empty()) {
    system = default_system_;
  }
  const bool any_system = has_system || !default_system_.empty();
  // A segment is assembled from parts; odd parts (1, 3, ...) are message content.
  auto push = [&](ChatSegmentKind kind, const std::string& role,
                  std::initializer_list<std::string_view> parts, int index) {
    ChatSegment seg{kind, role, {}, index, {}};
    bool content = false;
    for (std::string_view p : parts) {
      if (content && !p.empty()) seg.content_ranges.emplace_back(seg.text.size(), seg.text.size() + p.size());
      seg.text += p;
      content = !content;
    }
    out.push_back(std::move(seg));
  };

  switch (family_) {
    case ChatTemplateFamily::chatml:
    case ChatTemplateFamily::llama3:
    case ChatTemplateFamily::zephyr:
    case ChatTemplateFamily::phi3: {
      auto block = [&](ChatSegmentKind kind, const std::string& role, const std::string& content,
                       int index) {
        switch (family_) {
          case ChatTemplateFamily::llama3:
            return push(kind, role, {"<|start_header_id|>" + role + "<|end_header_id|>\n\n", content,
                                     "<|eot_id|>"}, index);
          case ChatTemplateFamily::zephyr:
            return push(kind, role, {"<|" + role + "|>\n", content, "</s>\n"}, index);
          case ChatTemplateFamily::phi3:
            return push(kind, role, {"<|" + role + "|>\n", content, "<|end|>\n"}, index);
          default:
            return push(kind, role, {"<|im_start|>" + role + "\n", content, "<|im_end|>\n"}, index);
        }
      };
      if (any_system) block(ChatSegmentKind::system, "system", system, system_index);
      for (std::size_t i = first; i < messages.size(); ++i)
        block(ChatSegmentKind::message, messages[i].role, messages[i].content, int(i));
      if (add_generation_prompt) {
        std::string prompt;
        switch (family_) {
          case ChatTemplateFamily::llama3: prompt = "<|start_header_id|>assistant<|end_header_id|>\n\n"; break;
          case ChatTemplateFamily::zephyr:
          case ChatTemplateFamily::phi3: prompt = "<|assistant|>\n"; break;
          default: prompt = "<|im_start|>assistant\n"; break;
        }
        push(ChatSegmentKind::generation_prompt, "assistant", {prompt}, -1);
      }
      break;
    }
    case ChatTemplateFamily::llama2:
    case ChatTemplateFamily::mistral: {
      // "[INST] <<SYS>>\n{system}\n<</SYS>>\n\n{user} [/INST] {assistant} </s>" (llama2);
      // mistral puts "{system}\n\n" in front of the first user message instead. The
      // system part is its own segment; the first user segment continues the [INST].
      const bool llama2 = family_ == ChatTemplateFamily::llama2;
      bool open_inst = false;  // a system segment opened "[INST] " for the next user turn
      if (any_system) {
        if (llama2)
          push(ChatSegmentKind::system, "system", {"[INST] <<SYS>>\n", system, "\n<</SYS>>\n\n"},
               system_index);
        else
          push(ChatSegmentKind::system, "system", {"[INST] ", system, "\n\n"}, system_index);
        open_inst = true;
      }
      bool first_turn = true;
      for (std::size_t i = first; i < messages.size(); ++i) {
        const ChatMessage& m = messages[i];
        if (m.role == "assistant") {
          push(ChatSegmentKind::message, m.role, {" ", m.content, " </s>"}, int(i));
        } else {
          const char* open = open_inst ? "" : (first_turn ? "[INST] " : "<s>[INST] ");
          push(ChatSegmentKind::message, m.role, {open, m.content, " [/INST]"}, int(i));
        }
        open_inst = false;
        first_turn = false;
      }
      // The model answers right after "[/INST]": no generation-prompt text is needed.
      break;
    }
  }
  return out;
}

std::string ChatTemplate::render(std::span<const ChatMessage> messages, bool add_generation_prompt) const {
  std::string out;
  for (const auto& s : render_segments(messages, add_generation_prompt)) out += s.text;
  return out;
}

TokenizedChat tokenize_segments(const Tokenizer& tokenizer, std::span<const ChatSegment> segments,
                                bool add_bos) {
  TokenizedChat out;
  if (add_bos && tokenizer.bos_id() >= 0) out.ids.push_back(tokenizer.bos_id());
  for (const auto& s : segments) {
    const auto ids = tokenizer.encode(s.text, s.content_ranges);
    out.ids.insert(out.ids.end(), ids.begin(), ids.end());
    out.segment_ends.push_back(out.ids.size());
  }
  return out;
}

}  // namespace arbor::model
