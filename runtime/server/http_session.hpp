// One HTTP connection (internal to the server). See server.hpp for the contract.
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <string>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "runtime/server/api.hpp"

namespace arbor::server {

struct SessionShared {
  Api& api;
  const ServerConfig& config;
  std::atomic<bool> draining{false};
  std::atomic<int> num_sessions{0};
};

class HttpSession : public std::enable_shared_from_this<HttpSession> {
 public:
  HttpSession(boost::asio::ip::tcp::socket socket, SessionShared& shared);
  ~HttpSession();
  void run();
  // Closes the connection if no request is in flight (shutdown).
  void close_if_idle();

 private:
  void do_read();
  void on_header(boost::beast::error_code ec);
  void on_body(boost::beast::error_code ec);
  void on_read_error(boost::beast::error_code ec);
  void dispatch();
  void watch_client();
  void on_watch(boost::beast::error_code ec, std::size_t n);
  void wake();
  void on_wake();
  void write_full(HttpReply reply);
  void on_written(boost::beast::error_code ec, bool full);
  void reply_now(int status, const std::string& body);
  void close();

  boost::beast::tcp_stream stream_;
  boost::asio::steady_timer idle_timer_;  // bounds the wait for the next keep-alive request
  boost::beast::flat_buffer buffer_;
  std::optional<boost::beast::http::request_parser<boost::beast::http::string_body>> parser_;
  SessionShared& shared_;
  std::shared_ptr<Exchange> exchange_;
  std::shared_ptr<boost::beast::http::response<boost::beast::http::string_body>> response_;
  std::string out_;
  bool keep_alive_ = true;
  bool writing_ = false;
  bool watching_ = false;    // a read that detects the client hanging up is pending
  bool read_next_ = false;   // the reply is out; read the next request when the watch ends
  bool stream_ended_ = false;
  bool closed_ = false;
};

}  // namespace arbor::server
