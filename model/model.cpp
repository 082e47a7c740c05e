#include "model/model.hpp"

#include <cstdint>
#include <algorithm>
#include <cstdio>

namespace arbor::model {
namespace {

// FNV-1a over the metadata and tensor table, plus the file size: cheap, and any
// change of weights layout, quantization or vocabulary changes it.
std::string fingerprint(const GgufFile& file, const LlamaConfig& config) {
  std::uint64_t h = 1469598103934665603ull;
  auto mix = [&](const void* p, std::size_t n) {
    const auto* b = static_cast<const unsigned char*>(p);
    for (std::size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  };
  for (const GgufTensor& t : file.tensors()) {
    mix(t.name.data(), t.name.size());
    mix(&t.offset, sizeof t.offset);
    // A sample of the data itself, so re-quantized or fine-tuned weights differ too.
    mix(t.data, std::min<std::size_t>(t.num_bytes, 64));
  }
  std::uint64_t size = file.file_size();
  mix(&size, sizeof size);
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return (config.name.empty() ? config.architecture : config.name) + "@" + hex;
}

}  // namespace

Result<std::shared_ptr<const Model>> Model::load(const std::string& path) {
  auto file = GgufFile::open(path);
  if (!file) return std::unexpected(file.error());
  std::shared_ptr<Model> m(new Model(std::move(*file)));
  m->path_ = path;
  auto config = read_llama_config(m->file_);
  if (!config) return std::unexpected(config.error());
  m->config_ = *config;
  auto weights = bind_llama_weights(m->file_, m->config_);
  if (!weights) return std::unexpected(weights.error());
  m->weights_ = std::move(*weights);
  auto tokenizer = Tokenizer::from_gguf(m->file_);
  if (!tokenizer) return std::unexpected(tokenizer.error());
  m->tokenizer_ = std::move(*tokenizer);
  if (m->tokenizer_->vocab_size() != m->config_.vocab_size)
    return fail(ErrorCode::corrupt_data, path + ": tokenizer has " + std::to_string(m->tokenizer_->vocab_size()) +
                                             " tokens but token_embd.weight has " +
                                             std::to_string(m->config_.vocab_size) + " rows");
  m->id_ = fingerprint(m->file_, m->config_);
  return std::shared_ptr<const Model>(std::move(m));
}

}  // namespace arbor::model
