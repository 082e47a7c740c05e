// Reading a prefix document file ("file" in a prefix's documents) under the access
// policy of the workflow's origin (common/document_access.hpp). At most 4 MiB.
#pragma once

#include <expected>
#include <string>

#include "common/document_access.hpp"

namespace arbor::workflows {

inline constexpr std::size_t kMaxDocumentBytes = 4u << 20;

// The file's bytes, or the whole message for the user: what is wrong with `file`
// (as written in the workflow) and how to fix it. Confined and none-mode messages
// never show a path of the server's file system.
std::expected<std::string, std::string> read_prefix_document(const DocumentAccess& access, const std::string& file);

}  // namespace arbor::workflows
