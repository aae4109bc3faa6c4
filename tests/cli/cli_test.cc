// The kiln CLI driven in-process: argument errors, an unreachable tracker,
// and the tracker subcommands against a fake Tracker service on port 0.
#include "cli/cli.h"

#include "tests/cli/cli_test_util.h"

namespace kiln::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

TEST(Cli, HelpListsSubcommands) {
  for (const char* flag : {"--help", "help"}) {
    CliRun r = Kiln({flag});
    EXPECT_EQ(r.code, 0);
    for (const char* cmd :
         {"tune", "jobs", "job", "cancel", "devices", "records", "fetch", "compile"}) {
      EXPECT_THAT(r.out, HasSubstr(std::string("  ") + cmd + " ")) << cmd;
    }
  }
}

TEST(Cli, UnknownSubcommandIsAUsageError) {
  CliRun r = Kiln({"frobnicate"});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "kiln: unknown command 'frobnicate' (see kiln help)\n");
  EXPECT_EQ(Kiln({}).code, 2);
}

TEST(Cli, MissingTrackerIsAUsageError) {
  CliRun r = Kiln({"jobs"});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "kiln: jobs: missing --tracker\nusage: kiln jobs --tracker ADDR\n");
  r = Kiln({"tune", "m.onnx", "--key", "k", "--trials", "4"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("missing --tracker"));
  r = Kiln({"fetch", "job-1", "--tracker", "h:1"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("missing -o PATH"));
}

// KILN_TRACKER (CliEnv::tracker) stands for --tracker where a command calls
// a tracker, never in the local modes.
TEST(Cli, TheEnvironmentNamesTheTracker) {
  std::ostringstream out, err;
  CliEnv env{&out, &err, std::chrono::milliseconds(5000)};
  env.tracker = "farm.example:7070";
  EXPECT_EQ(RunCli({"fetch", "job-1", "-o", "m.kiln"}, env), 1);
  EXPECT_THAT(err.str(), HasSubstr("refusing to fetch native code from farm.example:7070"));
  err.str("");
  // --tracker given wins; tune --local takes none (no "--tracker is for the
  // farm" complaint: the variable is not added).
  EXPECT_EQ(
      RunCli({"tune", "missing.onnx", "--local", "--db", "x.db", "-o", "x.kiln", "--trials", "2"},
             env),
      1);
  EXPECT_THAT(err.str(), Not(HasSubstr("is for the farm")));
}

TEST(Cli, LiveProgressShowsTheBarTheEtaTheBestAndTheTasksBeingTuned) {
  kiln::v1::Job j;
  j.set_state(kiln::v1::JOB_STATE_TUNING);
  j.set_trials(100);
  j.set_trials_done(25);
  for (int i = 0; i < 3; ++i) {
    auto* t = j.add_tasks();
    t->mutable_workload()->set_op(i == 2 ? "dense" : "conv2d");
    t->mutable_workload()->set_key(StrCat("w", i));
    t->set_trials_done(10 - i);
    t->set_best_cost_s(i == 2 ? 0 : 1e-3);
    t->set_occurrences(2);
    t->set_state(i == 0 ? "done" : "tuning");
  }
  std::string text = LiveProgress(j, 30, 20);
  EXPECT_THAT(text, StartsWith("[#####...............] 25/100 trials  30s  ETA 1m30s  best -"));
  EXPECT_THAT(text, HasSubstr("[tuning]\n"));
  EXPECT_THAT(text, Not(HasSubstr("w0")));  // done: no line
  EXPECT_THAT(text, HasSubstr("  task 2/3 conv2d w1: 9 trials, best 1.000 ms\n"));
  EXPECT_THAT(text, HasSubstr("  task 3/3 dense w2: 8 trials, best -\n"));
  j.set_estimated_latency_s(8e-3);  // the tracker's, once every task has a best
  EXPECT_THAT(LiveProgress(j, 30, 20), HasSubstr("best 8.000 ms"));
}

TEST(Cli, FetchOverPlaintextFromAnotherMachineIsRefused) {
  CliRun r = Kiln({"fetch", "job-1", "--tracker", "farm.example:7070", "-o", "m.kiln"});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("refusing to fetch native code from farm.example:7070 over an "
                               "unencrypted connection"));
  EXPECT_THAT(r.err, HasSubstr("--tls-ca"));
  EXPECT_FALSE(std::filesystem::exists("m.kiln.part"));
  // Several trackers: loopback only when every one is.
  r = Kiln({"fetch", "job-1", "--tracker", "127.0.0.1:7070,farm.example:7070", "-o", "m.kiln"});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("refusing to fetch native code"));
}

