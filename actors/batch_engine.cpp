#include "actors/batch_engine.hpp"

#include "common/log.hpp"

#include <algorithm>
#include <thread>

namespace arbor::actors {
namespace {

double ms_between(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// Positions whose K/V a request writes: the prompt, then every generated token but
// the last (which is sampled, never fed back).
std::size_t needed_tokens(const SeqRequest& r) {
  return r.prompt.size() + std::size_t(std::max(r.sampling.max_tokens - 1, 0));
}

std::size_t common_prefix(std::span<const std::int32_t> a, std::span<const std::int32_t> b) {
  const std::size_t n = std::min(a.size(), b.size());
  std::size_t i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return i;
}

SeqResult error_result(std::uint64_t id, const Error& e) {
  SeqResult r;
  r.request_id = id;
  r.ok = false;
  r.error_code = std::int32_t(e.code);
  r.error = e.message;
  r.finish_reason = FinishReason::error;
  return r;
}

}  // namespace

BatchEngine::BatchEngine(BatchEngineConfig config) : config_(std::move(config)), constraints_(config_.model) {}
BatchEngine::~BatchEngine() {
  // The step in flight writes into the pool: it must end before the pool goes.
  if (in_flight_) (void)config_.engine->collect(step_out_);
  // Close what is left so the cache's destructor sees no live sequence.
  for (auto& l : live_) cache_->close(l->seq);
}

Result<std::unique_ptr<BatchEngine>> BatchEngine::create(BatchEngineConfig config) {
  if (!config.model) return fail(ErrorCode::invalid_argument, "batch engine: no model given");
  if (config.prefill_chunk <= 0 || config.max_step_tokens <= 0)
    return fail(ErrorCode::invalid_argument, "batch engine: prefill_chunk and max_step_tokens must be positive");
  if (config.num_pages <= 0)
    return fail(ErrorCode::invalid_argument, "batch engine: the KV pool has no pages; raise kv_memory_mb");
  if (!config.engine) return fail(ErrorCode::invalid_argument, "batch engine: no engine given (model::make_engine)");
  if (!config.page_allocator) config.page_allocator = config.engine->page_allocator();
  std::unique_ptr<BatchEngine> s(new BatchEngine(std::move(config)));
  s->overlap_ = s->config_.overlap.value_or(s->config_.engine->asynchronous());
  const auto& m = *s->config_.model;
  const auto geometry = s->config_.engine->kv_geometry(s->config_.page_size);
  cache::PrefixCacheConfig pc;
  pc.num_pages = s->config_.num_pages;
  pc.eviction = s->config_.eviction;
  pc.max_pinned_pages = s->config_.max_pinned_pages;
  pc.model_id = m.id();
  if (auto ok = cache::PrefixCache::validate(geometry, pc); !ok) return std::unexpected(ok.error());
  s->cache_ = std::make_unique<cache::PrefixCache>(geometry, pc, *s->config_.page_allocator);
  if (s->cache_->pool().num_pages() == 0)
    return fail(ErrorCode::out_of_memory, "batch engine: could not allocate the KV pool of " +
                                              std::to_string(pc.num_pages) + " pages; lower kv_memory_mb");
  for (const auto& [name, tc] : s->config_.tenants)
    if (auto t = s->cache_->add_tenant(name, tc); !t) return std::unexpected(t.error());
  if (s->config_.kv_events) s->cache_->set_kv_event_listener(s->config_.kv_events);
  return s;
}

Result<cache::TenantId> BatchEngine::tenant_id(const std::string& name) {
  if (auto t = cache_->find_tenant(name)) return *t;
  auto it = config_.tenants.find(name);
  return cache_->add_tenant(name, it == config_.tenants.end() ? cache::TenantConfig{} : it->second);
}

std::optional<Error> BatchEngine::never_fits(const SeqRequest& r) {
  const auto& cfg = config_.model->config();
  if (closed_runs_.contains(r.run_id) && !r.run_id.empty())
    return Error{ErrorCode::cancelled, "run '" + r.run_id + "' is over; request refused"};
  if (r.prompt.empty()) return Error{ErrorCode::invalid_argument, "empty prompt"};
  if (auto ok = check_sampling(r.sampling); !ok) return ok.error();  // the front ends' one check, once more
  for (auto id : r.prompt)
    if (id < 0 || id >= cfg.vocab_size)
      return Error{ErrorCode::invalid_argument, "token id " + std::to_string(id) + " is outside the vocabulary"};
  const std::size_t total = r.prompt.size() + std::size_t(r.sampling.max_tokens);
  if (total > std::size_t(cfg.context_length))
    return Error{ErrorCode::too_long,
                 "prompt of " + std::to_string(r.prompt.size()) + " tokens + max_tokens " +
                     std::to_string(r.sampling.max_tokens) + " exceeds the model context of " +
                     std::to_string(cfg.context_length) + " tokens; shorten the prompt or lower max_tokens"};
  const std::size_t pages = std::size_t(cache_->geometry().pages_for(int(needed_tokens(r))));
  const std::size_t pool = std::size_t(cache_->pool().num_pages());
  if (pages > pool)
    return Error{ErrorCode::out_of_memory,
                 "request needs " + std::to_string(pages) + " KV pages (" +
                     std::to_string(needed_tokens(r)) + " tokens) but the whole pool has " +
                     std::to_string(pool) + "; raise kv_memory_mb or lower max_tokens"};
  auto tenant = tenant_id(r.tenant);
  if (!tenant) return tenant.error();
  auto ts = cache_->tenant_stats(*tenant);
  if (ts && ts->quota_pages > 0 && pages > ts->quota_pages)
    return Error{ErrorCode::out_of_memory,
                 "request needs " + std::to_string(pages) + " KV pages but tenant '" + r.tenant +
                     "' has a quota of " + std::to_string(ts->quota_pages) +
                     " pages; raise its quota_pages or lower max_tokens"};
  if (r.run_id.empty()) {  // a run's requests are bounded by its run actor instead
    std::size_t queued = 0;
    if (const auto* lane = queue_.lane(r.tenant))
      queued = std::size_t(std::count_if(lane->items.begin(), lane->items.end(),
                                         [](const Pending& p) { return p.request.run_id.empty(); }));
    if (queued >= config_.max_queued_requests)
      return Error{ErrorCode::out_of_memory, "the admission queue of tenant '" + r.tenant + "' is full (" +
                                                 std::to_string(queued) +
                                                 " requests waiting); retry later or raise max_queued_requests"};
  }
  return std::nullopt;
}

void BatchEngine::submit(SeqRequest request, std::uint64_t owner, TokenFn on_token, DoneFn done) {
  if (auto e = never_fits(request)) {
    done(error_result(request.request_id, *e));
    return;
  }
  std::shared_ptr<const model::CompiledConstraint> constraint;
  if (!request.json_schema.empty()) {
    auto compiled = constraints_.get(request.json_schema);
    if (!compiled) {
      done(error_result(request.request_id, compiled.error()));
      return;
    }
    constraint = std::move(*compiled);
  }
  const std::string tenant = request.tenant;
  queue_.push(tenant, Pending{std::move(request), owner, std::move(on_token), std::move(done), Clock::now(),
                              std::move(constraint)});
}

bool BatchEngine::waits_for_leader(const SeqRequest& r, cache::TenantId tenant) const {
  if (!config_.prefix_caching) return false;
  const std::size_t page = std::size_t(config_.page_size);
  const std::size_t max_match = r.sampling.max_tokens == 0 ? r.prompt.size() : r.prompt.size() - 1;
  for (const auto& l : live_) {
    if (l->decoding || l->tenant != tenant) continue;
    std::span<const std::int32_t> leader(l->tokens.data(), l->prompt_len);
    const std::size_t shared = std::min(common_prefix(r.prompt, leader), max_match) / page * page;
    if (shared > l->committed / page * page) return true;
  }
  return false;
}

BatchEngine::Admit BatchEngine::try_admit(Pending& p) {
  const SeqRequest& r = p.request;
  auto tenant = tenant_id(r.tenant);
  if (!tenant) {
    fail_pending(p, tenant.error());
    return Admit::failed;
  }
  if (waits_for_leader(r, *tenant)) return Admit::waiting;
  auto seq = cache_->open_sequence(*tenant);
  if (!seq) {
    fail_pending(p, seq.error());
    return Admit::failed;
  }
  std::size_t cached = 0;
  if (config_.prefix_caching) {
    const std::size_t max_match = r.sampling.max_tokens == 0 ? r.prompt.size() : r.prompt.size() - 1;
    auto m = cache_->match(*seq, r.prompt, max_match);
    if (!m) {
      cache_->close(*seq);
      fail_pending(p, m.error());
      return Admit::failed;
    }
    cached = *m;
  }
  if (auto ok = cache_->reserve(*seq, needed_tokens(r)); !ok) {
    const std::size_t new_pages =
        std::size_t(cache_->geometry().pages_for(int(needed_tokens(r)))) - cached / std::size_t(config_.page_size);
    const bool quota = over_own_quota(*tenant, new_pages);
    cache_->close(*seq);
    if (ok.error().code == ErrorCode::out_of_memory) return quota ? Admit::over_quota : Admit::no_memory;
    fail_pending(p, ok.error());
    return Admit::failed;
  }
  if (r.release_pin != 0) unpin(r.release_pin);  // the sequence's own lock holds the path now
  auto l = std::make_unique<Live>();
  l->seq = *seq;
  l->tenant = *tenant;
  l->tokens = r.prompt;
  l->prompt_len = r.prompt.size();
  l->cached = l->computed = l->committed = l->scheduled = cached;
  l->admitted = Clock::now();
  l->sampler = std::make_unique<model::Sampler>(r.sampling);
  SamplingSettings stop_at = r.sampling;
  if (p.constraint) stop_at.stop.clear();  // a document ends by its grammar
  l->stop = std::make_unique<model::StopChecker>(stop_at, config_.model->tokenizer().end_of_generation_ids());
  if (p.constraint) l->constraint = std::make_unique<model::JsonConstraint>(p.constraint);
  if (r.sampling.max_tokens > 0) {  // a warm-up's tokens count in warmup_tokens_ as computed
    served_.prompt_tokens += l->prompt_len;
    served_.cached_tokens += cached;
  }
  l->p = std::move(p);
  live_.push_back(std::move(l));
  if (live_.back()->computed == live_.back()->prompt_len) finish(*live_.back(), FinishReason::prefill);
  return Admit::admitted;
}

// Mirrors PrefixCache::make_room: the tenant's own quota, not the pool, refuses new_pages.
bool BatchEngine::over_own_quota(cache::TenantId tenant, std::size_t new_pages) const {
  auto ts = cache_->tenant_stats(tenant);
  if (!ts || ts->quota_pages == 0 || ts->used_pages + new_pages <= ts->quota_pages) return false;
  return ts->used_pages + new_pages - ts->quota_pages > ts->evictable_pages;
}

// One tenant's turn: its oldest request that can go now (a request waiting for a
// leader's pages lets the next one go). Within a tenant, memory keeps FIFO order.
BatchEngine::Admit BatchEngine::admit_from(FairQueue<Pending>::Lane& lane) {
  for (auto it = lane.items.begin(); it != lane.items.end(); ++it) {
    const Admit a = try_admit(*it);
    if (a == Admit::waiting) continue;
    if (a == Admit::admitted || a == Admit::failed) lane.items.erase(it);
    return a;
  }
  return Admit::waiting;
}

// Rounds of the ring (the fair admission rule in batch_engine.hpp) until nothing more can go.
void BatchEngine::admit_rounds() {
  bool progress = true;
  while (progress && !queue_.empty()) {
    progress = false;
    for (std::size_t turns = queue_.lanes().size(); turns > 0; --turns) {
      if (live_.size() >= std::size_t(config_.max_step_tokens)) return queue_.drop_empty();
      const Admit a = admit_from(queue_.lanes().front());
      if (a == Admit::no_memory) return queue_.drop_empty();  // this tenant stays first
      progress = progress || a == Admit::admitted || a == Admit::failed;
      queue_.rotate();
    }
    queue_.drop_empty();
  }
}

void BatchEngine::admit() {
  for (;;) {
    admit_rounds();
    remove_finished();
    if (!live_.empty() || queue_.empty()) return;
    // Nothing runs, so nothing will free pages: tool pins yield first (oldest first),
    if (break_oldest_tool_pin()) continue;
    // then the front tenant's oldest request (the one admission stopped at) can never
    // be admitted.
    auto& lane = queue_.lanes().front();
    const auto stats = cache_->stats();
    fail_pending(lane.items.front(),
                 Error{ErrorCode::out_of_memory,
                       "request needs " + std::to_string(needed_tokens(lane.items.front().request)) +
                           " tokens of KV but even with nothing running only " +
                           std::to_string(stats.pool.free_pages + stats.pool.idle_pages) + " of " +
                           std::to_string(stats.pool.total_pages) + " pages can be freed (" +
                           std::to_string(stats.pinned_pages) +
                           " pinned); raise kv_memory_mb or the tenant quota"});
    lane.items.pop_front();
    queue_.drop_empty();
  }
}

void BatchEngine::step() {
  ++num_steps_;
  const auto start = std::chrono::steady_clock::now();
  const double forwarded = forward_seconds_;
  expire_pins();
  const std::size_t queued = queue_.size();
  admit();
  const std::size_t admitted = queued - queue_.size();  // failed admissions count too
  BatchShape batch;
  if (!live_.empty()) batch = run_batch();
  const std::size_t before = live_.size();
  remove_finished();
  const bool batched = batch.decode_rows + batch.prefill_rows > 0;
  if (batched) ++batched_steps_;
  // A step that only collects the one in flight (the last of a run, overlapped) counts
  // too: its wait is in forward_seconds_, and the host's share is the difference.
  if (batched || forward_seconds_ != forwarded)
    step_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (log::enabled(spdlog::level::debug)) trace_step(batch, admitted, before - live_.size());
}

void BatchEngine::trace_step(const BatchShape& batch, std::size_t admitted, std::size_t finished) {
  const auto stats = cache_->stats();
  log::logger().debug(
      "step {}: batch {} rows ({} decode, {} prefill of {} tokens); admitted {}, finished {}, live {}, "
      "queued {}; cache +{} hit tokens, +{} evicted pages; pages used {} free {} idle {} of {}",
      num_steps_, batch.decode_rows + batch.prefill_rows, batch.decode_rows, batch.prefill_rows,
      batch.prefill_tokens, admitted, finished, live_.size(), queue_.size(),
      stats.total.hit_tokens - traced_hit_tokens_, stats.total.evicted_pages - traced_evicted_pages_,
      stats.pool.used_pages, stats.pool.free_pages, stats.pool.idle_pages, stats.pool.total_pages);
  traced_hit_tokens_ = stats.total.hit_tokens;
  traced_evicted_pages_ = stats.total.evicted_pages;
}

BatchEngine::BatchShape BatchEngine::run_batch() {
  // With overlap, the step in flight stays so while the next is built and queued behind
  // it, and is collected after; then the next step's late masks (its constrained rows
  // whose token is in flight) follow from the tokens just collected. Without overlap,
  // each step is collected before the next is built.
  Submitted next = schedule();
  const BatchShape shape = next.shape;
  const bool queued = !next.rows.empty() && submit(next);
  if (in_flight_) collect_in_flight();
  if (queued) {
    in_flight_ = std::move(next);
    // Refused masks leave the step's draws unrun: it is collected (dropped) at once, so
    // that the engine takes the next step.
    if (!supply_late_masks(*in_flight_)) collect_in_flight();
  }
  if (!overlap_ && in_flight_) collect_in_flight();
  return shape;
}

// One decode row per decoding sequence, then prefill chunks, within max_step_tokens.
// A sequence whose previous step is still in flight continues from what that step
// will have computed: its next prefill chunk, or (when that step draws its next token
// where the logits are) a decode row whose token is that future token. Every row that
// ends a prompt or decodes returns its token, drawn by the engine (model/token_draw.hpp,
// the sampler's rule) with the sequence's JSON Schema mask when it has one: known now,
// or, after a future token, supplied once that token is collected (mask_later).
BatchEngine::Submitted BatchEngine::schedule() {
  Submitted next;
  int budget = config_.max_step_tokens;
  auto add = [&](Live& l, std::span<const model::TokenId> tokens, bool draws_token) {
    model::SequenceStep step{tokens, int(l.scheduled), cache_->page_table(l.seq), model::LogitsMode::none};
    if (draws_token) {
      step.logits = model::LogitsMode::last_token;
      step.draw = l.sampler->next_draw();  // one RNG step per token
      // The mask of the constraint's state after the sequence's last token: the
      // constraint is not touched again before this step is collected. After a future
      // token, that state is known once the step in flight is collected.
      if (l.constraint && l.future) step.mask_later = true;
      else if (l.constraint) step.allowed = l.constraint->allowed().words();
    }
    next.steps.push_back(step);
    next.rows.push_back(&l);
    budget -= int(tokens.size());
  };
  for (auto& l : live_) {
    if (!l->p.done || budget <= 0) continue;
    if (l->future) {
      if (l->generated.size() + 1 >= std::size_t(std::max(l->p.request.sampling.max_tokens, 0)))
        continue;  // the token in flight is its last
      next.future_tokens.push_back(model::future_token(*l->future));
      add(*l, std::span(&next.future_tokens.back(), 1), true);
    } else if (l->decoding && l->in_flight == 0) {
      add(*l, std::span(&l->tokens.back(), 1), true);
    } else {
      continue;
    }
    ++next.shape.decode_rows;
  }
  for (auto& l : live_) {
    if (!l->p.done || l->decoding || l->future || budget <= 0) continue;
    const int n = std::min({config_.prefill_chunk, int(l->prompt_len - l->scheduled), budget});
    if (n <= 0) continue;
    const bool last = l->scheduled + std::size_t(n) == l->prompt_len && l->p.request.sampling.max_tokens > 0;
    add(*l, std::span(l->tokens.data() + l->scheduled, std::size_t(n)), last);
    ++next.shape.prefill_rows;
    next.shape.prefill_tokens += n;
  }
  return next;
}

// The masks of the step's mask_later rows, its constraints now past the token the row
// feeds (collected with the step before). A row whose sequence has finished or failed
// meanwhile draws unmasked: its token is dropped. False when the engine refuses them:
// the step's sequences have failed.
bool BatchEngine::supply_late_masks(Submitted& s) {
  std::vector<std::span<const std::uint64_t>> masks;
  for (std::size_t i = 0; i < s.rows.size(); ++i) {
    if (!s.steps[i].mask_later) continue;
    Live& l = *s.rows[i];
    masks.push_back(l.p.done ? l.constraint->allowed().words() : std::span<const std::uint64_t>());
  }
  if (masks.empty()) return true;
  const auto start = std::chrono::steady_clock::now();
  const auto ok = config_.engine->supply_masks(masks);
  forward_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!ok)
    for (Live* l : s.rows) fail_live(*l, ok.error());
  return ok.has_value();
}

// Queues the step on the engine; on failure its sequences fail and false. Each row's
// sequence is then in flight, and the drawn tokens are the next step's futures.
bool BatchEngine::submit(Submitted& s) {
  const auto start = std::chrono::steady_clock::now();
  const auto ok = config_.engine->submit(s.steps, cache_->pool());
  forward_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!ok) {
    for (Live* l : s.rows) fail_live(*l, ok.error());
    return false;
  }
  for (auto& l : live_) l->future.reset();  // futures name the previous step's outputs only
  std::size_t drawn = 0;
  for (std::size_t i = 0; i < s.rows.size(); ++i) {
    Live& l = *s.rows[i];
    ++l.in_flight;
    l.scheduled += s.steps[i].tokens.size();
    if (s.steps[i].logits == model::LogitsMode::last_token) l.future = drawn++;
  }
  return true;
}

