#include "model/gguf.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstring>
#include "model/gguf_format.hpp"
#include <limits>

namespace arbor::model {

namespace {

constexpr int kMaxArrayDepth = 8;

std::size_t scalar_size(GgufType t) {
  switch (t) {
    case GgufType::u8: case GgufType::i8: case GgufType::boolean: return 1;
    case GgufType::u16: case GgufType::i16: return 2;
    case GgufType::u32: case GgufType::i32: case GgufType::f32: return 4;
    case GgufType::u64: case GgufType::i64: case GgufType::f64: return 8;
    case GgufType::string: return 8;  // at least the length field
    case GgufType::array: return 12;  // at least the element type and count
  }
  return 0;
}

bool valid_type(std::uint32_t t) { return t <= 12; }

}  // namespace

const char* to_string(GgufType type) {
  switch (type) {
    case GgufType::u8: return "u8";
    case GgufType::i8: return "i8";
    case GgufType::u16: return "u16";
    case GgufType::i16: return "i16";
    case GgufType::u32: return "u32";
    case GgufType::i32: return "i32";
    case GgufType::f32: return "f32";
    case GgufType::boolean: return "bool";
    case GgufType::string: return "string";
    case GgufType::array: return "array";
    case GgufType::u64: return "u64";
    case GgufType::i64: return "i64";
    case GgufType::f64: return "f64";
  }
  return "unknown";
}

bool is_integer(GgufType t) {
  switch (t) {
    case GgufType::u8: case GgufType::i8: case GgufType::u16: case GgufType::i16:
    case GgufType::u32: case GgufType::i32: case GgufType::u64: case GgufType::i64:
      return true;
    default:
      return false;
  }
}

GgufValue GgufValue::string_array(const std::vector<std::string>& items) {
  std::vector<GgufValue> v;
  v.reserve(items.size());
  for (const auto& s : items) v.push_back(string(s));
  return array(GgufType::string, std::move(v));
}

GgufValue GgufValue::f32_array(const std::vector<float>& items) {
  std::vector<GgufValue> v;
  v.reserve(items.size());
  for (float f : items) v.push_back(f32(f));
  return array(GgufType::f32, std::move(v));
}

GgufValue GgufValue::i32_array(const std::vector<std::int32_t>& items) {
  std::vector<GgufValue> v;
  v.reserve(items.size());
  for (auto i : items) v.push_back(i32(i));
  return array(GgufType::i32, std::move(v));
}

std::int64_t GgufTensor::num_elements() const {
  std::int64_t n = 1;
  for (auto d : dims) n *= d;
  return n;
}

// Bounds-checked little-endian reader over the file; every failure names the offset.
class GgufParser {
 public:
  GgufParser(std::span<const std::byte> bytes, const std::string& name) : bytes_(bytes), name_(name) {}

  Result<void> run(GgufFile& f);

 private:
  std::unexpected<Error> corrupt(std::uint64_t at, const std::string& what) const {
    return fail(ErrorCode::corrupt_data,
                format("GGUF file '{}': {} at offset {}; the file is truncated or not a valid "
                            "GGUF file (re-download or re-convert it)", name_, what, at));
  }
  std::unexpected<Error> unsupported(std::uint64_t at, const std::string& what) const {
    return fail(ErrorCode::unsupported,
                format("GGUF file '{}': {} at offset {}", name_, what, at));
  }
  std::uint64_t remaining() const { return bytes_.size() - pos_; }

