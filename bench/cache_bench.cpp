// Radix tree and PrefixCache throughput on a tree of ~1M tokens: 64 prefixes of 2048
// tokens, each with 32 suffixes of 432 tokens (page size 16). Goal: a 2k-token prefix
// hit costs microseconds.
#include <benchmark/benchmark.h>

#include <memory>
#include <numeric>
#include <vector>

#include "cache/prefix_cache.hpp"
#include "cache/radix_tree.hpp"

namespace {

using namespace arbor::cache;
using Tokens = std::vector<TokenId>;

constexpr int kPageSize = 16;
constexpr int kPrefixes = 64, kSuffixes = 32;
constexpr std::size_t kPrefixTokens = 2048, kSuffixTokens = 432;
constexpr int kTreePages = kPrefixes * int((kPrefixTokens + kSuffixes * kSuffixTokens) / kPageSize);
const KvGeometry kGeom{.num_layers = 1, .num_kv_heads = 1, .head_dim = 8, .page_size = kPageSize};

Tokens run(TokenId first, std::size_t n) {
  Tokens t(n);
  std::iota(t.begin(), t.end(), first);
  return t;
}
Tokens prefix(int p) { return run(TokenId(p) * 1'000'000, kPrefixTokens); }
Tokens full(int p, int s) {
  Tokens t = prefix(p);
  Tokens suffix = run(TokenId(p) * 1'000'000 + 100'000 + s * 1000, kSuffixTokens);
  t.insert(t.end(), suffix.begin(), suffix.end());
  return t;
}

// The tree holds the only reference to every page.
struct TreeFixture {
  HostPageAllocator alloc;
  PagePool pool{kGeom, kTreePages + 1024, alloc};
  std::unique_ptr<EvictionPolicy> policy = make_eviction_policy(EvictionPolicyKind::lru);
  LogicalClock clock;
  RadixTree tree{kPageSize, pool, *policy, clock};

  void add(const Tokens& tokens) {
    auto pages = *pool.allocate(int(tokens.size() / kPageSize));
    tree.insert(tokens, pages);
    for (PageId p : pages) pool.unref(p);
  }
  TreeFixture() {
    for (int p = 0; p < kPrefixes; ++p)
      for (int s = 0; s < kSuffixes; ++s) add(full(p, s));
  }
};

TreeFixture& fixture() {
  static TreeFixture f;
  return f;
}

void BM_MatchPrefix2k(benchmark::State& state) {
  auto& f = fixture();
  std::vector<Tokens> queries;
  for (int p = 0; p < kPrefixes; ++p) queries.push_back(prefix(p));
  std::size_t i = 0, matched = 0;
  for (auto _ : state) {
    MatchResult m = f.tree.match_prefix(queries[i++ % queries.size()]);
    matched += m.num_tokens;
    benchmark::DoNotOptimize(m);
  }
  if (matched != kPrefixTokens * state.iterations()) state.SkipWithError("prefix did not fully match");
  state.SetItemsProcessed(std::int64_t(matched));
}
BENCHMARK(BM_MatchPrefix2k);

void BM_MatchPrefixAndSuffix2480(benchmark::State& state) {
  auto& f = fixture();
  std::vector<Tokens> queries;
  for (int p = 0; p < kPrefixes; ++p) queries.push_back(full(p, p % kSuffixes));
  std::size_t i = 0, matched = 0;
  for (auto _ : state) {
    MatchResult m = f.tree.match_prefix(queries[i++ % queries.size()]);
    matched += m.num_tokens;
    benchmark::DoNotOptimize(m);
  }
  state.SetItemsProcessed(std::int64_t(matched));
}
BENCHMARK(BM_MatchPrefixAndSuffix2480);

void BM_MatchMiss(benchmark::State& state) {
  auto& f = fixture();
  Tokens query = run(-5'000'000, kPrefixTokens);
  for (auto _ : state) benchmark::DoNotOptimize(f.tree.match_prefix(query));
}
BENCHMARK(BM_MatchMiss);

void BM_InsertDuplicate2480(benchmark::State& state) {
  auto& f = fixture();
  Tokens tokens = full(3, 7);
  std::vector<PageId> pages(tokens.size() / kPageSize, 0);  // all duplicates: never taken
  for (auto _ : state) benchmark::DoNotOptimize(f.tree.insert(tokens, pages));
}
BENCHMARK(BM_InsertDuplicate2480);

// Steady state under pressure: add a new 432-token suffix under a cached 2k prefix,
// then evict 27 pages (the least recently used leaf).
void BM_InsertSuffixThenEvict(benchmark::State& state) {
  auto& f = fixture();
  static TokenId next = 500'000'000;  // fresh suffixes across the repeated runs
  int p = 0;
  for (auto _ : state) {
    Tokens tokens = prefix(p++ % kPrefixes);
    Tokens suffix = run(next, kSuffixTokens);
    next += TokenId(kSuffixTokens);
    tokens.insert(tokens.end(), suffix.begin(), suffix.end());
    f.add(tokens);
    benchmark::DoNotOptimize(f.tree.evict(kSuffixTokens / kPageSize));
  }
  if (f.tree.num_pages() != std::size_t(kTreePages)) state.SkipWithError("tree size drifted");
}
BENCHMARK(BM_InsertSuffixThenEvict);

void BM_EvictWholeTree(benchmark::State& state) {
  std::int64_t pages = 0;
  for (auto _ : state) {
    state.PauseTiming();
    auto f = std::make_unique<TreeFixture>();
    state.ResumeTiming();
    pages += std::int64_t(f->tree.evict(std::size_t(kTreePages)).size());
    state.PauseTiming();
    f.reset();
    state.ResumeTiming();
  }
  state.SetItemsProcessed(pages);
}
BENCHMARK(BM_EvictWholeTree)->Iterations(3)->Unit(benchmark::kMillisecond);

// The scheduler's path for a sub-agent whose 2k SharedPrefix is cached:
// open_sequence + match (lock) + reserve its 100-token task + close.
void BM_CacheOpenMatch2kReserveClose(benchmark::State& state) {
  HostPageAllocator alloc;
  PrefixCache cache(kGeom, PrefixCacheConfig{kTreePages + 1024, EvictionPolicyKind::lru, 0, "bench"}, alloc);
  TenantId tenant = *cache.add_tenant("bench");
  for (int p = 0; p < kPrefixes; ++p) {
    for (int s = 0; s < kSuffixes; ++s) {
      Tokens tokens = full(p, s);
      SeqId seq = *cache.open_sequence(tenant);
      (void)cache.match(seq, tokens, tokens.size() - 1);
      (void)cache.reserve(seq, tokens.size());
      (void)cache.commit(seq, tokens);
      (void)cache.close(seq);
    }
  }
  std::vector<Tokens> prompts;
  for (int p = 0; p < kPrefixes; ++p) {
    Tokens t = prefix(p);
    Tokens task = run(900'000'000 + p * 1000, 100);
    t.insert(t.end(), task.begin(), task.end());
    prompts.push_back(t);
  }
  std::size_t i = 0, hit = 0;
  for (auto _ : state) {
    const Tokens& prompt = prompts[i++ % prompts.size()];
    SeqId seq = *cache.open_sequence(tenant);
    hit += *cache.match(seq, prompt, prompt.size() - 1);
    (void)cache.reserve(seq, prompt.size());
    (void)cache.close(seq);
  }
  if (hit != kPrefixTokens * state.iterations()) state.SkipWithError("prefix did not hit");
  state.counters["tree_pages"] = double(cache.tenant_stats(tenant)->tree_pages);
}
BENCHMARK(BM_CacheOpenMatch2kReserveClose);

}  // namespace

BENCHMARK_MAIN();