void BatchEngine::collect_in_flight() {
  Submitted s = std::move(*in_flight_);
  in_flight_.reset();
  collect(s);
}

// Waits for the step and applies its outputs: commits prefill chunks' full pages,
// samples where a prompt was finished or a decode row ran, applies stop conditions.
// Rows of sequences that finished meanwhile (stopped, cancelled) are dropped.
void BatchEngine::collect(Submitted& s) {
  const auto start = std::chrono::steady_clock::now();
  const auto ok = config_.engine->collect(step_out_);
  forward_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (Live* l : s.rows)
    if (--l->in_flight == 0) l->future.reset();  // its tokens are on the host from here on
  if (!ok) {
    for (Live* l : s.rows) fail_live(*l, ok.error());
    return;
  }
  std::size_t token_row = 0;
  for (std::size_t i = 0; i < s.rows.size(); ++i) {
    Live& l = *s.rows[i];
    const model::SequenceStep& step = s.steps[i];
    const bool drew = step.logits == model::LogitsMode::last_token;
    const std::int32_t drawn = drew ? step_out_.tokens[token_row++] : -1;
    if (!l.p.done) continue;  // finished while the step ran: its row's output is dropped
    l.computed += step.tokens.size();
    if (!l.decoding) {
      (l.p.request.sampling.max_tokens > 0 ? served_.computed_tokens : warmup_tokens_) += step.tokens.size();
      if (config_.prefix_caching) {
        if (auto ok = cache_->commit(l.seq, std::span(l.tokens.data(), l.computed)); !ok) {
          fail_live(l, ok.error());
          continue;
        }
        l.committed = l.computed;
      }
      if (l.computed < l.prompt_len) continue;
      if (!drew) {
        finish(l, FinishReason::prefill);
        continue;
      }
      l.decoding = true;
    }
    on_token(l, drawn);
  }
}

