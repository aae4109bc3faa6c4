// Issue 39, findings 5 and 6: what one client may hold of a tracker that
// requires tokens, on loopback, with real sockets: the HTTP side under
// slowloris and past its connection cap, WatchJob and UploadModel streams
// past their caps, a stalled upload, the upload quota and the collection of
// unused uploads, and a model whose tensors are too large for an agent.
#include <arpa/inet.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "kiln/v1/tracker.grpc.pb.h"
#include "tests/storage/test_util.h"
#include "tests/tracker/test_models.h"
#include "tests/tracker/test_tokens.h"
#include "tracker/auth.h"
#include "tracker/server.h"

namespace kiln::tracker {
namespace {

namespace fs = std::filesystem;
namespace pb = ::kiln::v1;
using SteadyClock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr const char* kTarget = "llvm -mtriple=x86_64-pc-linux-gnu -mcpu=generic";

using testing::AddToken;

// Threads of this process (the tracker runs in it).
int Threads() {
  int n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator("/proc/self/task")) ++n;
  return n;
}

// Polls `done` every 20 ms for at most `limit`; whether it became true.
bool Eventually(const std::function<bool()>& done, milliseconds limit) {
  const auto end = SteadyClock::now() + limit;
  while (!done()) {
    if (SteadyClock::now() > end) return false;
    std::this_thread::sleep_for(milliseconds(20));
  }
  return true;
}

double SecondsSince(SteadyClock::time_point t) {
  return std::chrono::duration<double>(SteadyClock::now() - t).count();
}

// A TCP connection to 127.0.0.1:port; -1 on failure.
int Connect(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Whether the server has closed `fd` (EOF or reset; what it sent first goes
// to *got), waiting at most `wait`.
bool ClosedByServer(int fd, milliseconds wait, std::string* got = nullptr) {
  const auto end = SteadyClock::now() + wait;
  char buf[512];
  while (SteadyClock::now() < end) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 20) <= 0) continue;
    ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n > 0) {
      if (got != nullptr) got->append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n == 0 || (errno != EAGAIN && errno != EINTR)) return true;
  }
  return false;
}

// A tracker requiring tokens, with users ana and bo, on loopback.
class LimitsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto db = storage::FarmStore::Open(dir_.File("kiln.db"));
    ASSERT_TRUE(db.ok()) << db.status();
    ana_ = AddToken(**db, "ana", "user");
    bo_ = AddToken(**db, "bo", "user");
    root_ = AddToken(**db, "root", "admin");  // /metrics is an admin's
    opts_.listen = "127.0.0.1:0";
    opts_.db_path = dir_.File("kiln.db");
    opts_.artifacts_dir = dir_.File("artifacts");
    opts_.require_auth = true;
  }
  void TearDown() override { server_.reset(); }

  void Start() {
    server_ = std::make_unique<TrackerServer>(opts_);
    auto port = server_->Start();
    ASSERT_TRUE(port.ok()) << port.status();
    channel_ = grpc::CreateChannel("127.0.0.1:" + std::to_string(*port),
                                   grpc::InsecureChannelCredentials());
    tracker_ = pb::Tracker::NewStub(channel_);
  }
  static void As(grpc::ClientContext& ctx, const std::string& token) {
    ctx.AddMetadata("authorization", "Bearer " + token);
  }
  grpc::Status Upload(const std::string& token, const std::string& bytes,
                      pb::UploadModelResponse* resp = nullptr) {
    return testing::UploadAs(*tracker_, token, bytes, resp);
  }
  grpc::Status Submit(const std::string& token, const std::string& model_bytes,
                      pb::SubmitJobResponse* out = nullptr) {
    pb::UploadModelResponse up;
    grpc::Status st = Upload(token, model_bytes, &up);
    if (!st.ok()) return st;
    return SubmitUploaded(token, up.sha256(), out);
  }
  grpc::Status SubmitUploaded(const std::string& token, const std::string& sha,
                              pb::SubmitJobResponse* out = nullptr) {
    pb::SubmitJobRequest req;
    req.set_model_sha256(sha);
    req.set_device_key("nobody-serves-this-key");
    req.mutable_target()->set_spec(kTarget);
    req.set_trials(4);
    grpc::ClientContext ctx;
    As(ctx, token);
    pb::SubmitJobResponse ignored;
    return tracker_->SubmitJob(&ctx, req, out ? out : &ignored);
  }
  size_t FilesUnder(const fs::path& dir) {
    size_t n = 0;
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(dir, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      n += it->is_regular_file();
    }
    return n;
  }

  storage::testing::TempDir dir_;
  TrackerOptions opts_;
  std::string ana_, bo_, root_;
  std::unique_ptr<TrackerServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<pb::Tracker::Stub> tracker_;
};

