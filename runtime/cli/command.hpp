// The `arbor` CLI: each subcommand lives in its own cmd_<name>.cpp and registers
// itself with ARBOR_CLI_COMMAND. Exit codes: 0 ok, 1 run failed, 2 invalid input.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace arbor::cli {

constexpr int kExitOk = 0;
constexpr int kExitFailed = 1;
constexpr int kExitInvalid = 2;

// Parsed command line: `--key value`, `--key=value`, bare `--flag`, positionals.
class Args {
 public:
  // `flags` names the options that take no value.
  static std::optional<Args> parse(const std::vector<std::string>& argv,
                                   const std::vector<std::string>& flags, std::string* error);

  bool has(const std::string& key) const { return options_.count(key) > 0; }
  std::string get(const std::string& key, const std::string& fallback = "") const;
  std::vector<std::string> get_all(const std::string& key) const;
  // Parses an integer or float option; on a malformed value sets *error.
  long get_int(const std::string& key, long fallback, std::string* error) const;
  double get_double(const std::string& key, double fallback, std::string* error) const;
  // A comma list of integers in [min, max], e.g. --agents 1,2,4,8; sets *error if any
  // item is malformed or out of range, or the list is empty.
  std::vector<int> get_int_list(const std::string& key, const std::string& fallback, int min, int max,
                                std::string* error) const;
  const std::vector<std::string>& positional() const { return positional_; }
  // Options given but not in `known` (for a clear "unknown option" error).
  std::vector<std::string> unknown(const std::vector<std::string>& known) const;

 private:
  std::multimap<std::string, std::string> options_;
  std::vector<std::string> positional_;
};

struct Command {
  std::string name;
  std::string summary;  // one line for `arbor --help`
  std::function<int(const std::vector<std::string>& args)> run;
};

std::map<std::string, Command>& registry();

struct Registrar {
  explicit Registrar(Command command) { registry()[command.name] = std::move(command); }
};

}  // namespace arbor::cli

#define ARBOR_CLI_CONCAT2(a, b) a##b
#define ARBOR_CLI_CONCAT(a, b) ARBOR_CLI_CONCAT2(a, b)
#define ARBOR_CLI_COMMAND(name, summary, fn) \
  static ::arbor::cli::Registrar ARBOR_CLI_CONCAT(arbor_cli_registrar_, __LINE__)({name, summary, fn})
