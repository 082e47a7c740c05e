#include "workflows/documents.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <optional>
#include <utility>
#include <fstream>
#include <sstream>
#include <vector>

namespace arbor::workflows {
namespace {

using Read = std::expected<std::string, std::string>;

std::unexpected<std::string> refuse(const std::string& file, const std::string& why,
                                    const std::string& noun = "prefix document") {
  return std::unexpected(noun + " '" + file + "' " + why);
}

// The caller's own files: any path relative to the workflow's folder.
Read read_local(const DocumentAccess& access, const std::string& file) {
  const std::filesystem::path path = std::filesystem::path(access.dir) / file;
  const std::string where = "(resolved to " + path.lexically_normal().string() + ")";
  const std::string hint = "; paths are relative to the workflow file's folder";
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return refuse(file, where + " does not exist or is not a file" + hint);
  if (std::filesystem::file_size(path, ec) > kMaxDocumentBytes) return refuse(file, where + " is larger than 4 MiB");
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  if (!f) return refuse(file, where + " cannot be read");
  return ss.str();
}

class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Fd& operator=(Fd&& o) noexcept {
    std::swap(fd_, o.fd_);
    return *this;
  }
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

// "a/./b//c" -> {"a", "b", "c"}; nullopt if a component is "..".
std::optional<std::vector<std::string>> components(const std::string& file) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  while (pos <= file.size()) {
    std::size_t slash = file.find('/', pos);
    if (slash == std::string::npos) slash = file.size();
    std::string part = file.substr(pos, slash - pos);
    if (part == "..") return std::nullopt;
    if (!part.empty() && part != ".") out.push_back(std::move(part));
    pos = slash + 1;
  }
  return out;
}

bool denied(const DocumentAccess& access, const struct stat& st) {
  for (const auto& path : access.deny) {
    struct stat d {};
    if (::stat(path.c_str(), &d) == 0 && d.st_dev == st.st_dev && d.st_ino == st.st_ino) return true;
  }
  return false;
}

// The server's directory: every step opened relative to the last one with
// O_NOFOLLOW, so neither ".." nor a symbolic link can lead out of it.
// `noun` and `rule` name the reader in messages (a prefix document, the read_file tool).
Read read_confined(const DocumentAccess& access, const std::string& file, const std::string& noun,
                   const std::string& rule) {
  auto refuse = [&](const std::string& f, const std::string& why) { return workflows::refuse(f, why, noun); };
  if (file.empty() || file[0] == '/') return refuse(file, "is not a relative path" + rule);
  auto parts = components(file);
  if (!parts) return refuse(file, "goes up with '..'" + rule);
  if (parts->empty()) return refuse(file, "names no file" + rule);
  Fd dir(::open(access.dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir.get() < 0) return refuse(file, "cannot be read: the server's workflow_dir is not readable (ask its operator)");
  std::string walked;
  for (std::size_t i = 0; i + 1 < parts->size(); ++i) {
    walked += (walked.empty() ? "" : "/") + (*parts)[i];
    Fd next(::openat(dir.get(), (*parts)[i].c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (next.get() < 0)
      return refuse(file, errno == ENOENT ? "does not exist ('" + walked + "' is missing)" + rule
                                          : "cannot be read: '" + walked + "' is not a folder (or is a symbolic link)" + rule);
    dir = std::move(next);
  }
  Fd fd(::openat(dir.get(), parts->back().c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  if (fd.get() < 0)
    return refuse(file, errno == ENOENT ? "does not exist" + rule
                        : errno == ELOOP ? "is a symbolic link, which is not followed" + rule
                                         : "cannot be read" + rule);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return refuse(file, "is not a regular file" + rule);
  if (denied(access, st)) return refuse(file, "is one of the server's own files, which workflows never read");
  if (std::size_t(st.st_size) > kMaxDocumentBytes) return refuse(file, "is larger than 4 MiB");
  std::string text(std::size_t(st.st_size), '\0');
  std::size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = ::read(fd.get(), text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += std::size_t(n);
  }
  text.resize(got);
  return text;
}

}  // namespace

Read read_prefix_document(const DocumentAccess& access, const std::string& file) {
  switch (access.mode) {
    case DocumentAccess::Mode::local: return read_local(access, file);
    case DocumentAccess::Mode::confined:
      return read_confined(access, file, "prefix document",
                           "; over the network, prefix files are read only from the server's workflow_dir: "
                           "a relative path without '..', to a regular file, with no symbolic link on the way");
    case DocumentAccess::Mode::given: {
      auto it = access.given.find(file);
      if (it != access.given.end()) return it->second;
      return refuse(file, "was not sent with the run (the cluster router reads a run's prefix files and sends "
                          "them to the node); post the run to the router again");
    }
    case DocumentAccess::Mode::none: break;
  }
  return refuse(file, "cannot be read: this server reads no prefix files (its config sets no workflow_dir); "
                      "give the document inline as {\"text\": \"...\"}");
}

Read read_tool_file(const DocumentAccess& access, const std::string& file) {
  if (access.mode == DocumentAccess::Mode::none || access.mode == DocumentAccess::Mode::given || access.dir.empty())
    return refuse(file, "cannot be read: this run reads no files (a workflow posted to the server reads files only "
                        "when its config sets workflow_dir)", "read_file");
  return read_confined(access, file, "read_file",
                       "; read_file reads only below the workflow's folder (the server's workflow_dir): a relative "
                       "path without '..', to a regular file, with no symbolic link on the way");
}

}  // namespace arbor::workflows
