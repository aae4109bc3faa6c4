// The tuning database's JSON lines export and import (`kiln records export` /
// `import`): one record per line with its workload, so that logs travel
// between databases; duplicates are skipped on import.
#include <algorithm>
#include <istream>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/str.h"
#include "nlohmann/json.hpp"
#include "storage/connection.h"
#include "storage/database.h"
#include "storage/record_rows.h"
#include "storage/tuning_db.h"

namespace kiln::storage {
namespace {

using rows::AttachCosts;
using rows::CheckImported;
using rows::InsertRecord;
using rows::kRecordColumns;
using rows::ReadRecord;

// One parsed line of an import.
struct ImportedRecord {
  std::optional<WorkloadRow> workload;  // absent when the line has only the key
  RecordRow record;
};

// A member of a JSON object of the expected type; INVALID_ARGUMENT naming the
// key when it is missing or of another type.
absl::StatusOr<const nlohmann::json*> Member(const nlohmann::json& object, const char* key,
                                             nlohmann::json::value_t type) {
  auto it = object.find(key);
  if (it == object.end()) return absl::InvalidArgumentError(StrCat("missing \"", key, "\""));
  const bool number = type == nlohmann::json::value_t::number_float;
  if (number ? !it->is_number() : it->type() != type) {
    return absl::InvalidArgumentError(StrCat("\"", key, "\" has the wrong type"));
  }
  return &*it;
}

absl::StatusOr<ImportedRecord> ParseRecordLine(std::string_view line) {
  using T = nlohmann::json::value_t;
  const nlohmann::json json = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) return absl::InvalidArgumentError("not JSON");
  if (!json.is_object()) return absl::InvalidArgumentError("not a JSON object");
  auto text = [](const nlohmann::json& o, const char* key) -> absl::StatusOr<std::string> {
    KILN_STORAGE_ASSIGN_OR_RETURN(v, Member(o, key, T::string));
    return v->get<std::string>();
  };
  auto number = [](const nlohmann::json& o, const char* key) -> absl::StatusOr<double> {
    KILN_STORAGE_ASSIGN_OR_RETURN(v, Member(o, key, T::number_float));
    return v->get<double>();
  };
  KILN_STORAGE_ASSIGN_OR_RETURN(workload, Member(json, "workload", T::object));
  ImportedRecord out;
  RecordRow& r = out.record;
  KILN_STORAGE_ASSIGN_OR_RETURN(key, text(*workload, "key"));
  r.workload_key = key;
  if (workload->contains("op")) {
    WorkloadRow w;
    w.key = key;
    KILN_STORAGE_ASSIGN_OR_RETURN(op, text(*workload, "op"));
    KILN_STORAGE_ASSIGN_OR_RETURN(canonical, text(*workload, "canonical"));
    KILN_STORAGE_ASSIGN_OR_RETURN(flops, number(*workload, "flops"));
    w.op = op;
    w.canonical = canonical;
    w.flops = flops;
    out.workload = std::move(w);
  }
  KILN_STORAGE_ASSIGN_OR_RETURN(target, text(json, "target"));
  KILN_STORAGE_ASSIGN_OR_RETURN(config, text(json, "config"));
  KILN_STORAGE_ASSIGN_OR_RETURN(error_kind, text(json, "error_kind"));
  KILN_STORAGE_ASSIGN_OR_RETURN(error_message, text(json, "error_message"));
  KILN_STORAGE_ASSIGN_OR_RETURN(mean, number(json, "mean_cost_s"));
  KILN_STORAGE_ASSIGN_OR_RETURN(compiler_version, text(json, "compiler_version"));
  KILN_STORAGE_ASSIGN_OR_RETURN(agent_id, text(json, "agent_id"));
  KILN_STORAGE_ASSIGN_OR_RETURN(job_id, text(json, "job_id"));
  KILN_STORAGE_ASSIGN_OR_RETURN(unix_ms, Member(json, "unix_ms", T::number_float));
  if (!unix_ms->is_number_integer()) {
    return absl::InvalidArgumentError("\"unix_ms\" is not an integer");
  }
  r.target = target;
  r.config = config;
  std::optional<ErrorKind> kind = ParseErrorKind(error_kind);
  if (!kind.has_value()) {
    return absl::InvalidArgumentError(StrCat("unknown error kind '", error_kind, "'"));
  }
  r.error_kind = *kind;
  r.error_message = error_message;
  r.mean_cost_s = mean;
  r.compiler_version = compiler_version;
  r.agent_id = agent_id;
  r.job_id = job_id;
  r.unix_ms = unix_ms->get<int64_t>();
  if (json.contains("farm")) {  // absent in exports before schema 4
    KILN_STORAGE_ASSIGN_OR_RETURN(farm, text(json, "farm"));
    r.farm = farm;
  }
  if (json.contains("owner")) {  // absent in exports before schema 6
    KILN_STORAGE_ASSIGN_OR_RETURN(owner, text(json, "owner"));
    r.owner = owner;
  }
  if (json.contains("cut_short")) {  // absent in exports before schema 9
    KILN_STORAGE_ASSIGN_OR_RETURN(cut, Member(json, "cut_short", T::boolean));
    r.cut_short = cut->get<bool>();
  }
  KILN_STORAGE_ASSIGN_OR_RETURN(costs, Member(json, "costs_s", T::array));
  for (const nlohmann::json& c : *costs) {
    if (!c.is_number()) return absl::InvalidArgumentError("\"costs_s\" holds a non-number");
    r.costs_s.push_back(c.get<double>());
  }
  KILN_STORAGE_RETURN_IF_ERROR(CheckImported(r));
  return out;
}

}  // namespace

