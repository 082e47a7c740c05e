// Writes the GGUF seed corpus (fuzz/corpus/gguf_fuzz/) with the project's GgufWriter:
// small files that reach every part of the reader (metadata of each type, arrays,
// custom alignment, v2 and v3, one tensor of each supported type, a Llama config).
// Build and run by hand when the reader grows a feature:
//   g++ -std=c++23 -O1 -I. fuzz/make_gguf_seeds.cpp model/gguf_writer.cpp \
//       model/gguf.cpp kernels/ggml_types.cpp -o /tmp/make_gguf_seeds && /tmp/make_gguf_seeds fuzz/corpus/gguf_fuzz
#include <cstdio>
#include <string>
#include <vector>

#include "model/gguf_writer.hpp"

using namespace arbor;
using namespace arbor::model;

namespace {

void save(const GgufWriter& w, const std::string& dir, const std::string& name) {
  if (auto ok = w.write_file(dir + "/" + name); !ok) std::fprintf(stderr, "%s\n", ok.error().message.c_str());
}

void add(GgufWriter& w, const std::string& name, kernels::GgmlType type, std::vector<std::int64_t> dims) {
  std::int64_t rows = 1;
  for (std::size_t i = 1; i < dims.size(); ++i) rows *= dims[i];
  std::vector<std::byte> data(kernels::row_bytes(type, dims[0]) * std::size_t(rows), std::byte{0x11});
  if (auto ok = w.add_tensor(name, type, dims, data); !ok) std::fprintf(stderr, "%s\n", ok.error().message.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  const std::string dir = argc > 1 ? argv[1] : ".";
  {  // A Llama config with its tensors (F32, tiny).
    GgufWriter w;
    w.set_string("general.architecture", "llama");
    w.set_string("general.name", "seed");
    w.set_u32("llama.context_length", 64);
    w.set_u32("llama.embedding_length", 4);
    w.set_u32("llama.block_count", 1);
    w.set_u32("llama.feed_forward_length", 4);
    w.set_u32("llama.attention.head_count", 2);
    w.set_u32("llama.attention.head_count_kv", 1);
    w.set_f32("llama.rope.freq_base", 10000.f);
    w.set_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
    w.set("tokenizer.ggml.tokens", GgufValue::string_array({"a", "b", "<s>"}));
    w.set("tokenizer.ggml.scores", GgufValue::f32_array({0.f, -1.f, 0.f}));
    w.set("tokenizer.ggml.token_type", GgufValue::i32_array({1, 1, 3}));
    add(w, "token_embd.weight", kernels::GgmlType::F32, {4, 3});
    add(w, "output_norm.weight", kernels::GgmlType::F32, {4});
    add(w, "blk.0.attn_q.weight", kernels::GgmlType::F32, {4, 4});
    save(w, dir, "llama_f32.gguf");
  }
  {  // One tensor of each block type, 64-byte alignment.
    GgufWriter w;
    w.set_alignment(64);
    add(w, "q4_0", kernels::GgmlType::Q4_0, {32, 1});
    add(w, "q4_1", kernels::GgmlType::Q4_1, {32});
    add(w, "q8_0", kernels::GgmlType::Q8_0, {32, 2});
    add(w, "f16", kernels::GgmlType::F16, {2, 2});
    add(w, "bf16", kernels::GgmlType::BF16, {2});
    add(w, "q4_k", kernels::GgmlType::Q4_K, {256});
    add(w, "q6_k", kernels::GgmlType::Q6_K, {256});
    save(w, dir, "types.gguf");
  }
  {  // Every metadata type, version 2.
    GgufWriter w(2);
    w.set("u8", GgufValue::u8(1));
    w.set("i8", GgufValue::i8(-1));
    w.set("u16", GgufValue::u16(2));
    w.set("i16", GgufValue::i16(-2));
    w.set_u32("u32", 3);
    w.set_i32("i32", -3);
    w.set_u64("u64", 4);
    w.set("i64", GgufValue::i64(-4));
    w.set_f32("f32", 0.5f);
    w.set("f64", GgufValue::f64(0.25));
    w.set_bool("bool", true);
    w.set_string("string", "text");
    w.set("nested", GgufValue::array(GgufType::array, {GgufValue::i32_array({1, 2})}));
    save(w, dir, "metadata_v2.gguf");
  }
  return 0;
}
