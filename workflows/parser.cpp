#include "workflows/parser.hpp"

#include <cmath>
#include <limits>

#include "common/sampling_settings.hpp"
#include "workflows/json_path.hpp"
#include "workflows/plan.hpp"
#include "workflows/suggest.hpp"

namespace arbor::workflows {

using nlohmann::json;

void report_at(Diagnostics& diag, const std::string& pointer, TextPosition at,
               std::string message, Severity severity) {
  diag.add({severity, pointer, at.line, at.column, std::move(message)});
}

void report(Diagnostics& diag, const PositionIndex& index, const std::string& pointer,
            std::string message, Severity severity) {
  report_at(diag, pointer, index.value(pointer), std::move(message), severity);
}

namespace {

bool valid_id(const std::string& s, bool allow_dash) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || (allow_dash && c == '-')))
      return false;
  return true;
}

// Walks one JSON object: typed getters that report problems at the right place.
class Reader {
 public:
  Reader(const PositionIndex& index, Diagnostics& diag) : index_(index), diag_(diag) {}

  void error(const std::string& pointer, std::string message) {
    report(diag_, index_, pointer, std::move(message));
  }

  bool expect(const json& v, json::value_t t, const char* what, const std::string& pointer) {
    bool ok = v.type() == t || (t == json::value_t::number_float && v.is_number()) ||
              (t == json::value_t::number_integer && v.is_number_integer());
    if (!ok) error(pointer, std::string("expected ") + what + ", got " + json_kind(v.type(), Numbers::split));
    return ok;
  }

  // Unknown members (with a suggestion) and missing required ones.
  bool object(const json& v, const std::string& pointer, const std::vector<std::string>& known,
              const std::vector<std::string>& required) {
    if (!expect(v, json::value_t::object, "an object", pointer)) return false;
    for (const auto& [key, value] : v.items()) {
      if (std::find(known.begin(), known.end(), key) != known.end()) continue;
      std::string child = pointer_append(pointer, key);
      report_at(diag_, child, index_.key(child),
                "unknown field '" + key + "'" + did_you_mean(key, known) +
                    "; allowed here: " + join_names(known));
    }
    for (const auto& r : required)
      if (!v.contains(r)) error(pointer, "missing required field '" + r + "'");
    return true;
  }

  std::optional<TextSpec> text(const json& obj, const std::string& pointer, const char* key,
                               bool non_empty = true) {
    if (!obj.contains(key)) return std::nullopt;
    std::string p = pointer_append(pointer, key);
    const json& v = obj[key];
    if (!expect(v, json::value_t::string, "a string", p)) return std::nullopt;
    if (non_empty && v.get_ref<const std::string&>().empty()) {
      error(p, std::string("'") + key + "' must not be empty");
      return std::nullopt;
    }
    return TextSpec{v.get<std::string>(), p};
  }

  std::optional<std::int64_t> integer(const json& obj, const std::string& pointer,
                                      const char* key, std::int64_t lo, std::int64_t hi,
                                      const char* range) {
    if (!obj.contains(key)) return std::nullopt;
    std::string p = pointer_append(pointer, key);
    const json& v = obj[key];
    if (!expect(v, json::value_t::number_integer, "an integer", p)) return std::nullopt;
    if (v.is_number_unsigned() && v.get<std::uint64_t>() > std::uint64_t(hi)) {
      error(p, std::string(key) + " must be " + range + ", got " + v.dump());
      return std::nullopt;
    }
    std::int64_t n = v.get<std::int64_t>();
    if (n < lo || n > hi) {
      error(p, std::string(key) + " must be " + range + ", got " + v.dump());
      return std::nullopt;
    }
    return n;
  }

  std::optional<double> number(const json& obj, const std::string& pointer, const char* key,
                               double lo, bool lo_open, double hi, const char* range) {
    if (!obj.contains(key)) return std::nullopt;
    std::string p = pointer_append(pointer, key);
    const json& v = obj[key];
    if (!expect(v, json::value_t::number_float, "a number", p)) return std::nullopt;
    double x = v.get<double>();
    if (!(lo_open ? x > lo : x >= lo) || x > hi) {
      error(p, std::string(key) + " must be " + range + ", got " + v.dump());
      return std::nullopt;
    }
    return x;
  }

