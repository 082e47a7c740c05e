// The `arbor` CLI: each subcommand lives in its own cmd_<name>.cpp and registers
// itself with ARBOR_CLI_COMMAND. A subcommand declares each of its options once, on its
// CLI11 app; CLI11 generates `--help` from those declarations and main.cpp reports an
// unknown flag or a bad value by name. Exit codes: 0 ok, 1 a run failed, 2 invalid input
// (unknown flags and bad values included).
#pragma once

#include <functional>
#include <map>
#include <string>

#include <CLI/CLI.hpp>

namespace arbor::cli {

constexpr int kExitOk = 0;
constexpr int kExitFailed = 1;
constexpr int kExitInvalid = 2;

// What runs once the command line parsed; it reads the values bound at declaration.
using Runner = std::function<int()>;
// Declares a subcommand's options (and sub-subcommands) on `app`; returns its runner.
using Setup = std::function<Runner(CLI::App& app)>;

struct Command {
  std::string name;
  std::string summary;  // one line for `arbor --help`
  Setup setup;
};

std::map<std::string, Command>& registry();

struct Registrar {
  explicit Registrar(Command command) { registry()[command.name] = std::move(command); }
};

}  // namespace arbor::cli

#define ARBOR_CLI_CONCAT2(a, b) a##b
#define ARBOR_CLI_CONCAT(a, b) ARBOR_CLI_CONCAT2(a, b)
#define ARBOR_CLI_COMMAND(name, summary, setup) \
  static ::arbor::cli::Registrar ARBOR_CLI_CONCAT(arbor_cli_registrar_, __LINE__)({name, summary, setup})
