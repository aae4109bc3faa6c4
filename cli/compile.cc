// kiln compile MODEL --db DB -o PATH [--target SPEC] [--input-shape NAME=DIMS]...
//              [--max-elements N] [--signing-key FILE]
// [--dump-ir]: a local compile with the best records of a log database. A
// model saved with external data finds its files beside it.
#include <filesystem>
#include <fstream>
#include <optional>
#include <ostream>

#include "base/str.h"
#include "cli/common.h"
#include "compiler/artifact_signing.h"
#include "compiler/config.h"
#include "compiler/model.h"
#include "compiler/target.h"
#include "deploy/tensor_io.h"
#include "storage/tuning_db.h"
#include "tuner/history.h"

namespace kiln::cli {

absl::StatusOr<compiler::ImportOptions> ImportOptionsFromArgs(const Args& args) {
  compiler::ImportOptions import;
  for (const std::string& shape : args.All("--input-shape")) {
    if (absl::Status st = compiler::ParseInputShape(shape, &import.input_shapes); !st.ok()) {
      return absl::InvalidArgumentError(st.message());
    }
  }
  if (args.values.count("--max-elements")) {
    int64_t n = 0;
    if (!ParseInt64(args.Get("--max-elements"), &n) || n <= 0 || n > (int64_t{1} << 32)) {
      return absl::InvalidArgumentError("--max-elements must be in 1..4294967296");
    }
    import.max_elements = n;
  }
  if (args.values.count("--precision")) {
    absl::StatusOr<compiler::Precision> p = compiler::ParsePrecision(args.Get("--precision"));
    if (!p.ok()) return p.status();
    import.precision = *p;
  }
  // External data files live beside the model (and nowhere else).
  std::filesystem::path model_path(args.positional[0]);
  import.external_data_dir =
      model_path.has_parent_path() ? model_path.parent_path().string() : std::string(".");
  return import;
}

int CompileToFile(const Command& self, const std::string& model_path, const compiler::Model& model,
                  const compiler::Target& target, storage::TuningDb& db, const std::string& path,
                  bool dump_ir, const CliEnv& env, const std::string& signing_key) {
  const std::string spec = target.Spec();
  absl::Status lookup_error;
  compiler::ConfigLookup lookup =
      [&](const compiler::Workload& w) -> std::optional<compiler::Config> {
    int skipped = 0;
    auto best = tuner::BestValidConfig(db, w, target, &skipped);
    if (!best.ok()) {
      if (lookup_error.ok()) lookup_error = best.status();
      return std::nullopt;
    }
    if (skipped > 0) {
      *env.err << "kiln: " << self.name << ": " << w.Key() << ": passed over " << skipped
               << " record(s) whose config this compiler's template does not accept (an older "
                  "compiler's knobs?)"
               << (best->has_value() ? "" : "; using the default config") << "\n";
    }
    return *best;
  };
  compiler::CompileOptions options;
  options.lower.dump_ir = dump_ir;
  compiler::CompileReport report;
  absl::StatusOr<std::string> artifact =
      compiler::CompileModel(model, target, lookup, options, &report);
  if (!lookup_error.ok()) {
    return Fail(self, StrCat("reading the log database: ", lookup_error.message()), env);
  }
  if (!artifact.ok()) return Fail(self, std::string(artifact.status().message()), env);
  std::string signed_by;
  if (!signing_key.empty()) {
    absl::StatusOr<compiler::SigningKey> key = compiler::SigningKey::Load(signing_key);
    if (!key.ok()) return Fail(self, std::string(key.status().message()), env);
    if (absl::Status st = compiler::SignArtifact(&*artifact, *key); !st.ok()) {
      return Fail(self, StrCat("signing the artifact: ", st.message()), env);
    }
    signed_by = StrCat(", signed by ", key->Fingerprint());
  }

  const std::string part = path + ".part";
  {
    std::ofstream out(part, std::ios::binary | std::ios::trunc);
    out.write(artifact->data(), static_cast<std::streamsize>(artifact->size()));
    if (!out) {
      std::error_code ec;
      std::filesystem::remove(part, ec);
      return Fail(self, StrCat("cannot write '", path, "'"), env);
    }
  }
  std::error_code ec;
  std::filesystem::rename(part, path, ec);
  if (ec) return Fail(self, StrCat("cannot write '", path, "': ", ec.message()), env);
  *env.out << "compiled " << model_path << " for " << spec << ": " << report.kernels << " kernels, "
           << report.tuned_kernels << " tuned, " << report.kernels - report.tuned_kernels
           << " default -> " << path << " (" << artifact->size() << " bytes" << signed_by << ")\n";
  return 0;
}

int RunCompile(const Command& self, const std::vector<std::string>& argv, const CliEnv& env) {
  absl::StatusOr<Args> args =
      ParseFlags(argv,
                 {"--db", "-o", "--output", "--target", "--input-shape", "--max-elements",
                  "--signing-key", "--precision", "--accuracy-input"},
                 {"--dump-ir"});
  if (!args.ok()) return UsageError(self, std::string(args.status().message()), env);
  if (args->positional.size() != 1) return UsageError(self, "expected one MODEL file", env);
  if (!args->values.count("--db")) return UsageError(self, "missing --db", env);
  std::string path = args->Get("-o", args->Get("--output"));
  if (path.empty()) return UsageError(self, "missing -o PATH", env);

  compiler::Target target = compiler::Target::Host();
  if (args->values.count("--target")) {
    absl::StatusOr<compiler::Target> t = compiler::Target::Parse(args->Get("--target"));
    if (!t.ok()) return Fail(self, std::string(t.status().message()), env);
    target = *t;
  }
  absl::StatusOr<compiler::ImportOptions> import = ImportOptionsFromArgs(*args);
  if (!import.ok()) return UsageError(self, std::string(import.status().message()), env);
  import->SetTarget(target);
  absl::StatusOr<compiler::Model> model =
      compiler::Model::FromOnnxFile(args->positional[0], *import);
  if (!model.ok()) return Fail(self, std::string(model.status().message()), env);
  absl::StatusOr<std::unique_ptr<storage::TuningDb>> db =
      storage::TuningDb::Open(args->Get("--db"));
  if (!db.ok()) return Fail(self, std::string(db.status().message()), env);
  const std::vector<std::string> accuracy_inputs = args->All("--accuracy-input");
  if (!accuracy_inputs.empty() && import->precision == compiler::Precision::kFloat32) {
    return UsageError(self, "--accuracy-input compares a --precision bf16 build with float32", env);
  }
  const int rc = CompileToFile(self, args->positional[0], *model, target, **db, path,
                               args->bools.count("--dump-ir") > 0, env, args->Get("--signing-key"));
  if (rc != 0 || import->precision == compiler::Precision::kFloat32) return rc;
  const std::string precision = compiler::PrecisionName(import->precision);
  if (accuracy_inputs.empty()) {
    *env.err << "kiln: compile: " << precision
             << " products lose accuracy against float32: compare on your inputs with "
                "--accuracy-input NAME=FILE before you deploy\n";
    return 0;
  }
  // The float32 build (default configs: they change no result beyond the
  // order of sums) beside the one just written, on the user's inputs.
  compiler::ImportOptions fp32_import = *import;
  fp32_import.precision = compiler::Precision::kFloat32;
  absl::StatusOr<compiler::Model> fp32_model =
      compiler::Model::FromOnnxFile(args->positional[0], fp32_import);
  if (!fp32_model.ok()) return Fail(self, std::string(fp32_model.status().message()), env);
  absl::StatusOr<std::string> fp32 = compiler::CompileModel(*fp32_model, target, nullptr);
  if (!fp32.ok()) return Fail(self, StrCat("the float32 build: ", fp32.status().message()), env);
  absl::StatusOr<std::string> reduced = deploy::ReadFileBytes(path);
  if (!reduced.ok()) return Fail(self, std::string(reduced.status().message()), env);
  absl::StatusOr<std::string> report =
      CompareWithFloat32(*reduced, *fp32, precision, accuracy_inputs);
  if (!report.ok()) {
    return Fail(self, StrCat("--accuracy-input: ", report.status().message()), env);
  }
  *env.out << *report;
  return 0;
}

}  // namespace kiln::cli
