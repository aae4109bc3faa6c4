#include "device_agent/board_measure.h"

#include <algorithm>

#include "base/cpus.h"
#include "base/str.h"
#include "device_agent/measure.h"

namespace kiln::agent {
namespace {

using kiln::v1::MeasureResult;

kiln::v1::MeasureErrorKind KindOfBoardError(board::MeasureErrorKind kind) {
  switch (kind) {
    case board::MeasureErrorKind::kNone:
      return kiln::v1::MEASURE_ERROR_KIND_NONE;
    case board::MeasureErrorKind::kLoad:  // built here, for the board: the build's fault
      return kiln::v1::MEASURE_ERROR_KIND_COMPILE;
    case board::MeasureErrorKind::kRuntime:
      return kiln::v1::MEASURE_ERROR_KIND_RUNTIME;
    case board::MeasureErrorKind::kWrongResult:
      return kiln::v1::MEASURE_ERROR_KIND_WRONG_RESULT;
    case board::MeasureErrorKind::kTimeout:
      return kiln::v1::MEASURE_ERROR_KIND_TIMEOUT;
  }
  return kiln::v1::MEASURE_ERROR_KIND_RUNTIME;
}

// How long a session may take to open: the board serves one host at a
// time, and finishes (or stops) the measurement it is in before it answers.
int OpenTimeoutMs(int candidate_timeout_ms) { return std::max(10000, candidate_timeout_ms + 5000); }

}  // namespace

absl::StatusOr<compiler::Target> TargetOfBoard(const board::Description& d) {
  return compiler::Target::FromCpuInfo(d.triple, d.cpuinfo);
}

std::string BoardHardware(const std::string& address, const board::Description& d) {
  return StrCat(
      "board ", address, ": ", d.cpu.empty() ? "unnamed CPU" : d.cpu, " (", d.triple, ", ", d.cores,
      " cores", d.l2_bytes > 0 ? StrCat(", L2 ", d.l2_bytes >> 10, " KiB") : "",
      d.l3_bytes > 0 ? StrCat(", L3 ", d.l3_bytes >> 20, " MiB") : "", "; ", d.runner_version, ")");
}

absl::StatusOr<board::Description> DescribeBoard(const BoardLink& link) {
  absl::StatusOr<std::unique_ptr<board::BoardSession>> session =
      board::BoardSession::Open(link.address, link.key, OpenTimeoutMs(kDefaultCandidateTimeoutMs));
  if (!session.ok()) return session.status();
  return (*session)->Describe();
}

std::vector<compiler::RemoteBuild> BuildForBoard(const std::string& workload_canonical,
                                                 const std::vector<kiln::v1::Config>& configs,
                                                 const compiler::Target& target, int threads) {
  std::vector<compiler::RemoteBuild> built(configs.size());
  absl::StatusOr<compiler::Workload> workload = compiler::Workload::Parse(workload_canonical);
  if (!workload.ok()) {
    for (compiler::RemoteBuild& b : built) {
      b.error = compiler::MeasureError::kCompile;
      b.message = StrCat("bad workload: ", workload.status().message());
    }
    return built;
  }
  std::vector<compiler::Config> parsed;
  std::vector<size_t> where;
  for (size_t i = 0; i < configs.size(); ++i) {
    absl::StatusOr<compiler::Config> c = ConfigFromProto(configs[i]);
    if (!c.ok()) {
      built[i].error = compiler::MeasureError::kInvalidConfig;
      built[i].message = std::string(c.status().message());
      continue;
    }
    parsed.push_back(*std::move(c));
    where.push_back(i);
  }
  std::vector<compiler::RemoteBuild> some =
      compiler::BuildRemote(*workload, parsed, target, 42, threads);
  for (size_t j = 0; j < some.size(); ++j) built[where[j]] = std::move(some[j]);
  return built;
}

BoardBuildQueue::BoardBuildQueue(int threads) {
  if (threads <= 0) threads = UsableCpus();
  for (int t = 0; t < threads; ++t) threads_.emplace_back([this] { Work(); });
}

BoardBuildQueue::~BoardBuildQueue() {
  DropPending();
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : threads_) t.join();
}

