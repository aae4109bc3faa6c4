#include "storage/artifact_store.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "test_util.h"

namespace kiln::storage {
namespace {

using testing::TempDir;

TEST(Sha256Test, KnownVector) {
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(ArtifactStoreTest, PutGetBySha) {
  TempDir dir;
  auto store = ArtifactStore::Open(dir.File("artifacts"));
  ASSERT_TRUE(store.ok()) << store.status();
  std::string bytes("model\0bytes", 11);
  auto sha = (*store)->Put(bytes);
  ASSERT_TRUE(sha.ok()) << sha.status();
  EXPECT_EQ(*sha, Sha256Hex(bytes));
  EXPECT_TRUE((*store)->Contains(*sha));
  std::string path = (*store)->PathOf(*sha);
  EXPECT_EQ(path, dir.File("artifacts") + "/" + sha->substr(0, 2) + "/" + *sha);
  EXPECT_TRUE(std::filesystem::is_regular_file(path));
  auto got = (*store)->Get(*sha);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, bytes);
  // Same bytes again: same sha, one file, no temporaries left behind.
  EXPECT_EQ(*(*store)->Put(bytes), *sha);
  int files = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir.File("artifacts"))) {
    if (e.is_regular_file()) ++files;
  }
  EXPECT_EQ(files, 1);
}

TEST(ArtifactStoreTest, UnknownShaIsNotFound) {
  TempDir dir;
  auto store = ArtifactStore::Open(dir.path());
  ASSERT_TRUE(store.ok());
  std::string sha = Sha256Hex("never stored");
  EXPECT_FALSE((*store)->Contains(sha));
  EXPECT_EQ((*store)->Get(sha).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ((*store)->Get("../../etc/passwd").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ArtifactStoreTest, RemoveDeletesTheFileOnly) {
  TempDir dir;
  auto store = ArtifactStore::Open(dir.path());
  ASSERT_TRUE(store.ok());
  auto kept = (*store)->Put("kept");
  auto gone = (*store)->Put("gone");
  ASSERT_TRUE(kept.ok() && gone.ok());
  ASSERT_TRUE((*store)->Remove(*gone).ok());
  EXPECT_FALSE((*store)->Contains(*gone));
  EXPECT_TRUE((*store)->Contains(*kept));
  EXPECT_EQ((*store)->Remove(*gone).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ((*store)->Remove("../../etc/passwd").code(), absl::StatusCode::kInvalidArgument);
}

TEST(ArtifactStoreTest, CorruptFileIsDataLoss) {
  TempDir dir;
  auto store = ArtifactStore::Open(dir.path());
  ASSERT_TRUE(store.ok());
  auto sha = (*store)->Put("payload");
  ASSERT_TRUE(sha.ok());
  std::ofstream((*store)->PathOf(*sha), std::ios::trunc) << "tampered";
  EXPECT_EQ((*store)->Get(*sha).status().code(), absl::StatusCode::kDataLoss);
}

int CountFiles(const std::string& dir) {
  int files = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) ++files;
  }
  return files;
}

TEST(BlobWriterTest, StreamsPiecesIntoTheContentAddress) {
  TempDir dir;
  auto store = ArtifactStore::Open(dir.path());
  ASSERT_TRUE(store.ok());
  auto w = (*store)->NewWriter();
  ASSERT_TRUE(w.ok()) << w.status();
  ASSERT_TRUE((*w)->Append("hello, ").ok());
  ASSERT_TRUE((*w)->Append("").ok());
  ASSERT_TRUE((*w)->Append("world").ok());
  EXPECT_EQ((*w)->size(), 12);
  // Not visible under any content address before the commit.
  EXPECT_FALSE((*store)->Contains(Sha256Hex("hello, world")));
  auto stored = (*w)->Commit(Sha256Hex("hello, world"));
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_EQ(stored->sha256, Sha256Hex("hello, world"));
  EXPECT_EQ(stored->size, 12);
  EXPECT_FALSE(stored->already_stored);
  EXPECT_EQ(*(*store)->Get(stored->sha256), "hello, world");
  EXPECT_EQ(*(*store)->SizeOf(stored->sha256), 12);

  // The same bytes again: stored once.
  auto again = (*store)->NewWriter();
  ASSERT_TRUE((*again)->Append("hello, world").ok());
  auto second = (*again)->Commit();
  ASSERT_TRUE(second.ok());
  EXPECT_TRUE(second->already_stored);
  EXPECT_EQ(second->sha256, stored->sha256);
  EXPECT_EQ(CountFiles(dir.path()), 1);
}

TEST(BlobWriterTest, ChecksumMismatchAndAbandonedWritesLeaveNothing) {
  TempDir dir;
  auto store = ArtifactStore::Open(dir.path());
  ASSERT_TRUE(store.ok());
  {
    auto w = (*store)->NewWriter();
    ASSERT_TRUE((*w)->Append("payload").ok());
    auto stored = (*w)->Commit(Sha256Hex("something else"));
    EXPECT_EQ(stored.status().code(), absl::StatusCode::kDataLoss);
    EXPECT_NE(std::string(stored.status().message()).find("checksum mismatch"), std::string::npos);
  }
  EXPECT_EQ(CountFiles(dir.path()), 0);
  {
    auto w = (*store)->NewWriter();
    ASSERT_TRUE((*w)->Append("half an upload").ok());
    EXPECT_EQ(CountFiles(dir.path()), 1);  // the temporary, while it is written
  }
  EXPECT_EQ(CountFiles(dir.path()), 0);
  EXPECT_EQ((*store)->SizeOf(Sha256Hex("payload")).status().code(), absl::StatusCode::kNotFound);
}

TEST(BlobWriterTest, OpenRemovesTemporariesOfDeadProcesses) {
  TempDir dir;
  ASSERT_TRUE(ArtifactStore::Open(dir.path()).ok());
  // A pid that cannot exist (above pid_max) and our own (a writer in flight).
  std::ofstream(dir.File(".tmp/2147483646-0")) << "left by a killed tracker";
  std::ofstream(dir.File(".tmp/" + std::to_string(::getpid()) + "-999")) << "in flight";
  ASSERT_TRUE(ArtifactStore::Open(dir.path()).ok());
  EXPECT_FALSE(std::filesystem::exists(dir.File(".tmp/2147483646-0")));
  EXPECT_TRUE(std::filesystem::exists(dir.File(".tmp/" + std::to_string(::getpid()) + "-999")));
}

TEST(Sha256Test, HasherMatchesOneShot) {
  Sha256Stream h;
  h.Update("a");
  h.Update("bc");
  EXPECT_EQ(h.HexDigest(), Sha256Hex("abc"));
  EXPECT_TRUE(IsSha256Hex(Sha256Hex("abc")));
  EXPECT_FALSE(IsSha256Hex("ABC"));
}

}  // namespace
}  // namespace kiln::storage
