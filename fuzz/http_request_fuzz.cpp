// Fuzzes the server's request handling from the bytes on the wire: each input is what
// a client writes on one connection. The session's RequestReader (Beast's parser with
// the session's limits) reads request after request, and each complete request goes
// to the Api (routing, auth, admission, JSON bodies, OpenAI
// validation, workflow runs through the real loader) over a synchronous backend.
//
// Invariants, per request: nothing throws out of Api::handle; an answer is given (a
// full reply, or a stream that has ended) and is never a 500; afterwards no admission
// slot is held (inflight back to 0).
#include <cstddef>
#include <cstdint>
#include <string>

#include <string_view>

#include "fuzz/fuzz_check.hpp"
#include "fuzz/sync_backend.hpp"
#include "runtime/server/api.hpp"
#include "runtime/server/request_reader.hpp"

namespace {

namespace http = boost::beast::http;
using namespace arbor::server;

constexpr std::size_t kReadSize = 4096;  // as the session's reads (runtime/server/http_session.hpp)

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

void serve(Api& api, RequestReader::Request req) {
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
  // As the session reads: 4 KiB at a time, each parsed as it comes (a request may span
  // reads). Then the client's end of stream: the session parses once more with no new
  // bytes, and closes; a partial request is dropped.
  RequestReader reader(config.max_body_bytes);
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto parse = [&] {
    boost::beast::error_code ec;
    RequestReader::Status status;
    while ((status = reader.read(ec)) == RequestReader::Status::request) serve(api, reader.take());
    return status;
  };
  for (std::size_t at = 0; at < bytes.size(); at += kReadSize) {
    reader.append(bytes.substr(at, kReadSize));
    // An error: the session answers 400/413/431 and closes.
    if (parse() == RequestReader::Status::error) return 0;
  }
  parse();
  return 0;
}
