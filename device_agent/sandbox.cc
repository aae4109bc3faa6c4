#include "device_agent/sandbox.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <future>
#include <map>
#include <memory>
#include <new>
#include <vector>

#include "base/cpus.h"
#include "base/str.h"
#include "base/subprocess.h"
#include "compiler/target.h"
#include "device_agent/board_measure.h"
#include "device_agent/measure.h"
#include "device_agent/model_measure.h"
#include "device_agent/worker_faults.h"

extern char** environ;

namespace kiln::agent {
namespace {

using Clock = std::chrono::steady_clock;

absl::Status WriteAll(int fd, const char* data, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, data, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return absl::UnavailableError(StrCat("write to pipe: ", std::strerror(errno)));
    }
    data += w;
    n -= static_cast<size_t>(w);
  }
  return absl::OkStatus();
}

// Reads exactly n bytes; returns how many were read before EOF.
absl::StatusOr<size_t> ReadAll(int fd, char* data, size_t n) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = ::read(fd, data + got, n - got);
    if (r < 0) {
      if (errno == EINTR) continue;
      return absl::UnavailableError(StrCat("read from pipe: ", std::strerror(errno)));
    }
    if (r == 0) break;
    got += static_cast<size_t>(r);
  }
  return got;
}

}  // namespace

absl::Status WriteFrame(int fd, const std::string& bytes) {
  uint32_t n = static_cast<uint32_t>(bytes.size());
  char header[4] = {static_cast<char>(n & 0xff), static_cast<char>((n >> 8) & 0xff),
                    static_cast<char>((n >> 16) & 0xff), static_cast<char>((n >> 24) & 0xff)};
  if (absl::Status s = WriteAll(fd, header, 4); !s.ok()) return s;
  return WriteAll(fd, bytes.data(), bytes.size());
}

absl::Status ReadFrame(int fd, std::string* bytes) {
  unsigned char header[4];
  absl::StatusOr<size_t> got = ReadAll(fd, reinterpret_cast<char*>(header), 4);
  if (!got.ok()) return got.status();
  if (*got == 0) return absl::NotFoundError("end of stream");
  if (*got < 4) return absl::DataLossError("stream cut inside a frame header");
  uint32_t n = header[0] | (header[1] << 8) | (header[2] << 16) | (uint32_t{header[3]} << 24);
  if (n > (512u << 20)) return absl::DataLossError(StrCat("frame of ", n, " bytes is too large"));
  bytes->resize(n);
  got = ReadAll(fd, bytes->data(), n);
  if (!got.ok()) return got.status();
  if (*got < n) return absl::DataLossError("stream cut inside a frame");
  return absl::OkStatus();
}

