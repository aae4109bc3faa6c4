#pragma once
// Runs measurements in a worker subprocess, so that a crashing or hanging
// kernel becomes an error record, not a dead agent.
//
// The worker is this agent's own binary (fork + exec of `worker_binary`,
// normally /proc/self/exe) started with the hidden flag `--measure-worker`.
// Parent and worker talk over two pipes (worker stdin = requests, worker fd 3
// = replies) with length-prefixed serialized protos: a request is a
// MeasureBatch whose first candidate is the one to measure, a reply its
// MeasureResult. The request also carries the batch's next candidates (a
// window of two per core): a worker that has not built the first builds them
// all together, on every core, and keeps the kernels for the requests that
// follow; each candidate is still verified and timed alone.
//
// The fault tests inject a crashing, hanging or lying worker through
// RunMeasureWorker's `faults` (worker_faults.h; kiln-agent-faults only).
//
// The worker's address space is limited (setrlimit RLIMIT_AS, kiln-agent
// --worker-memory): a candidate whose tensors do not fit fails to allocate
// and becomes a RUNTIME error record naming the limit, instead of taking
// the board's memory (and the agent with it) in an out-of-memory kill.

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "kiln/v1/agent.pb.h"
#include "kiln/v1/common.pb.h"

namespace kiln::agent {

struct BoardLink;    // board_measure.h
class WorkerFaults;  // worker_faults.h

class Sandbox {
 public:
  // `worker_binary` must accept `--measure-worker` (see RunMeasureWorker).
  // `memory_bytes` > 0: the worker's address-space limit (RLIMIT_AS).
  // `files_dir`: where the session keeps whole-model batches' files
  // (FileStore), passed to the worker. `worker_args`: more of the worker's
  // arguments, after FILES_DIR (a board agent's --board and --board-key-file).
  explicit Sandbox(std::string worker_binary, int64_t memory_bytes = 0, std::string files_dir = "",
                   std::vector<std::string> worker_args = {});
  ~Sandbox();
  Sandbox(const Sandbox&) = delete;
  Sandbox& operator=(const Sandbox&) = delete;

  // Measures candidate `index` of `batch` in the worker, enforcing the
  // batch's timeout_ms (default 10 s). On timeout the worker is killed and
  // the result is TIMEOUT; when the worker dies the result is RUNTIME naming
  // the signal. The next call starts a fresh worker. A worker that ended
  // while it was also given the next candidates to build is asked again
  // with this candidate alone, so that a timeout or crash is its own. Never
  // fails as a call.
  kiln::v1::MeasureResult Measure(const kiln::v1::MeasureBatch& batch, int index);

  // A whole-model batch (batch.model set; model_measure.h): every variant in
  // one request to the worker, one result per candidate, the batch's
  // timeout_ms over them all. The model's files are in `files_dir` (below).
  std::vector<kiln::v1::MeasureResult> MeasureModel(const kiln::v1::MeasureBatch& batch);

  // Kills the worker, if any.
  void Stop();
  pid_t worker_pid() const { return pid_; }

 private:
  // Starts a worker whose kernels run on `threads` threads (KILN_NUM_THREADS;
  // 0: the agent's own setting).
  absl::Status Start(int threads);
  // A worker running with the batch's threads (a new one when they differ).
  absl::Status Ready(const kiln::v1::MeasureBatch& batch);
  // Waits for the worker's next reply until `deadline`; TIMEOUT or RUNTIME
  // results (the worker reaped) when it does not come.
  kiln::v1::MeasureResult Reply(std::chrono::steady_clock::time_point deadline, int timeout_ms,
                                const char* what);
  // One request: candidate `index` and the `ahead` candidates after it.
  kiln::v1::MeasureResult MeasureIn(const kiln::v1::MeasureBatch& batch, int index, int ahead);
  // Kills (if `kill`) and reaps the worker; returns how it ended, in words.
  std::string Reap(bool kill);

  std::string binary_;
  int64_t memory_bytes_ = 0;
  std::string files_dir_;
  std::vector<std::string> worker_args_;
  pid_t pid_ = -1;
  int threads_ = 0;  // the running worker's KILN_NUM_THREADS (0: inherited)
  int to_worker_ = -1;
  int from_worker_ = -1;
};

// The default address-space limit of a measurement worker: half of this
// machine's memory (at least 4 GiB), plus 256 MiB per core for the thread
// stacks and allocator arenas of its parallel builds (address space
// reserved, not memory used). ResNet-50's largest task needs far less.
int64_t DefaultWorkerMemoryBytes();

// The worker's main loop: reads requests from `in_fd`, measures each with
// MeasureCandidate (for the batch's target, or the host when it is empty),
// writes replies to `out_fd`; a whole-model request is answered with one
// reply per candidate (MeasureModelVariants, reading the model's files from
// `files_dir`: `kiln-agent --measure-worker FILES_DIR`). With `board`
// (a board agent's worker), every candidate is built for the batch's target
// and measured on that board (board_measure.h), and whole models are
// refused. `faults`: the fault tests' (nullptr: none). Returns the process
// exit code (0 on EOF).
int RunMeasureWorker(int in_fd, int out_fd, const std::string& files_dir = "",
                     const BoardLink* board = nullptr, const WorkerFaults* faults = nullptr);

// Length-prefixed message framing over file descriptors (4-byte little-endian
// length, then the bytes). Exposed for tests.
absl::Status WriteFrame(int fd, const std::string& bytes);
// NOT_FOUND on a clean EOF before the first byte; DATA_LOSS when cut short.
absl::Status ReadFrame(int fd, std::string* bytes);

}  // namespace kiln::agent
