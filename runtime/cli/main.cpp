// `arbor`: one CLI11 app with a subcommand per registered Command. Help goes to stdout
// with exit 0; a parse error (unknown flag, bad value, missing argument) goes to stderr
// naming the flag, with exit 2.
#include <cstdio>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "common/log.hpp"
#include "runtime/cli/command.hpp"
#include "runtime/cli/options.hpp"

namespace arbor::cli {

std::map<std::string, Command>& registry() {
  static std::map<std::string, Command> commands;
  return commands;
}

namespace {

// "arbor bench serve" for the app of `bench serve`.
std::string command_path(const CLI::App& app) {
  return app.get_parent() ? command_path(*app.get_parent()) + " " + app.get_name() : app.get_name();
}

// The deepest subcommand parsed so far.
CLI::App* parsed_command(CLI::App& app) {
  CLI::App* at = &app;
  while (!at->get_subcommands().empty()) at = at->get_subcommands().front();
  return at;
}

// CLI11 would report a mistyped command as "A subcommand is required" or as an
// unexpected argument; name it, with the commands there are.
bool check_command_names(CLI::App& app, const std::vector<std::string>& args) {
  CLI::App* at = &app;
  for (const std::string& arg : args) {
    const auto subs = at->get_subcommands([](CLI::App*) { return true; });
    if (arg.starts_with("-") || subs.empty()) return true;
    CLI::App* next = nullptr;
    std::string names;
    for (CLI::App* sub : subs) {
      if (sub->get_name() == arg) next = sub;
      names += (names.empty() ? "" : ", ") + sub->get_name();
    }
    if (!next) {
      const std::string path = command_path(*at);
      std::fprintf(stderr, "%s: unknown command '%s' (commands: %s; try %s --help)\n", path.c_str(), arg.c_str(),
                   names.c_str(), path.c_str());
      return false;
    }
    at = next;
  }
  return true;
}

int main(std::vector<std::string> args) {
  CLI::App app("arbor: multi-agent LLM workflows on one shared-prefix KV cache", "arbor");
  configure_app(app);
  app.require_subcommand(1);
  // Before any subcommand or after it (fallthrough, inherited by the subcommands).
  std::string log_level;
  app.add_option("--log-level", log_level,
                 "Log verbosity on stderr: trace, debug (adds one scheduler line per step), info, warn, error, "
                 "critical, off [default: $ARBOR_LOG_LEVEL, else warn]")
      ->check([](const std::string& v) {
        return log::parse_level(v) ? std::string()
                                   : "unknown log level '" + v + "' (use trace, debug, info, warn, error, critical or off)";
      });
  app.fallthrough();
  std::map<const CLI::App*, Runner> runners;
  for (const auto& [name, command] : registry()) {
    CLI::App* sub = app.add_subcommand(name, command.summary);
    runners[sub] = command.setup(*sub);
  }
  app.footer(  // after the subcommands, which would inherit it
      "`arbor COMMAND --help` (or `arbor help COMMAND`) shows a command's options and their defaults.\n"
      "Exit codes: 0 ok, 1 a run failed, 2 invalid input (unknown flags and bad values included).");

  if (args.empty()) return std::fputs(app.help().c_str(), stderr), kExitInvalid;
  if (args[0] == "help") {  // `arbor help [COMMAND ...]` = `arbor [COMMAND ...] --help`
    args.erase(args.begin());
    args.push_back("--help");
  }
  if (!check_command_names(app, args)) return kExitInvalid;

  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 takes them last first
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e, std::cout, std::cerr);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e, std::cout, std::cerr);
  } catch (const CLI::ParseError& e) {
    const std::string path = command_path(*parsed_command(app));
    std::fprintf(stderr, "%s: %s (see: %s --help)\n", path.c_str(), e.what(), path.c_str());
    return kExitInvalid;
  }
  if (!log_level.empty()) (void)log::set_level(log_level);  // checked above
  return runners.at(app.get_subcommands().front())();
}

}  // namespace
}  // namespace arbor::cli

int main(int argc, char** argv) { return arbor::cli::main(std::vector<std::string>(argv + 1, argv + argc)); }