int RunMeasureWorker(int in_fd, int out_fd, const std::string& files_dir, const BoardLink* board,
                     const WorkerFaults* faults) {
  const compiler::Target host = compiler::Target::Host();
  // Kernels built ahead for the batch being measured, by candidate id (for
  // this host, or for the board).
  std::string ahead_batch;
  std::map<std::string, compiler::Prebuilt> ahead;
  std::map<std::string, std::shared_future<compiler::RemoteBuild>> ahead_for_board;
  std::unique_ptr<BoardMeasurer> board_measurer;
  std::unique_ptr<BoardBuildQueue> board_builds;
  if (board != nullptr) {
    board_measurer = std::make_unique<BoardMeasurer>(*board);
    board_builds = std::make_unique<BoardBuildQueue>();
  }
  std::string bytes;
  while (true) {
    absl::Status s = ReadFrame(in_fd, &bytes);
    if (absl::IsNotFound(s)) return 0;
    if (!s.ok()) {
      std::fprintf(stderr, "kiln-agent worker: %s\n", std::string(s.message()).c_str());
      return 1;
    }
    kiln::v1::MeasureBatch batch;
    kiln::v1::MeasureResult result;
    if (batch.ParseFromString(bytes) && batch.has_model()) {
      compiler::Target target = host;
      if (!batch.target().spec().empty()) {
        target = compiler::Target::Parse(batch.target().spec()).value_or(host);
      }
      std::vector<kiln::v1::MeasureResult> results;
      if (board_measurer != nullptr) {  // built here, run on the board
        BuiltVariants built = BuildModelVariants(batch, files_dir, target);
        board_measurer->MeasureModel(&built, batch.timing());
        results = std::move(built.results);
      } else {
        results = MeasureModelVariants(batch, files_dir, target);
      }
      for (const kiln::v1::MeasureResult& r : results) {
        if (absl::Status w = WriteFrame(out_fd, r.SerializeAsString()); !w.ok()) return 1;
      }
      continue;
    }
    if (batch.candidates_size() < 1 || batch.has_model()) {
      result =
          ErrorResult(kiln::v1::MEASURE_ERROR_KIND_RUNTIME, "worker received a malformed request");
    } else {
      const kiln::v1::Candidate& c = batch.candidates(0);
      if (faults != nullptr) faults->BeforeMeasure(c.candidate_id());
      compiler::Target target = host;
      bool target_ok = true;
      if (!batch.target().spec().empty()) {
        absl::StatusOr<compiler::Target> t = compiler::Target::Parse(batch.target().spec());
        if (t.ok()) {
          target = *t;
        } else {
          target_ok = false;
          result = ErrorResult(kiln::v1::MEASURE_ERROR_KIND_COMPILE,
                               StrCat("bad target: ", t.status().message()));
        }
      }
      if (target_ok && batch.batch_id() != ahead_batch) {
        ahead.clear();
        ahead_for_board.clear();
        if (board_builds != nullptr) board_builds->DropPending();
        ahead_batch = batch.batch_id();
      }
      // Every candidate of the request is about to be built (also ahead,
      // for another's request).
      auto before_builds = [&] {
        if (faults == nullptr) return;
        for (const kiln::v1::Candidate& k : batch.candidates())
          faults->BeforeBuild(k.candidate_id());
      };
      // Every candidate of the request, built together on every core; each
      // is then timed alone.
      auto request_configs = [&] {
        before_builds();
        std::vector<kiln::v1::Config> configs;
        for (const kiln::v1::Candidate& k : batch.candidates()) configs.push_back(k.config());
        return configs;
      };
      try {
        if (target_ok && board_measurer != nullptr) {
          // Every candidate of the request not yet building starts now, in
          // the background: the window slides, and the host builds the next
          // candidates while the board times this one.
          before_builds();
          for (const kiln::v1::Candidate& k : batch.candidates()) {
            if (ahead_for_board.count(k.candidate_id()) == 0) {
              ahead_for_board[k.candidate_id()] =
                  board_builds->Start(batch.workload().canonical(), k.config(), target);
            }
          }
          auto it = ahead_for_board.find(c.candidate_id());
          const compiler::RemoteBuild mine = it->second.get();
          ahead_for_board.erase(it);
          result = board_measurer->Measure(mine, batch.timing());
        } else if (target_ok) {
          compiler::Prebuilt mine;
          if (auto it = ahead.find(c.candidate_id()); it != ahead.end()) {
            mine = std::move(it->second);
            ahead.erase(it);
          } else if (batch.candidates_size() > 1 && !target.is_gpu()) {
            std::vector<compiler::Prebuilt> built =
                PrebuildCandidates(batch.workload().canonical(), request_configs(), target);
            mine = std::move(built[0]);
            for (size_t i = 1; i < built.size(); ++i) {
              ahead[batch.candidates(static_cast<int>(i)).candidate_id()] = std::move(built[i]);
            }
          } else if (faults != nullptr) {
            faults->BeforeBuild(c.candidate_id());
          }
          result = MeasureCandidate(batch.workload().canonical(), c.config(), batch.timing(),
                                    target, 42, &mine);
        }
      } catch (const std::bad_alloc&) {
        // Its buffers (or its build) do not fit in the worker's address
        // space (kiln-agent --worker-memory); what was allocated is freed.
        struct rlimit lim {};
        ::getrlimit(RLIMIT_AS, &lim);
        result =
            ErrorResult(kiln::v1::MEASURE_ERROR_KIND_RUNTIME,
                        lim.rlim_cur == RLIM_INFINITY
                            ? std::string("out of memory measuring the candidate")
                            : StrCat("out of memory: the candidate's tensors do not fit in the "
                                     "measurement worker's address-space limit of ",
                                     static_cast<int64_t>(lim.rlim_cur >> 20),
                                     " MiB (kiln-agent --worker-memory)"));
      }
      if (faults != nullptr) faults->AfterMeasure(result);
      result.set_candidate_id(c.candidate_id());
    }
    if (absl::Status w = WriteFrame(out_fd, result.SerializeAsString()); !w.ok()) return 1;
  }
}

int64_t DefaultWorkerMemoryBytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGESIZE);
  const int64_t physical = pages > 0 && page > 0 ? int64_t{pages} * page : 0;
  return std::max<int64_t>(int64_t{4} << 30, physical / 2) +
         int64_t{UsableCpus()} * (int64_t{256} << 20);
}

