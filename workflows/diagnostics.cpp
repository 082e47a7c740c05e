#include "workflows/diagnostics.hpp"

#include <algorithm>

namespace arbor::workflows {

std::string Diagnostic::format(const std::string& file) const {
  std::string out = file + ":" + std::to_string(line) + ":" + std::to_string(column) + ": ";
  if (severity == Severity::warning) out += "warning: ";
  out += pointer.empty() ? std::string("(root)") : pointer;
  return out + ": " + message;
}

std::size_t Diagnostics::num_errors() const {
  return std::count_if(items_.begin(), items_.end(),
                       [](const Diagnostic& d) { return d.severity == Severity::error; });
}

const Diagnostic* Diagnostics::find(const std::string& pointer) const {
  for (const auto& d : items_)
    if (d.pointer == pointer) return &d;
  return nullptr;
}

std::string Diagnostics::format() const {
  std::string out;
  for (Severity s : {Severity::error, Severity::warning})
    for (const auto& d : items_)
      if (d.severity == s) out += d.format(file_) + "\n";
  return out;
}

Error Diagnostics::to_error() const {
  return Error{ErrorCode::invalid_argument, "workflow " + file_ + " is invalid (" +
                                                std::to_string(num_errors()) + " errors):\n" +
                                                format()};
}

}  // namespace arbor::workflows
