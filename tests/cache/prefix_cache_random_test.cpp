// Model-based test: thousands of random operations over several tenants, each checked
// against a plain reference (per namespace, a map from page-aligned token prefix to the
// page holding its last page) and against the cache's own invariant audit. Page
// contents carry a fingerprint of the prefix that produced them, so a wrong reuse
// (KV rule 1) shows up as a fingerprint mismatch.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <random>

#include "cache/prefix_cache.hpp"
#include "cache_test_util.hpp"

namespace arbor::cache {
namespace {

using namespace arbor::cache::testing;
constexpr std::size_t P = kPageSize;

struct RefNamespace {
  std::map<Tokens, PageId> page_of;  // prefix (multiple of P tokens) -> page of its last P tokens
  std::map<PageId, Tokens> prefix_of;
};

struct RefSequence {
  TenantId tenant = 0;
  Tokens tokens;            // prompt followed by what it will "generate"
  std::size_t prompt = 0;   // prompt length
  bool matched = false;
  std::size_t computed = 0;  // tokens whose K/V are written
  TenantId locked_ns = 0;
  std::size_t locked_len = 0;  // tokens of the locked prefix (0: none)
};

struct RefPin {
  TenantId ns = 0;
  Tokens prefix;
};

class RandomModel {
 public:
  RandomModel(EvictionPolicyKind kind, std::uint32_t seed)
      : rng_(seed), cache_(kGeom, PrefixCacheConfig{48, kind, 16, "m"}, alloc_) {
    tenants_.push_back(*cache_.add_tenant("t0", {.quota_pages = 0, .read_shared = true}));
    tenants_.push_back(*cache_.add_tenant("t1", {.quota_pages = 16, .read_shared = false}));
    tenants_.push_back(*cache_.add_tenant("t2", {.quota_pages = 12, .read_shared = true}));
    cache_.set_eviction_listener([this](const EvictionEvent& e) { on_evict(e); });
    docs_ = {run(1000, 8), run(2000, 8), run(3000, 6), run(4000, 12)};
  }

  void step() {
    const int op = pick(0, 99);
    if (op < 15) open();
    else if (op < 30) with_sequence([&](SeqId s) { match(s); });
    else if (op < 45) with_sequence([&](SeqId s) { reserve_and_compute(s); });
    else if (op < 62) with_sequence([&](SeqId s) { commit(s); });
    else if (op < 74) with_sequence([&](SeqId s) { close(s); });
    else if (op < 80) pin();
    else if (op < 85) unpin();
    else if (op < 90) evict();
    else if (op < 95) publish();
    else set_priority();
    ASSERT_EQ(cache_.check_invariants(), "") << "after op " << op;
    check_sequences();
  }

  void finish() {
    while (!seqs_.empty()) close(seqs_.begin()->first);
    while (!pins_.empty()) {
      ASSERT_TRUE(cache_.unpin(pins_.begin()->first));
      pins_.erase(pins_.begin());
    }
    cache_.evict(1000);
    EXPECT_EQ(cache_.check_invariants(), "");
    EXPECT_EQ(cache_.stats().pool.free_pages, 48);  // no leaked page
    for (auto& [ns, ref] : ref_) EXPECT_TRUE(ref.page_of.empty()) << "namespace " << ns << " still has entries";
  }

  int num_hits() const { return num_hits_; }
  int num_evictions() const { return num_evictions_; }
  int num_oom() const { return num_oom_; }

 private:
  int pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  template <class F>
  void with_sequence(F f) {
    if (seqs_.empty()) return;
    auto it = seqs_.begin();
    std::advance(it, pick(0, int(seqs_.size()) - 1));
    f(it->first);
  }
  Tokens random_prompt() {
    Tokens t = docs_[std::size_t(pick(0, int(docs_.size()) - 1))];
    if (pick(0, 2) == 0) t = cat(t, docs_[std::size_t(pick(0, int(docs_.size()) - 1))]);
    const int extra = pick(1, 9);
    for (int i = 0; i < extra; ++i) t.push_back(pick(0, 2));  // tiny vocabulary: collisions mid-page
    return t;
  }
  static std::uint16_t fingerprint(std::span<const TokenId> prefix) {
    std::uint64_t h = 1469598103934665603ull;
    for (TokenId t : prefix) h = (h ^ std::uint32_t(t)) * 1099511628211ull;
    return std::uint16_t(h ^ (h >> 16) ^ (h >> 32) ^ (h >> 48));
  }
  std::uint16_t& slot(PageId page, std::size_t position) {
    return cache_.pool().page_data(page)[kGeom.offset(0, KvKind::key, 0, int(position % P))];
  }

