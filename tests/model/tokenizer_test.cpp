// Tokenizer tests against llama.cpp's published vectors (tests/data/tokenizers)
// and SmolLM2's real vocabulary.
#include "model/tokenizer.hpp"

#include "model/gguf_writer.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace arbor::model {
namespace {

const std::string kVectorDir = ARBOR_SOURCE_DIR "/tests/data/tokenizers";

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Case {
  std::string text;
  std::vector<std::int32_t> ids;
};

// .inp: cases separated by "\n__ggml_vocab_test__\n" (the last runs to the end of the
// file); .out: one line of ids per case.
std::vector<Case> read_cases(const std::string& vocab_file) {
  const std::string inp = read_all(vocab_file + ".inp");
  const std::string out = read_all(vocab_file + ".out");
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> texts;
  for (std::size_t pos = 0;;) {
    const std::size_t hit = inp.find(sep, pos);
    if (hit == std::string::npos) {
      texts.push_back(inp.substr(pos));
      break;
    }
    texts.push_back(inp.substr(pos, hit - pos));
    pos = hit + sep.size();
  }
  std::vector<std::string> lines;
  std::stringstream ls(out);
  for (std::string line; std::getline(ls, line);) lines.push_back(line);
  // A trailing empty case has no line of its own after the final newline.
  while (lines.size() < texts.size()) lines.emplace_back();
  std::vector<Case> cases;
  for (std::size_t i = 0; i < texts.size(); ++i) {
    Case c{texts[i], {}};
    std::stringstream is(lines[i]);
    for (std::int32_t id; is >> id;) c.ids.push_back(id);
    cases.push_back(std::move(c));
  }
  return cases;
}

class VocabVectors : public ::testing::TestWithParam<const char*> {};

TEST_P(VocabVectors, MatchesReferenceIdsAndRoundTrips) {
  const std::string path = kVectorDir + "/" + GetParam();
  auto file = GgufFile::open(path);
  ASSERT_TRUE(file) << file.error().describe();
  auto tok = Tokenizer::from_gguf(*file);
  ASSERT_TRUE(tok) << tok.error().describe();
  const auto cases = read_cases(path);
  ASSERT_GE(cases.size(), 40u);
  int failures = 0;
  std::size_t num_ids = 0;
  for (const Case& c : cases) {
    num_ids += c.ids.size();
    const auto ids = (*tok)->encode(c.text, /*parse_special=*/false);
    EXPECT_EQ(ids, c.ids) << "text: '" << c.text << "'";
    EXPECT_EQ((*tok)->decode(ids), c.text);
    failures += ids != c.ids;
  }
  EXPECT_EQ(failures, 0);
  EXPECT_GT(num_ids, 300u);  // the vectors were really read
}

INSTANTIATE_TEST_SUITE_P(LlamaCpp, VocabVectors,
                         ::testing::Values("ggml-vocab-gpt-2.gguf", "ggml-vocab-llama-spm.gguf",
                                           "ggml-vocab-phi-3.gguf", "ggml-vocab-mpt.gguf",
                                           "ggml-vocab-starcoder.gguf", "ggml-vocab-refact.gguf"),
                         [](const auto& info) {
                           std::string n = info.param;
                           n = n.substr(11, n.size() - 11 - 5);  // strip "ggml-vocab-" / ".gguf"
                           for (char& ch : n) if (ch == '-') ch = '_';
                           return n;
                         });

Result<std::unique_ptr<Tokenizer>> load_vector_vocab(const char* name) {
  auto file = GgufFile::open(kVectorDir + "/" + name);
  if (!file) return std::unexpected(file.error());
  return Tokenizer::from_gguf(*file);  // the tokenizer copies what it needs
}

TEST(SentencePiece, SpecialTokensDummyPrefixAndBos) {
  auto tok = load_vector_vocab("ggml-vocab-llama-spm.gguf");
  ASSERT_TRUE(tok) << tok.error().describe();
  Tokenizer& t = **tok;
  EXPECT_TRUE(t.add_bos());
  EXPECT_EQ(t.bos_id(), 1);
  EXPECT_EQ(t.encode(" Hello", false), (std::vector<std::int32_t>{29871, 15043}));
  // Control text is parsed only when asked; each text fragment gets the dummy prefix.
  EXPECT_EQ(t.encode("<s>Hello", true), (std::vector<std::int32_t>{1, 15043}));
  EXPECT_NE(t.encode("<s>Hello", false).front(), 1);
  EXPECT_EQ(t.decode(t.encode("<s>Hello", true)), "<s> Hello");
  EXPECT_EQ(t.decode(t.encode("<s>Hello", true), /*render_special=*/false), "Hello");
  EXPECT_EQ(t.token_to_piece(15043), " Hello");
  EXPECT_EQ(t.token_to_piece(13), "\n");  // <0x0A> byte token
  EXPECT_TRUE(t.is_end_of_generation(2));
}

TEST(SentencePiece, Phi3ChatMarkers) {
  auto tok = load_vector_vocab("ggml-vocab-phi-3.gguf");
  ASSERT_TRUE(tok) << tok.error().describe();
  const auto ids = (*tok)->encode("<|user|>\nHi<|end|>", true);
  ASSERT_GE(ids.size(), 3u);
  EXPECT_EQ(ids.front(), 32010);
  EXPECT_EQ(ids.back(), 32007);
  EXPECT_TRUE((*tok)->is_end_of_generation(32007));  // <|end|>
  EXPECT_TRUE((*tok)->is_end_of_generation(32000));  // eos <|endoftext|>
}

TEST(TokenizerFactory, RejectsUnknownModels) {
  GgufWriter w;
  w.set_string("tokenizer.ggml.model", "rwkv");
  w.set("tokenizer.ggml.tokens", GgufValue::string_array({"a", "b"}));
  const auto bytes = w.serialize();
  auto f = GgufFile::parse(bytes);
  ASSERT_TRUE(f);
  auto t = Tokenizer::from_gguf(*f);
  ASSERT_FALSE(t);
  EXPECT_EQ(t.error().code, ErrorCode::unsupported);
  EXPECT_NE(t.error().message.find("rwkv"), std::string::npos);

  GgufWriter bad;
  bad.set_string("tokenizer.ggml.model", "gpt2");
  bad.set("tokenizer.ggml.tokens", GgufValue::string_array({"a", "b"}));
  bad.set_u32("tokenizer.ggml.eos_token_id", 7);
  bad.set("tokenizer.ggml.merges", GgufValue::string_array({"a b"}));
  const auto bad_bytes = bad.serialize();
  auto g = GgufFile::parse(bad_bytes);
  ASSERT_TRUE(g);
  auto u = Tokenizer::from_gguf(*g);
  ASSERT_FALSE(u);
  EXPECT_EQ(u.error().code, ErrorCode::corrupt_data);
  EXPECT_NE(u.error().message.find("eos_token_id"), std::string::npos);
}

// A tiny hand-made BPE vocabulary: merges apply by rank, not by length or order.
TEST(TokenizerFactory, TinyBpeMergesByRank) {
  GgufWriter w;
  w.set_string("tokenizer.ggml.model", "gpt2");
  w.set_string("tokenizer.ggml.pre", "gpt2");
  w.set("tokenizer.ggml.tokens", GgufValue::string_array({"a", "b", "c", "ab", "bc", "abc"}));
  w.set("tokenizer.ggml.merges", GgufValue::string_array({"b c", "a b", "ab c", "a bc"}));
  const auto bytes = w.serialize();
  auto f = GgufFile::parse(bytes);
  ASSERT_TRUE(f);
  auto t = Tokenizer::from_gguf(*f);
  ASSERT_TRUE(t) << t.error().describe();
  // "b c" (rank 0) first -> a + bc -> "a bc" (rank 3) -> abc.
  EXPECT_EQ((*t)->encode("abc", false), (std::vector<std::int32_t>{5}));
  EXPECT_EQ((*t)->encode("ab", false), (std::vector<std::int32_t>{3}));
  EXPECT_EQ((*t)->encode("cab", false), (std::vector<std::int32_t>{2, 3}));
}

class SmolLM2 : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!std::filesystem::exists(ARBOR_DEFAULT_MODEL)) return;
    auto f = GgufFile::open(ARBOR_DEFAULT_MODEL);
    ASSERT_TRUE(f) << f.error().describe();
    file_ = new GgufFile(std::move(*f));
    auto t = Tokenizer::from_gguf(*file_);
    ASSERT_TRUE(t) << t.error().describe();
    tok_ = t->release();
  }
  static void TearDownTestSuite() {
    delete tok_;
    delete file_;
    tok_ = nullptr;
    file_ = nullptr;
  }
  void SetUp() override {
    if (!tok_) GTEST_SKIP() << "default model missing: run scripts/fetch_model.sh";
  }
  static inline GgufFile* file_ = nullptr;
  static inline Tokenizer* tok_ = nullptr;
};

