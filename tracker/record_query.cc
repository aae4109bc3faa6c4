#include "tracker/record_query.h"

#include <map>
#include <utility>

#include "base/str.h"

namespace kiln::tracker {

absl::StatusOr<RecordPage> QueryVisibleRecords(const storage::Stores& db, const Caller& caller,
                                               const RecordQuery& q) {
  if (q.limit < 0) return absl::InvalidArgumentError("limit must be >= 0");
  int64_t offset = 0;
  if (!q.page_token.empty() && (!ParseInt64(q.page_token, &offset) || offset < 0)) {
    return absl::InvalidArgumentError("malformed page_token");
  }
  const bool limited = q.limit > 0 && q.limit <= kRecordPage;
  const int want = limited ? q.limit : kRecordPage;
  absl::StatusOr<std::vector<storage::RecordRow>> rows =
      q.job_id.empty() ? db.tuning->QueryRecords(q.workload_key, q.target, want + 1, offset)
                       : db.tuning->RecordsOfJob(q.job_id, want + 1, offset);
  if (!rows.ok()) return rows.status();
  RecordPage page;
  if (static_cast<int>(rows->size()) > want) {
    rows->resize(static_cast<size_t>(want));
    if (!limited) page.next_page_token = StrCat(offset + want);
  }
  if (!q.job_id.empty()) {
    std::erase_if(*rows, [&](const storage::RecordRow& r) {
      return (!q.workload_key.empty() && r.workload_key != q.workload_key) ||
             (!q.target.empty() && r.target != q.target);
    });
  }
  if (!caller.admin()) {
    std::map<std::string, bool> visible;  // job id -> may see
    for (const auto& r : *rows) {
      if (r.job_id.empty() || visible.count(r.job_id)) continue;
      auto job = db.farm->GetJob(r.job_id);
      if (!job.ok()) return job.status();
      visible[r.job_id] = !job->has_value() || caller.MaySee((*job)->owner);
    }
    std::erase_if(*rows, [&](const storage::RecordRow& r) {
      return !r.job_id.empty() && !visible[r.job_id];
    });
  }
  std::map<std::string, std::optional<storage::WorkloadRow>> workloads;
  for (storage::RecordRow& r : *rows) {
    auto w = workloads.find(r.workload_key);
    if (w == workloads.end()) {
      auto row = db.tuning->GetWorkload(r.workload_key);
      if (!row.ok()) return row.status();
      w = workloads.emplace(r.workload_key, *row).first;
    }
    page.records.push_back({std::move(r), w->second});
  }
  return page;
}

}  // namespace kiln::tracker
