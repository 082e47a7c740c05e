// runtime/cluster/wire: a generation's outcome crosses the wire as JSON and comes back
// the same, its finish_reason by name; a name the router does not know is corrupt_data.
#include <gtest/gtest.h>

#include "runtime/cluster/wire.hpp"

namespace arbor::cluster {
namespace {

TEST(ClusterWire, AnOutcomeComesBackWithItsFinishReason) {
  for (const std::string& name : finish_reason_names()) {
    GenerateResult r;
    r.text = "hi";
    r.tokens = {1, 2};
    r.generated_tokens = 2;
    r.finish_reason = *parse_finish_reason(name);
    if (r.finish_reason == FinishReason::tool_calls) r.tool_calls = {{"call_1", "lookup", R"({"q":"x"})"}};
    const std::string wire = to_wire(Result<GenerateResult>(r));
    EXPECT_NE(wire.find("\"finish_reason\":\"" + name + "\""), std::string::npos) << wire;
    auto back = outcome_from_wire(wire);
    ASSERT_TRUE(back) << back.error().message;
    EXPECT_EQ(back->finish_reason, r.finish_reason);
    EXPECT_EQ(back->text, "hi");
    EXPECT_EQ(back->tool_calls.size(), r.tool_calls.size());
  }
}

TEST(ClusterWire, AnUnknownFinishReasonIsCorruptData) {
  GenerateResult r;
  std::string wire = to_wire(Result<GenerateResult>(r));
  const std::string stop = "\"finish_reason\":\"stop\"";
  ASSERT_NE(wire.find(stop), std::string::npos) << wire;
  wire.replace(wire.find(stop), stop.size(), "\"finish_reason\":\"eos\"");
  auto back = outcome_from_wire(wire);
  ASSERT_FALSE(back);
  EXPECT_EQ(back.error().code, ErrorCode::corrupt_data);
  EXPECT_EQ(back.error().message,
            "cluster wire: generation outcome from a peer: finish_reason must be stop, length, cancelled, tool_calls, "
            "prefill or error (got 'eos'); run the same Arbor version on the router and its nodes");
}

}  // namespace
}  // namespace arbor::cluster
