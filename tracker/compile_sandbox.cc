#include "tracker/compile_sandbox.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <vector>

#include "base/str.h"
#include "base/subprocess.h"
#include "storage/stores.h"
#include "tracker/job_options.h"
#include "tuner/history.h"

namespace kiln::tracker {

absl::StatusOr<std::string> CompileWithBestRecords(storage::TuningDb& db,
                                                   const compiler::Model& model,
                                                   const compiler::Target& target,
                                                   const storage::RecordScope& scope,
                                                   compiler::CompileReport* report,
                                                   const ModelChoices& choices) {
  // A log that cannot be read fails the compile: a module of default
  // configs in its place would pass for the tuned one.
  absl::Status lookup_error;
  compiler::ConfigLookup lookup =
      [&](const compiler::Workload& w) -> std::optional<compiler::Config> {
    if (auto chosen = choices.find(w.Key()); chosen != choices.end()) return chosen->second;
    auto best = tuner::BestValidConfig(db, w, target, nullptr, scope);
    if (!best.ok()) {
      if (lookup_error.ok()) lookup_error = best.status();
      return std::nullopt;
    }
    return *best;
  };
  auto bytes = compiler::CompileModel(model, target, lookup, {}, report);
  if (!lookup_error.ok()) {
    return absl::Status(lookup_error.code(),
                        StrCat("reading the log database: ", lookup_error.message()));
  }
  return bytes;
}

absl::StatusOr<ModelChoices> ChoicesOfJob(const storage::JobRow& row) {
  auto report = EndToEndFromJson(row.end_to_end_json);
  if (!report.ok()) return report.status();
  return ChoicesOf(*report);
}

absl::StatusOr<compiler::Model> LoadStoredModel(const storage::ArtifactStore& store,
                                                const std::string& model_sha256,
                                                const compiler::ImportOptions& options) {
  auto path = store.LocalPath(model_sha256);
  if (!path.ok()) {
    return absl::NotFoundError(
        StrCat("model ", model_sha256, " is not in the store (", path.status().message(), ")"));
  }
  auto model = compiler::Model::FromOnnxFile(*path, options);
  if (!model.ok()) return model.status();
  if (model->source_sha256() != model_sha256) {
    return absl::DataLossError(StrCat("stored model ", model_sha256, " is corrupt"));
  }
  return model;
}

namespace {

absl::StatusOr<CompiledModule> CompileJob(const std::string& db_path,
                                          const std::string& artifacts_dir,
                                          const std::string& job_id, int64_t max_elements,
                                          const CompileFaults* faults) {
  auto db = storage::OpenStores(db_path);
  if (!db.ok()) return db.status();
  auto store = storage::ArtifactStore::Open(artifacts_dir);
  if (!store.ok()) return store.status();
  auto row = db->farm->GetJob(job_id);
  if (!row.ok()) return row.status();
  if (!row->has_value()) return absl::NotFoundError(StrCat("unknown job '", job_id, "'"));
  auto stored = OptionsFromJson((*row)->options_json, TimingOptions{});
  if (!stored.ok()) return stored.status();
  auto target = compiler::Target::Parse((*row)->target);
  if (!target.ok()) return target.status();
  auto model = LoadStoredModel(
      **store, (*row)->model_sha256,
      ImportOptionsOf(*stored, **store, (*row)->model_sha256, max_elements, *target));
  if (!model.ok()) return model.status();
  if (faults != nullptr) faults->BeforeCompile();
  CompiledModule out;
  auto choices = ChoicesOfJob(**row);
  if (!choices.ok()) return choices.status();
  auto bytes = CompileWithBestRecords(
      *db->tuning, *model, *target, storage::RecordScope::Of((*row)->owner), &out.report, *choices);
  if (!bytes.ok()) return bytes.status();
  auto sha = (*store)->Put(*bytes);
  if (!sha.ok()) return sha.status();
  out.sha256 = *sha;
  out.size = static_cast<int64_t>(bytes->size());
  return out;
}

// Reads what is ready on `fd` into `out`; false at end of file or error.
bool Drain(int fd, std::string* out) {
  char buf[4096];
  ssize_t n = ::read(fd, buf, sizeof(buf));
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return true;
  if (n <= 0) return false;
  out->append(buf, static_cast<size_t>(n));
  // Only the tail of a chatty log is kept.
  if (out->size() > (1 << 16)) out->erase(0, out->size() - (1 << 15));
  return true;
}

std::string Tail(const std::string& log) {
  std::string t = log.size() > 600 ? "..." + log.substr(log.size() - 600) : log;
  while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) t.pop_back();
  return t.empty() ? "" : StrCat("; its last words: ", t);
}

}  // namespace

