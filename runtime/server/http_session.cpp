#include "runtime/server/http_session.hpp"

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>

namespace arbor::server {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;

namespace {
constexpr auto kReadTimeout = std::chrono::seconds(30);
constexpr std::uint32_t kHeaderLimit = 16 * 1024;

std::string status_line(int status) {
  const auto reason = http::obsolete_reason(static_cast<http::status>(status));
  return "HTTP/1.1 " + std::to_string(status) + " " + std::string(reason.data(), reason.size()) + "\r\n";
}
}  // namespace

HttpSession::HttpSession(net::ip::tcp::socket socket, SessionShared& shared)
    : stream_(std::move(socket)), idle_timer_(stream_.get_executor()), shared_(shared) {
  ++shared_.num_sessions;
}

HttpSession::~HttpSession() {
  if (exchange_) exchange_->abandon();
  --shared_.num_sessions;
}

void HttpSession::run() {
  net::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->do_read(); });
}

void HttpSession::close_if_idle() {
  net::post(stream_.get_executor(), [self = shared_from_this()] {
    self->keep_alive_ = false;
    if (!self->exchange_ && !self->writing_) self->close();
  });
}

void HttpSession::do_read() {
  if (closed_) return;
  if (shared_.draining) return close();
  parser_.emplace();
  parser_->header_limit(kHeaderLimit);
  parser_->body_limit(shared_.config.max_body_bytes);
  stream_.expires_after(kReadTimeout);
  http::async_read_header(stream_, buffer_, *parser_,
                          [self = shared_from_this()](beast::error_code ec, std::size_t) { self->on_header(ec); });
}

void HttpSession::on_header(beast::error_code ec) {
  if (ec) return on_read_error(ec);
  const auto& req = parser_->get();
  if (beast::iequals(req[http::field::expect], "100-continue")) {
    // The client waits for this before sending the body.
    auto cont = std::make_shared<std::string>("HTTP/1.1 100 Continue\r\n\r\n");
    net::async_write(stream_, net::buffer(*cont), [self = shared_from_this(), cont](beast::error_code ec, std::size_t) {
      if (ec) return self->close();
      http::async_read(self->stream_, self->buffer_, *self->parser_,
                       [self](beast::error_code ec, std::size_t) { self->on_body(ec); });
    });
    return;
  }
  http::async_read(stream_, buffer_, *parser_, [self = shared_from_this()](beast::error_code ec, std::size_t) {
    self->on_body(ec);
  });
}

void HttpSession::on_body(beast::error_code ec) {
  if (ec) return on_read_error(ec);
  dispatch();
}

void HttpSession::on_read_error(beast::error_code ec) {
  keep_alive_ = false;
  if (ec == http::error::body_limit)
    return reply_now(413, error_body(payload_too_large(shared_.config.max_body_bytes)));
  if (ec == http::error::header_limit) {
    ApiError e{431, "invalid_request_error", "header_too_large",
               "request header is larger than " + std::to_string(kHeaderLimit) + " bytes", ""};
    return reply_now(431, error_body(e));
  }
  if (ec.category() == beast::error_code(http::error::end_of_stream).category() && ec != http::error::end_of_stream &&
      ec != http::error::partial_message) {
    return reply_now(400, error_body(bad_request("malformed_http", "malformed HTTP request: " + ec.message())));
  }
  close();  // end of stream, timeout, reset: nothing to answer
}

void HttpSession::dispatch() {
  auto& req = parser_->get();
  keep_alive_ = req.keep_alive() && !shared_.draining;
  HttpRequest request;
  request.method = std::string(req.method_string());
  request.target = std::string(req.target());
  request.authorization = std::string(req[http::field::authorization]);
  request.body = std::move(req.body());
  std::weak_ptr<HttpSession> weak = weak_from_this();
  exchange_ = std::make_shared<Exchange>([weak] {
    if (auto self = weak.lock()) self->wake();
  });
  stream_.expires_never();  // a generation may take long; the watch detects hang-ups
  watch_client();
  try {
    shared_.api.handle(request, exchange_);
  } catch (const std::exception& e) {
    // A bug, not bad input: answer 500 rather than lose the connection or the process.
    exchange_->respond(HttpReply{500, "application/json",
                                 error_body(ApiError{500, "server_error", "internal_error", e.what(), ""}), {}});
  }
}

