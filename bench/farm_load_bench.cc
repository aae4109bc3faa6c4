// Farm load (issues 8 and 11): a real kiln-tracker (a child process on loopback
// with its own database), --agents fake agents in this process that answer
// every batch at once with made-up costs, and --jobs concurrent jobs with
// distinct models (random search: the farm's plumbing is measured, not a cost
// model). Over a window of --seconds (after a warm-up) it prints
//
//   measurements_per_s=   candidates answered by all agents per second
//   p50_added_ms= p99_added_ms=   per agent, the time from sending a result
//                                 to receiving its next batch: what the
//                                 tracker adds (the agents answer at once)
//   tracker_cpu_cores=    the tracker's CPU time over the window's length
//   tracker_rss_mb=       at the window's start and end (flat or growing)
//   records=              rows in the log database at the end, against the
//                         candidates the agents answered (nothing lost)
//
// and the targets beside them (>= 5,000 measurements/s, p99 <= 10 ms).
//
// Agents that answer at once keep the farm saturated: every agent always
// waits for the tracker, so the added time is then the agents' turn in a
// full queue (agents x batch / throughput, printed as closed_loop_ms=), not
// the tracker's per-result work. --agent-ms makes every agent take that long
// per batch before it answers, to offer less than the tracker can serve and
// see what it adds to each result then.
//
// With --postgres (a server's URI without a database: scripts/pg-scratch
// starts one) the same load runs, in the same invocation, on a fresh
// PostgreSQL database with one tracker and with three trackers sharing it
// (agents spread over them, jobs submitted to the first), and the table puts
// the three side by side.
//
//   build/bench/farm_load_bench [--agents 200] [--jobs 20] [--seconds 30]
//       [--warmup 5] [--agent-ms 0] [--tracker-bin build/tracker/kiln-tracker]
//       [--postgres postgresql://kiln@127.0.0.1:PORT]
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/cpus.h"
#include "base/flags.h"
#include "base/sha256.h"
#include "base/str.h"
#include "compiler/target.h"
#include "kiln/v1/agent.grpc.pb.h"
#include "kiln/v1/tracker.grpc.pb.h"
#include "onnx/onnx_pb.h"
#include "storage/database.h"
#include "storage/tuning_db.h"

namespace {

namespace fs = std::filesystem;
namespace pb = ::kiln::v1;
using Clock = std::chrono::steady_clock;
constexpr const char* kKey = "load";

// A chain of three convolutions whose image size depends on `j`, so that
// every job has its own tuning tasks (three each). Channel counts with many
// divisors give each task a space of thousands of configs: no job runs out
// of configs (and goes on to its final compile) within a run.
std::string Model(int j) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name(kiln::StrCat("load_", j));
  auto info = [](onnx::ValueInfoProto* v, const std::string& name, std::vector<int64_t> dims) {
    v->set_name(name);
    auto* t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims) t->mutable_shape()->add_dim()->set_dim_value(d);
  };
  const int64_t c[4] = {3, 64, 96, 128};
  const int64_t hw = 28 + 2 * j;
  info(g->add_input(), "x0", {1, c[0], hw, hw});
  info(g->add_output(), "x3", {1, c[3], hw, hw});
  for (int l = 0; l < 3; ++l) {
    onnx::TensorProto* w = g->add_initializer();
    w->set_name(kiln::StrCat("w", l));
    w->set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : {c[l + 1], c[l], int64_t{3}, int64_t{3}}) w->add_dims(d);
    for (int64_t i = 0; i < c[l + 1] * c[l] * 9; ++i) w->add_float_data(0.01f);
    onnx::NodeProto* conv = g->add_node();
    conv->set_op_type("Conv");
    conv->add_input(kiln::StrCat("x", l));
    conv->add_input(kiln::StrCat("w", l));
    conv->add_output(kiln::StrCat("x", l + 1));
    onnx::AttributeProto* pads = conv->add_attribute();
    pads->set_name("pads");
    pads->set_type(onnx::AttributeProto::INTS);
    for (int i = 0; i < 4; ++i) pads->add_ints(1);
  }
  return m.SerializeAsString();
}

// One fake agent: a session that answers each batch at once.
class Agent {
 public:
  Agent(std::shared_ptr<grpc::Channel> channel, int id)
      : stub_(pb::AgentSession::NewStub(channel)), id_(id) {}

