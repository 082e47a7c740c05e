// Token masks on the real SmolLM2 vocabulary against the brute-force reference (every
// token's bytes run through the automaton), along random walks through the grammar,
// with multi-byte UTF-8 split across byte tokens and tokens that span grammar
// boundaries (`","`, `":"`, `"}`); plus the constraint object and the sampler hook.
#include "model/json_constraint.hpp"

#include <gtest/gtest.h>

#include "json_schema_gen.hpp"
#include "model/gguf.hpp"
#include "model/sampler.hpp"

namespace arbor::model {
namespace {

class ConstraintTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto file = GgufFile::open(ARBOR_DEFAULT_MODEL);
    ASSERT_TRUE(file) << file.error().message << " (run scripts/fetch_model.sh)";
    auto tok = Tokenizer::from_gguf(*file);
    ASSERT_TRUE(tok) << tok.error().message;
    tokenizer_ = std::move(*tok);
    vocab_ = ConstraintVocabulary::build(*tokenizer_);
    trie_ = &vocab_->trie();
  }
  static void TearDownTestSuite() {
    trie_ = nullptr;
    vocab_.reset();
    tokenizer_.reset();
  }

  std::shared_ptr<const CompiledConstraint> compile(const std::string& schema) {
    auto c = CompiledConstraint::parse(schema, vocab_);
    EXPECT_TRUE(c) << (c ? "" : c.error().message);
    return c ? *c : nullptr;
  }

  std::int32_t id_of(std::string_view piece) {
    for (std::int32_t id = 0; id < trie_->vocab_size(); ++id)
      if (trie_->piece(id) == piece) return id;
    ADD_FAILURE() << "no token with piece '" << piece << "'";
    return -1;
  }

  // The optimized mask equals the reference in the constraint's current state.
  void expect_mask_matches(JsonConstraint& c) {
    TokenMask reference;
    c.compiled().mask_brute_force(c.state(), c.text(), reference);
    const TokenMask& fast = c.allowed();
    if (fast == reference) return;
    int shown = 0;
    for (std::int32_t id = 0; id < reference.size() && shown < 10; ++id)
      if (fast.allows(id) != reference.allows(id)) {
        ADD_FAILURE() << "after '" << c.text() << "': token " << id << " '" << trie_->piece(id)
                      << "' fast=" << fast.allows(id) << " reference=" << reference.allows(id);
        ++shown;
      }
  }

  // Random walk: pick allowed tokens (biased towards short documents by preferring
  // tokens that close things), comparing masks at every step.
  void random_walks(const std::string& schema, int walks, int max_steps, std::uint64_t seed) {
    auto compiled = compile(schema);
    ASSERT_TRUE(compiled);
    SamplerRng rng(seed);
    walks = std::max(1, walks / testing::kCaseDivisor);
    for (int w = 0; w < walks; ++w) {
      JsonConstraint c(compiled);
      for (int step = 0; step < max_steps && !c.is_finished(); ++step) {
        expect_mask_matches(c);
        if (HasFailure()) return;
        const auto ids = c.allowed().ids();
        ASSERT_FALSE(ids.empty()) << "dead end after '" << c.text() << "'";
        // Half the time, a token with structure in it (they cross grammar boundaries).
        std::vector<std::int32_t> structural;
        for (std::int32_t id : ids)
          if (trie_->piece(id).find_first_of("\"{}[],:") != std::string_view::npos || trie_->is_end_of_generation(id))
            structural.push_back(id);
        const auto& pool = !structural.empty() && rng.uniform() < 0.5 ? structural : ids;
        std::int32_t pick = pool[std::size_t(rng.next() % pool.size())];
        if (trie_->is_end_of_generation(pick) && rng.uniform() < 0.5) break;
        ASSERT_TRUE(c.accept(pick)) << "allowed token " << pick << " rejected after '" << c.text() << "'";
      }
      if (c.is_complete()) {
        auto v = c.value();
        EXPECT_TRUE(v) << v.error().message;
      }
    }
  }

