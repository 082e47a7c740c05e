#pragma once

#include <string>

namespace arbor::cli {

// A file of the Arbor checkout, looked up from the executable's folder upwards (so
// build/arbor finds ./models and ./workflows), then relative to the current folder.
std::string find_project_file(const std::string& relative);

// The default model, models/SmolLM2-135M-Instruct.Q4_1.gguf.
std::string default_model_path();

}  // namespace arbor::cli