// ------------------------------------------------------------------ finding 5

class HttpLimitsTest : public LimitsTest {
 protected:
  void StartHttp(const HttpLimits& limits) {
    opts_.http_listen = "127.0.0.1:0";
    opts_.http_limits = limits;
    Start();
    http_port_ = server_->http_port();
    ASSERT_GT(http_port_, 0);
  }
  // An authenticated GET /metrics: its status (0 when none came) and time.
  int Metrics(double* seconds, const std::string& token) {
    httplib::Client client("127.0.0.1", http_port_);
    client.set_connection_timeout(2, 0);
    client.set_read_timeout(2, 0);
    const auto t0 = SteadyClock::now();
    httplib::Headers headers;
    if (!token.empty()) headers.emplace("Authorization", "Bearer " + token);
    auto res = client.Get("/metrics", headers);
    *seconds = SecondsSince(t0);
    return res ? res->status : 0;
  }
  int http_port_ = 0;
};

TEST_F(HttpLimitsTest, SlowlorisNeitherHoldsAWorkerNorDelaysMetrics) {
  HttpLimits limits;
  limits.max_connections = 32;
  limits.header_timeout_ms = 1500;
  limits.request_timeout_ms = 3000;
  limits.keep_alive_ms = 1500;
  StartHttp(limits);
  const int threads_before = Threads();

  // Twelve connections without a token, each sending its headers a byte
  // every 100 ms: never done.
  constexpr int kSlow = 12;
  std::vector<int> fds;
  std::vector<double> closed_after(kSlow, -1);
  const auto opened = SteadyClock::now();
  for (int i = 0; i < kSlow; ++i) {
    int fd = Connect(http_port_);
    ASSERT_GE(fd, 0);
    const std::string start = "GET /metrics HTTP/1.1\r\nHost: x\r\n";
    ASSERT_EQ(::send(fd, start.data(), start.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(start.size()));
    fds.push_back(fd);
  }
  std::atomic<bool> stop{false};
  std::string answered;  // anything the slow connections were sent
  std::thread trickle([&] {
    const std::string drip = "X-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n";
    for (size_t k = 0; !stop; ++k) {
      bool any_open = false;
      for (int i = 0; i < kSlow; ++i) {
        if (closed_after[i] >= 0) continue;
        if (ClosedByServer(fds[i], milliseconds(0), &answered) ||
            ::send(fds[i], &drip[k % drip.size()], 1, MSG_NOSIGNAL) != 1) {
          closed_after[i] = SecondsSince(opened);
          continue;
        }
        any_open = true;
      }
      if (!any_open) return;
      std::this_thread::sleep_for(milliseconds(100));
    }
  });

  // Meanwhile /metrics answers at once, to a token only.
  for (int i = 0; i < 5; ++i) {
    double s = 0;
    EXPECT_EQ(Metrics(&s, root_), 200);
    EXPECT_LT(s, 1.0) << "request " << i;
    EXPECT_EQ(Metrics(&s, ""), 401);
    std::this_thread::sleep_for(milliseconds(100));
  }
  // A thread per connection at most.
  EXPECT_LE(Threads() - threads_before, limits.max_connections);

  // Every slow connection is closed at the header deadline (1.5 s), not at
  // its 5 s read timeout that each byte would restart, and was never served.
  trickle.join();
  for (int i = 0; i < kSlow; ++i) {
    EXPECT_GE(closed_after[i], 1.4) << "connection " << i;
    EXPECT_LT(closed_after[i], 3.0) << "connection " << i;
    ::close(fds[i]);
  }
  EXPECT_EQ(answered.find("200 OK"), std::string::npos) << answered;
  EXPECT_TRUE(
      Eventually([&] { return server_->http()->OpenConnections() == 0; }, milliseconds(2000)));
}

TEST_F(HttpLimitsTest, ConnectionsBeyondTheCapAreRefusedAtOnce) {
  HttpLimits limits;
  limits.max_connections = 4;
  limits.header_timeout_ms = 2000;
  limits.request_timeout_ms = 3000;
  limits.keep_alive_ms = 2000;
  StartHttp(limits);
  const int threads_before = Threads();
  // Four connections that send nothing hold the four places.
  std::vector<int> idle;
  for (int i = 0; i < 4; ++i) idle.push_back(Connect(http_port_));
  ASSERT_TRUE(
      Eventually([&] { return server_->http()->OpenConnections() == 4; }, milliseconds(2000)));
  // Twenty more are answered 503 and closed at once: no queue, no thread.
  for (int i = 0; i < 20; ++i) {
    int fd = Connect(http_port_);
    ASSERT_GE(fd, 0);
    std::string got;
    const auto t0 = SteadyClock::now();
    EXPECT_TRUE(ClosedByServer(fd, milliseconds(1000), &got)) << "connection " << i;
    EXPECT_LT(SecondsSince(t0), 0.5);
    EXPECT_EQ(got.rfind("HTTP/1.1 503", 0), 0u) << got;
    ::close(fd);
  }
  EXPECT_EQ(server_->http()->RefusedConnections(), 20);
  EXPECT_LE(Threads() - threads_before, limits.max_connections);
  // The idle ones go at their deadline; then the farm is served again.
  for (int fd : idle) {
    EXPECT_TRUE(ClosedByServer(fd, milliseconds(3000)));
    ::close(fd);
  }
  double s = 0;
  EXPECT_EQ(Metrics(&s, root_), 200);
  EXPECT_LT(s, 1.0);
}

// ------------------------------------------------------------------ finding 6

TEST_F(LimitsTest, WatchStreamsAreCappedPerUserAndInAllAndEndWithTheirClient) {
  opts_.watch_limits = StreamLimits{3, 5, 0};
  Start();
  pb::SubmitJobResponse ana_job, bo_job;
  ASSERT_TRUE(Submit(ana_, testing::ConvReluModel(), &ana_job).ok());
  ASSERT_TRUE(Submit(bo_, testing::ConvReluModel(), &bo_job).ok());
  // Queued on a key no agent serves: every watch stays open.
  struct Watch {
    grpc::ClientContext ctx;
    std::unique_ptr<grpc::ClientReader<pb::JobEvent>> reader;
  };
  auto open = [&](const std::string& token, const std::string& job) {
    auto w = std::make_unique<Watch>();
    As(w->ctx, token);
    pb::WatchJobRequest req;
    req.set_job_id(job);
    w->reader = tracker_->WatchJob(&w->ctx, req);
    return w;
  };
  const int threads_before = Threads();
  std::vector<std::unique_ptr<Watch>> ana, bo;
  for (int i = 0; i < 3; ++i) ana.push_back(open(ana_, ana_job.job_id()));
  ASSERT_TRUE(
      Eventually([&] { return server_->watches()->OpenOf("ana") == 3; }, milliseconds(5000)));
  // Ana's fourth: RESOURCE_EXHAUSTED, naming the flag.
  auto fourth = open(ana_, ana_job.job_id());
  pb::JobEvent ev;
  while (fourth->reader->Read(&ev)) {
  }
  grpc::Status st = fourth->reader->Finish();
  EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << st.error_message();
  EXPECT_NE(st.error_message().find("--max-watches-per-user"), std::string::npos);
  // Bo may open two more (five in all); then no one.
  for (int i = 0; i < 2; ++i) bo.push_back(open(bo_, bo_job.job_id()));
  ASSERT_TRUE(Eventually([&] { return server_->watches()->Open() == 5; }, milliseconds(5000)));
  for (int i = 0; i < 20; ++i) {
    auto more = open(bo_, bo_job.job_id());
    while (more->reader->Read(&ev)) {
    }
    st = more->reader->Finish();
    EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << st.error_message();
    EXPECT_NE(st.error_message().find("--max-watches"), std::string::npos);
  }
  // Five open streams hold five threads, not twenty-five.
  EXPECT_LE(Threads() - threads_before, 5 + 4);
  // Clients that go away free their places within a wait (250 ms).
  const auto t0 = SteadyClock::now();
  for (auto& w : ana) w->ctx.TryCancel();
  EXPECT_TRUE(
      Eventually([&] { return server_->watches()->OpenOf("ana") == 0; }, milliseconds(2000)));
  EXPECT_LT(SecondsSince(t0), 1.0);
  for (auto& w : ana) w->reader->Finish();
  auto again = open(ana_, ana_job.job_id());
  ASSERT_TRUE(
      Eventually([&] { return server_->watches()->OpenOf("ana") == 1; }, milliseconds(5000)));
  again->ctx.TryCancel();
  again->reader->Finish();
  for (auto& w : bo) {
    w->ctx.TryCancel();
    w->reader->Finish();
  }
}

// A TCP relay on loopback between one client and the tracker that can go
// silent: it then forwards nothing either way and keeps both sockets open,
// as a client whose host vanished (no FIN, no reset).
class SilentableRelay {
 public:
  explicit SilentableRelay(int upstream_port) : upstream_port_(upstream_port) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), len);
    ::listen(listen_fd_, 4);
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { Run(); });
  }
  ~SilentableRelay() {
    done_ = true;
    ::shutdown(listen_fd_, SHUT_RDWR);
    thread_.join();
    for (int fd : {listen_fd_, client_, upstream_}) {
      if (fd >= 0) ::close(fd);
    }
  }
  int port() const { return port_; }
  void GoSilent() { silent_ = true; }

 private:
  void Run() {
    client_ = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client_ < 0) return;
    upstream_ = Connect(upstream_port_);
    char buf[16384];
    while (!done_) {
      if (silent_) {
        std::this_thread::sleep_for(milliseconds(20));
        continue;
      }
      pollfd p[2] = {{client_, POLLIN, 0}, {upstream_, POLLIN, 0}};
      if (::poll(p, 2, 20) <= 0) continue;
      for (int i = 0; i < 2; ++i) {
        if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        ssize_t n = ::recv(p[i].fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n <= 0) return;
        ::send(i == 0 ? upstream_ : client_, buf, static_cast<size_t>(n), MSG_NOSIGNAL);
      }
    }
  }
  const int upstream_port_;
  int listen_fd_ = -1, client_ = -1, upstream_ = -1;
  int port_ = 0;
  std::atomic<bool> silent_{false}, done_{false};
  std::thread thread_;
};

