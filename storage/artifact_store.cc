#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/status/status.h"
#include "deploy/str.h"
#include "storage/log_db.h"

namespace kiln::storage {

namespace {

bool IsSha256Hex(const std::string& sha) {
  if (sha.size() != 64) return false;
  for (char c : sha) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

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

}  // namespace

absl::StatusOr<std::unique_ptr<ArtifactStore>> ArtifactStore::Open(const std::string& dir) {
  if (dir.empty()) return absl::InvalidArgumentError("artifact store folder is empty");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return absl::PermissionDeniedError(
        StrCat("cannot create artifact store folder '", dir, "': ", ec.message()));
  }
  if (!std::filesystem::is_directory(dir, ec)) {
    return absl::FailedPreconditionError(StrCat("'", dir, "' is not a folder"));
  }
  return std::unique_ptr<ArtifactStore>(new ArtifactStore(dir));
}

std::string ArtifactStore::PathOf(const std::string& sha256) const {
  return StrCat(dir_, "/", sha256.substr(0, 2), "/", sha256);
}

bool ArtifactStore::Contains(const std::string& sha256) const {
  std::error_code ec;
  return IsSha256Hex(sha256) && std::filesystem::is_regular_file(PathOf(sha256), ec);
}

absl::StatusOr<std::string> ArtifactStore::Put(std::string_view bytes) {
  std::string sha = Sha256Hex(bytes);
  if (Contains(sha)) return sha;  // same bytes, same name: nothing to do
  std::string shard = StrCat(dir_, "/", sha.substr(0, 2));
  std::error_code ec;
  std::filesystem::create_directories(shard, ec);
  if (ec) return absl::InternalError(StrCat("cannot create '", shard, "': ", ec.message()));

  static std::atomic<uint64_t> counter{0};
  std::string tmp = StrCat(shard, "/.tmp-", sha, "-", ::getpid(), "-", counter++);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoError("create", tmp);
  const char* p = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      absl::Status s = ErrnoError("write", tmp);
      ::close(fd);
      ::unlink(tmp.c_str());
      return s;
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    absl::Status s = ErrnoError("fsync", tmp);
    ::close(fd);
    ::unlink(tmp.c_str());
    return s;
  }
  ::close(fd);
  std::string final_path = PathOf(sha);
  if (::rename(tmp.c_str(), final_path.c_str()) != 0) {
    absl::Status s = ErrnoError("rename", tmp);
    ::unlink(tmp.c_str());
    return s;
  }
  // Make the rename itself durable.
  if (absl::Status s = FsyncPath(shard, O_RDONLY | O_DIRECTORY); !s.ok()) return s;
  return sha;
}

absl::StatusOr<std::string> ArtifactStore::Get(const std::string& sha256) const {
  if (!IsSha256Hex(sha256)) {
    return absl::InvalidArgumentError(
        StrCat("'", sha256, "' is not a SHA-256 (64 lowercase hex digits)"));
  }
  std::string path = PathOf(sha256);
  std::ifstream in(path, std::ios::binary);
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