TEST(Cli, BadTrialsAndUnknownFlag) {
  CliRun r = Kiln({"tune", "m.onnx", "--tracker", "h:1", "--key", "k", "--trials", "many"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("--trials must be a positive integer, not 'many'"));
  r = Kiln({"devices", "--tracker", "h:1", "--verbose"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("unknown flag --verbose"));
}

TEST(Cli, DurationsParseAndFormat) {
  EXPECT_EQ(*ParseDuration("30m"), 1800);
  EXPECT_EQ(*ParseDuration("90s"), 90);
  EXPECT_EQ(*ParseDuration("1h30m"), 5400);
  EXPECT_EQ(*ParseDuration("2.5"), 2.5);
  EXPECT_FALSE(ParseDuration("").ok());
  EXPECT_FALSE(ParseDuration("1d").ok());
  EXPECT_FALSE(ParseDuration("m").ok());
  EXPECT_EQ(FormatDuration(5), "5s");
  EXPECT_EQ(FormatDuration(125), "2m05s");
  EXPECT_EQ(FormatDuration(3720), "1h02m");
}

TEST(Cli, LocalTuningNeedsItsOwnFlags) {
  CliRun r = Kiln({"tune", "m.onnx", "--local", "--trials", "4", "-o", "m.kiln"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("--local needs --db"));
  r = Kiln({"tune", "m.onnx", "--local", "--trials", "4", "--db", "l.db", "-o", "m.kiln",
            "--tracker", "h:1"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("--tracker is for the farm: --local measures on this machine"));
  r = Kiln({"tune", "m.onnx", "--local", "--trials", "4", "--db", "l.db", "-o", "m.kiln",
            "--strategy", "best"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("unknown search strategy 'best'"));
}

TEST(Cli, MissingModelFile) {
  CliRun r = Kiln({"tune", "/nonexistent/model.onnx", "--tracker", "127.0.0.1:1", "--key", "k",
                   "--trials", "4"});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, "kiln: tune: cannot read model file '/nonexistent/model.onnx'\n");
}

TEST(Cli, UnreachableTracker) {
  CliRun r = Kiln({"jobs", "--tracker", "127.0.0.1:1"}, std::chrono::milliseconds(300));
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, "kiln: tracker 127.0.0.1:1 does not answer\n");
  EXPECT_EQ(r.out, "");
}

// A tracker with canned answers.
TEST_F(CliWithTracker, TunePrintsJobIdFirst) {
  std::string model = WriteFile("m.onnx", OnnxModel());
  CliRun r = Kiln({"tune", model, "--tracker", addr_, "--key", "cpu", "--trials", "24"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "job-42\n");
  EXPECT_EQ(service_.last_submit.model_sha256(), kiln::Sha256Hex(OnnxModel()));
  EXPECT_EQ(service_.uploads[service_.last_submit.model_sha256()], OnnxModel());
  EXPECT_EQ(service_.last_submit.model_name(), "m.onnx");
  EXPECT_EQ(service_.last_submit.device_key(), "cpu");
  EXPECT_EQ(service_.last_submit.trials(), 24);
  EXPECT_EQ(service_.last_submit.external_data_size(), 0);
  EXPECT_EQ(service_.last_submit.input_shapes_size(), 0);
  EXPECT_EQ(service_.last_submit.strategy(), "");  // the tracker's default
  EXPECT_EQ(service_.last_submit.budget_s(), 0);
}

// By default candidates are timed with the caches as a model of the size of
// its weights (here 17 MiB, inline or as external data) leaves them: the
// request carries flush_cache and the bytes, which the agent weighs against
// its caches; --no-flush-cache times hot, --flush-cache from memory.
TEST_F(CliWithTracker, TuneSendsTheModelsBytesForTheCaches) {
  const size_t big = (size_t{17} << 20);
  std::string model = WriteFile("big.onnx", OnnxModel("", big));
  CliRun r = Kiln({"tune", model, "--tracker", addr_, "--key", "cpu", "--trials", "8"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(service_.last_submit.timing().flush_cache());
  EXPECT_GT(service_.last_submit.timing().model_bytes(), static_cast<int64_t>(big));
  EXPECT_THAT(r.err, HasSubstr("with the caches as the model's 17.8 MB of weights leave them"));
  r = Kiln(
      {"tune", model, "--tracker", addr_, "--key", "cpu", "--trials", "8", "--no-flush-cache"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_FALSE(service_.last_submit.timing().flush_cache());
  EXPECT_EQ(service_.last_submit.timing().model_bytes(), 0);
  EXPECT_THAT(r.err, Not(HasSubstr("with the caches as")));
  r = Kiln({"tune", model, "--tracker", addr_, "--key", "cpu", "--trials", "8", "--flush-cache"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(service_.last_submit.timing().flush_cache());
  EXPECT_EQ(service_.last_submit.timing().model_bytes(), 0);
  // The weights in a file beside the model count too.
  WriteFile("w.bin", std::string(big, '\0'));
  std::string external = WriteFile("ext.onnx", OnnxModel("w.bin"));
  r = Kiln({"tune", external, "--tracker", addr_, "--key", "cpu", "--trials", "8"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_GT(service_.last_submit.timing().model_bytes(), static_cast<int64_t>(big));
}

TEST_F(CliWithTracker, TuneSendsStrategyBudgetAndEarlyStopping) {
  std::string model = WriteFile("m.onnx", OnnxModel());
  CliRun r = Kiln({"tune", model, "--tracker", addr_, "--key", "cpu", "--trials", "24",
                   "--strategy", "ga", "--budget", "1h30m", "--early-stopping", "40"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(service_.last_submit.strategy(), "ga");
  EXPECT_EQ(service_.last_submit.budget_s(), 5400);
  EXPECT_EQ(service_.last_submit.early_stopping(), 40);
  r = Kiln({"tune", model, "--tracker", addr_, "--key", "cpu", "--trials", "24", "--flush-cache",
            "--no-flush-cache"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("contradict"));
  for (const char* bad : {"soon", "-5m", "10x", "1h30", ""}) {
    r = Kiln(
        {"tune", model, "--tracker", addr_, "--key", "cpu", "--trials", "24", "--budget", bad});
    EXPECT_EQ(r.code, 2) << bad;
    EXPECT_THAT(r.err, HasSubstr("--budget: '")) << bad;
  }
  r = Kiln({"tune", model, "--tracker", addr_, "--key", "cpu", "--trials", "24", "--db", "x.db"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("--db is for --local tuning"));
}

TEST_F(CliWithTracker, TuneUploadsLargeModelsInChunks) {
  const std::string bytes = OnnxModel("", (5u << 20) / 2);  // 2.5 MiB
  std::string model = WriteFile("big.onnx", bytes);
  CliRun r = Kiln({"tune", model, "--tracker", addr_, "--key", "cpu", "--trials", "4"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(service_.chunks, 3);
  EXPECT_EQ(service_.last_submit.model_sha256(), kiln::Sha256Hex(bytes));
  EXPECT_EQ(service_.uploads[kiln::Sha256Hex(bytes)], bytes);
}

TEST_F(CliWithTracker, TuneUploadsExternalDataFromTheModelsFolder) {
  std::filesystem::create_directories(dir_ / "ext" / "data");
  const std::string weights(16, '\x01');
  WriteFile("ext/data/w.bin", weights);
  std::string model = WriteFile("ext/m.onnx", OnnxModel("data/w.bin"));
  CliRun r = Kiln({"tune", model, "--tracker", addr_, "--key", "cpu", "--trials", "4"});
  EXPECT_EQ(r.code, 0) << r.err;
  ASSERT_EQ(service_.last_submit.external_data_size(), 1);
  EXPECT_EQ(service_.last_submit.external_data(0).location(), "data/w.bin");
  EXPECT_EQ(service_.last_submit.external_data(0).sha256(), kiln::Sha256Hex(weights));
  EXPECT_EQ(service_.uploads[kiln::Sha256Hex(weights)], weights);
  EXPECT_EQ(service_.uploads.size(), 2u);
}

TEST_F(CliWithTracker, TuneRefusesExternalDataOutsideTheModelsFolder) {
  std::filesystem::create_directories(dir_ / "ext");
  WriteFile("secret.bin", std::string(16, 's'));
  std::string model = WriteFile("ext/m.onnx", OnnxModel("../secret.bin"));
  CliRun r = Kiln({"tune", model, "--tracker", addr_, "--key", "cpu", "--trials", "4"});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err,
            "kiln: tune: external data location '../secret.bin' leaves the model's folder\n");
  EXPECT_TRUE(service_.uploads.empty());
  model = WriteFile("ext/m2.onnx", OnnxModel("missing.bin"));
  r = Kiln({"tune", model, "--tracker", addr_, "--key", "cpu", "--trials", "4"});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("uploading external data 'missing.bin': NOT_FOUND: cannot read"));
}

TEST_F(CliWithTracker, TuneSendsInputShapes) {
  std::string model = WriteFile("m.onnx", OnnxModel());
  CliRun r = Kiln({"tune", model, "--tracker", addr_, "--key", "cpu", "--trials", "4",
                   "--input-shape", "x=2x4", "--input-shape=mask=1"});
  EXPECT_EQ(r.code, 0) << r.err;
  ASSERT_EQ(service_.last_submit.input_shapes_size(), 2);
  EXPECT_EQ(service_.last_submit.input_shapes(0).name(), "mask");
  EXPECT_THAT(service_.last_submit.input_shapes(0).dims(), ::testing::ElementsAre(1));
  EXPECT_EQ(service_.last_submit.input_shapes(1).name(), "x");
  EXPECT_THAT(service_.last_submit.input_shapes(1).dims(), ::testing::ElementsAre(2, 4));
  r = Kiln({"tune", model, "--tracker", addr_, "--key", "cpu", "--trials", "4", "--input-shape",
            "x=2by4"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("--input-shape x: shape '2by4' is not positive integers"));
}

TEST_F(CliWithTracker, TuneReportsAnUploadTheTrackerRefuses) {
  service_.max_upload = 1000;
  std::string model = WriteFile("big.onnx", OnnxModel("", 4000));
  CliRun r = Kiln({"tune", model, "--tracker", addr_, "--key", "cpu", "--trials", "4"});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, "kiln: tune: RESOURCE_EXHAUSTED: the model is too large\n");
  EXPECT_EQ(r.out, "");
}

TEST_F(CliWithTracker, TuneWaitPrintsProgressAndSucceeds) {
  std::string model = WriteFile("m.onnx", OnnxModel());
  CliRun r = Kiln({"tune", model, "--tracker", addr_, "--key", "cpu", "--trials", "24", "--wait"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out,
            "job-42\n"
            "[tuning] 12/24 trials, 1m05s of 30m00s: task 1/2 (dense): 12 trials, best 0.123 "
            "ms, 0 errors\n"
            "[completed] 24/24 trials, 2m10s of 30m00s: done\n");
}

TEST_F(CliWithTracker, TuneWaitFailsOnFailedJob) {
  std::string model = WriteFile("m.onnx", OnnxModel());
  CliRun r =
      Kiln({"tune", model, "--tracker", addr_, "--key", "failing", "--trials", "24", "--wait"});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.out, StartsWith("job-fail\n"));
  EXPECT_THAT(r.err,
              HasSubstr("kiln: tune: job job-fail ended failed: no agent with key 'failing'"));
}

TEST_F(CliWithTracker, RpcErrorsNameTheCode) {
  std::string model = WriteFile("m.onnx", OnnxModel());
  CliRun r = Kiln({"tune", model, "--tracker", addr_, "--key", "nobody", "--trials", "4"});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err,
            "kiln: tune: FAILED_PRECONDITION: no agent with key nobody has connected; pass a "
            "target\n");
  // Bytes that are not ONNX are refused before anything is uploaded.
  std::string bad = WriteFile("bad.onnx", "not onnx at all");
  r = Kiln({"tune", bad, "--tracker", addr_, "--key", "cpu", "--trials", "4"});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, "kiln: tune: INVALID_ARGUMENT: not an ONNX model: '" + bad +
                       "' does not parse as a ModelProto\n");
  EXPECT_EQ(service_.uploads.size(), 1u);
  r = Kiln({"job", "job-7", "--tracker", addr_});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, "kiln: job: NOT_FOUND: no job 'job-7'\n");
  r = Kiln({"devices", "--tracker", addr_});  // not implemented by the fake
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, StartsWith("kiln: devices: UNIMPLEMENTED"));
}

TEST_F(CliWithTracker, JobsTable) {
  CliRun r = Kiln({"jobs", "--tracker", addr_});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out,
            "ID      MODEL     KEY  STATE   TRIALS\n"
            "job-42  cnn.onnx  cpu  tuning  10/64\n");
}

TEST_F(CliWithTracker, FetchWritesVerifiedArtifact) {
  std::string out = (dir_ / "a.kiln").string();
  CliRun r = Kiln({"fetch", "job-42", "--tracker", addr_, "-o", out});
  EXPECT_EQ(r.code, 0) << r.err;
  std::ifstream in(out, std::ios::binary);
  std::stringstream got;
  got << in.rdbuf();
  EXPECT_EQ(got.str(), service_.artifact);
  EXPECT_FALSE(std::filesystem::exists(out + ".part"));
}

TEST_F(CliWithTracker, FetchChecksumMismatchLeavesNoFile) {
  std::string out = (dir_ / "b.kiln").string();
  CliRun r = Kiln({"fetch", "job-corrupt", "--tracker", addr_, "-o", out});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("kiln: fetch: checksum mismatch: received sha256 " +
                               service_.artifact_sha + ", expected " + std::string(64, '0')));
  EXPECT_FALSE(std::filesystem::exists(out));
  EXPECT_FALSE(std::filesystem::exists(out + ".part"));
}

TEST_F(CliWithTracker, FetchUnknownJob) {
  std::string out = (dir_ / "c.kiln").string();
  CliRun r = Kiln({"fetch", "job-missing", "--tracker", addr_, "-o", out});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, "kiln: fetch: NOT_FOUND: no job 'job-missing'\n");
  EXPECT_FALSE(std::filesystem::exists(out));
  EXPECT_FALSE(std::filesystem::exists(out + ".part"));
}

// x [3, 40] times constant weights [40, 24] (a Linear layer), whose values
// bfloat16 does not hold exactly.
}  // namespace
}  // namespace kiln::cli
