#include "storage/s3.h"

#include <openssl/hmac.h>

#include <cstdlib>
#include <ctime>
#include <fstream>

#include "base/bytes.h"
#include "base/sha256.h"
#include "base/str.h"
#include "httplib.h"

namespace kiln::storage {

namespace {

constexpr char kEmptySha256[] = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

std::string Env(const char* name, const std::string& fallback = "") {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : fallback;
}

std::string Hmac(std::string_view key, std::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), out, &n);
  return std::string(reinterpret_cast<char*>(out), n);
}

// S3's URI encoding of a path: unreserved characters and '/' stay.
std::string UriEncodePath(std::string_view path) {
  std::string out;
  for (unsigned char c : path) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || c == '/') {
      out += static_cast<char>(c);
    } else {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", c);
      out += buf;
    }
  }
  return out;
}

std::string AmzDate() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[20];
  std::strftime(buf, sizeof buf, "%Y%m%dT%H%M%SZ", &tm);
  return buf;
}

absl::Status HttpError(const httplib::Result& res, std::string_view what, const std::string& key) {
  if (!res) {
    return absl::UnavailableError(
        StrCat("S3 ", what, " ", key, ": ", httplib::to_string(res.error())));
  }
  const std::string msg =
      StrCat("S3 ", what, " ", key, ": HTTP ", res->status, " ", res->body.substr(0, 300));
  if (res->status == 404) return absl::NotFoundError(msg);
  if (res->status == 403 || res->status == 401) return absl::PermissionDeniedError(msg);
  if (res->status >= 500 || res->status == 429) return absl::UnavailableError(msg);
  return absl::InternalError(msg);
}

httplib::Client MakeClient(const S3Location& loc) {
  httplib::Client cli(loc.endpoint);
  cli.set_connection_timeout(10);
  cli.set_read_timeout(120);
  cli.set_write_timeout(120);
  return cli;
}

}  // namespace

