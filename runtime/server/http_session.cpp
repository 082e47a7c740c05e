#include "runtime/server/http_session.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>

namespace arbor::server {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;

namespace {
constexpr auto kReadTimeout = std::chrono::seconds(30);    // to receive a whole request
constexpr auto kLingerTimeout = std::chrono::seconds(2);   // to drain the client before closing
constexpr std::size_t kReadAhead = 64 * 1024;  // pipelined bytes kept while a request is in flight
constexpr std::string_view kLastChunk = "0\r\n\r\n";
constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
constexpr std::string_view kSseProbe = ": ping\n\n";  // an SSE comment: clients skip it

std::string status_line(int status) {
  const auto reason = http::obsolete_reason(static_cast<http::status>(status));
  return "HTTP/1.1 " + std::to_string(status) + " " + std::string(reason.data(), reason.size()) + "\r\n";
}

std::string chunk(std::string_view data) {
  char size[20];
  std::snprintf(size, sizeof size, "%zx\r\n", data.size());
  return std::string(size) + std::string(data) + "\r\n";
}

// Whether the peer reset the connection (Linux: the socket is in state CLOSE).
bool peer_reset(net::ip::tcp::socket& socket) {
  tcp_info info{};
  socklen_t len = sizeof info;
  if (getsockopt(socket.native_handle(), IPPROTO_TCP, TCP_INFO, &info, &len) != 0) return true;
  return info.tcpi_state == TCP_CLOSE;
}

bool expects_continue(const http::request<http::string_body>& req) {
  return beast::iequals(req[http::field::expect], "100-continue");
}
}  // namespace

HttpSession::HttpSession(net::ip::tcp::socket socket, SessionShared& shared)
    : stream_(std::move(socket)),
      deadline_(stream_.get_executor()),
      reader_(shared.config.max_body_bytes),
      shared_(shared) {
  ++shared_.num_sessions;
}

HttpSession::~HttpSession() {
  cancel_request();
  --shared_.num_sessions;
}

void HttpSession::run() {
  net::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->await_request(); });
}

void HttpSession::close_if_idle() {
  net::post(stream_.get_executor(), [self = shared_from_this()] {
    self->keep_alive_ = false;
    if (!self->exchange_ && !self->writing_) self->close();
  });
}

// ---- Reading ---------------------------------------------------------------------

void HttpSession::await_request() {
  if (closed_) return;
  if (shared_.draining) return finish();
  deadline_.expires_after(kReadTimeout);
  deadline_.async_wait([self = shared_from_this()](beast::error_code ec) {
    // A stale expiry (the timer was re-armed meanwhile) is not a timeout.
    if (ec || self->deadline_.expiry() > std::chrono::steady_clock::now()) return;
    if (self->lingering_ || !self->exchange_) self->close();
  });
  parse();
}

// Invariant: while a request is in flight, a read or an error wait is pending. It keeps
// the session alive (the exchange holds it weakly) and notices the client going away.
void HttpSession::read_more() {
  if (reading_ || closed_ || peer_eof_) return;
  if (exchange_ && reader_.buffered() >= kReadAhead) return watch_for_reset();  // enough: the client waits
  reading_ = true;
  // Into a buffer of its own: parse() may consume the reader's bytes while this read is pending.
  stream_.async_read_some(net::buffer(chunk_), [self = shared_from_this()](beast::error_code ec, std::size_t n) {
    self->on_read(ec, n);
  });
}

void HttpSession::on_read(beast::error_code ec, std::size_t n) {
  reading_ = false;
  if (closed_) return;
  if (lingering_) return ec ? close() : read_more();  // what the client still sends is dropped
  if (ec == net::error::eof) {
    peer_eof_ = true;
    return exchange_ ? on_peer_eof() : parse();
  }
  if (ec) {
    // Reset (or the socket failed): the client is gone, its request is cancelled.
    cancel_request();
    return close();
  }
  reader_.append(std::string_view(chunk_.data(), n));
  if (exchange_) return read_more();  // read ahead: the next request waits for this reply
  parse();
}