// A watcher whose host vanished (its connection silent, never closed) has
// its stream ended by the tracker's keepalive pings, and its place freed.
TEST_F(LimitsTest, AWatchOfAVanishedClientEndsAtTheKeepalive) {
  opts_.keepalive_time_ms = 1000;
  opts_.keepalive_timeout_ms = 1000;
  Start();
  pb::SubmitJobResponse job;
  ASSERT_TRUE(Submit(ana_, testing::ConvReluModel(), &job).ok());
  SilentableRelay relay(server_->port());
  auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(relay.port()),
                                     grpc::InsecureChannelCredentials());
  auto stub = pb::Tracker::NewStub(channel);
  grpc::ClientContext ctx;
  As(ctx, ana_);
  pb::WatchJobRequest req;
  req.set_job_id(job.job_id());
  auto reader = stub->WatchJob(&ctx, req);
  pb::JobEvent ev;
  ASSERT_TRUE(reader->Read(&ev));  // the job's first event: the stream is open
  ASSERT_EQ(server_->watches()->OpenOf("ana"), 1);
  std::this_thread::sleep_for(milliseconds(3000));  // idle: the pings go on without data
  ASSERT_EQ(server_->watches()->OpenOf("ana"), 1);
  const auto t0 = SteadyClock::now();
  relay.GoSilent();
  EXPECT_TRUE(
      Eventually([&] { return server_->watches()->OpenOf("ana") == 0; }, milliseconds(8000)));
  EXPECT_LT(SecondsSince(t0), 4.0);  // a ping unanswered for 1 s, within 1 s + 1 s
  ctx.TryCancel();
}