void BatchEngine::on_token(Live& l, std::int32_t token) {
  if (token < 0) {
    fail_live(l, Error{ErrorCode::internal, "the engine drew no token"});
    return;
  }
  if (l.constraint) {
    if (auto ok = l.constraint->accept(token); !ok) return fail_live(l, ok.error());
  }
  if (l.generated.empty() && l.first_token == Clock::time_point{}) l.first_token = Clock::now();
  const auto& tok = config_.model->tokenizer();
  const bool eog = tok.is_end_of_generation(token);
  const auto reason = l.stop->push(token, eog ? std::string() : tok.token_to_piece(token));
  if (reason != model::StopReason::end_of_generation) {
    l.generated.push_back(token);
    ++served_.generated_tokens;
  }
  if (l.p.on_token) {
    std::string ready = l.stop->take_ready();
    if (!ready.empty()) l.p.on_token(TokenEvent{l.p.request.request_id, l.p.request.tag, token, std::move(ready)});
  }
  const bool document_ends = l.constraint && l.constraint->is_finished();
  if (reason == model::StopReason::none && !document_ends) {
    l.tokens.push_back(token);
    return;
  }
  const bool cut = reason == model::StopReason::max_tokens && !(l.constraint && l.constraint->is_complete());
  finish(l, cut ? FinishReason::length : FinishReason::stop);
}