  bool Connect() {
    stream_ = stub_->Session(&ctx_);
    pb::AgentMessage hello;
    auto* h = hello.mutable_hello();
    h->set_agent_id(kiln::StrCat("load-", id_));
    h->set_device_key(kKey);
    h->mutable_target()->set_spec(kiln::compiler::Target::Host().Spec());
    h->set_hardware("fake agent of farm_load_bench");
    h->set_compiler_version(KILN_VERSION);
    if (!stream_->Write(hello)) return false;
    pb::TrackerMessage reply;
    return stream_->Read(&reply) && reply.has_welcome();
  }

  void Serve(const std::atomic<bool>* counting, std::chrono::milliseconds busy) {
    thread_ = std::thread([this, counting, busy] {
      std::mt19937 rng(static_cast<unsigned>(id_));
      std::uniform_real_distribution<double> cost(1e-3, 2e-3);
      pb::TrackerMessage msg;
      Clock::time_point sent{};
      while (stream_->Read(&msg)) {
        if (!msg.has_measure_batch()) continue;
        const auto now = Clock::now();
        const bool count = counting->load();
        if (count && sent != Clock::time_point{}) {
          added_ms_.push_back(std::chrono::duration<double, std::milli>(now - sent).count());
        }
        const auto& b = msg.measure_batch();
        if (busy.count() > 0) std::this_thread::sleep_for(busy);  // "measuring"
        pb::AgentMessage out;
        auto* r = out.mutable_batch_result();
        r->set_batch_id(b.batch_id());
        for (const auto& c : b.candidates()) {
          auto* m = r->add_results();
          m->set_candidate_id(c.candidate_id());
          m->set_error_kind(pb::MEASURE_ERROR_KIND_NONE);
          m->add_costs_s(cost(rng));
        }
        if (count) answered_ += b.candidates_size();
        total_ += b.candidates_size();
        {
          std::lock_guard<std::mutex> lock(write_mu_);
          if (!stream_->Write(out)) break;
        }
        sent = Clock::now();
      }
    });
  }

  void Heartbeat() {
    pb::AgentMessage hb;
    hb.mutable_heartbeat();
    std::lock_guard<std::mutex> lock(write_mu_);
    if (stream_) stream_->Write(hb);
  }

  void Stop() {
    ctx_.TryCancel();
    if (thread_.joinable()) thread_.join();
  }

  std::vector<double> added_ms_;  // read after Stop
  std::atomic<int64_t> answered_{0};
  std::atomic<int64_t> total_{0};

 private:
  std::unique_ptr<pb::AgentSession::Stub> stub_;
  int id_;
  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::ClientReaderWriter<pb::AgentMessage, pb::TrackerMessage>> stream_;
  std::mutex write_mu_;
  std::thread thread_;
};

