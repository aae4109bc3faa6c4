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

namespace httplib {
class Server;
}

namespace kiln::tracker {

struct HttpDeps {
  JobManager* jobs;
  AgentRegistry* agents;
  Dispatcher* dispatcher;
  Metrics* metrics;
  const Authenticator* auth;
  const Clock* clock;
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

 private:
  HttpDeps deps_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
};

}  // namespace kiln::tracker
