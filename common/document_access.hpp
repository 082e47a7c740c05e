// DocumentAccess: which files a workflow may read as prefix documents (the "file"
// entries of a prefix). A workflow on the user's own disk (arbor run / validate,
// Runtime::run) reads paths relative to its folder, as the user's own files. A
// workflow that arrives over the network (arbor serve) reads nothing, unless the
// operator names a directory; then only regular files inside it.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace arbor {

struct DocumentAccess {
  enum class Mode {
    // Any path, relative to `dir`; symbolic links and ".." are followed (the caller's
    // own files). Errors show where a path resolved to.
    local,
    // Only regular files below `dir`: relative paths without "..", reached without a
    // symbolic link at any step (every component is opened with O_NOFOLLOW), never a
    // file listed in `deny` (matched by device and inode, so a hard link is caught too).
    // Errors name the path as written, never where it lies on the server.
    confined,
    // No file at all: a workflow that names one is invalid (give the text inline).
    none,
    // The files' bytes as another process read them under its own policy (a cluster
    // router ships the prefix documents it read with the run: runtime/cluster/wire.hpp),
    // by the path as written; a path not in `given` is an error. No file system is
    // read (the read_file tool reads nothing).
    given,
  };
  Mode mode = Mode::local;
  std::string dir = ".";
  std::vector<std::string> deny;
  std::map<std::string, std::string> given = {};  // Mode::given: path as written -> bytes

  static DocumentAccess local_to(std::string dir) { return {Mode::local, std::move(dir), {}}; }
  static DocumentAccess confined_to(std::string dir, std::vector<std::string> deny = {}) {
    return {Mode::confined, std::move(dir), std::move(deny)};
  }
  static DocumentAccess no_files() { return {Mode::none, "", {}}; }
  static DocumentAccess given_files(std::map<std::string, std::string> files) {
    return {Mode::given, "", {}, std::move(files)};
  }
};

}  // namespace arbor