  static inline std::unique_ptr<Tokenizer> tokenizer_;
  static inline std::shared_ptr<const ConstraintVocabulary> vocab_;
  static inline const TokenTrie* trie_ = nullptr;
};

TEST_F(ConstraintTest, TrieHoldsTextTokensOnly) {
  EXPECT_EQ(trie_->vocab_size(), 49152);
  const auto im_start = tokenizer_->token_id("<|im_start|>");
  ASSERT_TRUE(im_start);
  EXPECT_TRUE(trie_->piece(*im_start).empty());
  EXPECT_FALSE(trie_->end_of_generation_ids().empty());
  for (auto id : trie_->end_of_generation_ids()) EXPECT_TRUE(trie_->piece(id).empty());
  // Every text token is reachable through the trie with its own bytes.
  std::int32_t found = 0;
  for (std::uint32_t n = 0; n < trie_->num_nodes(); ++n)
    for (auto id : trie_->tokens_at(n)) {
      EXPECT_EQ(trie_->path(n), trie_->piece(id));
      ++found;
    }
  EXPECT_EQ(found, trie_->num_text_tokens());
  EXPECT_GT(found, 49000);
}

TEST_F(ConstraintTest, MasksMatchBruteForceOnRandomWalks) {
  random_walks(R"({"type":"object","properties":{"name":{"type":"string","maxLength":12},
      "age":{"type":"integer","minimum":0,"maximum":150},"tags":{"type":"array","items":{"enum":["a","b c","é"]},
      "maxItems":3},"ok":{"type":"boolean"}},"required":["name","age"],"additionalProperties":false})",
               6, 40, 1);
  random_walks(R"({"type":"array","items":{"anyOf":[{"type":"number","minimum":-2.5,"maximum":1000},
      {"type":"string","pattern":"^[a-z]{2,4}$"},{"type":"null"}]},"minItems":1})",
               6, 30, 2);
  random_walks(R"({"type":"object","additionalProperties":{"type":"integer"}})", 6, 30, 3);
  random_walks(R"({"$defs":{"t":{"type":"object","properties":{"v":{"type":"string","format":"date"},
      "k":{"type":"array","items":{"$ref":"#/$defs/t"}}},"required":["v"]}},"$ref":"#/$defs/t"})",
               4, 40, 4);
  random_walks("{}", 6, 30, 5);
}

TEST_F(ConstraintTest, MasksMatchBruteForceOnRandomSchemas) {
  testing::Gen g(99);
  int schemas = 0;
  const int wanted = 40 / testing::kCaseDivisor;
  for (int trial = 0; schemas < wanted && trial < 300; ++trial) {
    testing::SchemaGen sg(g, /*bounded=*/trial % 2 == 0);
    const std::string schema = sg.root().dump();
    if (!JsonGrammar::from_text(schema)) continue;  // contradictory random constraints
    SCOPED_TRACE(schema);
    random_walks(schema, 3, 30, std::uint64_t(trial));
    if (HasFailure()) return;
    ++schemas;
  }
  EXPECT_EQ(schemas, wanted);
}

TEST_F(ConstraintTest, MultiByteUtf8SplitAcrossByteTokens) {
  auto compiled = compile(R"({"type":"string","pattern":"^[a-zé]*$","maxLength":3})");
  ASSERT_TRUE(compiled);
  JsonConstraint c(compiled);
  ASSERT_TRUE(c.accept(id_of("\"")));
  ASSERT_TRUE(c.accept(id_of("\xC3")));  // first byte of é (U+00E9) or of any U+00C0..U+00FF
  expect_mask_matches(c);
  EXPECT_TRUE(c.allowed().allows(id_of("\xA9")));   // completes é
  EXPECT_FALSE(c.allowed().allows(id_of("\xA8")));  // è: not in the pattern
  EXPECT_FALSE(c.allowed().allows(id_of("a")));     // not a continuation byte
  EXPECT_FALSE(c.accept(id_of("\xA8")));
  ASSERT_TRUE(c.accept(id_of("\xA9")));
  EXPECT_EQ(c.text(), "\"é");
  expect_mask_matches(c);
  // A lead byte whose every completion the pattern rejects is never allowed.
  EXPECT_FALSE(c.allowed().allows(id_of("\xE2")));
  EXPECT_FALSE(c.allowed().allows(id_of("\xC4")));
}

