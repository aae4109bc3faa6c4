// kiln fetch JOB --tracker ADDR -o PATH: streams the artifact to PATH.part,
// checks size and SHA-256, renames to PATH.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <sstream>

#include "base/net.h"
#include "base/sha256.h"
#include "base/str.h"
#include "cli/common.h"

namespace kiln::cli {

int RunFetch(const Command& self, const std::vector<std::string>& argv, const CliEnv& env) {
  absl::StatusOr<Args> args = ParseFlags(argv, {"--tracker", "-o", "--output"}, {"--insecure"});
  if (!args.ok()) return UsageError(self, std::string(args.status().message()), env);
  if (args->positional.size() != 1) return UsageError(self, "expected one JOB id", env);
  if (!args->values.count("--tracker")) return UsageError(self, "missing --tracker", env);
  std::string path = args->Get("-o", args->Get("--output"));
  if (path.empty()) return UsageError(self, "missing -o PATH", env);

  // An artifact is native code that kiln-run loads: from another machine it
  // comes over TLS (authenticated by the tracker's certificate, so no one in
  // between can swap it and its checksum), unless the user says otherwise.
  const std::string tracker = args->Get("--tracker");
  if (env.tls_ca.empty() && !IsLoopbackAddress(tracker) && !args->Has("--insecure")) {
    return Fail(self,
                StrCat("refusing to fetch native code from ", tracker,
                       " over an unencrypted connection (anyone on the way could replace it and "
                       "its checksum): pass --tls-ca with the tracker's CA, or --insecure"),
                env);
  }
  std::unique_ptr<kiln::v1::Tracker::Stub> stub = ConnectTracker(tracker, env);
  if (!stub) return 1;

  const std::string part = path + ".part";
  auto fail = [&](const std::string& message) {
    std::error_code ec;
    std::filesystem::remove(part, ec);
    return Fail(self, message, env);
  };

  kiln::v1::FetchArtifactRequest request;
  request.set_job_id(args->positional[0]);
  grpc::ClientContext ctx;
  std::unique_ptr<grpc::ClientReader<kiln::v1::ArtifactChunk>> reader =
      stub->FetchArtifact(&ctx, request);
  std::ofstream out;
  kiln::v1::ArtifactChunk chunk;
  int64_t written = 0;
  int64_t total_size = -1;
  std::string sha256;
  kiln::Sha256Stream hasher;  // over what was received, as it arrives
  while (reader->Read(&chunk)) {
    if (!out.is_open()) {
      out.open(part, std::ios::binary | std::ios::trunc);
      if (!out) {
        ctx.TryCancel();
        reader->Finish();
        return fail(StrCat("cannot write '", part, "'"));
      }
    }
    if (chunk.offset() != written) {
      ctx.TryCancel();
      reader->Finish();
      return fail(
          StrCat("chunk at offset ", chunk.offset(), " but ", written, " bytes received so far"));
    }
    out.write(chunk.data().data(), static_cast<std::streamsize>(chunk.data().size()));
    hasher.Update(chunk.data());
    written += static_cast<int64_t>(chunk.data().size());
    total_size = chunk.total_size();
    if (!chunk.sha256().empty()) sha256 = chunk.sha256();
  }
  grpc::Status status = reader->Finish();
  if (out.is_open()) out.close();
  if (!status.ok()) {
    std::error_code ec;
    std::filesystem::remove(part, ec);
    return RpcFail(self, status, env);
  }
  if (total_size < 0) return fail(StrCat("job ", args->positional[0], ": empty artifact stream"));
  if (!out) return fail(StrCat("error writing '", part, "'"));
  if (written != total_size) {
    return fail(StrCat("size mismatch: received ", written, " bytes, expected ", total_size));
  }
  if (sha256.empty()) return fail("the tracker sent no checksum");
  std::string actual = hasher.HexDigest();
  if (actual != sha256) {
    return fail(StrCat("checksum mismatch: received sha256 ", actual, ", expected ", sha256));
  }
  std::error_code ec;
  std::filesystem::rename(part, path, ec);
  if (ec) return fail(StrCat("cannot rename '", part, "' to '", path, "': ", ec.message()));
  *env.err << "kiln: fetched " << written << " bytes to " << path << " (sha256 " << sha256 << ")\n";
  return 0;
}

}  // namespace kiln::cli
