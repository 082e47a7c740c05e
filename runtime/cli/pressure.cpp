#include "runtime/cli/pressure.hpp"

namespace arbor::cli {

GenerateRequest pressure_request(const std::string& tenant, int n) {
  GenerateRequest g;
  g.tenant = tenant;
  std::string text = "Story " + std::to_string(n) + ":";
  for (int w = 0; w < 24; ++w) text += " the tide " + std::to_string(n * 100 + w) + " turns;";
  g.raw_prompt = std::move(text);
  g.sampling.max_tokens = 1;
  return g;
}

}  // namespace arbor::cli
