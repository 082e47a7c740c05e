// `arbor node --listen HOST:PORT`: one runtime (model, cache actor) served to
// `arbor serve --nodes` routers over CAF's network layer (the middleman): publishes
// the node actor (runtime/cluster/node_actor.hpp) at HOST:PORT. SIGINT/SIGTERM cancel
// what is in flight and exit 0.
#include <csignal>
#include <cstdio>
#include <memory>

#include <pthread.h>

#include "runtime/cli/cluster_tls_options.hpp"
#include "runtime/cli/command.hpp"
#include "runtime/cli/options.hpp"
#include "runtime/cli/runtime_options.hpp"
#include "runtime/cluster/cluster_backend.hpp"
#include "runtime/cluster/net_config.hpp"
#include "runtime/cluster/node_actor.hpp"

namespace arbor::cli {
namespace {

constexpr const char* kFooter =
    "Serves generations and workflow runs to routers: `arbor serve --nodes HOST:PORT,...` routes each to the\n"
    "node holding the longest cached prefix of its prompt. The protocol is CAF's (caf::io). With\n"
    "--cluster-cert/--cluster-key/--cluster-ca it runs inside mutual TLS: only a router (or node) with a\n"
    "certificate the cluster's CA signed can connect. Without them it is plain TCP, unauthenticated, and the\n"
    "node listens on loopback only. Port 0 picks a free port (printed).\n"
    "SIGINT/SIGTERM cancel what is in flight, then exit. Exit codes: 0 stopped by a signal, 1 could not\n"
    "start, 2 invalid input.";

struct NodeOptions {
  std::string listen = "127.0.0.1:7001";
  cluster::ClusterTls tls;
  RuntimeOptions runtime;
};

int run_node(const NodeOptions& o) {
  auto at = cluster::parse_endpoint(o.listen, true);
  if (!at) return std::fprintf(stderr, "arbor node: --listen: %s\n", at.error().message.c_str()), kExitInvalid;
  if (auto tls = cluster::check_cluster_tls(o.tls); !tls)
    return std::fprintf(stderr, "arbor node: %s\n", tls.error().message.c_str()), kExitInvalid;
  if (!o.tls.enabled() && !is_loopback(at->host))
    return std::fprintf(stderr,
                        "arbor node: refusing to listen on %s without authentication; give --cluster-cert, "
                        "--cluster-key and --cluster-ca (mutual TLS), or listen on 127.0.0.1\n",
                        at->host.c_str()),
           kExitInvalid;
  RuntimeConfig config;
  o.runtime.apply(config);

  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  auto runtime = Runtime::create(config);
  if (!runtime) return std::fprintf(stderr, "arbor node: %s\n", runtime.error().describe().c_str()), kExitFailed;
  print_device_line("node", **runtime);
  {
    cluster::NetConfig net(o.tls);
    caf::actor_system system{net};
    auto node = cluster::spawn_node_actor(system, **runtime, cluster::node_info(**runtime));
    auto port = cluster::publish_node(system, node, at->host, at->port);
    if (!port) {
      caf::anon_send_exit(node, caf::exit_reason::user_shutdown);
      return std::fprintf(stderr, "arbor node: cannot listen on %s: %s; pick another --listen port\n",
                          o.listen.c_str(), system.render(port.error()).c_str()),
             kExitFailed;
    }
    std::printf("arbor node: listening on %s:%u (model %s, %zu MiB KV pool, %s)\n", at->host.c_str(), unsigned(*port),
                (*runtime)->model_name().c_str(), (*runtime)->kv_pool_bytes() >> 20,
                o.tls.enabled() ? "mutual TLS" : "plain TCP, no authentication");
    std::fflush(stdout);

    int signal = 0;
    sigwait(&stop_signals, &signal);
    std::fprintf(stderr, "arbor node: %s: stopping\n", signal == SIGINT ? "SIGINT" : "SIGTERM");
    // The node actor goes first (it uses the runtime), then the runtime (its last
    // callbacks still send to routers through this system), then the system.
    caf::scoped_actor self{system};
    self->monitor(node);
    caf::anon_send_exit(node, caf::exit_reason::user_shutdown);
    self->receive([](caf::down_msg&) {});
    node = nullptr;
    runtime->reset();
  }
  std::fprintf(stderr, "arbor node: stopped\n");
  return kExitOk;
}

Runner setup(CLI::App& app) {
  auto o = std::make_shared<NodeOptions>();
  app.add_option("--listen", o->listen, "address and port to serve routers on (port 0 = any free port)")
      ->type_name("HOST:PORT")
      ->capture_default_str();
  declare_cluster_tls(app, o->tls);
  o->runtime.declare(app);
  app.footer(kFooter);
  return [o] { return run_node(*o); };
}

}  // namespace

ARBOR_CLI_COMMAND("node", "a cluster node: one runtime served to `arbor serve --nodes` routers over CAF's network layer",
                  setup);

}  // namespace arbor::cli
