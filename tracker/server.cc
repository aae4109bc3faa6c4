#include "tracker/server.h"

#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <thread>
#include <utility>

#include "base/check.h"
#include "base/names.h"
#include "base/net.h"
#include "base/pem.h"
#include "base/str.h"
#include "compiler/config.h"
#include "kiln/v1/agent.grpc.pb.h"
#include "kiln/v1/tracker.grpc.pb.h"
#include "spdlog/spdlog.h"
#include "storage/stores.h"
#include "storage/vocabulary.h"
#include "tracker/artifact_reader.h"
#include "tracker/end_to_end.h"
#include "tracker/record_query.h"
#include "tracker/rpc.h"

namespace kiln::tracker {
namespace {

namespace pb = ::kiln::v1;

using rpc::Authorization;
using rpc::ErrorKindToProto;
using rpc::FillConfig;
using rpc::Log;
using rpc::ToGrpc;

// A PEM file, or NOT_FOUND naming it.
absl::StatusOr<std::string> ReadPemOption(const std::string& path, const char* what) {
  if (auto pem = ReadPem(path)) return *std::move(pem);
  return absl::NotFoundError(StrCat("cannot read a PEM ", what, " from '", path, "'"));
}

// The server's TLS credentials from its options.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerTls(const TrackerOptions& o) {
  if (o.tls_cert.empty() || o.tls_key.empty()) {
    return absl::InvalidArgumentError("TLS needs both --tls-cert and --tls-key");
  }
  auto cert = ReadPemOption(o.tls_cert, "certificate");
  if (!cert.ok()) return cert.status();
  auto key = ReadPemOption(o.tls_key, "key");
  if (!key.ok()) return key.status();
  grpc::SslServerCredentialsOptions ssl(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  ssl.pem_key_cert_pairs.push_back({*key, *cert});
  if (!o.tls_client_ca.empty()) {
    auto ca = ReadPemOption(o.tls_client_ca, "client CA");
    if (!ca.ok()) return ca.status();
    ssl.pem_root_certs = *ca;
    // Verified when presented; agent sessions require one (users' clients
    // need none).
    ssl.client_certificate_request = GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  return grpc::SslServerCredentials(ssl);
}

void FillLatency(const tuner::LatencyStats& s, pb::ModelLatency* out) {
  out->set_median_s(s.median_s);
  out->set_p25_s(s.p25_s);
  out->set_p75_s(s.p75_s);
  out->set_rounds(s.rounds);
}

void FillEndToEnd(const EndToEndReport& r, pb::EndToEnd* out) {
  for (const EndToEndPoint& p : r.curve) {
    pb::EndToEndPoint* point = out->add_curve();
    point->set_trials(p.trials);
    FillLatency(p.untuned, point->mutable_untuned());
    FillLatency(p.tuned, point->mutable_tuned());
  }
  if (r.decided) {
    FillLatency(r.untuned, out->mutable_untuned());
    FillLatency(r.tuned, out->mutable_tuned());
  }
  out->set_returned_tuned(r.returned_tuned);
  out->set_note(r.note);
  out->set_tasks_reverted(r.tasks_reverted);
  out->set_tasks_tuned(r.tasks_tuned);
  out->set_threads(r.threads);
}

void FillJob(const JobStatus& s, pb::Job* out) {
  const storage::JobRow& r = s.row;
  out->set_job_id(r.id);
  out->set_owner(r.owner);
  out->set_model_name(ShownName(r.model_name));
  out->set_device_key(ShownName(r.device_key));
  out->mutable_target()->set_spec(r.target);
  out->set_state(rpc::JobStateToProto(r.state));
  out->set_trials(r.trials);
  out->set_trials_done(r.trials_done);
  for (const auto& t : s.tasks) {
    pb::TaskProgress* p = out->add_tasks();
    p->mutable_workload()->set_key(t.workload_key);
    p->mutable_workload()->set_op(t.op);
    p->mutable_workload()->set_canonical(t.canonical);
    p->mutable_workload()->set_flops(t.flops);
    p->set_trials_done(t.trials_done);
    p->set_best_cost_s(t.best_cost_s);
    p->set_errors(t.errors);
    p->set_occurrences(t.occurrences);
    p->set_state(std::string(NameOf(t.state)));
  }
  out->set_tuning_s(static_cast<double>(r.tuning_ms) / 1000.0);
  out->set_budget_s(s.budget_s);
  out->set_estimated_latency_s(s.EstimatedLatencyS());
  if (auto e2e = EndToEndFromJson(r.end_to_end_json); e2e.ok() && !r.end_to_end_json.empty()) {
    FillEndToEnd(*e2e, out->mutable_end_to_end());
  }
  out->set_error(r.error);
  out->set_artifact_sha256(r.artifact_sha256);
  out->set_created_unix_ms(r.created_unix_ms);
  out->set_updated_unix_ms(r.updated_unix_ms);
}

// ------------------------------------------------------------------ Tracker

class TrackerServiceImpl final : public pb::Tracker::Service {
 public:
  TrackerServiceImpl(JobManager* jobs, AgentRegistry* agents, const storage::Stores* db,
                     storage::ArtifactStore* store, const Authenticator* auth,
                     StreamLimiter* watches, StreamLimiter* uploads, UploadedModels* models,
                     const std::atomic<bool>* stopping)
      : jobs_(jobs),
        agents_(agents),
        db_(db),
        store_(store),
        auth_(auth),
        watches_(watches),
        uploads_(uploads),
        models_(models),
        stopping_(stopping) {}

  grpc::Status UploadModel(grpc::ServerContext* ctx, grpc::ServerReader<pb::ModelChunk>* reader,
                           pb::UploadModelResponse* resp) override {
    auto caller = CallerOf(ctx);
    if (!caller.ok()) return ToGrpc(caller.status());
    // A place among the open uploads (per user, in all), cancelled when no
    // chunk comes for the idle timeout; the upload's bytes count against
    // the user's quota until a job uses the model.
    auto slot = uploads_->Acquire(caller->user, [ctx] { ctx->TryCancel(); });
    if (!slot.ok()) return ToGrpc(slot.status());
    auto begun = jobs_->NewUpload();
    if (!begun.ok()) return ToGrpc(begun.status());
    ChargedUpload upload(*std::move(begun), models_, caller->user);
    auto refuse = [&](const absl::Status& st) {
      Log()->info("UploadModel of {} rejected after {} bytes: {}", caller->user, upload.size(),
                  st.ToString());
      return ToGrpc(st);  // the partial file goes with the upload, its bytes leave the quota
    };
    pb::ModelChunk chunk;
    while (reader->Read(&chunk)) {
      (*slot)->Touch();
      absl::Status st =
          upload.Add(chunk.data(), chunk.offset(), chunk.total_size(), chunk.sha256());
      if (!st.ok()) return refuse(st);
    }
    if ((*slot)->idle_cancelled()) {
      return refuse(absl::DeadlineExceededError(
          StrCat("no chunk came for ", uploads_->limits().idle_timeout_ms,
                 " ms: the upload was cancelled (kiln-tracker --upload-idle-timeout-ms)")));
    }
    if (ctx->IsCancelled()) return refuse(absl::CancelledError("the client cancelled the upload"));
    auto stored = upload.Finish();
    if (!stored.ok()) return refuse(stored.status());
    Log()->info("model {} uploaded ({} bytes{})", stored->sha256, stored->size,
                stored->already_stored ? ", already stored" : "");
    resp->set_sha256(stored->sha256);
    resp->set_size(stored->size);
    resp->set_already_stored(stored->already_stored);
    return grpc::Status::OK;
  }

  grpc::Status SubmitJob(grpc::ServerContext* ctx, const pb::SubmitJobRequest* req,
                         pb::SubmitJobResponse* resp) override {
    auto caller = CallerOf(ctx);
    if (!caller.ok()) return ToGrpc(caller.status());
    SubmitRequest r;
    r.owner = caller->user;
    r.model_sha256 = req->model_sha256();
    for (const pb::ExternalDataFile& f : req->external_data()) {
      if (!r.external_data.emplace(f.location(), f.sha256()).second) {
        return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                            StrCat("external data '", f.location(), "' is given twice"));
      }
    }
    for (const pb::InputShape& shape : req->input_shapes()) {
      if (!r.input_shapes
               .emplace(shape.name(),
                        std::vector<int64_t>(shape.dims().begin(), shape.dims().end()))
               .second) {
        return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                            StrCat("input shape '", shape.name(), "' is given twice"));
      }
    }
    r.model_name = req->model_name();
    r.target = req->target().spec();
    r.device_key = req->device_key();
    r.trials = req->trials();
    r.strategy = req->strategy();
    r.budget_s = req->budget_s();
    r.early_stopping = req->early_stopping();
    r.deadline_s = req->deadline_s();
    r.priority = req->priority();
    const pb::TimingPolicy& t = req->timing();
    r.timing.number = t.number();
    r.timing.repeat = t.repeat();
    r.timing.min_repeat_ms = t.min_repeat_ms();
    r.timing.cooldown_ms = t.cooldown_ms();
    r.timing.flush_cache = t.flush_cache();
    r.timing.model_bytes = std::max<int64_t>(0, t.model_bytes());
    r.timing.timeout_ms = t.timeout_ms();
    r.timing.threads = t.threads();
    r.skip_end_to_end = req->skip_end_to_end();
    r.precision = req->precision();
    auto result = jobs_->Submit(r);
    if (!result.ok()) {
      Log()->info("SubmitJob rejected: {}", result.status().ToString());
      return ToGrpc(result.status());
    }
    resp->set_job_id(result->job_id);
    resp->set_num_tasks(result->num_tasks);
    return grpc::Status::OK;
  }

