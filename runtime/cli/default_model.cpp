#include "runtime/cli/default_model.hpp"

#include <filesystem>

namespace arbor::cli {

std::string find_project_file(const std::string& relative) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (fs::path dir = exe.parent_path(); !dir.empty() && dir != dir.root_path(); dir = dir.parent_path())
      if (fs::exists(dir / relative)) return (dir / relative).string();
  }
  return relative;
}

std::string default_model_path() { return find_project_file("models/SmolLM2-135M-Instruct.Q4_1.gguf"); }

}  // namespace arbor::cli