SeqResult BatchEngine::result_of(const Live& l, FinishReason reason) const {
  const auto now = Clock::now();
  SeqResult r;
  r.request_id = l.p.request.request_id;
  r.tokens = l.generated;
  r.text = l.stop->text();
  r.prompt_tokens = l.prompt_len;
  r.cached_tokens = l.cached;
  r.computed_tokens = l.prompt_len - l.cached;
  r.generated_tokens = l.generated.size();
  const bool started = l.first_token != Clock::time_point{};
  r.queue_ms = ms_between(l.p.accepted, l.admitted);
  r.ttft_ms = started ? ms_between(l.p.accepted, l.first_token) : 0;
  r.prefill_ms = ms_between(l.admitted, started ? l.first_token : now);
  r.decode_ms = started ? ms_between(l.first_token, now) : 0;
  r.finish_reason = reason;
  if (l.constraint && l.constraint->value()) r.json = l.constraint->text();
  return r;
}

void BatchEngine::finish(Live& l, FinishReason reason) {
  if (!l.p.done) return;  // already finished
  if (config_.prefix_caching && l.computed > l.committed)
    (void)cache_->commit(l.seq, std::span(l.tokens.data(), l.computed));  // best effort
  SeqResult result = result_of(l, reason);
  if (reason == FinishReason::stop || reason == FinishReason::length)
    pin_history(l, result);  // before close: no gap in the lock
  (void)cache_->close(l.seq);
  auto done = std::move(l.p.done);
  l.p.done = nullptr;
  if (l.p.on_token && reason != FinishReason::cancelled) {
    std::string rest = l.stop->take_ready();
    if (!rest.empty()) l.p.on_token(TokenEvent{l.p.request.request_id, l.p.request.tag, -1, std::move(rest)});
  }
  done(std::move(result));
}

