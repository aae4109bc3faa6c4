#include "tracker/agent_session.h"

#include <algorithm>
#include <deque>
#include <fstream>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "base/str.h"
#include "tracker/measure_proto.h"
#include "tracker/rpc.h"
#include "tuner/measurer.h"

namespace kiln::tracker {

namespace pb = ::kiln::v1;
using rpc::Log;
using storage::ErrorKind;

// gRPC's object for one call: it feeds the session what it reads and is
// deleted when the call is done. The session outlives it.
class AgentSessions::Reactor final
    : public grpc::ServerBidiReactor<pb::AgentMessage, pb::TrackerMessage> {
 public:
  Reactor(AgentSessions* owner, grpc::CallbackServerContext* ctx);
  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  pb::AgentMessage in_;
  std::shared_ptr<Peer> session_;
};

// One agent's session (a peer): what its reactor reads, what is written to it, its
// lease. Shared with the dispatcher's lease callbacks and the owner's Tick:
// every method is safe after the call has ended (it then does nothing, or
// gives back what it was handed).
class AgentSessions::Peer : public std::enable_shared_from_this<Peer> {
 public:
  Peer(AgentSessions* owner, Reactor* reactor, grpc::CallbackServerContext* ctx)
      : owner_(owner), reactor_(reactor), ctx_(ctx) {}

  // A message read; false when the session ended because of it.
  bool OnMessage(pb::AgentMessage& msg);
  // Asks for the next read unless the session is over.
  void ReadNext(pb::AgentMessage* into);
  void Send(pb::TrackerMessage msg);
  void WriteDone(bool ok);
  // Finishes the call with this status (once).
  void End(const grpc::Status& status);
  // Cancels the call now (a silent agent, a replaced session); its leases
  // go back to the queue at once.
  void Abort();
  // The call is over: leases back to the queue, the agent disconnected.
  void Done();
  // Cancelled batches to the agent; a lease asked for when idle.
  void Poll();

  const std::string& agent_id() const { return agent_id_; }

 private:
  bool Hello(const pb::Hello& hello);
  void Result(const pb::BatchResult& r);
  void RequestNextLease();
  void OnLease(std::optional<Lease> lease);
  // The files of a whole-model batch, in FileParts, those not sent yet.
  void SendFiles(const ModelWork& model);

  AgentSessions* owner_;
  std::mutex mu_;
  Reactor* reactor_;                  // null once the call is done
  grpc::CallbackServerContext* ctx_;  // valid while reactor_ is
  bool finished_ = false;             // Finish called (or the call is done)
  bool writing_ = false;
  std::deque<pb::TrackerMessage> writes_;  // the front is being written
  // Set by the Hello (in the reactor's reads only).
  bool welcomed_ = false;
  std::string agent_id_, key_, target_, holder_;
  // The user whose jobs alone this agent measures and whose its results are
  // (its token's owner, on a key the farm does not share); "" the farm's.
  std::string runs_for_;
  uint64_t registry_session_ = 0;
  int max_batch_ = 0;
  // The lease.
  std::string current_batch_;   // leased, not answered yet ("" none)
  double current_limit_s_ = 0;  // its costs' limit (CostLimitOf)
  uint64_t request_id_ = 0;     // a pending RequestLease
  bool requesting_ = false;     // a RequestLease call under way
  uint64_t leases_received_ = 0;
  std::set<std::string> files_sent_;  // whole-model batches' files, this session
};

// The parts whole-model batches' files are sent in.
constexpr size_t kFilePartBytes = size_t{4} << 20;

// ------------------------------------------------------------------ Reactor

AgentSessions::Reactor::Reactor(AgentSessions* owner, grpc::CallbackServerContext* ctx)
    : session_(std::make_shared<Peer>(owner, this, ctx)) {
  session_->ReadNext(&in_);
}

void AgentSessions::Reactor::OnReadDone(bool ok) {
  if (!ok) {
    session_->End(grpc::Status::OK);  // the agent closed its side, or the call broke
    return;
  }
  if (session_->OnMessage(in_)) session_->ReadNext(&in_);
}

void AgentSessions::Reactor::OnWriteDone(bool ok) { session_->WriteDone(ok); }

void AgentSessions::Reactor::OnCancel() {
  session_->End(grpc::Status(grpc::StatusCode::CANCELLED, "session cancelled"));
}

void AgentSessions::Reactor::OnDone() {
  session_->Done();
  delete this;
}

// --------------------------------------------------------------------- Peer

void AgentSessions::Peer::ReadNext(pb::AgentMessage* into) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!finished_ && reactor_ != nullptr) reactor_->StartRead(into);
}

