// A child process that announces itself on its first stdout line: `arbor node` and
// `arbor serve` print "... listening on ...127.0.0.1:PORT ..." once they serve. Used by
// `arbor bench cluster` (its nodes) and by the tests that run the `arbor` binary.
//
// Contract: start() spawns argv (stdout a pipe, stderr /dev/null) and reads the first
// line, bounded by first_line_seconds; a child that exits first, prints no line in time
// or a line without the port is an error (the child is killed and reaped). The pipe is
// closed after that line. The object owns the child: destroying it stops and reaps it
// (stop_seconds). Not thread-safe: one owner. POSIX only.
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>
#include <vector>

#include "common/result.hpp"

namespace arbor::cli {

struct ChildProcessOptions {
  std::vector<std::string> argv;  // argv[0]: the executable's path
  // The first line must hold "<port_marker><port>" ("listening on 127.0.0.1:"); empty:
  // any first line will do and port() is 0.
  std::string port_marker = {};
  double first_line_seconds = 120;  // a bound, not a speed: loading a model takes seconds
  // When the object goes: SIGTERM and this long to exit, then SIGKILL; 0: SIGKILL at once.
  double stop_seconds = 0;
};

class ChildProcess {
 public:
  static Result<ChildProcess> start(ChildProcessOptions options);

  ChildProcess(ChildProcess&& other) noexcept;
  ChildProcess& operator=(ChildProcess&& other) noexcept;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ~ChildProcess();

  const std::string& first_line() const { return first_line_; }
  int port() const { return port_; }
  // Sends SIGTERM (an `arbor serve` / `arbor node` then drains and exits 0).
  void terminate();
  // The exit status (128 + the signal when killed by one), or -1 if the child has not
  // exited within `seconds` (a hang, not a speed). Once exited, the same status again.
  int wait_exit(double seconds);
  // SIGKILL, then reap.
  void kill_now();

 private:
  explicit ChildProcess(ChildProcessOptions options) : options_(std::move(options)) {}
  Result<void> read_first_line(int fd);
  void stop();

  ChildProcessOptions options_;
  pid_t pid_ = -1;   // -1: not started, or reaped
  int status_ = -1;  // the exit status once reaped
  std::string first_line_;
  int port_ = 0;
};

}  // namespace arbor::cli
