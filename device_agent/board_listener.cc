#include "device_agent/board_listener.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "base/str.h"
#include "board/session.h"
#include "board/wire.h"
#include "device_agent/log.h"

namespace kiln::agent {
namespace {

using Clock = std::chrono::steady_clock;

bool SendAll(int fd, const char* data, size_t n) {
  while (n > 0) {
    const ssize_t w = send(fd, data, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    data += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

// Copies bytes both ways until either side ends, then closes both.
void Relay(int a, int b) {
  char buf[1 << 16];
  pollfd p[2] = {{a, POLLIN, 0}, {b, POLLIN, 0}};
  while (true) {
    if (poll(p, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    bool done = false;
    for (int i = 0; i < 2 && !done; ++i) {
      if ((p[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      const ssize_t n = recv(p[i].fd, buf, sizeof(buf), 0);
      if (n < 0 && errno == EINTR) continue;
      done = n <= 0 || !SendAll(p[1 - i].fd, buf, static_cast<size_t>(n));
    }
    if (done) break;
  }
  shutdown(a, SHUT_RDWR);
  shutdown(b, SHUT_RDWR);
  close(a);
  close(b);
}

// A waiting board connection still usable: open, and silent (a board sends
// nothing after its hello until the host answers).
bool StillWaiting(int fd) {
  pollfd p{fd, POLLIN, 0};
  return poll(&p, 1, 0) == 0;
}

}  // namespace

absl::StatusOr<std::unique_ptr<BoardListener>> BoardListener::Listen(const std::string& address,
                                                                     NewBoard on_new_board,
                                                                     int* bound_port) {
  absl::StatusOr<int> fd = board::ListenOn(address, bound_port);
  if (!fd.ok()) return fd.status();
  return std::unique_ptr<BoardListener>(new BoardListener(*fd, std::move(on_new_board)));
}

BoardListener::~BoardListener() { close(fd_); }

absl::Status BoardListener::Run() {
  while (true) {
    const int fd = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      return absl::UnavailableError(StrCat("accept: ", std::strerror(errno)));
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (pending_ >= kMaxPending) {
        close(fd);  // a flood of connections that say nothing
        continue;
      }
      ++pending_;
    }
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    std::thread([this, fd] { Admit(fd); }).detach();
  }
}

void BoardListener::Admit(int fd) {
  absl::StatusOr<board::Frame> f = board::ReadFrame(fd, 0, 10000);
  Board* board = nullptr;
  bool is_new = false;
  std::string why;
  absl::StatusOr<board::Hello> hello = absl::InvalidArgumentError("no hello");
  if (!f.ok()) {
    why = std::string(f.status().message());
  } else if (f->type != board::MessageType::kHello) {
    why = StrCat("it opened with ", board::MessageTypeName(f->type), ", not hello");
  } else if (hello = board::DecodeHello(f->payload); !hello.ok()) {
    why = std::string(hello.status().message());
  } else if (hello->name.empty() || !IsPrintableUtf8(hello->name) ||
             hello->name.find('/') != std::string::npos) {
    why = "its hello names no board";
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    --pending_;
    if (why.empty()) {
      auto it = boards_.find(hello->name);
      if (it != boards_.end()) {
        board = it->second.get();
        is_new = !board->admitted && !board->asking &&
                 Clock::now() - board->refused >= std::chrono::milliseconds(kRetryMs);
        board->asking |= is_new;
      } else if (boards_.size() >= kMaxBoards) {
        why = StrCat("more than ", kMaxBoards, " boards");
      } else {
        auto b = std::make_unique<Board>();
        b->name = hello->name;
        int port = 0;
        absl::StatusOr<int> local = board::ListenOn("127.0.0.1:0", &port);
        if (!local.ok()) {
          why = std::string(local.status().message());
        } else {
          b->local_fd = *local;
          b->local_address = StrCat("127.0.0.1:", port);
          board = b.get();
          board->asking = true;
          boards_[b->name] = std::move(b);
          is_new = true;
          std::thread([this, board] { ServeLocal(board); }).detach();
        }
      }
    }
  }
  if (board == nullptr) {
    Log()->warn("a board's connection was refused: {}", why);
    close(fd);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(board->mu);
    if (board->waiting.fd >= 0) close(board->waiting.fd);
    board->waiting = {fd, board::EncodeFrame(board::MessageType::kHello, f->payload), Clock::now()};
    board->cv.notify_all();
  }
  if (is_new) {
    Log()->info("board '{}' dialled in; it stands at {}", board->name, board->local_address);
    const bool admitted = on_new_board_(board->name, board->local_address);
    std::lock_guard<std::mutex> lock(mu_);
    board->asking = false;
    board->admitted = admitted;
    if (!admitted) board->refused = Clock::now();
  }
}

bool BoardListener::Take(Board* board, Waiting* out) {
  std::unique_lock<std::mutex> lock(board->mu);
  const auto deadline = Clock::now() + std::chrono::milliseconds(kPairWaitMs);
  while (true) {
    Waiting& w = board->waiting;
    if (w.fd >= 0) {
      if (Clock::now() - w.since < std::chrono::milliseconds(kIdleMs) && StillWaiting(w.fd)) {
        *out = std::move(w);
        w = Waiting{};
        return true;
      }
      // Stale: closed, the board dials again at once.
      close(w.fd);
      w = Waiting{};
    }
    if (board->cv.wait_until(lock, deadline) == std::cv_status::timeout && board->waiting.fd < 0) {
      return false;
    }
  }
}

void BoardListener::ServeLocal(Board* board) {
  while (true) {
    pollfd p{board->local_fd, POLLIN, 0};
    const int ready = poll(&p, 1, 1000);
    if (ready == 0) {
      // Idle: a waiting connection gone stale is closed, so that the board
      // dials a fresh one before a host needs it.
      std::lock_guard<std::mutex> lock(board->mu);
      Waiting& w = board->waiting;
      if (w.fd >= 0 &&
          (Clock::now() - w.since >= std::chrono::milliseconds(kIdleMs) || !StillWaiting(w.fd))) {
        close(w.fd);
        w = Waiting{};
      }
      continue;
    }
    if (ready < 0 && errno == EINTR) continue;
    const int local = accept4(board->local_fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (local < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      Log()->error("board '{}': accept on {}: {}", board->name, board->local_address,
                   std::strerror(errno));
      return;
    }
    std::thread([this, board, local] {
      Waiting w;
      if (!Take(board, &w)) {
        close(local);  // the host's session fails to open: the board is away
        return;
      }
      if (!SendAll(local, w.hello_frame.data(), w.hello_frame.size())) {
        close(local);
        close(w.fd);
        return;
      }
      Relay(local, w.fd);
    }).detach();
  }
}

}  // namespace kiln::agent
