#include "device_agent/session.h"

#include <unistd.h>

#include <algorithm>
#include <deque>
#include <filesystem>
#include <set>
#include <thread>

#include "base/net.h"
#include "base/str.h"
#include "device_agent/file_store.h"
#include "device_agent/log.h"

namespace kiln::agent {
namespace {

using kiln::v1::AgentMessage;
using kiln::v1::TrackerMessage;

int64_t UnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string CodeName(absl::StatusCode code) { return absl::StatusCodeToString(code); }

absl::Status FromGrpc(const grpc::Status& s) {
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
}

}  // namespace

std::string DefaultAgentId() {
  char host[256] = {0};
  if (::gethostname(host, sizeof(host) - 1) != 0) std::snprintf(host, sizeof(host), "agent");
  return StrCat(host, "-", ::getpid());
}

AgentSession::AgentSession(AgentOptions options, CandidateMeasurer measurer,
                           ModelMeasurer model_measurer)
    : options_(std::move(options)),
      measurer_(std::move(measurer)),
      model_measurer_(std::move(model_measurer)) {
  if (options_.files_dir.empty()) {
    options_.files_dir = StrCat(std::filesystem::temp_directory_path().string(), "/kiln-agent-",
                                ::getpid(), "-files");
  }
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 200);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 5000);
  // A link that dies without a word (a dropped route, a dead NAT entry)
  // leaves the session's stream open forever: HTTP/2 pings unanswered for
  // kKeepaliveTimeoutMs end it, and the agent dials again. (The tracker
  // lets agents ping this often.)
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, kKeepaliveTimeMs);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, kKeepaliveTimeoutMs);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (!options_.tls_ca_pem.empty()) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = options_.tls_ca_pem;
    ssl.pem_cert_chain = options_.tls_cert_pem;
    ssl.pem_private_key = options_.tls_key_pem;
    credentials = grpc::SslCredentials(ssl);
  }
  // Several trackers of one farm: the channel fails over along the list.
  const std::vector<std::string> trackers = SplitAddresses(options_.tracker);
  if (trackers.size() > 1) args.SetString(GRPC_ARG_DEFAULT_AUTHORITY, trackers[0]);
  channel_ = grpc::CreateCustomChannel(ChannelTarget(options_.tracker), credentials, args);
}

AgentSession::~AgentSession() { Stop(); }

void AgentSession::Stop() {
  std::lock_guard<std::mutex> lock(mu_);
  stop_.store(true);
  if (context_ != nullptr) context_->TryCancel();
  stop_cv_.notify_all();
}

absl::Status AgentSession::Run() {
  std::chrono::milliseconds backoff = options_.initial_backoff;
  while (!stopping()) {
    if (options_.before_session) {
      if (absl::Status ready = options_.before_session(); !ready.ok()) {
        Log()->warn("not joining the farm yet: {} (trying again in {} ms)",
                    std::string(ready.message()), backoff.count());
        std::unique_lock<std::mutex> lock(mu_);
        stop_cv_.wait_for(lock, backoff, [&] { return stopping(); });
        backoff = std::min(options_.max_backoff, backoff * 2);
        continue;
      }
    }
    bool welcomed = false;
    sessions_tried_.fetch_add(1);
    absl::Status s = RunOnce(&welcomed);
    if (stopping()) break;
    if (!welcomed && (s.code() == absl::StatusCode::kUnauthenticated ||
                      s.code() == absl::StatusCode::kInvalidArgument ||
                      s.code() == absl::StatusCode::kPermissionDenied)) {
      Log()->error("tracker {} rejected this agent ({}: {})", options_.tracker, CodeName(s.code()),
                   std::string(s.message()));
      return s;
    }
    if (welcomed) backoff = options_.initial_backoff;
    if (!welcomed && s.code() == absl::StatusCode::kUnavailable) {
      Log()->warn("tracker {} does not answer (UNAVAILABLE): retrying in {} ms", options_.tracker,
                  backoff.count());
    } else {
      Log()->warn("session with tracker {} ended ({}: {}): reconnecting in {} ms", options_.tracker,
                  CodeName(s.code()), std::string(s.message()), backoff.count());
    }
    std::unique_lock<std::mutex> lock(mu_);
    stop_cv_.wait_for(lock, backoff, [&] { return stopping(); });
    backoff = std::min(options_.max_backoff, backoff * 2);
  }
  return absl::OkStatus();
}

