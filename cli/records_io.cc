// kiln records export / import: tuning logs between log databases (another
// site's, an archive), as JSON lines (docs/user-guide.md, "Sharing logs").
#include <fstream>
#include <iostream>
#include <ostream>

#include "base/str.h"
#include "cli/common.h"
#include "storage/tuning_db.h"

namespace kiln::cli {

int RunRecordsExport(const Command& self, const std::vector<std::string>& argv, const CliEnv& env) {
  absl::StatusOr<Args> args = ParseFlags(argv, {"--db", "-o", "--output", "--farm"}, {});
  if (!args.ok()) return UsageError(self, std::string(args.status().message()), env);
  if (!args->positional.empty()) {
    return UsageError(self, StrCat("unexpected argument '", args->positional[0], "'"), env);
  }
  if (!args->values.count("--db")) return UsageError(self, "records export: missing --db", env);
  auto db = storage::TuningDb::Open(args->Get("--db"));
  if (!db.ok()) return Fail(self, std::string(db.status().message()), env);
  const std::string path = args->Get("-o", args->Get("--output"));
  const std::string farm = args->Get("--farm");
  if (path.empty() || path == "-") {
    absl::Status s = (*db)->ExportJsonl(*env.out, farm);
    return s.ok() ? 0 : Fail(self, std::string(s.message()), env);
  }
  const std::string part = path + ".part";
  {
    std::ofstream out(part, std::ios::binary | std::ios::trunc);
    if (!out) return Fail(self, StrCat("cannot write '", part, "'"), env);
    if (absl::Status s = (*db)->ExportJsonl(out, farm); !s.ok()) {
      std::remove(part.c_str());
      return Fail(self, std::string(s.message()), env);
    }
  }
  if (std::rename(part.c_str(), path.c_str()) != 0) {
    std::remove(part.c_str());
    return Fail(self, StrCat("cannot move the export to '", path, "'"), env);
  }
  *env.err << "kiln: exported the records of " << args->Get("--db") << " to " << path << "\n";
  return 0;
}

int RunRecordsImport(const Command& self, const std::vector<std::string>& argv, const CliEnv& env) {
  absl::StatusOr<Args> args = ParseFlags(argv, {"--db", "--farm"}, {});
  if (!args.ok()) return UsageError(self, std::string(args.status().message()), env);
  if (args->positional.empty()) {
    return UsageError(self, "records import: expected one or more FILE.jsonl", env);
  }
  if (!args->values.count("--db")) return UsageError(self, "records import: missing --db", env);
  auto db = storage::TuningDb::Open(args->Get("--db"));
  if (!db.ok()) return Fail(self, std::string(db.status().message()), env);
  for (const std::string& path : args->positional) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return Fail(self, StrCat("cannot open '", path, "'"), env);
    // Lines without a farm are named after --farm, else the file.
    const std::string farm = args->Get("--farm", path);
    absl::StatusOr<int64_t> added = (*db)->ImportJsonl(in, farm);
    if (!added.ok()) return Fail(self, StrCat(path, ": ", added.status().message()), env);
    *env.out << path << ": " << *added << " records added (the others were already there)\n";
  }
  return 0;
}

}  // namespace kiln::cli