// Pins what the finished request computed (its cached path) for pin_ttl_ms: a tool
// runs now and the continuation will extend this history. Best effort: nothing is
// pinned when no full page is cached or the pins are at max_pinned_pages.
void BatchEngine::pin_history(Live& l, SeqResult& result) {
  const SeqRequest& r = l.p.request;
  if (r.pin_ttl_ms <= 0 || !config_.prefix_caching) return;
  auto id = cache_->pin(l.tenant, std::span<const std::int32_t>(l.tokens.data(), l.computed));
  if (!id) return;
  pins_.emplace(*id, PinEntry{l.p.owner, r.run_id, l.tenant, {}, false,
                              now() + std::chrono::milliseconds(r.pin_ttl_ms)});
  result.pin_id = *id;
}

void BatchEngine::fail_live(Live& l, const Error& error) {
  if (!l.p.done) return;
  (void)cache_->close(l.seq);
  auto done = std::move(l.p.done);
  l.p.done = nullptr;
  done(error_result(l.p.request.request_id, error));
}

void BatchEngine::fail_pending(Pending& p, const Error& error) {
  if (p.request.release_pin != 0) unpin(std::exchange(p.request.release_pin, 0));
  if (p.done) p.done(error_result(p.request.request_id, error));
  p.done = nullptr;
}