absl::Status AgentSession::RunOnce(bool* welcomed) {
  *welcomed = false;
  grpc::ClientContext ctx;
  if (!options_.bearer_token.empty()) {
    ctx.AddMetadata("authorization", "Bearer " + options_.bearer_token);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping()) return absl::CancelledError("agent stopping");
    context_ = &ctx;
  }
  struct ClearContext {
    AgentSession* self;
    ~ClearContext() {
      std::lock_guard<std::mutex> lock(self->mu_);
      self->context_ = nullptr;
    }
  } clear{this};

  std::unique_ptr<kiln::v1::AgentSession::Stub> stub = kiln::v1::AgentSession::NewStub(channel_);
  std::unique_ptr<grpc::ClientReaderWriter<AgentMessage, TrackerMessage>> stream =
      stub->Session(&ctx);

  AgentMessage hello_msg;
  kiln::v1::Hello* hello = hello_msg.mutable_hello();
  hello->set_agent_id(options_.agent_id);
  hello->set_device_key(options_.device_key);
  hello->mutable_target()->set_spec(options_.target_spec);
  hello->set_hardware(options_.hardware);
  hello->set_peak_gflops(options_.peak_gflops);
  hello->set_compiler_version(options_.compiler_version);
  hello->set_token(options_.token);
  hello->set_max_batch(options_.max_batch);
  TrackerMessage msg;
  if (!stream->Write(hello_msg) || !stream->Read(&msg)) {
    stream->WritesDone();
    return FromGrpc(stream->Finish());
  }
  if (!msg.has_welcome()) {
    ctx.TryCancel();
    stream->Finish();
    return absl::InternalError("the tracker did not answer Hello with Welcome");
  }
  *welcomed = true;
  sessions_welcomed_.fetch_add(1);
  const int interval_ms =
      msg.welcome().heartbeat_interval_ms() > 0 ? msg.welcome().heartbeat_interval_ms() : 1000;
  Log()->info("connected to tracker {} as {} (key {}, session {}, heartbeat {} ms)",
              options_.tracker, options_.agent_id, options_.device_key, msg.welcome().session_id(),
              interval_ms);

  // The files of whole-model batches, for this session.
  FileStore files(options_.files_dir, options_.max_model_bytes);
  // State shared by the reader (this thread), the heartbeat thread and the
  // measuring thread (`files` too: under state_mu).
  std::mutex state_mu;
  std::condition_variable state_cv;
  bool session_over = false;
  std::deque<kiln::v1::MeasureBatch> queue;
  std::set<std::string> cancelled;
  std::atomic<int> in_flight{0};
  std::mutex write_mu;  // one Write at a time

  std::thread heartbeat([&] {
    std::unique_lock<std::mutex> lock(state_mu);
    while (!session_over) {
      if (state_cv.wait_for(lock, std::chrono::milliseconds(interval_ms),
                            [&] { return session_over; })) {
        break;
      }
      lock.unlock();
      AgentMessage hb;
      hb.mutable_heartbeat()->set_unix_ms(UnixMs());
      hb.mutable_heartbeat()->set_in_flight(in_flight.load());
      {
        std::lock_guard<std::mutex> w(write_mu);
        stream->Write(hb);
      }
      lock.lock();
    }
  });

  // A whole-model batch: its files must have come whole and checked.
  auto measure_model = [&](const kiln::v1::MeasureBatch& batch) {
    std::string missing;
    {
      std::lock_guard<std::mutex> lock(state_mu);
      if (!files.Has(batch.model().model_sha256())) missing = batch.model().model_sha256();
      for (const kiln::v1::ExternalFile& f : batch.model().external_data()) {
        if (!files.Has(f.sha256())) missing = f.sha256();
      }
    }
    std::vector<kiln::v1::MeasureResult> results;
    if (missing.empty() && model_measurer_) {
      results = model_measurer_(batch);
    } else {
      kiln::v1::MeasureResult error;
      error.set_error_kind(kiln::v1::MEASURE_ERROR_KIND_RUNTIME);
      error.set_error_message(model_measurer_
                                  ? StrCat("the model's file ", missing, " did not arrive whole")
                                  : std::string("this agent does not measure whole models"));
      results.assign(static_cast<size_t>(batch.candidates_size()), error);
    }
    results.resize(static_cast<size_t>(batch.candidates_size()));
    for (int i = 0; i < batch.candidates_size(); ++i) {
      results[static_cast<size_t>(i)].set_candidate_id(batch.candidates(i).candidate_id());
    }
    return results;
  };
  std::thread measurer([&] {
    while (true) {
      kiln::v1::MeasureBatch batch;
      {
        std::unique_lock<std::mutex> lock(state_mu);
        state_cv.wait(lock, [&] { return session_over || !queue.empty(); });
        if (session_over) return;
        batch = std::move(queue.front());
        queue.pop_front();
      }
      auto is_cancelled = [&] {
        std::lock_guard<std::mutex> lock(state_mu);
        return session_over || cancelled.count(batch.batch_id()) > 0;
      };
      // AGENT_LOST (a board agent's board gone) is not the candidates'
      // doing: the session ends unanswered, and the batch goes back to the
      // tracker's queue.
      auto leave = [&](const kiln::v1::MeasureResult& lost) {
        Log()->warn("{}: leaving the tracker's session, batch {} goes back to its queue",
                    lost.error_message(), batch.batch_id());
        ctx.TryCancel();
      };
      AgentMessage reply;
      kiln::v1::BatchResult* result = reply.mutable_batch_result();
      result->set_batch_id(batch.batch_id());
      bool dropped = false;
      if (batch.has_model()) {  // every variant at once, interleaved
        std::vector<kiln::v1::MeasureResult> results = measure_model(batch);
        auto lost = std::find_if(results.begin(), results.end(), [](const auto& r) {
          return r.error_kind() == kiln::v1::MEASURE_ERROR_KIND_AGENT_LOST;
        });
        if (lost != results.end()) return leave(*lost);
        for (kiln::v1::MeasureResult& r : results) {
          r.set_agent_id(options_.agent_id);
          *result->add_results() = std::move(r);
        }
        in_flight.fetch_sub(batch.candidates_size());
        dropped = is_cancelled();
      }
      for (int i = result->results_size(); i < batch.candidates_size(); ++i) {
        if (is_cancelled()) {
          dropped = true;
          break;
        }
        kiln::v1::MeasureResult r = measurer_(batch, i);
        if (r.error_kind() == kiln::v1::MEASURE_ERROR_KIND_AGENT_LOST) return leave(r);
        r.set_candidate_id(batch.candidates(i).candidate_id());
        r.set_agent_id(options_.agent_id);
        *result->add_results() = std::move(r);
        in_flight.fetch_sub(1);
      }
      if (dropped) {
        in_flight.fetch_sub(batch.candidates_size() - result->results_size());
        Log()->info("batch {} cancelled after {}/{} candidates", batch.batch_id(),
                    result->results_size(), batch.candidates_size());
        continue;
      }
      {
        std::lock_guard<std::mutex> w(write_mu);
        if (!stream->Write(reply)) return;
      }
      batches_done_.fetch_add(1);
    }
  });

  while (stream->Read(&msg)) {
    if (msg.has_file_part()) {
      std::lock_guard<std::mutex> lock(state_mu);
      if (absl::Status s = files.Add(msg.file_part()); !s.ok()) {
        Log()->warn("file from the tracker refused: {}", std::string(s.message()));
      } else if (msg.file_part().last()) {
        Log()->info("received file {} ({} bytes)", msg.file_part().sha256(),
                    msg.file_part().total_size());
      }
    } else if (msg.has_measure_batch()) {
      Log()->info("batch {}: {} candidates of {}", msg.measure_batch().batch_id(),
                  msg.measure_batch().candidates_size(), msg.measure_batch().workload().key());
      std::lock_guard<std::mutex> lock(state_mu);
      in_flight.fetch_add(msg.measure_batch().candidates_size());
      queue.push_back(std::move(*msg.mutable_measure_batch()));
      state_cv.notify_all();
    } else if (msg.has_cancel()) {
      std::lock_guard<std::mutex> lock(state_mu);
      cancelled.insert(msg.cancel().batch_id());
      for (auto it = queue.begin(); it != queue.end();) {
        if (it->batch_id() == msg.cancel().batch_id()) {
          in_flight.fetch_sub(it->candidates_size());
          it = queue.erase(it);
        } else {
          ++it;
        }
      }
    } else if (msg.has_welcome()) {
      Log()->warn("ignoring a second Welcome");
    }
  }
  {
    std::lock_guard<std::mutex> lock(state_mu);
    session_over = true;
    state_cv.notify_all();
  }
  heartbeat.join();
  measurer.join();
  return FromGrpc(stream->Finish());
}

}  // namespace kiln::agent
