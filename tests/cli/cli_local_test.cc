// The kiln CLI's local tools driven in-process: compile (bf16, input shapes,
// external data), records export and import, tune --local, report.
#include "cli/cli.h"
#include "tests/cli/cli_test_util.h"

namespace kiln::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

std::string MatMulModel() {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name("linear");
  auto* in = g->add_input();
  in->set_name("x");
  auto* tt = in->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(onnx::TensorProto::FLOAT);
  tt->mutable_shape()->add_dim()->set_dim_value(3);
  tt->mutable_shape()->add_dim()->set_dim_value(40);
  auto* w = g->add_initializer();
  w->set_name("w");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(40);
  w->add_dims(24);
  for (int i = 0; i < 40 * 24; ++i) w->add_float_data(0.001f * static_cast<float>((i * 37) % 997));
  auto* n = g->add_node();
  n->set_op_type("MatMul");
  n->add_input("x");
  n->add_input("w");
  n->add_output("y");
  g->add_output()->set_name("y");
  g->mutable_output(0)->mutable_type()->mutable_tensor_type()->set_elem_type(
      onnx::TensorProto::FLOAT);
  return m.SerializeAsString();
}

// --precision bf16 builds the products in bfloat16 and, given the user's
// inputs, prints the accuracy against the float32 build; without them it
// says to check. fp16, a precision not built, and --accuracy-input without
// a reduced precision are refused.
TEST_F(CliWithTracker, CompileInBf16ReportsItsAccuracy) {
  const std::string model = WriteFile("linear.onnx", MatMulModel());
  const std::string db = (dir_ / "log.db").string();
  const std::string out = (dir_ / "linear.kiln").string();
  std::vector<float> x(3 * 40);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.37f * static_cast<float>(i % 11) - 1.3f;
  const std::string npy = deploy::SerializeNpy(deploy::MakeTensor("x", {3, 40}, x));
  const std::string input = WriteFile("x.npy", npy);
  CliRun r = Kiln({"compile", model, "--db", db, "-o", out, "--precision", "bf16",
                   "--accuracy-input", "x=" + input});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("accuracy of bf16 against float32 on the given inputs:"));
  EXPECT_THAT(r.out, HasSubstr("output 'y' 3x24: max abs error "));
  EXPECT_THAT(r.out, HasSubstr("top-1 (argmax of the last axis) agrees in "));
  EXPECT_THAT(r.out, Not(HasSubstr("max abs error 0 ")));  // bfloat16 rounds
  r = Kiln({"compile", model, "--db", db, "-o", out, "--precision", "bf16"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("compare on your inputs with --accuracy-input"));
  r = Kiln({"compile", model, "--db", db, "-o", out, "--precision", "fp16"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("precision 'fp16' is not supported yet"));
  r = Kiln({"compile", model, "--db", db, "-o", out, "--accuracy-input", input});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("--accuracy-input compares a --precision bf16 build"));
  r = Kiln({"compile", model, "--db", db, "-o", out, "--precision", "bf16", "--accuracy-input",
            "z=" + input});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("expected NAME=FILE with NAME one of the model's inputs (x)"));
}

TEST_F(CliWithTracker, CompileSpecializesInputShapesAndReadsExternalData) {
  std::filesystem::create_directories(dir_ / "ext");
  WriteFile("ext/w.bin", std::string(16, '\0'));
  std::string model = WriteFile("ext/m.onnx", OnnxModel("w.bin"));
  std::string db = (dir_ / "log.db").string();
  std::string out = (dir_ / "m.kiln").string();
  CliRun r = Kiln({"compile", model, "--db", db, "-o", out});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err,
            "kiln: compile: input 'x' [batch,4]: dimension 0 ('batch') is unknown; give the "
            "input's shape with --input-shape x=DIMS\n");
  EXPECT_FALSE(std::filesystem::exists(out));
  r = Kiln({"compile", model, "--db", db, "-o", out, "--input-shape", "x=3x5"});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("dimension 1 of input 'x' [batch,4] is 4, not 5"));
  r = Kiln({"compile", model, "--db", db, "-o", out, "--input-shape", "x=3x4", "--input-shape",
            "y=3x4"});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("input shape y=3x4 names no input of the model"));
  r = Kiln({"compile", model, "--db", db, "-o", out, "--input-shape", "x=3x4"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(std::filesystem::exists(out));
  // Signed with a key of one's own: the header names it (scheme 1, then
  // its public key); a key file that is not one is refused.
  bool created = false;
  const std::string key_path = (dir_ / "own-key.pem").string();
  auto key = compiler::SigningKey::LoadOrCreate(key_path, &created);
  ASSERT_TRUE(key.ok()) << key.status();
  r = Kiln({"compile", model, "--db", db, "-o", out, "--input-shape", "x=3x4", "--signing-key",
            key_path});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("signed by " + key->Fingerprint()));
  {
    std::ifstream in(out, std::ios::binary);
    std::string art((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    ASSERT_GE(art.size(), 152u);
    EXPECT_EQ(art[48], 1);
    EXPECT_EQ(art.substr(56, 32), key->PublicKeyRaw());
  }
  r = Kiln({"compile", model, "--db", db, "-o", out, "--input-shape", "x=3x4", "--signing-key",
            (dir_ / "no-such-key.pem").string()});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("no signing key at"));
  // The element limit is the user's setting: [3,4] has 12 elements.
  r = Kiln(
      {"compile", model, "--db", db, "-o", out, "--input-shape", "x=3x4", "--max-elements", "8"});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("more than 8 elements"));
  r = Kiln({"compile", model, "--db", db, "-o", out, "--max-elements", "0"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("--max-elements must be in 1..4294967296"));
  // External data must stay in the model's folder.
  std::string escaping = WriteFile("ext/m2.onnx", OnnxModel("../log.db"));
  r = Kiln({"compile", escaping, "--db", db, "-o", out, "--input-shape", "x=3x4"});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("leaves the model's folder"));
}