Sandbox::Sandbox(std::string worker_binary, int64_t memory_bytes, std::string files_dir,
                 std::vector<std::string> worker_args)
    : binary_(std::move(worker_binary)),
      memory_bytes_(memory_bytes),
      files_dir_(std::move(files_dir)),
      worker_args_(std::move(worker_args)) {
  // A worker that dies makes writes to its pipe fail with EPIPE, not kill us.
  ::signal(SIGPIPE, SIG_IGN);
}

Sandbox::~Sandbox() { Stop(); }

void Sandbox::Stop() {
  if (pid_ > 0) Reap(/*kill=*/true);
}

absl::Status Sandbox::Start(int threads) {
  int req[2], rep[2];
  if (::pipe2(req, O_CLOEXEC) != 0) {
    return absl::InternalError(StrCat("pipe: ", std::strerror(errno)));
  }
  if (::pipe2(rep, O_CLOEXEC) != 0) {
    ::close(req[0]);
    ::close(req[1]);
    return absl::InternalError(StrCat("pipe: ", std::strerror(errno)));
  }
  ChildOptions child;
  child.memory_bytes = memory_bytes_;
  child.descriptors = {{req[0], 0}, {rep[1], 3}};
  // The environment, with the kernels' thread count when one is asked for.
  for (char** e = environ; *e != nullptr; ++e) {
    if (threads > 0 && std::strncmp(*e, "KILN_NUM_THREADS=", 17) == 0) continue;
    child.env.emplace_back(*e);
  }
  if (threads > 0) child.env.push_back(StrCat("KILN_NUM_THREADS=", threads));
  std::vector<std::string> argv = {binary_, "--measure-worker", files_dir_};
  argv.insert(argv.end(), worker_args_.begin(), worker_args_.end());
  auto started = StartChild(argv, child);
  if (!started.ok()) {
    for (int fd : {req[0], req[1], rep[0], rep[1]}) ::close(fd);
    return started.status();
  }
  const pid_t pid = *started;
  ::close(req[0]);
  ::close(rep[1]);
  pid_ = pid;
  threads_ = threads;
  to_worker_ = req[1];
  from_worker_ = rep[0];
  return absl::OkStatus();
}

std::string Sandbox::Reap(bool kill) {
  if (to_worker_ >= 0) ::close(to_worker_);
  if (from_worker_ >= 0) ::close(from_worker_);
  to_worker_ = from_worker_ = -1;
  if (pid_ <= 0) return "no worker";
  const int status = WaitChild(pid_, kill);
  pid_ = -1;
  if (status < 0) return StrCat("waitpid: ", std::strerror(errno));
  if (WIFSIGNALED(status)) return StrCat("killed by ", SignalName(WTERMSIG(status)));
  if (WIFEXITED(status)) {
    if (WEXITSTATUS(status) == 127) return "exited with status 127 (could not start the worker)";
    return StrCat("exited with status ", WEXITSTATUS(status));
  }
  return "ended";
}

kiln::v1::MeasureResult Sandbox::Measure(const kiln::v1::MeasureBatch& batch, int index) {
  // The worker builds a window of candidates at a time, two per core.
  static const int window = 2 * UsableCpus();
  // GPU kernels are built by the device's driver, one at a time.
  const bool gpu =
      !batch.target().spec().empty() &&
      compiler::Target::Parse(batch.target().spec()).value_or(compiler::Target::Host()).is_gpu();
  const int ahead = gpu ? 0 : std::min(batch.candidates_size() - index - 1, window - 1);
  kiln::v1::MeasureResult r = MeasureIn(batch, index, ahead);
  if (ahead > 0 && pid_ <= 0 &&
      (r.error_kind() == kiln::v1::MEASURE_ERROR_KIND_RUNTIME ||
       r.error_kind() == kiln::v1::MEASURE_ERROR_KIND_TIMEOUT)) {
    // The worker ended while it may also have been building the candidates
    // after this one: measured again alone, what happens is its own.
    r = MeasureIn(batch, index, 0);
  }
  return r;
}

