#pragma once
// The agent's session with the tracker (proto/kiln/v1/agent.proto): dial out,
// Hello -> Welcome, heartbeats from a thread, MeasureBatch -> BatchResult,
// Cancel. Reconnects with exponential back-off (up to 5 s) when the tracker
// is unreachable or the stream breaks.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/status.h"
#include "grpcpp/grpcpp.h"
#include "kiln/v1/agent.grpc.pb.h"

namespace kiln::agent {

// HTTP/2 keepalive of the agent's channel: a ping after this long without
// traffic from the tracker, the connection dropped when its answer takes
// longer than the timeout. The tracker accepts pings this often
// (tracker/server.cc).
inline constexpr int kKeepaliveTimeMs = 10000;
inline constexpr int kKeepaliveTimeoutMs = 10000;

struct AgentOptions {
  std::string tracker;  // HOST:PORT
  std::string device_key;
  std::string agent_id;
  std::string token;         // legacy shared secret, sent in the Hello
  std::string bearer_token;  // the agent's own token (kiln-tracker tokens create --role agent)
  // TLS: the CA that signed the tracker's certificate (PEM text; empty:
  // plaintext), and for mutual TLS the agent's own certificate and key.
  std::string tls_ca_pem;
  std::string tls_cert_pem;
  std::string tls_key_pem;
  std::string target_spec;
  std::string hardware;
  double peak_gflops = 0;  // measured at start (base/fma_peak.h); 0: not known
  std::string compiler_version;
  int max_batch = 0;
  // Where whole-model batches' files are kept during a session (FileStore),
  // and the largest such file accepted.
  std::string files_dir;
  int64_t max_model_bytes = int64_t{4} << 30;
  // Called before each session is dialled (a board agent: whether its
  // board answers); while it fails the agent stays out of the farm, saying
  // why, and tries again after the back-off.
  std::function<absl::Status()> before_session;
  std::chrono::milliseconds initial_backoff{250};
  std::chrono::milliseconds max_backoff{5000};
};

// hostname-pid.
std::string DefaultAgentId();

// Measures candidate `index` of a batch (the sandbox in production). A
// result of kind AGENT_LOST (a board agent's board gone) ends the session
// with the tracker without answering the batch, which goes back to the
// tracker's queue.
using CandidateMeasurer =
    std::function<kiln::v1::MeasureResult(const kiln::v1::MeasureBatch& batch, int index)>;

// Measures every variant of a whole-model batch (Sandbox::MeasureModel in
// production), its files already in options.files_dir; one result per
// candidate.
using ModelMeasurer =
    std::function<std::vector<kiln::v1::MeasureResult>(const kiln::v1::MeasureBatch& batch)>;

class AgentSession {
 public:
  // Without a model measurer, whole-model batches are answered with errors.
  AgentSession(AgentOptions options, CandidateMeasurer measurer,
               ModelMeasurer model_measurer = nullptr);
  ~AgentSession();
  AgentSession(const AgentSession&) = delete;
  AgentSession& operator=(const AgentSession&) = delete;

  // Serves sessions, reconnecting, until Stop() (returns OK) or until the
  // tracker rejects the Hello with UNAUTHENTICATED or INVALID_ARGUMENT
  // (returns that status: retrying would not help).
  absl::Status Run();
  // One session, from dialing until the stream ends. `welcomed` tells whether
  // the tracker accepted the Hello.
  absl::Status RunOnce(bool* welcomed);
  // Thread-safe: ends the current session and makes Run() return.
  void Stop();

  int64_t batches_done() const { return batches_done_.load(); }
  int64_t sessions_welcomed() const { return sessions_welcomed_.load(); }
  // Sessions Run() opened or tried to (one per connection attempt).
  int64_t sessions_tried() const { return sessions_tried_.load(); }

 private:
  bool stopping() const { return stop_.load(); }

  AgentOptions options_;
  CandidateMeasurer measurer_;
  ModelMeasurer model_measurer_;
  std::shared_ptr<grpc::Channel> channel_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;  // guards context_, and backs stop_cv_
  std::condition_variable stop_cv_;
  grpc::ClientContext* context_ = nullptr;
  std::atomic<int64_t> batches_done_{0};
  std::atomic<int64_t> sessions_welcomed_{0};
  std::atomic<int64_t> sessions_tried_{0};
};

}  // namespace kiln::agent