  grpc::Status GetJob(grpc::ServerContext* ctx, const pb::GetJobRequest* req,
                      pb::Job* resp) override {
    auto s = VisibleJob(ctx, req->job_id());
    if (!s.ok()) return ToGrpc(s.status());
    FillJob(*s, resp);
    return grpc::Status::OK;
  }

  grpc::Status WatchJob(grpc::ServerContext* ctx, const pb::WatchJobRequest* req,
                        grpc::ServerWriter<pb::JobEvent>* writer) override {
    auto caller = CallerOf(ctx);
    if (!caller.ok()) return ToGrpc(caller.status());
    if (auto s = VisibleJob(ctx, req->job_id()); !s.ok()) return ToGrpc(s.status());
    // Each open watch holds a server thread: a bounded number per user and
    // in all. A client that goes away cancels the call, seen within one
    // wait below (250 ms); one whose host vanished, after the keepalive.
    auto slot = watches_->Acquire(caller->user, nullptr);
    if (!slot.ok()) return ToGrpc(slot.status());
    size_t next = 0;
    while (!ctx->IsCancelled() && !stopping_->load()) {
      bool finished = false;
      auto events =
          jobs_->WaitEvents(req->job_id(), &next, std::chrono::milliseconds(250), &finished);
      if (!events.ok()) return ToGrpc(events.status());
      for (const auto& e : *events) {
        pb::JobEvent ev;
        ev.set_unix_ms(e.unix_ms);
        ev.set_message(e.message);
        FillJob(e.job, ev.mutable_job());
        if (!writer->Write(ev)) return grpc::Status::OK;  // the client went away
      }

      if (finished) return grpc::Status::OK;
    }
    if (stopping_->load())
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "tracker is stopping");
    return grpc::Status::OK;
  }

