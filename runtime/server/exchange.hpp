// One HTTP request's reply channel between a handler (any thread) and the connection
// that writes it (its own strand). A handler either calls respond() once, or
// begin_stream() then send()* then end(). Output is buffered here; the connection is
// told through `wake` and takes it with take().
//
// If the client goes away first, the connection calls abandon(): the handler's
// on_abandon callback runs once (it cancels the generation, freeing its pages) and
// further output is dropped. Thread-safe; the callbacks run outside the lock.
#pragma once

#include <functional>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace arbor::server {

struct HttpReply {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
};

class Exchange {
 public:
  enum class Mode { pending, full, stream };

  explicit Exchange(std::function<void()> wake) : wake_(std::move(wake)) {}

  void respond(HttpReply reply);
  // Starts a server-sent event stream (status 200, text/event-stream).
  void begin_stream(std::vector<std::pair<std::string, std::string>> headers = {});
  void send(std::string data);
  void end();
  // Runs `fn` when the client goes away before end(); at once if it already has.
  void on_abandon(std::function<void()> fn);
  void abandon();
  bool abandoned() const;
  // Stream bytes sent but not yet taken by the connection (what a slow client has not
  // read, beyond the one write in flight).
  std::size_t pending_bytes() const;

  struct Taken {
    Mode mode = Mode::pending;
    bool head = false;  // the reply (full) or the stream headers are in `reply`, once
    HttpReply reply;
    std::string data;   // stream data since the last take()
    bool ended = false;  // stream: end() was called and `data` is the last of it
  };
  Taken take();

 private:
  void notify();

  mutable std::mutex mutex_;
  std::function<void()> wake_;
  Mode mode_ = Mode::pending;
  bool head_taken_ = false;
  HttpReply reply_;
  std::string pending_;
  bool ended_ = false;
  bool abandoned_ = false;
  std::function<void()> on_abandon_;
};

}  // namespace arbor::server