  // Longest page-aligned prefix of tokens[0, cap) present in namespace ns.
  std::size_t ref_match(TenantId ns, const Tokens& tokens, std::size_t cap) {
    auto& ref = ref_[ns];
    std::size_t n = 0;
    while (n + P <= cap && ref.page_of.contains(Tokens(tokens.begin(), tokens.begin() + std::ptrdiff_t(n + P))))
      n += P;
    return n;
  }
  bool read_shared(TenantId t) const { return t != tenants_[1]; }
  std::pair<TenantId, std::size_t> ref_best(TenantId tenant, const Tokens& tokens, std::size_t cap) {
    std::pair<TenantId, std::size_t> best{tenant, ref_match(tenant, tokens, cap)};
    if (read_shared(tenant)) {
      std::size_t shared = ref_match(kSharedNamespace, tokens, cap);
      if (shared > best.second) best = {kSharedNamespace, shared};
    }
    return best;
  }
  Pages ref_pages(TenantId ns, const Tokens& tokens, std::size_t len) {
    Pages out;
    for (std::size_t n = P; n <= len; n += P)
      out.push_back(ref_[ns].page_of.at(Tokens(tokens.begin(), tokens.begin() + std::ptrdiff_t(n))));
    return out;
  }
  void ref_add(TenantId ns, Tokens prefix, PageId page) {
    ref_[ns].prefix_of[page] = prefix;
    ref_[ns].page_of[std::move(prefix)] = page;
  }

  void open() {
    TenantId t = tenants_[std::size_t(pick(0, 2))];
    SeqId s = *cache_.open_sequence(t);
    RefSequence r;
    r.tenant = t;
    r.tokens = random_prompt();
    r.prompt = r.tokens.size();
    for (int i = pick(0, 6); i > 0; --i) r.tokens.push_back(pick(0, 2));  // "generated"
    r.locked_ns = t;
    seqs_[s] = r;
    if (pick(0, 4) > 0) match(s);  // what the scheduler does; sometimes it reserves first
  }

  void match(SeqId s) {
    RefSequence& r = seqs_[s];
    if (r.matched || !cache_.page_table(s).empty()) return;
    Tokens prompt(r.tokens.begin(), r.tokens.begin() + std::ptrdiff_t(r.prompt));
    const std::size_t max = pick(0, 3) == 0 ? prompt.size() : prompt.size() - 1;
    auto [ns, want] = ref_best(r.tenant, prompt, std::min(max, prompt.size()) / P * P);
    std::size_t got = *cache_.match(s, prompt, max);
    ASSERT_EQ(got, want) << "match length";
    r.matched = true;
    if (got == 0) return;
    ++num_hits_;
    ASSERT_EQ(table(cache_, s), ref_pages(ns, prompt, got));
    for (std::size_t pos = 0; pos < got; ++pos)
      ASSERT_EQ(slot(cache_.page_table(s)[pos / P], pos), fingerprint(std::span(prompt).first(pos + 1)))
          << "reused K/V computed from another prefix at position " << pos;
    r.computed = got;
    r.locked_ns = ns;
    r.locked_len = got;
  }

  void reserve_and_compute(SeqId s) {
    RefSequence& r = seqs_[s];
    r.matched = true;  // match is only valid first
    const std::size_t total = std::min(r.tokens.size(), std::size_t(pick(int(r.computed), int(r.tokens.size()))) + 1);
    const Pages before = table(cache_, s);
    const PrefixCacheStats stats = cache_.stats();
    const TenantStats tenant = *cache_.tenant_stats(r.tenant);
    const std::size_t need = kGeom.pages_for(std::int64_t(total)) > int(before.size())
                                 ? std::size_t(kGeom.pages_for(std::int64_t(total))) - before.size()
                                 : 0;
    auto ok = cache_.reserve(s, total);
    if (!ok) {
      ASSERT_EQ(ok.error().code, ErrorCode::out_of_memory) << ok.error().describe();
      ++num_oom_;
      ASSERT_EQ(table(cache_, s), before) << "failed reserve changed the page table";
      const bool quota_bound = tenant.quota_pages > 0 &&
                               tenant.used_pages + need > tenant.quota_pages + tenant.evictable_pages;
      const bool pool_bound = std::size_t(stats.pool.free_pages + stats.pool.idle_pages) < need;
      ASSERT_TRUE(quota_bound || pool_bound) << "reserve failed although room existed: " << ok.error().message;
      ASSERT_EQ(cache_.stats().pool.used_pages, stats.pool.used_pages);
      return;
    }
    Pages after = table(cache_, s);
    ASSERT_EQ(after.size(), before.size() + need);
    ASSERT_TRUE(std::equal(before.begin(), before.end(), after.begin()));
    if (r.tenant == tenants_[1]) {
      ASSERT_LE(cache_.tenant_stats(r.tenant)->used_pages, 16u);
    }
    // "Compute": write fingerprints into the positions this sequence may write.
    const std::size_t writable = cache_.sequence_info(s)->writable_from;
    ASSERT_LE(writable, r.computed);
    for (std::size_t pos = r.computed; pos < total; ++pos)
      slot(after[pos / P], pos) = fingerprint(std::span(r.tokens).first(pos + 1));
    r.computed = std::max(r.computed, total);
  }