void BatchEngine::remove_finished() {
  std::erase_if(live_, [](const std::unique_ptr<Live>& l) { return !l->p.done && l->in_flight == 0; });
}

void BatchEngine::cancel(std::uint64_t request_id) {
  for (auto& lane : queue_.lanes()) {
    for (auto it = lane.items.begin(); it != lane.items.end(); ++it) {
      if (it->request.request_id != request_id) continue;
      SeqResult r;
      r.request_id = request_id;
      r.prompt_tokens = it->request.prompt.size();
      r.finish_reason = FinishReason::cancelled;
      auto done = std::move(it->done);
      const std::uint64_t release = it->request.release_pin;
      lane.items.erase(it);
      if (release != 0) unpin(release);
      queue_.drop_empty();
      if (done) done(std::move(r));
      return;
    }
  }
  for (auto& l : live_)
    if (l->p.request.request_id == request_id) finish(*l, FinishReason::cancelled);
  remove_finished();
}

void BatchEngine::cancel_owner(std::uint64_t owner) {
  std::vector<std::uint64_t> ids;
  for (const auto& lane : queue_.lanes())
    for (const auto& p : lane.items)
      if (p.owner == owner) ids.push_back(p.request.request_id);
  for (const auto& l : live_)
    if (l->p.owner == owner) ids.push_back(l->p.request.request_id);
  for (auto id : ids) cancel(id);
  if (owner != 0) unpin_where([owner](const PinEntry& pin) { return pin.owner == owner; });
}

