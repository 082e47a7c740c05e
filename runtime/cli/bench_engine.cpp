// `arbor bench engine`: the llama-bench style figures of the forward engine on one
// model: ppN (prompt tokens/s, --prompt lengths, default 512), tg128 (batch-1 decode
// tokens/s) and aggregate decode tokens/s at each --batch size (default 1,8), KV bytes
// per token and peak RSS; and decode of sub-agents over a shared prefix: the prefix's
// pages shared (as readers of one cached SharedPrefix hold them) against private copies
// of the same context, side by side; and decode as the scheduler runs it (each row's
// drawn token fed back): greedy with each step waiting for the one before vs
// overlapped, and sampled (temperature 0.8, top_p 0.95: the draw where the logits are)
// overlapped; on a device, how many of those steps replayed a graph without capture.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <random>
#include <thread>

#include <nlohmann/json.hpp>

#include "cache/page_allocator.hpp"
#include "cache/page_pool.hpp"
#include "model/engine_factory.hpp"
#include "model/kv_sequence.hpp"
#include "model/model.hpp"
#include "runtime/cli/bench.hpp"
#include "runtime/cli/command.hpp"
#include "runtime/cli/options.hpp"
#include "runtime/cli/runtime_options.hpp"
#include "runtime/engine_device.hpp"

