#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "storage/log_db.h"
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

TEST(ArtifactStoreTest, CorruptFileIsDataLoss) {
  TempDir dir;
  auto store = ArtifactStore::Open(dir.path());
  ASSERT_TRUE(store.ok());
  auto sha = (*store)->Put("payload");
  ASSERT_TRUE(sha.ok());
  std::ofstream((*store)->PathOf(*sha), std::ios::trunc) << "tampered";
  EXPECT_EQ((*store)->Get(*sha).status().code(), absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace kiln::storage