  grpc::Status CancelJob(grpc::ServerContext* ctx, const pb::CancelJobRequest* req,
                         pb::Job* resp) override {
    if (auto s = VisibleJob(ctx, req->job_id()); !s.ok()) return ToGrpc(s.status());
    auto s = jobs_->Cancel(req->job_id());
    if (!s.ok()) return ToGrpc(s.status());
    FillJob(*s, resp);
    return grpc::Status::OK;
  }

  grpc::Status ListJobs(grpc::ServerContext* ctx, const pb::ListJobsRequest*,
                        pb::ListJobsResponse* resp) override {
    auto caller = CallerOf(ctx);
    if (!caller.ok()) return ToGrpc(caller.status());
    auto list = jobs_->List();
    if (!list.ok()) return ToGrpc(list.status());
    for (const auto& s : *list) {
      if (caller->MaySee(s.row.owner)) FillJob(s, resp->add_jobs());
    }
    return grpc::Status::OK;
  }

  grpc::Status ListAgents(grpc::ServerContext* ctx, const pb::ListAgentsRequest*,
                          pb::ListAgentsResponse* resp) override {
    if (auto caller = CallerOf(ctx); !caller.ok()) return ToGrpc(caller.status());
    for (const auto& a : agents_->List()) {
      pb::Agent* out = resp->add_agents();
      out->set_agent_id(a.id);
      out->set_device_key(a.device_key);
      out->mutable_target()->set_spec(a.target);
      out->set_hardware(a.hardware);
      out->set_peak_gflops(a.peak_gflops);
      out->set_compiler_version(a.compiler_version);
      out->set_connected(a.connected);
      out->set_last_seen_unix_ms(a.last_seen_unix_ms);
      out->set_in_flight(a.connected ? a.in_flight : 0);
      out->set_results(a.results);
      out->set_consecutive_failures(a.consecutive_failures);
      if (agents_->Quarantined(a.id)) {
        out->set_quarantined_until_unix_ms(a.quarantined_until_unix_ms);
        out->set_quarantine_reason(a.quarantine_reason);
      }
    }
    return grpc::Status::OK;
  }