  template <class T>
  Result<T> read(const char* what) {
    if (remaining() < sizeof(T))
      return corrupt(pos_, format("{} ({} bytes) runs past the end of the file", what, sizeof(T)));
    T v;
    std::memcpy(&v, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  Result<std::string> read_string(const char* what) {
    const std::uint64_t at = pos_;
    auto len = read<std::uint64_t>(what);
    if (!len) return std::unexpected(len.error());
    if (*len > remaining())
      return corrupt(at, format("{} length {} runs past the end of the file ({} bytes left)",
                                     what, *len, remaining()));
    std::string s(reinterpret_cast<const char*>(bytes_.data() + pos_), *len);
    pos_ += *len;
    return s;
  }

  Result<GgufValue> read_value(GgufType type, int depth);

  std::span<const std::byte> bytes_;
  const std::string& name_;
  std::uint64_t pos_ = 0;
};

Result<GgufValue> GgufParser::read_value(GgufType type, int depth) {
  GgufValue v;
  v.type = type;
  auto take = [&](auto tag) -> Result<void> {
    using T = decltype(tag);
    auto r = read<T>("metadata value");
    if (!r) return std::unexpected(r.error());
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) v.data = double(*r);
    else if constexpr (std::is_signed_v<T>) v.data = std::int64_t(*r);
    else v.data = std::uint64_t(*r);
    return {};
  };
  Result<void> ok;
  switch (type) {
    case GgufType::u8: ok = take(std::uint8_t{}); break;
    case GgufType::i8: ok = take(std::int8_t{}); break;
    case GgufType::u16: ok = take(std::uint16_t{}); break;
    case GgufType::i16: ok = take(std::int16_t{}); break;
    case GgufType::u32: ok = take(std::uint32_t{}); break;
    case GgufType::i32: ok = take(std::int32_t{}); break;
    case GgufType::u64: ok = take(std::uint64_t{}); break;
    case GgufType::i64: ok = take(std::int64_t{}); break;
    case GgufType::f32: ok = take(float{}); break;
    case GgufType::f64: ok = take(double{}); break;
    case GgufType::boolean: {
      const std::uint64_t at = pos_;
      auto b = read<std::uint8_t>("bool value");
      if (!b) return std::unexpected(b.error());
      if (*b > 1) return corrupt(at, format("bool value {} is neither 0 nor 1", *b));
      v.data = *b != 0;
      break;
    }
    case GgufType::string: {
      auto s = read_string("string value");
      if (!s) return std::unexpected(s.error());
      v.data = std::move(*s);
      break;
    }
    case GgufType::array: {
      const std::uint64_t at = pos_;
      if (depth >= kMaxArrayDepth) return corrupt(at, "arrays nested too deeply");
      auto et = read<std::uint32_t>("array element type");
      if (!et) return std::unexpected(et.error());
      if (!valid_type(*et)) return corrupt(at, format("unknown array element type {}", *et));
      const std::uint64_t count_at = pos_;
      auto count = read<std::uint64_t>("array length");
      if (!count) return std::unexpected(count.error());
      const auto etype = static_cast<GgufType>(*et);
      if (*count > remaining() / scalar_size(etype))
        return corrupt(count_at, format("array of {} {} elements is larger than the rest of the "
                                             "file ({} bytes)", *count, to_string(etype), remaining()));
      GgufArray arr{etype, {}};
      arr.items.reserve(*count);
      for (std::uint64_t i = 0; i < *count; ++i) {
        auto item = read_value(etype, depth + 1);
        if (!item) return std::unexpected(item.error());
        arr.items.push_back(std::move(*item));
      }
      v.data = std::move(arr);
      break;
    }
  }
  if (!ok) return std::unexpected(ok.error());
  return v;
}

Result<void> GgufParser::run(GgufFile& f) {
  if (bytes_.size() < 4 || std::memcmp(bytes_.data(), "GGUF", 4) != 0) {
    std::string got;
    for (std::size_t i = 0; i < std::min<std::size_t>(4, bytes_.size()); ++i) {
      got += "0123456789abcdef"[static_cast<unsigned>(bytes_[i]) >> 4];
      got += "0123456789abcdef"[static_cast<unsigned>(bytes_[i]) & 15];
    }
    return corrupt(0, format("bad magic (expected 'GGUF' = 47475546, got {})",
                                  got.empty() ? "an empty file" : got));
  }
  pos_ = 4;
  auto version = read<std::uint32_t>("version");
  if (!version) return std::unexpected(version.error());
  if (*version != 2 && *version != 3) {
    std::string hint = (std::byteswap(*version) == 2 || std::byteswap(*version) == 3)
                           ? " (a big-endian file; convert it to little-endian)"
                           : (*version == 1 ? " (GGUF v1 is obsolete; re-convert the model)" : "");
    return unsupported(4, format("unsupported GGUF version {}{}; Arbor reads versions 2 and 3",
                                      *version, hint));
  }
  f.version_ = *version;
  auto num_tensors = read<std::uint64_t>("tensor count");
  if (!num_tensors) return std::unexpected(num_tensors.error());
  auto num_kv = read<std::uint64_t>("metadata count");
  if (!num_kv) return std::unexpected(num_kv.error());
  // A tensor info takes at least 8 (name) + 4 + 4 + 8 bytes, a pair at least 8 + 4 + 1.
  if (*num_tensors > remaining() / 24)
    return corrupt(8, format("tensor count {} is impossible for a file of {} bytes",
                                  *num_tensors, bytes_.size()));
  if (*num_kv > remaining() / 13)
    return corrupt(16, format("metadata count {} is impossible for a file of {} bytes",
                                   *num_kv, bytes_.size()));

  for (std::uint64_t i = 0; i < *num_kv; ++i) {
    const std::uint64_t at = pos_;
    auto key = read_string("metadata key");
    if (!key) return std::unexpected(key.error());
    const std::uint64_t type_at = pos_;
    auto type = read<std::uint32_t>("metadata value type");
    if (!type) return std::unexpected(type.error());
    if (!valid_type(*type))
      return corrupt(type_at, format("metadata '{}' has unknown value type {}", *key, *type));
    auto value = read_value(static_cast<GgufType>(*type), 0);
    if (!value) return std::unexpected(value.error());
    if (f.metadata_index_.contains(*key))
      return corrupt(at, format("duplicate metadata key '{}'", *key));
    f.metadata_index_.emplace(*key, f.metadata_.size());
    f.metadata_.emplace_back(std::move(*key), std::move(*value));
  }

  if (const GgufValue* a = f.find("general.alignment")) {
    const auto* u = std::get_if<std::uint64_t>(&a->data);
    const auto* s = std::get_if<std::int64_t>(&a->data);
    const std::uint64_t align = u ? *u : (s && *s > 0 ? std::uint64_t(*s) : 0);
    if (!a->is_integer() || align == 0 || !std::has_single_bit(align) || align > (1u << 30))
      return corrupt(0, "general.alignment must be a power of two integer");
    f.alignment_ = std::uint32_t(align);
  }

  std::vector<std::uint64_t> info_offsets;
  for (std::uint64_t i = 0; i < *num_tensors; ++i) {
    const std::uint64_t at = pos_;
    info_offsets.push_back(at);
    GgufTensor t;
    auto name = read_string("tensor name");
    if (!name) return std::unexpected(name.error());
    t.name = std::move(*name);
    const std::uint64_t dims_at = pos_;
    auto n_dims = read<std::uint32_t>("tensor dimension count");
    if (!n_dims) return std::unexpected(n_dims.error());
    if (*n_dims == 0 || *n_dims > kGgufMaxDims)
      return corrupt(dims_at, format("tensor '{}' has {} dimensions (1..{} allowed)", t.name,
                                          *n_dims, kGgufMaxDims));
    std::uint64_t num_elements = 1;
    for (std::uint32_t d = 0; d < *n_dims; ++d) {
      const std::uint64_t dim_at = pos_;
      auto dim = read<std::uint64_t>("tensor dimension");
      if (!dim) return std::unexpected(dim.error());
      if (*dim == 0 || *dim > (std::uint64_t(1) << 40) ||
          num_elements > std::numeric_limits<std::int64_t>::max() / *dim)
        return corrupt(dim_at, format("tensor '{}' dimension {} is {} (absurd)", t.name, d, *dim));
      num_elements *= *dim;
      t.dims.push_back(std::int64_t(*dim));
    }
    const std::uint64_t type_at = pos_;
    auto type = read<std::uint32_t>("tensor type");
    if (!type) return std::unexpected(type.error());
    t.type = static_cast<kernels::GgmlType>(*type);
    if (!kernels::is_supported(t.type))
      return unsupported(type_at, format("tensor '{}' has ggml type {}, which Arbor does not "
                                              "support (F32, F16, BF16, Q4_0, Q4_1, Q8_0, Q4_K, Q6_K); "
                                              "re-quantize the model to one of those", t.name, *type));
    const auto shape = kernels::block_shape(t.type);
    if (t.dims[0] % shape.values != 0)
      return corrupt(dims_at, format("tensor '{}' row of {} values is not a multiple of the {} "
                                          "block size {}", t.name, t.dims[0],
                                          kernels::type_name(t.type), shape.values));
    t.num_bytes = std::size_t(num_elements / shape.values) * std::size_t(shape.bytes);
    const std::uint64_t offset_at = pos_;
    auto offset = read<std::uint64_t>("tensor data offset");
    if (!offset) return std::unexpected(offset.error());
    t.offset = *offset;
    if (t.offset % f.alignment_ != 0)
      return corrupt(offset_at, format("tensor '{}' data offset {} is not a multiple of the "
                                            "alignment {}", t.name, t.offset, f.alignment_));
    if (f.tensor_index_.contains(t.name))
      return corrupt(at, format("duplicate tensor name '{}'", t.name));
    f.tensor_index_.emplace(t.name, f.tensors_.size());
    f.tensors_.push_back(std::move(t));
  }

  const std::uint64_t align = f.alignment_;
  f.data_offset_ = (pos_ + align - 1) / align * align;
  if (f.data_offset_ > bytes_.size() && !f.tensors_.empty())
    return corrupt(pos_, format("data section start {} is past the end of the file ({} bytes)",
                                     f.data_offset_, bytes_.size()));
  const std::uint64_t data_size = bytes_.size() >= f.data_offset_ ? bytes_.size() - f.data_offset_ : 0;
  for (std::size_t i = 0; i < f.tensors_.size(); ++i) {
    GgufTensor& t = f.tensors_[i];
    if (t.offset > data_size || t.num_bytes > data_size - t.offset)
      return corrupt(info_offsets[i],
                     format("tensor '{}' data [{}, {}) of the data section runs past the end of "
                                 "the file (data section is {} bytes)", t.name, t.offset,
                                 t.offset + t.num_bytes, data_size));
    t.data = bytes_.data() + f.data_offset_ + t.offset;
  }
  return {};
}

Result<GgufFile> GgufFile::parse(std::span<const std::byte> bytes, std::string source_name) {
  GgufFile f;
  f.bytes_ = bytes;
  f.source_name_ = std::move(source_name);
  GgufParser parser(bytes, f.source_name_);
  if (auto ok = parser.run(f); !ok) return std::unexpected(ok.error());
  return f;
}

Result<GgufFile> GgufFile::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    return fail(err == ENOENT ? ErrorCode::not_found : ErrorCode::invalid_argument,
                format("cannot open GGUF file '{}': {}{}", path, std::strerror(err),
                            err == ENOENT ? " (run scripts/fetch_model.sh for the default model)" : ""));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return fail(ErrorCode::invalid_argument, format("'{}' is not a regular file", path));
  }
  const std::size_t size = std::size_t(st.st_size);
  void* addr = nullptr;
  if (size > 0) {
    addr = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (addr == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      return fail(ErrorCode::out_of_memory,
                  format("cannot map GGUF file '{}': {}", path, std::strerror(err)));
    }
  }
  ::close(fd);
  std::shared_ptr<void> mapping(addr, [size](void* p) {
    if (p) ::munmap(p, size);
  });
  auto f = parse(std::span<const std::byte>(static_cast<const std::byte*>(addr), size), path);
  if (!f) return f;
  f->mapping_ = std::move(mapping);
  return f;
}

