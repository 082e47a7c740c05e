// `arbor perplexity FILE [--ctx N]`: perplexity of a text file, reported the way
// llama.cpp's perplexity tool reports it.
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <thread>

#include "cache/page_pool.hpp"
#include "model/engine_factory.hpp"
#include "model/model.hpp"
#include "model/perplexity.hpp"
#include "runtime/cli/command.hpp"
#include "runtime/cli/options.hpp"
#include "runtime/cli/runtime_options.hpp"
#include "runtime/engine_device.hpp"

namespace arbor::cli {
namespace {

struct PerplexityOptions {
  std::string file;
  int ctx = 512;
  RuntimeOptions runtime;  // --model, --device, --threads
};

int run_perplexity(const PerplexityOptions& o) {
  RuntimeConfig config;
  o.runtime.apply(config);
  const int threads = config.num_threads > 0 ? config.num_threads : int(std::thread::hardware_concurrency());
  const int ctx = o.ctx;
  const std::string& path = o.file;
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::fprintf(stderr, "arbor perplexity: cannot read '%s'\n", path.c_str()), kExitInvalid;
  std::stringstream text;
  text << in.rdbuf();

  auto loaded = model::Model::load(config.model_path);
  if (!loaded) return std::fprintf(stderr, "arbor: %s\n", loaded.error().describe().c_str()), kExitInvalid;
  const model::Model& m = **loaded;
  std::vector<model::TokenId> tokens;
  if (m.tokenizer().add_bos()) tokens.push_back(m.tokenizer().bos_id());
  const auto body = m.tokenizer().encode(text.str(), false);
  tokens.insert(tokens.end(), body.begin(), body.end());

  const model::Device device = engine_device(config.device);
  auto engine = model::make_engine(m, {device, threads, kernels::MatmulPrecision::accurate});
  if (!engine) return std::fprintf(stderr, "arbor: %s\n", engine.error().describe().c_str()), kExitInvalid;
  std::fprintf(stderr, "arbor perplexity: device %s\n", (*engine)->describe().c_str());
  const cache::KvGeometry geometry = (*engine)->kv_geometry(16);
  cache::PagePool pool(geometry, geometry.pages_for(ctx), *(*engine)->page_allocator());
  if (pool.storage_error())
    return std::fprintf(stderr, "arbor: %s\n", pool.storage_error()->describe().c_str()), kExitFailed;
  std::printf("perplexity: %zu tokens, %zu chunks of %d\n", tokens.size(), tokens.size() / std::size_t(ctx), ctx);
  auto result = model::perplexity(**engine, pool, tokens, ctx, [](int chunk, double ppl) {
    std::printf("[%d]%.4f,", chunk, ppl);
    std::fflush(stdout);
  });
  if (!result) return std::fprintf(stderr, "\narbor perplexity: %s\n", result.error().message.c_str()), kExitInvalid;
  std::printf("\nFinal estimate: PPL = %.4f +/- %.5f\n", result->perplexity, result->std_error);
  return kExitOk;
}

Runner setup(CLI::App& app) {
  auto o = std::make_shared<PerplexityOptions>();
  app.add_option("file", o->file, "the text file")->type_name("FILE")->required();
  app.add_option("--ctx", o->ctx, "tokens per chunk (each chunk is scored on its second half)")
      ->type_name("N")
      ->check(integer_in(4, 1 << 20))
      ->capture_default_str();
  o->runtime.declare(app, kModelFlag | kDeviceFlag | kThreadsFlag);
  return [o] { return run_perplexity(*o); };
}

ARBOR_CLI_COMMAND("perplexity", "perplexity of a text file (llama.cpp's method)", setup);

}  // namespace
}  // namespace arbor::cli
