#include "workflows/resolve.hpp"

#include <cstdlib>
#include <sstream>

#include "common/json_text.hpp"
#include "workflows/documents.hpp"
#include "workflows/parser.hpp"
#include "workflows/suggest.hpp"

namespace arbor::workflows {

using nlohmann::json;

namespace {

std::string scalar_text(const json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

std::string trim(std::string s) {
  std::size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

// A command-line or request value as quoted in a message: at most ~60 bytes, cut at a
// character boundary (a value may be megabytes of text).
std::string quoted_value(const std::string& raw) {
  if (raw.size() <= 60) return raw;
  std::size_t cut = 57;
  while (cut > 0 && (static_cast<unsigned char>(raw[cut]) & 0xC0) == 0x80) --cut;
  return raw.substr(0, cut) + "...";
}

InputValue from_list(std::vector<std::string> items) {
  InputValue v;
  for (const auto& i : items) v.text += (v.text.empty() ? "" : ", ") + i;
  v.items = std::move(items);
  return v;
}

// Converts a command-line value to the input's type; "" + message on failure.
std::optional<InputValue> parse_override(const InputSpec& in, const std::string& raw,
                                         std::string& error) {
  switch (in.type) {
    case InputType::string: return InputValue{raw, std::nullopt};
    case InputType::number: {
      char* end = nullptr;
      std::strtod(raw.c_str(), &end);
      if (raw.empty() || *end != '\0') return error = "expected a number", std::nullopt;
      return InputValue{raw, std::nullopt};
    }
    case InputType::boolean:
      if (raw != "true" && raw != "false") return error = "expected true or false", std::nullopt;
      return InputValue{raw, std::nullopt};
    case InputType::list: {
      std::vector<std::string> items;
      if (!raw.empty() && raw[0] == '[') {
        auto arr = parse_json_text(raw);
        if (!arr) return error = "not a JSON array (" + arr.error().describe() + ")", std::nullopt;
        if (!arr->is_array()) return error = "expected a JSON array or a comma-separated list", std::nullopt;
        for (const auto& e : *arr) {
          if (!e.is_string() && !e.is_number()) return error = "list items must be strings or numbers", std::nullopt;
          items.push_back(scalar_text(e));
        }
      } else {
        std::stringstream ss(raw);
        for (std::string part; std::getline(ss, part, ',');)
          if (!trim(part).empty()) items.push_back(trim(part));
      }
      return from_list(std::move(items));
    }
  }
  return std::nullopt;
}

}  // namespace

std::map<std::string, InputValue> resolve_inputs(const WorkflowSpec& spec,
                                                 const std::map<std::string, std::string>& overrides,
                                                 const PositionIndex& index, Diagnostics& diag) {
  std::map<std::string, InputValue> out;
  std::vector<std::string> names;
  for (const auto& in : spec.inputs) names.push_back(in.name);
  for (const auto& [key, raw] : overrides)
    if (std::find(names.begin(), names.end(), key) == names.end())
      report(diag, index, "/inputs", "--input " + quoted_value(key) + "=" + quoted_value(raw) + ": the workflow declares no input '" +
                                       quoted_value(key) + "'" + did_you_mean(key, names) + "; declared inputs: " + join_names(names));
  for (const auto& in : spec.inputs) {
    if (auto it = overrides.find(in.name); it != overrides.end()) {
      std::string error;
      if (auto v = parse_override(in, it->second, error)) out[in.name] = std::move(*v);
      else report(diag, index, in.pointer, "--input " + in.name + "=" + quoted_value(it->second) + ": " + error);
    } else if (in.default_value) {
      const json& d = *in.default_value;
      if (d.is_array()) {
        std::vector<std::string> items;
        for (const auto& e : d) items.push_back(scalar_text(e));
        out[in.name] = from_list(std::move(items));
      } else {
        out[in.name] = InputValue{scalar_text(d), std::nullopt};
      }
    } else {
      report(diag, index, in.pointer, "input '" + in.name + "' has no default: pass --input " + in.name + "=VALUE");
    }
  }
  return out;
}

namespace {

// Substitutes {{inputs.*}} (the rest stays literal; lint warns about it). An input that
// is declared but has no value was reported by resolve_inputs: it is not "unknown".
std::string substitute_inputs(const std::string& text, const std::string& pointer, const WorkflowSpec& spec,
                              const std::map<std::string, InputValue>& inputs,
                              const PositionIndex& index, Diagnostics& diag) {
  auto t = Template::compile(text);
  if (!t) return text;  // not a template: literal text is fine in a prefix
  Context ctx;
  for (const auto& [name, v] : inputs) ctx.inputs[name] = v.text;
  std::vector<std::string> names;
  for (const auto& in : spec.inputs) names.push_back(in.name);
  for (const auto& v : t->variables())
    if (v.kind == VarKind::input && std::find(names.begin(), names.end(), v.name) == names.end()) {
      report_at(diag, pointer, index.in_string(pointer, v.offset),
                "unknown input '" + v.name + "' in " + v.spelling + did_you_mean(v.name, names) +
                    "; declared inputs: " + join_names(names));
    }
  return t->render_partial(ctx);
}

}  // namespace

std::map<std::string, PrefixSpec> resolve_prefixes(const WorkflowSpec& spec,
                                                   const std::map<std::string, InputValue>& inputs,
                                                   const DocumentAccess& documents,
                                                   const PositionIndex& index, Diagnostics& diag) {
  std::map<std::string, PrefixSpec> out;
  for (const auto& src : spec.prefixes) {
    PrefixSpec p;
    p.id = src.id;
    if (src.system) p.system = substitute_inputs(src.system->text, src.system->pointer, spec, inputs, index, diag);
    for (const auto& doc : src.documents) {
      std::string body;
      if (doc.text) {
        body = substitute_inputs(*doc.text, doc.pointer + "/text", spec, inputs, index, diag);
      } else {
        auto read = read_prefix_document(documents, *doc.file);
        if (!read) {
          report(diag, index, doc.pointer + "/file", read.error());
          continue;
        }
        body = std::move(*read);
      }
      std::string block = (doc.title.empty() ? "" : "# " + doc.title + "\n\n") + trim(body);
      p.documents += (p.documents.empty() ? "" : "\n\n") + block;
    }
    p.text = p.system + (p.system.empty() || p.documents.empty() ? "" : "\n\n") + p.documents;
    out[src.id] = std::move(p);
  }
  return out;
}

}  // namespace arbor::workflows
