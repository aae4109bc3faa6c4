#include "tracker/compile_sandbox.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>

#include <fstream>
#include <string>

#include "tests/storage/test_util.h"
#include "tests/tracker/test_models.h"

namespace kiln::tracker {
namespace {

// The parent's side of the sandbox against stand-in workers: shell scripts
// that answer as the worker would, crash, hang, or check what they were
// started with. (The real worker, kiln-tracker compile-worker, runs in the
// end-to-end fault test.)
class CompileSandboxTest : public ::testing::Test {
 protected:
  std::string Worker(const std::string& body) {
    std::string path = dir_.File("worker" + std::to_string(n_++) + ".sh");
    std::ofstream(path) << "#!/bin/sh\n" << body << "\n";
    ::chmod(path.c_str(), 0755);
    return path;
  }
  absl::StatusOr<CompiledModule> Run(const std::string& worker, CompileLimits limits = {}) {
    return CompileInSandbox(worker, "/db/file", "/artifacts", "job-7", limits);
  }
  storage::testing::TempDir dir_;
  int n_ = 0;
};

const std::string kSha(64, 'a');

TEST_F(CompileSandboxTest, ReadsTheModuleTheWorkerStored) {
  // The worker is started as `BINARY compile-worker --db F --artifacts D --job ID ...`.
  auto m = Run(Worker(
      "[ \"$1 $2 $3 $4 $5 $6 $7\" = 'compile-worker --db /db/file --artifacts /artifacts --job "
      "job-7' ] || exit 9\necho module " +
      kSha + " 1234 5 3"));
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->sha256, kSha);
  EXPECT_EQ(m->size, 1234);
  EXPECT_EQ(m->report.kernels, 5);
  EXPECT_EQ(m->report.tuned_kernels, 3);
}

TEST_F(CompileSandboxTest, TheCompilersErrorKeepsItsCode) {
  auto m = Run(Worker("echo 'error 3 unsupported dtype undefined of tensor w'; exit 1"));
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(m.status().message(), "unsupported dtype undefined of tensor w");
}

TEST_F(CompileSandboxTest, ACrashIsAnErrorNamingTheSignalAndTheLastWords) {
  auto m = Run(Worker("echo 'LLVM ERROR: out of luck' >&2; kill -SEGV $$"));
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInternal);
  EXPECT_NE(m.status().message().find("the compiler crashed (signal 11"), std::string::npos)
      << m.status();
  EXPECT_NE(m.status().message().find("LLVM ERROR: out of luck"), std::string::npos) << m.status();
}

TEST_F(CompileSandboxTest, AWorkerPastItsTimeLimitIsKilled) {
  CompileLimits limits;
  limits.timeout_ms = 300;
  auto m = Run(Worker("exec sleep 60"), limits);
  EXPECT_EQ(m.status().code(), absl::StatusCode::kDeadlineExceeded) << m.status();
}

TEST_F(CompileSandboxTest, TheWorkerRunsUnderTheMemoryLimit) {
  CompileLimits limits;
  limits.memory_bytes = int64_t{1} << 30;
  auto m = Run(Worker("[ \"$(ulimit -v)\" = 1048576 ] || { echo \"ulimit $(ulimit -v)\" >&2; "
                      "exit 4; }\necho module " +
                      kSha + " 1 1 0"),
               limits);
  EXPECT_TRUE(m.ok()) << m.status();
}

TEST_F(CompileSandboxTest, AnswerThatIsNeitherIsAnError) {
  auto m = Run(Worker("echo something else; exit 0"));
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInternal);
  EXPECT_NE(m.status().message().find("no result"), std::string::npos) << m.status();
  m = Run(Worker("echo module not-a-sha 1 1 1"));
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInternal);
}

// A log database that cannot be read fails the compile (it once gave a
// module of default configs, which the job then returned as its tuned one).
TEST(CompileWithBestRecordsTest, AnUnreadableLogIsAnError) {
  storage::testing::TempDir dir;
  const std::string path = dir.File("log.db");
  auto db = storage::TuningDb::Open(path);
  ASSERT_TRUE(db.ok()) << db.status();
  auto model = compiler::Model::FromOnnx(testing::ConvReluModel());
  ASSERT_TRUE(model.ok()) << model.status();
  const compiler::Target host = compiler::Target::Host();
  compiler::CompileReport report;
  auto readable = CompileWithBestRecords(**db, *model, host, {}, &report, {});
  ASSERT_TRUE(readable.ok()) << readable.status();
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &raw), SQLITE_OK);
  EXPECT_EQ(sqlite3_exec(raw, "DROP TABLE records", nullptr, nullptr, nullptr), SQLITE_OK)
      << sqlite3_errmsg(raw);
  sqlite3_close(raw);
  auto unreadable = CompileWithBestRecords(**db, *model, host, {}, &report, {});
  ASSERT_FALSE(unreadable.ok());
  EXPECT_NE(unreadable.status().message().find("reading the log database"), std::string::npos)
      << unreadable.status();
}

}  // namespace
}  // namespace kiln::tracker
