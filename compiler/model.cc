#include "compiler/model.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

#include "absl/status/status.h"
#include "base/bytes.h"
#include "base/check.h"
#include "base/sha256.h"
#include "base/str.h"
#include "compiler/frontend/onnx_import.h"
#include "compiler/graph/graph.h"
#include "compiler/graph/passes.h"

namespace kiln::compiler {
namespace {

// SHA-256 (hex) of a file, read in pieces.
absl::StatusOr<std::string> FileSha256Hex(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::NotFoundError(StrCat("cannot open model file '", path, "'"));
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  KILN_CHECK(ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr) == 1) << "EVP_DigestInit";
  std::vector<char> buf(1 << 20);
  ssize_t n;
  while ((n = ::read(fd, buf.data(), buf.size())) != 0) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    EVP_DigestUpdate(ctx, buf.data(), static_cast<size_t>(n));
  }
  ::close(fd);
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(ctx, md, &len);
  EVP_MD_CTX_free(ctx);
  if (n < 0) return absl::DataLossError(StrCat("reading model file '", path, "' failed"));
  return Hex(std::string_view(reinterpret_cast<const char*>(md), len));
}

}  // namespace

absl::StatusOr<Model> Model::FromOnnx(std::string_view model_bytes, const ImportOptions& options) {
  auto graph = ImportOnnx(model_bytes, options);
  if (!graph.ok()) return graph.status();
  if (auto s = RunGraphPasses(**graph, options.plan_layouts, options.precision, options.bf16_convs);
      !s.ok())
    return s;
  return Model(*std::move(graph), Hex(kiln::Sha256(model_bytes)));
}

absl::StatusOr<Model> Model::FromOnnxFile(const std::string& path, const ImportOptions& options) {
  auto sha = FileSha256Hex(path);
  if (!sha.ok()) return sha.status();
  auto graph = ImportOnnxFile(path, options);
  if (!graph.ok()) return graph.status();
  if (auto s = RunGraphPasses(**graph, options.plan_layouts, options.precision, options.bf16_convs);
      !s.ok())
    return s;
  return Model(*std::move(graph), *std::move(sha));
}

Model::Model(std::unique_ptr<Graph> graph, std::string sha)
    : graph_(std::move(graph)), source_sha256_(std::move(sha)) {
  for (const Node& n : graph_->nodes) {
    if (n.kind != NodeKind::kCompute) continue;
    bool found = false;
    for (Task& t : tasks_) {
      if (t.workload == n.workload) {
        ++t.occurrences;
        found = true;
        break;
      }
    }
    if (!found) tasks_.push_back(Task{n.workload, 1});
  }
}

Model::Model(Model&&) noexcept = default;
Model& Model::operator=(Model&&) noexcept = default;
Model::~Model() = default;

const std::vector<Task>& Model::Tasks() const { return tasks_; }
const Graph& Model::graph() const { return *graph_; }
const std::string& Model::source_sha256() const { return source_sha256_; }

}  // namespace kiln::compiler
