#include "runtime/cli/workflow_inputs.hpp"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/json_text.hpp"

namespace arbor::cli {

void declare_input_option(CLI::App& app, std::vector<std::string>& values) {
  app.add_option("--input", values,
                 "set a workflow input (repeatable); strings as typed, numbers and booleans parsed, lists as a "
                 "JSON array or a comma list")
      ->type_name("KEY=VALUE")
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
}

std::optional<std::set<std::string>> declared_inputs(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  // A malformed file is the loader's to report, with line:column.
  const auto doc = parse_json_text(text.str());
  if (!doc || !doc->is_object()) return std::nullopt;
  std::set<std::string> names;
  auto it = doc->find("inputs");
  if (it == doc->end()) return names;
  if (!it->is_object()) return std::nullopt;
  for (const auto& [name, spec] : it->items()) names.insert(name);
  return names;
}

Result<std::vector<workflows::InputOverrides>> route_inputs(
    const std::vector<std::string>& paths, const std::vector<std::optional<std::set<std::string>>>& declared,
    const workflows::InputOverrides& inputs) {
  if (declared.size() <= 1) return std::vector<workflows::InputOverrides>(declared.size(), inputs);
  std::vector<workflows::InputOverrides> out(declared.size());
  bool all_known = true;
  for (const auto& d : declared) all_known = all_known && d.has_value();
  for (const auto& [key, value] : inputs) {
    bool taken = false;
    for (std::size_t i = 0; i < declared.size(); ++i) {
      if (declared[i] && !declared[i]->contains(key)) continue;
      out[i][key] = value;
      taken = taken || declared[i].has_value();
    }
    if (taken || !all_known) continue;
    std::string what;
    for (std::size_t i = 0; i < declared.size(); ++i) {
      std::string names;
      for (const auto& n : *declared[i]) names += (names.empty() ? "" : ", ") + n;
      what += (i ? "; " : "") + std::filesystem::path(paths[i]).filename().string() + " declares " +
              (names.empty() ? "none" : names);
    }
    return fail(ErrorCode::invalid_argument, "--input " + key + "=" + value + ": none of the " +
                                                 std::to_string(declared.size()) + " workflows declares an input '" +
                                                 key + "' (" + what + ")");
  }
  return out;
}

}  // namespace arbor::cli
