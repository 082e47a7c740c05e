#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/cli/command.hpp"

namespace arbor::cli {

std::map<std::string, Command>& registry() {
  static std::map<std::string, Command> commands;
  return commands;
}

std::optional<Args> Args::parse(const std::vector<std::string>& argv,
                                const std::vector<std::string>& flags, std::string* error) {
  Args args;
  auto is_flag = [&](const std::string& k) {
    for (const auto& f : flags) if (f == k) return true;
    return false;
  };
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (a.size() > 2 && a.rfind("--", 0) == 0) {
      std::string key = a.substr(2), value;
      if (auto eq = key.find('='); eq != std::string::npos) {
        value = key.substr(eq + 1);
        key = key.substr(0, eq);
      } else if (!is_flag(key)) {
        if (i + 1 >= argv.size()) {
          *error = "option --" + key + " needs a value";
          return std::nullopt;
        }
        value = argv[++i];
      }
      args.options_.emplace(key, value);
    } else {
      args.positional_.push_back(a);
    }
  }
  return args;
}

std::string Args::get(const std::string& key, const std::string& fallback) const {
  auto range = options_.equal_range(key);
  if (range.first == range.second) return fallback;
  return std::prev(range.second)->second;  // the last occurrence wins
}

std::vector<std::string> Args::get_all(const std::string& key) const {
  std::vector<std::string> out;
  for (auto [it, end] = options_.equal_range(key); it != end; ++it) out.push_back(it->second);
  return out;
}

long Args::get_int(const std::string& key, long fallback, std::string* error) const {
  if (!has(key)) return fallback;
  const std::string v = get(key);
  char* end = nullptr;
  long n = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0') *error = "option --" + key + " expects an integer, got '" + v + "'";
  return n;
}

double Args::get_double(const std::string& key, double fallback, std::string* error) const {
  if (!has(key)) return fallback;
  const std::string v = get(key);
  char* end = nullptr;
  double d = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0') *error = "option --" + key + " expects a number, got '" + v + "'";
  return d;
}

std::vector<int> Args::get_int_list(const std::string& key, const std::string& fallback, int min, int max,
                                     std::string* error) const {
  std::vector<int> out;
  std::stringstream in(get(key, fallback));
  for (std::string item; std::getline(in, item, ',');) {
    char* end = nullptr;
    const long n = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || n < min || n > max) {
      *error = "--" + key + " takes a comma list of integers in " + std::to_string(min) + ".." +
               std::to_string(max) + ", got '" + item + "'";
      return {};
    }
    out.push_back(int(n));
  }
  if (out.empty()) *error = "--" + key + " needs at least one value, e.g. --" + key + " " + fallback;
  return out;
}

std::vector<std::string> Args::unknown(const std::vector<std::string>& known) const {
  std::vector<std::string> out;
  for (const auto& [k, v] : options_) {
    bool ok = false;
    for (const auto& n : known) ok = ok || n == k;
    if (!ok) out.push_back("--" + k);
  }
  return out;
}

}  // namespace arbor::cli

static void print_help() {
  std::printf(
      "arbor: multi-agent LLM workflows on one shared-prefix KV cache\n\n"
      "usage: arbor <command> [options]   (arbor <command> --help for details)\n\ncommands:\n");
  for (const auto& [name, cmd] : arbor::cli::registry())
    std::printf("  %-12s %s\n", name.c_str(), cmd.summary.c_str());
}

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    print_help();
    return args.empty() ? arbor::cli::kExitInvalid : arbor::cli::kExitOk;
  }
  auto& commands = arbor::cli::registry();
  auto it = commands.find(args[0]);
  if (it == commands.end()) {
    std::fprintf(stderr, "arbor: unknown command '%s' (try: arbor --help)\n", args[0].c_str());
    return arbor::cli::kExitInvalid;
  }
  return it->second.run(std::vector<std::string>(args.begin() + 1, args.end()));
}