// kiln records export / import: the records of one site's database into
// another's, the farm named, duplicates merged; a bad file changes nothing.
TEST_F(CliWithTracker, RecordsTravelBetweenDatabases) {
  const std::string a = (dir_ / "site-a.db").string(), b = (dir_ / "site-b.db").string();
  {
    auto db = storage::TuningDb::Open(a);
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE((*db)->UpsertWorkload({"wk1", "dense", "dense", 1}).ok());
    for (int i = 1; i <= 3; ++i) {
      storage::RecordRow r;
      r.workload_key = "wk1";
      r.target = "llvm -mtriple=x86_64-pc-linux-gnu -mcpu=znver5";
      r.config = StrCat("t=", i);
      r.costs_s = {1e-3 * i};
      r.mean_cost_s = 1e-3 * i;
      r.compiler_version = "0.7.0";
      r.agent_id = "a0";
      r.job_id = "job-1";
      r.unix_ms = 1700000000000 + i;
      ASSERT_TRUE((*db)->AddRecord(r).ok());
    }
  }
  const std::string file = (dir_ / "a.jsonl").string();
  CliRun r = Kiln({"records", "export", "--db", a, "-o", file, "--farm", "site-a"});
  ASSERT_EQ(r.code, 0) << r.err;
  r = Kiln({"records", "import", file, "--db", b});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr(": 3 records added"));
  r = Kiln({"records", "import", file, "--db", b});  // again: merged
  EXPECT_THAT(r.out, HasSubstr(": 0 records added"));
  auto db = storage::TuningDb::Open(b);
  ASSERT_TRUE(db.ok());
  auto rows = (*db)->QueryRecords("wk1", "", 0);
  ASSERT_EQ(rows->size(), 3u);
  for (const auto& row : *rows) {
    EXPECT_EQ(row.farm, "site-a");
    EXPECT_EQ(row.compiler_version, "0.7.0");
    EXPECT_EQ(row.target, "llvm -mtriple=x86_64-pc-linux-gnu -mcpu=znver5");
  }
  // To standard output, and errors.
  r = Kiln({"records", "export", "--db", a});
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 3);
  std::string bad = WriteFile("bad.jsonl", "{\"workload\": 1}\n");
  r = Kiln({"records", "import", bad, "--db", b});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("line 1"));
  EXPECT_EQ((*db)->QueryRecords("", "", 0)->size(), 3u);
  EXPECT_EQ(Kiln({"records", "import", "--db", b}).code, 2);
  EXPECT_EQ(Kiln({"records", "export"}).code, 2);
}

