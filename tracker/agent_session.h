#pragma once
// The AgentSession service: one bidirectional stream per connected agent,
// served with gRPC's callback API, so that no thread waits per agent (200
// agents' reader and writer threads were most of a loaded tracker's time).
//
// A session begins with the agent's Hello: its identity (the bearer token's
// user, or the Hello's id on a tracker that allows it), key, target and
// max_batch. The tracker answers Welcome, then asks the dispatcher for the
// agent's next lease (Dispatcher::RequestLease): the batch is written to the
// agent when one is queued for it, by whichever thread queued it. A result
// ends the lease and asks for the next. Heartbeats keep the session alive;
// Tick() ends sessions that fell silent, tells agents of cancelled batches
// and gives agents out of quarantine work again. A second session of the same
// agent ends the first (its leases go back to the queue, the new one's stay).

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "kiln/v1/agent.grpc.pb.h"
#include "tracker/agent_admission.h"
#include "tracker/agent_registry.h"
#include "tracker/auth.h"
#include "tracker/dispatcher.h"

namespace kiln::tracker {

struct AgentSessionOptions {
  // Mutual TLS: agents must present a certificate signed by the client CA.
  bool require_certificate = false;
  int32_t heartbeat_interval_ms = 2000;
  AdmissionPolicy admission;  // whom a Hello admits, as whom (tracker/agent_admission.h)
};

class AgentSessions final : public kiln::v1::AgentSession::CallbackService {
 public:
  AgentSessions(AgentRegistry* agents, Dispatcher* dispatcher, const Authenticator* auth,
                AgentSessionOptions options);
  AgentSessions(const AgentSessions&) = delete;
  AgentSessions& operator=(const AgentSessions&) = delete;

  grpc::ServerBidiReactor<kiln::v1::AgentMessage, kiln::v1::TrackerMessage>* Session(
      grpc::CallbackServerContext* ctx) override;

  // Housekeeping, every ~100 ms: cancelled batches are told to their agents,
  // idle sessions (out of quarantine, or whose request was dropped) ask for
  // work again, and sessions silent for longer than max_silence_ms end.
  void Tick(int64_t max_silence_ms);
  // No more leases are asked for (at shutdown, before the server's).
  void Stop();

 private:
  class Peer;  // one agent's session
  class Reactor;

  AgentRegistry* agents_;
  Dispatcher* dispatcher_;
  const Authenticator* auth_;
  AgentSessionOptions options_;
  std::atomic<bool> stopping_{false};
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<Peer>> sessions_;  // by agent id: the open one
};

}  // namespace kiln::tracker
