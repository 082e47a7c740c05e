// One HTTP/1.1 connection (internal to the server). See server.hpp for the contract.
//
// The connection always reads: bytes that arrive while a request is in flight are kept
// (up to kReadAhead) as the start of the next, pipelined request, and answered in order
// once the current reply is out. Empty lines between requests are skipped (RFC 9112
// 2.2). Reading on also notices the client going away:
//   - a reset: its request is cancelled at once;
//   - an end of stream (FIN): either a half-close (shutdown(SHUT_WR), still reading)
//     or a full close. The connection tells them apart by writing a harmless probe
//     (an interim "100 Continue" before the reply's head, an SSE comment inside a
//     stream): a closed peer answers it with a reset, which cancels the request; a
//     half-closed one gets its answer(s), then the connection closes.
// A request must arrive whole within kReadTimeout of the previous reply (or of the
// connection opening); a request in flight has no deadline.
#pragma once

#include <array>
#include <atomic>
#include <memory>
#include <optional>
#include <string>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "runtime/server/api.hpp"
#include "runtime/server/request_reader.hpp"

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
  // Reading and parsing.
  void await_request();
  void read_more();
  void on_read(boost::beast::error_code ec, std::size_t n);
  void parse();
  void on_parse_error(boost::beast::error_code ec);
  void send_continue();
  void dispatch();
  // The client's end of stream while a request is in flight.
  void on_peer_eof();
  void watch_for_reset();
  void on_peer_error(boost::beast::error_code ec);
  // Writing.
  void wake();
  void on_wake();
  void write_stream(std::string bytes, bool last);
  void write_full(HttpReply reply);
  void write_probe();
  void on_written(boost::beast::error_code ec, bool reply_done);
  void on_reply_done();
  void reply_now(int status, const std::string& body);
  // Closing: finish() after a reply (half-close, drain what the client still sends,
  // then close), close() at once.
  void finish();
  void close();
  void cancel_request();

  boost::beast::tcp_stream stream_;
  boost::asio::steady_timer deadline_;  // bounds the wait for a whole request, and lingering
  std::array<char, 4096> chunk_;        // the pending read's bytes
  RequestReader reader_;                // bytes read and not parsed yet, the request being read
  SessionShared& shared_;
  std::shared_ptr<Exchange> exchange_;  // the request in flight
  std::shared_ptr<boost::beast::http::response<boost::beast::http::string_body>> response_;
  std::string out_;
  unsigned version_ = 11;        // of the request in flight
  bool keep_alive_ = true;
  bool chunked_ = false;         // the stream in flight is framed in chunks (HTTP/1.1)
  bool head_written_ = false;    // of the reply in flight
  bool continue_sent_ = false;   // 100 Continue for the request being read
  bool reading_ = false;         // a read is pending
  bool peer_eof_ = false;        // the client sent its end of stream
  bool probe_due_ = false;       // write something so a closed peer answers with a reset
  bool watching_reset_ = false;  // an error wait is pending
  bool writing_ = false;
  bool lingering_ = false;
  bool closed_ = false;
};

}  // namespace arbor::server