TEST_F(LimitsTest, StalledUploadIsCancelledItsFileRemovedAndUploadsAreCappedPerUser) {
  opts_.upload_limits = StreamLimits{2, 10, 1000};
  Start();
  const fs::path tmp = fs::path(dir_.File("artifacts")) / ".tmp";
  // Two uploads of ana that stall after one chunk.
  struct Stalled {
    grpc::ClientContext ctx;
    pb::UploadModelResponse resp;
    std::unique_ptr<grpc::ClientWriter<pb::ModelChunk>> writer;
  };
  std::vector<std::unique_ptr<Stalled>> stalled;
  const auto t0 = SteadyClock::now();
  for (int i = 0; i < 2; ++i) {
    auto s = std::make_unique<Stalled>();
    As(s->ctx, ana_);
    s->writer = tracker_->UploadModel(&s->ctx, &s->resp);
    pb::ModelChunk c;
    c.set_data(std::string(100 << 10, 'a' + i));
    c.set_total_size(10 << 20);
    ASSERT_TRUE(s->writer->Write(c));
    stalled.push_back(std::move(s));
  }
  ASSERT_TRUE(Eventually([&] { return FilesUnder(tmp) == 2; }, milliseconds(2000)));
  // A third of hers is refused while they hold their places; bo's is not.
  grpc::Status st = Upload(ana_, "third");
  EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << st.error_message();
  EXPECT_NE(st.error_message().find("--max-uploads-per-user"), std::string::npos);
  EXPECT_TRUE(Upload(bo_, "bo's model").ok());
  // After the idle timeout (1 s) they are cancelled, their partial files
  // removed and their places freed.
  ASSERT_TRUE(Eventually([&] { return server_->uploads()->Open() == 0; }, milliseconds(4000)));
  EXPECT_GE(SecondsSince(t0), 1.0);
  EXPECT_LT(SecondsSince(t0), 2.5);
  EXPECT_EQ(FilesUnder(tmp), 0u);
  for (auto& s : stalled) EXPECT_FALSE(s->writer->Finish().ok());
  EXPECT_EQ(server_->uploaded_models()->BytesOf("ana"), 0);
  EXPECT_TRUE(Upload(ana_, "now it fits").ok());
}

