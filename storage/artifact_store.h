#pragma once
// The content-addressed artifact store: submitted models and compiled
// modules, in a folder or an S3 bucket with a local cache. Their metadata
// (kind, job) is the farm store's (storage/farm_store.h).

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "base/sha256.h"

namespace kiln::storage {

// A file on its way into the store: bytes are written to a temporary file as
// they arrive and hashed on the way; Commit renames it to its content
// address. Destroying an uncommitted writer removes the partial file.
class BlobWriter {
 public:
  ~BlobWriter();
  BlobWriter(const BlobWriter&) = delete;
  BlobWriter& operator=(const BlobWriter&) = delete;

  absl::Status Append(std::string_view bytes);
  int64_t size() const { return size_; }

  struct Stored {
    std::string sha256;
    int64_t size = 0;
    bool already_stored = false;  // the store had these bytes; the new copy was dropped
  };
  // Flushes the file to disk and moves it into place. DATA_LOSS when
  // `expected_sha256` is given and the bytes hash to something else (the
  // partial file is removed).
  absl::StatusOr<Stored> Commit(std::string_view expected_sha256 = {});

 private:
  friend class ArtifactStore;
  BlobWriter(const class ArtifactStore* store, std::string tmp_path, int fd)
      : store_(store), tmp_path_(std::move(tmp_path)), fd_(fd) {}
  void Discard();
  const class ArtifactStore* store_;
  std::string tmp_path_;
  int fd_;
  int64_t size_ = 0;
  Sha256Stream hasher_;
};

class S3Client;  // storage/s3.h

// Content-addressed files under one folder: <dir>/<sha[0:2]>/<sha256>.
// Writes go to a temporary file under <dir>/.tmp that is renamed into place,
// so a crash never leaves a partial file under its final name; temporaries of
// processes that died are removed by Open.
//
// On an object store ("s3://BUCKET[/PREFIX]", storage/s3.h) the folder is a
// local cache: every committed file is uploaded to <PREFIX>/<sha[0:2]>/<sha256>
// (unless the bucket has it), and a file missing here is downloaded, its
// checksum verified, before it is read. Several trackers on several hosts
// share one bucket.
class ArtifactStore {
 public:
  // `spec`: a folder, or an s3:// URL (cache folder: KILN_ARTIFACT_CACHE, else
  // one under the temporary directory named after the URL).
  static absl::StatusOr<std::unique_ptr<ArtifactStore>> Open(const std::string& spec);
  ~ArtifactStore();
  // Stores the bytes; returns their SHA-256 (hex).
  absl::StatusOr<std::string> Put(std::string_view bytes);
  // Starts storing a file whose bytes come in pieces.
  absl::StatusOr<std::unique_ptr<BlobWriter>> NewWriter() const;
  absl::StatusOr<std::string> Get(const std::string& sha256) const;  // NOT_FOUND
  // Where the file is (or would be) in the local folder.
  std::string PathOf(const std::string& sha256) const;
  // PathOf, after downloading the file from the object store if needed.
  absl::StatusOr<std::string> LocalPath(const std::string& sha256) const;
  bool Contains(const std::string& sha256) const;
  // Removes the file from the folder and, on an object store, the bucket's
  // object too (NOT_FOUND when it was in neither).
  absl::Status Remove(const std::string& sha256) const;
  // The stored file's size; NOT_FOUND when it is not stored.
  absl::StatusOr<int64_t> SizeOf(const std::string& sha256) const;

 private:
  friend class BlobWriter;
  explicit ArtifactStore(std::string dir);
  bool HasLocal(const std::string& sha256) const;
  // Downloads a file the folder lacks (object store only).
  absl::Status Fetch(const std::string& sha256) const;
  // Uploads a committed file the bucket lacks (object store only).
  absl::Status Upload(const std::string& sha256, int64_t size) const;
  std::string dir_;
  std::unique_ptr<S3Client> remote_;
  std::string remote_url_;
};

}  // namespace kiln::storage
