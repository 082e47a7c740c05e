// Constrained decoding overhead with the real model: per decode step, the time to
// compute token masks (JsonConstraint::allowed) and sample under them, against the
// engine's decode step, at batch 1 and 8; constrained vs free tokens/s; mask cache
// hit rates; and the cost of a mask on a cold cache. Goal: overhead under 10% of the
// decode time.
//
//   build/bench/constrained_bench [--model PATH] [--threads N] [--steps N] [--json]
//
// Each sequence gets a chat prompt asking for the schema, then decodes `steps` tokens
// (temperature 0.7, top-k 40, one seed per sequence); a finished document starts a fresh
// constraint on the same sequence, so caches see new documents throughout. The free
// run decodes the same prompts with the same sampler and no mask. overhead = (mask +
// masked sampling + accept - free sampling) / free decode time.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "cache/page_allocator.hpp"
#include "cache/page_pool.hpp"
#include "model/chat_template.hpp"
#include "model/cpu_engine.hpp"
#include "model/json_constraint.hpp"
#include "model/kv_sequence.hpp"
#include "model/model.hpp"
#include "model/sampler.hpp"

namespace {

using namespace arbor;
using namespace arbor::model;
using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

struct Schema {
  const char* name;
  const char* text;
  const char* prompt;
};

const Schema kSchemas[] = {
    {"person",
     R"({"type":"object","properties":{"name":{"type":"string","maxLength":40},"age":{"type":"integer","minimum":0,
"maximum":120},"email":{"type":"string","pattern":"^[a-z0-9.]+@[a-z0-9]+\\.[a-z]{2,4}$"},"languages":{"type":"array",
"items":{"enum":["English","French","German","Spanish","Chinese"]},"maxItems":3},"address":{"type":"object",
"properties":{"city":{"type":"string","maxLength":30},"country":{"type":"string","maxLength":30}},
"required":["city","country"],"additionalProperties":false}},"required":["name","age","email","languages","address"],
"additionalProperties":false})",
     "Describe a fictional person."},
    {"tasks",
     R"({"type":"object","properties":{"tasks":{"type":"array","items":{"type":"object","properties":{
"title":{"type":"string","maxLength":80},"priority":{"enum":["low","medium","high"]},"done":{"type":"boolean"}},
"required":["title","priority","done"],"additionalProperties":false},"minItems":1,"maxItems":6}},
"required":["tasks"],"additionalProperties":false})",
     "Plan the tasks to write a research report about the steam engine."},
    {"any", "{}", "Give me some JSON data about the planets."},
};

struct Sequence {
  KvSequence kv;
  Sampler sampler{{}};
  std::unique_ptr<JsonConstraint> constraint;
  std::int32_t next = 0;
};

struct RunFigures {
  double decode_s = 0, mask_s = 0, sample_s = 0, accept_s = 0;
  int steps = 0, tokens = 0, documents = 0;
  double tokens_per_s() const { return tokens / (decode_s + mask_s + sample_s + accept_s); }
};

std::vector<TokenId> prompt_ids(const Model& model, const Schema& s) {
  const auto tmpl = ChatTemplate::from_gguf(model.file());
  const std::vector<ChatMessage> messages = {
      {"system", "You are a helpful assistant. You reply with one JSON document and nothing else."},
      {"user", std::string(s.prompt) + "\nReply with JSON that follows this JSON Schema: " + s.text}};
  return tokenize_segments(model.tokenizer(), tmpl.render_segments(messages), model.tokenizer().add_bos()).ids;
}