namespace arbor::cli {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::vector<model::TokenId> random_tokens(int n, int vocab, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<model::TokenId> t(static_cast<std::size_t>(n));
  for (auto& x : t) x = model::TokenId(rng() % std::uint32_t(vocab));
  return t;
}

// Tokens/s, in the order of the lengths and batch sizes asked for.
struct EngineFigures {
  std::vector<double> prefill;  // per prompt length
  std::vector<double> decode;   // aggregate, per batch size (batch 1: tg128)
};

// Decode with drawn tokens fed back per batch size (drawn_decode_rate), aggregate
// tokens/s: greedy waiting, greedy overlapped, sampled overlapped; and how many of
// those steps replayed a graph, how many were captured (a device engine's).
struct DrawnFigures {
  std::vector<double> waiting, overlapped, sampled;
  model::GraphCounts graphs;
};

// The sampled decode's draw (a common chat setting).
constexpr model::TokenDraw kSampledDraw{.temperature = 0.8f, .top_p = 0.95f};

// Decode steps measured at a batch size: llama-bench's tg128 at batch 1.
int decode_steps(int batch) { return batch == 1 ? 128 : 32; }
constexpr int kDecodePrompt = 16;

struct SharedPrefixFigures {
  double shared = 0, private_copies = 0;  // aggregate decode tokens/s
};

// Decodes `steps` steps of every sequence of `seqs` together (arbitrary next tokens),
// then releases them all; tokens/s summed over the sequences.
Result<double> decode_and_release(model::Engine& engine, cache::PagePool& pool, std::vector<model::KvSequence>& seqs,
                                  int steps, int vocab) {
  std::vector<model::KvSequence*> ptrs;
  for (auto& s : seqs) ptrs.push_back(&s);
  const int batch = int(seqs.size());
  std::vector<model::TokenId> next(seqs.size(), 1);
  Result<double> rate;
  const auto t0 = Clock::now();
  for (int step = 0; step < steps && rate; ++step) {
    if (auto logits = model::decode_step(engine, pool, ptrs, next); !logits) rate = std::unexpected(logits.error());
    for (int i = 0; i < batch; ++i) next[std::size_t(i)] = model::TokenId((step * 7 + i * 13) % vocab);
  }
  if (rate) rate = double(batch) * steps / seconds_since(t0);
  for (auto& s : seqs) model::release(s, pool);
  return rate;
}

// `batch` sequences, each after a short random prompt (seeded from `seed`), with pages
// reserved for `positions` positions.
Result<std::vector<model::KvSequence>> prefill_sequences(model::Engine& engine, cache::PagePool& pool, int batch,
                                                         int vocab, std::uint32_t seed, int positions) {
  std::vector<model::KvSequence> seqs(static_cast<std::size_t>(batch));
  for (int i = 0; i < batch; ++i) {
    model::KvSequence& s = seqs[std::size_t(i)];
    const auto prompt = random_tokens(kDecodePrompt, vocab, seed + std::uint32_t(i));
    if (auto r = model::prefill(engine, pool, s, prompt, 512, model::LogitsMode::none); !r)
      return std::unexpected(r.error());
    if (auto r = model::reserve_pages(s, pool, positions); !r) return std::unexpected(r.error());
  }
  return seqs;
}

// Decodes `steps` tokens for `batch` sequences after a short prompt; tokens/s summed.
Result<double> decode_rate(model::Engine& engine, cache::PagePool& pool, int batch, int steps, int vocab) {
  auto seqs = prefill_sequences(engine, pool, batch, vocab, 100, kDecodePrompt);
  if (!seqs) return std::unexpected(seqs.error());
  return decode_and_release(engine, pool, *seqs, steps, vocab);
}

// Decode of `batch` sequences whose contexts are the same `prefix` tokens, then a tail of
// their own: with `shared`, every sequence holds the first one's full prefix pages (the
// CUDA engine then reads them once per tile of rows); without, each computed the prefix
// into pages of its own. Aggregate tokens/s over `steps` steps.
Result<double> shared_prefix_decode_rate(model::Engine& engine, int vocab, int batch, int prefix, int steps,
                                         bool shared) {
  constexpr int kTail = 16;
  const cache::KvGeometry geometry = engine.kv_geometry(16);
  cache::PagePool pool(geometry, geometry.pages_for(prefix + kTail + steps) * (batch + 1), *engine.page_allocator());
  if (pool.storage_error()) return std::unexpected(*pool.storage_error());
  const auto context = random_tokens(prefix, vocab, 7);
  const int full_pages = prefix / geometry.page_size;
  model::KvSequence owner;
  if (auto r = model::prefill(engine, pool, owner, context, 512, model::LogitsMode::none); !r)
    return std::unexpected(r.error());
  std::vector<model::KvSequence> seqs(static_cast<std::size_t>(batch));
  for (int i = 0; i < batch; ++i) {
    model::KvSequence& s = seqs[std::size_t(i)];
    std::vector<model::TokenId> rest(context);
    if (shared) {
      model::borrow_prefix(s, owner, full_pages, pool);
      rest.erase(rest.begin(), rest.begin() + std::ptrdiff_t(s.tokens.size()));
    }
    const auto tail = random_tokens(kTail, vocab, 200 + std::uint32_t(i));
    rest.insert(rest.end(), tail.begin(), tail.end());
    if (auto r = model::prefill(engine, pool, s, rest, 512, model::LogitsMode::none); !r)
      return std::unexpected(r.error());
  }
  auto rate = decode_and_release(engine, pool, seqs, steps, vocab);
  model::release(owner, pool);
  return rate;
}

// Decode as the scheduler runs it: every row asks for its token (LogitsMode::last_token,
// drawn by `draw`: greedy, or sampled with a uniform number per row and step), the next
// step's token. Without overlap each step is collected before the next is built from the
// ids it returned; overlapped, step k+1 is submitted before step k is collected, its
// tokens step k's ids where the engine left them (model::future_token), as BatchEngine's
// overlap does. Aggregate tokens/s.
Result<double> drawn_decode_rate(model::Engine& engine, cache::PagePool& pool, int batch, int steps, int vocab,
                                 bool overlapped, model::TokenDraw draw) {
  auto prefilled = prefill_sequences(engine, pool, batch, vocab, 300, kDecodePrompt + steps);
  if (!prefilled) return std::unexpected(prefilled.error());
  std::vector<model::KvSequence>& seqs = *prefilled;
  std::vector<model::TokenId> next(std::size_t(batch), 1), futures;
  for (int i = 0; i < batch; ++i) futures.push_back(model::future_token(std::size_t(i)));
  auto submit = [&](int step, const std::vector<model::TokenId>& tokens) {
    std::vector<model::SequenceStep> rows;
    for (int i = 0; i < batch; ++i) {
      draw.uniform = double((step * 7919 + i * 104729) % 1000) / 1000.0;
      rows.push_back({std::span(&tokens[std::size_t(i)], 1), kDecodePrompt + step, seqs[std::size_t(i)].pages,
                      model::LogitsMode::last_token, draw});
    }
    return engine.submit(rows, pool);
  };
  model::StepOutput out;
  Result<void> ok;
  int in_flight = 0;
  const auto t0 = Clock::now();
  for (int step = 0; step < steps && ok; ++step) {
    ok = submit(step, overlapped && step > 0 ? futures : next);
    if (!ok) break;
    if (++in_flight == 1 && overlapped && step + 1 < steps) continue;  // step 0 stays queued
    ok = engine.collect(out);
    --in_flight;
    if (ok && !overlapped) next = out.tokens;
  }
  while (in_flight-- > 0) (void)engine.collect(out);  // the step left queued (or after an error)
  const double seconds = seconds_since(t0);
  for (auto& s : seqs) model::release(s, pool);
  if (!ok) return std::unexpected(ok.error());
  return double(batch) * steps / seconds;
}

Result<EngineFigures> measure(model::Engine& engine, cache::PagePool& pool, int vocab, int reps,
                              const std::vector<int>& prompts, const std::vector<int>& batches) {
  EngineFigures f;
  f.prefill.assign(prompts.size(), 0.0);
  f.decode.assign(batches.size(), 0.0);
  for (std::size_t p = 0; p < prompts.size(); ++p) {
    const auto prompt = random_tokens(prompts[p], vocab, 1);
    for (int r = 0; r <= reps; ++r) {  // r == 0 warms up
      model::KvSequence seq;
      const auto t0 = Clock::now();
      if (auto out = model::prefill(engine, pool, seq, prompt, 512, model::LogitsMode::last); !out)
        return std::unexpected(out.error());
      const double rate = prompts[p] / seconds_since(t0);
      model::release(seq, pool);
      if (r > 0) f.prefill[p] += rate / reps;
    }
  }
  for (int r = 0; r < reps; ++r)
    for (std::size_t b = 0; b < batches.size(); ++b) {
      auto rate = decode_rate(engine, pool, batches[b], decode_steps(batches[b]), vocab);
      if (!rate) return std::unexpected(rate.error());
      f.decode[b] += *rate / reps;
    }
  return f;
}

// drawn_decode_rate at each batch size: greedy waiting, greedy overlapped and sampled
// overlapped side by side.
Result<DrawnFigures> measure_drawn(model::Engine& engine, cache::PagePool& pool, int vocab, int reps,
                                   const std::vector<int>& batches) {
  DrawnFigures g;
  for (auto* v : {&g.waiting, &g.overlapped, &g.sampled}) v->assign(batches.size(), 0.0);
  struct Case {
    std::vector<double>* figures;
    bool overlapped;
    model::TokenDraw draw;
  };
  const Case cases[] = {{&g.waiting, false, {}}, {&g.overlapped, true, {}}, {&g.sampled, true, kSampledDraw}};
  const model::GraphCounts before = engine.graph_counts();
  for (int r = 0; r < reps; ++r)
    for (std::size_t b = 0; b < batches.size(); ++b)
      for (const Case& c : cases) {
        auto rate = drawn_decode_rate(engine, pool, batches[b], decode_steps(batches[b]), vocab, c.overlapped, c.draw);
        if (!rate) return std::unexpected(rate.error());
        (*c.figures)[b] += *rate / reps;
      }
  const model::GraphCounts after = engine.graph_counts();
  g.graphs = {after.replayed - before.replayed, after.captured - before.captured};
  return g;
}

}  // namespace

