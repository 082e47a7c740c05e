#include "runtime/server/exchange.hpp"

namespace arbor::server {

void Exchange::notify() {
  if (wake_) wake_();
}

void Exchange::respond(HttpReply reply) {
  {
    std::lock_guard lock(mutex_);
    if (mode_ != Mode::pending || abandoned_) return;
    mode_ = Mode::full;
    reply_ = std::move(reply);
    ended_ = true;
  }
  notify();
}

void Exchange::begin_stream(std::vector<std::pair<std::string, std::string>> headers) {
  {
    std::lock_guard lock(mutex_);
    if (mode_ != Mode::pending || abandoned_) return;
    mode_ = Mode::stream;
    reply_.status = 200;
    reply_.content_type = "text/event-stream";
    reply_.headers = std::move(headers);
    reply_.headers.emplace_back("Cache-Control", "no-cache");
  }
  notify();
}

void Exchange::send(std::string data) {
  {
    std::lock_guard lock(mutex_);
    if (mode_ != Mode::stream || ended_ || abandoned_) return;
    pending_ += data;
  }
  notify();
}

void Exchange::end() {
  {
    std::lock_guard lock(mutex_);
    if (mode_ != Mode::stream || ended_) return;
    ended_ = true;
  }
  notify();
}

void Exchange::on_abandon(std::function<void()> fn) {
  bool run_now = false;
  {
    std::lock_guard lock(mutex_);
    if (abandoned_) run_now = true;
    else on_abandon_ = std::move(fn);
  }
  if (run_now && fn) fn();
}

void Exchange::abandon() {
  std::function<void()> fn;
  {
    std::lock_guard lock(mutex_);
    if (abandoned_ || ended_) return;  // nothing left to cancel
    abandoned_ = true;
    fn = std::move(on_abandon_);
    on_abandon_ = nullptr;
  }
  if (fn) fn();
}

bool Exchange::abandoned() const {
  std::lock_guard lock(mutex_);
  return abandoned_;
}

std::size_t Exchange::pending_bytes() const {
  std::lock_guard lock(mutex_);
  return pending_.size();
}

Exchange::Taken Exchange::take() {
  std::lock_guard lock(mutex_);
  Taken t;
  t.mode = mode_;
  if (mode_ != Mode::pending && !head_taken_) {
    head_taken_ = true;
    t.head = true;
    t.reply = std::move(reply_);
  }
  t.data = std::move(pending_);
  pending_.clear();
  t.ended = ended_;
  return t;
}

}  // namespace arbor::server