// -------------------------------------------------------------- JSON lines

absl::Status TuningDb::ExportJsonl(std::ostream& out, const std::string& farm) {
  std::lock_guard<std::mutex> lock(c_->mu);
  std::string columns;
  for (std::string_view c : StrSplit(kRecordColumns, ',')) {
    while (!c.empty() && c.front() == ' ') c.remove_prefix(1);
    columns += StrCat(columns.empty() ? "" : ", ", "r.", c);
  }
  KILN_STORAGE_ASSIGN_OR_RETURN(
      st, c_->db->Prepare(
              StrCat("SELECT ", columns,
                     ", CASE WHEN w.key IS NULL THEN 0 ELSE 1 END, w.op, w.canonical, w.flops "
                     "FROM records r "
                     "LEFT JOIN workloads w ON w.key = r.workload_key ORDER BY r.id")));
  // A chunk of records at a time: their costs are read together.
  std::vector<RecordRow> chunk;
  std::vector<nlohmann::json> workloads;
  auto write = [&]() -> absl::Status {
    KILN_STORAGE_RETURN_IF_ERROR(AttachCosts(*c_->db, chunk));
    for (size_t i = 0; i < chunk.size(); ++i) {
      const RecordRow& r = chunk[i];
      const nlohmann::json line = {{"workload", std::move(workloads[i])},
                                   {"target", r.target},
                                   {"config", r.config},
                                   {"error_kind", std::string(ErrorKindName(r.error_kind))},
                                   {"error_message", r.error_message},
                                   {"costs_s", r.costs_s},
                                   {"mean_cost_s", r.mean_cost_s},
                                   {"compiler_version", r.compiler_version},
                                   {"agent_id", r.agent_id},
                                   {"job_id", r.job_id},
                                   {"unix_ms", r.unix_ms},
                                   {"farm", r.farm.empty() ? farm : r.farm},
                                   {"owner", r.owner},
                                   {"cut_short", r.cut_short}};
      // Invalid UTF-8 in a message is replaced rather than failing the export.
      out << line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
      if (!out) return absl::DataLossError("writing the JSON lines export failed");
    }
    chunk.clear();
    workloads.clear();
    return absl::OkStatus();
  };
  while (true) {
    KILN_STORAGE_ASSIGN_OR_RETURN(has_row, st.Step());
    if (!has_row) break;
    KILN_STORAGE_ASSIGN_OR_RETURN(r, ReadRecord(st));
    nlohmann::json workload = {{"key", r.workload_key}};
    const int w = rows::kRecordColumnCount;  // the workload's columns follow
    if (st.ColumnInt64(w) != 0) {
      workload["op"] = st.ColumnText(w + 1);
      workload["canonical"] = st.ColumnText(w + 2);
      workload["flops"] = st.ColumnDouble(w + 3);
    }
    chunk.push_back(std::move(r));
    workloads.push_back(std::move(workload));
    if (chunk.size() == 64) KILN_STORAGE_RETURN_IF_ERROR(write());
  }
  KILN_STORAGE_RETURN_IF_ERROR(write());
  out.flush();
  if (!out) return absl::DataLossError("writing the JSON lines export failed");
  return absl::OkStatus();
}

