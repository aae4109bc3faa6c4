#include "device_agent/file_store.h"

#include <filesystem>
#include <fstream>
#include <memory>
#include <vector>

#include "base/bytes.h"
#include "base/sha256.h"
#include "base/str.h"

namespace kiln::agent {
namespace {

bool IsDigestName(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

// Lowercase hex SHA-256 of a file, read in 1 MiB pieces; "" when unreadable.
std::string FileSha256(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  kiln::Sha256Stream hash;
  std::vector<char> buf(1 << 20);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    hash.Update(std::string_view(buf.data(), static_cast<size_t>(in.gcount())));
  }
  return Hex(hash.Digest());
}

}  // namespace

FileStore::FileStore(std::string dir, int64_t max_file_bytes)
    : dir_(std::move(dir)), max_file_bytes_(max_file_bytes) {
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
  std::filesystem::create_directories(dir_, ec);
}

FileStore::~FileStore() {
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

void FileStore::Drop(const std::string& sha256) {
  partial_.erase(sha256);
  done_.erase(sha256);
  std::error_code ec;
  std::filesystem::remove(StrCat(dir_, "/", sha256, ".part"), ec);
  std::filesystem::remove(StrCat(dir_, "/", sha256), ec);
}

absl::Status FileStore::Add(const kiln::v1::FilePart& part) {
  const std::string& sha = part.sha256();
  if (!IsDigestName(sha)) {
    return absl::InvalidArgumentError("a file part names no SHA-256 (64 lowercase hex digits)");
  }
  if (part.total_size() < 0 || part.total_size() > max_file_bytes_) {
    Drop(sha);
    return absl::InvalidArgumentError(
        StrCat("file ", sha, " of ", part.total_size(), " bytes is above this agent's limit of ",
               max_file_bytes_, " bytes (kiln-agent --max-model-bytes)"));
  }
  if (part.offset() == 0) Drop(sha);  // a new transfer of it starts over
  Partial& p = partial_[sha];
  if (part.offset() == 0) p.total = part.total_size();
  const int64_t end = part.offset() + static_cast<int64_t>(part.data().size());
  if (part.offset() != p.written || part.total_size() != p.total || end > p.total) {
    Drop(sha);
    return absl::InvalidArgumentError(StrCat("file ", sha, ": part at offset ", part.offset(), " (",
                                             part.data().size(), " bytes) does not follow the ",
                                             p.written, " bytes of ", p.total, " received"));
  }
  const std::string partial_path = StrCat(dir_, "/", sha, ".part");
  {
    std::ofstream out(partial_path, std::ios::binary | std::ios::app);
    out.write(part.data().data(), static_cast<std::streamsize>(part.data().size()));
    if (!out) {
      Drop(sha);
      return absl::InternalError(StrCat("writing ", partial_path, " failed"));
    }
  }
  p.written = end;
  if (!part.last()) return absl::OkStatus();
  if (p.written != p.total) {
    Drop(sha);
    return absl::InvalidArgumentError(
        StrCat("file ", sha, " ended after ", end, " of its ", part.total_size(), " bytes"));
  }
  if (FileSha256(partial_path) != sha) {
    Drop(sha);
    return absl::DataLossError(StrCat("file ", sha, " does not hash to its name"));
  }
  std::error_code ec;
  std::filesystem::rename(partial_path, StrCat(dir_, "/", sha), ec);
  if (ec) return absl::InternalError(StrCat("keeping file ", sha, ": ", ec.message()));
  partial_.erase(sha);
  done_[sha] = true;
  return absl::OkStatus();
}

bool FileStore::Has(const std::string& sha256) const { return done_.count(sha256) > 0; }

}  // namespace kiln::agent
