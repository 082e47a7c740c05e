// A loaded model: the mapped GGUF file, its config, bound weights and tokenizer.
// Immutable after load and safe to share between threads (the engine that computes
// with it is not: see engine.hpp).
#pragma once

#include <memory>
#include <string>

#include "common/result.hpp"
#include "model/gguf.hpp"
#include "model/llama_config.hpp"
#include "model/llama_weights.hpp"
#include "model/tokenizer.hpp"

namespace arbor::model {

class Model {
 public:
  // Opens, validates and binds a GGUF model. Errors name the file and the problem:
  // not_found, corrupt_data (truncated or inconsistent file), unsupported.
  static Result<std::shared_ptr<const Model>> load(const std::string& path);

  const std::string& path() const { return path_; }
  // Identity of the weights for cache keys (KV rule 4): name, size and a hash of the
  // header and tensor table. Two different files never share cached K/V.
  const std::string& id() const { return id_; }
  const GgufFile& file() const { return file_; }
  const LlamaConfig& config() const { return config_; }
  const LlamaWeights& weights() const { return weights_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }

 private:
  explicit Model(GgufFile file) : file_(std::move(file)) {}

  std::string path_;
  std::string id_;
  GgufFile file_;
  LlamaConfig config_;
  LlamaWeights weights_;
  std::unique_ptr<Tokenizer> tokenizer_;
};

}  // namespace arbor::model
