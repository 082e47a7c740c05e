// `arbor bench constrained`: the cost of constrained decoding (a JSON Schema enforced
// token by token) through the real scheduler, at each batch size: B generate() calls
// at once with the schema, and the same B free. A warm-up pass of each kind caches the
// prompts and the schema's masks (as a server reusing a schema would; every warm-up
// document must be complete) and gives each row's lengths; the measured passes then
// give row i of both kinds the same budget, the shorter of its two lengths, so both
// batches generate the same tokens and shrink alike (a free row that ended early on
// its own would otherwise shrink the free batch sooner). The kinds alternate which runs
// first. Overhead = constrained time per token / free time per token - 1. Host ms/step:
// the scheduler's work between forwards per batched step (CacheStats: step time minus
// the engine's), masks and the automaton's advance included: on a GPU it overlaps the
// device's step (constrained rows take late masks), unless --no-overlap. With
// --partial-documents (synthetic weights, which need not close a document within the
// budget) a warm-up document may end at the budget.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <future>
#include <memory>

#include <nlohmann/json.hpp>

#include "runtime/cli/bench.hpp"
#include "runtime/cli/command.hpp"
#include "runtime/cli/options.hpp"
#include "runtime/cli/runtime_options.hpp"

namespace arbor::cli {
namespace {

using Clock = std::chrono::steady_clock;

const char* const kSchema =
    R"({"type":"object","properties":{"name":{"type":"string","maxLength":40},)"
    R"("category":{"enum":["kitchen","garden","office","toys"]},"price":{"type":"number","minimum":0,"maximum":1000},)"
    R"("tags":{"type":"array","items":{"type":"string","maxLength":16},"minItems":1,"maxItems":4},)"
    R"("in_stock":{"type":"boolean"}},"required":["name","category","price","tags","in_stock"],)"
    R"("additionalProperties":false})";

const char* const kProducts[] = {"a kettle", "a rake", "a stapler", "a kite", "a teapot", "a hose", "a lamp", "a puzzle"};

GenerateRequest request(int row, int max_tokens, bool constrained) {
  GenerateRequest r;
  r.tenant = "bench";
  // The schema is in the prompt too, as a user would put it: the constraint decides which
  // tokens may come, the model still has to know what to write.
  r.messages = {{"system", "You describe products for a shop catalogue. Reply with one JSON document that follows "
                           "this JSON Schema: " + std::string(kSchema)},
                {"user", std::string("Describe ") + kProducts[row % 8] + " as JSON."}};
  r.sampling.max_tokens = max_tokens;
  if (constrained) r.json_schema = kSchema;
  return r;
}

struct Pass {
  double seconds = 0, host_ms_per_step = 0;
  std::vector<int> tokens;  // generated, per row
  int total() const {
    int n = 0;
    for (int t : tokens) n += t;
    return n;
  }
  double tokens_per_s() const { return seconds > 0 ? total() / seconds : 0; }
};

// One batch: every row started at once, timed until the last one ends. With
// `whole_documents`, a constrained row must end with its document complete.
Result<Pass> run_batch(Runtime& rt, const std::vector<int>& max_tokens, bool constrained, bool whole_documents) {
  std::vector<GenerationHandle> handles;
  const CacheStats before = rt.cache_stats();
  const auto t0 = Clock::now();
  for (std::size_t i = 0; i < max_tokens.size(); ++i) {
    auto h = rt.start_generate(request(int(i), max_tokens[i], constrained));
    if (!h) return std::unexpected(h.error());
    handles.push_back(std::move(*h));
  }
  Pass pass;
  for (auto& h : handles) {
    auto r = h.result();
    if (!r) return std::unexpected(r.error());
    if (constrained && whole_documents && !r->json)
      return fail(ErrorCode::failed, "warm-up row " + std::to_string(pass.tokens.size()) +
                                         " ran out of tokens before its JSON document was complete (" + r->text +
                                         "); raise --max-tokens, or pass --partial-documents (synthetic weights)");
    pass.tokens.push_back(int(r->generated_tokens));
  }
  pass.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  const CacheStats after = rt.cache_stats();
  const double host_seconds = after.host_seconds() - before.host_seconds();
  if (after.batched_steps > before.batched_steps)
    pass.host_ms_per_step = 1000.0 * host_seconds / double(after.batched_steps - before.batched_steps);
  return pass;
}

struct Figures {
  double constrained = 0, free = 0;  // tokens/s, averaged over the repetitions
  double constrained_host_ms = 0, free_host_ms = 0;  // host ms per step, averaged too
  int constrained_tokens = 0, free_tokens = 0;  // of one pass
  double overhead_percent() const { return constrained > 0 ? (free / constrained - 1) * 100 : 0; }
};

Result<Figures> measure(Runtime& rt, int batch, int max_tokens, int reps, bool whole_documents) {
  const std::vector<int> full(std::size_t(batch), max_tokens);
  auto warm_constrained = run_batch(rt, full, true, whole_documents);
  if (!warm_constrained) return std::unexpected(warm_constrained.error());
  auto warm_free = run_batch(rt, full, false, false);
  if (!warm_free) return std::unexpected(warm_free.error());
  std::vector<int> budget(static_cast<std::size_t>(batch));
  for (std::size_t i = 0; i < budget.size(); ++i)
    budget[i] = std::max(1, std::min(warm_constrained->tokens[i], warm_free->tokens[i]));
  Figures f;
  for (int r = 0; r < reps; ++r) {
    for (bool constrained : {r % 2 == 0, r % 2 != 0}) {
      auto pass = run_batch(rt, budget, constrained, false);
      if (!pass) return std::unexpected(pass.error());
      (constrained ? f.constrained : f.free) += pass->tokens_per_s() / reps;
      (constrained ? f.constrained_host_ms : f.free_host_ms) += pass->host_ms_per_step / reps;
      (constrained ? f.constrained_tokens : f.free_tokens) = pass->total();
    }
  }
  return f;
}

struct ConstrainedOptions {
  std::string batches = "1,8";
  int max_tokens = 96;
  int reps = 3;
  bool json = false;
  bool partial_documents = false;
  RuntimeOptions runtime;
};

int bench_constrained(const ConstrainedOptions& o) {
  RuntimeConfig config;
  o.runtime.apply(config);
  auto rt = Runtime::create(config);
  if (!rt) return std::fprintf(stderr, "arbor bench constrained: %s\n", rt.error().describe().c_str()), kExitInvalid;
  BenchReport report(o.json, {{"threads", config.num_threads}, {"device", (*rt)->device_info()}});
  report.header("%5s %14s %14s %9s %14s %14s %14s\n", "batch", "free tok/s", "schema tok/s", "overhead", "tokens/pass",
                "free host ms", "schema host ms");
  for (int batch : parse_integer_list(o.batches)) {
    auto f = measure(**rt, batch, o.max_tokens, o.reps, !o.partial_documents);
    if (!f) return std::fprintf(stderr, "arbor bench constrained: %s\n", f.error().describe().c_str()), kExitFailed;
    report.add({{"batch", batch}, {"free_tokens_per_s", f->free}, {"constrained_tokens_per_s", f->constrained},
                {"overhead_percent", f->overhead_percent()}, {"free_tokens", f->free_tokens},
                {"constrained_tokens", f->constrained_tokens}, {"free_host_ms_per_step", f->free_host_ms},
                {"constrained_host_ms_per_step", f->constrained_host_ms}},
               "%5d %14.1f %14.1f %8.1f%% %7d/%-6d %14.2f %14.2f\n", batch, f->free, f->constrained,
               f->overhead_percent(), f->free_tokens, f->constrained_tokens, f->free_host_ms, f->constrained_host_ms);
  }
  return report.finish();
}

}  // namespace

Runner setup_bench_constrained(CLI::App& app) {
  auto o = std::make_shared<ConstrainedOptions>();
  declare_bench_counts(app, "--batch", o->batches, "batch sizes");
  declare_bench_max_tokens(app, o->max_tokens);
  app.add_option("--reps", o->reps, "measured repetitions (after one warm-up)")
      ->type_name("N")
      ->check(integer_in(1, 100))
      ->capture_default_str();
  declare_bench_json(app, o->json);
  app.add_flag("--partial-documents", o->partial_documents,
               "a warm-up document may end at the token budget (synthetic weights need not close one)");
  o->runtime.declare(app, kModelFlag | kDeviceFlag | kThreadsFlag | kPrecisionFlag | kNoOverlapFlag);
  return [o] { return bench_constrained(*o); };
}

}  // namespace arbor::cli
