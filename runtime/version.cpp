#include "arbor/version.hpp"

namespace arbor {
const char* version() { return "0.1.0"; }
}  // namespace arbor
