// GGUF reader tests: files made by GgufWriter load back exactly; corrupted variants are
// rejected with the right error code and a message naming the problem; the real model
// reads as expected.
#include "model/gguf.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <random>

#include "model/gguf_writer.hpp"

namespace arbor::model {
namespace {

using kernels::GgmlType;

std::vector<std::byte> f32_bytes(std::initializer_list<float> v) {
  std::vector<std::byte> out(v.size() * 4);
  std::memcpy(out.data(), v.begin(), out.size());
  return out;
}

std::vector<std::byte> pattern(std::size_t n, int seed) {
  std::vector<std::byte> out(n);
  for (std::size_t i = 0; i < n; ++i) out[i] = std::byte((i * 31 + seed) & 0xFF);
  return out;
}

GgufWriter make_writer(std::uint32_t version = 3) {
  GgufWriter w(version);
  w.set("general.architecture", GgufValue::string("llama"));
  w.set("v.u8", GgufValue::u8(200));
  w.set("v.i8", GgufValue::i8(-100));
  w.set("v.u16", GgufValue::u16(60000));
  w.set("v.i16", GgufValue::i16(-30000));
  w.set("v.u32", GgufValue::u32(4000000000u));
  w.set("v.i32", GgufValue::i32(-2000000000));
  w.set("v.f32", GgufValue::f32(1.5f));
  w.set("v.bool", GgufValue::boolean(true));
  w.set("v.string", GgufValue::string("héllo"));
  w.set("v.u64", GgufValue::u64(1ull << 60));
  w.set("v.i64", GgufValue::i64(-(1ll << 60)));
  w.set("v.f64", GgufValue::f64(0.1));
  w.set("v.strings", GgufValue::string_array({"a", "", "ccc"}));
  w.set("v.floats", GgufValue::f32_array({0.5f, -2.0f}));
  w.set("v.ints", GgufValue::i32_array({1, -2, 3}));
  w.set("v.nested", GgufValue::array(GgufType::array, {GgufValue::i32_array({7}), GgufValue::i32_array({})}));
  EXPECT_TRUE(w.add_tensor("t.f32", GgmlType::F32, {3, 2}, f32_bytes({1, 2, 3, 4, 5, 6})));
  EXPECT_TRUE(w.add_tensor("t.q4_1", GgmlType::Q4_1, {64, 3}, pattern(20 * 2 * 3, 1)));
  EXPECT_TRUE(w.add_tensor("t.q8_0", GgmlType::Q8_0, {32}, pattern(34, 2)));
  EXPECT_TRUE(w.add_tensor("t.f16", GgmlType::F16, {5, 1, 1, 1}, pattern(10, 3)));
  return w;
}

Result<GgufFile> parse(const std::vector<std::byte>& bytes) {
  return GgufFile::parse(std::span<const std::byte>(bytes), "test.gguf");
}

// Offset of the first occurrence of `s` in the serialized bytes.
std::size_t find_bytes(const std::vector<std::byte>& bytes, std::string_view s) {
  const auto* b = reinterpret_cast<const char*>(bytes.data());
  return std::string_view(b, bytes.size()).find(s);
}

template <class T>
void poke(std::vector<std::byte>& bytes, std::size_t at, T v) {
  std::memcpy(bytes.data() + at, &v, sizeof(T));
}

// Offset of a tensor info's field after its name: 0 = n_dims, then dims, type, offset.
std::size_t tensor_field(const std::vector<std::byte>& bytes, std::string_view name) {
  return find_bytes(bytes, name) + name.size();
}

void expect_error(const Result<GgufFile>& r, ErrorCode code, std::string_view needle) {
  ASSERT_FALSE(r) << "expected an error mentioning '" << needle << "'";
  EXPECT_EQ(r.error().code, code) << r.error().describe();
  EXPECT_NE(r.error().message.find(needle), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("offset"), std::string::npos) << r.error().message;
}

TEST(Gguf, WrittenFileReadsBackExactly) {
  for (std::uint32_t version : {2u, 3u}) {
    const auto bytes = make_writer(version).serialize();
    auto f = parse(bytes);
    ASSERT_TRUE(f) << f.error().describe();
    EXPECT_EQ(f->version(), version);
    EXPECT_EQ(f->alignment(), 32u);
    EXPECT_EQ(f->data_offset() % 32, 0u);
    EXPECT_EQ(f->metadata().size(), 17u);
    EXPECT_EQ(f->metadata()[0].first, "general.architecture");
    EXPECT_EQ(*f->get_string("general.architecture"), "llama");
    EXPECT_EQ(*f->get_int("v.u8"), 200);
    EXPECT_EQ(*f->get_int("v.i8"), -100);
    EXPECT_EQ(*f->get_int("v.u16"), 60000);
    EXPECT_EQ(*f->get_int("v.i16"), -30000);
    EXPECT_EQ(*f->get_int("v.u32"), 4000000000ll);
    EXPECT_EQ(*f->get_int("v.i32"), -2000000000);
    EXPECT_EQ(*f->get_float("v.f32"), 1.5);
    EXPECT_EQ(*f->get_bool("v.bool"), true);
    EXPECT_EQ(*f->get_string("v.string"), "héllo");
    EXPECT_EQ(*f->get_int("v.u64"), 1ll << 60);
    EXPECT_EQ(*f->get_int("v.i64"), -(1ll << 60));
    EXPECT_EQ(*f->get_float("v.f64"), 0.1);
    EXPECT_EQ(*f->get_string_array("v.strings"), (std::vector<std::string>{"a", "", "ccc"}));
    EXPECT_EQ(*f->get_float_array("v.floats"), (std::vector<float>{0.5f, -2.0f}));
    EXPECT_EQ(*f->get_int_array("v.ints"), (std::vector<std::int64_t>{1, -2, 3}));
    auto nested = f->get_array("v.nested");
    ASSERT_TRUE(nested);
    ASSERT_EQ((*nested)->items.size(), 2u);
    EXPECT_EQ(std::get<GgufArray>((*nested)->items[0].data).items.size(), 1u);
    EXPECT_EQ(f->find("v.u16")->type, GgufType::u16);

    ASSERT_EQ(f->tensors().size(), 4u);
    auto t = f->tensor("t.q4_1");
    ASSERT_TRUE(t);
    EXPECT_EQ((*t)->type, GgmlType::Q4_1);
    EXPECT_EQ((*t)->dims, (std::vector<std::int64_t>{64, 3}));
    EXPECT_EQ((*t)->num_elements(), 192);
    EXPECT_EQ((*t)->num_bytes, 120u);
    EXPECT_EQ(std::memcmp((*t)->data, pattern(120, 1).data(), 120), 0);
    auto t32 = f->tensor("t.f32");
    ASSERT_TRUE(t32);
    EXPECT_EQ(reinterpret_cast<const float*>((*t32)->data)[5], 6.0f);
    for (const auto& ti : f->tensors()) {
      EXPECT_EQ(ti.offset % 32, 0u) << ti.name;
      EXPECT_EQ((ti.data - bytes.data()) % 32, 0) << ti.name;
    }
    EXPECT_EQ((*f->tensor("t.f16"))->dims.size(), 4u);
    // Writing what was read reproduces the file byte for byte.
    GgufWriter again(version);
    for (const auto& [k, v] : f->metadata()) again.set(k, v);
    for (const auto& ti : f->tensors())
      ASSERT_TRUE(again.add_tensor(ti.name, ti.type, ti.dims, {ti.data, ti.num_bytes}));
    EXPECT_EQ(again.serialize(), bytes);
  }
}

TEST(Gguf, TypedAccessorErrors) {
  const auto bytes = make_writer().serialize();
  auto f = parse(bytes);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->get_string("nope").error().code, ErrorCode::not_found);
  EXPECT_NE(f->get_string("nope").error().message.find("nope"), std::string::npos);
  auto wrong = f->get_string("v.u32");
  ASSERT_FALSE(wrong);
  EXPECT_EQ(wrong.error().code, ErrorCode::invalid_argument);
  EXPECT_NE(wrong.error().message.find("u32"), std::string::npos) << wrong.error().message;
  EXPECT_FALSE(f->get_int("v.f32"));
  EXPECT_FALSE(f->get_float("v.u8"));
  EXPECT_FALSE(f->get_bool("v.u8"));
  EXPECT_FALSE(f->get_string_array("v.ints"));
  EXPECT_FALSE(f->get_float_array("v.strings"));
  EXPECT_EQ(*f->get_int_or("missing", 42), 42);
  EXPECT_EQ(*f->get_int_or("v.u8", 42), 200);
  EXPECT_FALSE(f->get_int_or("v.string", 42));
  EXPECT_EQ(f->tensor("missing").error().code, ErrorCode::not_found);
  EXPECT_EQ(f->find_tensor("missing"), nullptr);
}

TEST(Gguf, U64BeyondInt64IsAnErrorNotAWrap) {
  GgufWriter w;
  w.set("big", GgufValue::u64(~0ull));
  auto bytes = w.serialize();
  auto f = parse(bytes);
  ASSERT_TRUE(f);
  EXPECT_FALSE(f->get_int("big"));
}

TEST(Gguf, CustomAlignment) {
  GgufWriter w;
  w.set_alignment(256);
  ASSERT_TRUE(w.add_tensor("a", GgmlType::F32, {3}, f32_bytes({1, 2, 3})));
  ASSERT_TRUE(w.add_tensor("b", GgmlType::F32, {1}, f32_bytes({9})));
  const auto bytes = w.serialize();
  auto f = parse(bytes);
  ASSERT_TRUE(f) << f.error().describe();
  EXPECT_EQ(f->alignment(), 256u);
  EXPECT_EQ(f->data_offset() % 256, 0u);
  EXPECT_EQ((*f->tensor("b"))->offset, 256u);
  EXPECT_EQ(reinterpret_cast<const float*>((*f->tensor("b"))->data)[0], 9.0f);
}

TEST(Gguf, WriterRejectsBadTensors) {
  GgufWriter w;
  EXPECT_EQ(w.add_tensor("x", GgmlType::Q4_0, {16}, pattern(9, 0)).error().code, ErrorCode::invalid_argument);
  EXPECT_EQ(w.add_tensor("x", GgmlType::F32, {2}, pattern(4, 0)).error().code, ErrorCode::invalid_argument);
  EXPECT_EQ(w.add_tensor("x", static_cast<GgmlType>(6), {32}, pattern(22, 0)).error().code,
            ErrorCode::unsupported);
  EXPECT_EQ(w.add_tensor("x", GgmlType::F32, {1, 1, 1, 1, 1}, pattern(4, 0)).error().code,
            ErrorCode::invalid_argument);
  ASSERT_TRUE(w.add_tensor("x", GgmlType::F32, {1}, pattern(4, 0)));
  EXPECT_EQ(w.add_tensor("x", GgmlType::F32, {1}, pattern(4, 0)).error().code, ErrorCode::invalid_argument);
}

TEST(Gguf, BadMagic) {
  auto bytes = make_writer().serialize();
  bytes[0] = std::byte{'X'};
  expect_error(parse(bytes), ErrorCode::corrupt_data, "magic");
  expect_error(parse({}), ErrorCode::corrupt_data, "magic");
}

TEST(Gguf, UnsupportedVersion) {
  for (std::uint32_t v : {0u, 1u, 4u, 0x03000000u}) {
    auto bytes = make_writer().serialize();
    poke<std::uint32_t>(bytes, 4, v);
    expect_error(parse(bytes), ErrorCode::unsupported, "version");
  }
}

TEST(Gguf, AbsurdCounts) {
  auto bytes = make_writer().serialize();
  poke<std::uint64_t>(bytes, 8, 1ull << 40);
  expect_error(parse(bytes), ErrorCode::corrupt_data, "tensor count");
  bytes = make_writer().serialize();
  poke<std::uint64_t>(bytes, 16, ~0ull);
  expect_error(parse(bytes), ErrorCode::corrupt_data, "metadata count");
  bytes = make_writer().serialize();
  // The array length of v.strings: after key, type (u32) and element type (u32).
  poke<std::uint64_t>(bytes, tensor_field(bytes, "v.strings") + 8, 1ull << 61);
  expect_error(parse(bytes), ErrorCode::corrupt_data, "array");
}

TEST(Gguf, StringLengthPastEnd) {
  auto bytes = make_writer().serialize();
  poke<std::uint64_t>(bytes, 24, 1ull << 33);  // the first key's length
  expect_error(parse(bytes), ErrorCode::corrupt_data, "past the end");
  bytes = make_writer().serialize();
  poke<std::uint64_t>(bytes, tensor_field(bytes, "v.string") + 4, bytes.size());
  expect_error(parse(bytes), ErrorCode::corrupt_data, "string value length");
}

TEST(Gguf, BadValueTypes) {
  auto bytes = make_writer().serialize();
  poke<std::uint32_t>(bytes, tensor_field(bytes, "v.u8"), 13);
  expect_error(parse(bytes), ErrorCode::corrupt_data, "unknown value type 13");
  bytes = make_writer().serialize();
  poke<std::uint8_t>(bytes, tensor_field(bytes, "v.bool") + 4, 7);
  expect_error(parse(bytes), ErrorCode::corrupt_data, "bool");
}

TEST(Gguf, TensorInfoProblems) {
  auto bytes = make_writer().serialize();
  poke<std::uint32_t>(bytes, tensor_field(bytes, "t.f32"), 5);  // n_dims
  expect_error(parse(bytes), ErrorCode::corrupt_data, "dimensions");

  bytes = make_writer().serialize();
  poke<std::uint64_t>(bytes, tensor_field(bytes, "t.f32") + 4, 0);  // dims[0] = 0
  expect_error(parse(bytes), ErrorCode::corrupt_data, "dimension 0");

  bytes = make_writer().serialize();
  poke<std::uint32_t>(bytes, tensor_field(bytes, "t.q8_0") + 4 + 8, 6);  // Q5_0
  expect_error(parse(bytes), ErrorCode::unsupported, "ggml type 6");

  bytes = make_writer().serialize();
  poke<std::uint32_t>(bytes, tensor_field(bytes, "t.q8_0") + 4 + 8, 99);
  expect_error(parse(bytes), ErrorCode::unsupported, "ggml type 99");

  bytes = make_writer().serialize();
  poke<std::uint64_t>(bytes, tensor_field(bytes, "t.q8_0") + 4, 48);  // not a multiple of 32
  expect_error(parse(bytes), ErrorCode::corrupt_data, "block size");

  bytes = make_writer().serialize();
  poke<std::uint64_t>(bytes, tensor_field(bytes, "t.q8_0") + 4 + 8 + 4, 17);
  expect_error(parse(bytes), ErrorCode::corrupt_data, "alignment");

  bytes = make_writer().serialize();
  poke<std::uint64_t>(bytes, tensor_field(bytes, "t.q8_0") + 4 + 8 + 4, 1ull << 20);
  expect_error(parse(bytes), ErrorCode::corrupt_data, "past the end");

  bytes = make_writer().serialize();
  poke<std::uint64_t>(bytes, tensor_field(bytes, "t.q8_0") + 4, 32ull << 30);  // huge row
  expect_error(parse(bytes), ErrorCode::corrupt_data, "past the end");
}

TEST(Gguf, DuplicateNames) {
  auto bytes = make_writer().serialize();
  const std::size_t at = find_bytes(bytes, "t.q8_0");
  std::memcpy(bytes.data() + at, "t.f16_", 6);  // no clash yet: different length
  ASSERT_TRUE(parse(bytes));
  std::memcpy(bytes.data() + find_bytes(bytes, "t.f16_"), "t.q4_1", 6);
  expect_error(parse(bytes), ErrorCode::corrupt_data, "duplicate tensor name 't.q4_1'");

  bytes = make_writer().serialize();
  std::memcpy(bytes.data() + find_bytes(bytes, "v.u16"), "v.i16", 5);
  expect_error(parse(bytes), ErrorCode::corrupt_data, "duplicate metadata key 'v.i16'");
}

TEST(Gguf, BadAlignmentValue) {
  GgufWriter w;
  w.set_u32("general.alignment", 48);
  ASSERT_TRUE(w.add_tensor("a", GgmlType::F32, {1}, f32_bytes({1})));
  expect_error(parse(w.serialize()), ErrorCode::corrupt_data, "power of two");
  GgufWriter s;
  s.set_string("general.alignment", "32");
  expect_error(parse(s.serialize()), ErrorCode::corrupt_data, "power of two");
}

// Every truncation before the end of the last tensor's data is rejected cleanly.
TEST(Gguf, EveryTruncationFails) {
  const auto bytes = make_writer().serialize();
  auto full = parse(bytes);
  ASSERT_TRUE(full);
  std::size_t end = 0;
  for (const auto& t : full->tensors())
    end = std::max<std::size_t>(end, full->data_offset() + t.offset + t.num_bytes);
  for (std::size_t n = 0; n < end; ++n) {
    std::vector<std::byte> cut(bytes.begin(), bytes.begin() + n);
    auto r = parse(cut);
    ASSERT_FALSE(r) << "prefix of " << n << " bytes parsed";
    EXPECT_TRUE(r.error().code == ErrorCode::corrupt_data || r.error().code == ErrorCode::unsupported);
  }
}

// Random corruption never crashes and never yields a tensor outside the buffer.
TEST(Gguf, RandomByteFlipsAreSafe) {
  const auto original = make_writer().serialize();
  std::mt19937 rng(1234);
  for (int iter = 0; iter < 3000; ++iter) {
    auto bytes = original;
    const int flips = 1 + int(rng() % 4);
    for (int k = 0; k < flips; ++k) bytes[rng() % bytes.size()] = std::byte(rng() & 0xFF);
    auto r = parse(bytes);
    if (!r) continue;
    for (const auto& t : r->tensors()) {
      ASSERT_GE(t.data, bytes.data());
      ASSERT_LE(t.data + t.num_bytes, bytes.data() + bytes.size());
    }
  }
}

TEST(Gguf, MissingFileIsNotFound) {
  auto r = GgufFile::open("/nonexistent/dir/model.gguf");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::not_found);
  EXPECT_NE(r.error().message.find("/nonexistent/dir/model.gguf"), std::string::npos);
}

