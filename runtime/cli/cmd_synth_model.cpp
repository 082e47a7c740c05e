// `arbor synth-model --shape NAME --out FILE [--type T] [--layers N] [--seed N]`: writes a
// random-weight model in a real model's shape (model/synthetic_model.hpp), to benchmark
// or test a machine that cannot get the real weights.
#include <cstdio>
#include <memory>
#include <string>

#include "model/synthetic_model.hpp"
#include "runtime/cli/command.hpp"
#include "runtime/cli/options.hpp"

namespace arbor::cli {
namespace {

struct SynthOptions {
  std::string shape, out, type = "q4_0";
  int layers = 0;
  std::uint64_t seed = 1;
};

int run_synth(const SynthOptions& o) {
  auto shape = model::synthetic_shape(o.shape);
  if (!shape) return std::fprintf(stderr, "arbor synth-model: %s\n", shape.error().message.c_str()), kExitInvalid;
  if (o.layers > 0) shape->layers = o.layers;
  const kernels::GgmlType type = o.type == "q4_0"   ? kernels::GgmlType::Q4_0
                                 : o.type == "q4_1" ? kernels::GgmlType::Q4_1
                                 : o.type == "q8_0" ? kernels::GgmlType::Q8_0
                                 : o.type == "f16"  ? kernels::GgmlType::F16
                                                    : kernels::GgmlType::F32;
  auto writer = model::synthetic_llama(*shape, type, o.seed);
  if (!writer) return std::fprintf(stderr, "arbor synth-model: %s\n", writer.error().message.c_str()), kExitInvalid;
  if (auto ok = writer->write_file(o.out); !ok)
    return std::fprintf(stderr, "arbor synth-model: %s\n", ok.error().message.c_str()), kExitFailed;
  std::printf("wrote %s: %s shape, %d layers, %s weights\n", o.out.c_str(), shape->name.c_str(), shape->layers,
              kernels::type_name(type));
  return kExitOk;
}

Runner setup(CLI::App& app) {
  auto o = std::make_shared<SynthOptions>();
  app.add_option("--shape", o->shape, "the real model whose shape to copy: smollm2-135m or llama3-8b")
      ->type_name("NAME")
      ->check(one_of({"smollm2-135m", "llama3-8b"}))
      ->required();
  app.add_option("--out", o->out, "the GGUF file to write")->type_name("FILE")->required();
  app.add_option("--type", o->type, "weight type of every matrix (norms stay f32)")
      ->type_name("TYPE")
      ->check(one_of({"q4_0", "q4_1", "q8_0", "f16", "f32"}))
      ->capture_default_str();
  app.add_option("--layers", o->layers, "keep only this many layers (0 = the shape's own)")
      ->type_name("N")
      ->check(integer_in(0, 1024))
      ->capture_default_str();
  app.add_option("--seed", o->seed, "random seed (the same seed writes the same bytes)")->capture_default_str();
  return [o] { return run_synth(*o); };
}

}  // namespace

ARBOR_CLI_COMMAND("synth-model", "write a random-weight model in a real model's shape (for benchmarks and tests)",
                  setup);

}  // namespace arbor::cli
