#pragma once
// Bounds on the tracker's long-lived calls (WatchJob and UploadModel
// streams): how many one user, and all users together, may hold open, and
// how long one may sit idle. Each open stream holds a server thread (the
// Tracker service is synchronous), a file descriptor, and for an upload a
// temporary file: without bounds a client that opens streams and walks away
// holds them forever.
//
// No gRPC types here: a stream registers a callback that cancels it
// (ServerContext::TryCancel), called once when it stays idle too long.
// Thread-safe.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"
#include "tracker/clock.h"

namespace kiln::tracker {

struct StreamLimits {
  int per_user = 0;             // streams one user (or all anonymous callers) may hold; 0: any
  int total = 0;                // streams all users together may hold; 0: any
  int64_t idle_timeout_ms = 0;  // cancelled when idle longer; 0: never
};

class StreamLimiter {
 public:
  // `what` names the streams in errors ("WatchJob streams"); `per_user_flag`
  // and `total_flag` the kiln-tracker flags that set the limits.
  StreamLimiter(std::string what, std::string per_user_flag, std::string total_flag,
                StreamLimits limits, const Clock* clock);
  StreamLimiter(const StreamLimiter&) = delete;
  StreamLimiter& operator=(const StreamLimiter&) = delete;

  // One open stream; destroying it frees its place.
  class Slot {
   public:
    ~Slot();
    Slot(const Slot&) = delete;
    Slot& operator=(const Slot&) = delete;
    // The stream made progress (a chunk arrived): its idle time starts again.
    void Touch();
    // Whether CancelIdle cancelled it.
    bool idle_cancelled() const;

   private:
    friend class StreamLimiter;
    Slot(StreamLimiter* owner, uint64_t id) : owner_(owner), id_(id) {}
    StreamLimiter* owner_;
    uint64_t id_;
  };

  // A place for a new stream of `user`, or RESOURCE_EXHAUSTED (naming the
  // limit and its flag) when the user or everyone already holds the most.
  // `cancel` ends the stream; it is called at most once, from CancelIdle.
  absl::StatusOr<std::unique_ptr<Slot>> Acquire(const std::string& user,
                                                std::function<void()> cancel);
  // Cancels every stream idle for longer than idle_timeout_ms (once each);
  // returns how many it cancelled now.
  int CancelIdle();

  int Open() const;
  int OpenOf(const std::string& user) const;
  const StreamLimits& limits() const { return limits_; }

 private:
  struct Entry {
    std::string user;
    int64_t last_ms = 0;
    std::function<void()> cancel;
    bool cancelled = false;
  };
  void Release(uint64_t id);
  void Touch(uint64_t id);
  bool Cancelled(uint64_t id) const;

  const std::string what_, per_user_flag_, total_flag_;
  const StreamLimits limits_;
  const Clock* clock_;
  mutable std::mutex mu_;
  std::map<uint64_t, Entry> open_;
  std::map<std::string, int> per_user_;
  uint64_t next_id_ = 1;
};

}  // namespace kiln::tracker
