#pragma once
// Uploaded models nobody uses yet: a per-user storage quota on them, and
// their garbage collection.
//
// A model (or external data file) arrives by UploadModel before a job names
// it (SubmitJob). Until a job uses it, its bytes count against the
// uploader's quota (kiln-tracker --upload-quota-bytes), bytes still arriving
// included; an upload that would go over it is RESOURCE_EXHAUSTED. Collect()
// deletes, file and metadata, every uploaded model that no job (of any
// state) names, as model or external data, once it is older than the grace
// period (--model-grace-s) counted from its first upload, or from its latest
// upload to this tracker; the tracker runs it at startup and periodically.
// Bytes a job uses, or that were collected, leave the quota.
//
// The quota's ledger lives in memory: after a restart, models uploaded
// before it count for no one until they are collected. Thread-safe.

#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "storage/artifact_store.h"
#include "storage/farm_store.h"
#include "tracker/clock.h"
#include "tracker/model_upload.h"

namespace kiln::tracker {

struct UploadedModelsOptions {
  int64_t quota_bytes = 0;  // per user; 0: none
  int64_t grace_ms = 0;     // an unused upload is kept at least this long
};

class UploadedModels {
 public:
  UploadedModels(storage::FarmStore* db, storage::ArtifactStore* store, const Clock* clock,
                 UploadedModelsOptions options);
  UploadedModels(const UploadedModels&) = delete;
  UploadedModels& operator=(const UploadedModels&) = delete;

  // `bytes` more arriving for an upload of `user`: RESOURCE_EXHAUSTED when
  // the user's unused models and arriving bytes would pass the quota.
  absl::Status Charge(const std::string& user, int64_t bytes);
  // Bytes charged for an upload that failed.
  void Refund(const std::string& user, int64_t bytes);
  // An upload of `user` that was stored: its `charged` arriving bytes become
  // the stored model (`size` bytes; the same model twice counts once).
  void Stored(const std::string& user, const std::string& sha256, int64_t size, int64_t charged);
  // The user's unused uploads and arriving bytes.
  int64_t BytesOf(const std::string& user) const;

  // Deletes unused uploaded models past the grace period; returns how many.
  absl::StatusOr<int> Collect();

 private:
  storage::FarmStore* db_;
  storage::ArtifactStore* store_;
  const Clock* clock_;
  const UploadedModelsOptions options_;

  struct Upload {
    int64_t size = 0;
    int64_t unix_ms = 0;  // the latest upload
  };
  struct UserBytes {
    int64_t arriving = 0;
    std::map<std::string, Upload> unused;  // by sha256
    int64_t Total() const;
  };
  mutable std::mutex mu_;
  std::map<std::string, UserBytes> users_;
  std::mutex collect_mu_;  // one collection at a time
};

// An upload of one user, its bytes charged to the user's quota as they
// arrive (RESOURCE_EXHAUSTED past it); a finished upload's bytes stay
// charged as an unused model, an unfinished one's are refunded when it is
// destroyed (with its partial file).
class ChargedUpload {
 public:
  ChargedUpload(std::unique_ptr<ModelUpload> upload, UploadedModels* models, std::string user)
      : upload_(std::move(upload)), models_(models), user_(std::move(user)) {}
  ~ChargedUpload();
  ChargedUpload(const ChargedUpload&) = delete;
  ChargedUpload& operator=(const ChargedUpload&) = delete;

  // ModelUpload::Add, after charging the chunk's bytes.
  absl::Status Add(std::string_view data, int64_t offset, int64_t total_size,
                   std::string_view sha256);
  // ModelUpload::Finish; the stored model then counts as the user's.
  absl::StatusOr<storage::BlobWriter::Stored> Finish();
  int64_t size() const { return upload_->size(); }

 private:
  std::unique_ptr<ModelUpload> upload_;
  UploadedModels* models_;
  std::string user_;
  int64_t charged_ = 0;
  bool finished_ = false;
};

}  // namespace kiln::tracker
