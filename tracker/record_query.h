#pragma once
// The records a caller may read, one page at a time: what the Tracker
// service's QueryRecords answers, as a domain function the RPC adapter
// (tracker/server.cc) converts to and from protobuf. Either a job's records
// in measurement order, or all records of a workload and target, newest
// first; each with its workload; records of other users' jobs left out for
// anyone but an admin (records of no job, imported ones, are everyone's).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "storage/stores.h"
#include "tracker/auth.h"

namespace kiln::tracker {

// One page at most per call: a job of 100,000 trials would not fit in a
// message, nor should one call hold the database that long.
inline constexpr int kRecordPage = 10000;

struct RecordQuery {
  std::string workload_key;  // "" for any
  std::string target;        // "" for any
  // "" for every job's; else that job's records (the caller checked that
  // it may see the job).
  std::string job_id;
  // 0: a page of kRecordPage, and a next page token when there is more;
  // 1..kRecordPage: at most this many, and no next page.
  int limit = 0;
  std::string page_token;  // the previous page's next_page_token
};

struct RecordEntry {
  storage::RecordRow record;
  std::optional<storage::WorkloadRow> workload;  // absent when not stored
};

struct RecordPage {
  std::vector<RecordEntry> records;
  std::string next_page_token;  // "" at the end
};

// INVALID_ARGUMENT for a negative limit or a malformed page token; the
// database's errors otherwise.
absl::StatusOr<RecordPage> QueryVisibleRecords(const storage::Stores& db, const Caller& caller,
                                               const RecordQuery& query);

}  // namespace kiln::tracker
