// `arbor serve`'s HTTP server: Boost.Beast over an Asio thread pool, one Api (and one
// Backend, i.e. one Runtime) behind every connection.
//
//   auto server = Server::start(config, backend);   // binds config.host:config.port
//   ... (*server)->port() ...                       // the bound port (config.port 0 = any)
//   (*server)->stop();                              // drain, cancel, close, join
//
// Connections: HTTP/1.1 keep-alive and pipelining (requests answered in order; see
// http_session.hpp); a request's header and body are read with a timeout and a size
// limit (413); server-sent event streams are written as they are produced, chunked on
// HTTP/1.1 (the connection stays open), closing the connection on HTTP/1.0. A client
// that disconnects while its request is in flight (a stream, or a whole reply not yet
// sent) has its generation cancelled; one that only half-closes still gets its replies.
// A stream opens with its first token: a request that fails before (e.g. too long a
// prompt) gets its own status, as without `stream`.
//
// Threads: config.io_threads run the I/O; each connection is serialised on a strand.
// The backend must outlive the server.
#pragma once

#include <memory>
#include <string>

#include "common/result.hpp"
#include "runtime/server/api.hpp"
#include "runtime/server/backend.hpp"
#include "runtime/server/server_config.hpp"

namespace arbor::server {

class Server {
 public:
  // Errors: invalid_argument (bad host), unsupported (cannot bind/listen: port in use).
  static Result<std::unique_ptr<Server>> start(const ServerConfig& config, Backend& backend);
  ~Server();  // stop()

  int port() const;
  const std::string& host() const;
  Api& api();

  // Stops accepting; new requests get 503. Waits for the work in flight, at most
  // drain_seconds, then cancels what is left: its streams end with an error event
  // (code "server_shutting_down") before [DONE], run event streams with run_finished
  // "cancelled". Closes connections and joins the I/O threads. Returns as soon as the
  // work is done. Idempotent; safe from any thread but an I/O thread.
  void stop();

  struct State;

 private:
  explicit Server(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace arbor::server