// One run: `batch` sequences on schema `s`, `steps` decode steps.
RunFigures run(Engine& engine, cache::PagePool& pool, const Model& model,
               const std::shared_ptr<const CompiledConstraint>& compiled, const Schema& s, int batch, int steps,
               std::uint64_t seed) {
  RunFigures f;
  const auto ids = prompt_ids(model, s);
  std::vector<Sequence> seqs(static_cast<std::size_t>(batch));
  std::vector<KvSequence*> ptrs;
  std::vector<TokenId> next(static_cast<std::size_t>(batch));
  const std::size_t vocab = std::size_t(model.config().vocab_size);
  std::vector<float> logits;
  for (int i = 0; i < batch; ++i) {
    auto& q = seqs[std::size_t(i)];
    q.sampler = Sampler({.temperature = 0.7, .top_k = 40, .seed = seed + std::uint64_t(i)});
    if (compiled) q.constraint = std::make_unique<JsonConstraint>(compiled);
    auto out = prefill(engine, pool, q.kv, ids, 512);
    if (!out) {
      std::fprintf(stderr, "prefill: %s\n", out.error().message.c_str());
      std::exit(1);
    }
    logits.insert(logits.end(), out->begin(), out->end());
    ptrs.push_back(&q.kv);
  }
  for (int step = 0; step < steps; ++step) {
    for (int i = 0; i < batch; ++i) {
      auto& q = seqs[std::size_t(i)];
      std::span<const float> row(logits.data() + std::size_t(i) * vocab, vocab);
      std::int32_t token;
      if (q.constraint) {
        auto t0 = Clock::now();
        const TokenMask& mask = q.constraint->allowed();
        f.mask_s += since(t0);
        t0 = Clock::now();
        token = q.sampler.sample(row, mask);
        f.sample_s += since(t0);
        t0 = Clock::now();
        if (auto ok = q.constraint->accept(token); !ok) {
          std::fprintf(stderr, "accept: %s\n", ok.error().message.c_str());
          std::exit(1);
        }
        if (q.constraint->is_finished()) {
          ++f.documents;
          q.constraint = std::make_unique<JsonConstraint>(compiled);
        }
        f.accept_s += since(t0);
      } else {
        const auto t0 = Clock::now();
        token = q.sampler.sample(row);
        f.sample_s += since(t0);
      }
      next[std::size_t(i)] = token;
      ++f.tokens;
    }
    const auto t0 = Clock::now();
    auto out = decode_step(engine, pool, ptrs, next);
    f.decode_s += since(t0);
    if (!out) {
      std::fprintf(stderr, "decode: %s\n", out.error().message.c_str());
      std::exit(1);
    }
    logits = std::move(*out);
    ++f.steps;
  }
  for (auto& q : seqs) release(q.kv, pool);
  return f;
}

// Mask time on a cold cache, at the start of a document and inside a string.
double cold_mask_us(const std::shared_ptr<const CompiledConstraint>& compiled, const TokenTrie& trie,
                    std::string_view prefix_piece) {
  compiled->clear_caches();
  JsonConstraint c(compiled);
  if (!prefix_piece.empty())
    for (std::int32_t id = 0; id < trie.vocab_size(); ++id)
      if (trie.piece(id) == prefix_piece) {
        (void)c.accept(id);
        break;
      }
  const auto t0 = Clock::now();
  (void)c.allowed();
  return since(t0) * 1e6;
}

}  // namespace