void HttpSession::watch_client() {
  if (watching_ || buffer_.size() > 0) return;  // pipelined bytes already waiting: no watch
  watching_ = true;
  stream_.async_read_some(buffer_.prepare(4096), [self = shared_from_this()](beast::error_code ec, std::size_t n) {
    self->on_watch(ec, n);
  });
}

void HttpSession::on_watch(beast::error_code ec, std::size_t n) {
  watching_ = false;
  if (ec) {
    // The client hung up (or the socket was closed): cancel its work.
    if (exchange_) exchange_->abandon();
    return close();
  }
  buffer_.commit(n);
  if (read_next_) {
    read_next_ = false;
    idle_timer_.cancel();
    do_read();
  }
}

void HttpSession::wake() {
  net::post(stream_.get_executor(), [self = shared_from_this()] { self->on_wake(); });
}

void HttpSession::on_wake() {
  if (closed_ || writing_ || !exchange_) return;
  Exchange::Taken t = exchange_->take();
  if (t.mode == Exchange::Mode::pending) return;
  if (t.mode == Exchange::Mode::full) {
    if (t.head) write_full(std::move(t.reply));
    return;
  }
  out_.clear();
  if (t.head) {
    out_ = status_line(200) + "Content-Type: " + t.reply.content_type + "\r\nConnection: close\r\n";
    for (const auto& [k, v] : t.reply.headers) out_ += k + ": " + v + "\r\n";
    out_ += "X-Accel-Buffering: no\r\n\r\n";
  }
  out_ += t.data;
  stream_ended_ = t.ended;
  if (out_.empty()) {
    if (stream_ended_) close();
    return;
  }
  writing_ = true;
  net::async_write(stream_, net::buffer(out_), [self = shared_from_this()](beast::error_code ec, std::size_t) {
    self->on_written(ec, false);
  });
}

void HttpSession::write_full(HttpReply reply) {
  response_ = std::make_shared<http::response<http::string_body>>(static_cast<http::status>(reply.status), 11);
  response_->set(http::field::server, "arbor");
  response_->set(http::field::content_type, reply.content_type);
  for (const auto& [k, v] : reply.headers) response_->set(k, v);
  response_->keep_alive(keep_alive_ && !shared_.draining);
  response_->body() = std::move(reply.body);
  response_->prepare_payload();
  writing_ = true;
  http::async_write(stream_, *response_, [self = shared_from_this()](beast::error_code ec, std::size_t) {
    self->on_written(ec, true);
  });
}

void HttpSession::reply_now(int status, const std::string& body) {
  exchange_ = std::make_shared<Exchange>(nullptr);
  write_full(HttpReply{status, "application/json", body, {}});
}

void HttpSession::on_written(beast::error_code ec, bool full) {
  writing_ = false;
  if (ec) {
    if (exchange_) exchange_->abandon();
    return close();
  }
  if (!full) return on_wake();  // more stream output, or the end
  const bool keep = response_->keep_alive();
  response_.reset();
  exchange_.reset();
  if (!keep) return close();
  if (watching_) {
    // The watch read completes with the next request's bytes (or EOF); it has no
    // timeout of its own, so an idle client is dropped by this timer.
    read_next_ = true;
    idle_timer_.expires_after(kReadTimeout);
    idle_timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
      if (!ec && self->read_next_) self->close();
    });
  } else {
    do_read();
  }
}

void HttpSession::close() {
  if (closed_) return;
  closed_ = true;
  if (exchange_) exchange_->abandon();
  idle_timer_.cancel();
  beast::error_code ec;
  stream_.socket().shutdown(net::ip::tcp::socket::shutdown_both, ec);
  stream_.close();
}

}  // namespace arbor::server