void AgentSessions::Peer::Send(pb::TrackerMessage msg) {
  std::lock_guard<std::mutex> lock(mu_);
  if (finished_ || reactor_ == nullptr) return;
  writes_.push_back(std::move(msg));  // a deque: the front being written stays put
  if (!writing_) {
    writing_ = true;
    reactor_->StartWrite(&writes_.front());
  }
}

void AgentSessions::Peer::WriteDone(bool ok) {
  std::lock_guard<std::mutex> lock(mu_);
  writes_.pop_front();
  if (ok && !finished_ && reactor_ != nullptr && !writes_.empty()) {
    reactor_->StartWrite(&writes_.front());
  } else {
    writing_ = false;  // a failed write: the read fails too and ends the call
  }
}

void AgentSessions::Peer::End(const grpc::Status& status) {
  std::lock_guard<std::mutex> lock(mu_);
  if (finished_ || reactor_ == nullptr) return;
  finished_ = true;
  reactor_->Finish(status);
}

void AgentSessions::Peer::Abort() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (reactor_ == nullptr) return;
    ctx_->TryCancel();  // OnCancel finishes the call
  }
  // Not waiting for the call to be torn down (a dead link may take its
  // time): the leases go back now.
  if (welcomed_) owner_->dispatcher_->ReleaseAgent(holder_);
}

void AgentSessions::Peer::Done() {
  uint64_t request = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    reactor_ = nullptr;
    ctx_ = nullptr;
    finished_ = true;
    request = std::exchange(request_id_, 0);
  }
  if (!welcomed_) return;
  if (request != 0) owner_->dispatcher_->CancelRequest(request);
  {
    std::lock_guard<std::mutex> lock(owner_->mu_);
    auto it = owner_->sessions_.find(agent_id_);
    if (it != owner_->sessions_.end() && it->second.get() == this) owner_->sessions_.erase(it);
  }
  const int expired = owner_->dispatcher_->ReleaseAgent(holder_);
  if (!runs_for_.empty()) owner_->dispatcher_->ServeOnly(holder_, std::nullopt);
  owner_->agents_->Disconnect(agent_id_, registry_session_);
  Log()->info("agent '{}' disconnected ({} leases returned to the queue)", agent_id_, expired);
}

bool AgentSessions::Peer::OnMessage(pb::AgentMessage& msg) {
  if (!welcomed_) {
    if (!msg.has_hello()) {
      End(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                       "the first message of a session must be Hello"));
      return false;
    }
    return Hello(msg.hello());
  }
  if (msg.has_heartbeat()) {
    owner_->agents_->Heartbeat(agent_id_);
  } else if (msg.has_batch_result()) {
    Result(msg.batch_result());
  } else if (msg.has_hello()) {
    Log()->warn("agent '{}' sent a second Hello; ignored", agent_id_);
  }
  return true;
}