// VmRSS of a process in MiB, and its CPU seconds (user + system).
double RssMb(pid_t pid) {
  std::ifstream in(kiln::StrCat("/proc/", pid, "/status"));
  std::string key;
  while (in >> key) {
    if (key == "VmRSS:") {
      double kb = 0;
      in >> kb;
      return kb / 1024.0;
    }
  }
  return 0;
}
double CpuSeconds(pid_t pid) {
  std::ifstream in(kiln::StrCat("/proc/", pid, "/stat"));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t close = text.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream rest(text.substr(close + 2));
  std::string field;
  double utime = 0, stime = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i == 14) utime = std::stod(field);
    if (i == 15) stime = std::stod(field);
  }
  return (utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

int Fail(const std::string& why) {
  std::fprintf(stderr, "farm_load_bench: %s\n", why.c_str());
  return 1;
}

struct LoadConfig {
  std::string tracker_bin;
  std::string db;  // "" : a SQLite file in the run's folder; else a PostgreSQL URI
  int trackers = 1;
  int64_t agents = 200, jobs = 20, seconds = 30, warmup = 5, agent_ms = 0;
};

struct LoadFigures {
  double per_s = 0, p50 = 0, p90 = 0, p99 = 0, closed_loop = 0, cpu = 0;
  double rss_start = 0, rss_end = 0, rss_max = 0, window = 0;
  int64_t records = -1, total = 0;
};

// One run: the trackers (child processes on one database), the fake agents
// spread over them, the jobs submitted to the first.
absl::StatusOr<LoadFigures> RunLoad(const LoadConfig& cfg) {
  std::string tmpl = (fs::temp_directory_path() / "kiln-farm-load-XXXXXX").string();
  if (::mkdtemp(tmpl.data()) == nullptr) return absl::InternalError("mkdtemp failed");
  const fs::path dir = tmpl;
  const std::string db = cfg.db.empty() ? (dir / "kiln.db").string() : cfg.db;
  std::vector<pid_t> trackers;
  std::vector<std::string> addrs;
  // Ends the trackers (before any return from here on, with the agents).
  auto stop_trackers = [&] {
    for (pid_t t : trackers) ::kill(t, SIGTERM);
    for (pid_t t : trackers) {
      int status = 0;
      ::waitpid(t, &status, 0);
    }
  };
  for (int t = 0; t < cfg.trackers; ++t) {
    const std::string port_file = (dir / kiln::StrCat("port", t)).string();
    std::vector<std::string> args = {cfg.tracker_bin,
                                     "--listen",
                                     "127.0.0.1:0",
                                     "--port-file",
                                     port_file,
                                     "--db",
                                     db,
                                     "--artifacts",
                                     (dir / "artifacts").string(),
                                     "--max-jobs-per-user",
                                     std::to_string(cfg.jobs)};
    std::vector<char*> argv_c;
    for (auto& a : args) argv_c.push_back(a.data());
    argv_c.push_back(nullptr);
    const std::string log = (dir / kiln::StrCat("tracker", t, ".log")).string();
    pid_t tracker = ::fork();
    if (tracker == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd >= 0) {
        ::dup2(fd, 1);
        ::dup2(fd, 2);
      }
      ::execv(cfg.tracker_bin.c_str(), argv_c.data());
      ::_exit(127);
    }
    trackers.push_back(tracker);
    std::string port;
    for (int i = 0; i < 600 && port.empty(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      std::ifstream(port_file) >> port;
    }
    if (port.empty()) {
      stop_trackers();
      return absl::UnavailableError("a tracker did not start (see " + log + ")");
    }
    addrs.push_back("127.0.0.1:" + port);
  }

  // Agents spread over channels of 25 streams each (their own connections),
  // the channels over the trackers.
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  std::vector<std::unique_ptr<Agent>> agents;
  std::atomic<bool> counting{false};
  std::atomic<bool> stop{false};
  std::thread heartbeats;
  auto shut_down = [&] {
    stop = true;
    if (heartbeats.joinable()) heartbeats.join();
    for (auto& a : agents) a->Stop();
    stop_trackers();
  };
  for (int64_t i = 0; i < cfg.agents; ++i) {
    if (i % 25 == 0) {
      grpc::ChannelArguments ch;
      ch.SetInt("kiln.load.channel", static_cast<int>(i / 25));  // distinct connections
      channels.push_back(grpc::CreateCustomChannel(addrs[(i / 25) % addrs.size()],
                                                   grpc::InsecureChannelCredentials(), ch));
    }
    agents.push_back(std::make_unique<Agent>(channels.back(), static_cast<int>(i)));
    if (!agents.back()->Connect()) {
      shut_down();
      return absl::UnavailableError(kiln::StrCat("agent ", i, " was not welcomed"));
    }
    agents.back()->Serve(&counting, std::chrono::milliseconds(cfg.agent_ms));
  }
  heartbeats = std::thread([&] {
    while (!stop.load()) {
      for (auto& a : agents) a->Heartbeat();
      for (int i = 0; i < 10 && !stop.load(); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    }
  });

  // The jobs.
  auto tracker_stub = pb::Tracker::NewStub(channels.front());
  std::vector<std::string> job_ids;
  for (int64_t j = 0; j < cfg.jobs; ++j) {
    const std::string model = Model(static_cast<int>(j));
    pb::UploadModelResponse uploaded;
    {
      grpc::ClientContext ctx;
      auto writer = tracker_stub->UploadModel(&ctx, &uploaded);
      pb::ModelChunk chunk;
      chunk.set_data(model);
      chunk.set_total_size(static_cast<int64_t>(model.size()));
      chunk.set_sha256(kiln::Sha256Hex(model));
      writer->Write(chunk);
      writer->WritesDone();
      grpc::Status st = writer->Finish();
      if (!st.ok()) {
        shut_down();
        return absl::InternalError("upload: " + st.error_message());
      }
    }
    grpc::ClientContext ctx;
    pb::SubmitJobRequest req;
    req.set_model_sha256(uploaded.sha256());
    req.set_model_name(kiln::StrCat("load_", j));
    req.set_device_key(kKey);
    req.set_trials(100000);
    req.set_strategy("random");
    pb::SubmitJobResponse resp;
    grpc::Status st = tracker_stub->SubmitJob(&ctx, req, &resp);
    if (!st.ok()) {
      shut_down();
      return absl::InternalError("submit: " + st.error_message());
    }
    job_ids.push_back(resp.job_id());
  }

  auto rss = [&] {
    double sum = 0;
    for (pid_t t : trackers) sum += RssMb(t);
    return sum;
  };
  auto cpu_s = [&] {
    double sum = 0;
    for (pid_t t : trackers) sum += CpuSeconds(t);
    return sum;
  };
  std::this_thread::sleep_for(std::chrono::seconds(cfg.warmup));
  LoadFigures f;
  f.rss_start = rss();
  const double cpu_start = cpu_s();
  counting = true;
  const auto t0 = Clock::now();
  f.rss_max = f.rss_start;
  while (Clock::now() - t0 < std::chrono::seconds(cfg.seconds)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    f.rss_max = std::max(f.rss_max, rss());
  }
  counting = false;
  f.window = std::chrono::duration<double>(Clock::now() - t0).count();
  f.rss_end = rss();
  f.cpu = (cpu_s() - cpu_start) / f.window;

  for (const auto& id : job_ids) {
    grpc::ClientContext ctx;
    pb::CancelJobRequest req;
    req.set_job_id(id);
    pb::Job out;
    tracker_stub->CancelJob(&ctx, req, &out);
  }
  shut_down();
  int64_t answered = 0;
  std::vector<double> added;
  for (auto& a : agents) {
    answered += a->answered_;
    f.total += a->total_;
    added.insert(added.end(), a->added_ms_.begin(), a->added_ms_.end());
  }
  if (auto log_db = kiln::storage::TuningDb::Open(db); log_db.ok()) {
    if (auto rows = (*log_db)->QueryRecords("", "", 0); rows.ok()) {
      f.records = static_cast<int64_t>(rows->size());
    }
  }
  std::sort(added.begin(), added.end());
  auto pct = [&](double p) {
    return added.empty() ? 0.0 : added[static_cast<size_t>(p * (added.size() - 1))];
  };
  f.per_s = answered / f.window;
  f.p50 = pct(0.5);
  f.p90 = pct(0.9);
  f.p99 = pct(0.99);
  // Every agent's turn when all of them wait on a saturated farm.
  const double batches = added.empty() ? 0 : static_cast<double>(answered) / added.size();
  f.closed_loop = answered > 0 ? 1000.0 * cfg.agents * batches / f.per_s - cfg.agent_ms : 0.0;
  std::error_code ec;
  fs::remove_all(dir, ec);
  return f;
}

// A fresh database on the PostgreSQL server at `server` (URI without a
// database name) for one run; its URI.
absl::StatusOr<std::string> FreshPostgresDatabase(const std::string& server, int run) {
  auto admin = kiln::storage::Database::Open(server + "/postgres");
  if (!admin.ok()) return admin.status();
  const std::string name = kiln::StrCat("kiln_farm_load_", ::getpid(), "_", run);
  if (absl::Status s = (*admin)->Exec("DROP DATABASE IF EXISTS " + name); !s.ok()) return s;
  if (absl::Status s = (*admin)->Exec("CREATE DATABASE " + name); !s.ok()) return s;
  return server + "/" + name;
}

}  // namespace

int main(int argc, char** argv) {
  auto flags = kiln::ParseFlags(
      std::vector<std::string>(argv + 1, argv + argc),
      {"--agents", "--jobs", "--seconds", "--warmup", "--agent-ms", "--tracker-bin", "--postgres"});
  LoadConfig cfg;
  if (!flags.ok() || !flags->positional.empty() ||
      (flags->Has("--agents") && !kiln::ParseInt64(flags->Get("--agents"), &cfg.agents)) ||
      (flags->Has("--jobs") && !kiln::ParseInt64(flags->Get("--jobs"), &cfg.jobs)) ||
      (flags->Has("--seconds") && !kiln::ParseInt64(flags->Get("--seconds"), &cfg.seconds)) ||
      (flags->Has("--warmup") && !kiln::ParseInt64(flags->Get("--warmup"), &cfg.warmup)) ||
      (flags->Has("--agent-ms") && !kiln::ParseInt64(flags->Get("--agent-ms"), &cfg.agent_ms)) ||
      cfg.agents < 1 || cfg.jobs < 1 || cfg.seconds < 1 || cfg.warmup < 0 || cfg.agent_ms < 0) {
    std::fprintf(stderr,
                 "usage: farm_load_bench [--agents N] [--jobs N] [--seconds S] [--warmup S] "
                 "[--agent-ms MS] [--tracker-bin PATH] [--postgres postgresql://USER@HOST:PORT]\n");
    return 2;
  }
  cfg.tracker_bin = flags->Get(
      "--tracker-bin",
      (fs::read_symlink("/proc/self/exe").parent_path().parent_path() / "tracker" / "kiln-tracker")
          .string());
  const std::string postgres = flags->Get("--postgres");

  // SQLite with one tracker; with --postgres, PostgreSQL with one and with
  // three trackers too, in this run.
  struct Row {
    std::string name;
    LoadFigures f;
  };
  std::vector<Row> rows;
  std::vector<std::pair<std::string, LoadConfig>> runs = {{"SQLite, 1 tracker", cfg}};
  if (!postgres.empty()) {
    for (int n : {1, 3}) {
      LoadConfig pg = cfg;
      pg.trackers = n;
      auto url = FreshPostgresDatabase(postgres, n);
      if (!url.ok()) return Fail("PostgreSQL: " + url.status().ToString());
      pg.db = *url;
      runs.push_back({kiln::StrCat("PostgreSQL, ", n, n == 1 ? " tracker" : " trackers"), pg});
    }
  }
  for (const auto& [name, run] : runs) {
    auto f = RunLoad(run);
    if (!f.ok()) return Fail(name + ": " + f.status().ToString());
    rows.push_back({name, *f});
  }
  std::printf(
      "farm load: %lld fake agents answering %s, %lld jobs (random search), %lld s measured "
      "after %lld s of warm-up, on %d cores\n",
      static_cast<long long>(cfg.agents),
      cfg.agent_ms > 0 ? kiln::StrCat("after ", cfg.agent_ms, " ms").c_str() : "at once",
      static_cast<long long>(cfg.jobs), static_cast<long long>(cfg.seconds),
      static_cast<long long>(cfg.warmup), kiln::UsableCpus());
  std::printf("%-22s", "figure");
  for (const Row& r : rows) std::printf(" %22s", r.name.c_str());
  std::printf(" %10s\n", "target");
  auto line = [&](const char* name, auto get, const char* fmt, const char* target) {
    std::printf("%-22s", name);
    for (const Row& r : rows) std::printf(fmt, get(r.f));
    std::printf(" %10s\n", target);
  };
  line(
      "measurements_per_s=", [](const LoadFigures& f) { return f.per_s; }, " %22.0f", ">= 5000");
  line(
      "p50_added_ms=", [](const LoadFigures& f) { return f.p50; }, " %22.2f", "");
  line(
      "p90_added_ms=", [](const LoadFigures& f) { return f.p90; }, " %22.2f", "");
  line(
      "p99_added_ms=", [](const LoadFigures& f) { return f.p99; }, " %22.2f", "<= 10");
  line(
      "closed_loop_ms=", [](const LoadFigures& f) { return f.closed_loop; }, " %22.2f", "");
  line(
      "tracker_cpu_cores=", [](const LoadFigures& f) { return f.cpu; }, " %22.2f", "");
  line(
      "tracker_rss_mb_start=", [](const LoadFigures& f) { return f.rss_start; }, " %22.0f", "");
  line(
      "tracker_rss_mb_end=", [](const LoadFigures& f) { return f.rss_end; }, " %22.0f", "flat");
  line(
      "records=", [](const LoadFigures& f) { return static_cast<double>(f.records); }, " %22.0f",
      "");
  line(
      "candidates_answered=", [](const LoadFigures& f) { return static_cast<double>(f.total); },
      " %22.0f", "");
  std::printf(
      "(records: rows in the log database at the end; the jobs were cancelled with batches in "
      "flight, so a few answered candidates have none. With several trackers the tracker "
      "figures are their sum.)\n");
  return 0;
}
