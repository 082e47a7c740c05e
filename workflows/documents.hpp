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

// The read_file tool's reader: the confined rules above below `access.dir` whatever
// access.mode says (the model chooses the path, so even a local run's tool never
// follows a symbolic link or goes up with ".."); mode none, or no directory, reads
// nothing. Messages name the path as the model wrote it.
std::expected<std::string, std::string> read_tool_file(const DocumentAccess& access, const std::string& file);

}  // namespace arbor::workflows
