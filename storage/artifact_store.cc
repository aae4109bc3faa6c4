#include "storage/artifact_store.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/status/status.h"
#include "base/str.h"
#include "storage/s3.h"

namespace kiln::storage {

namespace {

absl::Status ErrnoError(std::string_view what, const std::string& path) {
  return absl::InternalError(StrCat(what, " '", path, "': ", std::strerror(errno)));
}

absl::Status FsyncPath(const std::string& path, int flags) {
  int fd = ::open(path.c_str(), flags | O_CLOEXEC);
  if (fd < 0) return ErrnoError("open", path);
  int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) return ErrnoError("fsync", path);
  return absl::OkStatus();
}

// Temporaries are named <pid>-<n>: those of processes that no longer exist
// are leftovers of a crash (a tracker killed mid-upload).
void RemoveDeadTemporaries(const std::string& tmp_dir) {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(tmp_dir, ec)) {
    std::string name = e.path().filename().string();
    int64_t pid = 0;
    if (!ParseInt64(name.substr(0, name.find('-')), &pid) || pid <= 0) continue;
    if (pid == ::getpid()) continue;
    if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;
    std::filesystem::remove(e.path(), ec);
  }
}

}  // namespace

// ------------------------------------------------------------- BlobWriter

BlobWriter::~BlobWriter() { Discard(); }

void BlobWriter::Discard() {
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
  if (!tmp_path_.empty()) {
    ::unlink(tmp_path_.c_str());
    tmp_path_.clear();
  }
}

