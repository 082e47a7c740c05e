// PrefixCache: construction, tenants and the sequence lifecycle.
#include "cache/prefix_cache.hpp"

#include <algorithm>
#include <cassert>

namespace arbor::cache {

PrefixCache::PrefixCache(KvGeometry geometry, PrefixCacheConfig config, PageAllocator& allocator)
    : pool_(geometry, config.num_pages, allocator),
      policy_(make_eviction_policy(config.eviction)),
      config_(std::move(config)) {
  if (config_.max_pinned_pages <= 0) config_.max_pinned_pages = config_.num_pages / 2;
  shared_tree_ = std::make_unique<RadixTree>(geometry.page_size, pool_, *policy_, clock_);
}

PrefixCache::~PrefixCache() {
  // Give back what sequences hold so the trees' teardown sees consistent counts.
  for (auto& [id, seq] : sequences_)
    for (PageId p : seq.pages) {
      pool_.unprotect(p);
      pool_.unref(p);
    }
}

Result<void> PrefixCache::validate(const KvGeometry& geometry, const PrefixCacheConfig& config) {
  if (!geometry.valid())
    return fail(ErrorCode::invalid_argument,
                "prefix cache: KV geometry needs positive layers, kv heads, head_dim and page_size");
  if (config.num_pages <= 0)
    return fail(ErrorCode::invalid_argument,
                "prefix cache: num_pages must be positive (got " + std::to_string(config.num_pages) + ")");
  if (config.max_pinned_pages < 0 || config.max_pinned_pages > config.num_pages)
    return fail(ErrorCode::invalid_argument,
                "prefix cache: max_pinned_pages must be in [0, num_pages] (0 = half the pool)");
  return {};
}

Result<TenantId> PrefixCache::add_tenant(std::string name, TenantConfig config) {
  if (name.empty()) return fail(ErrorCode::invalid_argument, "add_tenant: empty tenant name");
  if (find_tenant(name))
    return fail(ErrorCode::invalid_argument, "add_tenant: tenant '" + name + "' already exists");
  if (config.quota_pages > std::size_t(pool_.num_pages()))
    return fail(ErrorCode::invalid_argument,
                "add_tenant: quota of " + std::to_string(config.quota_pages) + " pages for '" + name +
                    "' exceeds the pool (" + std::to_string(pool_.num_pages()) + " pages)");
  auto t = std::make_unique<Tenant>();
  t->name = std::move(name);
  t->config = config;
  t->tree = std::make_unique<RadixTree>(pool_.geometry().page_size, pool_, *policy_, clock_);
  tenants_.push_back(std::move(t));
  return TenantId(tenants_.size() - 1);
}

Result<TenantId> PrefixCache::find_tenant(std::string_view name) const {
  for (std::size_t i = 0; i < tenants_.size(); ++i)
    if (tenants_[i]->name == name) return TenantId(i);
  return fail(ErrorCode::not_found, "tenant '" + std::string(name) + "' is not registered; call add_tenant first");
}

PrefixCache::Tenant* PrefixCache::tenant_ptr(TenantId id) {
  return id >= 0 && std::size_t(id) < tenants_.size() ? tenants_[std::size_t(id)].get() : nullptr;
}
const PrefixCache::Tenant* PrefixCache::tenant_ptr(TenantId id) const {
  return id >= 0 && std::size_t(id) < tenants_.size() ? tenants_[std::size_t(id)].get() : nullptr;
}
RadixTree& PrefixCache::tree(TenantId ns) {
  return ns == kSharedNamespace ? *shared_tree_ : *tenants_[std::size_t(ns)]->tree;
}
const RadixTree& PrefixCache::tree(TenantId ns) const {
  return ns == kSharedNamespace ? *shared_tree_ : *tenants_[std::size_t(ns)]->tree;
}

Result<PrefixCache::Sequence*> PrefixCache::sequence_ptr(SeqId seq, const char* op) {
  auto it = sequences_.find(seq);
  if (it == sequences_.end())
    return fail(ErrorCode::not_found, std::string(op) + ": sequence " + std::to_string(seq) +
                                          " is not open (closed already, or never opened)");
  return &it->second;
}

Result<SeqId> PrefixCache::open_sequence(TenantId tenant) {
  Tenant* t = tenant_ptr(tenant);
  if (!t) return fail(ErrorCode::not_found, "open_sequence: unknown tenant id " + std::to_string(tenant));
  SeqId id = next_seq_++;
  Sequence& s = sequences_[id];
  s.tenant = tenant;
  s.locked_ns = tenant;
  ++t->num_sequences;
  return id;
}

PrefixCache::Choice PrefixCache::best_match(TenantId tenant, std::span<const TokenId> tokens) {
  Choice c{tenant, tree(tenant).match_prefix(tokens, RadixTree::Touch::none)};
  if (tenants_[std::size_t(tenant)]->config.read_shared) {
    MatchResult shared = shared_tree_->match_prefix(tokens, RadixTree::Touch::none);
    if (shared.num_tokens > c.match.num_tokens) c = Choice{kSharedNamespace, std::move(shared)};
  }
  return c;
}

Result<std::size_t> PrefixCache::match(SeqId seq, std::span<const TokenId> tokens,
                                       std::size_t max_match_tokens) {
  auto sp = sequence_ptr(seq, "match");
  if (!sp) return std::unexpected(sp.error());
  Sequence& s = **sp;
  if (!s.pages.empty())
    return fail(ErrorCode::invalid_argument,
                "match: sequence " + std::to_string(seq) +
                    " already has a page table; match only once, right after open_sequence");
  const std::size_t P = std::size_t(pool_.geometry().page_size);
  const std::size_t cap = std::min(tokens.size(), max_match_tokens) / P * P;
  Choice c = best_match(s.tenant, tokens.first(cap));
  const std::size_t hit = c.match.num_tokens;
  Tenant& t = *tenants_[std::size_t(s.tenant)];
  for (TokenCounters* k : {&t.counters, &total_}) {
    ++k->lookups;
    k->hit_tokens += hit;
    k->miss_tokens += tokens.size() - hit;
  }
  if (hit == 0) return std::size_t(0);
  RadixTree& tr = tree(c.ns);
  tr.record_hit(c.match.node);
  tr.lock(c.match.node);
  for (PageId p : c.match.pages) {
    pool_.ref(p);
    pool_.protect(p);
  }
  s.locked_ns = c.ns;
  s.node = c.match.node;
  s.pages = std::move(c.match.pages);
  s.num_shared_pages = s.pages.size();
  s.tokens.assign(tokens.begin(), tokens.begin() + std::ptrdiff_t(hit));
  s.num_tokens = hit;
  return hit;
}

Result<void> PrefixCache::reserve(SeqId seq, std::size_t total_tokens) {
  auto sp = sequence_ptr(seq, "reserve");
  if (!sp) return std::unexpected(sp.error());
  Sequence& s = **sp;
  const std::size_t want = std::size_t(pool_.geometry().pages_for(std::int64_t(total_tokens)));
  if (want <= s.pages.size()) return {};
  if (want > std::size_t(pool_.num_pages())) {
    std::string why = pool_.storage_error() ? " (" + pool_.storage_error()->message + ")" : "";
    return fail(ErrorCode::out_of_memory,
                "reserve: " + std::to_string(total_tokens) + " tokens need " + std::to_string(want) +
                    " pages but the KV pool has only " + std::to_string(pool_.num_pages()) + why +
                    "; shorten the request or enlarge the pool");
  }
  const std::size_t need = want - s.pages.size();
  if (auto room = make_room(s.tenant, need); !room) return room;
  auto pages = pool_.allocate(int(need));
  assert(pages && "make_room guaranteed the pages");
  if (!pages) return std::unexpected(pages.error());
  for (PageId p : *pages) pool_.protect(p);
  s.pages.insert(s.pages.end(), pages->begin(), pages->end());
  tenants_[std::size_t(s.tenant)]->private_pages += need;
  return {};
}

Result<void> PrefixCache::commit(SeqId seq, std::span<const TokenId> tokens) {
  auto sp = sequence_ptr(seq, "commit");
  if (!sp) return std::unexpected(sp.error());
  Sequence& s = **sp;
  const std::size_t P = std::size_t(pool_.geometry().page_size);
  if (tokens.size() > s.pages.size() * P)
    return fail(ErrorCode::invalid_argument,
                "commit: " + std::to_string(tokens.size()) + " tokens but sequence " + std::to_string(seq) +
                    "'s page table covers " + std::to_string(s.pages.size() * P) + "; reserve first");
  if (tokens.size() < s.tokens.size() || !std::equal(s.tokens.begin(), s.tokens.end(), tokens.begin()))
    return fail(ErrorCode::invalid_argument,
                "commit: tokens of sequence " + std::to_string(seq) +
                    " do not extend its cached prefix; commit every computed token, in order");
  s.num_tokens = std::max(s.num_tokens, tokens.size());
  const std::size_t full = tokens.size() / P;
  if (full <= s.num_shared_pages) return {};
  Tenant& t = *tenants_[std::size_t(s.tenant)];
  RadixTree& own = *t.tree;
  InsertResult r = own.insert(tokens.first(full * P), std::span<const PageId>(s.pages).first(full));
  note_stored(s.tenant, tokens.first(full * P), r);
  t.counters.inserted_tokens += r.num_new_pages * P;
  total_.inserted_tokens += r.num_new_pages * P;
  for (std::size_t i : r.duplicates) {  // the tree's page replaces ours
    const PageId mine = s.pages[i];
    pool_.ref(r.pages[i]);
    pool_.protect(r.pages[i]);
    pool_.unprotect(mine);
    pool_.unref(mine);
    s.pages[i] = r.pages[i];
  }
  t.private_pages -= full - s.num_shared_pages;  // now tree pages (or freed duplicates)
  own.lock(r.node);
  if (s.node != kRootNode) tree(s.locked_ns).unlock(s.node);
  s.locked_ns = s.tenant;
  s.node = r.node;
  s.num_shared_pages = full;
  s.tokens.insert(s.tokens.end(), tokens.begin() + std::ptrdiff_t(s.tokens.size()),
                  tokens.begin() + std::ptrdiff_t(full * P));
  return {};
}

Result<void> PrefixCache::close(SeqId seq) {
  auto sp = sequence_ptr(seq, "close");
  if (!sp) return std::unexpected(sp.error());
  Sequence& s = **sp;
  if (s.node != kRootNode) tree(s.locked_ns).unlock(s.node);
  for (PageId p : s.pages) {
    pool_.unprotect(p);
    pool_.unref(p);
  }
  Tenant& t = *tenants_[std::size_t(s.tenant)];
  t.private_pages -= s.pages.size() - s.num_shared_pages;
  --t.num_sequences;
  sequences_.erase(seq);
  return {};
}

std::span<const PageId> PrefixCache::page_table(SeqId seq) const {
  auto it = sequences_.find(seq);
  if (it == sequences_.end()) return {};
  return it->second.pages;
}

Result<SequenceInfo> PrefixCache::sequence_info(SeqId seq) const {
  auto it = sequences_.find(seq);
  if (it == sequences_.end())
    return fail(ErrorCode::not_found, "sequence_info: sequence " + std::to_string(seq) + " is not open");
  const Sequence& s = it->second;
  const std::size_t P = std::size_t(pool_.geometry().page_size);
  return SequenceInfo{s.tenant, s.num_tokens, s.num_shared_pages, s.pages.size(), s.num_shared_pages * P};
}

}  // namespace arbor::cache
