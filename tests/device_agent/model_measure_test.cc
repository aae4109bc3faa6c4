// Whole models measured in the sandbox's worker (a real kiln-agent process),
// and the store that receives their files.
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "base/bytes.h"
#include "base/sha256.h"
#include "compiler/model.h"
#include "compiler/target.h"
#include "device_agent/file_store.h"
#include "device_agent/sandbox.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kiln::agent {
namespace {

using ::testing::HasSubstr;

std::string AgentBinary() {
  const char* env = std::getenv("KILN_AGENT_BINARY");
  return env != nullptr ? env : KILN_BINARY_DIR "/device_agent/kiln-agent";
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const std::string kSmallCnn = std::string(KILN_SOURCE_DIR) + "/models/small_cnn.onnx";

kiln::v1::FilePart Part(const std::string& sha, const std::string& whole, size_t from, size_t n,
                        bool last) {
  kiln::v1::FilePart p;
  p.set_sha256(sha);
  p.set_total_size(static_cast<int64_t>(whole.size()));
  p.set_offset(static_cast<int64_t>(from));
  p.set_data(whole.substr(from, n));
  p.set_last(last);
  return p;
}

TEST(FileStore, AFileInPartsIsKeptUnderItsDigest) {
  const std::string dir = ::testing::TempDir() + "/files-ok";
  FileStore store(dir, 1 << 20);
  const std::string bytes(3000, 'x');
  const std::string sha = Hex(kiln::Sha256(bytes));
  ASSERT_TRUE(store.Add(Part(sha, bytes, 0, 1000, false)).ok());
  EXPECT_FALSE(store.Has(sha)) << "usable only once whole";
  ASSERT_TRUE(store.Add(Part(sha, bytes, 1000, 2000, true)).ok());
  EXPECT_TRUE(store.Has(sha));
  EXPECT_EQ(ReadFile(dir + "/" + sha), bytes);
}

TEST(FileStore, BadPartsAreRefusedAndTheFileDropped) {
  FileStore store(::testing::TempDir() + "/files-bad", 1000);
  const std::string bytes(600, 'y');
  const std::string sha = Hex(kiln::Sha256(bytes));
  // Out of order.
  ASSERT_TRUE(store.Add(Part(sha, bytes, 0, 100, false)).ok());
  EXPECT_EQ(store.Add(Part(sha, bytes, 300, 100, false)).code(),
            absl::StatusCode::kInvalidArgument);
  // Bytes that do not hash to the name.
  std::string other = bytes;
  other[5] = 'z';
  ASSERT_TRUE(store.Add(Part(sha, other, 0, 300, false)).ok());
  EXPECT_EQ(store.Add(Part(sha, other, 300, 300, true)).code(), absl::StatusCode::kDataLoss);
  EXPECT_FALSE(store.Has(sha));
  // Above the limit, and a name that is no digest.
  const std::string big(2000, 'w');
  EXPECT_EQ(store.Add(Part(Hex(kiln::Sha256(big)), big, 0, 100, false)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store.Add(Part("../etc/passwd", bytes, 0, 100, true)).code(),
            absl::StatusCode::kInvalidArgument);
}

class ModelSandbox : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(access(AgentBinary().c_str(), X_OK), 0)
        << AgentBinary() << " is missing: build it first (scripts/build kiln-agent)";
    // One folder per test: ctest runs this fixture's tests side by side, and
    // one test's SetUp rewriting the file another's worker is reading made
    // that worker import a half-written model.
    dir_ = ::testing::TempDir() + "/model-files-" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::create_directories(dir_);
    const std::string bytes = ReadFile(kSmallCnn);
    sha_ = Hex(kiln::Sha256(bytes));
    std::ofstream(dir_ + "/" + sha_, std::ios::binary) << bytes;
  }
  std::string dir_, sha_;
};

// Three variants of the bundled CNN: the defaults, the defaults named
// explicitly for every task, and one with a config no template accepts.
TEST_F(ModelSandbox, VariantsAreTimedInterleavedWithEachTasksTimeInsideTheModel) {
  auto model = compiler::Model::FromOnnxFile(kSmallCnn);
  ASSERT_TRUE(model.ok()) << model.status();
  kiln::v1::MeasureBatch batch;
  batch.set_batch_id("m1");
  batch.mutable_model()->set_model_sha256(sha_);
  batch.mutable_timing()->set_repeat(4);
  batch.mutable_timing()->set_min_repeat_ms(2);
  batch.mutable_timing()->set_timeout_ms(120000);
  batch.mutable_timing()->set_threads(1);
  batch.add_candidates()->set_candidate_id("defaults");
  kiln::v1::Candidate* named = batch.add_candidates();
  named->set_candidate_id("named");
  std::set<std::string> keys;
  for (const compiler::Task& t : model->Tasks()) {
    keys.insert(t.workload.Key());
    auto c = compiler::DefaultConfig(t.workload, compiler::Target::Host());
    ASSERT_TRUE(c.ok()) << c.status();
    kiln::v1::TaskConfig* tc = named->add_task_configs();
    tc->set_workload_key(t.workload.Key());
    tc->mutable_config()->set_canonical(compiler::CanonicalConfig(*c));
  }
  kiln::v1::Candidate* bad = batch.add_candidates();
  bad->set_candidate_id("bad");
  kiln::v1::TaskConfig* tc = bad->add_task_configs();
  tc->set_workload_key(model->Tasks()[0].workload.Key());
  tc->mutable_config()->set_canonical("no_such_knob=3");

  Sandbox sandbox(AgentBinary(), 0, dir_);
  std::vector<kiln::v1::MeasureResult> results = sandbox.MeasureModel(batch);
  ASSERT_EQ(results.size(), 3u);
  for (int i = 0; i < 2; ++i) {
    const kiln::v1::MeasureResult& r = results[static_cast<size_t>(i)];
    EXPECT_EQ(r.candidate_id(), batch.candidates(i).candidate_id());
    ASSERT_EQ(r.error_kind(), kiln::v1::MEASURE_ERROR_KIND_NONE) << r.error_message();
    EXPECT_EQ(r.costs_s_size(), 4);
    for (double c : r.costs_s()) EXPECT_GT(c, 0);
    std::set<std::string> seen;
    double kernels_s = 0;
    for (const kiln::v1::KernelCost& k : r.kernel_costs()) {
      seen.insert(k.workload_key());
      EXPECT_GT(k.cost_s(), 0);
      kernels_s += k.cost_s();
    }
    for (const std::string& key : keys) EXPECT_TRUE(seen.count(key)) << "no time for task " << key;
    // The kernels are one run of the model, not the sum of its 4 (against
    // the slowest run, with room for a loaded machine's spells: the first
    // run against 1.5x failed once beside a parallel ctest).
    EXPECT_LT(kernels_s, 2.0 * *std::max_element(r.costs_s().begin(), r.costs_s().end()));
  }
  EXPECT_EQ(results[2].candidate_id(), "bad");
  EXPECT_NE(results[2].error_kind(), kiln::v1::MEASURE_ERROR_KIND_NONE);
  EXPECT_EQ(results[2].costs_s_size(), 0);
}

TEST_F(ModelSandbox, AModelThatIsNotThereFailsEveryVariant) {
  kiln::v1::MeasureBatch batch;
  batch.mutable_model()->set_model_sha256(std::string(64, 'a'));
  batch.mutable_timing()->set_timeout_ms(60000);
  batch.add_candidates()->set_candidate_id("v0");
  batch.add_candidates()->set_candidate_id("v1");
  Sandbox sandbox(AgentBinary(), 0, dir_);
  std::vector<kiln::v1::MeasureResult> results = sandbox.MeasureModel(batch);
  ASSERT_EQ(results.size(), 2u);
  for (const auto& r : results) {
    EXPECT_EQ(r.error_kind(), kiln::v1::MEASURE_ERROR_KIND_COMPILE);
    EXPECT_THAT(r.error_message(), HasSubstr("importing the model"));
  }
  EXPECT_EQ(results[1].candidate_id(), "v1");
}

}  // namespace
}  // namespace kiln::agent
