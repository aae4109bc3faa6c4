#pragma once
// A child process with limits, for the programs that run untrusted or heavy
// work apart (the agent's measurement worker, the tracker's compile worker,
// `kiln report`'s gnuplot): fork and exec, the child killed with its parent,
// an address-space limit, a niceness, descriptors put in place; and its end,
// waited for and said in words.
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "base/str.h"

extern char** environ;  // NOLINT

namespace kiln {

struct ChildOptions {
  int64_t memory_bytes = 0;  // RLIMIT_AS of the child; 0: none
  int nice = 0;              // the child's niceness; 0: the parent's
  // In the child, dup2(first, second) for each: pipes put on its stdin,
  // stdout, or a numbered descriptor (dup2 clears O_CLOEXEC on the copy).
  std::vector<std::pair<int, int>> descriptors;
  // The child's environment ("NAME=value"); empty: the parent's.
  std::vector<std::string> env;
  bool search_path = false;  // argv[0] looked up on PATH (execvp)
};

// Starts argv[0] with `argv` under `o`; the child's pid. Everything the
// child needs is prepared before fork: after fork it makes only
// async-signal-safe calls (the parents run gRPC threads). A child that
// cannot exec exits with status 127; one whose parent died before it set
// PR_SET_PDEATHSIG exits at once.
inline absl::StatusOr<pid_t> StartChild(const std::vector<std::string>& argv,
                                        const ChildOptions& o) {
  if (argv.empty()) return absl::InvalidArgumentError("a child process needs a program");
  std::vector<std::string> args = argv, env = o.env;
  std::vector<char*> arg_ptrs, env_ptrs;
  for (std::string& a : args) arg_ptrs.push_back(a.data());
  arg_ptrs.push_back(nullptr);
  for (std::string& e : env) env_ptrs.push_back(e.data());
  env_ptrs.push_back(nullptr);
  char** envp = env.empty() ? environ : env_ptrs.data();
  const rlimit memory{static_cast<rlim_t>(o.memory_bytes), static_cast<rlim_t>(o.memory_bytes)};
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) return absl::InternalError(StrCat("fork: ", std::strerror(errno)));
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    if (o.memory_bytes > 0 && ::setrlimit(RLIMIT_AS, &memory) != 0) ::_exit(127);
    if (o.nice != 0) ::setpriority(PRIO_PROCESS, 0, o.nice);
    for (const auto& [from, to] : o.descriptors) {
      if (::dup2(from, to) < 0) ::_exit(127);
    }
    if (o.search_path) {
      ::execvpe(arg_ptrs[0], arg_ptrs.data(), envp);
    } else {
      ::execve(arg_ptrs[0], arg_ptrs.data(), envp);
    }
    ::_exit(127);
  }
  return pid;
}

// Waits for child `pid` (SIGKILL first when `kill`); its wait status, or -1
// with errno set when waitpid fails.
inline int WaitChild(pid_t pid, bool kill) {
  if (kill) ::kill(pid, SIGKILL);
  int status = 0;
  pid_t r;
  do {
    r = ::waitpid(pid, &status, 0);
  } while (r < 0 && errno == EINTR);
  return r < 0 ? -1 : status;
}

}  // namespace kiln
