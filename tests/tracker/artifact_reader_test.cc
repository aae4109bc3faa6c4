// A stored artifact read in chunks and checked against its name
// (tracker/artifact_reader.h), on a real store folder, with no gRPC.
#include "tracker/artifact_reader.h"

#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "tests/storage/test_util.h"

namespace kiln::tracker {
namespace {

class ArtifactReaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = storage::ArtifactStore::Open(dir_.File("artifacts"));
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
  }
  // Every chunk of `sha`, read `chunk` bytes at a time; the first error.
  absl::StatusOr<std::string> ReadAll(const std::string& sha, int64_t chunk, int* chunks) {
    auto reader = ArtifactReader::Open(*store_, sha, chunk);
    if (!reader.ok()) return reader.status();
    std::string bytes;
    *chunks = 0;
    bool last = false;
    while (!(*reader)->done()) {
      auto next = (*reader)->Next();
      if (!next.ok()) return next.status();
      EXPECT_EQ(next->offset, static_cast<int64_t>(bytes.size()));
      EXPECT_FALSE(last) << "a chunk after the last";
      last = next->last;
      bytes += next->data;
      ++*chunks;
    }
    EXPECT_TRUE(last);
    EXPECT_EQ((*reader)->total_size(), static_cast<int64_t>(bytes.size()));
    return bytes;
  }

  storage::testing::TempDir dir_;
  std::unique_ptr<storage::ArtifactStore> store_;
};

TEST_F(ArtifactReaderTest, ChunksPutTogetherAreTheStoredFile) {
  std::string bytes(1000, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 7);
  auto sha = store_->Put(bytes);
  ASSERT_TRUE(sha.ok());
  int chunks = 0;
  auto read = ReadAll(*sha, 300, &chunks);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, bytes);
  EXPECT_EQ(chunks, 4);
  auto empty = store_->Put("");
  ASSERT_TRUE(empty.ok());
  read = ReadAll(*empty, 300, &chunks);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(chunks, 1);  // one empty last chunk
}

TEST_F(ArtifactReaderTest, AFileThatNoLongerMatchesItsNameIsDataLossAtItsLastChunk) {
  auto sha = store_->Put(std::string(1000, 'a'));
  ASSERT_TRUE(sha.ok());
  {
    std::fstream f(store_->PathOf(*sha), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(10);
    f.put('b');
  }
  auto reader = ArtifactReader::Open(*store_, *sha, 600);
  ASSERT_TRUE(reader.ok()) << reader.status();
  auto first = (*reader)->Next();
  ASSERT_TRUE(first.ok()) << first.status();  // not known yet
  auto second = (*reader)->Next();
  EXPECT_EQ(second.status().code(), absl::StatusCode::kDataLoss) << second.status();
}

TEST_F(ArtifactReaderTest, AnUnknownArtifactIsNotFound) {
  auto reader = ArtifactReader::Open(*store_, std::string(64, 'c'));
  EXPECT_EQ(reader.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(reader.status().message().find(std::string(64, 'c')), std::string::npos);
}

}  // namespace
}  // namespace kiln::tracker
