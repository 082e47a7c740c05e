#include "model/gguf_writer.hpp"

#include <bit>
#include <cstdio>
#include <cstring>
#include "model/gguf_format.hpp"

namespace arbor::model {

namespace {

class Sink {
 public:
  explicit Sink(std::vector<std::byte>& out) : out_(out) {}
  template <class T>
  void pod(T v) {
    const auto* p = reinterpret_cast<const std::byte*>(&v);
    out_.insert(out_.end(), p, p + sizeof(T));
  }
  void str(const std::string& s) {
    pod<std::uint64_t>(s.size());
    const auto* p = reinterpret_cast<const std::byte*>(s.data());
    out_.insert(out_.end(), p, p + s.size());
  }
  void pad_to(std::size_t alignment) {
    while (out_.size() % alignment != 0) out_.push_back(std::byte{0});
  }
  void value(const GgufValue& v) {
    switch (v.type) {
      case GgufType::u8: pod(std::uint8_t(uint(v))); break;
      case GgufType::i8: pod(std::int8_t(sint(v))); break;
      case GgufType::u16: pod(std::uint16_t(uint(v))); break;
      case GgufType::i16: pod(std::int16_t(sint(v))); break;
      case GgufType::u32: pod(std::uint32_t(uint(v))); break;
      case GgufType::i32: pod(std::int32_t(sint(v))); break;
      case GgufType::u64: pod(std::uint64_t(uint(v))); break;
      case GgufType::i64: pod(std::int64_t(sint(v))); break;
      case GgufType::f32: pod(float(std::get<double>(v.data))); break;
      case GgufType::f64: pod(std::get<double>(v.data)); break;
      case GgufType::boolean: pod(std::uint8_t(std::get<bool>(v.data) ? 1 : 0)); break;
      case GgufType::string: str(std::get<std::string>(v.data)); break;
      case GgufType::array: {
        const auto& a = std::get<GgufArray>(v.data);
        pod(static_cast<std::uint32_t>(a.element_type));
        pod<std::uint64_t>(a.items.size());
        for (const auto& item : a.items) value(item);
        break;
      }
    }
  }

 private:
  // Integer values may be held signed or unsigned whatever the declared type.
  static std::uint64_t uint(const GgufValue& v) {
    if (const auto* u = std::get_if<std::uint64_t>(&v.data)) return *u;
    return std::uint64_t(std::get<std::int64_t>(v.data));
  }
  static std::int64_t sint(const GgufValue& v) { return std::int64_t(uint(v)); }
  std::vector<std::byte>& out_;
};

}  // namespace

std::size_t gguf_tensor_bytes(kernels::GgmlType type, const std::vector<std::int64_t>& dims) {
  const auto shape = kernels::block_shape(type);
  if (shape.values == 0 || dims.empty() || dims[0] % shape.values != 0) return 0;
  std::size_t n = 1;
  for (auto d : dims) {
    if (d <= 0) return 0;
    n *= std::size_t(d);
  }
  return n / std::size_t(shape.values) * std::size_t(shape.bytes);
}

void GgufWriter::set(const std::string& key, GgufValue value) {
  for (auto& [k, v] : metadata_) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  metadata_.emplace_back(key, std::move(value));
}

void GgufWriter::set_alignment(std::uint32_t alignment) {
  alignment_ = std::has_single_bit(alignment) ? alignment : kGgufDefaultAlignment;
  set_u32("general.alignment", alignment);
}

Result<void> GgufWriter::add_tensor(const std::string& name, kernels::GgmlType type,
                                    const std::vector<std::int64_t>& dims,
                                    std::span<const std::byte> data) {
  if (!kernels::is_supported(type))
    return fail(ErrorCode::unsupported,
                format("tensor '{}': ggml type {} is not supported", name, std::uint32_t(type)));
  if (dims.empty() || dims.size() > std::size_t(kGgufMaxDims))
    return fail(ErrorCode::invalid_argument,
                format("tensor '{}': {} dims (1..4 allowed)", name, dims.size()));
  const std::size_t expected = gguf_tensor_bytes(type, dims);
  if (expected == 0)
    return fail(ErrorCode::invalid_argument,
                format("tensor '{}': dims do not fit type {} (dims[0] must be a positive multiple "
                            "of the block size {})", name, kernels::type_name(type),
                            kernels::block_shape(type).values));
  if (data.size() != expected)
    return fail(ErrorCode::invalid_argument,
                format("tensor '{}': {} data bytes given, {} needed", name, data.size(), expected));
  for (const auto& t : tensors_)
    if (t.name == name)
      return fail(ErrorCode::invalid_argument, format("duplicate tensor name '{}'", name));
  tensors_.push_back({name, type, dims, std::vector<std::byte>(data.begin(), data.end())});
  return {};
}

Result<void> GgufWriter::add_f32_tensor(const std::string& name, const std::vector<std::int64_t>& dims,
                                        std::span<const float> values) {
  return add_tensor(name, kernels::GgmlType::F32, dims, std::as_bytes(values));
}

std::vector<std::byte> GgufWriter::serialize() const {
  std::vector<std::byte> out;
  out.reserve(4096);  // also keeps g++ 12 from a false -Wstringop-overflow on the first insert
  Sink sink(out);
  sink.pod<std::uint32_t>(0x46554747);  // "GGUF" little-endian
  sink.pod<std::uint32_t>(version_);
  sink.pod<std::uint64_t>(tensors_.size());
  sink.pod<std::uint64_t>(metadata_.size());
  for (const auto& [key, value] : metadata_) {
    sink.str(key);
    sink.pod(static_cast<std::uint32_t>(value.type));
    sink.value(value);
  }
  std::uint64_t offset = 0;
  for (const auto& t : tensors_) {
    sink.str(t.name);
    sink.pod<std::uint32_t>(std::uint32_t(t.dims.size()));
    for (auto d : t.dims) sink.pod<std::uint64_t>(std::uint64_t(d));
    sink.pod(static_cast<std::uint32_t>(t.type));
    sink.pod<std::uint64_t>(offset);
    offset += (t.data.size() + alignment_ - 1) / alignment_ * alignment_;
  }
  sink.pad_to(alignment_);
  for (const auto& t : tensors_) {
    out.insert(out.end(), t.data.begin(), t.data.end());
    sink.pad_to(alignment_);
  }
  return out;
}

Result<void> GgufWriter::write_file(const std::string& path) const {
  const auto bytes = serialize();
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f)
    return fail(ErrorCode::invalid_argument,
                format("cannot create '{}': {}", path, std::strerror(errno)));
  const bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  const bool closed = std::fclose(f) == 0;
  if (!ok || !closed)
    return fail(ErrorCode::failed, format("writing '{}' failed (disk full?)", path));
  return {};
}

}  // namespace arbor::model