std::shared_future<compiler::RemoteBuild> BoardBuildQueue::Start(std::string workload_canonical,
                                                                 kiln::v1::Config config,
                                                                 compiler::Target target) {
  std::lock_guard<std::mutex> lock(mu_);
  jobs_.push_back(Job{std::move(workload_canonical), std::move(config), std::move(target), {}});
  std::shared_future<compiler::RemoteBuild> f = jobs_.back().done.get_future().share();
  cv_.notify_one();
  return f;
}

void BoardBuildQueue::DropPending() {
  std::lock_guard<std::mutex> lock(mu_);
  for (Job& j : jobs_) {
    compiler::RemoteBuild dropped;
    dropped.error = compiler::MeasureError::kRuntime;
    dropped.message = "its build was dropped: the batch moved on";
    j.done.set_value(std::move(dropped));
  }
  jobs_.clear();
}

void BoardBuildQueue::Work() {
  while (true) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
      if (jobs_.empty()) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    std::vector<compiler::RemoteBuild> built =
        BuildForBoard(job.workload, {job.config}, job.target, /*threads=*/1);
    job.done.set_value(std::move(built[0]));
  }
}

board::MeasureRequest BoardRequest(const compiler::RemoteKernel& kernel,
                                   const kiln::v1::TimingPolicy& timing,
                                   const CacheSizes& board_caches) {
  const ResolvedTiming t = ResolveTiming(timing);
  board::MeasureRequest r;
  r.symbol = kernel.symbol;
  r.object = kernel.object;
  r.inputs = kernel.args;
  r.output_bytes = kernel.reference.size();
  r.reference = kernel.reference;
  switch (kernel.output_dtype) {
    case DType::kFloat32:
      r.compare = board::Compare::kFloat32;
      r.tolerance = kernel.tolerance;
      break;
    case DType::kInt8:
      r.compare = board::Compare::kInt8;
      break;
    case DType::kUInt8:
      r.compare = board::Compare::kUint8;
      break;
    default:
      r.compare = board::Compare::kExact;
  }
  r.off_by_one = static_cast<uint32_t>(std::max<int64_t>(0, kernel.off_by_one));
  r.number = static_cast<uint32_t>(t.number);
  r.repeat = static_cast<uint32_t>(t.repeat);
  r.min_repeat_ms = static_cast<uint32_t>(t.min_repeat_ms);
  r.cooldown_ms = static_cast<uint32_t>(t.cooldown_ms);
  r.stop_above_s = t.stop_above_s;
  // The caches as the model leaves them on the board (compiler::
  // CacheStateFor with the board's caches): the weights and the output
  // evicted (read back into its last level for a model that fits there), a
  // first input that is an activation rewritten as its producer leaves it.
  const compiler::CacheState state = compiler::CacheStateFor(t, board_caches);
  if (state != compiler::CacheState::kHot) {
    r.flush_cache = kernel.first_is_activation ? board::kFlushKeepFirst : board::kFlushAll;
    if (state == compiler::CacheState::kLastLevel) r.flush_cache |= board::kFlushToLastLevel;
  }
  r.timeout_ms = static_cast<uint32_t>(t.timeout_ms);
  r.threads = static_cast<uint32_t>(std::clamp(timing.threads(), 0, int{board::kMaxThreads}));
  return r;
}

std::string BoardMeasurer::Lost(const absl::Status& why) {
  // Broken, silent or refusing: the next measurement opens a new session.
  session_.reset();
  return StrCat("the board ", link_.address, " was lost mid-measurement (",
                absl::StatusCodeToString(why.code()), ": ", why.message(), ")");
}

absl::Status BoardMeasurer::Connect(uint32_t timeout_ms) {
  if (session_ != nullptr) return absl::OkStatus();
  absl::StatusOr<std::unique_ptr<board::BoardSession>> s = board::BoardSession::Open(
      link_.address, link_.key, OpenTimeoutMs(static_cast<int>(timeout_ms)));
  absl::StatusOr<board::Description> d =
      s.ok() ? (*s)->Describe() : absl::StatusOr<board::Description>(s.status());
  if (!d.ok()) {
    return absl::UnavailableError(StrCat("the board does not answer: ", d.status().message()));
  }
  session_ = *std::move(s);
  max_request_bytes_ = d->max_request_bytes;
  caches_.core_bytes = static_cast<int64_t>(d->l2_bytes);
  caches_.last_level_bytes = static_cast<int64_t>(d->l3_bytes);
  return absl::OkStatus();
}