TEST_F(LimitsTest, UploadQuotaAndUnusedUploadsAreCollected) {
  const std::string model = testing::ConvReluModel();
  opts_.uploaded_models = UploadedModelsOptions{static_cast<int64_t>(model.size()) + 3000, 1000};
  opts_.model_gc_interval_ms = 200;
  Start();
  auto opened = storage::ArtifactStore::Open(dir_.File("artifacts"));
  ASSERT_TRUE(opened.ok());
  storage::ArtifactStore* store = opened->get();
  // A model and junk fill ana's quota: one more byte is refused, and
  // nothing of it is kept.
  const std::string junk(3000, 'j');
  const std::string junk_sha = kiln::Sha256Hex(junk);
  ASSERT_TRUE(Upload(ana_, junk).ok());
  ASSERT_TRUE(Upload(ana_, model).ok());
  const size_t stored = FilesUnder(dir_.File("artifacts"));
  grpc::Status st = Upload(ana_, "x");
  EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << st.error_message();
  EXPECT_NE(st.error_message().find("--upload-quota-bytes"), std::string::npos);
  EXPECT_EQ(FilesUnder(dir_.File("artifacts")), stored);
  // Bo has a quota of his own.
  EXPECT_TRUE(Upload(bo_, "bo's").ok());
  // A job uses the model (uploaded: a new upload of it would need room).
  ASSERT_TRUE(SubmitUploaded(ana_, kiln::Sha256Hex(model)).ok());
  // Past the grace period (1 s) the unused uploads are collected by the
  // periodic collection; the job's model stays.
  ASSERT_TRUE(store->Contains(junk_sha));
  EXPECT_TRUE(Eventually(
      [&] { return !store->Contains(junk_sha) && !store->Contains(kiln::Sha256Hex("bo's")); },
      milliseconds(5000)));
  EXPECT_TRUE(store->Contains(kiln::Sha256Hex(model)));
  // Ana's quota is free again (the job's model no longer counts).
  EXPECT_TRUE(Eventually([&] { return server_->uploaded_models()->BytesOf("ana") == 0; },
                         milliseconds(2000)));
  EXPECT_TRUE(Upload(ana_, junk).ok());
  EXPECT_TRUE(Upload(ana_, "x").ok());
  // At startup too: a tracker started later collects what was left.
  server_.reset();
  ASSERT_TRUE(store->Contains(junk_sha));
  opts_.uploaded_models.grace_ms = 0;
  opts_.model_gc_interval_ms = 3600 * 1000;
  Start();
  EXPECT_FALSE(store->Contains(junk_sha));
  EXPECT_FALSE(store->Contains(kiln::Sha256Hex("x")));
  EXPECT_TRUE(store->Contains(kiln::Sha256Hex(model)));
}