absl::StatusOr<int64_t> TuningDb::ImportJsonl(std::istream& in, const std::string& farm) {
  // Parse everything first: a malformed line must leave the database untouched.
  std::vector<ImportedRecord> lines;
  std::string line;
  int64_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    absl::StatusOr<ImportedRecord> parsed = ParseRecordLine(line);
    if (!parsed.ok()) {
      return absl::InvalidArgumentError(
          StrCat("JSON lines import: line ", line_no, ": ", parsed.status().message()));
    }
    if (parsed->record.farm.empty()) parsed->record.farm = farm;
    lines.push_back(std::move(*parsed));
  }
  if (in.bad()) return absl::DataLossError("reading the JSON lines import failed");

  std::lock_guard<std::mutex> lock(c_->mu);
  Transaction tx(*c_->db);
  KILN_STORAGE_RETURN_IF_ERROR(tx.status());
  KILN_STORAGE_ASSIGN_OR_RETURN(add_workload,
                                c_->db->Prepare("INSERT INTO workloads(key, op, canonical, flops) "
                                                "VALUES(?,?,?,?) ON CONFLICT DO NOTHING"));
  // A line already here: a record of the same workload, target, compiler
  // and config with the same costs.
  KILN_STORAGE_ASSIGN_OR_RETURN(
      same_keys, c_->db->Prepare(StrCat("SELECT ", kRecordColumns,
                                        " FROM records WHERE workload_key = ? AND target = ? AND "
                                        "compiler_version = ? AND config = ?")));
  int64_t added = 0;
  for (const ImportedRecord& item : lines) {
    if (item.workload.has_value()) {
      const WorkloadRow& w = *item.workload;
      KILN_STORAGE_RETURN_IF_ERROR(add_workload.Reset());
      KILN_STORAGE_RETURN_IF_ERROR(add_workload.BindText(1, w.key));
      KILN_STORAGE_RETURN_IF_ERROR(add_workload.BindText(2, w.op));
      KILN_STORAGE_RETURN_IF_ERROR(add_workload.BindText(3, w.canonical));
      KILN_STORAGE_RETURN_IF_ERROR(add_workload.BindDouble(4, w.flops));
      KILN_STORAGE_RETURN_IF_ERROR(add_workload.Run());
    }
    const RecordRow& r = item.record;
    KILN_STORAGE_RETURN_IF_ERROR(same_keys.Reset());
    KILN_STORAGE_RETURN_IF_ERROR(same_keys.BindText(1, r.workload_key));
    KILN_STORAGE_RETURN_IF_ERROR(same_keys.BindText(2, r.target));
    KILN_STORAGE_RETURN_IF_ERROR(same_keys.BindText(3, r.compiler_version));
    KILN_STORAGE_RETURN_IF_ERROR(same_keys.BindText(4, r.config));
    std::vector<RecordRow> here;
    while (true) {
      KILN_STORAGE_ASSIGN_OR_RETURN(has_row, same_keys.Step());
      if (!has_row) break;
      KILN_STORAGE_ASSIGN_OR_RETURN(row, ReadRecord(same_keys));
      here.push_back(std::move(row));
    }
    KILN_STORAGE_RETURN_IF_ERROR(same_keys.Reset());
    KILN_STORAGE_RETURN_IF_ERROR(AttachCosts(*c_->db, here));
    if (std::any_of(here.begin(), here.end(),
                    [&](const RecordRow& h) { return h.costs_s == r.costs_s; })) {
      continue;
    }
    KILN_STORAGE_RETURN_IF_ERROR(InsertRecord(*c_->db, r).status());
    ++added;
  }
  KILN_STORAGE_RETURN_IF_ERROR(tx.Commit());
  return added;
}

}  // namespace kiln::storage