  std::vector<TextSpec> strings(const json& obj, const std::string& pointer, const char* key) {
    std::vector<TextSpec> out;
    if (!obj.contains(key)) return out;
    std::string p = pointer_append(pointer, key);
    if (!expect(obj[key], json::value_t::array, "an array of strings", p)) return out;
    for (std::size_t i = 0; i < obj[key].size(); ++i) {
      std::string ip = pointer_append(p, i);
      const json& e = obj[key][i];
      if (!expect(e, json::value_t::string, "a string", ip)) continue;
      if (e.get_ref<const std::string&>().empty()) error(ip, "must not be empty");
      else out.push_back({e.get<std::string>(), ip});
    }
    return out;
  }

  const PositionIndex& index_;
  Diagnostics& diag_;
};

const std::vector<std::string> kGenerationFields = {"max_tokens", "temperature", "top_p",
                                                    "top_k",      "seed",        "stop"};

GenerationSpec parse_generation(Reader& r, const json& obj, const std::string& p) {
  GenerationSpec g;
  if (!r.object(obj, p, kGenerationFields, {})) return g;
  // Types here; ranges by the one check_sampling (common/sampling_settings.hpp), each
  // out-of-range field reported at its own pointer.
  constexpr std::int64_t int_lo = std::numeric_limits<int>::min(), int_hi = std::numeric_limits<int>::max();
  constexpr double any_lo = std::numeric_limits<double>::lowest(), any_hi = std::numeric_limits<double>::max();
  if (auto v = r.integer(obj, p, "max_tokens", int_lo, int_hi, "an integer")) g.max_tokens = int(*v);
  g.temperature = r.number(obj, p, "temperature", any_lo, false, any_hi, "a number");
  g.top_p = r.number(obj, p, "top_p", any_lo, false, any_hi, "a number");
  if (auto v = r.integer(obj, p, "top_k", int_lo, int_hi, "an integer")) g.top_k = int(*v);
  SamplingSettings given;
  given.max_tokens = g.max_tokens.value_or(given.max_tokens);
  given.temperature = g.temperature.value_or(given.temperature);
  given.top_p = g.top_p.value_or(given.top_p);
  given.top_k = g.top_k.value_or(given.top_k);
  for (const auto& e : sampling_errors(given)) {
    r.error(pointer_append(p, std::string(e.field)), e.message);
    if (e.field == "max_tokens") g.max_tokens.reset();
    else if (e.field == "temperature") g.temperature.reset();
    else if (e.field == "top_p") g.top_p.reset();
    else if (e.field == "top_k") g.top_k.reset();
  }
  if (auto v = r.integer(obj, p, "seed", 0, std::numeric_limits<std::int64_t>::max(),
                         "an integer >= 0"))
    g.seed = std::uint64_t(*v);
  if (obj.contains("stop")) {
    std::vector<std::string> stop;
    for (auto& s : r.strings(obj, p, "stop")) stop.push_back(s.text);
    g.stop = std::move(stop);
  }
  return g;
}

std::optional<int> parse_retries(Reader& r, const json& obj, const std::string& p) {
  auto v = r.integer(obj, p, "max_retries", 0, 10, "an integer in 0..10");
  return v ? std::optional<int>(int(*v)) : std::nullopt;
}

std::optional<std::int64_t> parse_timeout(Reader& r, const json& obj, const std::string& p) {
  return r.integer(obj, p, "timeout_ms", 1, 86'400'000, "an integer > 0 (at most 86400000)");
}

