// `arbor generate --prompt TEXT`: one chat-formatted generation through the runtime
// (the same cache actor a workflow uses).
#include <cstdio>

#include <nlohmann/json.hpp>

#include "runtime/cli/command.hpp"
#include "runtime/cli/runtime_options.hpp"

namespace arbor::cli {
namespace {

void print_usage() {
  std::fprintf(stderr,
               "usage: arbor generate --prompt TEXT [--system TEXT] [--max-tokens N] [--temperature T]\n"
               "                      [--top-p P] [--top-k K] [--seed S] [--stop STR ...] [--raw] [--json]\n"
               "                      [--model PATH] [--threads N] [--kv-mem MB] [--precision accurate|fast]\n");
}

int run_generate(const std::vector<std::string>& argv) {
  std::string error;
  auto args = Args::parse(argv, {"json", "raw", "no-cache", "help"}, &error);
  if (!args || args->has("help")) return print_usage(), args ? kExitOk : kExitInvalid;
  std::vector<std::string> known = {"prompt", "system", "max-tokens", "temperature", "top-p", "top-k",
                                    "seed", "stop", "raw", "json", "help"};
  for (const auto& n : runtime_option_names()) known.push_back(n);
  if (auto bad = args->unknown(known); !bad.empty())
    return std::fprintf(stderr, "arbor generate: unknown option %s\n", bad[0].c_str()), print_usage(), kExitInvalid;
  if (!args->has("prompt"))
    return std::fprintf(stderr, "arbor generate: --prompt is required\n"), print_usage(), kExitInvalid;

  GenerateRequest request;
  request.sampling.max_tokens = int(args->get_int("max-tokens", 128, &error));
  request.sampling.temperature = args->get_double("temperature", 0.0, &error);
  request.sampling.top_p = args->get_double("top-p", 1.0, &error);
  request.sampling.top_k = int(args->get_int("top-k", 0, &error));
  request.sampling.seed = std::uint64_t(args->get_int("seed", 0, &error));
  request.sampling.stop = args->get_all("stop");
  RuntimeConfig config;
  if (!error.empty() || !runtime_config_from(*args, config, &error))
    return std::fprintf(stderr, "arbor generate: %s\n", error.c_str()), kExitInvalid;
  if (args->has("raw")) {
    request.raw_prompt = args->get("prompt");
  } else {
    if (args->has("system")) request.messages.push_back({"system", args->get("system")});
    request.messages.push_back({"user", args->get("prompt")});
  }

  auto runtime = Runtime::create(config);
  if (!runtime) return std::fprintf(stderr, "arbor: %s\n", runtime.error().describe().c_str()), kExitInvalid;
  const bool json = args->has("json");
  auto handle = (*runtime)->start_generate(request, [json](const std::string& piece) {
    if (json) return;
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
  });
  if (!handle) return std::fprintf(stderr, "arbor: %s\n", handle.error().describe().c_str()), kExitInvalid;
  auto finished = handle->result();
  if (!finished) {
    std::fprintf(stderr, "%sarbor generate: %s\n", json ? "" : "\n", finished.error().describe().c_str());
    const ErrorCode code = finished.error().code;
    return code == ErrorCode::too_long || code == ErrorCode::invalid_argument || code == ErrorCode::out_of_memory
               ? kExitInvalid
               : kExitFailed;
  }
  const GenerateResult& result = *finished;
  if (json) {
    std::printf("%s\n", nlohmann::json::parse(to_json(result)).dump(2).c_str());
  } else {
    std::printf("\n");
    std::fprintf(stderr, "[%zu prompt tokens (%zu cached), %zu generated; prefill %.0f ms, decode %.1f tokens/s]\n",
                 result.prompt_tokens, result.cached_tokens, result.generated_tokens, result.prefill_ms,
                 result.decode_ms > 0 ? 1000.0 * double(result.generated_tokens) / result.decode_ms : 0.0);
  }
  return result.finish_reason == "cancelled" ? kExitFailed : kExitOk;
}

ARBOR_CLI_COMMAND("generate", "one chat-formatted generation (--prompt TEXT)", run_generate);

}  // namespace
}  // namespace arbor::cli