absl::Status BlobWriter::Append(std::string_view bytes) {
  if (fd_ < 0) return absl::FailedPreconditionError("the blob writer is closed");
  hasher_.Update(bytes);
  const char* p = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    ssize_t n = ::write(fd_, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      absl::Status s = ErrnoError("write", tmp_path_);
      Discard();
      return s;
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  size_ += static_cast<int64_t>(bytes.size());
  return absl::OkStatus();
}

absl::StatusOr<BlobWriter::Stored> BlobWriter::Commit(std::string_view expected_sha256) {
  if (fd_ < 0) return absl::FailedPreconditionError("the blob writer is closed");
  Stored out;
  out.sha256 = hasher_.HexDigest();
  out.size = size_;
  if (!expected_sha256.empty() && expected_sha256 != out.sha256) {
    Discard();
    return absl::DataLossError(StrCat("checksum mismatch: the ", out.size,
                                      " bytes received hash to ", out.sha256, ", not ",
                                      expected_sha256));
  }
  if (store_->HasLocal(out.sha256)) {
    Discard();
    out.already_stored = true;
    if (absl::Status s = store_->Upload(out.sha256, out.size); !s.ok()) return s;
    return out;
  }
  if (::fsync(fd_) != 0) {
    absl::Status s = ErrnoError("fsync", tmp_path_);
    Discard();
    return s;
  }
  ::close(fd_);
  fd_ = -1;
  std::string shard = StrCat(store_->dir_, "/", out.sha256.substr(0, 2));
  std::error_code ec;
  std::filesystem::create_directories(shard, ec);
  if (ec) {
    Discard();
    return absl::InternalError(StrCat("cannot create '", shard, "': ", ec.message()));
  }
  std::string final_path = store_->PathOf(out.sha256);
  if (::rename(tmp_path_.c_str(), final_path.c_str()) != 0) {
    absl::Status s = ErrnoError("rename", tmp_path_);
    Discard();
    return s;
  }
  tmp_path_.clear();
  // Make the rename itself durable.
  if (absl::Status s = FsyncPath(shard, O_RDONLY | O_DIRECTORY); !s.ok()) return s;
  if (absl::Status s = store_->Upload(out.sha256, out.size); !s.ok()) return s;
  return out;
}

// ---------------------------------------------------------- ArtifactStore

absl::StatusOr<std::unique_ptr<ArtifactStore>> ArtifactStore::Open(const std::string& spec) {
  if (spec.empty()) return absl::InvalidArgumentError("artifact store folder is empty");
  std::unique_ptr<S3Client> remote;
  std::string dir = spec;
  if (spec.starts_with("s3://")) {
    auto loc = ParseS3Url(spec);
    if (!loc.ok()) return loc.status();
    remote = std::make_unique<S3Client>(*std::move(loc));
    const char* cache = std::getenv("KILN_ARTIFACT_CACHE");
    dir = cache != nullptr && *cache != '\0'
              ? std::string(cache)
              : (std::filesystem::temp_directory_path() /
                 StrCat("kiln-artifacts-", Sha256Hex(spec).substr(0, 12)))
                    .string();
  }
  std::error_code ec;
  std::filesystem::create_directories(dir + "/.tmp", ec);
  if (ec) {
    return absl::PermissionDeniedError(
        StrCat("cannot create artifact store folder '", dir, "': ", ec.message()));
  }
  if (!std::filesystem::is_directory(dir, ec)) {
    return absl::FailedPreconditionError(StrCat("'", dir, "' is not a folder"));
  }
  RemoveDeadTemporaries(dir + "/.tmp");
  std::unique_ptr<ArtifactStore> store(new ArtifactStore(dir));
  if (remote != nullptr) {
    store->remote_ = std::move(remote);
    store->remote_url_ = spec;
  }
  return store;
}

ArtifactStore::ArtifactStore(std::string dir) : dir_(std::move(dir)) {}
ArtifactStore::~ArtifactStore() = default;

std::string ArtifactStore::PathOf(const std::string& sha256) const {
  return StrCat(dir_, "/", sha256.substr(0, 2), "/", sha256);
}

bool ArtifactStore::HasLocal(const std::string& sha256) const {
  std::error_code ec;
  return IsSha256Hex(sha256) && std::filesystem::is_regular_file(PathOf(sha256), ec);
}

bool ArtifactStore::Contains(const std::string& sha256) const {
  return HasLocal(sha256) || (remote_ != nullptr && IsSha256Hex(sha256) && Fetch(sha256).ok());
}

// An object's key under the prefix: sharded like the folder.
static std::string ObjectKey(const std::string& sha256) {
  return StrCat(sha256.substr(0, 2), "/", sha256);
}

absl::Status ArtifactStore::Remove(const std::string& sha256) const {
  if (!IsSha256Hex(sha256)) {
    return absl::InvalidArgumentError(StrCat("'", sha256, "' is not a SHA-256"));
  }
  std::error_code ec;
  const bool local = std::filesystem::remove(PathOf(sha256), ec);
  if (ec) return absl::InternalError(StrCat("cannot remove ", sha256, ": ", ec.message()));
  if (remote_ != nullptr) {
    auto there = remote_->Head(ObjectKey(sha256));
    if (!there.ok()) return there.status();
    if (there->has_value()) {
      if (absl::Status s = remote_->Delete(ObjectKey(sha256)); !s.ok()) {
        return absl::Status(s.code(),
                            StrCat("removing ", sha256, " from ", remote_url_, ": ", s.message()));
      }
      return absl::OkStatus();
    }
  }
  if (!local) return absl::NotFoundError(StrCat("no stored file ", sha256));
  return absl::OkStatus();
}

absl::StatusOr<std::string> ArtifactStore::LocalPath(const std::string& sha256) const {
  if (!IsSha256Hex(sha256)) {
    return absl::InvalidArgumentError(StrCat("'", sha256, "' is not a SHA-256"));
  }
  if (!HasLocal(sha256)) {
    if (remote_ == nullptr) return absl::NotFoundError(StrCat("no stored file ", sha256));
    if (absl::Status s = Fetch(sha256); !s.ok()) return s;
  }
  return PathOf(sha256);
}

absl::Status ArtifactStore::Upload(const std::string& sha256, int64_t size) const {
  if (remote_ == nullptr) return absl::OkStatus();
  auto there = remote_->Head(ObjectKey(sha256));
  if (!there.ok()) return there.status();
  if (there->has_value() && **there == size) return absl::OkStatus();
  absl::Status s = remote_->PutFile(ObjectKey(sha256), PathOf(sha256), sha256, size);
  if (!s.ok()) {
    return absl::Status(s.code(),
                        StrCat("storing ", sha256, " in ", remote_url_, ": ", s.message()));
  }
  return absl::OkStatus();
}

absl::Status ArtifactStore::Fetch(const std::string& sha256) const {
  static std::atomic<uint64_t> counter{0};
  const std::string tmp = StrCat(dir_, "/.tmp/", ::getpid(), "-fetch-", counter++);
  struct Remove {
    const std::string& path;
    ~Remove() { ::unlink(path.c_str()); }
  } remove{tmp};
  if (absl::Status s = remote_->GetToFile(ObjectKey(sha256), tmp); !s.ok()) {
    if (s.code() == absl::StatusCode::kNotFound) {
      return absl::NotFoundError(StrCat("no stored file ", sha256, " (", remote_url_, ")"));
    }
    return s;
  }
  // The checksum of every download is verified before the file is used.
  Sha256Stream hasher;
  std::ifstream in(tmp, std::ios::binary);
  char buf[1 << 16];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    hasher.Update(std::string_view(buf, static_cast<size_t>(in.gcount())));
  }
  if (hasher.HexDigest() != sha256) {
    return absl::DataLossError(
        StrCat("artifact ", sha256, " in ", remote_url_, " is corrupt (checksum mismatch)"));
  }
  const std::string shard = StrCat(dir_, "/", sha256.substr(0, 2));
  std::error_code ec;
  std::filesystem::create_directories(shard, ec);
  if (::rename(tmp.c_str(), PathOf(sha256).c_str()) != 0) return ErrnoError("rename", tmp);
  return absl::OkStatus();
}