namespace {

struct BenchEngineOptions {
  int reps = 3;
  std::string prompts = "512", batches = "1,8";
  int shared_prefix = 1024, shared_batch = 8;
  bool json = false;
  RuntimeOptions runtime;  // --model, --device, --threads, --precision
};

int bench_engine(const BenchEngineOptions& o) {
  RuntimeConfig config;
  o.runtime.apply(config);
  const int threads = config.num_threads > 0 ? config.num_threads : int(std::thread::hardware_concurrency());
  const int reps = o.reps;
  const std::string path = config.model_path;
  auto loaded = model::Model::load(path);
  if (!loaded) return std::fprintf(stderr, "arbor: %s\n", loaded.error().describe().c_str()), kExitInvalid;
  const model::Model& m = **loaded;
  const model::Device device = engine_device(config.device);
  const std::vector<int> prompts = parse_integer_list(o.prompts), batches = parse_integer_list(o.batches);
  const int longest_prompt = *std::max_element(prompts.begin(), prompts.end());
  const int widest_batch = *std::max_element(batches.begin(), batches.end());
  // A batch's aggregate decode rate over batch 1's, when batch 1 was measured.
  const auto batch1 = std::find(batches.begin(), batches.end(), 1);
  auto over_batch1 = [&](const EngineFigures& f, std::size_t b) -> std::optional<double> {
    if (batch1 == batches.end()) return std::nullopt;
    return f.decode[b] / f.decode[std::size_t(batch1 - batches.begin())];
  };

  // Both activation precisions side by side, in one process (the machine is noisy).
  std::vector<std::pair<std::string, EngineFigures>> results;
  SharedPrefixFigures prefix_figures;  // with the first precision measured
  DrawnFigures drawn;                  // likewise
  cache::KvGeometry geometry;
  std::string device_used, device_info;
  for (const Precision precision : {Precision::accurate, Precision::fast}) {
    if (o.runtime.given(kPrecisionFlag) && config.precision != precision) continue;
    const std::string name = to_string(precision);
    auto engine = model::make_engine(m, {device, threads, engine_precision(precision)});
    if (!engine) return std::fprintf(stderr, "arbor: %s\n", engine.error().describe().c_str()), kExitInvalid;
    device_used = model::device_name((*engine)->device());
    device_info = (*engine)->describe();
    geometry = (*engine)->kv_geometry(16);
    Result<EngineFigures> figures;
    {  // an engine's allocator holds one pool at a time (the CUDA one: one device region)
      const int pages = geometry.pages_for(longest_prompt) +
                        widest_batch * geometry.pages_for(kDecodePrompt + decode_steps(1));
      cache::PagePool pool(geometry, pages, *(*engine)->page_allocator());
      if (pool.storage_error())
        return std::fprintf(stderr, "arbor: %s\n", pool.storage_error()->describe().c_str()), kExitFailed;
      figures = measure(**engine, pool, m.config().vocab_size, reps, prompts, batches);
      if (figures && results.empty()) {
        auto measured = measure_drawn(**engine, pool, m.config().vocab_size, reps, batches);
        if (!measured) figures = std::unexpected(measured.error());
        else drawn = std::move(*measured);
      }
    }
    if (!figures) return std::fprintf(stderr, "arbor: %s\n", figures.error().describe().c_str()), kExitFailed;
    // The activation precision is a CPU setting (its int8 matmuls): other devices keep
    // f32 activations, so one pass measures them.
    const bool cpu = (*engine)->device() == model::Device::cpu;
    results.emplace_back(cpu ? name : "f32", *figures);
    if (o.shared_prefix > 0 && results.size() == 1) {
      for (const bool shared : {true, false}) {
        auto rate = shared_prefix_decode_rate(**engine, m.config().vocab_size, o.shared_batch, o.shared_prefix, 32,
                                              shared);
        if (!rate) return std::fprintf(stderr, "arbor: %s\n", rate.error().describe().c_str()), kExitFailed;
        (shared ? prefix_figures.shared : prefix_figures.private_copies) = *rate;
      }
    }
    if (!cpu) break;
  }

  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  const double peak_rss_mb = double(usage.ru_maxrss) / 1024.0;
  if (o.json) {
    nlohmann::json j = {{"model", m.config().name}, {"device", device_used}, {"device_info", device_info},
                        {"threads", threads},
                        {"kv_bytes_per_token", geometry.bytes_per_token()}, {"peak_rss_mb", peak_rss_mb}};
    for (const auto& [name, f] : results) {
      nlohmann::json& figures = j["precision"][name];
      for (std::size_t p = 0; p < prompts.size(); ++p)
        figures["pp" + std::to_string(prompts[p]) + "_tokens_per_s"] = f.prefill[p];
      for (std::size_t b = 0; b < batches.size(); ++b) {
        const std::string batch = std::to_string(batches[b]);
        if (batches[b] == 1) {
          figures["tg128_tokens_per_s"] = f.decode[b];
          continue;
        }
        figures["batch" + batch + "_decode_tokens_per_s"] = f.decode[b];
        if (const auto ratio = over_batch1(f, b)) figures["batch" + batch + "_speedup"] = *ratio;
      }
    }
    for (std::size_t b = 0; b < batches.size(); ++b) {
      j["greedy_decode"]["batch" + std::to_string(batches[b])] = {
          {"waiting_tokens_per_s", drawn.waiting[b]},
          {"overlapped_tokens_per_s", drawn.overlapped[b]},
          {"speedup", drawn.overlapped[b] / drawn.waiting[b]}};
      j["sampled_decode"]["batch" + std::to_string(batches[b])] = {
          {"overlapped_tokens_per_s", drawn.sampled[b]}, {"vs_greedy", drawn.sampled[b] / drawn.overlapped[b]}};
    }
    j["graph_steps"] = {{"replayed", drawn.graphs.replayed}, {"captured", drawn.graphs.captured}};
    if (o.shared_prefix > 0)
      j["shared_prefix_decode"] = {{"prefix_tokens", o.shared_prefix},
                                   {"batch", o.shared_batch},
                                   {"activations", results.front().first},
                                   {"shared_tokens_per_s", prefix_figures.shared},
                                   {"private_copies_tokens_per_s", prefix_figures.private_copies},
                                   {"speedup", prefix_figures.shared / prefix_figures.private_copies}};
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("model            %s (%s)\n", m.config().name.c_str(), path.c_str());
    std::printf("threads          %d\n", threads);
    std::printf("device           %s\n", device_info.c_str());
    for (const auto& [name, f] : results) {
      std::printf("[%s activations]\n", name.c_str());
      for (std::size_t p = 0; p < prompts.size(); ++p)
        std::printf("  %-14s %8.1f tokens/s\n", ("pp" + std::to_string(prompts[p])).c_str(), f.prefill[p]);
      for (std::size_t b = 0; b < batches.size(); ++b) {
        if (batches[b] == 1) {
          std::printf("  tg128          %8.1f tokens/s\n", f.decode[b]);
          continue;
        }
        std::printf("  decode batch %-2d%8.1f tokens/s aggregate", batches[b], f.decode[b]);
        if (const auto ratio = over_batch1(f, b)) std::printf(" (%.2fx batch 1)", *ratio);
        std::printf("\n");
      }
    }
    std::printf("decode with drawn tokens fed back (%s activations): greedy, each step waiting vs queued behind the "
                "one before; sampled (temperature 0.8, top_p 0.95), queued:\n",
                results.front().first.c_str());
    for (std::size_t b = 0; b < batches.size(); ++b)
      std::printf("  batch %-8d %8.1f vs %8.1f tokens/s (%.2fx); sampled %8.1f tokens/s (%.2fx greedy)\n",
                  batches[b], drawn.waiting[b], drawn.overlapped[b], drawn.overlapped[b] / drawn.waiting[b],
                  drawn.sampled[b], drawn.sampled[b] / drawn.overlapped[b]);
    if (drawn.graphs.replayed + drawn.graphs.captured > 0)
      std::printf("  of these steps, %llu replayed a graph as it was captured, %llu were captured\n",
                  static_cast<unsigned long long>(drawn.graphs.replayed),
                  static_cast<unsigned long long>(drawn.graphs.captured));
    if (o.shared_prefix > 0)
      std::printf("decode batch %d over a %d-token prefix (%s activations): %.1f tokens/s with its pages shared, "
                  "%.1f with private copies (%.2fx)\n",
                  o.shared_batch, o.shared_prefix, results.front().first.c_str(), prefix_figures.shared,
                  prefix_figures.private_copies, prefix_figures.shared / prefix_figures.private_copies);
    std::printf("KV per token     %zu bytes (f16)\n", geometry.bytes_per_token());
    std::printf("peak RSS         %.1f MB\n", peak_rss_mb);
  }
  return kExitOk;
}

}  // namespace

