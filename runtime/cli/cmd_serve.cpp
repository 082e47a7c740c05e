// `arbor serve`: the HTTP server (OpenAI-compatible API, workflow runs, metrics,
// dashboard) over one Runtime. SIGINT/SIGTERM drain in-flight work and exit 0.
#include <csignal>
#include <cstdio>
#include <memory>

#include <pthread.h>

#include "runtime/cli/cluster_tls_options.hpp"
#include "runtime/cli/command.hpp"
#include "runtime/cli/options.hpp"
#include "runtime/cli/runtime_options.hpp"
#include "runtime/cluster/cluster_backend.hpp"
#include "runtime/server/server.hpp"

namespace arbor::cli {
namespace {

constexpr const char* kFooter =
    "Serves the runtime over HTTP:\n"
    "  GET  /                       live cache dashboard\n"
    "  GET  /health, /v1/models, /metrics (Prometheus)\n"
    "  POST /v1/chat/completions, /v1/completions   (OpenAI-compatible, stream: true = SSE)\n"
    "  POST /v1/runs {workflow, inputs} -> 202; GET/DELETE /v1/runs/{id}; GET /v1/runs/{id}/events\n"
    "  GET  /v1/cache/stats, /v1/cache/tree\n"
    "--config FILE: JSON {host, port, admin_key, keys: {KEY: tenant}, tenants, limits, workflow_dir, runtime}.\n"
    "Posted workflows read prefix files only from workflow_dir (regular files inside it, no '..', no\n"
    "symbolic links, never the config file); without workflow_dir they read no file.\n"
    "Without it: loopback only, one tenant 'default', no authentication.\n"
    "--nodes HOST:PORT,...: route generations to `arbor node` processes instead of running a model here\n"
    "(cache-aware: the node holding the longest cached prefix, unless it is overloaded); --model is then\n"
    "only the tokenizer the router routes with, the other runtime flags go to the nodes; a workflow run\n"
    "goes to one node, all its agents there. --cluster-cert/--cluster-key/--cluster-ca: reach the nodes\n"
    "over mutual TLS (as `arbor node` with the same flags).\n"
    "A flag given on the command line overrides the file; the defaults shown apply to what neither sets.\n"
    "SIGINT/SIGTERM drain, then exit. Exit codes: 0 stopped by a signal, 1 could not start, 2 invalid input.";

struct ServeOptions {
  server::ServerConfig defaults;  // bound to the flags: the help shows its values
  std::string config_file;
  CLI::Option* config = nullptr;
  CLI::Option* host = nullptr;
  CLI::Option* port = nullptr;
  CLI::Option* io_threads = nullptr;
  std::string nodes;  // --nodes: a router over `arbor node`s
  cluster::ClusterTls tls;  // --cluster-*: with the nodes
  RuntimeOptions runtime;
};

// Once the "listening on" line is printed: flushes it (a parent reads it to find the
// port), waits for SIGINT/SIGTERM (blocked in every thread, see run_serve), then drains
// (Server::stop, up to drain_seconds) and destroys the server before its backend goes.
void serve_until_signal(std::unique_ptr<server::Server>& server, const sigset_t& stop_signals, double drain_seconds) {
  std::fflush(stdout);
  int signal = 0;
  sigwait(&stop_signals, &signal);
  std::fprintf(stderr, "arbor serve: %s: draining (up to %g s), then stopping\n",
               signal == SIGINT ? "SIGINT" : "SIGTERM", drain_seconds);
  server->stop();
  server.reset();
}

// `--nodes`: the same server over a cluster::ClusterBackend (no model runs here).
int run_router(const ServeOptions& o, const server::ServerConfig& config, sigset_t stop_signals) {
  auto nodes = cluster::parse_endpoints(o.nodes);
  if (!nodes) return std::fprintf(stderr, "arbor serve: --nodes: %s\n", nodes.error().message.c_str()), kExitInvalid;
  cluster::ClusterOptions options;
  options.nodes = *nodes;
  options.model_path = config.runtime.model_path;
  if (auto tls = cluster::check_cluster_tls(o.tls); !tls)
    return std::fprintf(stderr, "arbor serve: %s\n", tls.error().message.c_str()), kExitInvalid;
  options.tls = o.tls;
  auto backend = cluster::ClusterBackend::connect(std::move(options));
  if (!backend) return std::fprintf(stderr, "arbor serve: %s\n", backend.error().describe().c_str()), kExitFailed;
  auto server = server::Server::start(config, **backend);
  if (!server) return std::fprintf(stderr, "arbor serve: %s\n", server.error().message.c_str()), kExitFailed;
  std::printf("arbor serve: listening on http://%s:%d (router over %zu nodes: %s; model %s, %zu API keys)\n",
              config.host.c_str(), (*server)->port(), nodes->size(), o.nodes.c_str(), (*backend)->model_name().c_str(),
              config.keys.size() + (config.admin_key.empty() ? 0 : 1));
  serve_until_signal(*server, stop_signals, config.drain_seconds);
  backend->reset();
  std::fprintf(stderr, "arbor serve: stopped\n");
  return kExitOk;
}

int run_serve(const ServeOptions& o) {
  server::ServerConfig config;
  if (o.config->count()) {
    auto loaded = server::load_server_config(o.config_file);
    if (!loaded) return std::fprintf(stderr, "arbor serve: %s\n", loaded.error().message.c_str()), kExitInvalid;
    config = std::move(*loaded);
  }
  if (o.host->count()) config.host = o.defaults.host;
  if (o.port->count()) config.port = o.defaults.port;
  if (o.io_threads->count()) config.io_threads = o.defaults.io_threads;
  o.runtime.apply(config.runtime);
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

  if (o.tls.enabled() && o.nodes.empty())
    return std::fprintf(stderr, "arbor serve: --cluster-cert, --cluster-key and --cluster-ca are for a router: give --nodes too\n"),
           kExitInvalid;
  if (!o.nodes.empty()) return run_router(o, config, stop_signals);
  auto runtime = Runtime::create(config.runtime);
  if (!runtime) return std::fprintf(stderr, "arbor serve: %s\n", runtime.error().describe().c_str()), kExitFailed;
  print_device_line("serve", **runtime);
  auto backend = server::make_runtime_backend(**runtime);
  auto server = server::Server::start(config, *backend);
  if (!server) return std::fprintf(stderr, "arbor serve: %s\n", server.error().message.c_str()), kExitFailed;

  if (!config.auth)
    std::fprintf(stderr,
                 "arbor serve: no API keys: one tenant '%s', no authentication, loopback only "
                 "(add \"keys\" and \"admin_key\" to a --config file for tenants)\n",
                 config.default_tenant.c_str());
  std::printf("arbor serve: listening on http://%s:%d (model %s, %zu MiB KV pool, %zu API keys)\n",
              config.host.c_str(), (*server)->port(), (*runtime)->model_name().c_str(),
              (*runtime)->kv_pool_bytes() >> 20,
              config.keys.size() + (config.admin_key.empty() ? 0 : 1));
  serve_until_signal(*server, stop_signals, config.drain_seconds);
  backend.reset();
  runtime->reset();
  std::fprintf(stderr, "arbor serve: stopped\n");
  return kExitOk;
}

Runner setup(CLI::App& app) {
  auto o = std::make_shared<ServeOptions>();
  o->config = app.add_option("--config", o->config_file, "server config file (JSON): API keys, tenants, limits, runtime")
                  ->type_name("FILE");
  o->host = app.add_option("--host", o->defaults.host, "address to bind (other than loopback only with --config keys)")
                ->type_name("ADDR")
                ->capture_default_str();
  o->port = app.add_option("--port", o->defaults.port, "TCP port; 0 = any free port")
                ->type_name("N")
                ->check(integer_in(0, 65535))
                ->capture_default_str();
  o->io_threads = app.add_option("--io-threads", o->defaults.io_threads, "threads serving HTTP connections")
                      ->type_name("N")
                      ->check(integer_in(1, 1024))
                      ->capture_default_str();
  app.add_option("--nodes", o->nodes, "route to these `arbor node`s instead of running a model (see below)")
      ->type_name("HOST:PORT,...");
  declare_cluster_tls(app, o->tls);
  o->runtime.declare(app);
  app.footer(kFooter);
  return [o] { return run_serve(*o); };
}

}  // namespace

ARBOR_CLI_COMMAND("serve", "HTTP server: OpenAI-compatible API, workflow runs, metrics, cache dashboard", setup);

}  // namespace arbor::cli