void parse_inputs(Reader& r, const json& obj, WorkflowSpec& spec) {
  const std::string p = "/inputs";
  if (!r.expect(obj, json::value_t::object, "an object of inputs", p)) return;
  for (const auto& [name, decl] : obj.items()) {
    std::string ip = pointer_append(p, name);
    if (!valid_id(name, false)) {
      report_at(r.diag_, ip, r.index_.key(ip),
                "input name '" + name + "' must be letters, digits and '_' (not starting with a digit)");
      continue;
    }
    if (!r.object(decl, ip, {"type", "default", "description"}, {})) continue;
    r.text(decl, ip, "description", false);
    InputSpec in{name, ip, InputType::string, std::nullopt};
    std::optional<InputType> declared;
    if (auto t = r.text(decl, ip, "type")) {
      if (t->text == "string") declared = InputType::string;
      else if (t->text == "number") declared = InputType::number;
      else if (t->text == "boolean") declared = InputType::boolean;
      else if (t->text == "list") declared = InputType::list;
      else r.error(t->pointer, "unknown input type '" + t->text + "'; expected string, number, boolean or list");
    }
    if (decl.contains("default")) {
      const json& d = decl["default"];
      std::string dp = pointer_append(ip, "default");
      InputType inferred = d.is_string() ? InputType::string : d.is_number() ? InputType::number
                           : d.is_boolean() ? InputType::boolean : InputType::list;
      if (!(d.is_string() || d.is_number() || d.is_boolean() || d.is_array())) {
        r.error(dp, std::string("expected a string, number, boolean or list default, got ") +
                        json_kind(d.type(), Numbers::split));
        continue;
      }
      if (d.is_array())
        for (std::size_t i = 0; i < d.size(); ++i)
          if (!(d[i].is_string() || d[i].is_number()))
            r.error(pointer_append(dp, i), std::string("list items must be strings or numbers, got ") +
                                               json_kind(d[i].type(), Numbers::split));
      if (declared && *declared != inferred) {
        r.error(dp, "default does not match the declared type '" + decl["type"].get<std::string>() + "'");
        continue;
      }
      in.type = inferred;
      in.default_value = d;
    } else if (declared) {
      in.type = *declared;
    } else {
      r.error(ip, "input '" + name + "' needs a 'default' or a 'type'");
      continue;
    }
    spec.inputs.push_back(std::move(in));
  }
}

void parse_defaults(Reader& r, const json& obj, WorkflowSpec& spec) {
  const std::string p = "/defaults";
  if (!r.object(obj, p, {"generation", "max_retries", "timeout_ms"}, {})) return;
  if (obj.contains("generation"))
    spec.default_generation = parse_generation(r, obj["generation"], p + "/generation");
  spec.default_max_retries = parse_retries(r, obj, p);
  spec.default_timeout_ms = parse_timeout(r, obj, p);
}

void parse_prefixes(Reader& r, const json& obj, WorkflowSpec& spec) {
  const std::string p = "/prefixes";
  if (!r.expect(obj, json::value_t::object, "an object of named prefixes", p)) return;
  for (const auto& [id, decl] : obj.items()) {
    std::string pp = pointer_append(p, id);
    if (!valid_id(id, true)) {
      report_at(r.diag_, pp, r.index_.key(pp), "prefix id '" + id + "' must be letters, digits, '_' or '-'");
      continue;
    }
    if (!r.object(decl, pp, {"system", "documents", "description"}, {})) continue;
    r.text(decl, pp, "description", false);
    PrefixSrc prefix{id, pp, r.text(decl, pp, "system"), {}};
    if (decl.contains("documents")) {
      std::string dp = pp + "/documents";
      if (r.expect(decl["documents"], json::value_t::array, "an array of documents", dp)) {
        for (std::size_t i = 0; i < decl["documents"].size(); ++i) {
          std::string ep = pointer_append(dp, i);
          const json& d = decl["documents"][i];
          if (!r.object(d, ep, {"text", "file", "title"}, {})) continue;
          DocumentSpec doc{ep, std::nullopt, std::nullopt, ""};
          if (auto t = r.text(d, ep, "text")) doc.text = t->text;
          if (auto f = r.text(d, ep, "file")) doc.file = f->text;
          if (auto t = r.text(d, ep, "title")) doc.title = t->text;
          if (doc.text.has_value() == doc.file.has_value()) {
            r.error(ep, "a document needs exactly one of 'text' (inline) or 'file' (a path relative to the workflow file)");
            continue;
          }
          prefix.documents.push_back(std::move(doc));
        }
      }
    }
    if (!prefix.system && prefix.documents.empty())
      r.error(pp, "prefix '" + id + "' is empty: give it a 'system' text and/or 'documents'");
    spec.prefixes.push_back(std::move(prefix));
  }
}

