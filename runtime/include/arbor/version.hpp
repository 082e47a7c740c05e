#pragma once

namespace arbor {
// The Arbor version, "MAJOR.MINOR.PATCH".
const char* version();
}  // namespace arbor
