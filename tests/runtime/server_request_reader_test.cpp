// RequestReader: the server's bytes-to-requests step, fed as a socket would feed it
// (whole, split at every byte, pipelined), against requests written out by hand.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/server/request_reader.hpp"

namespace arbor::server {
namespace {

namespace http = boost::beast::http;
using Status = RequestReader::Status;

const std::string kChunked =
    "POST /v1/chat/completions HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
    "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n";

// Every request the bytes hold, fed in pieces of `piece` bytes, reading after each.
std::vector<RequestReader::Request> read_all(const std::string& bytes, std::size_t piece, Status* last = nullptr) {
  RequestReader reader(1024);
  std::vector<RequestReader::Request> out;
  Status status = Status::need_more;
  for (std::size_t at = 0; at < bytes.size(); at += piece) {
    reader.append(std::string_view(bytes).substr(at, piece));
    boost::beast::error_code ec;
    while ((status = reader.read(ec)) == Status::request) out.push_back(reader.take());
    if (status == Status::error) break;
  }
  if (last) *last = status;
  return out;
}

TEST(ServerRequestReader, AChunkedBodySplitAtEveryByteReadsAsWhole) {
  for (std::size_t piece = 1; piece <= kChunked.size(); ++piece) {
    Status last;
    const auto requests = read_all(kChunked, piece, &last);
    ASSERT_EQ(requests.size(), 1u) << "pieces of " << piece;
    EXPECT_EQ(requests[0].body(), "hello world") << "pieces of " << piece;
    EXPECT_EQ(requests[0].target(), "/v1/chat/completions");
    EXPECT_EQ(last, Status::need_more);
  }
}

TEST(ServerRequestReader, ALastChunkWithoutItsCrlfWaitsHoweverOftenItIsRead) {
  // The bytes a client half-closing mid-request leaves: read again with nothing new
  // (as at the end of stream), the reader waits; the missing CRLF completes it.
  const std::string head = kChunked.substr(0, kChunked.size() - 2);
  RequestReader reader(1024);
  reader.append(head);
  boost::beast::error_code ec;
  EXPECT_EQ(reader.read(ec), Status::need_more);
  EXPECT_EQ(reader.read(ec), Status::need_more);
  EXPECT_FALSE(ec);
  reader.append("\r\n");
  ASSERT_EQ(reader.read(ec), Status::request);
  EXPECT_EQ(reader.take().body(), "hello world");
  EXPECT_EQ(reader.buffered(), 0u);
}

TEST(ServerRequestReader, PipelinedRequestsComeOutInOrderPastEmptyLines) {
  const std::string get = "GET /health HTTP/1.1\r\nHost: a\r\n\r\n";
  const std::string post = "POST /v1/runs HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\n{}";
  const auto requests = read_all("\r\n" + get + "\r\n\r\n" + post + get, 4096);
  ASSERT_EQ(requests.size(), 3u);
  EXPECT_EQ(requests[0].target(), "/health");
  EXPECT_EQ(requests[1].method(), http::verb::post);
  EXPECT_EQ(requests[1].body(), "{}");
  EXPECT_EQ(requests[2].target(), "/health");
}

TEST(ServerRequestReader, LimitsAndMalformedBytesAreErrorsThatSayWhich) {
  RequestReader small_body(4);
  small_body.append("POST /v1/runs HTTP/1.1\r\nContent-Length: 5\r\n\r\n12345");
  boost::beast::error_code ec;
  EXPECT_EQ(small_body.read(ec), Status::error);
  EXPECT_EQ(ec, http::error::body_limit);

  RequestReader big_header(1024);
  big_header.append("GET / HTTP/1.1\r\nX: " + std::string(RequestReader::kHeaderLimit, 'x') + "\r\n\r\n");
  EXPECT_EQ(big_header.read(ec), Status::error);
  EXPECT_EQ(ec, http::error::header_limit);

  RequestReader garbage(1024);
  garbage.append("GET / HTTP/9\x01\r\n\r\n");
  EXPECT_EQ(garbage.read(ec), Status::error);
  EXPECT_TRUE(ec);
}

TEST(ServerRequestReader, AHeaderAwaitingItsBodyIsVisibleForExpectContinue) {
  RequestReader reader(1024);
  reader.append("POST /v1/runs HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n");
  boost::beast::error_code ec;
  EXPECT_FALSE(reader.header_done());
  EXPECT_EQ(reader.read(ec), Status::need_more);
  ASSERT_TRUE(reader.header_done());
  EXPECT_EQ(reader.partial()[http::field::expect], "100-continue");
  reader.append("{}");
  ASSERT_EQ(reader.read(ec), Status::request);
  EXPECT_EQ(reader.take().body(), "{}");
  EXPECT_FALSE(reader.header_done());
}

}  // namespace
}  // namespace arbor::server