std::optional<ForEachSpec> parse_for_each(Reader& r, const json& v, const std::string& p) {
  ForEachSpec fe{p, {}, std::nullopt, std::nullopt, std::nullopt};
  if (v.is_object()) {
    if (v.contains("output")) {
      if (!r.object(v, p, {"output", "max_children"}, {"output"})) return std::nullopt;
      fe.output = r.text(v, p, "output");
      if (auto m = r.integer(v, p, "max_children", 1, std::int64_t(kMaxDynamicChildren),
                             "an integer in 1..1024"))
        fe.max_children = int(*m);
      if (!fe.output) return std::nullopt;
      return fe;
    }
    if (!r.object(v, p, {"input"}, {"input"})) return std::nullopt;
    auto in = r.text(v, p, "input");
    if (!in) return std::nullopt;
    fe.input = in->text;
    return fe;
  }
  if (!v.is_array()) {
    r.error(p, std::string("expected a list of items, {\"input\": \"NAME\"} or {\"output\": \"AGENT.PATH\"}, got ") +
                   json_kind(v.type(), Numbers::split));
    return std::nullopt;
  }
  if (v.empty()) {
    r.error(p, "empty fan-out list: for_each needs at least one item");
    return std::nullopt;
  }
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (v[i].is_string()) fe.items.push_back(v[i].get<std::string>());
    else if (v[i].is_number()) fe.items.push_back(v[i].dump());
    else
      r.error(pointer_append(p, i),
              std::string("for_each items must be strings or numbers, got ") + json_kind(v[i].type(), Numbers::split));
  }
  return fe;
}

// A single id written as a string is one mistake, reported once: it is kept as a
// one-element list so later checks ({{outputs.ID}} needs depends_on) do not report
// the same mistake again in other words.
std::vector<TextSpec> parse_depends_on(Reader& r, const json& obj, const std::string& p) {
  if (!obj.contains("depends_on") || !obj["depends_on"].is_string()) return r.strings(obj, p, "depends_on");
  const std::string id = obj["depends_on"].get<std::string>();
  const std::string dp = p + "/depends_on";
  r.error(dp, "expected an array of agent ids, got a string; write \"depends_on\": [" + json(id).dump() + "]");
  if (id.empty()) return {};
  return {TextSpec{id, dp}};
}

// "tools", "max_tool_calls", "tool_timeout_ms", "tool_choice" (the names are checked
// against the runtime's tools when a run starts: workflows/tools.hpp).
void parse_tools(Reader& r, const json& v, const std::string& p, AgentSpec& a) {
  a.tools = r.strings(v, p, "tools");
  for (std::size_t i = 0; i < a.tools.size(); ++i)
    for (std::size_t j = 0; j < i; ++j)
      if (a.tools[j].text == a.tools[i].text) r.error(a.tools[i].pointer, "tool '" + a.tools[i].text + "' is listed twice");
  if (auto n = r.integer(v, p, "max_tool_calls", 1, 64, "an integer in 1..64")) a.max_tool_calls = int(*n);
  a.tool_timeout_ms = r.integer(v, p, "tool_timeout_ms", 1, 3'600'000, "an integer in 1..3600000");
  if (auto c = r.text(v, p, "tool_choice")) {
    if (c->text != "auto" && c->text != "required")
      r.error(c->pointer, "tool_choice must be \"auto\" or \"required\", got \"" + c->text + "\"");
    a.tool_choice = *c;
  }
  for (const char* key : {"max_tool_calls", "tool_timeout_ms", "tool_choice"})
    if (!v.contains("tools") && v.contains(key)) r.error(p + "/" + key, std::string(key) + " needs a 'tools' list");
}

const std::vector<std::string> kAgentFields = {
    "id",    "description", "prefix",      "layout",     "task",       "turns",      "fan_in",
    "agents", "for_each",   "depends_on",  "generation", "max_retries", "timeout_ms", "output_schema",
    "tools", "max_tool_calls", "tool_timeout_ms", "tool_choice"};

std::vector<AgentSpec> parse_agents(Reader& r, const json& v, const std::string& p);

