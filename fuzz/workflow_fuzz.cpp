// Fuzzes the workflow loader (parse, shape checks, inputs, prefixes, validation, plan
// building, lint) as `arbor validate`, `arbor run` and POST /v1/runs use it.
//
// Input: the workflow text, optionally followed by a NUL byte and "--input" overrides,
// one KEY=VALUE per line. Invariants: nothing throws or crashes; a failed load carries
// at least one error, each with a message; a loaded plan's agent ids are unique.
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz/fuzz_check.hpp"
#include "workflows/workflow.hpp"

namespace {

std::vector<std::string> lines(std::string_view text) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    if (end > pos) out.emplace_back(text.substr(pos, end - pos));
    pos = end + 1;
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace arbor::workflows;
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  const std::size_t nul = all.find('\0');
  const std::string_view text = all.substr(0, nul);
  InputOverrides overrides;
  if (nul != std::string_view::npos) {
    auto parsed = parse_input_overrides(lines(all.substr(nul + 1)));
    if (!parsed) return 0;
    overrides = std::move(*parsed);
  }
  // Prefix document files: the server's confined access, below a folder that does not exist.
  auto plan = load_workflow_text(text, arbor::DocumentAccess::confined_to("/nonexistent/arbor-fuzz"), overrides, "fuzz.json");
  if (!plan) {
    ARBOR_FUZZ_CHECK(plan.error().has_errors(), plan.error().format());
    for (const auto& d : plan.error().items()) ARBOR_FUZZ_CHECK(!d.message.empty(), d.pointer);
    return 0;
  }
  std::set<std::string> ids;
  plan->visit([&](const AgentPlan& a) { ARBOR_FUZZ_CHECK(ids.insert(a.id).second, a.id); });
  ARBOR_FUZZ_CHECK(ids.size() == plan->num_agents(), text);
  return 0;
}
