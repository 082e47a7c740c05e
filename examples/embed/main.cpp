// Embedding Arbor: run a workflow, print its result and the cache statistics, then a
// one-shot generation through the same runtime (and the same cache).
//   embed_example MODEL.gguf WORKFLOW.json
#include <arbor/runtime.hpp>

#include <cstdio>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: embed_example MODEL.gguf WORKFLOW.json\n");
    return 2;
  }
  arbor::RuntimeConfig config;
  config.model_path = argv[1];
  config.kv_memory_mb = 128;
  auto runtime = arbor::Runtime::create(config);
  if (!runtime) {
    std::fprintf(stderr, "%s\n", runtime.error().describe().c_str());
    return 1;
  }
  auto result = (*runtime)->run(argv[2]);
  if (!result) {
    std::fprintf(stderr, "%s\n", result.error().describe().c_str());
    return 1;
  }
  std::printf("%s\n", arbor::to_json(*result).c_str());

  arbor::GenerateRequest request;
  request.messages = {{"user", "Name one colour."}};
  request.sampling.max_tokens = 8;
  auto generated = (*runtime)->generate(request);
  if (!generated) {
    std::fprintf(stderr, "%s\n", generated.error().describe().c_str());
    return 1;
  }
  std::printf("generate: %s\n", generated->text.c_str());
  std::printf("%s\n", arbor::to_json((*runtime)->cache_stats()).c_str());
  return result->status == arbor::RunStatus::ok ? 0 : 1;
}
