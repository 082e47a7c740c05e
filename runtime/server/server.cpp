#include "runtime/server/server.hpp"

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <list>
#include <mutex>
#include <thread>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>

#include "common/log.hpp"
#include "runtime/server/http_session.hpp"

namespace arbor::server {

namespace net = boost::asio;
using tcp = net::ip::tcp;

// Posts follow-up work from backend threads (a run's events) to the I/O pool. Such a
// callback may come at any time, also while and after the server stops: each post runs
// whole under the mutex, and stop() closes the gate (under the same mutex) before the
// io_context goes, so no post is half-done in, or made into, a destroyed io_context.
// Work posted after the close is dropped (its run is no longer the server's concern).
struct PostGate {
  void post(std::function<void()> fn) {
    std::lock_guard lock(mutex);
    if (ioc != nullptr) net::post(*ioc, std::move(fn));
  }
  void close() {
    std::lock_guard lock(mutex);
    ioc = nullptr;
  }
  std::mutex mutex;
  net::io_context* ioc = nullptr;
};

struct Server::State {
  State(const ServerConfig& c, Backend& backend)
      : config(c), api(config, backend), shared{api, config} {}

  // Runs on acceptor_strand (but for the first call, before the I/O threads start).
  void accept() {
    acceptor.async_accept(net::make_strand(ioc), [this](boost::system::error_code ec, tcp::socket socket) {
      if (ec) {
        if (!acceptor.is_open()) return;  // stopped
        // Out of descriptors and the like: keep serving the connections we have.
        return accept();
      }
      auto session = std::make_shared<HttpSession>(std::move(socket), shared);
      {
        std::lock_guard lock(sessions_mutex);
        std::erase_if(sessions, [](const auto& w) { return w.expired(); });
        sessions.push_back(session);
      }
      session->run();
      accept();
    });
  }

  template <class Pred>
  bool wait_until(double seconds, Pred done) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (!done()) {
      if (std::chrono::steady_clock::now() >= deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return true;
  }

  ServerConfig config;
  Api api;
  SessionShared shared;
  net::io_context ioc;
  // Keeps the I/O threads running until stop() is done with them: with no connection
  // open, a drain would otherwise leave them without work, and they would return
  // before a finishing run's settlement (posted to them) releases its slot.
  net::executor_work_guard<net::io_context::executor_type> work = net::make_work_guard(ioc);
  // Every operation on the acceptor runs on this strand: the accept handler (which
  // re-arms async_accept) and stop()'s close. An acceptor is not thread-safe, and
  // with several I/O threads a close run elsewhere raced with the re-arm.
  net::strand<net::io_context::executor_type> acceptor_strand = net::make_strand(ioc);
  tcp::acceptor acceptor{acceptor_strand};
  std::vector<std::thread> threads;
  std::mutex sessions_mutex;
  std::list<std::weak_ptr<HttpSession>> sessions;
  std::shared_ptr<PostGate> gate = std::make_shared<PostGate>();  // shared with the Api's defer
  std::once_flag stop_once;
  int port = 0;
};

Result<std::unique_ptr<Server>> Server::start(const ServerConfig& config, Backend& backend) {
  auto state = std::make_unique<State>(config, backend);
  boost::system::error_code ec;
  const auto address = net::ip::make_address(config.host, ec);
  if (ec) return fail(ErrorCode::invalid_argument, "host '" + config.host + "' is not an IP address; use e.g. 127.0.0.1");
  const tcp::endpoint endpoint(address, static_cast<unsigned short>(config.port));
  auto& acceptor = state->acceptor;
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec)
    return fail(ErrorCode::unsupported, "cannot listen on " + config.host + ":" + std::to_string(config.port) + ": " +
                                            ec.message() + "; pick another --port or stop the other server");
  state->port = acceptor.local_endpoint().port();
  State* s = state.get();
  s->gate->ioc = &s->ioc;
  s->api.set_defer([gate = s->gate](std::function<void()> fn) { gate->post(std::move(fn)); });
  s->accept();
  for (int i = 0; i < std::max(1, config.io_threads); ++i) s->threads.emplace_back([s] { s->ioc.run(); });
  return std::unique_ptr<Server>(new Server(std::move(state)));
}

Server::Server(std::unique_ptr<State> state) : state_(std::move(state)) {}
Server::~Server() { stop(); }

int Server::port() const { return state_->port; }
const std::string& Server::host() const { return state_->config.host; }
Api& Server::api() { return state_->api; }

void Server::stop() {
  std::call_once(state_->stop_once, [s = state_.get()] {
    net::post(s->acceptor_strand, [s] {
      boost::system::error_code ec;
      s->acceptor.close(ec);
    });
    s->shared.draining = true;
    s->api.begin_drain();
    if (!s->wait_until(s->config.drain_seconds, [s] { return s->api.inflight() == 0; })) {
      log::logger().info("serve: {} requests still running after the {} s drain; cancelling them", s->api.inflight(),
                         s->config.drain_seconds);
      s->api.cancel_all();
      s->wait_until(30, [s] { return s->api.inflight() == 0; });
    }
    {
      std::lock_guard lock(s->sessions_mutex);
      for (auto& w : s->sessions)
        if (auto session = w.lock()) session->close_if_idle();
    }
    // Streams write their last events and close; then nothing is left to run.
    if (!s->wait_until(5, [s] { return s->shared.num_sessions == 0; }))
      log::logger().info("serve: {} connections still open at shutdown", s->shared.num_sessions.load());
    s->work.reset();
    s->ioc.stop();
    for (auto& t : s->threads) t.join();
    s->gate->close();
  });
}

}  // namespace arbor::server
