#pragma once
// httplib's server, bounded: each connection is served by its own thread, at
// most HttpLimits::max_connections at once; a connection beyond them is
// answered 503 and closed at once, never queued. A request's line and
// headers must have arrived within header_timeout_ms of when the server
// began waiting for it, and the whole request (body and response included)
// within request_timeout_ms: a client that trickles bytes (slowloris) loses
// its connection at the deadline, not at a per-read timeout each byte
// restarts. A connection idle between requests is closed after
// keep_alive_ms; requests carry at most 64 KiB of headers and 64 KiB of
// body. The status page (tracker/http.h) serves on it.

#include <httplib.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <set>

namespace kiln::tracker {

struct HttpLimits {
  int max_connections = 64;            // kiln-tracker --http-max-connections
  int64_t header_timeout_ms = 10000;   // --http-header-timeout-ms
  int64_t request_timeout_ms = 30000;  // --http-request-timeout-ms
  int64_t keep_alive_ms = 5000;        // idle wait for a connection's next request
};

// httplib's server with its connections served by ConnectionThreads and
// read through DeadlineStream (replacing httplib's per-read timeouts).
class BoundedHttpServer final : public httplib::Server {
 public:
  explicit BoundedHttpServer(const HttpLimits& limits);
  // Ends every connection being served (Stop).
  void CloseAll() {
    std::lock_guard<std::mutex> lock(mu_);
    closing_ = true;
    for (int sock : open_) ::shutdown(sock, SHUT_RDWR);
  }
  int Open() const {
    std::lock_guard<std::mutex> lock(mu_);
    return static_cast<int>(open_.size());
  }
  int64_t Refused() const { return refused_.load(); }
  // httplib (as built) listens with a backlog of 5: a burst of connections
  // overflows it and the next client's SYN is dropped, retried after a
  // second. Listening again on the bound socket widens it.
  void WidenBacklog() {
    if (svr_sock_ != INVALID_SOCKET) ::listen(svr_sock_, SOMAXCONN);
  }

 private:
  bool process_and_close_socket(socket_t sock) override;

  const HttpLimits limits_;
  std::atomic<int64_t> refused_{0};
  mutable std::mutex mu_;
  std::set<int> open_;
  bool closing_ = false;
};

}  // namespace kiln::tracker