TEST_F(SmolLM2, ReferenceVectors) {
  using V = std::vector<std::int32_t>;
  EXPECT_EQ(tok_->encode("The capital of France is", true), (V{504, 3575, 282, 4649, 314}));
  EXPECT_EQ(tok_->encode("Hello world! 123", true), (V{19556, 905, 17, 216, 33, 34, 35}));
  EXPECT_EQ(tok_->encode("<|im_start|>", true), (V{1}));
}

TEST_F(SmolLM2, SpecialTokensOnlyWhenAsked) {
  const auto parsed = tok_->encode("<|im_start|>user\nHi<|im_end|>\n", true);
  ASSERT_GE(parsed.size(), 4u);
  EXPECT_EQ(parsed.front(), 1);
  EXPECT_EQ(std::count(parsed.begin(), parsed.end(), 2), 1);
  const auto plain = tok_->encode("<|im_start|>", false);
  EXPECT_GT(plain.size(), 1u);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 1), 0);
  EXPECT_EQ(tok_->decode(plain), "<|im_start|>");
  EXPECT_EQ(tok_->decode(parsed), "<|im_start|>user\nHi<|im_end|>\n");
  EXPECT_EQ(tok_->decode(parsed, /*render_special=*/false), "user\nHi\n");
}

TEST_F(SmolLM2, VocabularyFacts) {
  EXPECT_EQ(tok_->vocab_size(), 49152);
  EXPECT_EQ(tok_->bos_id(), 1);
  EXPECT_EQ(tok_->eos_id(), 2);
  EXPECT_FALSE(tok_->add_bos());
  EXPECT_TRUE(tok_->is_end_of_generation(2));
  EXPECT_TRUE(tok_->is_end_of_generation(0));
  EXPECT_FALSE(tok_->is_end_of_generation(504));
  EXPECT_EQ(tok_->token_to_piece(504), "The");
  EXPECT_EQ(tok_->token_to_piece(3575), " capital");
  EXPECT_EQ(tok_->token_type(1), TokenType::control);
  EXPECT_EQ(tok_->token_id("<|im_end|>"), 2);
}

