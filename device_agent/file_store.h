#pragma once
// The files a tracker sends an agent for whole-model batches (FilePart
// messages: an ONNX model, its external data), kept in a folder under their
// SHA-256 for the session. A file is written as its parts arrive (in order,
// none past the size its first part declared, no file above the store's
// limit) and becomes usable only when its last part has come and its bytes
// hash to its name; a file cut short or altered is never used.

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/status.h"
#include "kiln/v1/agent.pb.h"

namespace kiln::agent {

class FileStore {
 public:
  // Files live in `dir` (created; emptied of what an earlier store left).
  // `max_file_bytes`: the largest file accepted.
  FileStore(std::string dir, int64_t max_file_bytes);
  ~FileStore();  // removes the folder
  FileStore(const FileStore&) = delete;
  FileStore& operator=(const FileStore&) = delete;

  // INVALID_ARGUMENT for a part out of order, past its size, of a bad
  // digest name or a file above the limit; DATA_LOSS when the finished file
  // does not hash to its name. The file's parts so far are dropped then.
  absl::Status Add(const kiln::v1::FilePart& part);
  // Whether the file is complete and checked.
  bool Has(const std::string& sha256) const;
  const std::string& dir() const { return dir_; }

 private:
  struct Partial {
    int64_t total = 0;
    int64_t written = 0;
  };
  void Drop(const std::string& sha256);

  std::string dir_;
  int64_t max_file_bytes_;
  std::map<std::string, Partial> partial_;
  std::map<std::string, bool> done_;
};

}  // namespace kiln::agent
