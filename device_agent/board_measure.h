#pragma once
// The agent's side of a board that cannot host a compiler (kiln-agent
// --board HOST:PORT, docs/operator-guide.md "Boards"): the board's
// description becomes the target the agent registers; candidates are built
// here for the board's triple and CPU (compiler::BuildRemote), sent to its
// kiln-board, verified and timed there (board/session.h), and the answer
// becomes the protocol's MeasureResult. Runs in the measurement worker
// (sandbox.h), so that a build that crashes costs its candidate only.
//
// A board that cannot be reached, or whose connection breaks or goes
// silent mid-measurement, is not the candidate's fault: the result is
// AGENT_LOST, on which the agent ends its session with the tracker (the
// batch goes back to the queue for another agent, or for this one when its
// board answers again; AgentOptions::before_session).

#include <condition_variable>
#include <deque>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "board/session.h"
#include "board/wire.h"
#include "compiler/measure.h"
#include "compiler/target.h"
#include "device_agent/model_measure.h"
#include "kiln/v1/common.pb.h"

namespace kiln::agent {

struct BoardLink {
  std::string address;  // HOST:PORT of its kiln-board
  std::string key;      // the shared board key's bytes
};

// The target a board's description names (compiler::Target::FromCpuInfo
// of its triple and /proc/cpuinfo), and the hardware line the agent
// announces for it.
absl::StatusOr<compiler::Target> TargetOfBoard(const board::Description& d);
std::string BoardHardware(const std::string& address, const board::Description& d);

// Opens a session, asks the board what it is, closes: what the agent does
// at start and before each session with the tracker.
absl::StatusOr<board::Description> DescribeBoard(const BoardLink& link);

// compiler::BuildRemote for candidates in the protocol's terms, on up to
// `threads` threads (0: one per core): one entry per config (an unparsable
// workload or config: its error, as MeasureCandidate reports it).
std::vector<compiler::RemoteBuild> BuildForBoard(const std::string& workload_canonical,
                                                 const std::vector<kiln::v1::Config>& configs,
                                                 const compiler::Target& target, int threads = 0);

// Builds for a board in the background on the host's cores (one
// BuildForBoard each), so that the board times one candidate while the host
// builds the next ones. Thread-safe; the destructor drops the builds not
// started and waits for those under way.
class BoardBuildQueue {
 public:
  explicit BoardBuildQueue(int threads = 0);  // 0: one per core
  ~BoardBuildQueue();
  BoardBuildQueue(const BoardBuildQueue&) = delete;
  BoardBuildQueue& operator=(const BoardBuildQueue&) = delete;

  std::shared_future<compiler::RemoteBuild> Start(std::string workload_canonical,
                                                  kiln::v1::Config config, compiler::Target target);
  // Builds not started yet are abandoned (their futures say so): the batch
  // they were for is over.
  void DropPending();

 private:
  struct Job {
    std::string workload;
    kiln::v1::Config config;
    compiler::Target target;
    std::promise<compiler::RemoteBuild> done;
  };
  void Work();
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> jobs_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

// The board protocol's request for a built candidate under a batch's
// timing, on a board with `board_caches` (its description's L2 and L3).
board::MeasureRequest BoardRequest(const compiler::RemoteKernel& kernel,
                                   const kiln::v1::TimingPolicy& timing,
                                   const CacheSizes& board_caches);

class BoardMeasurer {
 public:
  explicit BoardMeasurer(BoardLink link) : link_(std::move(link)) {}
  // Measures one built candidate on the board, opening the session when
  // none is open. Never fails as a call (errors typed in the result:
  // the build's, the board's, AGENT_LOST for the board's connection).
  kiln::v1::MeasureResult Measure(const compiler::RemoteBuild& built,
                                  const kiln::v1::TimingPolicy& timing);
  // A whole-model batch's variants, built here for the board: run end to
  // end on the board (board::RunModelMeasurement), their times merged into
  // `built`'s results; the board's connection lost: every result AGENT_LOST.
  void MeasureModel(BuiltVariants* built, const kiln::v1::TimingPolicy& timing);

 private:
  // The open session, or AGENT_LOST's reason.
  absl::Status Connect(uint32_t timeout_ms);
  // Closes the session the board broke; AGENT_LOST's message.
  std::string Lost(const absl::Status& why);
  BoardLink link_;
  std::unique_ptr<board::BoardSession> session_;
  uint64_t max_request_bytes_ = 0;  // the board's, from its description
  CacheSizes caches_;               // the board's, from its description
};

}  // namespace kiln::agent