int main(int argc, char** argv) {
  std::string model_path = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
  int threads = int(std::max(1u, std::thread::hardware_concurrency()));
  int steps = 64;
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--model" && i + 1 < argc) model_path = argv[++i];
    else if (a == "--threads" && i + 1 < argc) threads = std::atoi(argv[++i]);
    else if (a == "--steps" && i + 1 < argc) steps = std::atoi(argv[++i]);
    else if (a == "--json") json = true;
    else {
      std::fprintf(stderr, "usage: constrained_bench [--model PATH] [--threads N] [--steps N] [--json]\n");
      return 2;
    }
  }
  auto model = Model::load(model_path);
  if (!model) {
    std::fprintf(stderr, "%s\n", model.error().message.c_str());
    return 1;
  }
  auto t0 = Clock::now();
  const auto vocab = ConstraintVocabulary::build((*model)->tokenizer());
  const TokenTrie* trie = &vocab->trie();
  const double trie_ms = since(t0) * 1e3;
  CpuEngine engine((*model)->config(), (*model)->weights(), threads);
  cache::HostPageAllocator allocator;
  cache::PagePool pool(engine.kv_geometry(16), 8 * ((512 + steps) / 16 + 2) + 16, allocator);

  nlohmann::json report = {{"model", model_path}, {"threads", threads}, {"steps", steps},
                           {"vocabulary_build_ms", trie_ms}, {"trie_nodes", trie->num_nodes()}};
  if (!json) {
    std::printf("vocabulary: trie of %zu nodes and JSON string profile, built in %.1f ms\n\n", trie->num_nodes(),
                trie_ms);
    std::printf("%-7s %2s %4s %8s %8s %8s %7s %8s %8s %8s %8s %8s %6s %6s %5s\n", "schema", "b", "cache", "decode",
                "decode", "mask", "mask", "sample", "sample+", "overhd", "free", "constr", "state", "frame", "docs");
    std::printf("%-7s %2s %4s %8s %8s %8s %7s %8s %8s %8s %8s %8s %6s %6s %5s\n", "", "", "", "free", "constr",
                "ms/step", "/decode", "free", "accept", "", "tok/s", "tok/s", "hits", "hits", "");
  }
  for (const Schema& s : kSchemas) {
    t0 = Clock::now();
    auto compiled = CompiledConstraint::parse(s.text, vocab);
    const double compile_ms = since(t0) * 1e3;
    if (!compiled) {
      std::fprintf(stderr, "%s: %s\n", s.name, compiled.error().message.c_str());
      return 1;
    }
    const double cold_start_us = cold_mask_us(*compiled, *trie, "");
    const double cold_string_us = cold_mask_us(*compiled, *trie, s.name == std::string("any") ? "\"" : "{\"");
    for (int batch : {1, 8}) {
      // Cold: empty caches. Warm: other seeds (other documents), caches kept from the
      // cold run, as in a server. Each is compared with a free run right next to it.
      (*compiled)->clear_caches();
      for (int warm = 0; warm < 2; ++warm) {
        const std::uint64_t seed = 1000 + std::uint64_t(warm) * 100;
        const RunFigures free = run(engine, pool, **model, nullptr, s, batch, steps, seed);
        const auto before = (*compiled)->stats();
        const RunFigures con = run(engine, pool, **model, *compiled, s, batch, steps, seed);
        const auto after = (*compiled)->stats();
        const double masks = double(after.masks - before.masks);
        const double state_hits = double(after.state_hits - before.state_hits) / std::max(1.0, masks);
        const double frame_lookups =
            double(after.frame_hits + after.frame_misses - before.frame_hits - before.frame_misses);
        const double frame_hits = double(after.frame_hits - before.frame_hits) / std::max(1.0, frame_lookups);
        const double per_step = 1e3 / con.steps;
        const double extra = con.mask_s + con.sample_s + con.accept_s - free.sample_s;
        const double overhead = extra / free.decode_s;
        const char* cache = warm ? "warm" : "cold";
        if (json) {
          report["runs"].push_back({{"schema", s.name}, {"batch", batch}, {"cache", cache},
                                    {"compile_ms", compile_ms}, {"cold_mask_start_us", cold_start_us},
                                    {"cold_mask_inside_us", cold_string_us},
                                    {"free_decode_ms_per_step", free.decode_s * per_step},
                                    {"constrained_decode_ms_per_step", con.decode_s * per_step},
                                    {"mask_ms_per_step", con.mask_s * per_step},
                                    {"free_sample_ms_per_step", free.sample_s * per_step},
                                    {"constrained_sample_accept_ms_per_step", (con.sample_s + con.accept_s) * per_step},
                                    {"overhead_vs_decode", overhead}, {"free_tokens_per_s", free.tokens_per_s()},
                                    {"constrained_tokens_per_s", con.tokens_per_s()}, {"documents", con.documents},
                                    {"state_hit_rate", state_hits}, {"frame_hit_rate", frame_hits},
                                    {"trie_nodes_visited", after.trie_nodes - before.trie_nodes}});
        } else {
          std::printf("%-7s %2d %4s %8.2f %8.2f %8.3f %6.2f%% %8.3f %8.3f %7.1f%% %8.1f %8.1f %5.0f%% %5.0f%% %5d\n",
                      s.name, batch, cache, free.decode_s * per_step, con.decode_s * per_step, con.mask_s * per_step,
                      100 * con.mask_s / con.decode_s, free.sample_s * per_step,
                      (con.sample_s + con.accept_s) * per_step, overhead * 100, free.tokens_per_s(),
                      con.tokens_per_s(), state_hits * 100, frame_hits * 100, con.documents);
        }
      }
    }
    if (!json)
      std::printf("%-7s compile %.1f ms; mask on a cold cache: %.0f us at the start, %.0f us after the first token\n",
                  s.name, compile_ms, cold_start_us, cold_string_us);
  }
  if (json) std::printf("%s\n", report.dump(2).c_str());
  return 0;
}
