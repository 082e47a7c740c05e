#include "runtime/server/request_reader.hpp"

#include <utility>

#include <boost/asio/buffer.hpp>

namespace arbor::server {

namespace http = boost::beast::http;

void RequestReader::append(std::string_view bytes) {
  buffer_.commit(boost::asio::buffer_copy(buffer_.prepare(bytes.size()), boost::asio::buffer(bytes)));
  starved_ = false;
}

void RequestReader::start_request() {
  // RFC 9112 2.2: empty lines before a request line are ignored.
  const auto* p = static_cast<const char*>(buffer_.data().data());
  std::size_t n = 0;
  while (n < buffer_.size() && (p[n] == '\r' || p[n] == '\n')) ++n;
  buffer_.consume(n);
  if (buffer_.size() == 0) return;
  parser_.emplace();
  starved_ = false;
  parser_->header_limit(kHeaderLimit);
  parser_->body_limit(max_body_bytes_);
  parser_->eager(true);
}

RequestReader::Status RequestReader::read(boost::beast::error_code& ec) {
  ec = {};
  for (;;) {
    if (!parser_) start_request();
    if (!parser_ || starved_) return Status::need_more;
    const std::size_t used = parser_->put(buffer_.data(), ec);
    buffer_.consume(used);
    if (ec == http::error::need_more) {
      ec = {};
      starved_ = true;
      return Status::need_more;
    }
    if (ec) return Status::error;
    if (parser_->is_done()) return Status::request;
    if (used == 0) return Status::need_more;
  }
}

RequestReader::Request RequestReader::take() {
  Request request = parser_->release();
  parser_.reset();
  return request;
}

}  // namespace arbor::server