void BatchEngine::cancel_run(const std::string& run_id) {
  if (run_id.empty()) return;
  if (closed_runs_.insert(run_id).second) closed_order_.push_back(run_id);
  if (closed_order_.size() > kClosedRunsKept) {
    closed_runs_.erase(closed_order_.front());
    closed_order_.pop_front();
  }
  std::vector<std::uint64_t> ids;
  for (const auto& lane : queue_.lanes())
    for (const auto& p : lane.items)
      if (p.request.run_id == run_id) ids.push_back(p.request.request_id);
  for (const auto& l : live_)
    if (l->p.request.run_id == run_id) ids.push_back(l->p.request.request_id);
  for (auto id : ids) cancel(id);
  unpin_where([&run_id](const PinEntry& pin) { return pin.run_id == run_id; });
}

PinReply BatchEngine::pin(const PinRequest& req, std::uint64_t owner) {
  PinReply reply;
  if (!config_.prefix_caching) {
    reply.error = "prefix caching is off";
    return reply;
  }
  if (!req.run_id.empty() && closed_runs_.contains(req.run_id)) {
    reply.error = "run '" + req.run_id + "' is over";
    return reply;
  }
  auto tenant = tenant_id(req.tenant);
  if (!tenant) {
    reply.error = tenant.error().message;
    return reply;
  }
  auto id = cache_->pin(*tenant, req.tokens);
  if (!id) {
    reply.error = id.error().message;
    return reply;
  }
  PinEntry entry{owner, req.run_id, *tenant, req.tokens, false, std::nullopt};
  if (config_.eviction == cache::EvictionPolicyKind::priority && req.priority != 0) {
    if (auto n = cache_->set_priority(*tenant, req.tokens, req.priority)) {
      entry.prioritized = true;
      reply.num_tokens = *n;
    }
  }
  pins_.emplace(*id, std::move(entry));
  reply.ok = true;
  reply.pin_id = *id;
  return reply;
}

void BatchEngine::unpin(std::uint64_t pin_id) {
  auto it = pins_.find(pin_id);
  if (it == pins_.end()) return;
  (void)cache_->unpin(pin_id);
  if (it->second.prioritized) (void)cache_->set_priority(it->second.tenant, it->second.tokens, 0);
  pins_.erase(it);
}

std::size_t BatchEngine::expire_pins() {
  const auto t = now();
  return unpin_where([t](const PinEntry& pin) { return pin.expires && *pin.expires <= t; });
}

std::size_t BatchEngine::unpin_where(const std::function<bool(const PinEntry&)>& drop) {
  std::vector<std::uint64_t> ids;  // collected first: unpin erases from pins_
  for (const auto& [id, pin] : pins_)
    if (drop(pin)) ids.push_back(id);
  for (auto id : ids) unpin(id);
  return ids.size();
}