Runner setup_bench_engine(CLI::App& app) {
  auto o = std::make_shared<BenchEngineOptions>();
  o->runtime.declare(app, kModelFlag | kDeviceFlag | kThreadsFlag | kPrecisionFlag);
  app.get_option("--precision")
      ->default_str("")
      ->description("measure only this activation precision: accurate or fast (default: both, side by side)");
  app.add_option("--reps", o->reps, "measured repetitions (after one warm-up)")
      ->type_name("N")
      ->check(integer_in(1, 1000))
      ->capture_default_str();
  app.add_option("--prompt", o->prompts, "prompt lengths of the prefill figures (ppN), a comma list")
      ->type_name("N,N,...")
      ->check(integer_list_in(1, 32768))
      ->capture_default_str();
  declare_bench_counts(app, "--batch", o->batches, "decode batch sizes (aggregate tokens/s; batch 1 is tg128)");
  app.add_option("--shared-prefix", o->shared_prefix,
                 "prefix tokens of the shared-prefix decode (sub-agents over one SharedPrefix: its pages shared vs "
                 "private copies); 0 skips it")
      ->type_name("N")
      ->check(integer_in(0, 1 << 20))
      ->capture_default_str();
  app.add_option("--shared-batch", o->shared_batch, "sequences decoding over that prefix together")
      ->type_name("N")
      ->check(integer_in(1, 256))
      ->capture_default_str();
  app.add_flag("--json", o->json, "print the figures as one JSON document");
  return [o] { return bench_engine(*o); };
}

}  // namespace arbor::cli
