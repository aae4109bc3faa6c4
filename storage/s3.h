#pragma once
// A small client of the S3 API (AWS Signature Version 4 over HTTP or HTTPS,
// path-style requests), for the artifact store on an object store: AWS S3,
// MinIO, Ceph RGW, ... Objects are streamed from and to files, never held
// whole in memory.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace kiln::storage {

struct S3Location {
  std::string endpoint;  // scheme://host[:port]
  std::string bucket;
  std::string prefix;  // "" or "a/b" (no leading or trailing '/')
  std::string region = "us-east-1";
  std::string access_key;
  std::string secret_key;
};

// "s3://BUCKET[/PREFIX]", the endpoint and credentials from the environment:
// KILN_S3_ENDPOINT (or AWS_ENDPOINT_URL; default https://s3.REGION.amazonaws.com),
// AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION (default us-east-1).
absl::StatusOr<S3Location> ParseS3Url(std::string_view url);

// The Authorization header of a request signed with AWS Signature Version 4
// for the S3 service. `headers`: lowercase names to values, every one
// signed; they must hold host, x-amz-content-sha256 and x-amz-date
// (YYYYMMDDTHHMMSSZ). `path` is the URI-encoded absolute path; `query` the
// canonical query string ("" for none).
std::string SignV4(std::string_view method, std::string_view path, std::string_view query,
                   const std::map<std::string, std::string>& headers, std::string_view region,
                   std::string_view access_key, std::string_view secret_key);

class S3Client {
 public:
  explicit S3Client(S3Location location) : loc_(std::move(location)) {}

  // The object's size, or nullopt when there is none.
  absl::StatusOr<std::optional<int64_t>> Head(const std::string& key) const;
  // Uploads a file whose SHA-256 (hex) is known (it signs the payload).
  absl::Status PutFile(const std::string& key, const std::string& path,
                       const std::string& sha256_hex, int64_t size) const;
  // Downloads an object into a file; NOT_FOUND when there is none.
  absl::Status GetToFile(const std::string& key, const std::string& path) const;
  // Deletes an object (S3 answers a missing one as deleted too).
  absl::Status Delete(const std::string& key) const;

  const S3Location& location() const { return loc_; }

 private:
  std::string PathOf(const std::string& key) const;
  std::map<std::string, std::string> SignedHeaders(std::string_view method, const std::string& path,
                                                   const std::string& payload_sha256) const;
  S3Location loc_;
};

}  // namespace kiln::storage
