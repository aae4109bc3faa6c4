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
// `Authorization: Bearer` header, or `?token=` for a browser), 401 otherwise:
// a user sees their own jobs, the farm's agents and the queues of their own
// jobs' keys, an admin all of it; /metrics (every user's counts) is an
// admin's, 403 for others; an agent's token gets 403 everywhere.
//
// Served by BoundedHttpServer (tracker/bounded_http.h): a thread per
// connection up to a cap, deadlines per request, not per read.

#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "tracker/agent_registry.h"
#include "tracker/auth.h"
#include "tracker/bounded_http.h"
#include "tracker/clock.h"
#include "tracker/dispatcher.h"
#include "tracker/job_manager.h"
#include "tracker/metrics.h"

namespace kiln::tracker {

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
