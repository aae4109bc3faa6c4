#include "compiler/model.h"

#include <openssl/evp.h>

#include <fstream>
#include <sstream>

#include "absl/status/status.h"
#include "compiler/frontend/onnx_import.h"
#include "compiler/graph/graph.h"
#include "compiler/graph/passes.h"
#include "deploy/check.h"
#include "deploy/str.h"

namespace kiln::compiler {
namespace {

std::string Sha256Hex(std::string_view bytes) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  KILN_CHECK(EVP_Digest(bytes.data(), bytes.size(), md, &len, EVP_sha256(), nullptr) == 1)
      << "EVP_Digest failed";
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < len; ++i) {
    out += kHex[md[i] >> 4];
    out += kHex[md[i] & 15];
  }
  return out;
}

}  // namespace

absl::StatusOr<Model> Model::FromOnnx(std::string_view model_bytes) {
  auto graph = ImportOnnx(model_bytes);
  if (!graph.ok()) return graph.status();
  if (auto s = RunGraphPasses(**graph); !s.ok()) return s;
  return Model(*std::move(graph), Sha256Hex(model_bytes));
}

absl::StatusOr<Model> Model::FromOnnxFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(StrCat("cannot open model file '", path, "'"));
  std::ostringstream ss;
  ss << in.rdbuf();
  return FromOnnx(ss.str());
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