  grpc::Status QueryRecords(grpc::ServerContext* ctx, const pb::QueryRecordsRequest* req,
                            pb::QueryRecordsResponse* resp) override {
    auto caller = CallerOf(ctx);
    if (!caller.ok()) return ToGrpc(caller.status());
    if (!req->job_id().empty()) {
      if (auto s = VisibleJob(ctx, req->job_id()); !s.ok()) return ToGrpc(s.status());
    }
    RecordQuery query;
    query.workload_key = req->workload_key();
    query.target = req->target();
    query.job_id = req->job_id();
    query.limit = req->limit();
    query.page_token = req->page_token();
    auto page = QueryVisibleRecords(*db_, *caller, query);
    if (!page.ok()) return ToGrpc(page.status());
    resp->set_next_page_token(page->next_page_token);
    for (const RecordEntry& e : page->records) {
      const storage::RecordRow& r = e.record;
      pb::TuningRecord* out = resp->add_records();
      out->mutable_workload()->set_key(r.workload_key);
      if (e.workload.has_value()) {
        out->mutable_workload()->set_op(e.workload->op);
        out->mutable_workload()->set_canonical(e.workload->canonical);
        out->mutable_workload()->set_flops(e.workload->flops);
      }
      out->set_target(r.target);
      auto config = compiler::ParseConfig(r.config);
      if (config.ok()) {
        FillConfig(*config, out->mutable_config());
      } else {
        out->mutable_config()->set_canonical(r.config);
      }
      pb::MeasureResult* m = out->mutable_result();
      m->set_error_kind(ErrorKindToProto(r.error_kind));
      m->set_error_message(r.error_message);
      for (double c : r.costs_s) m->add_costs_s(c);
      m->set_agent_id(r.agent_id);
      out->set_mean_cost_s(r.mean_cost_s);
      out->set_compiler_version(r.compiler_version);
      out->set_unix_ms(r.unix_ms);
      out->set_farm(r.farm);
    }
    return grpc::Status::OK;
  }

  grpc::Status FetchArtifact(grpc::ServerContext* ctx, const pb::FetchArtifactRequest* req,
                             grpc::ServerWriter<pb::ArtifactChunk>* writer) override {
    auto s = VisibleJob(ctx, req->job_id());
    if (!s.ok()) return ToGrpc(s.status());
    if (s->row.artifact_sha256.empty()) {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                          StrCat("job '", req->job_id(), "' has no artifact (state ",
                                 storage::JobStateName(s->row.state), ")"));
    }
    // In chunks (an artifact may be hundreds of megabytes), hashed on the
    // way (tracker/artifact_reader.h).
    auto reader = ArtifactReader::Open(*store_, s->row.artifact_sha256);
    if (!reader.ok()) {
      Log()->error("fetch of job {}: {}", req->job_id(), reader.status().ToString());
      return ToGrpc(reader.status());
    }
    while (!(*reader)->done()) {
      if (ctx->IsCancelled()) return grpc::Status::CANCELLED;
      auto next = (*reader)->Next();
      if (!next.ok()) return ToGrpc(next.status());
      pb::ArtifactChunk chunk;
      chunk.set_offset(next->offset);
      chunk.set_total_size((*reader)->total_size());
      if (next->last) chunk.set_sha256(s->row.artifact_sha256);
      chunk.set_data(std::move(next->data));
      if (!writer->Write(chunk)) return grpc::Status::OK;
    }
    return grpc::Status::OK;
  }

 private:
  // The caller of a Tracker call; an agent's token is for agent sessions only.
  absl::StatusOr<Caller> CallerOf(const grpc::ServerContext* ctx) const {
    auto caller = auth_->Authenticate(Authorization(ctx));
    if (!caller.ok()) return caller.status();
    if (caller->role == storage::Role::kAgent) {
      return absl::PermissionDeniedError(
          StrCat("token ", caller->token_id, " is an agent's: it opens agent sessions only"));
    }
    return caller;
  }
  // A job the caller may see; another user's is NOT_FOUND, worded as an
  // unknown one's (no existence leak).
  absl::StatusOr<JobStatus> VisibleJob(const grpc::ServerContext* ctx, const std::string& id) {
    auto caller = CallerOf(ctx);
    if (!caller.ok()) return caller.status();
    auto s = jobs_->Get(id);
    if (s.ok() && !caller->MaySee(s->row.owner)) {
      return absl::NotFoundError(StrCat("unknown job '", id, "'"));
    }
    return s;
  }

  JobManager* jobs_;
  AgentRegistry* agents_;
  const storage::Stores* db_;
  storage::ArtifactStore* store_;
  const Authenticator* auth_;
  StreamLimiter* watches_;
  StreamLimiter* uploads_;
  UploadedModels* models_;
  const std::atomic<bool>* stopping_;
};

}  // namespace