// Parses what is buffered, between requests only: a request in flight leaves the bytes
// for later. Dispatches a complete request, or reads on.
void HttpSession::parse() {
  if (closed_ || lingering_ || exchange_) return;
  beast::error_code ec;
  switch (reader_.read(ec)) {
    case RequestReader::Status::request: return dispatch();
    case RequestReader::Status::error: return on_parse_error(ec);
    case RequestReader::Status::need_more: break;
  }
  if (peer_eof_) return close();  // nothing more will come: a partial request is dropped
  if (reader_.header_done() && !continue_sent_ && expects_continue(reader_.partial())) send_continue();
  read_more();
}

void HttpSession::on_parse_error(beast::error_code ec) {
  keep_alive_ = false;
  reader_.reset();
  if (ec == http::error::body_limit)
    return reply_now(413, error_body(payload_too_large(shared_.config.max_body_bytes)));
  if (ec == http::error::header_limit) {
    ApiError e{431, "invalid_request_error", "header_too_large",
               "request header is larger than " + std::to_string(RequestReader::kHeaderLimit) + " bytes", ""};
    return reply_now(431, error_body(e));
  }
  reply_now(400, error_body(bad_request("malformed_http", "malformed HTTP request: " + ec.message())));
}

// The client waits for this before sending the body.
void HttpSession::send_continue() {
  continue_sent_ = true;
  if (writing_) return;
  writing_ = true;
  net::async_write(stream_, net::buffer(kContinue.data(), kContinue.size()),
                   [self = shared_from_this()](beast::error_code ec, std::size_t) {
                     self->writing_ = false;
                     if (ec) return self->close();
                     if (self->exchange_) self->on_wake();
                   });
}

void HttpSession::dispatch() {
  deadline_.cancel();
  RequestReader::Request req = reader_.take();
  continue_sent_ = false;  // for the next request
  version_ = req.version();
  keep_alive_ = req.keep_alive() && !shared_.draining;
  HttpRequest request;
  request.method = std::string(req.method_string());
  request.target = std::string(req.target());
  request.authorization = std::string(req[http::field::authorization]);
  request.body = std::move(req.body());
  head_written_ = chunked_ = probe_due_ = false;
  std::weak_ptr<HttpSession> weak = weak_from_this();
  exchange_ = std::make_shared<Exchange>([weak] {
    if (auto self = weak.lock()) self->wake();
  });
  read_more();  // read ahead: notices a hang-up, keeps a pipelined request
  try {
    shared_.api.handle(request, exchange_);
  } catch (const std::exception& e) {
    // A bug, not bad input: answer 500 rather than lose the connection or the process.
    exchange_->respond(HttpReply{500, "application/json",
                                 error_body(ApiError{500, "server_error", "internal_error", e.what(), ""}), {}});
  }
  // The request came with the client's end of stream: after handle(), so that a reply
  // it gave at once is the probe.
  if (peer_eof_) on_peer_eof();
}

// ---- The client's end of stream while a request is in flight ---------------------

// A half-close and a hang-up look alike until something is written: arm the error
// wait first (the reset can only answer a later write), then make sure a write follows.
void HttpSession::on_peer_eof() {
  probe_due_ = true;
  watch_for_reset();
  if (!writing_) on_wake();
}

void HttpSession::watch_for_reset() {
  if (watching_reset_ || closed_) return;
  watching_reset_ = true;
  stream_.socket().async_wait(net::ip::tcp::socket::wait_error,
                              [self = shared_from_this()](beast::error_code ec) { self->on_peer_error(ec); });
}

void HttpSession::on_peer_error(beast::error_code ec) {
  watching_reset_ = false;
  if (closed_ || lingering_ || ec == net::error::operation_aborted) return;
  if (peer_reset(stream_.socket())) {
    cancel_request();
    return close();
  }
  watch_for_reset();  // an event that was not a reset (urgent data): keep watching
}

// ---- Writing ---------------------------------------------------------------------

void HttpSession::wake() {
  net::post(stream_.get_executor(), [self = shared_from_this()] { self->on_wake(); });
}

