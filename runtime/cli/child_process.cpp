#include "runtime/cli/child_process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>
#include <utility>

extern char** environ;

namespace arbor::cli {
namespace {

using Clock = std::chrono::steady_clock;

std::string command_line(const std::vector<std::string>& argv) {
  std::string text;
  for (const auto& a : argv) text += (text.empty() ? "" : " ") + a;
  return "`" + text + "`";
}

std::string seconds_text(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", seconds);
  return text;
}

int decode(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }

}  // namespace

Result<ChildProcess> ChildProcess::start(ChildProcessOptions options) {
  if (options.argv.empty()) return fail(ErrorCode::invalid_argument, "child process: no command to run");
  ChildProcess child(std::move(options));
  const auto& argv_text = child.options_.argv;
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0)
    return fail(ErrorCode::failed, "cannot make a pipe for " + command_line(argv_text) + ": " + std::strerror(errno));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  std::vector<std::string> args = argv_text;
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const int spawned = posix_spawn(&child.pid_, args[0].c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(out[1]);
  if (spawned != 0) {
    close(out[0]);
    child.pid_ = -1;
    return fail(ErrorCode::failed, "cannot start " + command_line(argv_text) + ": " + std::strerror(spawned) +
                                       "; check that '" + args[0] + "' exists and is executable (build it)");
  }
  auto line = child.read_first_line(out[0]);
  close(out[0]);
  if (!line) {
    child.kill_now();
    return std::unexpected(line.error());
  }
  return child;
}

// Reads up to the first '\n' (never past the deadline); then finds the port.
Result<void> ChildProcess::read_first_line(int fd) {
  const std::string what = command_line(options_.argv);
  const auto deadline = Clock::now() + std::chrono::duration<double>(options_.first_line_seconds);
  std::string line;
  while (line.find('\n') == std::string::npos) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    pollfd p{fd, POLLIN, 0};
    const int ready = left > 0 ? poll(&p, 1, static_cast<int>(left)) : 0;
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0)
      return fail(ErrorCode::timeout, what + " printed no line within " + seconds_text(options_.first_line_seconds) +
                                          " s, so it was stopped; run it by hand to see where it waits");
    char buf[256];
    const ssize_t n = ready < 0 ? -1 : read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int status = wait_exit(5);
      return fail(
          ErrorCode::failed,
          what + (status >= 0 ? " exited with status " + std::to_string(status) : std::string(" closed its output")) +
              " before printing its first line" + (line.empty() ? std::string() : " (it printed \"" + line + "\")") +
              "; run it by hand to see its error");
    }
    line.append(buf, static_cast<std::size_t>(n));
  }
  first_line_ = line.substr(0, line.find('\n'));
  if (options_.port_marker.empty()) return {};
  const auto at = first_line_.find(options_.port_marker);
  const char* begin = first_line_.data() + (at == std::string::npos ? 0 : at + options_.port_marker.size());
  const char* end = first_line_.data() + first_line_.size();
  const auto parsed = std::from_chars(begin, end, port_);
  if (at == std::string::npos || parsed.ec != std::errc{} || port_ <= 0 || port_ > 65535) {
    port_ = 0;
    return fail(ErrorCode::failed, what + " printed \"" + first_line_ + "\" first, not \"" + options_.port_marker +
                                       "PORT\"; run the same build of it as this program");
  }
  return {};
}

ChildProcess::ChildProcess(ChildProcess&& other) noexcept
    : options_(std::move(other.options_)),
      pid_(std::exchange(other.pid_, -1)),
      status_(other.status_),
      first_line_(std::move(other.first_line_)),
      port_(other.port_) {}

ChildProcess& ChildProcess::operator=(ChildProcess&& other) noexcept {
  if (this == &other) return *this;
  stop();
  options_ = std::move(other.options_);
  pid_ = std::exchange(other.pid_, -1);
  status_ = other.status_;
  first_line_ = std::move(other.first_line_);
  port_ = other.port_;
  return *this;
}

ChildProcess::~ChildProcess() { stop(); }

void ChildProcess::terminate() {
  if (pid_ > 0) kill(pid_, SIGTERM);
}

int ChildProcess::wait_exit(double seconds) {
  const auto deadline = Clock::now() + std::chrono::duration<double>(seconds);
  while (pid_ > 0) {
    int status = 0;
    const pid_t got = waitpid(pid_, &status, WNOHANG);
    if (got == pid_ || (got < 0 && errno != EINTR)) {
      status_ = got == pid_ ? decode(status) : -1;
      pid_ = -1;
      break;
    }
    if (Clock::now() > deadline) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return status_;
}

void ChildProcess::kill_now() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  int status = 0;
  pid_t got;
  while ((got = waitpid(pid_, &status, 0)) < 0 && errno == EINTR) {
  }
  status_ = got == pid_ ? decode(status) : -1;
  pid_ = -1;
}

void ChildProcess::stop() {
  if (pid_ <= 0) return;
  if (options_.stop_seconds > 0) {
    terminate();
    if (wait_exit(options_.stop_seconds) >= 0) return;
  }
  kill_now();
}

}  // namespace arbor::cli
