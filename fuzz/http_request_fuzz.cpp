// Fuzzes the server's request handling from the bytes on the wire: each input is what
// a client writes on one connection. Beast's parser reads request after request with
// the session's limits (16 KiB of headers, limits.max_body_bytes of body), and each
// complete request goes to the Api (routing, auth, admission, JSON bodies, OpenAI
// validation, workflow runs through the real loader) over a synchronous backend.
//
// Invariants, per request: nothing throws out of Api::handle; an answer is given (a
// full reply, or a stream that has ended) and is never a 500; afterwards no admission
// slot is held (inflight back to 0).
#include <cstddef>
#include <cstdint>
#include <string>

#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "fuzz/fuzz_check.hpp"
#include "fuzz/sync_backend.hpp"
#include "runtime/server/api.hpp"

namespace {

namespace beast = boost::beast;
namespace http = beast::http;
using namespace arbor::server;

constexpr std::uint32_t kHeaderLimit = 16 * 1024;  // as runtime/server/http_session.cpp

ServerConfig fuzz_config() {
  ServerConfig c;
  c.auth = true;
  c.admin_key = "admin-key-0123";
  c.keys = {{"tenant-key-0123", "t"}, {"other-key-01234", "u"}};
  c.tenant_limits["t"].max_concurrent = 2;
  c.tenant_limits["t"].max_tokens = 64;
  c.max_body_bytes = 64 * 1024;
  c.max_inflight = 4;
  c.max_runs = 4;
  c.workflow_dir = "/nonexistent/arbor-fuzz";
  return c;
}

void serve(Api& api, http::request<http::string_body>& req) {
  HttpRequest request;
  request.method = std::string(req.method_string());
  request.target = std::string(req.target());
  request.authorization = std::string(req[http::field::authorization]);
  request.body = std::move(req.body());
  auto exchange = std::make_shared<Exchange>([] {});
  api.handle(request, exchange);
  Exchange::Taken t = exchange->take();
  ARBOR_FUZZ_CHECK(t.mode != Exchange::Mode::pending, request.target);
  ARBOR_FUZZ_CHECK(t.mode != Exchange::Mode::stream || t.ended, request.target);
  ARBOR_FUZZ_CHECK(t.reply.status != 500, t.reply.body);
  ARBOR_FUZZ_CHECK(api.inflight() == 0, request.target);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const ServerConfig config = fuzz_config();
  arbor::fuzz::SyncBackend backend;
  Api api(config, backend);
  boost::asio::const_buffer rest(data, size);
  while (rest.size() > 0) {
    http::request_parser<http::string_body> parser;
    parser.header_limit(kHeaderLimit);
    parser.body_limit(config.max_body_bytes);
    parser.eager(true);
    beast::error_code ec;
    while (rest.size() > 0 && !parser.is_done()) {
      const std::size_t n = parser.put(rest, ec);
      rest += n;
      if (ec == http::error::need_more) ec = {};
      if (ec || n == 0) break;
    }
    if (!parser.is_done()) {
      // The connection ends here: a request without a length ends with it.
      if (!ec) parser.put_eof(ec);
      if (ec || !parser.is_done()) return 0;
    }
    serve(api, parser.get());
  }
  return 0;
}
