// The process's one logger ("arbor", to stderr) and its level. Front ends print their
// results on stdout; logs are for operators: warnings by default, the scheduler's
// per-step trace at debug (actors/batch_engine.cpp), more at trace.
//
// Level: the first of `arbor ... --log-level L`, the ARBOR_LOG_LEVEL environment
// variable, and "warn". Names: trace, debug, info, warn, error, critical, off.
// Thread-safe (spdlog's multi-threaded sink); the level is a relaxed atomic.
#pragma once

#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include <spdlog/sinks/stdout_sinks.h>  // also the stderr sinks
#include <spdlog/spdlog.h>

#include "common/result.hpp"

namespace arbor::log {

// The level named `name` ("warning" is accepted for warn), or nothing.
inline std::optional<spdlog::level::level_enum> parse_level(std::string_view name) {
  using spdlog::level::level_enum;
  static constexpr std::pair<std::string_view, level_enum> kNames[] = {
      {"trace", level_enum::trace}, {"debug", level_enum::debug},       {"info", level_enum::info},
      {"warn", level_enum::warn},   {"warning", level_enum::warn},      {"error", level_enum::err},
      {"critical", level_enum::critical}, {"off", level_enum::off}};
  for (const auto& [text, level] : kNames)
    if (name == text) return level;
  return std::nullopt;
}

inline spdlog::logger& logger() {
  static const std::shared_ptr<spdlog::logger> instance = [] {
    auto l = std::make_shared<spdlog::logger>("arbor", std::make_shared<spdlog::sinks::stderr_sink_mt>());
    l->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [arbor] [%l] %v");
    const char* env = std::getenv("ARBOR_LOG_LEVEL");
    l->set_level(env ? parse_level(env).value_or(spdlog::level::warn) : spdlog::level::warn);
    return l;
  }();
  return *instance;
}

// Sets the level by name; an unknown name is an error listing the known ones.
inline Result<void> set_level(std::string_view name) {
  auto level = parse_level(name);
  if (!level)
    return fail(ErrorCode::invalid_argument, "unknown log level '" + std::string(name) +
                                                 "'; use one of trace, debug, info, warn, error, critical, off");
  logger().set_level(*level);
  return {};
}

inline bool enabled(spdlog::level::level_enum level) { return logger().should_log(level); }

}  // namespace arbor::log
