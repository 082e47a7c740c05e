// `arbor perplexity FILE [--ctx N]`: perplexity of a text file, reported the way
// llama.cpp's perplexity tool reports it.
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include "cache/page_allocator.hpp"
#include "model/model.hpp"
#include "model/perplexity.hpp"
#include "runtime/cli/command.hpp"
#include "runtime/cli/default_model.hpp"

namespace arbor::cli {
namespace {

int run_perplexity(const std::vector<std::string>& argv) {
  std::string error;
  auto args = Args::parse(argv, {"help"}, &error);
  if (!args || args->has("help") || args->positional().size() != 1) {
    std::fprintf(stderr, "%susage: arbor perplexity FILE [--ctx N] [--model PATH] [--threads N]\n",
                 error.empty() ? "" : ("arbor perplexity: " + error + "\n").c_str());
    return args && args->has("help") ? kExitOk : kExitInvalid;
  }
  if (auto bad = args->unknown({"ctx", "model", "threads"}); !bad.empty())
    return std::fprintf(stderr, "arbor perplexity: unknown option %s\n", bad[0].c_str()), kExitInvalid;
  const int ctx = int(args->get_int("ctx", 512, &error));
  const int threads = int(args->get_int("threads", long(std::thread::hardware_concurrency()), &error));
  if (!error.empty()) return std::fprintf(stderr, "arbor perplexity: %s\n", error.c_str()), kExitInvalid;

  const std::string& path = args->positional()[0];
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::fprintf(stderr, "arbor perplexity: cannot read '%s'\n", path.c_str()), kExitInvalid;
  std::stringstream text;
  text << in.rdbuf();

  auto loaded = model::Model::load(args->get("model", default_model_path()));
  if (!loaded) return std::fprintf(stderr, "arbor: %s\n", loaded.error().describe().c_str()), kExitInvalid;
  const model::Model& m = **loaded;
  std::vector<model::TokenId> tokens;
  if (m.tokenizer().add_bos()) tokens.push_back(m.tokenizer().bos_id());
  const auto body = m.tokenizer().encode(text.str(), false);
  tokens.insert(tokens.end(), body.begin(), body.end());

  model::Engine engine(m.config(), m.weights(), threads);
  const cache::KvGeometry geometry = engine.kv_geometry(16);
  cache::HostPageAllocator allocator;
  cache::PagePool pool(geometry, geometry.pages_for(ctx), allocator);
  std::printf("perplexity: %zu tokens, %zu chunks of %d\n", tokens.size(), tokens.size() / std::size_t(ctx), ctx);
  auto result = model::perplexity(engine, pool, tokens, ctx, [](int chunk, double ppl) {
    std::printf("[%d]%.4f,", chunk, ppl);
    std::fflush(stdout);
  });
  if (!result) return std::fprintf(stderr, "\narbor perplexity: %s\n", result.error().message.c_str()), kExitInvalid;
  std::printf("\nFinal estimate: PPL = %.4f +/- %.5f\n", result->perplexity, result->std_error);
  return kExitOk;
}

ARBOR_CLI_COMMAND("perplexity", "perplexity of a text file (llama.cpp's method)", run_perplexity);

}  // namespace
}  // namespace arbor::cli
