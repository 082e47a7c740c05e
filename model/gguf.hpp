// GGUF reader: maps a model file read-only and exposes its typed metadata and tensor
// table. Everything is validated while opening (magic, version, counts bounded by the
// file size, string lengths, types, dims, alignment, tensor extents, duplicate names);
// a file that opens is safe to index. Errors name the problem and the byte offset.
//
// Thread safety: a GgufFile is immutable after open(); concurrent reads are safe.
// Lifetime: tensor data pointers point into the mapping and stay valid as long as the
// GgufFile (or a moved-to GgufFile) lives.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>
#include <vector>

#include "common/result.hpp"
#include "kernels/ggml_types.hpp"

namespace arbor::model {

// Metadata value types, with the codes the file uses.
enum class GgufType : std::uint32_t {
  u8 = 0, i8 = 1, u16 = 2, i16 = 3, u32 = 4, i32 = 5, f32 = 6, boolean = 7,
  string = 8, array = 9, u64 = 10, i64 = 11, f64 = 12,
};
const char* to_string(GgufType type);
bool is_integer(GgufType type);

struct GgufValue;

struct GgufArray {
  GgufType element_type = GgufType::u8;
  std::vector<GgufValue> items;
};

// One metadata value. Unsigned integers are held as uint64, signed as int64, floats as
// double (f32 converts exactly); `type` keeps the file's type so a writer reproduces it.
struct GgufValue {
  GgufType type = GgufType::u8;
  std::variant<std::uint64_t, std::int64_t, double, bool, std::string, GgufArray> data;

  static GgufValue u8(std::uint8_t v) { return {GgufType::u8, std::uint64_t(v)}; }
  static GgufValue i8(std::int8_t v) { return {GgufType::i8, std::int64_t(v)}; }
  static GgufValue u16(std::uint16_t v) { return {GgufType::u16, std::uint64_t(v)}; }
  static GgufValue i16(std::int16_t v) { return {GgufType::i16, std::int64_t(v)}; }
  static GgufValue u32(std::uint32_t v) { return {GgufType::u32, std::uint64_t(v)}; }
  static GgufValue i32(std::int32_t v) { return {GgufType::i32, std::int64_t(v)}; }
  static GgufValue u64(std::uint64_t v) { return {GgufType::u64, v}; }
  static GgufValue i64(std::int64_t v) { return {GgufType::i64, v}; }
  static GgufValue f32(float v) { return {GgufType::f32, double(v)}; }
  static GgufValue f64(double v) { return {GgufType::f64, v}; }
  static GgufValue boolean(bool v) { return {GgufType::boolean, v}; }
  static GgufValue string(std::string v) { return {GgufType::string, std::move(v)}; }
  static GgufValue array(GgufType element_type, std::vector<GgufValue> items) {
    return {GgufType::array, GgufArray{element_type, std::move(items)}};
  }
  static GgufValue string_array(const std::vector<std::string>& items);
  static GgufValue f32_array(const std::vector<float>& items);
  static GgufValue i32_array(const std::vector<std::int32_t>& items);

  bool is_integer() const { return model::is_integer(type); }
  bool is_float() const { return type == GgufType::f32 || type == GgufType::f64; }
};

struct GgufTensor {
  std::string name;
  kernels::GgmlType type = kernels::GgmlType::F32;
  std::vector<std::int64_t> dims;  // dims[0] is the innermost (contiguous) dimension
  const std::byte* data = nullptr;
  std::size_t num_bytes = 0;
  std::uint64_t offset = 0;  // relative to the data section

  std::int64_t num_elements() const;
};

inline constexpr std::uint32_t kGgufDefaultAlignment = 32;

// Lets the name indexes be searched with a string_view without a copy.
struct GgufStringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using GgufNameIndex = std::unordered_map<std::string, std::size_t, GgufStringHash, std::equal_to<>>;
inline constexpr int kGgufMaxDims = 4;

class GgufFile {
 public:
  // Maps `path` read-only and parses it. not_found: missing file; corrupt_data: broken
  // structure; unsupported: a version or tensor type Arbor does not handle.
  static Result<GgufFile> open(const std::string& path);
  // Parses bytes that must outlive the returned object (tests, embedded files).
  static Result<GgufFile> parse(std::span<const std::byte> bytes, std::string source_name = "<memory>");

  GgufFile(GgufFile&&) noexcept = default;
  GgufFile& operator=(GgufFile&&) noexcept = default;
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;
  ~GgufFile() = default;

  std::uint32_t version() const { return version_; }
  std::uint32_t alignment() const { return alignment_; }
  std::uint64_t data_offset() const { return data_offset_; }  // absolute file offset
  std::size_t file_size() const { return bytes_.size(); }
  const std::string& source_name() const { return source_name_; }

  // Metadata in file order.
  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return metadata_; }
  const GgufValue* find(std::string_view key) const;  // nullptr when absent
  bool has(std::string_view key) const { return find(key) != nullptr; }

  // Typed accessors: not_found when the key is absent, invalid_argument when the value
  // has another type (the message names the key, the expected and the actual type).
  Result<std::string> get_string(std::string_view key) const;
  Result<std::int64_t> get_int(std::string_view key) const;  // any integer type
  Result<double> get_float(std::string_view key) const;      // f32 or f64
  Result<bool> get_bool(std::string_view key) const;
  Result<std::vector<std::string>> get_string_array(std::string_view key) const;
  Result<std::vector<std::int64_t>> get_int_array(std::string_view key) const;
  Result<std::vector<float>> get_float_array(std::string_view key) const;
  Result<const GgufArray*> get_array(std::string_view key) const;

  // Convenience for optional keys: `fallback` when absent, an error on a wrong type.
  Result<std::int64_t> get_int_or(std::string_view key, std::int64_t fallback) const;
  Result<double> get_float_or(std::string_view key, double fallback) const;
  Result<bool> get_bool_or(std::string_view key, bool fallback) const;
  Result<std::string> get_string_or(std::string_view key, std::string fallback) const;

  const std::vector<GgufTensor>& tensors() const { return tensors_; }
  // not_found (naming the file) when there is no such tensor.
  Result<const GgufTensor*> tensor(std::string_view name) const;
  const GgufTensor* find_tensor(std::string_view name) const;

 private:
  GgufFile() = default;
  friend class GgufParser;

  std::shared_ptr<void> mapping_;  // owns the mmap (or nothing for parse())
  std::span<const std::byte> bytes_;
  std::string source_name_;
  std::uint32_t version_ = 0;
  std::uint32_t alignment_ = kGgufDefaultAlignment;
  std::uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, GgufValue>> metadata_;
  GgufNameIndex metadata_index_;
  std::vector<GgufTensor> tensors_;
  GgufNameIndex tensor_index_;
};

}  // namespace arbor::model
