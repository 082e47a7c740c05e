// Fuzzes the GGUF reader and the Llama config read from it: GgufFile::parse promises
// that a file that opens is safe to index, so every tensor's bytes and every metadata
// value are touched here (ASan reports any read outside the input).
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "fuzz/fuzz_check.hpp"
#include "model/gguf.hpp"
#include "model/llama_config.hpp"

namespace {

std::size_t touch(const arbor::model::GgufValue& v) {
  using arbor::model::GgufArray;
  if (const auto* s = std::get_if<std::string>(&v.data)) return s->size();
  if (const auto* a = std::get_if<GgufArray>(&v.data)) {
    std::size_t n = 0;
    for (const auto& item : a->items) n += touch(item);
    return n;
  }
  return 1;
}

}  // namespace

volatile std::size_t arbor_fuzz_sink;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace arbor::model;
  auto file = GgufFile::parse(std::span(reinterpret_cast<const std::byte*>(data), size), "fuzz.gguf");
  if (!file) {
    ARBOR_FUZZ_CHECK(!file.error().message.empty(), "an error without a message");
    return 0;
  }
  std::size_t sum = 0;
  for (const auto& [key, value] : file->metadata()) {
    sum += touch(value);
    ARBOR_FUZZ_CHECK(file->find(key) != nullptr, key);
  }
  for (const auto& t : file->tensors()) {
    ARBOR_FUZZ_CHECK(t.data >= reinterpret_cast<const std::byte*>(data) &&
                         t.data + t.num_bytes <= reinterpret_cast<const std::byte*>(data) + size,
                     t.name);
    for (std::size_t i = 0; i < t.num_bytes; ++i) sum += std::to_integer<unsigned>(t.data[i]);
    ARBOR_FUZZ_CHECK(file->find_tensor(t.name) == &t, t.name);
  }
  if (auto config = read_llama_config(*file)) {
    ARBOR_FUZZ_CHECK(config->num_heads > 0 && config->num_kv_heads > 0 &&
                         config->num_heads % config->num_kv_heads == 0 && config->head_dim > 0,
                     config->name);
  }
  arbor_fuzz_sink = sum;  // keeps the reads
  return 0;
}
