// `arbor generate --prompt TEXT`: one chat-formatted generation through the runtime
// (the same cache actor a workflow uses).
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/sampling_settings.hpp"
#include "runtime/cli/command.hpp"
#include "runtime/cli/options.hpp"
#include "runtime/cli/runtime_options.hpp"

namespace arbor::cli {
namespace {

struct GenerateOptions {
  std::string prompt, system;
  std::string json_schema;  // schema text, or @FILE
  SamplingOptions sampling;  // its defaults are the help's
  bool raw = false, json = false;
  CLI::Option* system_option = nullptr;  // an empty --system still sends a system message
  RuntimeOptions runtime;
};

// The runtime's messages name request fields; here they are flags.
std::string worded(const Error& error) { return cli_wording(error.describe(), {{"max_tokens", "--max-tokens"}}); }

// --json-schema's value: the schema text itself, or `@FILE` for a file holding it.
std::optional<std::string> schema_text(const std::string& value) {
  if (!value.starts_with('@')) return value;
  std::ifstream in(value.substr(1), std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

int run_generate(GenerateOptions& o) {
  GenerateRequest request;
  request.sampling = o.sampling;
  if (!o.json_schema.empty()) {
    request.json_schema = schema_text(o.json_schema);
    if (!request.json_schema)
      return std::fprintf(stderr, "arbor: --json-schema: cannot read '%s'; check the path\n", o.json_schema.c_str() + 1),
             kExitInvalid;
  }
  RuntimeConfig config;
  o.runtime.apply(config);
  if (o.raw) {
    request.raw_prompt = o.prompt;
  } else {
    if (o.system_option->count()) request.messages.push_back({"system", o.system});
    request.messages.push_back({"user", o.prompt});
  }

  auto runtime = Runtime::create(config);
  if (!runtime) return std::fprintf(stderr, "arbor: %s\n", worded(runtime.error()).c_str()), kExitInvalid;
  print_device_line("generate", **runtime);
  const bool json = o.json;
  auto handle = (*runtime)->start_generate(request, [json](const std::string& piece) {
    if (json) return;
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
  });
  if (!handle) return std::fprintf(stderr, "arbor: %s\n", worded(handle.error()).c_str()), kExitInvalid;
  auto finished = handle->result();
  if (!finished) {
    std::fprintf(stderr, "%sarbor generate: %s\n", json ? "" : "\n", worded(finished.error()).c_str());
    const ErrorCode code = finished.error().code;
    return code == ErrorCode::too_long || code == ErrorCode::invalid_argument || code == ErrorCode::out_of_memory
               ? kExitInvalid
               : kExitFailed;
  }
  const GenerateResult& result = *finished;
  if (json) {
    const auto doc = nlohmann::json::parse(to_json(result));
    std::printf("%s\n", doc.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else {
    std::printf("\n");
    std::fprintf(stderr, "[%zu prompt tokens (%zu cached), %zu generated; prefill %.0f ms, decode %.1f tokens/s]\n",
                 result.prompt_tokens, result.cached_tokens, result.generated_tokens, result.prefill_ms,
                 result.decode_ms > 0 ? 1000.0 * double(result.generated_tokens) / result.decode_ms : 0.0);
  }
  return result.finish_reason == FinishReason::cancelled ? kExitFailed : kExitOk;
}

Runner setup(CLI::App& app) {
  auto o = std::make_shared<GenerateOptions>();
  SamplingOptions& s = o->sampling;
  // The flags' ranges are the one set in common/sampling_settings.hpp (check_sampling),
  // checked here per flag so that an error names it.
  app.add_option("--prompt", o->prompt, "the user message (with --raw: the whole prompt)")
      ->type_name("TEXT")
      ->required();
  o->system_option = app.add_option("--system", o->system, "a system message before it")->type_name("TEXT");
  app.add_option("--max-tokens", s.max_tokens, "tokens to generate at most")
      ->type_name("N")
      ->check(integer_in(0, sampling_limits::max_tokens_max))
      ->capture_default_str();
  app.add_option("--temperature", s.temperature, "sampling temperature; 0 = greedy")
      ->type_name("T")
      ->check(number_in(0, sampling_limits::temperature_max))
      ->capture_default_str();
  app.add_option("--top-p", s.top_p, "nucleus sampling: keep the most likely tokens up to this mass")
      ->type_name("P")
      ->check(number_in(0, sampling_limits::top_p_max))
      ->capture_default_str();
  app.add_option("--top-k", s.top_k, "keep the K most likely tokens; 0 = off")
      ->type_name("K")
      ->check(integer_in(0, sampling_limits::top_k_max))
      ->capture_default_str();
  app.add_option("--seed", s.seed, "sampling seed")->type_name("S")->capture_default_str();
  app.add_option("--stop", s.stop, "stop after this text (repeatable)")
      ->type_name("STR")
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  app.add_flag("--raw", o->raw, "send --prompt as is, without the model's chat template");
  app.add_flag("--json", o->json, "print the result as one JSON document instead of streaming the text");
  app.add_option("--json-schema", o->json_schema,
                 "constrain the output to this JSON Schema (its text, or @FILE); with --json the parsed "
                 "document is its \"json\" field")
      ->type_name("SCHEMA");
  o->runtime.declare(app, kAllRuntimeFlags & ~kToolPinTtlFlag);  // no tools here
  app.footer("Exit codes: 0 ok, 1 cancelled, 2 invalid input (a flag, the model, a prompt too long or a KV pool too small).");
  return [o] { return run_generate(*o); };
}

ARBOR_CLI_COMMAND("generate", "one chat-formatted generation (--prompt TEXT)", setup);

}  // namespace
}  // namespace arbor::cli
