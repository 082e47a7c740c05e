// Value checks for CLI11 options, with messages that say what was expected and what
// came ("--threads: expects an integer in 0..4096, got 'abc'"), and the look shared by
// every subcommand's help.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <arbor/config.hpp>

namespace arbor::cli {

// An integer in [min, max].
CLI::Validator integer_in(long long min, long long max);
inline CLI::Validator integer_in(SettingRange range) { return integer_in(range.min, range.max); }
// A finite number in [min, max].
CLI::Validator number_in(double min, double max);
// One of `names`.
CLI::Validator one_of(std::vector<std::string> names);
// A comma list of integers in [min, max], at least one ("1,2,4,8").
CLI::Validator integer_list_in(int min, int max);
// The integers of a list that integer_list_in accepted.
std::vector<int> parse_integer_list(const std::string& text);

// 127.0.0.1, ::1 or localhost: where `serve` without keys and `node` without TLS may listen.
inline bool is_loopback(const std::string& host) { return host == "127.0.0.1" || host == "::1" || host == "localhost"; }

// Settings every subcommand's app gets from main: help layout, and "the last
// occurrence of a repeated single-value option wins" (the old parser's rule).
void configure_app(CLI::App& app);

}  // namespace arbor::cli
