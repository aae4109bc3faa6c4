#pragma once
// A stored artifact read in chunks for streaming (the Tracker service's
// FetchArtifact), hashed on the way: a file that no longer matches its name
// is DATA_LOSS at its last chunk, before that chunk is sent. From an object
// store the file is downloaded first and its checksum verified. A domain
// class the RPC adapter (tracker/server.cc) turns into ArtifactChunk
// messages.

#include <cstdint>
#include <fstream>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "base/sha256.h"
#include "storage/artifact_store.h"

namespace kiln::tracker {

class ArtifactReader {
 public:
  struct Chunk {
    int64_t offset = 0;
    std::string data;
    bool last = false;  // then the whole file hashed to its name
  };

  // NOT_FOUND ("no artifact SHA") when the store has no such file; an
  // object store's UNAVAILABLE or DATA_LOSS as it says.
  static absl::StatusOr<std::unique_ptr<ArtifactReader>> Open(const storage::ArtifactStore& store,
                                                              const std::string& sha256,
                                                              int64_t chunk_bytes = 1 << 20);

  int64_t total_size() const { return total_; }
  bool done() const { return offset_ >= total_ && started_; }
  // The next chunk (one empty last chunk for an empty file); DATA_LOSS when
  // reading fails or the file is corrupt. Not to be called once done().
  absl::StatusOr<Chunk> Next();

 private:
  ArtifactReader(std::string sha256, int64_t total, int64_t chunk_bytes, std::ifstream in)
      : sha256_(std::move(sha256)), total_(total), chunk_(chunk_bytes), in_(std::move(in)) {}
  std::string sha256_;
  int64_t total_ = 0;
  int64_t chunk_ = 0;
  int64_t offset_ = 0;
  bool started_ = false;
  std::ifstream in_;
  Sha256Stream hasher_;
};

}  // namespace kiln::tracker