absl::StatusOr<CompiledModule> CompileInSandbox(const std::string& binary,
                                                const std::string& db_path,
                                                const std::string& artifacts_dir,
                                                const std::string& job_id,
                                                const CompileLimits& limits) {
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return absl::InternalError(StrCat("pipe: ", strerror(errno)));
  if (::pipe2(err, O_CLOEXEC) != 0) {
    ::close(out[0]);
    ::close(out[1]);
    return absl::InternalError(StrCat("pipe: ", strerror(errno)));
  }
  ChildOptions child;
  child.memory_bytes = limits.memory_bytes;
  // Background work: below the tracker's sessions and job threads.
  child.nice = kCompileWorkerNice;
  child.descriptors = {{out[1], 1}, {err[1], 2}};
  auto started =
      StartChild({binary, "compile-worker", "--db", db_path, "--artifacts", artifacts_dir, "--job",
                  job_id, "--max-elements", std::to_string(limits.max_elements)},
                 child);
  if (!started.ok()) {
    for (int fd : {out[0], out[1], err[0], err[1]}) ::close(fd);
    return started.status();
  }
  const pid_t pid = *started;
  ::close(out[1]);
  ::close(err[1]);

  std::string stdout_text, stderr_text;
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(limits.timeout_ms);
  bool timed_out = false;
  pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
  int open = 2;
  while (open > 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now())
                    .count();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    int ready = ::poll(fds, 2, static_cast<int>(std::min<int64_t>(left, 1 << 30)));
    if (ready < 0 && errno != EINTR) break;
    for (int i = 0; i < 2 && ready > 0; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      if (!Drain(fds[i].fd, i == 0 ? &stdout_text : &stderr_text)) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open;
      }
    }
  }
  for (const pollfd& p : fds) {
    if (p.fd >= 0) ::close(p.fd);
  }
  const int status = WaitChild(pid, timed_out);
  if (timed_out) {
    return absl::DeadlineExceededError(StrCat("the compiler ran past its time limit of ",
                                              limits.timeout_ms / 1000, " s and was killed"));
  }
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    return absl::InternalError(StrCat("the compiler crashed (signal ", sig, ": ", strsignal(sig),
                                      "; its memory limit is ", limits.memory_bytes >> 20, " MiB)",
                                      Tail(stderr_text)));
  }
  // The answer is the last line (anything the compiler printed comes first).
  while (!stdout_text.empty() && stdout_text.back() == '\n') stdout_text.pop_back();
  std::istringstream line(stdout_text.substr(stdout_text.rfind('\n') + 1));
  std::string word;
  line >> word;
  if (word == "module") {
    CompiledModule m;
    if (line >> m.sha256 >> m.size >> m.report.kernels >> m.report.tuned_kernels &&
        kiln::IsSha256Hex(m.sha256)) {
      return m;
    }
  } else if (word == "error") {
    int code = 0;
    line >> code;
    std::string message;
    std::getline(line >> std::ws, message);
    if (code > 0 && code <= static_cast<int>(absl::StatusCode::kUnauthenticated)) {
      return absl::Status(static_cast<absl::StatusCode>(code), message);
    }
  }
  return absl::InternalError(StrCat("the compiler exited with status ",
                                    WIFEXITED(status) ? WEXITSTATUS(status) : -1, " and no result",
                                    Tail(stderr_text)));
}

int RunCompileWorker(const std::string& db_path, const std::string& artifacts_dir,
                     const std::string& job_id, int64_t max_elements, const CompileFaults* faults) {
  auto m = CompileJob(db_path, artifacts_dir, job_id, max_elements, faults);
  if (!m.ok()) {
    std::string message(m.status().message());
    for (char& c : message) c = c == '\n' ? ' ' : c;
    std::printf("error %d %s\n", static_cast<int>(m.status().code()), message.c_str());
    return 1;
  }
  std::printf("module %s %lld %d %d\n", m->sha256.c_str(), static_cast<long long>(m->size),
              m->report.kernels, m->report.tuned_kernels);
  return 0;
}

}  // namespace kiln::tracker
