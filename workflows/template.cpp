#include "workflows/template.hpp"

#include <cctype>

#include "workflows/suggest.hpp"

namespace arbor::workflows {

namespace {

std::string trim(const std::string& s) {
  std::size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

bool valid_name(const std::string& s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-')) return false;
  return true;
}

std::expected<TemplateVar, std::string> parse_var(const std::string& body) {
  TemplateVar v;
  if (body.empty()) return std::unexpected("empty template variable {{}}");
  if (body == "item") v.kind = VarKind::item;
  else if (body == "index") v.kind = VarKind::index;
  else if (body == "children") v.kind = VarKind::children;
  else if (body == "previous") v.kind = VarKind::previous;
  else if (body.rfind("inputs.", 0) == 0) v.kind = VarKind::input, v.name = body.substr(7);
  else if (body.rfind("outputs.", 0) == 0) v.kind = VarKind::output, v.name = body.substr(8);
  else {
    std::string head = body.substr(0, body.find('.'));
    return std::unexpected(
        "unknown template variable {{" + body + "}}" +
        did_you_mean(head, {"item", "index", "children", "previous", "inputs", "outputs"}) +
        "; expected one of {{inputs.NAME}}, {{item}}, {{index}}, {{outputs.AGENT_ID}}, "
        "{{children}}, {{previous}}");
  }
  if ((v.kind == VarKind::input || v.kind == VarKind::output) && !valid_name(v.name))
    return std::unexpected("malformed template variable {{" + body +
                           "}}: expected a name of letters, digits, '_' or '-' after the dot");
  return v;
}

}  // namespace

std::string join_outputs(const std::vector<ChildOutput>& outputs) {
  std::string out;
  for (const auto& o : outputs) out += (out.empty() ? "" : "\n\n") + ("## " + o.id + "\n") + o.text;
  return out;
}

std::expected<Template, TemplateError> Template::compile(std::string source) {
  Template t;
  std::size_t pos = 0;
  while (pos < source.size()) {
    std::size_t open = source.find("{{", pos);
    if (open == std::string::npos) open = source.size();
    if (open > pos) t.pieces_.push_back({source.substr(pos, open - pos), -1});
    if (open == source.size()) break;
    std::size_t close = source.find("}}", open + 2);
    if (close == std::string::npos)
      return std::unexpected(TemplateError{open, "'{{' is never closed by '}}'"});
    auto var = parse_var(trim(source.substr(open + 2, close - open - 2)));
    if (!var) return std::unexpected(TemplateError{open, var.error()});
    var->offset = open;
    var->spelling = source.substr(open, close + 2 - open);
    t.pieces_.push_back({"", int(t.variables_.size())});
    t.variables_.push_back(std::move(*var));
    pos = close + 2;
  }
  t.source_ = std::move(source);
  return t;
}

bool Template::uses(VarKind kind) const {
  for (const auto& v : variables_)
    if (v.kind == kind) return true;
  return false;
}

Result<std::string> Template::render(const Context& ctx) const {
  std::string out;
  for (const auto& piece : pieces_) {
    if (piece.var < 0) {
      out += piece.text;
      continue;
    }
    const TemplateVar& v = variables_[std::size_t(piece.var)];
    auto missing = [&](const std::string& why) {
      return fail(ErrorCode::invalid_argument,
                  "template variable " + v.spelling + " has no value: " + why);
    };
    switch (v.kind) {
      case VarKind::input: {
        auto it = ctx.inputs.find(v.name);
        if (it == ctx.inputs.end()) return missing("no input '" + v.name + "' in the context");
        out += it->second;
        break;
      }
      case VarKind::output: {
        auto it = ctx.outputs.find(v.name);
        if (it == ctx.outputs.end())
          return missing("agent '" + v.name + "' has not produced an output yet");
        out += it->second;
        break;
      }
      case VarKind::item:
        if (!ctx.item) return missing("this agent is not part of a for_each fan-out");
        out += *ctx.item;
        break;
      case VarKind::index:
        if (!ctx.index) return missing("this agent is not part of a for_each fan-out");
        out += std::to_string(*ctx.index);
        break;
      case VarKind::children:
        if (!ctx.children) return missing("the sub-agents' outputs are not available yet");
        out += join_outputs(*ctx.children);
        break;
      case VarKind::previous:
        if (!ctx.previous) return missing("this agent has produced no output yet");
        out += *ctx.previous;
        break;
    }
  }
  return out;
}

std::string Template::render_partial(const Context& ctx) const {
  std::string out;
  for (const auto& piece : pieces_) {
    if (piece.var < 0) {
      out += piece.text;
      continue;
    }
    Template one;
    one.pieces_.push_back(piece);
    one.variables_ = variables_;
    auto r = one.render(ctx);
    out += r ? *r : variables_[std::size_t(piece.var)].spelling;
  }
  return out;
}

}  // namespace arbor::workflows
