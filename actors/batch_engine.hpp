// BatchEngine (a plain class, not an actor): the bridge from sequence requests to
// cache::PrefixCache + model::Engine, run in batched steps.
// The cache actor owns exactly one and calls it from its own thread only (not
// thread-safe, no locks: concurrency comes from batching).
//
// Continuous batching. Each step():
//   1. admits queued requests, fairly across tenants (below): open a sequence, match
//      the longest cached page-aligned prefix (at most prompt_len - 1 tokens, so the
//      last prompt token is always computed and yields logits), reserve pages for
//      prompt + max_tokens - 1 positions (the cache evicts unlocked leaves as needed).
//      - Fair admission: each tenant has its own FIFO queue; the tenants with queued
//        requests form a ring (a tenant joins at the back with its first queued
//        request). Admission serves the tenant at the front of the ring: its oldest
//        request that can go now is admitted and the tenant moves to the back. So
//        tenants take turns, one request each (round-robin), however many requests
//        one of them has queued: a flood delays others by at most one admission per
//        flooding tenant.
//      - Fan-out dedupe: a request whose prompt shares full pages with the part of a
//        same-tenant sequence that is still being prefilled (not yet committed) stays
//        queued until that leader has committed those pages, then matches them: a
//        shared prefix is prefilled once, not once per sibling. It does not block
//        the requests behind it (nor its tenant's turn, which goes to a later request).
//      - Memory: if reserve fails for want of pool pages the request stays queued,
//        admission stops for this step and its tenant keeps the front of the ring, so
//        it is served first once finishing sequences free pages (a large request is
//        never starved by smaller ones). A tenant stopped by its own quota_pages only
//        loses its turn. If nothing is running and a request still cannot be reserved,
//        it fails (never a deadlock).
//   2. runs ONE Engine::forward over one decode row per decoding sequence plus
//      prefill chunks (<= prefill_chunk tokens each) of admitted sequences, within
//      max_step_tokens;
//   3. commits each prefill chunk's full pages (others may match them at once), samples
//      where a prompt was finished or a decode row ran, applies stop conditions, and
//      closes finished sequences (locks released; cached pages stay).
//   With overlap (BatchEngineConfig::overlap), 3 of step N runs after 1 and 2 of step
//   N+1 have queued it on the engine behind N: the host's work hides behind the device's.
//   A sequence's row in N+1 takes its token from what N draws on the device, greedy or
//   sampled (model::future_token). A row under a JSON Schema draws with its mask on the
//   engine too; when its token is a future one, its mask (which follows that token) is
//   supplied once N is collected (Engine::supply_masks): N+1's forward runs meanwhile,
//   only its draws wait. Tokens reach callbacks a step later.
// Tool pins (SeqRequest::pin_ttl_ms, release_pin): a request that asks for one leaves
// its computed history pinned when it finishes, for pin_ttl_ms, while the agent's tool
// runs; the continuation request releases it once admitted (its own lock then holds
// the path), a cancelled run or a gone owner drops it, and past its TTL it is dropped
// (expire_pins, called each step and by the cache actor's timer) and the pages are
// ordinary cached pages again. The rule that keeps pins from ever blocking the pool:
// pinned pages are locked, so eviction skips them and they count against the tenant's
// quota (they are its tree pages); pins of every kind share max_pinned_pages (half the
// pool by default; a tool pin over the cap is simply not taken); and a queued request
// that cannot be admitted while nothing runs (nothing else will free pages) breaks the
// tool pins oldest first before it is failed. So a pin delays an admission at most
// until the live sequences finish, never deadlocks it, and never fails it.
// Constrained decoding (SeqRequest::json_schema): the schema compiles at submit, once
// per distinct text (ConstraintCache); a schema it cannot enforce fails the request
// there. Each step, a constrained sequence samples only among the tokens its
// JsonConstraint allows (the others' logits are masked) and finishes ("stop") as soon
// as the document must end, or on an end-of-generation token once it may; stop
// strings do not apply to it. Constrained and free sequences share every batch.
// Requests that can never fit (prompt + max_tokens beyond the model context, the
// whole pool, or the tenant quota) fail at submit with a clear error.
// Queue bound: max_queued_requests per tenant for requests outside a workflow run;
// beyond it a request fails at submit (out_of_memory: "queue ... full"). Requests of a
// run (run_id set) are not counted: their run actor bounds them instead (at most its
// window at the BatchEngine at once, the rest wait in the run; see run_actor.hpp).
// With prefix_caching off nothing is matched or committed (the baseline).
// Counters (snapshot): prompt/cached/computed tokens of requests that generate;
// prefill-only requests (max_tokens 0, cache warm-ups) add only to warmup_tokens.
//
// Callbacks run synchronously inside submit/step/cancel; each request's `done` is
// called exactly once.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "actors/constraint_cache.hpp"
#include "actors/fair_queue.hpp"
#include "actors/messages.hpp"
#include "cache/page_allocator.hpp"
#include "cache/prefix_cache.hpp"
#include "common/result.hpp"
#include "model/engine.hpp"
#include "model/model.hpp"
#include "model/sampler.hpp"
#include "model/sampler_stop.hpp"

