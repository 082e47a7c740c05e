// Prefix document files under each DocumentAccess mode. The confined mode is what a
// network client gets: regular files inside the directory only, no '..', no symbolic
// link at any step, never a denied file (even through a hard link), and no server
// path in any message. Fixtures live in the build tree.
#include "workflows/documents.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "scratch_dir.hpp"
#include "workflow_test_util.hpp"

namespace arbor::workflows {
namespace {

namespace fs = std::filesystem;

class PrefixDocuments : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = arbor::testing::scratch_dir("prefix_documents_test");
    fs::remove_all(root_);
    dir_ = root_ / "served";
    fs::create_directories(dir_ / "sub");
    write(dir_ / "doc.md", "inside");
    write(dir_ / "sub" / "deep.md", "deeper");
    write(root_ / "secret.txt", "SECRET");
    write(dir_ / "config.json", "{\"admin_key\": \"ADMIN-SECRET\"}");
    fs::create_symlink(root_ / "secret.txt", dir_ / "link.md");
    fs::create_symlink(root_, dir_ / "up");
    fs::create_symlink(dir_ / "doc.md", dir_ / "inner_link.md");
    fs::create_hard_link(dir_ / "config.json", dir_ / "config_alias.md");
    ASSERT_EQ(::mkfifo((dir_ / "fifo.md").c_str(), 0600), 0);
  }
  void TearDown() override { fs::remove_all(root_); }

  static void write(const fs::path& p, const std::string& text) { std::ofstream(p, std::ios::binary) << text; }

  DocumentAccess confined() const {
    return DocumentAccess::confined_to(dir_.string(), {(dir_ / "config.json").string()});
  }
  // The error text of a refused read, checked to name no server path.
  std::string refused(const DocumentAccess& access, const std::string& file) const {
    auto r = read_prefix_document(access, file);
    EXPECT_FALSE(r.has_value()) << file << " was read: " << r.value_or("");
    if (r) return "";
    EXPECT_EQ(r.error().find(root_.string()), std::string::npos) << r.error();
    EXPECT_NE(r.error().find("'" + file + "'"), std::string::npos) << r.error();
    return r.error();
  }

  fs::path root_, dir_;
};

TEST_F(PrefixDocuments, ConfinedReadsRegularFilesInsideTheDirectory) {
  EXPECT_EQ(read_prefix_document(confined(), "doc.md").value_or("?"), "inside");
  EXPECT_EQ(read_prefix_document(confined(), "sub/deep.md").value_or("?"), "deeper");
  EXPECT_EQ(read_prefix_document(confined(), "./sub//deep.md").value_or("?"), "deeper");
}

TEST_F(PrefixDocuments, ConfinedRefusesEveryWayOut) {
  EXPECT_NE(refused(confined(), "link.md").find("is a symbolic link"), std::string::npos);
  EXPECT_NE(refused(confined(), "inner_link.md").find("is a symbolic link"), std::string::npos);
  EXPECT_NE(refused(confined(), "up/secret.txt").find("'up' is not a folder (or is a symbolic link)"), std::string::npos);
  EXPECT_NE(refused(confined(), "../secret.txt").find("goes up with '..'"), std::string::npos);
  EXPECT_NE(refused(confined(), "sub/../../secret.txt").find("'..'"), std::string::npos);
  EXPECT_NE(refused(confined(), "/srv/secret.txt").find("not a relative path"), std::string::npos);
  EXPECT_NE(refused(confined(), "missing.md").find("does not exist"), std::string::npos);
  EXPECT_NE(refused(confined(), "sub").find("not a regular file"), std::string::npos);
  EXPECT_NE(refused(confined(), "fifo.md").find("not a regular file"), std::string::npos);  // and no hang
  EXPECT_NE(refused(confined(), ".").find("names no file"), std::string::npos);
}

TEST_F(PrefixDocuments, ConfinedNeverReadsTheDeniedConfigEvenThroughAHardLink) {
  EXPECT_NE(refused(confined(), "config.json").find("the server's own files"), std::string::npos);
  EXPECT_NE(refused(confined(), "config_alias.md").find("the server's own files"), std::string::npos);
}

TEST_F(PrefixDocuments, NoneReadsNothingAndLocalFollowsTheUsersPaths) {
  EXPECT_NE(refused(DocumentAccess::no_files(), "doc.md").find("reads no prefix files"), std::string::npos);
  const auto local = DocumentAccess::local_to(dir_.string());
  EXPECT_EQ(read_prefix_document(local, "link.md").value_or("?"), "SECRET");  // the user's own link
  EXPECT_EQ(read_prefix_document(local, "../secret.txt").value_or("?"), "SECRET");
}

// A cluster node reads a run's prefix files from the bytes the router sent, by the path
// as written, and nothing from its own disk (the read_file tool neither).
TEST_F(PrefixDocuments, GivenReadsOnlyTheBytesItWasGiven) {
  const auto given = DocumentAccess::given_files({{"doc.md", "bytes from the router"}});
  EXPECT_EQ(read_prefix_document(given, "doc.md").value_or("?"), "bytes from the router");
  EXPECT_EQ(refused(given, "sub/deep.md"),
            "prefix document 'sub/deep.md' was not sent with the run (the cluster router reads a run's prefix files "
            "and sends them to the node); post the run to the router again");
  EXPECT_FALSE(read_tool_file(given, "doc.md").has_value());
  auto plan = load_workflow_text(R"({"name": "x", "prefixes": {"p": {"documents": [{"file": "doc.md"}]}},
  "agents": [{"id": "a", "prefix": "p", "task": "t"}]})",
                                 given);
  ASSERT_TRUE(plan.has_value()) << plan.error().format();
  EXPECT_EQ(plan->prefixes.at("p").text, "bytes from the router");
}

TEST_F(PrefixDocuments, LoaderReportsTheRefusalAtTheFileEntry) {
  auto r = load_workflow_text(R"({"name": "x", "prefixes": {"p": {"documents": [{"file": "link.md"}, {"file": "doc.md"}]}},
  "agents": [{"id": "a", "prefix": "p", "task": "t"}]})",
                              confined(), {}, "<request>");
  ASSERT_FALSE(r.has_value());
  ASSERT_EQ(r.error().num_errors(), 1u) << r.error().format();
  testing::expect_diag(r.error(), "/prefixes/p/documents/0/file", 1, 57, "prefix document 'link.md' is a symbolic link");
  auto ok = load_workflow_text(R"({"name": "x", "prefixes": {"p": {"documents": [{"file": "sub/deep.md"}]}},
  "agents": [{"id": "a", "prefix": "p", "task": "t"}]})",
                               confined());
  ASSERT_TRUE(ok.has_value()) << ok.error().format();
  EXPECT_EQ(ok->prefixes.at("p").text, "deeper");
}

}  // namespace
}  // namespace arbor::workflows