TEST_F(ConstraintTest, TokensSpanningGrammarBoundaries) {
  auto compiled = compile(R"({"type":"object","properties":{"a":{"type":"string"},"b":{"type":"array",
      "items":{"type":"integer"}}},"required":["a","b"],"additionalProperties":false})");
  ASSERT_TRUE(compiled);
  JsonConstraint c(compiled);
  for (const char* piece : {"{\"", "a", "\":\"", "x"}) ASSERT_TRUE(c.accept(id_of(piece))) << piece;
  expect_mask_matches(c);
  EXPECT_TRUE(c.allowed().allows(id_of("\",\"")));   // ends a, starts the key b
  EXPECT_FALSE(c.allowed().allows(id_of("\"}")));    // b is required
  EXPECT_TRUE(c.allowed().allows(id_of("\"")));
  ASSERT_TRUE(c.accept(id_of("\",\"")));
  expect_mask_matches(c);
  EXPECT_TRUE(c.allowed().allows(id_of("b")));
  EXPECT_FALSE(c.allowed().allows(id_of("a")));
  ASSERT_TRUE(c.accept(id_of("b")));
  EXPECT_TRUE(c.allowed().allows(id_of("\":")));
  EXPECT_FALSE(c.allowed().allows(id_of("\":\"")));  // b is an array
  ASSERT_TRUE(c.accept(id_of("\":")));
  ASSERT_TRUE(c.accept(id_of("[")));
  ASSERT_TRUE(c.accept(id_of("1")));
  expect_mask_matches(c);
  EXPECT_TRUE(c.allowed().allows(id_of("]}")));
  EXPECT_FALSE(c.allowed().allows(id_of("}")));
  EXPECT_FALSE(c.allowed().allows(trie_->end_of_generation_ids()[0]));
  ASSERT_TRUE(c.accept(id_of("]}")));
  EXPECT_TRUE(c.is_complete());
  EXPECT_TRUE(c.is_finished());
  auto v = c.value();
  ASSERT_TRUE(v) << v.error().message;
  EXPECT_EQ(v->dump(), R"({"a":"x","b":[1]})");
  EXPECT_FALSE(c.accept(id_of("1")));
}

// A key that repeats (or begins like) an additional key written earlier: the mask
// excludes closing it, and still allows any other key.
TEST_F(ConstraintTest, WrittenAdditionalKeysAreNotRepeated) {
  auto compiled = compile(R"({"type":"object","properties":{"id":{"type":"integer"}},
      "additionalProperties":{"type":"integer"}})");
  ASSERT_TRUE(compiled);
  JsonConstraint c(compiled);
  for (const char* piece : {"{\"", "name", "\":", "1", ",\"", "na"}) ASSERT_TRUE(c.accept(id_of(piece))) << piece;
  expect_mask_matches(c);
  ASSERT_TRUE(c.accept(id_of("me")));
  expect_mask_matches(c);
  EXPECT_FALSE(c.allowed().allows(id_of("\":")));  // "name" again
  EXPECT_TRUE(c.allowed().allows(id_of("s")));
  ASSERT_TRUE(c.accept(id_of("s")));
  expect_mask_matches(c);
  EXPECT_TRUE(c.allowed().allows(id_of("\":")));   // "names" is new
  ASSERT_TRUE(c.accept(id_of("\":")));
  ASSERT_TRUE(c.accept(id_of("2")));
  ASSERT_TRUE(c.accept(id_of(",\"")));
  ASSERT_TRUE(c.accept(id_of("id")));
  expect_mask_matches(c);
  EXPECT_FALSE(c.allowed().allows(id_of("\":")));  // declared, but only before other keys
}

