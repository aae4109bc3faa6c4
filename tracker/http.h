#pragma once
// The tracker's HTTP side (kiln-tracker --http ADDR): a farm status page
// that refreshes itself, the JSON it reads, and Prometheus metrics.
//
//   GET /                      the status page (HTML + script, no other files)
//   GET /api/state             devices per key, queues, jobs with per-task
//                              progress and best latency (JSON)
//   GET /api/jobs/ID/curve     the job's tuning curve: estimated latency of
//                              the model (sum of best kernel time x runs)
//                              against trials (JSON)
//   GET /metrics               Prometheus text exposition (tracker/metrics.h
//                              counters and the farm's gauges)
//
// When the tracker requires tokens, every path but / needs one (an
// `Authorization: Bearer` header, or `?token=` for a browser): a user sees
// their own jobs, an admin all of them; devices and metrics are aggregate
// and need any valid token. 401 otherwise.
//
// Bounded (HttpLimits): each connection is served by its own thread, at most
// max_connections at once; a connection beyond them is answered 503 and
// closed at once, never queued. A request's line and headers must have
// arrived within header_timeout_ms of when the server began waiting for it,
// and the whole request (body and response included) within
// request_timeout_ms: a client that trickles bytes (slowloris) loses its
// connection at the deadline, not at the next 5 s read timeout, so it holds
// a thread for a bounded time and the other connections are served
// meanwhile. A connection idle between requests is closed after
// keep_alive_ms; requests carry at most 64 KiB of headers and 64 KiB of body.

#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "tracker/agent_registry.h"
#include "tracker/auth.h"
#include "tracker/clock.h"
#include "tracker/dispatcher.h"
#include "tracker/job_manager.h"
#include "tracker/metrics.h"

namespace kiln::tracker {
class BoundedHttpServer;  // http.cc
}

namespace kiln::tracker {

struct HttpLimits {
  int max_connections = 64;            // kiln-tracker --http-max-connections
  int64_t header_timeout_ms = 10000;   // --http-header-timeout-ms
  int64_t request_timeout_ms = 30000;  // --http-request-timeout-ms
  int64_t keep_alive_ms = 5000;        // idle wait for a connection's next request
};

struct HttpDeps {
  JobManager* jobs;
  AgentRegistry* agents;
  Dispatcher* dispatcher;
  Metrics* metrics;
  const Authenticator* auth;
  const Clock* clock;
  HttpLimits limits;
};

class HttpServer {
 public:
  explicit HttpServer(HttpDeps deps);
  ~HttpServer();  // Stop()
  // Binds `listen` (host:port; port 0 picks one) and serves in a thread.
  // Returns the port.
  absl::StatusOr<int> Start(const std::string& listen);
  void Stop();

  // The page, the JSON and the metrics, for tests without a socket.
  std::string StateJson(const Caller& viewer) const;
  absl::StatusOr<std::string> CurveJson(const Caller& viewer, const std::string& job_id) const;
  std::string MetricsText() const;
  // Connections being served now, and those refused (over max_connections).
  int OpenConnections() const;
  int64_t RefusedConnections() const;

 private:
  HttpDeps deps_;
  std::unique_ptr<BoundedHttpServer> server_;
  std::thread thread_;
};

}  // namespace kiln::tracker
