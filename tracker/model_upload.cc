#include "tracker/model_upload.h"

#include <algorithm>

#include "absl/status/status.h"
#include "base/str.h"

namespace kiln::tracker {

absl::StatusOr<std::unique_ptr<ModelUpload>> ModelUpload::Begin(storage::ArtifactStore* store,
                                                                storage::FarmStore* db,
                                                                const Clock* clock,
                                                                int64_t max_bytes) {
  auto writer = store->NewWriter();
  if (!writer.ok()) return writer.status();
  return std::unique_ptr<ModelUpload>(new ModelUpload(*std::move(writer), db, clock, max_bytes));
}

absl::Status ModelUpload::TooLarge(int64_t size) const {
  return absl::ResourceExhaustedError(
      StrCat("the model is ", size, " bytes; this tracker accepts at most ", max_bytes_,
             " bytes (its operator sets the limit with kiln-tracker --max-model-bytes)"));
}

absl::Status ModelUpload::Add(std::string_view data, int64_t offset, int64_t total_size,
                              std::string_view sha256) {
  if (!sha256_.empty()) {
    return absl::InvalidArgumentError("a chunk came after the one carrying the checksum");
  }
  if (offset != writer_->size()) {
    return absl::InvalidArgumentError(StrCat("chunk at offset ", offset, ", expected ",
                                             writer_->size(), " (chunks come in order)"));
  }
  if (total_size < 0) return absl::InvalidArgumentError("negative total_size");
  if (total_size > 0) {
    if (announced_ > 0 && total_size != announced_) {
      return absl::InvalidArgumentError(
          StrCat("total_size changed from ", announced_, " to ", total_size));
    }
    announced_ = total_size;
    if (total_size > max_bytes_) return TooLarge(total_size);
  }
  const int64_t after = writer_->size() + static_cast<int64_t>(data.size());
  if (after > max_bytes_) return TooLarge(std::max(after, announced_));
  if (announced_ > 0 && after > announced_) {
    return absl::InvalidArgumentError(
        StrCat("more bytes (", after, ") than the announced total_size ", announced_));
  }
  if (absl::Status s = writer_->Append(data); !s.ok()) return s;
  if (!sha256.empty()) {
    if (!kiln::IsSha256Hex(sha256)) {
      return absl::InvalidArgumentError(
          StrCat("checksum '", sha256, "' is not a SHA-256 (64 lowercase hex digits)"));
    }
    sha256_ = std::string(sha256);
  }
  return absl::OkStatus();
}

absl::StatusOr<storage::BlobWriter::Stored> ModelUpload::Finish() {
  if (sha256_.empty()) {
    return absl::InvalidArgumentError(
        "the upload ended without a checksum (the last chunk carries the file's SHA-256)");
  }
  if (writer_->size() == 0) {
    return absl::InvalidArgumentError("the model is empty: expected ONNX ModelProto bytes");
  }
  if (announced_ > 0 && writer_->size() != announced_) {
    return absl::InvalidArgumentError(StrCat("the upload ended after ", writer_->size(),
                                             " of the announced ", announced_, " bytes"));
  }
  auto stored = writer_->Commit(sha256_);
  if (!stored.ok()) return stored.status();
  storage::ArtifactRow row;
  row.sha256 = stored->sha256;
  row.size = stored->size;
  row.kind = storage::ArtifactKind::kModel;
  row.created_unix_ms = clock_->NowMs();
  if (absl::Status s = db_->AddArtifact(row); !s.ok()) return s;
  return stored;
}

}  // namespace kiln::tracker
