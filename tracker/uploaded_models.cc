#include "tracker/uploaded_models.h"

#include <algorithm>
#include <iterator>
#include <set>
#include <utility>

#include "base/str.h"
#include "tracker/job_options.h"
#include "tracker/log.h"

namespace kiln::tracker {
UploadedModels::UploadedModels(storage::FarmStore* db, storage::ArtifactStore* store,
                               const Clock* clock, UploadedModelsOptions options)
    : db_(db), store_(store), clock_(clock), options_(options) {}

int64_t UploadedModels::UserBytes::Total() const {
  int64_t n = arriving;
  for (const auto& [sha, u] : unused) n += u.size;
  return n;
}

absl::Status UploadedModels::Charge(const std::string& user, int64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  UserBytes& u = users_[user];
  const int64_t held = u.Total();
  if (options_.quota_bytes > 0 && held + bytes > options_.quota_bytes) {
    return absl::ResourceExhaustedError(StrCat(
        user.empty() ? "anonymous callers' " : user + "'s ", "uploads that no job uses yet (", held,
        " bytes) and this one would pass the quota of ", options_.quota_bytes,
        " bytes per user (kiln-tracker --upload-quota-bytes); submit a job with the models "
        "uploaded, or wait until unused ones are collected (--model-grace-s)"));
  }
  u.arriving += bytes;
  return absl::OkStatus();
}

void UploadedModels::Refund(const std::string& user, int64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = users_.find(user);
  if (it == users_.end()) return;
  it->second.arriving = std::max<int64_t>(0, it->second.arriving - bytes);
  if (it->second.arriving == 0 && it->second.unused.empty()) users_.erase(it);
}

void UploadedModels::Stored(const std::string& user, const std::string& sha256, int64_t size,
                            int64_t charged) {
  std::lock_guard<std::mutex> lock(mu_);
  UserBytes& u = users_[user];
  u.arriving = std::max<int64_t>(0, u.arriving - charged);
  u.unused[sha256] = Upload{size, clock_->NowMs()};
}

int64_t UploadedModels::BytesOf(const std::string& user) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = users_.find(user);
  return it == users_.end() ? 0 : it->second.Total();
}

absl::StatusOr<int> UploadedModels::Collect() {
  std::lock_guard<std::mutex> collecting(collect_mu_);
  const int64_t now = clock_->NowMs();
  // Every file a job names, whatever its state: its model and external data.
  std::set<std::string> used;
  auto jobs = db_->ListJobs();
  if (!jobs.ok()) return jobs.status();
  for (const storage::JobRow& job : *jobs) {
    used.insert(job.model_sha256);
    auto options = OptionsFromJson(job.options_json, TimingOptions{});
    if (!options.ok()) {
      // Unreadable options may name files: collect nothing rather than guess.
      return absl::DataLossError(StrCat("job ", job.id, ": ", options.status().message(),
                                        "; no uploaded model is collected"));
    }
    for (const auto& [location, sha] : options->external_data) used.insert(sha);
  }
  // Recent uploads to this tracker (a re-upload of an old file keeps it).
  std::set<std::string> recent;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = users_.begin(); it != users_.end();) {
      auto& unused = it->second.unused;
      for (auto u = unused.begin(); u != unused.end();) {
        if (used.count(u->first)) {
          u = unused.erase(u);  // a job's now: bounded by the jobs' limits
          continue;
        }
        if (now - u->second.unix_ms < options_.grace_ms) recent.insert(u->first);
        ++u;
      }
      it = unused.empty() && it->second.arriving == 0 ? users_.erase(it) : std::next(it);
    }
  }
  auto models = db_->ListArtifacts(storage::ArtifactKind::kModel);
  if (!models.ok()) return models.status();
  std::set<std::string> collected;
  for (const storage::ArtifactRow& row : *models) {
    if (used.count(row.sha256) || recent.count(row.sha256)) continue;
    if (now - row.created_unix_ms < options_.grace_ms) continue;
    absl::Status removed = store_->Remove(row.sha256);
    if (!removed.ok() && !absl::IsNotFound(removed)) {
      Log()->warn("cannot collect unused model {}: {}", row.sha256, removed.ToString());
      continue;
    }
    if (absl::Status st = db_->DeleteArtifact(row.sha256); !st.ok()) return st;
    collected.insert(row.sha256);
    Log()->info("collected model {} ({} bytes): no job used it in {} s", row.sha256, row.size,
                options_.grace_ms / 1000);
  }
  if (!collected.empty()) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [user, u] : users_) {
      for (const std::string& sha : collected) u.unused.erase(sha);
    }
  }
  return static_cast<int>(collected.size());
}

ChargedUpload::~ChargedUpload() {
  if (!finished_) models_->Refund(user_, charged_);
}

absl::Status ChargedUpload::Add(std::string_view data, int64_t offset, int64_t total_size,
                                std::string_view sha256) {
  const auto bytes = static_cast<int64_t>(data.size());
  if (absl::Status st = models_->Charge(user_, bytes); !st.ok()) return st;
  charged_ += bytes;
  return upload_->Add(data, offset, total_size, sha256);
}

absl::StatusOr<storage::BlobWriter::Stored> ChargedUpload::Finish() {
  auto stored = upload_->Finish();
  if (!stored.ok()) return stored.status();
  models_->Stored(user_, stored->sha256, stored->size, charged_);
  finished_ = true;
  return stored;
}

}  // namespace kiln::tracker
