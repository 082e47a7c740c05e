// `arbor serve`: the HTTP server (OpenAI-compatible API, workflow runs, metrics,
// dashboard) over one Runtime. SIGINT/SIGTERM drain in-flight work and exit 0.
#include <csignal>
#include <cstdio>

#include <pthread.h>

#include "runtime/cli/command.hpp"
#include "runtime/cli/runtime_options.hpp"
#include "runtime/server/server.hpp"

namespace arbor::cli {
namespace {

constexpr const char* kUsage =
    "usage: arbor serve [--host 127.0.0.1] [--port 8080] [--config FILE] [--model PATH]\n"
    "                   [--threads N] [--kv-mem MB] [--io-threads N] [--no-cache]\n"
    "                   [--page-size N] [--eviction lru|lfu|workflow] [--precision accurate|fast]\n"
    "Serves the runtime over HTTP:\n"
    "  GET  /                       live cache dashboard\n"
    "  GET  /health, /v1/models, /metrics (Prometheus)\n"
    "  POST /v1/chat/completions, /v1/completions   (OpenAI-compatible, stream: true = SSE)\n"
    "  POST /v1/runs {workflow, inputs} -> 202; GET/DELETE /v1/runs/{id}; GET /v1/runs/{id}/events\n"
    "  GET  /v1/cache/stats, /v1/cache/tree\n"
    "--config FILE: JSON {host, port, admin_key, keys: {KEY: tenant}, tenants, limits, runtime}.\n"
    "Without it: loopback only, one tenant 'default', no authentication.\n"
    "Command-line options override the file. SIGINT/SIGTERM drain, then exit.\n";

bool is_loopback(const std::string& host) { return host == "127.0.0.1" || host == "::1" || host == "localhost"; }

int run_serve(const std::vector<std::string>& argv) {
  std::string error;
  auto args = Args::parse(argv, {"help", "no-cache"}, &error);
  if (!args) return std::fprintf(stderr, "arbor serve: %s\n", error.c_str()), kExitInvalid;
  if (args->has("help")) return std::fputs(kUsage, stdout), kExitOk;
  if (!args->positional().empty())
    return std::fprintf(stderr, "arbor serve: unexpected argument '%s'\n%s", args->positional()[0].c_str(), kUsage),
           kExitInvalid;
  std::vector<std::string> known = {"help", "host", "port", "config", "io-threads"};
  for (const auto& n : runtime_option_names()) known.push_back(n);
  if (auto unknown = args->unknown(known); !unknown.empty())
    return std::fprintf(stderr, "arbor serve: unknown option %s (try --help)\n", unknown[0].c_str()), kExitInvalid;

  server::ServerConfig config;
  const bool has_config = args->has("config");
  if (has_config) {
    auto loaded = server::load_server_config(args->get("config"));
    if (!loaded) return std::fprintf(stderr, "arbor serve: %s\n", loaded.error().message.c_str()), kExitInvalid;
    config = std::move(*loaded);
  }
  config.host = args->get("host", config.host);
  config.port = static_cast<int>(args->get_int("port", config.port, &error));
  config.io_threads = static_cast<int>(args->get_int("io-threads", config.io_threads, &error));
  if (!error.empty() || !runtime_config_from(*args, config.runtime, &error))
    return std::fprintf(stderr, "arbor serve: %s\n", error.c_str()), kExitInvalid;
  if (config.port < 0 || config.port > 65535 || config.io_threads < 1)
    return std::fprintf(stderr, "arbor serve: --port must be 0..65535 and --io-threads at least 1\n"), kExitInvalid;
  if (!config.auth && !is_loopback(config.host))
    return std::fprintf(stderr,
                        "arbor serve: refusing to serve %s without authentication; give --config with keys "
                        "(or bind 127.0.0.1)\n",
                        config.host.c_str()),
           kExitInvalid;

  // Block the stop signals in every thread (threads inherit this mask); this thread
  // takes them with sigwait once the server runs.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  auto runtime = Runtime::create(config.runtime);
  if (!runtime) return std::fprintf(stderr, "arbor serve: %s\n", runtime.error().describe().c_str()), kExitFailed;
  auto backend = server::make_runtime_backend(**runtime, config.max_inflight);
  auto server = server::Server::start(config, *backend);
  if (!server) return std::fprintf(stderr, "arbor serve: %s\n", server.error().message.c_str()), kExitFailed;

  if (!config.auth)
    std::fprintf(stderr,
                 "arbor serve: no config file: one tenant '%s', no authentication, loopback only "
                 "(give --config to add API keys and tenants)\n",
                 config.default_tenant.c_str());
  std::printf("arbor serve: listening on http://%s:%d (model %s, %zu MB KV pool, %zu API keys)\n",
              config.host.c_str(), (*server)->port(), (*runtime)->model_name().c_str(), config.runtime.kv_memory_mb,
              config.keys.size() + (config.admin_key.empty() ? 0 : 1));
  std::fflush(stdout);

  int signal = 0;
  sigwait(&stop_signals, &signal);
  std::fprintf(stderr, "arbor serve: %s: draining (up to %.0f s), then stopping\n", signal == SIGINT ? "SIGINT" : "SIGTERM",
               config.drain_seconds);
  (*server)->stop();
  server->reset();
  backend.reset();
  runtime->reset();
  std::fprintf(stderr, "arbor serve: stopped\n");
  return kExitOk;
}

}  // namespace

ARBOR_CLI_COMMAND("serve", "HTTP server: OpenAI-compatible API, workflow runs, metrics, cache dashboard", run_serve);

}  // namespace arbor::cli
