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

// Splits "NAME.rest" / "NAME[rest" into the name and the path after it.
std::expected<std::pair<std::string, JsonPath>, std::string> name_and_path(const std::string& body,
                                                                          const std::string& rest) {
  std::size_t cut = rest.find_first_of(".[");
  std::string name = rest.substr(0, cut);
  if (cut == std::string::npos) return std::pair(name, JsonPath{});
  auto path = parse_json_path(std::string_view(rest).substr(cut));
  if (!path) return std::unexpected("malformed path in {{" + body + "}}: " + path.error());
  return std::pair(name, std::move(*path));
}

std::expected<TemplateVar, std::string> parse_var(const std::string& body) {
  TemplateVar v;
  if (body.empty()) return std::unexpected("empty template variable {{}}");
  if (body == "index") v.kind = VarKind::index;
  else if (body == "children") v.kind = VarKind::children;
  else if (body == "previous") v.kind = VarKind::previous;
  else if (body.rfind("inputs.", 0) == 0) v.kind = VarKind::input, v.name = body.substr(7);
  else if (body == "item" || body.rfind("item.", 0) == 0 || body.rfind("item[", 0) == 0) {
    v.kind = VarKind::item;
    auto split = name_and_path(body, body);
    if (!split) return std::unexpected(split.error());
    v.path = std::move(split->second);
  } else if (body.rfind("outputs.", 0) == 0) {
    v.kind = VarKind::output;
    auto split = name_and_path(body, body.substr(8));
    if (!split) return std::unexpected(split.error());
    v.name = std::move(split->first);
    v.path = std::move(split->second);
  } else {
    std::string head = body.substr(0, body.find_first_of(".["));
    return std::unexpected(
        "unknown template variable {{" + body + "}}" +
        did_you_mean(head, {"item", "index", "children", "previous", "inputs", "outputs"}) +
        "; expected one of {{inputs.NAME}}, {{item}}, {{item.PATH}}, {{index}}, {{outputs.AGENT_ID}}, "
        "{{outputs.AGENT_ID.PATH}}, {{children}}, {{previous}}");
  }
  if ((v.kind == VarKind::input || v.kind == VarKind::output) && !valid_name(v.name))
    return std::unexpected("malformed template variable {{" + body +
                           "}}: expected a name of letters, digits, '_' or '-' after the dot");
  return v;
}

// The value at `path` in a JSON document given as text, rendered (json_path.hpp's rule).
Result<std::string> render_path(const std::string& spelling, const JsonValue& doc, const JsonPath& path) {
  auto v = find_in(doc, path);
  if (!v) return fail(ErrorCode::invalid_argument, "template variable " + spelling + " has no value: " + v.error());
  return render_json_value(**v);
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
        if (v.path.empty()) {
          out += it->second;
          break;
        }
        auto doc = JsonValue::parse(it->second, nullptr, false);
        if (doc.is_discarded()) return missing("the output of agent '" + v.name + "' is not a JSON document");
        auto r = render_path(v.spelling, doc, v.path);
        if (!r) return r;
        out += *r;
        break;
      }
      case VarKind::item:
        if (!ctx.item) return missing("this agent is not part of a for_each fan-out");
        if (v.path.empty()) {
          out += *ctx.item;
          break;
        }
        if (!ctx.item_value) return missing("the fan-out element is text, not a JSON value");
        if (auto r = render_path(v.spelling, *ctx.item_value, v.path); r) out += *r;
        else return r;
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