const GgufValue* GgufFile::find(std::string_view key) const {
  auto it = metadata_index_.find(key);
  return it == metadata_index_.end() ? nullptr : &metadata_[it->second].second;
}

namespace {

std::unexpected<Error> missing(const GgufFile& f, std::string_view key) {
  return fail(ErrorCode::not_found,
              format("GGUF file '{}' has no metadata key '{}'", f.source_name(), key));
}

std::unexpected<Error> wrong_type(const GgufFile& f, std::string_view key, const char* expected,
                                  GgufType actual) {
  return fail(ErrorCode::invalid_argument,
              format("GGUF file '{}': metadata '{}' is {}, expected {}", f.source_name(), key,
                          to_string(actual), expected));
}

Result<std::int64_t> as_int(const GgufValue& v) {
  if (const auto* u = std::get_if<std::uint64_t>(&v.data)) {
    if (*u > std::uint64_t(std::numeric_limits<std::int64_t>::max()))
      return fail(ErrorCode::invalid_argument, format("value {} does not fit in int64", *u));
    return std::int64_t(*u);
  }
  if (const auto* s = std::get_if<std::int64_t>(&v.data)) return *s;
  return fail(ErrorCode::invalid_argument, "not an integer");
}

}  // namespace

Result<std::string> GgufFile::get_string(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return missing(*this, key);
  if (v->type != GgufType::string) return wrong_type(*this, key, "a string", v->type);
  return std::get<std::string>(v->data);
}