TrackerServer::TrackerServer(TrackerOptions options) : options_(std::move(options)) {}

TrackerServer::~TrackerServer() { Stop(); }

namespace {

// A tracker's id among those sharing one database: host, process and a
// random part (a restarted tracker is a new one).
std::string NewTrackerId() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) std::snprintf(host, sizeof host, "tracker");
  std::random_device rd;
  char tail[16];
  std::snprintf(tail, sizeof tail, "%06x", rd() & 0xffffff);
  return StrCat(host, "-", getpid(), "-", tail);
}

}  // namespace

absl::StatusOr<int> TrackerServer::Start() {
  KILN_CHECK(server_ == nullptr) << "TrackerServer started twice";
  if (options_.db_path.empty()) return absl::InvalidArgumentError("--db is required");
  if (options_.artifacts_dir.empty()) return absl::InvalidArgumentError("--artifacts is required");
  if (!IsLoopbackAddress(options_.listen) && !options_.require_auth && !options_.allow_anonymous) {
    return absl::FailedPreconditionError(StrCat(
        "listening on ", options_.listen,
        " (beyond this machine) without authentication: pass --require-auth (and create tokens "
        "with kiln-tracker tokens create), or --allow-anonymous to let anyone who reaches the "
        "port submit, read and cancel jobs"));
  }
  if (!options_.http_listen.empty() && !IsLoopbackAddress(options_.http_listen) &&
      !options_.require_auth && !options_.allow_anonymous) {
    return absl::FailedPreconditionError(
        StrCat("serving the status page on ", options_.http_listen,
               " (beyond this machine) without authentication: pass --require-auth, or "
               "--allow-anonymous to show every job to anyone who reaches the port"));
  }
  auto db = storage::OpenStores(options_.db_path);
  if (!db.ok()) return db.status();
  db_ = std::move(*db);
  auto store = storage::ArtifactStore::Open(options_.artifacts_dir);
  if (!store.ok()) return store.status();
  store_ = std::move(*store);
  agents_ = std::make_unique<AgentRegistry>(db_.farm.get(), &clock_);
  if (absl::Status st = agents_->Load(); !st.ok()) return st;
  DispatcherOptions dopts;
  dopts.lease_timeout_ms = options_.lease_timeout_ms;
  dopts.user_weights = options_.user_weights;
  dopts.metrics = &metrics_;
  dispatcher_ = std::make_unique<Dispatcher>(&clock_, dopts);
  JobManagerOptions jopts = options_.jobs;
  jopts.db_path = options_.db_path;
  // On PostgreSQL any number of trackers may share the database: each holds
  // the jobs it runs by lease and relays batches to the others' agents.
  const bool shared = db_.farm->SharedByTrackers();
  if (shared && jopts.tracker_id.empty()) jopts.tracker_id = NewTrackerId();
  if (!jopts.tracker_id.empty()) {
    Log()->info("tracker {}: one of the trackers sharing this database", jopts.tracker_id);
  }
  jopts.artifacts_dir = options_.artifacts_dir;
  jobs_ = std::make_unique<JobManager>(db_.tuning.get(), db_.farm.get(), store_.get(),
                                       agents_.get(), dispatcher_.get(), &clock_, jopts);

  auth_ = std::make_unique<Authenticator>(db_.farm.get(), options_.require_auth);
  watches_ = std::make_unique<StreamLimiter>("WatchJob streams", "--max-watches-per-user",
                                             "--max-watches", options_.watch_limits, &clock_);
  uploads_ = std::make_unique<StreamLimiter>("uploads", "--max-uploads-per-user", "--max-uploads",
                                             options_.upload_limits, &clock_);
  uploaded_models_ = std::make_unique<UploadedModels>(db_.farm.get(), store_.get(), &clock_,
                                                      options_.uploaded_models);
  // Uploads no job used, left by earlier runs.
  if (auto n = uploaded_models_->Collect(); !n.ok()) {
    Log()->warn("cannot collect unused models: {}", n.status().ToString());
  }
  tracker_service_ = std::make_unique<TrackerServiceImpl>(
      jobs_.get(), agents_.get(), &db_, store_.get(), auth_.get(), watches_.get(), uploads_.get(),
      uploaded_models_.get(), &stopping_);
  AgentSessionOptions sopts;
  sopts.require_certificate = !options_.tls_client_ca.empty();
  sopts.admission.token = options_.token;
  sopts.heartbeat_interval_ms = options_.heartbeat_interval_ms;
  sopts.admission.shared_keys = options_.shared_keys;
  agent_service_ =
      std::make_unique<AgentSessions>(agents_.get(), dispatcher_.get(), auth_.get(), sopts);
  grpc::ServerBuilder builder;
  std::shared_ptr<grpc::ServerCredentials> credentials = grpc::InsecureServerCredentials();
  if (!options_.tls_cert.empty() || !options_.tls_key.empty()) {
    auto tls = ServerTls(options_);
    if (!tls.ok()) return tls.status();
    credentials = *std::move(tls);
  }
  builder.AddListeningPort(options_.listen, credentials, &port_);
  // Agents ping every 10 s to find dead links (device_agent/session.h);
  // gRPC's default would answer pings more often than every 5 minutes with
  // GOAWAY.
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 5000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  // The tracker pings its clients too: streams of a client that vanished
  // without closing its connection end (and free their threads).
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, options_.keepalive_time_ms);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, options_.keepalive_timeout_ms);
  // Also on a stream that sends nothing for long (a watch of a queued job):
  // by default only two pings go out without data.
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  builder.SetMaxReceiveMessageSize(options_.max_receive_bytes);
  builder.SetMaxSendMessageSize(options_.max_receive_bytes);
  builder.RegisterService(tracker_service_.get());
  builder.RegisterService(agent_service_.get());
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || port_ == 0) {
    server_.reset();
    return absl::UnavailableError(StrCat("cannot listen on ", options_.listen));
  }
  if (absl::Status st = jobs_->Start(); !st.ok()) {
    Stop();
    return st;
  }
  if (!jopts.tracker_id.empty()) {
    RelayOptions ropts;
    ropts.tracker_id = jopts.tracker_id;
    relay_ =
        std::make_unique<Relay>(db_.farm.get(), dispatcher_.get(), agents_.get(), &clock_, ropts);
    relay_->Start();
  }
  if (!options_.http_listen.empty()) {
    http_ = std::make_unique<HttpServer>(HttpDeps{jobs_.get(), agents_.get(), dispatcher_.get(),
                                                  &metrics_, auth_.get(), &clock_,
                                                  options_.http_limits});
    auto http_port = http_->Start(options_.http_listen);
    if (!http_port.ok()) {
      Stop();
      return http_port.status();
    }
    http_port_ = *http_port;
  }
  reaper_ = std::thread([this] {
    int64_t last_gc_ms = clock_.NowMs();
    for (int tick = 0; !stopping_; ++tick) {
      // Uploads that stopped sending chunks are cancelled (their handler
      // then removes the partial file).
      if (int n = uploads_->CancelIdle(); n > 0) Log()->info("{} idle uploads cancelled", n);
      if (options_.model_gc_interval_ms > 0 &&
          clock_.NowMs() - last_gc_ms >= options_.model_gc_interval_ms) {
        last_gc_ms = clock_.NowMs();
        if (auto n = uploaded_models_->Collect(); !n.ok()) {
          Log()->warn("cannot collect unused models: {}", n.status().ToString());
        }
      }
      if (tick % 5 == 0) {
        int n = dispatcher_->ExpireLeases();
        if (n > 0) Log()->warn("{} leases expired and were requeued", n);
        agents_->PersistStale();
      }
      // An agent whose stream stays open but who sends nothing (hung board,
      // half-open connection) loses its session after three intervals.
      agent_service_->Tick(3 * int64_t{options_.heartbeat_interval_ms});
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  return port_;
}

void TrackerServer::Stop() {
  if (stopping_.exchange(true)) return;
  if (http_) http_->Stop();
  if (agent_service_) agent_service_->Stop();
  if (relay_) relay_->Stop();
  if (dispatcher_) dispatcher_->Wake();
  if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  if (jobs_) jobs_->Stop();
  if (reaper_.joinable()) reaper_.join();
  if (server_) server_->Wait();
}

}  // namespace kiln::tracker