bool AgentSessions::Peer::Hello(const pb::Hello& hello) {
  auto refuse = [&](grpc::StatusCode code, std::string message) {
    End(grpc::Status(code, std::move(message)));
    return false;
  };
  const AgentSessionOptions& options = owner_->options_;
  if (options.require_certificate &&
      (ctx_->auth_context() == nullptr || !ctx_->auth_context()->IsPeerAuthenticated())) {
    return refuse(grpc::StatusCode::UNAUTHENTICATED,
                  "this tracker wants agents to present a client certificate signed by its "
                  "--tls-client-ca (kiln-agent --tls-cert/--tls-key)");
  }
  // Identity: with a bearer token, the token's user is the agent's id
  // (whatever the Hello says); without one (a tracker that allows it), the
  // Hello's id, after the legacy shared secret when one is set.
  // (Nothing the Hello says is logged before its token is checked.)
  auto caller = owner_->auth_->Authenticate(rpc::Authorization(ctx_));
  if (!caller.ok()) {
    Log()->warn("agent session from {}: {}", ctx_->peer(), std::string(caller.status().message()));
    End(rpc::ToGrpc(caller.status()));
    return false;
  }
  AgentHello said;
  said.agent_id = hello.agent_id();
  said.device_key = hello.device_key();
  said.target = hello.target().spec();
  said.hardware = hello.hardware();
  said.compiler_version = hello.compiler_version();
  said.token = hello.token();
  said.peak_gflops = hello.peak_gflops();
  auto admitted = AdmitAgent(*caller, said, options.admission, KILN_VERSION);
  if (!admitted.ok()) {
    if (admitted.status().code() == absl::StatusCode::kUnauthenticated) {
      Log()->warn("agent session from {}: {}", ctx_->peer(),
                  std::string(admitted.status().message()));
    }
    End(rpc::ToGrpc(admitted.status()));
    return false;
  }
  AgentInfo& info = admitted->info;
  info.on_tracker_host = IsLoopbackPeer(ctx_->peer());
  auto session = owner_->agents_->Connect(info);
  if (!session.ok()) {
    End(rpc::ToGrpc(session.status()));
    return false;
  }
  agent_id_ = info.id;
  key_ = info.device_key;
  target_ = info.target;
  registry_session_ = *session;
  // Leases belong to this session, not to the agent id: when an older
  // session of the same agent ends, it returns its own leases only.
  holder_ = HolderOf(agent_id_, registry_session_);
  if (!admitted->runs_for.empty()) {
    runs_for_ = admitted->runs_for;
    owner_->dispatcher_->ServeOnly(holder_, runs_for_);
  }
  // The most candidates the agent takes at once (0: no limit); larger
  // batches are split for it.
  max_batch_ = std::max(0, hello.max_batch());
  welcomed_ = true;
  std::shared_ptr<Peer> previous;
  {
    std::lock_guard<std::mutex> lock(owner_->mu_);
    auto& slot = owner_->sessions_[agent_id_];
    previous = std::exchange(slot, shared_from_this());
  }
  if (previous != nullptr) {
    Log()->warn("agent '{}' connected again: ending its previous session", agent_id_);
    previous->Abort();
  }
  Log()->info(
      "agent '{}' connected from {}: key {}, target '{}', {}{}", agent_id_, ctx_->peer(), key_,
      target_, info.hardware,
      runs_for_.empty() ? "" : StrCat("; run by ", runs_for_, ", measures their jobs only"));
  pb::TrackerMessage welcome;
  welcome.mutable_welcome()->set_session_id(StrCat(agent_id_, "-", registry_session_));
  welcome.mutable_welcome()->set_heartbeat_interval_ms(owner_->options_.heartbeat_interval_ms);
  Send(std::move(welcome));
  RequestNextLease();
  return true;
}

void AgentSessions::Peer::Result(const pb::BatchResult& r) {
  std::vector<MeasureOutcome> outcomes;
  int ok = 0, failed = 0, invalid_costs = 0;
  double limit_s = 0;  // a late result of an earlier lease: no limit known
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (r.batch_id() == current_batch_) limit_s = current_limit_s_;
  }
  for (const auto& m : r.results()) {
    // What an agent reports is checked here, once: an impossible cost is
    // that agent's error (the config is measured again).
    MeasureOutcome o = OutcomeFromProto(m, agent_id_, runs_for_, limit_s);
    if (o.error_kind == ErrorKind::kInvalidCost &&
        m.error_kind() != pb::MEASURE_ERROR_KIND_INVALID_COST) {
      ++invalid_costs;
    }
    (o.error_kind == ErrorKind::kNone ? ok : failed)++;
    outcomes.push_back(std::move(o));
  }
  owner_->agents_->Heartbeat(agent_id_);
  if (!owner_->dispatcher_->Complete(r.batch_id(), holder_, std::move(outcomes))) {
    Log()->info("ignored a late or unknown result for {} from '{}'", r.batch_id(), agent_id_);
  } else {
    owner_->agents_->RecordOutcomes(agent_id_, ok, failed, invalid_costs);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (r.batch_id() == current_batch_) current_batch_.clear();
  }
  owner_->agents_->SetInFlight(agent_id_, owner_->dispatcher_->InFlight(holder_));
  RequestNextLease();
}

void AgentSessions::Peer::RequestNextLease() {
  if (owner_->stopping_.load()) return;
  uint64_t before = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (finished_ || !welcomed_ || !current_batch_.empty() || request_id_ != 0 || requesting_) {
      return;
    }
    requesting_ = true;
    before = leases_received_;
  }
  // No work while in quarantine; the session stays open (Poll asks again).
  if (owner_->agents_->Quarantined(agent_id_)) {
    std::lock_guard<std::mutex> lock(mu_);
    requesting_ = false;
    return;
  }
  std::weak_ptr<Peer> weak = weak_from_this();
  const uint64_t id = owner_->dispatcher_->RequestLease(
      holder_, key_, target_, max_batch_,
      [weak, holder = holder_, dispatcher = owner_->dispatcher_](std::optional<Lease> lease) {
        if (auto self = weak.lock()) {
          self->OnLease(std::move(lease));
        } else if (lease.has_value()) {
          dispatcher->ReleaseAgent(holder);  // the session is gone: back to the queue
        }
      });
  bool withdraw = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    requesting_ = false;
    if (id != 0 && leases_received_ == before) {
      request_id_ = id;
      withdraw = finished_;  // the call ended meanwhile
    }
  }
  if (withdraw && owner_->dispatcher_->CancelRequest(id)) {
    std::lock_guard<std::mutex> lock(mu_);
    request_id_ = 0;
  }
}