std::optional<std::chrono::steady_clock::time_point> BatchEngine::next_pin_expiry() const {
  std::optional<Clock::time_point> next;
  for (const auto& [id, pin] : pins_)
    if (pin.expires && (!next || *pin.expires < *next)) next = pin.expires;
  return next;
}

// Pin ids grow, so the first tool pin in id order is the oldest.
bool BatchEngine::break_oldest_tool_pin() {
  for (const auto& [id, pin] : pins_) {
    if (!pin.expires) continue;
    unpin(id);
    return true;
  }
  return false;
}

PinReply BatchEngine::set_priority(const PriorityRequest& req) {
  PinReply reply;
  auto tenant = tenant_id(req.tenant);
  if (!tenant) {
    reply.error = tenant.error().message;
    return reply;
  }
  auto n = cache_->set_priority(*tenant, req.tokens, req.priority);
  if (!n) {
    reply.error = n.error().message;
    return reply;
  }
  reply.ok = true;
  reply.num_tokens = *n;
  return reply;
}

std::string BatchEngine::check_invariants() const {
  if (std::string e = cache_->check_invariants(); !e.empty()) return e;
  if (const int held = cache_->stats().num_pins; held != int(pins_.size()))
    return "the batch engine tracks " + std::to_string(pins_.size()) + " pins but the cache holds " +
           std::to_string(held) + " (a pin leaked or was dropped behind the batch engine's back)";
  for (const auto& l : live_) {
    if (!l->p.done) continue;  // finished (closed), removed at the end of the step
    const auto info = cache_->sequence_info(l->seq);
    if (!info) return "live request " + std::to_string(l->p.request.request_id) + ": " + info.error().message;
    const std::size_t in_tree = info->num_shared_pages * std::size_t(config_.page_size);
    if (info->num_tokens > l->computed || in_tree > l->computed || l->committed > l->computed)
      return "request " + std::to_string(l->p.request.request_id) + " has computed " + std::to_string(l->computed) +
             " positions but the cache holds " + std::to_string(info->num_tokens) + " of its tokens (" +
             std::to_string(in_tree) + " in tree pages)";
  }
  return "";
}

CacheSnapshot BatchEngine::snapshot() const {
  const auto s = cache_->stats();
  CacheSnapshot x;
  x.usage() = served_;
  x.warmup_tokens = warmup_tokens_;
  x.hit_ratio = hit_ratio(served_);
  x.pages_total = s.pool.total_pages;
  x.pages_used = s.pool.used_pages;
  x.pages_free = s.pool.free_pages;
  x.pages_locked = s.pool.protected_pages;
  x.pages_cached_idle = s.pool.idle_pages;
  x.evictions = s.total.evicted_pages;
  // Finished sequences whose row is still in flight (overlap) are not live.
  x.live_sequences = int(std::count_if(live_.begin(), live_.end(), [](const auto& l) { return bool(l->p.done); }));
  x.queued_requests = int(queue_.size());
  x.pins = s.num_pins;
  x.pages_pinned = int(s.pinned_pages);
  x.num_steps = num_steps_;
  x.batched_steps = batched_steps_;
  x.step_seconds = step_seconds_;
  x.forward_seconds = forward_seconds_;
  const model::GraphCounts graphs = config_.engine->graph_counts();
  x.graph_steps_replayed = graphs.replayed;
  x.graph_steps_captured = graphs.captured;
  x.schemas_compiled = constraints_.num_compiled();
  for (cache::TenantId t = 0;; ++t) {
    auto ts = cache_->tenant_stats(t);
    if (!ts) break;
    x.tenants[ts->name] = static_cast<const TenantCacheStats&>(*ts);  // the public part
  }
  return x;
}

TreeReply BatchEngine::tree(const TreeRequest& req) const {
  TreeReply reply;
  auto tenant = cache_->find_tenant(req.tenant);
  if (!tenant) {
    reply.error = "tenant '" + req.tenant + "' has no cache yet";
    return reply;
  }
  auto nodes = cache_->tree_summary(*tenant, req.max_nodes);
  if (!nodes) {
    reply.error = nodes.error().message;
    return reply;
  }
  reply.nodes = std::move(*nodes);
  reply.ok = true;
  return reply;
}

}  // namespace arbor::actors