Result<std::int64_t> GgufFile::get_int(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return missing(*this, key);
  if (!v->is_integer()) return wrong_type(*this, key, "an integer", v->type);
  auto r = as_int(*v);
  if (!r)
    return fail(ErrorCode::invalid_argument,
                format("GGUF file '{}': metadata '{}': {}", source_name_, key, r.error().message));
  return r;
}

Result<double> GgufFile::get_float(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return missing(*this, key);
  if (!v->is_float()) return wrong_type(*this, key, "a float", v->type);
  return std::get<double>(v->data);
}

Result<bool> GgufFile::get_bool(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return missing(*this, key);
  if (v->type != GgufType::boolean) return wrong_type(*this, key, "a bool", v->type);
  return std::get<bool>(v->data);
}

Result<const GgufArray*> GgufFile::get_array(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return missing(*this, key);
  if (v->type != GgufType::array) return wrong_type(*this, key, "an array", v->type);
  return &std::get<GgufArray>(v->data);
}

Result<std::vector<std::string>> GgufFile::get_string_array(std::string_view key) const {
  auto a = get_array(key);
  if (!a) return std::unexpected(a.error());
  if ((*a)->element_type != GgufType::string)
    return wrong_type(*this, key, "an array of strings", (*a)->element_type);
  std::vector<std::string> out;
  out.reserve((*a)->items.size());
  for (const auto& item : (*a)->items) out.push_back(std::get<std::string>(item.data));
  return out;
}