void AgentSessions::Peer::OnLease(std::optional<Lease> lease) {
  bool give_back = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    request_id_ = 0;
    ++leases_received_;
    if (!lease.has_value()) return;  // dropped (shutdown): Poll asks again if need be
    if (finished_) {
      give_back = true;
    } else {
      current_batch_ = lease->work.batch_id;
      current_limit_s_ = CostLimitOf(lease->work);
    }
  }
  if (give_back) {
    owner_->dispatcher_->ReleaseAgent(holder_);
    return;
  }
  const MeasureWork& w = lease->work;
  if (w.model.has_value()) SendFiles(*w.model);
  pb::TrackerMessage msg;
  pb::MeasureBatch* b = msg.mutable_measure_batch();
  FillMeasureBatch(w, b);
  b->set_lease_deadline_unix_ms(lease->deadline_ms);
  owner_->agents_->SetInFlight(agent_id_, 1);
  Log()->debug("leased {} ({} candidates of {}) to '{}'", w.batch_id, w.candidates.size(),
               w.workload_key, agent_id_);
  Send(std::move(msg));
}

void AgentSessions::Peer::SendFiles(const ModelWork& model) {
  for (const ModelFile& f : model.files) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!files_sent_.insert(f.sha256).second) continue;  // once per session
    }
    std::ifstream in(f.path, std::ios::binary);
    int64_t offset = 0;
    std::string chunk(kFilePartBytes, '\0');
    // An empty file is one (last) part; a file that cannot be read ends
    // short, and the agent refuses it (its variants fail with that reason).
    do {
      in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
      const int64_t n = in ? static_cast<int64_t>(chunk.size()) : in.gcount();
      pb::TrackerMessage part;
      pb::FilePart* p = part.mutable_file_part();
      p->set_sha256(f.sha256);
      p->set_total_size(f.size);
      p->set_offset(offset);
      p->set_data(chunk.data(), static_cast<size_t>(n));
      offset += n;
      p->set_last(!in || offset >= f.size);
      Send(std::move(part));
      if (p->last()) break;
    } while (true);
  }
}

void AgentSessions::Peer::Poll() {
  // Batches of a cancelled job this session holds: the agent stops them.
  for (const std::string& id : owner_->dispatcher_->TakeCancelled(holder_)) {
    pb::TrackerMessage cancel;
    cancel.mutable_cancel()->set_batch_id(id);
    Send(std::move(cancel));
    std::lock_guard<std::mutex> lock(mu_);
    if (id == current_batch_) current_batch_.clear();
  }
  RequestNextLease();
}

// ------------------------------------------------------------ AgentSessions

AgentSessions::AgentSessions(AgentRegistry* agents, Dispatcher* dispatcher,
                             const Authenticator* auth, AgentSessionOptions options)
    : agents_(agents), dispatcher_(dispatcher), auth_(auth), options_(std::move(options)) {}

grpc::ServerBidiReactor<pb::AgentMessage, pb::TrackerMessage>* AgentSessions::Session(
    grpc::CallbackServerContext* ctx) {
  return new Reactor(this, ctx);
}

void AgentSessions::Tick(int64_t max_silence_ms) {
  std::vector<std::shared_ptr<Peer>> open;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [id, session] : sessions_) open.push_back(session);
  }
  const std::vector<std::string> silent = agents_->Silent(max_silence_ms);
  const std::set<std::string> quiet(silent.begin(), silent.end());
  for (const auto& session : open) {
    if (quiet.count(session->agent_id())) {
      // Its stream is open but nothing comes (a hung board, a dead link).
      Log()->warn("agent '{}' missed its heartbeats: closing its session", session->agent_id());
      session->Abort();
      continue;
    }
    session->Poll();
  }
}

void AgentSessions::Stop() { stopping_ = true; }

}  // namespace kiln::tracker