TEST_F(ConstraintTest, EndOfGenerationOnlyWhenComplete) {
  auto compiled = compile(R"({"type":"integer","maximum":500})");
  ASSERT_TRUE(compiled);
  JsonConstraint c(compiled);
  const std::int32_t eog = trie_->end_of_generation_ids()[0];
  EXPECT_FALSE(c.allowed().allows(eog));
  EXPECT_FALSE(c.accept(eog));
  ASSERT_TRUE(c.accept(id_of("4")));
  expect_mask_matches(c);
  EXPECT_TRUE(c.allowed().allows(eog));
  EXPECT_TRUE(c.is_complete());
  EXPECT_FALSE(c.is_finished());  // 4 may go on: 40, 400
  ASSERT_TRUE(c.accept(id_of("9")));
  EXPECT_TRUE(c.allowed().allows(id_of("9")));  // 499 <= 500
  ASSERT_TRUE(c.accept(id_of("9")));
  EXPECT_FALSE(c.allowed().allows(id_of("0")));  // 4990 > 500
  EXPECT_TRUE(c.allowed().allows(id_of(".")));   // 499.0
  expect_mask_matches(c);
  ASSERT_TRUE(c.accept(eog));
  EXPECT_TRUE(c.is_finished());
  EXPECT_EQ(*c.value(), Json(499));
  EXPECT_FALSE(c.accept(eog));
}

TEST_F(ConstraintTest, SpecialTokensNeverAllowed) {
  auto compiled = compile(R"({"type":"string"})");
  ASSERT_TRUE(compiled);
  JsonConstraint c(compiled);
  ASSERT_TRUE(c.accept(id_of("\"")));
  const auto im_start = *tokenizer_->token_id("<|im_start|>");
  EXPECT_FALSE(c.allowed().allows(im_start));
  EXPECT_FALSE(c.accept(im_start));
  EXPECT_GT(c.allowed().count(), 40000);
}

TEST_F(ConstraintTest, SamplerPicksOnlyAllowedTokens) {
  std::vector<float> logits(std::size_t(trie_->vocab_size()));
  SamplerRng rng(11);
  for (auto& l : logits) l = float(rng.uniform() * 8.0);
  TokenMask allowed(trie_->vocab_size());
  for (std::int32_t id : {5, 77, 1234, 40000}) allowed.allow(id);
  Sampler greedy({});
  std::int32_t best = 5;
  for (std::int32_t id : {77, 1234, 40000})
    if (logits[std::size_t(id)] > logits[std::size_t(best)]) best = id;
  EXPECT_EQ(greedy.sample(logits, allowed), best);
  for (std::uint64_t seed = 0; seed < 50; ++seed) {
    Sampler s({.temperature = 1.0, .top_p = 0.9, .top_k = 40, .seed = seed});
    EXPECT_TRUE(allowed.allows(s.sample(logits, allowed)));
  }
  // An all-allowed mask leaves sampling unchanged.
  TokenMask all(trie_->vocab_size());
  for (std::int32_t id = 0; id < all.size(); ++id) all.allow(id);
  Sampler a({.temperature = 0.8, .top_p = 0.95, .seed = 3}), b({.temperature = 0.8, .top_p = 0.95, .seed = 3});
  for (int i = 0; i < 20; ++i) EXPECT_EQ(a.sample(logits), b.sample(logits, all));
  EXPECT_EQ(greedy.sample(logits, TokenMask(trie_->vocab_size())), -1);
}

}  // namespace
}  // namespace arbor::model
