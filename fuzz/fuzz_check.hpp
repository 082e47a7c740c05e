// What the fuzz targets share: a check that aborts with a message (a libFuzzer
// finding, with the input saved) when an invariant of the code under test breaks.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace arbor::fuzz {

[[noreturn]] inline void violated(std::string_view what, std::string_view detail = {}) {
  std::fprintf(stderr, "fuzz invariant violated: %.*s\n%.*s\n", int(what.size()), what.data(),
               int(detail.size() > 2000 ? 2000 : detail.size()), detail.data());
  std::abort();
}

#define ARBOR_FUZZ_CHECK(cond, detail) \
  do {                                 \
    if (!(cond)) ::arbor::fuzz::violated(#cond, (detail)); \
  } while (0)

}  // namespace arbor::fuzz
