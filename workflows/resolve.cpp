#include "workflows/resolve.hpp"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "workflows/parser.hpp"
#include "workflows/suggest.hpp"

namespace arbor::workflows {

using nlohmann::json;

namespace {

constexpr std::size_t kMaxDocumentBytes = 4u << 20;

std::string scalar_text(const json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

std::string trim(std::string s) {
  std::size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
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
        json arr = json::parse(raw, nullptr, false);
        if (arr.is_discarded() || !arr.is_array())
          return error = "expected a JSON array or a comma-separated list", std::nullopt;
        for (const auto& e : arr) {
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

std::string read_document(const std::filesystem::path& path, std::string& error) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return error = "does not exist or is not a file", "";
  if (std::filesystem::file_size(path, ec) > kMaxDocumentBytes) return error = "is larger than 4 MiB", "";
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  if (!f) return error = "cannot be read", "";
  return ss.str();
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
      report(diag, index, "/inputs", "--input " + key + "=" + raw + ": the workflow declares no input '" + key + "'" +
                                       did_you_mean(key, names) + "; declared inputs: " + join_names(names));
  for (const auto& in : spec.inputs) {
    if (auto it = overrides.find(in.name); it != overrides.end()) {
      std::string error;
      if (auto v = parse_override(in, it->second, error)) out[in.name] = std::move(*v);
      else report(diag, index, in.pointer, "--input " + in.name + "=" + it->second + ": " + error);
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

// Substitutes {{inputs.*}} (the rest stays literal; lint warns about it).
std::string substitute_inputs(const std::string& text, const std::string& pointer,
                              const std::map<std::string, InputValue>& inputs,
                              const PositionIndex& index, Diagnostics& diag) {
  auto t = Template::compile(text);
  if (!t) return text;  // not a template: literal text is fine in a prefix
  Context ctx;
  for (const auto& [name, v] : inputs) ctx.inputs[name] = v.text;
  for (const auto& v : t->variables())
    if (v.kind == VarKind::input && !ctx.inputs.count(v.name)) {
      std::vector<std::string> names;
      for (const auto& [n, _] : inputs) names.push_back(n);
      report_at(diag, pointer, index.in_string(pointer, v.offset),
                "unknown input '" + v.name + "' in " + v.spelling + did_you_mean(v.name, names) +
                    "; declared inputs: " + join_names(names));
    }
  return t->render_partial(ctx);
}

}  // namespace

std::map<std::string, PrefixSpec> resolve_prefixes(const WorkflowSpec& spec,
                                                   const std::map<std::string, InputValue>& inputs,
                                                   const std::filesystem::path& base_dir,
                                                   const PositionIndex& index, Diagnostics& diag) {
  std::map<std::string, PrefixSpec> out;
  for (const auto& src : spec.prefixes) {
    PrefixSpec p;
    p.id = src.id;
    if (src.system) p.system = substitute_inputs(src.system->text, src.system->pointer, inputs, index, diag);
    for (const auto& doc : src.documents) {
      std::string body;
      if (doc.text) {
        body = substitute_inputs(*doc.text, doc.pointer + "/text", inputs, index, diag);
      } else {
        std::filesystem::path path = base_dir / *doc.file;
        std::string error;
        body = read_document(path, error);
        if (!error.empty()) {
          report(diag, index, doc.pointer + "/file",
                 "prefix document '" + *doc.file + "' (resolved to " + path.lexically_normal().string() +
                     ") " + error + "; paths are relative to the workflow file's folder");
          continue;
        }
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
