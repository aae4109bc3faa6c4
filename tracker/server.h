#pragma once
// The tracker daemon in one object: log database, artifact store, agent
// registry, dispatcher, job manager, and the gRPC server with the
// kiln.v1.Tracker and kiln.v1.AgentSession services on one port.

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "storage/stores.h"
#include "tracker/agent_registry.h"
#include "tracker/agent_session.h"
#include "tracker/auth.h"
#include "tracker/clock.h"
#include "tracker/dispatcher.h"
#include "tracker/http.h"
#include "tracker/job_manager.h"
#include "tracker/metrics.h"
#include "tracker/relay.h"
#include "tracker/stream_limits.h"
#include "tracker/uploaded_models.h"

namespace grpc {
class Server;
class Service;
}  // namespace grpc

namespace kiln::tracker {

struct TrackerOptions {
  std::string listen = "127.0.0.1:0";  // host:port; port 0 picks a free one
  std::string db_path;
  std::string artifacts_dir;
  std::string token;  // legacy shared agent secret: agents must present it
  // Every call must carry a valid bearer token (tracker/auth.h).
  bool require_auth = false;
  // Listening on an address other than loopback needs require_auth or this
  // explicit choice; Start() refuses otherwise.
  bool allow_anonymous = false;
  // TLS: the server's certificate chain and key (PEM files); both or neither.
  // With tls_client_ca, agents must present a certificate it signed (mutual
  // TLS for agents; users' clients need none).
  std::string tls_cert;
  std::string tls_key;
  std::string tls_client_ca;
  int64_t lease_timeout_ms = 0;  // > 0: fixed lease duration
  // Fair-share weights of users on every key (default 1).
  std::map<std::string, double> user_weights;
  // Keys whose user-run agents serve everyone (AgentSessionOptions).
  std::set<std::string> shared_keys;
  int32_t heartbeat_interval_ms = 2000;
  // The largest gRPC message accepted: models arrive in chunks (UploadModel),
  // so no message needs to be large.
  int max_receive_bytes = 16 << 20;
  JobManagerOptions jobs;
  // host:port of the status page and /metrics (tracker/http.h); "" for none.
  std::string http_listen;
  HttpLimits http_limits;
  // Open WatchJob streams (each holds a server thread): per user, in all.
  StreamLimits watch_limits{16, 128, 0};
  // Open UploadModel streams: per user, in all; one that receives no chunk
  // for idle_timeout_ms is cancelled and its partial file removed.
  StreamLimits upload_limits{4, 32, 60 * 1000};
  // Uploaded models no job uses: the per-user quota and the grace period
  // before they are collected (tracker/uploaded_models.h); collected at
  // startup and every model_gc_interval_ms.
  UploadedModelsOptions uploaded_models{int64_t{8} << 30, 60 * 60 * 1000};
  int64_t model_gc_interval_ms = 10 * 60 * 1000;
  // Server-side HTTP/2 keepalive pings: a client that went away without
  // closing (host gone, cable cut) has its streams ended after
  // keepalive_time_ms + keepalive_timeout_ms.
  int keepalive_time_ms = 30000;
  int keepalive_timeout_ms = 10000;
};

class TrackerServer {
 public:
  explicit TrackerServer(TrackerOptions options);
  ~TrackerServer();  // Stop()
  TrackerServer(const TrackerServer&) = delete;
  TrackerServer& operator=(const TrackerServer&) = delete;

  // Opens the database and store, resumes unfinished jobs, starts serving.
  // Returns the bound port.
  absl::StatusOr<int> Start();
  // Stops serving (ongoing streams are cancelled) and stops job threads.
  void Stop();
  int port() const { return port_; }
  int http_port() const { return http_port_; }
  JobManager* jobs() { return jobs_.get(); }
  // For tests: the stream limiters, the uploaded models, the HTTP server.
  StreamLimiter* watches() { return watches_.get(); }
  StreamLimiter* uploads() { return uploads_.get(); }
  UploadedModels* uploaded_models() { return uploaded_models_.get(); }
  HttpServer* http() { return http_.get(); }

 private:
  TrackerOptions options_;
  SystemClock clock_;
  storage::Stores db_;  // the tuning database and the farm store
  std::unique_ptr<storage::ArtifactStore> store_;
  std::unique_ptr<AgentRegistry> agents_;
  std::unique_ptr<Dispatcher> dispatcher_;
  std::unique_ptr<JobManager> jobs_;
  std::unique_ptr<Relay> relay_;  // several trackers on one database
  std::unique_ptr<Authenticator> auth_;
  std::unique_ptr<StreamLimiter> watches_;
  std::unique_ptr<StreamLimiter> uploads_;
  std::unique_ptr<UploadedModels> uploaded_models_;
  std::unique_ptr<grpc::Service> tracker_service_;
  std::unique_ptr<AgentSessions> agent_service_;
  std::unique_ptr<grpc::Server> server_;
  Metrics metrics_;
  std::unique_ptr<HttpServer> http_;
  int http_port_ = 0;
  std::atomic<bool> stopping_{false};
  std::thread reaper_;
  int port_ = 0;
};

}  // namespace kiln::tracker
