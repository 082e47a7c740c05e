#include "runtime/cli/default_model.hpp"

#include <filesystem>

namespace arbor::cli {

std::string default_model_path() {
  namespace fs = std::filesystem;
  const fs::path name = fs::path("models") / "SmolLM2-135M-Instruct.Q4_1.gguf";
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (fs::path dir = exe.parent_path(); !dir.empty() && dir != dir.root_path(); dir = dir.parent_path())
      if (fs::exists(dir / name)) return (dir / name).string();
  }
  return name.string();
}

}  // namespace arbor::cli