void BoardMeasurer::MeasureModel(BuiltVariants* built, const kiln::v1::TimingPolicy& timing) {
  const ResolvedTiming t = ResolveTiming(timing);
  board::MeasureModelRequest request;
  std::vector<size_t> sent;  // the variants that built, in the request's order
  uint64_t bytes = 0;
  for (size_t v = 0; v < built->artifacts.size(); ++v) {
    if (built->artifacts[v].empty()) continue;
    bytes += built->artifacts[v].size() + 4;
    request.artifacts.push_back(std::move(built->artifacts[v]));
    sent.push_back(v);
  }
  if (sent.empty()) return;
  request.number = static_cast<uint32_t>(t.number);
  request.repeat = static_cast<uint32_t>(t.repeat);
  request.min_repeat_ms = static_cast<uint32_t>(t.min_repeat_ms);
  request.threads = static_cast<uint32_t>(std::clamp(timing.threads(), 0, int{board::kMaxThreads}));
  request.timeout_ms = static_cast<uint32_t>(t.timeout_ms);
  auto fail_sent = [&](kiln::v1::MeasureErrorKind kind, const std::string& message) {
    for (size_t v : sent) {
      built->results[v].set_error_kind(kind);
      built->results[v].set_error_message(message);
    }
  };
  if (absl::Status s = Connect(request.timeout_ms); !s.ok()) {
    return fail_sent(kiln::v1::MEASURE_ERROR_KIND_AGENT_LOST, std::string(s.message()));
  }
  if (request.artifacts.size() > board::kMaxVariants || bytes + 64 > max_request_bytes_) {
    // Never sent: the board would refuse it and end the session.
    return fail_sent(
        kiln::v1::MEASURE_ERROR_KIND_RUNTIME,
        StrCat("the model's ", request.artifacts.size(), " variants (", bytes >> 20,
               " MiB) are more than the board takes in one request (", board::kMaxVariants,
               " variants, ", max_request_bytes_ >> 20, " MiB: kiln-board --max-message-bytes)"));
  }
  absl::StatusOr<board::MeasuredModel> m = session_->MeasureModel(request);
  if (!m.ok()) return fail_sent(kiln::v1::MEASURE_ERROR_KIND_AGENT_LOST, Lost(m.status()));
  if (m->error != board::MeasureErrorKind::kNone || m->variants.size() != sent.size()) {
    return fail_sent(KindOfBoardError(m->error == board::MeasureErrorKind::kNone
                                          ? board::MeasureErrorKind::kRuntime
                                          : m->error),
                     m->message.empty() ? "the board answered for other variants" : m->message);
  }
  std::vector<board::VariantTimes> times(built->results.size());
  for (size_t i = 0; i < sent.size(); ++i) times[sent[i]] = std::move(m->variants[i]);
  MergeVariantTimes(times, built);
}

MeasureResult BoardMeasurer::Measure(const compiler::RemoteBuild& built,
                                     const kiln::v1::TimingPolicy& timing) {
  if (built.error != compiler::MeasureError::kNone) {
    MeasureResult r = ErrorResult(ErrorKindOf(built.error), built.message);
    r.set_build_s(built.build_s);
    return r;
  }
  // The session first: the board's caches come with its description.
  if (absl::Status s = Connect(static_cast<uint32_t>(ResolveTiming(timing).timeout_ms)); !s.ok()) {
    return ErrorResult(kiln::v1::MEASURE_ERROR_KIND_AGENT_LOST, std::string(s.message()));
  }
  const board::MeasureRequest request = BoardRequest(built.kernel, timing, caches_);
  absl::StatusOr<board::Measured> m = session_->Measure(request);
  if (!m.ok()) return ErrorResult(kiln::v1::MEASURE_ERROR_KIND_AGENT_LOST, Lost(m.status()));
  MeasureResult r = ErrorResult(KindOfBoardError(m->error), m->message);
  r.set_build_s(built.build_s);
  r.set_cut_short(m->cut_short != 0);
  for (double c : m->costs_s) r.add_costs_s(c);
  return r;
}

}  // namespace kiln::agent