std::optional<AgentSpec> parse_agent(Reader& r, const json& v, const std::string& p) {
  if (!r.object(v, p, kAgentFields, {"id"})) return std::nullopt;
  AgentSpec a;
  a.pointer = p;
  if (auto id = r.text(v, p, "id")) {
    if (!valid_id(id->text, true)) r.error(id->pointer, "agent id '" + id->text + "' must be letters, digits, '_' or '-', starting with a letter or '_'");
    a.id = id->text;
  }
  r.text(v, p, "description", false);
  a.prefix = r.text(v, p, "prefix");
  if (auto l = r.text(v, p, "layout")) {
    a.layout_pointer = l->pointer;
    if (l->text != "prefix_first" && l->text != "task_first")
      r.error(l->pointer, "layout must be \"prefix_first\" or \"task_first\", got \"" + l->text + "\"");
    else a.layout = l->text;
  }
  a.task = r.text(v, p, "task");
  a.turns = r.strings(v, p, "turns");
  a.fan_in = r.text(v, p, "fan_in");
  if (v.contains("for_each")) a.for_each = parse_for_each(r, v["for_each"], p + "/for_each");
  a.depends_on = parse_depends_on(r, v, p);
  if (v.contains("generation")) a.generation = parse_generation(r, v["generation"], p + "/generation");
  a.max_retries = parse_retries(r, v, p);
  a.timeout_ms = parse_timeout(r, v, p);
  if (v.contains("output_schema")) {
    const std::string sp = p + "/output_schema";
    if (r.expect(v["output_schema"], json::value_t::object, "a JSON Schema object", sp)) a.output_schema_pointer = sp;
  }
  parse_tools(r, v, p, a);
  if (v.contains("agents")) a.children = parse_agents(r, v["agents"], p + "/agents");
  bool has_children = v.contains("agents") && v["agents"].is_array() && !v["agents"].empty();
  if (!has_children && v.contains("fan_in"))
    r.error(p + "/fan_in", "fan_in needs sub-agents: add an 'agents' list or move this text to 'task'");
  if (!has_children && !v.contains("task"))
    r.error(p, "missing required field 'task' (an agent without sub-agents needs a task)");
  if (has_children && !v.contains("task") && !v.contains("fan_in"))
    r.error(p, "missing required field 'task' or 'fan_in' (an agent with sub-agents needs at least one)");
  return a;
}

std::vector<AgentSpec> parse_agents(Reader& r, const json& v, const std::string& p) {
  std::vector<AgentSpec> out;
  if (!r.expect(v, json::value_t::array, "an array of agents", p)) return out;
  if (v.empty()) r.error(p, "the agent list is empty: add at least one agent");
  for (std::size_t i = 0; i < v.size(); ++i)
    if (auto a = parse_agent(r, v[i], pointer_append(p, i))) out.push_back(std::move(*a));
  return out;
}

}  // namespace

WorkflowSpec parse_spec(const json& doc, const PositionIndex& index, Diagnostics& diag) {
  Reader r(index, diag);
  WorkflowSpec spec;
  for (const auto& dup : index.duplicate_keys())
    report_at(diag, dup, index.key(dup),
              "duplicate key: this member repeats an earlier one in the same object (JSON keeps only the last); remove one");
  if (!r.object(doc, "", {"$schema", "name", "description", "tenant", "inputs", "defaults", "prefixes", "agents"},
                {"name", "agents"}))
    return spec;
  if (auto n = r.text(doc, "", "name")) spec.name = n->text;
  if (auto t = r.text(doc, "", "tenant")) {
    if (!valid_id(t->text, true)) r.error(t->pointer, "tenant '" + t->text + "' must be letters, digits, '_' or '-'");
    spec.tenant = t->text;
  }
  if (auto d = r.text(doc, "", "description", false)) spec.description = d->text;
  if (doc.contains("$schema")) r.text(doc, "", "$schema");
  if (doc.contains("inputs")) parse_inputs(r, doc["inputs"], spec);
  if (doc.contains("defaults")) parse_defaults(r, doc["defaults"], spec);
  if (doc.contains("prefixes")) parse_prefixes(r, doc["prefixes"], spec);
  if (doc.contains("agents")) spec.agents = parse_agents(r, doc["agents"], "/agents");
  return spec;
}

}  // namespace arbor::workflows