TEST(Gguf, WriteFileAndOpen) {
  const std::string path = std::string(ARBOR_BINARY_DIR) + "/gguf_test_roundtrip.gguf";
  ASSERT_TRUE(make_writer().write_file(path));
  auto f = GgufFile::open(path);
  ASSERT_TRUE(f) << f.error().describe();
  EXPECT_EQ(f->tensors().size(), 4u);
  EXPECT_EQ(*f->get_int("v.u16"), 60000);
  std::filesystem::remove(path);
}

TEST(Gguf, RealModelMetadata) {
  if (!std::filesystem::exists(ARBOR_DEFAULT_MODEL)) GTEST_SKIP() << "run scripts/fetch_model.sh";
  auto f = GgufFile::open(ARBOR_DEFAULT_MODEL);
  ASSERT_TRUE(f) << f.error().describe();
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->alignment(), 32u);
  EXPECT_EQ(*f->get_string("general.architecture"), "llama");
  EXPECT_EQ(*f->get_int("llama.block_count"), 30);
  EXPECT_EQ(*f->get_int("llama.embedding_length"), 576);
  EXPECT_EQ(*f->get_int("llama.feed_forward_length"), 1536);
  EXPECT_EQ(*f->get_int("llama.attention.head_count"), 9);
  EXPECT_EQ(*f->get_int("llama.attention.head_count_kv"), 3);
  EXPECT_EQ(*f->get_int("llama.vocab_size"), 49152);
  EXPECT_FLOAT_EQ(float(*f->get_float("llama.rope.freq_base")), 100000.0f);
  EXPECT_FLOAT_EQ(float(*f->get_float("llama.attention.layer_norm_rms_epsilon")), 1e-5f);
  EXPECT_EQ(f->get_string_array("tokenizer.ggml.tokens")->size(), 49152u);
  EXPECT_EQ(f->get_string_array("tokenizer.ggml.merges")->size(), 48900u);
  EXPECT_EQ(f->tensors().size(), 272u);
  int q4_1 = 0, f32 = 0, q8_0 = 0;
  for (const auto& t : f->tensors()) {
    q4_1 += t.type == GgmlType::Q4_1;
    f32 += t.type == GgmlType::F32;
    q8_0 += t.type == GgmlType::Q8_0;
  }
  EXPECT_EQ(q4_1, 210);
  EXPECT_EQ(f32, 61);
  EXPECT_EQ(q8_0, 1);
  auto embd = f->tensor("token_embd.weight");
  ASSERT_TRUE(embd);
  EXPECT_EQ((*embd)->type, GgmlType::Q8_0);
  EXPECT_EQ((*embd)->dims, (std::vector<std::int64_t>{576, 49152}));
  EXPECT_EQ((*embd)->num_bytes, 49152u * 18 * 34);
  auto q = f->tensor("blk.0.attn_q.weight");
  ASSERT_TRUE(q);
  EXPECT_EQ((*q)->type, GgmlType::Q4_1);
  EXPECT_EQ((*q)->dims, (std::vector<std::int64_t>{576, 576}));
  auto k = f->tensor("blk.29.attn_k.weight");
  ASSERT_TRUE(k);
  EXPECT_EQ((*k)->dims, (std::vector<std::int64_t>{576, 192}));
  EXPECT_FALSE(f->find_tensor("output.weight"));  // tied embeddings
  const auto& last = f->tensors().back();
  EXPECT_LE(f->data_offset() + last.offset + last.num_bytes, f->file_size());
}

}  // namespace
}  // namespace arbor::model
