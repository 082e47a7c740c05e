// The scheduler's debug trace (actors/batch_engine.cpp trace_step): one line per step, and
// its per-step figures add up to the scheduler's own totals.
#include <gtest/gtest.h>

#include <regex>
#include <sstream>

#include <spdlog/sinks/ostream_sink.h>

#include "common/log.hpp"
#include "batch_engine_test_util.hpp"

namespace arbor::actors {
namespace {

using namespace testing;

// Routes the logger into a string (instead of stderr) at debug level for the test's
// lifetime. Tests run one at a time, so swapping the sinks is safe.
class CapturedLog {
 public:
  CapturedLog()
      : sink_(std::make_shared<spdlog::sinks::ostream_sink_mt>(out_)),
        saved_sinks_(log::logger().sinks()),
        saved_level_(log::logger().level()) {
    sink_->set_pattern("%v");
    log::logger().sinks() = {sink_};
    log::logger().set_level(spdlog::level::debug);
  }
  ~CapturedLog() {
    log::logger().sinks() = saved_sinks_;
    log::logger().set_level(saved_level_);
  }
  std::vector<std::string> lines() const {
    std::vector<std::string> out;
    std::istringstream in(out_.str());
    for (std::string line; std::getline(in, line);) out.push_back(line);
    return out;
  }

 private:
  std::ostringstream out_;
  std::shared_ptr<spdlog::sinks::ostream_sink_mt> sink_;
  std::vector<spdlog::sink_ptr> saved_sinks_;
  spdlog::level::level_enum saved_level_;
};

TEST(BatchEngineTrace, OneLinePerStepWhoseFiguresAddUpToTheTotals) {
  Harness h(config());
  CapturedLog log;
  const auto ids = submit_team(h, 4, 6);
  h.drain();
  const auto snap = h.s->snapshot();
  const auto lines = log.lines();
  ASSERT_EQ(lines.size(), snap.num_steps);
  const std::regex shape(
      R"(step (\d+): batch (\d+) rows \((\d+) decode, (\d+) prefill of (\d+) tokens\); admitted (\d+), finished (\d+), )"
      R"(live \d+, queued \d+; cache \+(\d+) hit tokens, \+(\d+) evicted pages; pages used \d+ free \d+ idle \d+ of (\d+))");
  std::uint64_t decode_rows = 0, prefill_tokens = 0, admitted = 0, finished = 0, hits = 0;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    std::smatch m;
    ASSERT_TRUE(std::regex_match(lines[i], m, shape)) << lines[i];
    EXPECT_EQ(std::stoul(m[1]), i + 1);
    EXPECT_EQ(std::stoul(m[2]), std::stoul(m[3]) + std::stoul(m[4]));
    EXPECT_EQ(std::stoul(m[10]), 256u);
    decode_rows += std::stoul(m[3]);
    prefill_tokens += std::stoul(m[5]);
    admitted += std::stoul(m[6]);
    finished += std::stoul(m[7]);
    hits += std::stoul(m[8]);
  }
  std::uint64_t generated = 0;
  for (auto id : ids) generated += h.results.at(id).generated_tokens;
  // Every generated token but each sequence's first (sampled after its prefill) is a decode row.
  EXPECT_EQ(decode_rows, generated - ids.size());
  EXPECT_EQ(prefill_tokens, snap.computed_tokens);
  EXPECT_EQ(admitted, ids.size());
  EXPECT_EQ(finished, ids.size());
  EXPECT_EQ(hits, snap.cached_tokens);
  EXPECT_GT(hits, 0u);  // the team shares its system prompt
  h.expect_clean();
}

TEST(BatchEngineTrace, NothingIsWrittenAboveDebug) {
  Harness h(config());
  CapturedLog log;
  log::logger().set_level(spdlog::level::info);
  submit_team(h, 2, 2);
  h.drain();
  EXPECT_TRUE(log.lines().empty());
}

}  // namespace
}  // namespace arbor::actors
