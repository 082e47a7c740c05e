// GGUF writer: builds a GGUF v3 (or v2) file in memory from metadata of any type and
// tensors of any supported ggml type, padding every tensor to the alignment. Used by
// tests to make small models and corrupted variants.
//
// Not thread-safe; a writer is a plain value. serialize() is O(total bytes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/result.hpp"
#include "kernels/ggml_types.hpp"
#include "model/gguf.hpp"

namespace arbor::model {

class GgufWriter {
 public:
  explicit GgufWriter(std::uint32_t version = 3) : version_(version) {}

  // Adds or replaces a metadata value (file order = first insertion order).
  void set(const std::string& key, GgufValue value);
  void set_string(const std::string& key, std::string v) { set(key, GgufValue::string(std::move(v))); }
  void set_u32(const std::string& key, std::uint32_t v) { set(key, GgufValue::u32(v)); }
  void set_i32(const std::string& key, std::int32_t v) { set(key, GgufValue::i32(v)); }
  void set_u64(const std::string& key, std::uint64_t v) { set(key, GgufValue::u64(v)); }
  void set_f32(const std::string& key, float v) { set(key, GgufValue::f32(v)); }
  void set_bool(const std::string& key, bool v) { set(key, GgufValue::boolean(v)); }
  // Sets general.alignment (u32) and uses it for the layout. Must be a power of two.
  void set_alignment(std::uint32_t alignment);

  // Adds a tensor; `data` must hold exactly the bytes its type and dims require (dims[0]
  // innermost, a multiple of the type's block size). invalid_argument otherwise, or for a
  // duplicate name; unsupported for a type Arbor does not handle.
  Result<void> add_tensor(const std::string& name, kernels::GgmlType type,
                          const std::vector<std::int64_t>& dims, std::span<const std::byte> data);
  Result<void> add_f32_tensor(const std::string& name, const std::vector<std::int64_t>& dims,
                              std::span<const float> values);

  std::vector<std::byte> serialize() const;
  Result<void> write_file(const std::string& path) const;

  std::uint32_t alignment() const { return alignment_; }

 private:
  struct Tensor {
    std::string name;
    kernels::GgmlType type;
    std::vector<std::int64_t> dims;
    std::vector<std::byte> data;
  };
  std::uint32_t version_;
  std::uint32_t alignment_ = kGgufDefaultAlignment;
  std::vector<std::pair<std::string, GgufValue>> metadata_;
  std::vector<Tensor> tensors_;
};

// Bytes a tensor of `type` and `dims` occupies; 0 if dims[0] is not a multiple of the
// block size or the type is unsupported.
std::size_t gguf_tensor_bytes(kernels::GgmlType type, const std::vector<std::int64_t>& dims);

}  // namespace arbor::model