// A model whose input ([1, 65536, 65536], 2^32 elements: 16 GiB of float32)
// or an intermediate (a [65536, 1] x [1, 65536] MatMul) is past the bound is
// refused at submit: no agent is ever asked to allocate it.
std::string OversizedModel(bool intermediate) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name("oversized");
  onnx::NodeProto* node = g->add_node();
  if (intermediate) {
    testing::AddTensorInfo(g->add_input(), "a", {65536, 1});
    testing::AddTensorInfo(g->add_input(), "b", {1, 65536});
    testing::AddTensorInfo(g->add_output(), "y", {65536, 65536});
    node->set_op_type("MatMul");
    node->add_input("a");
    node->add_input("b");
  } else {
    testing::AddTensorInfo(g->add_input(), "a", {1, 65536, 65536});
    testing::AddTensorInfo(g->add_output(), "y", {1, 65536, 65536});
    node->set_op_type("Relu");
    node->add_input("a");
  }
  node->add_output("y");
  return m.SerializeAsString();
}

TEST_F(LimitsTest, TensorsPastTheBoundAreInvalidArgumentAtSubmit) {
  Start();
  for (bool intermediate : {false, true}) {
    grpc::Status st = Submit(ana_, OversizedModel(intermediate));
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << st.error_message();
    EXPECT_NE(st.error_message().find("268435456 elements"), std::string::npos)
        << st.error_message();
    EXPECT_NE(st.error_message().find("(this tracker's bound: kiln-tracker --max-elements)"),
              std::string::npos)
        << st.error_message();
  }
  grpc::ClientContext ctx;
  As(ctx, ana_);
  pb::ListJobsResponse jobs;
  ASSERT_TRUE(tracker_->ListJobs(&ctx, {}, &jobs).ok());
  EXPECT_EQ(jobs.jobs_size(), 0);
}

}  // namespace
}  // namespace kiln::tracker