absl::StatusOr<S3Location> ParseS3Url(std::string_view url) {
  if (!url.starts_with("s3://")) {
    return absl::InvalidArgumentError(StrCat("not an s3:// URL: '", url, "'"));
  }
  std::string_view rest = url.substr(5);
  while (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  S3Location loc;
  const size_t slash = rest.find('/');
  loc.bucket = std::string(rest.substr(0, slash));
  if (slash != std::string_view::npos) loc.prefix = std::string(rest.substr(slash + 1));
  if (loc.bucket.empty()) return absl::InvalidArgumentError(StrCat("no bucket in '", url, "'"));
  loc.region = Env("AWS_REGION", "us-east-1");
  loc.endpoint = Env("KILN_S3_ENDPOINT",
                     Env("AWS_ENDPOINT_URL", StrCat("https://s3.", loc.region, ".amazonaws.com")));
  loc.access_key = Env("AWS_ACCESS_KEY_ID");
  loc.secret_key = Env("AWS_SECRET_ACCESS_KEY");
  if (loc.access_key.empty() || loc.secret_key.empty()) {
    return absl::InvalidArgumentError(
        StrCat("'", url, "' needs AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in the environment"));
  }
  return loc;
}

std::string SignV4(std::string_view method, std::string_view path, std::string_view query,
                   const std::map<std::string, std::string>& headers, std::string_view region,
                   std::string_view access_key, std::string_view secret_key) {
  std::string canonical_headers, signed_headers;
  for (const auto& [name, value] : headers) {
    canonical_headers += StrCat(name, ":", value, "\n");
    signed_headers += StrCat(signed_headers.empty() ? "" : ";", name);
  }
  const std::string amz_date = headers.at("x-amz-date");
  const std::string date = amz_date.substr(0, 8);
  const std::string canonical =
      StrCat(method, "\n", path, "\n", query, "\n", canonical_headers, "\n", signed_headers, "\n",
             headers.at("x-amz-content-sha256"));
  const std::string scope = StrCat(date, "/", region, "/s3/aws4_request");
  const std::string to_sign =
      StrCat("AWS4-HMAC-SHA256\n", amz_date, "\n", scope, "\n", Sha256Hex(canonical));
  const std::string key =
      Hmac(Hmac(Hmac(Hmac(StrCat("AWS4", secret_key), date), region), "s3"), "aws4_request");
  return StrCat("AWS4-HMAC-SHA256 Credential=", access_key, "/", scope,
                ",SignedHeaders=", signed_headers, ",Signature=", Hex(Hmac(key, to_sign)));
}

std::string S3Client::PathOf(const std::string& key) const {
  return UriEncodePath(
      StrCat("/", loc_.bucket, "/", loc_.prefix.empty() ? "" : loc_.prefix + "/", key));
}

std::map<std::string, std::string> S3Client::SignedHeaders(std::string_view method,
                                                           const std::string& path,
                                                           const std::string& payload) const {
  std::string host = loc_.endpoint;
  if (size_t scheme = host.find("://"); scheme != std::string::npos) host = host.substr(scheme + 3);
  while (!host.empty() && host.back() == '/') host.pop_back();
  // Sent as signed (httplib keeps a Host header it is given).
  std::map<std::string, std::string> h = {
      {"host", host}, {"x-amz-content-sha256", payload}, {"x-amz-date", AmzDate()}};
  h["authorization"] = SignV4(method, path, "", h, loc_.region, loc_.access_key, loc_.secret_key);
  return h;
}

absl::StatusOr<std::optional<int64_t>> S3Client::Head(const std::string& key) const {
  const std::string path = PathOf(key);
  httplib::Headers headers;
  for (const auto& [k, v] : SignedHeaders("HEAD", path, kEmptySha256)) headers.emplace(k, v);
  auto cli = MakeClient(loc_);
  auto res = cli.Head(path, headers);
  if (res && res->status == 404) return std::optional<int64_t>();
  if (!res || res->status != 200) return HttpError(res, "HEAD", key);
  return std::optional<int64_t>(
      std::strtoll(res->get_header_value("Content-Length").c_str(), nullptr, 10));
}

absl::Status S3Client::PutFile(const std::string& key, const std::string& path,
                               const std::string& sha256_hex, int64_t size) const {
  const std::string url_path = PathOf(key);
  httplib::Headers headers;
  for (const auto& [k, v] : SignedHeaders("PUT", url_path, sha256_hex)) headers.emplace(k, v);
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(StrCat("cannot open '", path, "'"));
  auto cli = MakeClient(loc_);
  auto res = cli.Put(
      url_path, headers, static_cast<size_t>(size),
      [&](size_t offset, size_t length, httplib::DataSink& sink) {
        char buf[1 << 16];
        in.seekg(static_cast<std::streamoff>(offset));
        const size_t n = std::min(length, sizeof buf);
        in.read(buf, static_cast<std::streamsize>(n));
        if (in.gcount() <= 0) return false;
        return sink.write(buf, static_cast<size_t>(in.gcount()));
      },
      "application/octet-stream");
  if (!res || res->status != 200) return HttpError(res, "PUT", key);
  return absl::OkStatus();
}

absl::Status S3Client::Delete(const std::string& key) const {
  const std::string path = PathOf(key);
  httplib::Headers headers;
  for (const auto& [k, v] : SignedHeaders("DELETE", path, kEmptySha256)) headers.emplace(k, v);
  auto cli = MakeClient(loc_);
  auto res = cli.Delete(path, headers);
  if (!res || (res->status != 204 && res->status != 200)) return HttpError(res, "DELETE", key);
  return absl::OkStatus();
}

absl::Status S3Client::GetToFile(const std::string& key, const std::string& path) const {
  const std::string url_path = PathOf(key);
  httplib::Headers headers;
  for (const auto& [k, v] : SignedHeaders("GET", url_path, kEmptySha256)) headers.emplace(k, v);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return absl::PermissionDeniedError(StrCat("cannot create '", path, "'"));
  int status = 0;
  std::string error_body;
  auto cli = MakeClient(loc_);
  auto res = cli.Get(
      url_path, headers,
      [&](const httplib::Response& r) {
        status = r.status;
        return true;
      },
      [&](const char* data, size_t n) {
        if (status != 200) {
          error_body.append(data, std::min<size_t>(n, 300));
          return true;
        }
        out.write(data, static_cast<std::streamsize>(n));
        return static_cast<bool>(out);
      });
  if (!res || res->status != 200) {
    if (res) res->body = error_body;
    return HttpError(res, "GET", key);
  }
  out.close();
  if (!out) return absl::DataLossError(StrCat("writing '", path, "' failed"));
  return absl::OkStatus();
}

}  // namespace kiln::storage