TEST_F(SmolLM2, RoundTripsAwkwardText) {
  for (const std::string text :
       {"", " ", "\n\n\n", "  leading and trailing  ", "tabs\tand\r\nCRLF", "ÄÖÜ äöü ß €100",
        "日本語のテキスト", "emoji 🦙🚀 mix", "12345678901234567890", "x\xC3\xA4\xE2\x82", "Mixed <|im_end|> text"}) {
    EXPECT_EQ(tok_->decode(tok_->encode(text, false)), text) << text;
  }
}

// Bytes that never occur in UTF-8 (0xFF) have no token in SmolLM2's vocabulary; they
// become the unknown token rather than being dropped silently.
TEST_F(SmolLM2, ImpossibleBytesBecomeUnknown) {
  const auto ids = tok_->encode("a\xFF", false);
  ASSERT_EQ(ids.size(), 2u);
  EXPECT_EQ(ids[1], tok_->vocabulary().unk_id);
}

TEST_F(SmolLM2, PiecesConcatenateToDecode) {
  const auto ids = tok_->encode("Streaming: 🦙 ß 42", false);
  std::string pieces;
  for (auto id : ids) pieces += tok_->token_to_piece(id);
  EXPECT_EQ(pieces, tok_->decode(ids));
}

}  // namespace
}  // namespace arbor::model
