#pragma once
// One file arriving in chunks (UploadModel): written to the content-addressed
// store as the chunks come, never held whole; checked against the size limit
// on every chunk and against the SHA-256 the last chunk carries. Destroying an
// unfinished upload removes its partial file. No gRPC types here.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "storage/artifact_store.h"
#include "storage/farm_store.h"
#include "tracker/clock.h"

namespace kiln::tracker {

class ModelUpload {
 public:
  // `max_bytes`: the operator's limit (kiln-tracker --max-model-bytes).
  static absl::StatusOr<std::unique_ptr<ModelUpload>> Begin(storage::ArtifactStore* store,
                                                            storage::FarmStore* db,
                                                            const Clock* clock, int64_t max_bytes);

  // One chunk: `offset` must be where the previous chunk ended; `total_size`
  // (when > 0) is the size the client announces; `sha256` is set on the last
  // chunk only. RESOURCE_EXHAUSTED past the limit, INVALID_ARGUMENT for chunks
  // out of order or after the last one.
  absl::Status Add(std::string_view data, int64_t offset, int64_t total_size,
                   std::string_view sha256);
  // After the last chunk: verifies the checksum (DATA_LOSS on a mismatch),
  // stores the file under its digest and records it as a "model" artifact.
  absl::StatusOr<storage::BlobWriter::Stored> Finish();

  int64_t size() const { return writer_->size(); }

 private:
  ModelUpload(std::unique_ptr<storage::BlobWriter> writer, storage::FarmStore* db,
              const Clock* clock, int64_t max_bytes)
      : writer_(std::move(writer)), db_(db), clock_(clock), max_bytes_(max_bytes) {}
  absl::Status TooLarge(int64_t size) const;

  std::unique_ptr<storage::BlobWriter> writer_;
  storage::FarmStore* db_;
  const Clock* clock_;
  int64_t max_bytes_;
  int64_t announced_ = 0;
  std::string sha256_;  // from the last chunk
};

}  // namespace kiln::tracker
