#include "tracker/stream_limits.h"

#include <utility>

#include "absl/status/status.h"
#include "base/str.h"

namespace kiln::tracker {

StreamLimiter::StreamLimiter(std::string what, std::string per_user_flag, std::string total_flag,
                             StreamLimits limits, const Clock* clock)
    : what_(std::move(what)),
      per_user_flag_(std::move(per_user_flag)),
      total_flag_(std::move(total_flag)),
      limits_(limits),
      clock_(clock) {}

StreamLimiter::Slot::~Slot() { owner_->Release(id_); }
void StreamLimiter::Slot::Touch() { owner_->Touch(id_); }
bool StreamLimiter::Slot::idle_cancelled() const { return owner_->Cancelled(id_); }

absl::StatusOr<std::unique_ptr<StreamLimiter::Slot>> StreamLimiter::Acquire(
    const std::string& user, std::function<void()> cancel) {
  std::lock_guard<std::mutex> lock(mu_);
  const int mine = per_user_.count(user) ? per_user_[user] : 0;
  if (limits_.per_user > 0 && mine >= limits_.per_user) {
    return absl::ResourceExhaustedError(
        StrCat(user.empty() ? "anonymous callers hold " : user + " holds ", mine, " open ", what_,
               ", the most this tracker allows one user (kiln-tracker ", per_user_flag_,
               "); close one first"));
  }
  if (limits_.total > 0 && static_cast<int>(open_.size()) >= limits_.total) {
    return absl::ResourceExhaustedError(StrCat("the tracker holds ", open_.size(), " open ", what_,
                                               ", the most it allows (kiln-tracker ", total_flag_,
                                               "); try again later"));
  }
  const uint64_t id = next_id_++;
  open_[id] = Entry{user, clock_->NowMs(), std::move(cancel), false};
  per_user_[user] = mine + 1;
  return std::unique_ptr<Slot>(new Slot(this, id));
}

void StreamLimiter::Release(uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = open_.find(id);
  if (it == open_.end()) return;
  if (--per_user_[it->second.user] <= 0) per_user_.erase(it->second.user);
  open_.erase(it);
}

void StreamLimiter::Touch(uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = open_.find(id); it != open_.end()) it->second.last_ms = clock_->NowMs();
}

bool StreamLimiter::Cancelled(uint64_t id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = open_.find(id);
  return it != open_.end() && it->second.cancelled;
}

int StreamLimiter::CancelIdle() {
  if (limits_.idle_timeout_ms <= 0) return 0;
  // Under the lock: a stream's slot is released (under the lock) before its
  // call ends, so the call a cancel names is still there. A cancel only
  // marks the call (ServerContext::TryCancel); it does not call back.
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t now = clock_->NowMs();
  int n = 0;
  for (auto& [id, e] : open_) {
    if (e.cancelled || now - e.last_ms <= limits_.idle_timeout_ms) continue;
    e.cancelled = true;
    if (e.cancel) e.cancel();
    ++n;
  }
  return n;
}

int StreamLimiter::Open() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(open_.size());
}

int StreamLimiter::OpenOf(const std::string& user) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = per_user_.find(user);
  return it == per_user_.end() ? 0 : it->second;
}

}  // namespace kiln::tracker
