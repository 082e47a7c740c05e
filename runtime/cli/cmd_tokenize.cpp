// `arbor tokenize --text TEXT [--model PATH] [--json] [--no-special]`: prints the token
// ids of TEXT and the piece each id stands for.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "model/gguf.hpp"
#include "model/tokenizer.hpp"
#include "model/unicode.hpp"
#include "runtime/cli/command.hpp"
#include "runtime/cli/runtime_options.hpp"

namespace arbor::cli {
namespace {

// JSON string body: escapes, and U+FFFD for bytes that are not valid UTF-8 (a piece
// may be half of a multi-byte character).
std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (const auto& u : model::unicode::decode_utf8(s)) {
    const std::uint32_t c = u.cp;
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else if (u.num_bytes == 1 && c == 0xFFFD) {
          out += "\\ufffd";
        } else {
          out.append(s, u.offset, u.num_bytes);
        }
    }
  }
  return out + "\"";
}

struct TokenizeOptions {
  std::string text;
  bool json = false, no_special = false;
  RuntimeOptions runtime;  // --model only
};

int run_tokenize(const TokenizeOptions& o) {
  RuntimeConfig config;
  o.runtime.apply(config);
  const std::string path = config.model_path;
  auto file = model::GgufFile::open(path);
  if (!file) {
    std::fprintf(stderr, "arbor tokenize: %s\n", file.error().describe().c_str());
    return kExitFailed;
  }
  auto tokenizer = model::Tokenizer::from_gguf(*file);
  if (!tokenizer) {
    std::fprintf(stderr, "arbor tokenize: %s\n", tokenizer.error().describe().c_str());
    return kExitFailed;
  }
  const auto ids = (*tokenizer)->encode(o.text, !o.no_special);
  if (o.json) {
    std::string out = "{\"model\": " + json_string(path) + ", \"ids\": [";
    for (std::size_t i = 0; i < ids.size(); ++i) out += (i ? ", " : "") + std::to_string(ids[i]);
    out += "], \"pieces\": [";
    for (std::size_t i = 0; i < ids.size(); ++i)
      out += (i ? ", " : "") + json_string((*tokenizer)->token_to_piece(ids[i]));
    out += "]}\n";
    std::fputs(out.c_str(), stdout);
    return kExitOk;
  }
  for (auto id : ids)
    std::printf("%6d  %s\n", id, json_string((*tokenizer)->token_to_piece(id)).c_str());
  std::printf("%zu tokens\n", ids.size());
  return kExitOk;
}

Runner setup(CLI::App& app) {
  auto o = std::make_shared<TokenizeOptions>();
  app.add_option("--text", o->text, "text to tokenize")->type_name("TEXT")->required();
  o->runtime.declare(app, kModelFlag);
  app.add_flag("--json", o->json, "print {\"model\", \"ids\", \"pieces\"} as JSON");
  app.add_flag("--no-special", o->no_special, "treat control-token text such as <|im_start|> as plain text");
  return [o] { return run_tokenize(*o); };
}

}  // namespace

ARBOR_CLI_COMMAND("tokenize", "print the token ids (and pieces) of a text", setup);

}  // namespace arbor::cli