absl::StatusOr<int64_t> ArtifactStore::SizeOf(const std::string& sha256) const {
  auto path = LocalPath(sha256);
  if (!path.ok()) return path.status();
  std::error_code ec;
  auto size = std::filesystem::file_size(*path, ec);
  if (ec) return absl::InternalError(StrCat("cannot stat ", sha256, ": ", ec.message()));
  return static_cast<int64_t>(size);
}

absl::StatusOr<std::unique_ptr<BlobWriter>> ArtifactStore::NewWriter() const {
  static std::atomic<uint64_t> counter{0};
  std::string tmp = StrCat(dir_, "/.tmp/", ::getpid(), "-", counter++);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    // The folder may have been removed under a running store.
    std::error_code ec;
    std::filesystem::create_directories(dir_ + "/.tmp", ec);
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) return ErrnoError("create", tmp);
  }
  return std::unique_ptr<BlobWriter>(new BlobWriter(this, tmp, fd));
}

absl::StatusOr<std::string> ArtifactStore::Put(std::string_view bytes) {
  std::string sha = Sha256Hex(bytes);
  if (HasLocal(sha) && remote_ == nullptr) return sha;  // same bytes, same name: nothing to do
  auto writer = NewWriter();
  if (!writer.ok()) return writer.status();
  if (absl::Status s = (*writer)->Append(bytes); !s.ok()) return s;
  auto stored = (*writer)->Commit(sha);
  if (!stored.ok()) return stored.status();
  return stored->sha256;
}

absl::StatusOr<std::string> ArtifactStore::Get(const std::string& sha256) const {
  if (!IsSha256Hex(sha256)) {
    return absl::InvalidArgumentError(
        StrCat("'", sha256, "' is not a SHA-256 (64 lowercase hex digits)"));
  }
  auto path = LocalPath(sha256);
  if (!path.ok()) return absl::NotFoundError(StrCat("no artifact ", sha256));
  std::ifstream in(*path, std::ios::binary);
  if (!in) return absl::NotFoundError(StrCat("no artifact ", sha256));
  std::ostringstream buf;
  buf << in.rdbuf();
  if (in.bad()) return absl::DataLossError(StrCat("reading artifact ", sha256, " failed"));
  std::string bytes = std::move(buf).str();
  if (Sha256Hex(bytes) != sha256) {
    return absl::DataLossError(StrCat("artifact ", sha256, " is corrupt (checksum mismatch)"));
  }
  return bytes;
}

}  // namespace kiln::storage