TEST_F(CliWithTracker, TuneLocalMeasuresRecordsAndCompiles) {
  std::string model = WriteFile("m.onnx", OnnxModel());
  std::string db = (dir_ / "local.db").string();
  std::string out = (dir_ / "m.kiln").string();
  CliRun r = Kiln({"tune", model, "--local", "--db", db, "-o", out, "--trials", "6",
                   "--input-shape", "x=3x4", "--strategy", "random"});
  ASSERT_EQ(r.code, 0) << r.err;
  // The model is one element-wise task whose template has 4 configs.
  EXPECT_THAT(r.err, HasSubstr("task 1/1 (eltwise): search space exhausted after 4 trials"));
  EXPECT_THAT(r.err, HasSubstr("tuning finished (every task has stopped): 4 trials"));
  EXPECT_THAT(r.out, HasSubstr("-> " + out));
  EXPECT_TRUE(std::filesystem::exists(out));
  auto log = storage::TuningDb::Open(db);
  ASSERT_TRUE(log.ok()) << log.status();
  auto records = (*log)->QueryRecords("", "", 0);
  ASSERT_TRUE(records.ok());
  ASSERT_EQ(records->size(), 4u);
  for (const auto& rec : *records) {
    EXPECT_THAT(rec.job_id, StartsWith("local-"));
    EXPECT_EQ(rec.agent_id, "local");
  }
  // Tuning again measures nothing twice: the log's configs are settled.
  r = Kiln({"tune", model, "--local", "--db", db, "-o", out, "--trials", "4", "--input-shape",
            "x=3x4", "--strategy", "random"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("tuning finished (every task has stopped): 0 trials"));
  records = (*log)->QueryRecords("", "", 0);
  ASSERT_TRUE(records.ok());
  EXPECT_EQ(records->size(), 4u);

  // The first job's report: a summary table and a plot gnuplot drew.
  const std::string job = records->back().job_id;
  std::string svg = (dir_ / "report.svg").string();
  r = Kiln({"report", job, "--db", db, "-o", svg});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("job " + job + ": 4 trials"));
  EXPECT_THAT(r.out, HasSubstr("TASK  OP       RUNS  TRIALS  ERRORS  FIRST"));
  EXPECT_THAT(r.out, HasSubstr("end-to-end estimate (sum of runs x cost): first "));
  std::ifstream in(svg);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_THAT(text, HasSubstr("<svg"));
  EXPECT_THAT(text, HasSubstr("1 eltwise x1"));  // the task's curve in the legend
  EXPECT_THAT(text, HasSubstr("end-to-end estimate (ms)"));
  r = Kiln({"report", "job-none", "--db", db, "-o", svg});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("NOT_FOUND: no job 'job-none'"));
  r = Kiln({"report", job, "--db", db, "-o", (dir_ / "report.pdf").string()});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("the plot is an .svg or a .png file"));
}

// A model name and an op from the log reach the plot and the terminal as
// data: a name that would be gnuplot commands (a newline, then system(...))
// runs nothing, and the terminal gets printable text.
TEST_F(CliWithTracker, ReportTreatsNamesAsData) {
  const std::string db = (dir_ / "hostile.db").string();
  const std::filesystem::path pwned = dir_ / "pwned";
  const std::string attack =
      "x'\nsystem(\"touch " + pwned.string() + "\")\n`touch " + pwned.string() + "`\x1b[2J";
  {
    auto log = storage::OpenStores(db);
    ASSERT_TRUE(log.ok()) << log.status();
    ASSERT_TRUE(log->tuning->UpsertWorkload({"wk1", "conv2d\"\n" + attack, "canonical", 1e9}).ok());
    storage::JobRow job;
    job.id = "job-1";
    job.model_name = attack;
    job.target = "llvm";
    ASSERT_TRUE(log->farm->CreateJob(job).ok());
    ASSERT_TRUE(log->tuning->SetJobTasks("job-1", {{"wk1", 2}}).ok());
    std::vector<storage::RecordRow> rows;
    for (int i = 0; i < 3; ++i) {
      storage::RecordRow r;
      r.workload_key = "wk1";
      r.target = "llvm";
      r.config = "c" + std::to_string(i);
      r.costs_s = {1e-3 / (i + 1)};
      r.mean_cost_s = 1e-3 / (i + 1);
      r.job_id = "job-1";
      r.unix_ms = 1000 + i;
      rows.push_back(r);
    }
    ASSERT_TRUE(log->tuning->AddRecords(rows).ok());
  }
  const std::string svg = (dir_ / "hostile.svg").string();
  CliRun r = Kiln({"report", "job-1", "--db", db, "-o", svg});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_FALSE(std::filesystem::exists(pwned));
  EXPECT_THAT(r.out, HasSubstr("job job-1 (x'\\x0asystem("));
  EXPECT_THAT(r.out, Not(HasSubstr("\x1b")));
  std::ifstream in(svg);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("<svg"), std::string::npos);
  EXPECT_NE(text.find("job-1 (x'\\x0asystem("), std::string::npos) << "the title, escaped";
  EXPECT_NE(text.find("1 conv2d'\\x0ax'"), std::string::npos) << "the curve's title, escaped";
  EXPECT_NE(text.find("end-to-end estimate (ms)"), std::string::npos);
}

}  // namespace
}  // namespace kiln::cli
