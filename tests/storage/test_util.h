#pragma once
// A temporary folder removed at the end of a test, and the databases a test
// opens: SQLite files in the folder, or, when the suite runs against
// PostgreSQL (KILN_TEST_ENGINE=postgresql; ctest's `pg.` tests), fresh
// databases on the server at KILN_TEST_POSTGRES (scripts/test starts one),
// dropped at the end of the test.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>

#include "storage/database.h"
#include "storage/stores.h"

namespace kiln::storage::testing {

// Whether this run is the PostgreSQL one, and the server's URI without a
// database name ("" when none is configured).
inline bool OnPostgres() {
  const char* engine = std::getenv("KILN_TEST_ENGINE");
  return engine != nullptr && std::string(engine) == "postgresql";
}
inline std::string PostgresServer() {
  const char* url = std::getenv("KILN_TEST_POSTGRES");
  return url != nullptr ? url : "";
}

// The PostgreSQL run skips every test, visibly, without a server (a skip
// in the environment prints no "[  SKIPPED ]" line, which is what ctest
// looks for: printed here).
class EngineEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    if (OnPostgres() && PostgresServer().empty()) {
      std::printf(
          "[  SKIPPED ] KILN_TEST_POSTGRES is not set: no PostgreSQL server for this "
          "run (scripts/test starts one)\n");
      GTEST_SKIP();
    }
  }
};

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "kiln-storage-XXXXXX").string();
    char* p = ::mkdtemp(tmpl.data());
    if (p != nullptr) path_ = p;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
    if (databases_.empty()) return;
    auto admin = Database::Open(PostgresServer() + "/postgres");
    if (!admin.ok()) return;
    for (const auto& [name, db] : databases_) {
      (void)(*admin)->Exec("DROP DATABASE IF EXISTS " + db + " WITH (FORCE)");
    }
  }
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

  // The database a test knows as `name`: the same one each time it asks.
  std::string DbUrl(const std::string& name) {
    if (!OnPostgres()) return File(name);
    auto it = databases_.find(name);
    if (it == databases_.end()) {
      std::string db = "kiln_test_" + std::to_string(::getpid()) + "_" +
                       std::to_string(databases_.size()) + "_" + path_.substr(path_.size() - 6);
      for (char& c : db) c = std::isalnum(static_cast<unsigned char>(c)) ? std::tolower(c) : '_';
      auto admin = Database::Open(PostgresServer() + "/postgres");
      EXPECT_TRUE(admin.ok()) << admin.status();
      if (admin.ok()) {
        absl::Status s = (*admin)->Exec("CREATE DATABASE " + db);
        EXPECT_TRUE(s.ok()) << s;
      }
      it = databases_.emplace(name, db).first;
    }
    return PostgresServer() + "/" + it->second;
  }

 private:
  std::string path_;
  std::map<std::string, std::string> databases_;  // name -> PostgreSQL database
};

// A job row with every field filled.
inline JobRow TestJob(const std::string& id, int64_t created, JobState state = JobState::kQueued) {
  JobRow j;
  j.id = id;
  j.model_name = "resnet";
  j.model_sha256 = std::string(64, 'a');
  j.device_key = "x86";
  j.target = "llvm";
  j.state = state;
  j.trials = 100;
  j.options_json = R"({"number":3})";
  j.created_unix_ms = created;
  j.updated_unix_ms = created;
  return j;
}

// A record of workload wk1 on one target, of job-1, agent-a.
inline RecordRow TestRecord(const std::string& config, double mean,
                            ErrorKind error_kind = ErrorKind::kNone) {
  RecordRow r;
  r.workload_key = "wk1";
  r.target = "llvm -mcpu=skylake";
  r.config = config;
  r.error_kind = error_kind;
  if (r.error_kind == ErrorKind::kNone) {
    r.costs_s = {mean * 0.9, mean * 1.1};
    r.mean_cost_s = mean;
  } else {
    r.error_message = "boom";
  }
  r.compiler_version = "0.1.0";
  r.agent_id = "agent-a";
  r.job_id = "job-1";
  r.unix_ms = 1000;
  return r;
}

// The tuning database and the farm store at `url`, or nulls (and a test
// failure).
inline Stores OpenOrDie(const std::string& url) {
  auto db = OpenStores(url);
  EXPECT_TRUE(db.ok()) << db.status();
  return db.ok() ? std::move(*db) : Stores{};
}

}  // namespace kiln::storage::testing