kiln::v1::MeasureResult Sandbox::MeasureIn(const kiln::v1::MeasureBatch& batch, int index,
                                           int ahead) {
  const kiln::v1::Candidate& candidate = batch.candidates(index);
  auto finish = [&](kiln::v1::MeasureResult r) {
    r.set_candidate_id(candidate.candidate_id());
    return r;
  };
  if (absl::Status s = Ready(batch); !s.ok()) {
    return finish(ErrorResult(kiln::v1::MEASURE_ERROR_KIND_RUNTIME,
                              StrCat("cannot start the measurement worker: ", s.message())));
  }
  kiln::v1::MeasureBatch request;
  *request.mutable_workload() = batch.workload();
  *request.mutable_target() = batch.target();
  *request.mutable_timing() = batch.timing();
  request.set_batch_id(batch.batch_id());
  for (int i = index; i <= index + ahead; ++i) *request.add_candidates() = batch.candidates(i);

  if (absl::Status s = WriteFrame(to_worker_, request.SerializeAsString()); !s.ok()) {
    std::string how = Reap(/*kill=*/true);
    return finish(
        ErrorResult(kiln::v1::MEASURE_ERROR_KIND_RUNTIME, StrCat("measurement worker ", how)));
  }

  const int timeout_ms = ResolveTiming(batch.timing()).timeout_ms;
  return finish(Reply(Clock::now() + std::chrono::milliseconds(timeout_ms), timeout_ms,
                      "candidate took longer than"));
}

absl::Status Sandbox::Ready(const kiln::v1::MeasureBatch& batch) {
  const int threads = std::max(0, batch.timing().threads());
  if (pid_ > 0 && threads != threads_) Reap(/*kill=*/true);
  return pid_ > 0 ? absl::OkStatus() : Start(threads);
}

kiln::v1::MeasureResult Sandbox::Reply(Clock::time_point deadline, int timeout_ms,
                                       const char* what) {
  while (true) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      Reap(/*kill=*/true);
      return ErrorResult(
          kiln::v1::MEASURE_ERROR_KIND_TIMEOUT,
          StrCat(what, " ", timeout_ms, " ms (build + verify + time); worker killed"));
    }
    pollfd p{from_worker_, POLLIN, 0};
    int n = ::poll(&p, 1, static_cast<int>(left.count()));
    if (n < 0 && errno == EINTR) continue;
    if (n > 0) break;
    if (n < 0) {
      Reap(/*kill=*/true);
      return ErrorResult(kiln::v1::MEASURE_ERROR_KIND_RUNTIME,
                         StrCat("poll: ", std::strerror(errno)));
    }
  }
  // The reply has started (or the worker closed the pipe by dying). A reply
  // is written in one go, so reading it to the end does not block long.
  std::string bytes;
  absl::Status s = ReadFrame(from_worker_, &bytes);
  kiln::v1::MeasureResult result;
  if (!s.ok() || !result.ParseFromString(bytes)) {
    std::string how = Reap(/*kill=*/true);
    return ErrorResult(kiln::v1::MEASURE_ERROR_KIND_RUNTIME,
                       how.starts_with("killed by")
                           ? StrCat("kernel crashed the measurement worker: ", how)
                           : StrCat("measurement worker died: ", how));
  }
  return result;
}

std::vector<kiln::v1::MeasureResult> Sandbox::MeasureModel(const kiln::v1::MeasureBatch& batch) {
  std::vector<kiln::v1::MeasureResult> results;
  auto fail_rest = [&](const kiln::v1::MeasureResult& error) {
    while (results.size() < static_cast<size_t>(batch.candidates_size())) {
      results.push_back(error);
      results.back().set_candidate_id(
          batch.candidates(static_cast<int>(results.size()) - 1).candidate_id());
    }
    return results;
  };
  if (absl::Status s = Ready(batch); !s.ok()) {
    return fail_rest(ErrorResult(kiln::v1::MEASURE_ERROR_KIND_RUNTIME,
                                 StrCat("cannot start the measurement worker: ", s.message())));
  }
  if (absl::Status s = WriteFrame(to_worker_, batch.SerializeAsString()); !s.ok()) {
    std::string how = Reap(/*kill=*/true);
    return fail_rest(
        ErrorResult(kiln::v1::MEASURE_ERROR_KIND_RUNTIME, StrCat("measurement worker ", how)));
  }
  const int timeout_ms = ResolveTiming(batch.timing()).timeout_ms;
  const Clock::time_point deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  while (results.size() < static_cast<size_t>(batch.candidates_size())) {
    kiln::v1::MeasureResult r =
        Reply(deadline, timeout_ms, "the model's variants took longer than");
    if (pid_ <= 0) return fail_rest(r);  // the worker ended: the rest share its error
    results.push_back(std::move(r));
  }
  return results;
}

}  // namespace kiln::agent
