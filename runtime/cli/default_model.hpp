#pragma once

#include <string>

namespace arbor::cli {

// The default model, models/SmolLM2-135M-Instruct.Q4_1.gguf, looked up next to the
// executable's parent folder (build/arbor -> ./models) and then in the current folder.
std::string default_model_path();

}  // namespace arbor::cli