void HttpSession::on_wake() {
  if (closed_ || writing_ || !exchange_) return;
  Exchange::Taken t = exchange_->take();
  if (t.mode == Exchange::Mode::full) {
    if (t.head) write_full(std::move(t.reply));
    return;
  }
  std::string bytes;
  if (t.mode == Exchange::Mode::stream) {
    if (t.head) {
      head_written_ = true;
      // HTTP/1.1 streams are chunked and keep the connection; HTTP/1.0 ones end with it.
      chunked_ = version_ >= 11;
      keep_alive_ = keep_alive_ && chunked_ && !shared_.draining;
      bytes = status_line(200) + "Server: arbor\r\nContent-Type: " + t.reply.content_type + "\r\n";
      if (chunked_) bytes += "Transfer-Encoding: chunked\r\n";
      if (!keep_alive_) bytes += "Connection: close\r\n";
      for (const auto& [k, v] : t.reply.headers) bytes += k + ": " + v + "\r\n";
      bytes += "X-Accel-Buffering: no\r\n\r\n";
    }
    if (!t.data.empty()) bytes += chunked_ ? chunk(t.data) : t.data;
    if (t.ended && chunked_) bytes += kLastChunk;
    if (!bytes.empty()) return write_stream(std::move(bytes), t.ended);
    if (t.ended) return on_reply_done();
  }
  if (probe_due_) write_probe();
}

void HttpSession::write_stream(std::string bytes, bool last) {
  probe_due_ = false;  // any write after the client's end of stream is a probe
  out_ = std::move(bytes);
  writing_ = true;
  net::async_write(stream_, net::buffer(out_), [self = shared_from_this(), last](beast::error_code ec, std::size_t) {
    self->on_written(ec, last);
  });
}

void HttpSession::write_full(HttpReply reply) {
  probe_due_ = false;
  head_written_ = true;
  keep_alive_ = keep_alive_ && !shared_.draining;
  response_ = std::make_shared<http::response<http::string_body>>(static_cast<http::status>(reply.status), 11);
  response_->set(http::field::server, "arbor");
  response_->set(http::field::content_type, reply.content_type);
  for (const auto& [k, v] : reply.headers) response_->set(k, v);
  response_->keep_alive(keep_alive_);
  response_->body() = std::move(reply.body);
  response_->prepare_payload();
  writing_ = true;
  http::async_write(stream_, *response_, [self = shared_from_this()](beast::error_code ec, std::size_t) {
    self->on_written(ec, true);
  });
}

// Something a live client ignores and a closed one answers with a reset: an interim
// 100 before the reply's head, an SSE comment inside a stream. HTTP/1.0 clients may
// not get a 1xx: for them the end of stream before the head is a hang-up (as nginx
// and llama-server take every end of stream).
void HttpSession::write_probe() {
  if (head_written_) return write_stream(chunked_ ? chunk(kSseProbe) : std::string(kSseProbe), false);
  if (version_ >= 11) return write_stream(std::string(kContinue), false);
  cancel_request();
  close();
}

void HttpSession::on_written(beast::error_code ec, bool reply_done) {
  writing_ = false;
  if (closed_) return;
  if (ec) {
    cancel_request();
    return close();
  }
  if (reply_done) return on_reply_done();
  on_wake();  // more stream output, the end, or nothing yet
}

// The reply is out: the next request (maybe already buffered) is answered next.
void HttpSession::on_reply_done() {
  const bool keep = keep_alive_ && !shared_.draining;
  exchange_.reset();
  response_.reset();
  out_.clear();
  head_written_ = probe_due_ = false;
  if (!keep) return finish();
  await_request();
}

void HttpSession::reply_now(int status, const std::string& body) {
  exchange_ = std::make_shared<Exchange>(nullptr);
  exchange_->respond(HttpReply{status, "application/json", body, {}});
  on_wake();
}

// ---- Closing ---------------------------------------------------------------------

// After the last reply: closing with unread bytes would reset the connection and could
// destroy the reply in the client's buffers (RFC 9112 9.6). So half-close, read and
// drop what still comes (at most kLingerTimeout), then close.
void HttpSession::finish() {
  if (closed_ || lingering_) return;
  if (peer_eof_) return close();
  lingering_ = true;
  beast::error_code ec;
  stream_.socket().shutdown(net::ip::tcp::socket::shutdown_send, ec);
  deadline_.expires_after(kLingerTimeout);
  deadline_.async_wait([self = shared_from_this()](beast::error_code ec) {
    if (!ec) self->close();
  });
  read_more();
}

void HttpSession::close() {
  if (closed_) return;
  closed_ = true;
  cancel_request();
  deadline_.cancel();
  beast::error_code ec;
  stream_.socket().shutdown(net::ip::tcp::socket::shutdown_both, ec);
  stream_.close();
}

void HttpSession::cancel_request() {
  if (exchange_) exchange_->abandon();
}

}  // namespace arbor::server