namespace arbor::actors {

struct BatchEngineConfig {
  std::shared_ptr<const model::Model> model;
  // The engine of every step, made for `model` (model::make_engine picks the device),
  // and the allocator of the KV pool; null = the engine's page_allocator(). Both come
  // from outside, so this layer names no backend.
  std::shared_ptr<model::Engine> engine;
  std::shared_ptr<cache::PageAllocator> page_allocator;
  int page_size = 16;
  int num_pages = 0;
  cache::EvictionPolicyKind eviction = cache::EvictionPolicyKind::lru;
  bool prefix_caching = true;
  int prefill_chunk = 256;
  int max_step_tokens = 1024;
  int max_pinned_pages = 0;  // 0 = half the pool
  std::size_t max_queued_requests = 256;  // per tenant, requests outside runs (see above)
  // The clock of tool pins' TTLs (tests inject one); empty = std::chrono::steady_clock.
  std::function<std::chrono::steady_clock::time_point()> clock;
  std::map<std::string, cache::TenantConfig> tenants;
  // The cache's KV events (cache::PrefixCache::set_kv_event_listener), called on the
  // cache actor's thread, in order, inside the step or message that causes them; it
  // must not block nor call into the cache actor. Empty: none.
  std::function<void(const KvEvent&)> kv_events;
  // Overlap (SGLang's overlap scheduler): build and queue step N+1 while step N runs on
  // the engine (model::Engine::submit/collect), rows taking the tokens step N draws as
  // future tokens. Unset: on when the engine is asynchronous (a device). A sequence that
  // stops at step N has had a row of step N+1 computed for nothing; on a synchronous
  // engine that is all overlap changes, so it is off there by default.
  std::optional<bool> overlap;
};

class BatchEngine {
 public:
  using TokenFn = std::function<void(const TokenEvent&)>;
  using DoneFn = std::function<void(SeqResult)>;

  // invalid_argument for a bad config (page size, pool too small for one page).
  static Result<std::unique_ptr<BatchEngine>> create(BatchEngineConfig config);
  ~BatchEngine();

  // Queues a request. `owner` identifies the requester (cancel_owner); `on_token` may
  // be empty. Fails at once (done called) when the request can never be served.
  void submit(SeqRequest request, std::uint64_t owner, TokenFn on_token, DoneFn done);
  // Cancels a queued or live request: done gets finish_reason "cancelled" with what
  // was generated so far. Unknown ids are ignored.
  void cancel(std::uint64_t request_id);
  // Cancels the owner's requests and drops its pins (the owner is gone).
  void cancel_owner(std::uint64_t owner);
  // Cancels the run's requests and pins and refuses its later requests and pins. Only
  // the last kClosedRunsKept closed runs are remembered (memory stays bounded however
  // many runs a server sees): a late request of a run closed long ago could only come
  // from an agent that has stopped, and cancel_owner ends whatever that agent left.
  void cancel_run(const std::string& run_id);
  static constexpr std::size_t kClosedRunsKept = 1024;
  std::size_t num_closed_runs() const { return closed_runs_.size(); }

  bool has_work() const { return !live_.empty() || !queue_.empty(); }
  // Whether steps overlap (BatchEngineConfig::overlap, resolved against the engine).
  bool overlaps() const { return overlap_; }
  void step();

  // `owner` as in submit: the pin is dropped by cancel_owner(owner).
  PinReply pin(const PinRequest& request, std::uint64_t owner = 0);
  std::size_t num_pins() const { return pins_.size(); }
  void unpin(std::uint64_t pin_id);
  // Drops the tool pins whose TTL has passed; returns how many.
  std::size_t expire_pins();
  // The earliest TTL of a tool pin; nullopt when none has one.
  std::optional<std::chrono::steady_clock::time_point> next_pin_expiry() const;
  PinReply set_priority(const PriorityRequest& request);
  CacheSnapshot snapshot() const;  // O(tenants): no audit
  // "" when consistent, else the first problem: the cache's own invariants, and for
  // every live sequence that the tree holds none of its positions it has not computed
  // yet (matched or committed tokens <= computed), so no other sequence can match K/V
  // that was never written. The cache actor answers it to (get_atom, audit_atom)
  // (Runtime::check_invariants); tests check it after every step. O(live sequences)
  // plus the cache's full audit: on demand only, never per stats call.
  std::string check_invariants() const;
  TreeReply tree(const TreeRequest& request) const;

  const cache::PrefixCache& cache() const { return *cache_; }
  const model::Model& model() const { return *config_.model; }