Result<std::vector<std::int64_t>> GgufFile::get_int_array(std::string_view key) const {
  auto a = get_array(key);
  if (!a) return std::unexpected(a.error());
  if (!is_integer((*a)->element_type))
    return wrong_type(*this, key, "an array of integers", (*a)->element_type);
  std::vector<std::int64_t> out;
  out.reserve((*a)->items.size());
  for (const auto& item : (*a)->items) {
    auto r = as_int(item);
    if (!r) return wrong_type(*this, key, "an array of int64-representable integers", GgufType::u64);
    out.push_back(*r);
  }
  return out;
}

Result<std::vector<float>> GgufFile::get_float_array(std::string_view key) const {
  auto a = get_array(key);
  if (!a) return std::unexpected(a.error());
  if ((*a)->element_type != GgufType::f32 && (*a)->element_type != GgufType::f64)
    return wrong_type(*this, key, "an array of floats", (*a)->element_type);
  std::vector<float> out;
  out.reserve((*a)->items.size());
  for (const auto& item : (*a)->items) out.push_back(float(std::get<double>(item.data)));
  return out;
}

Result<std::int64_t> GgufFile::get_int_or(std::string_view key, std::int64_t fallback) const {
  return has(key) ? get_int(key) : Result<std::int64_t>(fallback);
}
Result<double> GgufFile::get_float_or(std::string_view key, double fallback) const {
  return has(key) ? get_float(key) : Result<double>(fallback);
}
Result<bool> GgufFile::get_bool_or(std::string_view key, bool fallback) const {
  return has(key) ? get_bool(key) : Result<bool>(fallback);
}
Result<std::string> GgufFile::get_string_or(std::string_view key, std::string fallback) const {
  return has(key) ? get_string(key) : Result<std::string>(std::move(fallback));
}

const GgufTensor* GgufFile::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

Result<const GgufTensor*> GgufFile::tensor(std::string_view name) const {
  if (const GgufTensor* t = find_tensor(name)) return t;
  return fail(ErrorCode::not_found,
              format("GGUF file '{}' has no tensor '{}'", source_name_, name));
}

}  // namespace arbor::model
