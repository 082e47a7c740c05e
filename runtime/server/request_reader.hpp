// Turns the bytes one connection receives into HTTP requests (internal to the server):
// the bytes not parsed yet, and Beast's parser for the request being read, with the
// server's limits (kHeaderLimit of header, the configured max_body_bytes of body).
// Empty lines before a request line are skipped (RFC 9112 2.2). The session feeds it
// from the socket; the HTTP fuzz target feeds it the fuzzer's bytes, so both go
// through the same parsing.
//
// Invariant (the contract of Beast's parser): once the parser has asked for more bytes,
// it is not given the same bytes again, only more (after append()). Fed the same bytes
// twice, its chunked-body state breaks its own assertions: a request whose last chunk
// "0\r\n" came without its final CRLF aborted a build with assertions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>

namespace arbor::server {

class RequestReader {
 public:
  using Request = boost::beast::http::request<boost::beast::http::string_body>;
  static constexpr std::uint32_t kHeaderLimit = 16 * 1024;

  enum class Status {
    request,    // a whole request is read: take() it
    need_more,  // the bytes so far are not a whole request (or there are none)
    error,      // malformed, or over a limit: ec says which; the connection cannot go on
  };

  explicit RequestReader(std::size_t max_body_bytes) : max_body_bytes_(max_body_bytes) {}

  // Bytes received, after those appended before.
  void append(std::string_view bytes);
  // Bytes received and not yet parsed (the start of a pipelined request, say).
  std::size_t buffered() const { return buffer_.size(); }

  // Parses what is buffered, up to the end of the next request.
  Status read(boost::beast::error_code& ec);
  // The request read() has completed; the next read() starts a new one.
  Request take();
  // Drops the request being read (after an error).
  void reset() { parser_.reset(); }

  // The request being read, once its header is complete (for "Expect: 100-continue").
  bool header_done() const { return parser_ && parser_->is_header_done(); }
  const Request& partial() const { return parser_->get(); }

 private:
  void start_request();

  std::size_t max_body_bytes_;
  boost::beast::flat_buffer buffer_;
  std::optional<boost::beast::http::request_parser<boost::beast::http::string_body>> parser_;
  bool starved_ = false;  // the parser asked for more bytes and none came since
};

}  // namespace arbor::server
