// Diagnostics: every problem found while loading a workflow, each tied to a JSON pointer
// and a line:column in the source text. Loading collects all of them (not just the
// first) so one run of `arbor validate` shows everything to fix.
#pragma once

#include <string>
#include <vector>

#include "common/result.hpp"

namespace arbor::workflows {

enum class Severity { error, warning };

struct Diagnostic {
  Severity severity = Severity::error;
  std::string pointer;  // RFC 6901 JSON pointer into the workflow document ("" = root)
  int line = 0;         // 1-based; 0 when unknown (e.g. a command-line override)
  int column = 0;       // 1-based, in characters (UTF-8 code points)
  std::string message;  // what is wrong, what was expected, how to fix it

  // "file:line:col: /json/pointer: message" (warnings: "file:line:col: warning: ...").
  std::string format(const std::string& file) const;
};

class Diagnostics {
 public:
  explicit Diagnostics(std::string file = "<text>") : file_(std::move(file)) {}

  void add(Diagnostic d) { items_.push_back(std::move(d)); }
  const std::vector<Diagnostic>& items() const { return items_; }
  const std::string& file() const { return file_; }
  std::size_t num_errors() const;
  std::size_t num_warnings() const { return items_.size() - num_errors(); }
  bool has_errors() const { return num_errors() > 0; }
  // First diagnostic whose pointer equals `pointer` (tests), or nullptr.
  const Diagnostic* find(const std::string& pointer) const;

  // One formatted line per diagnostic, errors first, in the order found.
  std::string format() const;
  // For callers that speak arbor::Error: invalid_argument with format() as message.
  Error to_error() const;

 private:
  std::string file_;
  std::vector<Diagnostic> items_;
};

}  // namespace arbor::workflows