  void commit(SeqId s) {
    RefSequence& r = seqs_[s];
    if (r.computed == 0) return;
    r.matched = true;
    Tokens done(r.tokens.begin(), r.tokens.begin() + std::ptrdiff_t(r.computed));
    Pages expected = table(cache_, s);
    const std::size_t full = done.size() / P;
    const std::size_t shared_before = cache_.sequence_info(s)->num_shared_pages;
    if (full > shared_before) {
      for (std::size_t i = 0; i < full; ++i) {
        Tokens prefix(done.begin(), done.begin() + std::ptrdiff_t((i + 1) * P));
        auto& ref = ref_[r.tenant];
        if (auto it = ref.page_of.find(prefix); it != ref.page_of.end()) expected[i] = it->second;
        else ref_add(r.tenant, prefix, expected[i]);
      }
    }
    ASSERT_TRUE(cache_.commit(s, done));
    ASSERT_EQ(table(cache_, s), expected) << "commit page table";
    if (full > shared_before) {
      r.locked_ns = r.tenant;
      r.locked_len = full * P;
    }
  }

  void close(SeqId s) {
    ASSERT_TRUE(cache_.close(s));
    seqs_.erase(s);
  }

  Tokens some_cached_prompt() {
    if (!seqs_.empty() && pick(0, 1) == 0) {
      auto it = seqs_.begin();
      std::advance(it, pick(0, int(seqs_.size()) - 1));
      return it->second.tokens;
    }
    return random_prompt();
  }

  void pin() {
    TenantId t = tenants_[std::size_t(pick(0, 2))];
    Tokens tokens = some_cached_prompt();
    auto [ns, want] = ref_best(t, tokens, tokens.size() / P * P);
    std::size_t pinned = 0;
    for (auto& [id, p] : pins_) pinned += p.prefix.size() / P;
    auto got = cache_.pin(t, tokens);
    if (want == 0) {
      ASSERT_EQ(got.error().code, ErrorCode::not_found);
    } else if (pinned + want / P > 16) {
      ASSERT_EQ(got.error().code, ErrorCode::out_of_memory);
    } else {
      ASSERT_TRUE(got) << got.error().describe();
      pins_[*got] = RefPin{ns, Tokens(tokens.begin(), tokens.begin() + std::ptrdiff_t(want))};
    }
  }

  void unpin() {
    if (pins_.empty()) return;
    auto it = pins_.begin();
    std::advance(it, pick(0, int(pins_.size()) - 1));
    ASSERT_TRUE(cache_.unpin(it->first));
    pins_.erase(it);
  }

  void evict() {
    const int before = cache_.stats().pool.free_pages;
    const std::size_t n = std::size_t(pick(0, 8));
    const std::size_t freed = cache_.evict(n);
    ASSERT_LE(freed, n);
    ASSERT_EQ(cache_.stats().pool.free_pages, before + int(freed));
    if (freed < n) {  // stopped only when nothing was left
      ASSERT_EQ(cache_.stats().pool.idle_pages, 0);
    }
  }

  void publish() {
    TenantId t = tenants_[std::size_t(pick(0, 2))];
    Tokens tokens = some_cached_prompt();
    const std::size_t want = ref_match(t, tokens, tokens.size() / P * P);
    auto got = cache_.publish(t, tokens);
    if (want == 0) {
      ASSERT_EQ(got.error().code, ErrorCode::not_found);
      return;
    }
    ASSERT_EQ(*got, want);
    Pages pages = ref_pages(t, tokens, want);
    for (std::size_t i = 0; i < pages.size(); ++i) {
      Tokens prefix(tokens.begin(), tokens.begin() + std::ptrdiff_t((i + 1) * P));
      if (!ref_[kSharedNamespace].page_of.contains(prefix)) ref_add(kSharedNamespace, prefix, pages[i]);
    }
  }