 private:
  using Clock = std::chrono::steady_clock;
  struct Pending {
    SeqRequest request;
    std::uint64_t owner = 0;
    TokenFn on_token;
    DoneFn done;
    Clock::time_point accepted;
    std::shared_ptr<const model::CompiledConstraint> constraint;  // null: free text
  };
  struct Live {
    Pending p;
    cache::SeqId seq = 0;
    cache::TenantId tenant = 0;
    std::vector<model::TokenId> tokens;  // prompt, then generated tokens fed back
    std::size_t prompt_len = 0, cached = 0, computed = 0, committed = 0;
    std::size_t scheduled = 0;  // computed, plus the tokens of its rows in flight
    int in_flight = 0;          // steps holding a row of it, submitted and not collected
    std::optional<std::size_t> future;  // its drawn token's index in the step submitted last
    bool decoding = false;
    std::unique_ptr<model::Sampler> sampler;
    std::unique_ptr<model::StopChecker> stop;
    std::unique_ptr<model::JsonConstraint> constraint;  // with json_schema
    std::vector<std::int32_t> generated;
    Clock::time_point admitted, first_token;
  };
  struct PinEntry {
    std::uint64_t owner = 0;
    std::string run_id;
    cache::TenantId tenant = 0;
    std::vector<std::int32_t> tokens;
    bool prioritized = false;
    std::optional<Clock::time_point> expires;  // a tool pin's TTL; none: until unpinned
  };

  explicit BatchEngine(BatchEngineConfig config);
  Result<cache::TenantId> tenant_id(const std::string& name);
  std::optional<Error> never_fits(const SeqRequest& request);
  bool waits_for_leader(const SeqRequest& request, cache::TenantId tenant) const;
  // no_memory: the pool is out of pages; over_quota: the tenant is at its quota_pages.
  enum class Admit { admitted, waiting, no_memory, over_quota, failed };
  Admit try_admit(Pending& pending);
  Admit admit_from(FairQueue<Pending>::Lane& lane);
  bool over_own_quota(cache::TenantId tenant, std::size_t new_pages) const;
  void admit_rounds();
  void admit();
  // What one forward pass held, for the debug trace.
  struct BatchShape {
    int decode_rows = 0, prefill_rows = 0, prefill_tokens = 0;
  };
  // A step queued on the engine: its rows' sequences, their steps, the future tokens
  // those steps point at (a deque: its elements stay put as it grows).
  struct Submitted {
    std::vector<model::SequenceStep> steps;
    std::vector<Live*> rows;
    std::deque<model::TokenId> future_tokens;
    BatchShape shape;
  };
  BatchShape run_batch();
  Submitted schedule();
  bool submit(Submitted& s);
  bool supply_late_masks(Submitted& s);
  void collect(Submitted& s);
  void collect_in_flight();
  // One debug line per step (common/log.hpp): the batch, the queue, cache hits and
  // evictions since the last line, the pool. Costs a cache stats walk: debug only.
  void trace_step(const BatchShape& batch, std::size_t admitted, std::size_t finished);
  void on_token(Live& live, std::int32_t token);
  void finish(Live& live, FinishReason reason);
  void fail_live(Live& live, const Error& error);
  void remove_finished();
  SeqResult result_of(const Live& live, FinishReason reason) const;
  void fail_pending(Pending& pending, const Error& error);
  void pin_history(Live& live, SeqResult& result);
  bool break_oldest_tool_pin();
  // Drops every pin for which `drop` holds; returns how many.
  std::size_t unpin_where(const std::function<bool(const PinEntry&)>& drop);
  Clock::time_point now() const { return config_.clock ? config_.clock() : Clock::now(); }

  BatchEngineConfig config_;  // holds the engine and the allocator: outlives cache_
  std::unique_ptr<cache::PrefixCache> cache_;
  ConstraintCache constraints_;
  FairQueue<Pending> queue_;
  std::vector<std::unique_ptr<Live>> live_;  // admission order
  model::StepOutput step_out_;
  bool overlap_ = false;
  std::optional<Submitted> in_flight_;  // overlap: the step queued last, not yet collected
  std::map<std::uint64_t, PinEntry> pins_;
  std::set<std::string> closed_runs_;
  std::deque<std::string> closed_order_;  // closed_runs_, oldest first
  TokenUsage served_;                     // every request that generates (CacheStats' TokenUsage)
  std::uint64_t warmup_tokens_ = 0;
  std::uint64_t num_steps_ = 0;
  std::uint64_t batched_steps_ = 0;             // steps that ran a forward
  double step_seconds_ = 0, forward_seconds_ = 0;  // their wall time; the forwards' part
  std::uint64_t traced_hit_tokens_ = 0, traced_evicted_pages_ = 0;  // at the last trace line
};

}  // namespace arbor::actors
