#include "tracker/artifact_reader.h"

#include <algorithm>
#include <utility>

#include "base/str.h"

namespace kiln::tracker {

absl::StatusOr<std::unique_ptr<ArtifactReader>> ArtifactReader::Open(
    const storage::ArtifactStore& store, const std::string& sha256, int64_t chunk_bytes) {
  auto total = store.SizeOf(sha256);
  if (!total.ok()) {
    return total.status().code() == absl::StatusCode::kNotFound
               ? absl::NotFoundError(StrCat("no artifact ", sha256))
               : total.status();
  }
  std::ifstream in(store.PathOf(sha256), std::ios::binary);
  if (!in) return absl::NotFoundError(StrCat("no artifact ", sha256));
  return std::unique_ptr<ArtifactReader>(
      new ArtifactReader(sha256, *total, std::max<int64_t>(chunk_bytes, 1), std::move(in)));
}

absl::StatusOr<ArtifactReader::Chunk> ArtifactReader::Next() {
  started_ = true;
  Chunk chunk;
  chunk.offset = offset_;
  chunk.data.resize(static_cast<size_t>(std::min(chunk_, total_ - offset_)));
  in_.read(chunk.data.data(), static_cast<std::streamsize>(chunk.data.size()));
  if (!in_) return absl::DataLossError(StrCat("reading artifact ", sha256_, " failed"));
  hasher_.Update(chunk.data);
  offset_ += static_cast<int64_t>(chunk.data.size());
  if (offset_ == total_) {
    if (hasher_.HexDigest() != sha256_) {
      return absl::DataLossError(StrCat("artifact ", sha256_, " is corrupt on disk"));
    }
    chunk.last = true;
  }
  return chunk;
}

}  // namespace kiln::tracker