  void set_priority() {
    TenantId t = tenants_[std::size_t(pick(0, 2))];
    Tokens tokens = some_cached_prompt();
    ASSERT_EQ(*cache_.set_priority(t, tokens, pick(-3, 3)), ref_match(t, tokens, tokens.size() / P * P));
  }

  bool locks(TenantId ns, const Tokens& holder, const Tokens& prefix) const {
    (void)ns;
    return holder.size() >= prefix.size() && std::equal(prefix.begin(), prefix.end(), holder.begin());
  }

  void on_evict(const EvictionEvent& e) {
    ++num_evictions_;
    auto& ref = ref_[e.tenant];
    auto it = ref.prefix_of.find(e.page);
    ASSERT_NE(it, ref.prefix_of.end()) << "evicted page " << e.page << " unknown to namespace " << e.tenant;
    const Tokens prefix = it->second;
    ASSERT_EQ(prefix.size(), e.end_token);
    // Only leaves: nothing in this namespace extends the prefix.
    auto next = ref.page_of.upper_bound(prefix);
    ASSERT_FALSE(next != ref.page_of.end() && next->first.size() > prefix.size() &&
                 std::equal(prefix.begin(), prefix.end(), next->first.begin()))
        << "evicted an inner node";
    // Only unlocked: no sequence or pin of this namespace holds a path through it.
    for (auto& [id, r] : seqs_) {
      if (r.locked_len > 0 && r.locked_ns == e.tenant) {
        ASSERT_FALSE(locks(e.tenant, Tokens(r.tokens.begin(), r.tokens.begin() + std::ptrdiff_t(r.locked_len)), prefix))
            << "evicted a page locked by sequence " << id;
      }
    }
    for (auto& [id, p] : pins_) {
      if (p.ns == e.tenant) {
        ASSERT_FALSE(locks(e.tenant, p.prefix, prefix)) << "evicted a pinned page";
      }
    }
    ASSERT_EQ(e.freed, cache_.pool().refcount(e.page) == 0);
    ref.page_of.erase(prefix);
    ref.prefix_of.erase(it);
  }

  // Every open sequence's read-only head is exactly its locked path in the reference.
  void check_sequences() {
    for (auto& [id, r] : seqs_) {
      auto info = *cache_.sequence_info(id);
      ASSERT_EQ(info.num_shared_pages * P, r.locked_len) << "sequence " << id;
      if (r.locked_len == 0) continue;
      Pages head = table(cache_, id);
      head.resize(info.num_shared_pages);
      ASSERT_EQ(head, ref_pages(r.locked_ns, r.tokens, r.locked_len)) << "sequence " << id;
    }
  }

  std::mt19937 rng_;
  HostPageAllocator alloc_;
  PrefixCache cache_;
  std::vector<TenantId> tenants_;
  std::vector<Tokens> docs_;
  std::map<TenantId, RefNamespace> ref_;
  std::map<SeqId, RefSequence> seqs_;
  std::map<PinId, RefPin> pins_;
  int num_hits_ = 0, num_evictions_ = 0, num_oom_ = 0;
};

class PrefixCacheRandomTest : public ::testing::TestWithParam<EvictionPolicyKind> {};

TEST_P(PrefixCacheRandomTest, MatchesReferenceModel) {
  for (std::uint32_t seed = 1; seed <= 4; ++seed) {
    RandomModel model(GetParam(), seed);
    for (int i = 0; i < 4000; ++i) {
      model.step();
      if (::testing::Test::HasFatalFailure()) FAIL() << "seed " << seed << " step " << i;
    }
    model.finish();
    // The run must exercise what it checks.
    EXPECT_GT(model.num_hits(), 100) << "seed " << seed;
    EXPECT_GT(model.num_evictions(), 100) << "seed " << seed;
    EXPECT_GT(model.num_oom(), 0) << "seed " << seed;
    std::printf("policy %d seed %u: %d hits, %d evicted pages, %d out_of_memory\n", int(GetParam()), seed,
                model.num_hits(), model.num_evictions(), model.num_oom());
  }
}

INSTANTIATE_TEST_SUITE_P(Policies, PrefixCacheRandomTest,
                         ::testing::Values(EvictionPolicyKind::lru, EvictionPolicyKind::lfu,
                                           EvictionPolicyKind::priority));

}  // namespace
}  // namespace arbor::cache
