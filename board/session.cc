#include "board/session.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <thread>

#include "base/sha256.h"
#include "base/str.h"
#include "board/runner.h"

namespace kiln::board {
namespace {

std::string Nonce() {
  std::string n(kNonceBytes, '\0');
  size_t got = 0;
  while (got < n.size()) {
    const ssize_t r = getrandom(n.data() + got, n.size() - got, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += static_cast<size_t>(r);
  }
  return n;
}

// Tells the peer why the stream ends (best effort) and returns `status`.
// What the peer still sends is read and dropped for up to a second, so that
// closing with unread bytes does not reset the stream before the peer has
// read the reason.
absl::Status Refuse(int fd, absl::Status status) {
  const std::string reason(status.message().substr(0, 1024));
  (void)WriteFrame(fd, MessageType::kError, reason);
  shutdown(fd, SHUT_WR);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  char sink[16384];
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    const ssize_t n = recv(fd, sink, sizeof(sink), 0);
    if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) break;
  }
  return status;
}

// HOST:PORT split at its last colon ("[::1]:9000" too).
absl::Status SplitAddress(const std::string& address, std::string* host, std::string* port) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon + 1 == address.size()) {
    return absl::InvalidArgumentError(StrCat("'", address, "' is not HOST:PORT"));
  }
  *host = address.substr(0, colon);
  *port = address.substr(colon + 1);
  if (host->size() >= 2 && host->front() == '[' && host->back() == ']') {
    *host = host->substr(1, host->size() - 2);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ServeConnection(int fd, const ServeOptions& o) {
  const std::string board_nonce = Nonce();
  if (absl::Status s = WriteFrame(fd, MessageType::kHello,
                                  Encode(Hello{board_nonce, o.description.runner_version, o.name}));
      !s.ok()) {
    return s;
  }
  absl::StatusOr<Frame> f = ReadFrame(fd, 0, o.handshake_timeout_ms);
  if (!f.ok()) return Refuse(fd, f.status());
  if (f->type != MessageType::kAuth) {
    return Refuse(
        fd, absl::InvalidArgumentError(StrCat("expected auth, got ", MessageTypeName(f->type))));
  }
  absl::StatusOr<Auth> auth = DecodeAuth(f->payload);
  if (!auth.ok()) return Refuse(fd, auth.status());
  if (!SameSecret(auth->mac, HostProof(o.key, board_nonce, auth->nonce))) {
    return Refuse(
        fd, absl::PermissionDeniedError("unauthorized: the host does not hold this board's key"));
  }
  if (absl::Status s = WriteFrame(fd, MessageType::kAuthOk,
                                  Encode(AuthOk{BoardProof(o.key, board_nonce, auth->nonce)}));
      !s.ok()) {
    return s;
  }
  while (true) {
    f = ReadFrame(fd, o.max_measure_payload, o.idle_timeout_ms);
    if (!f.ok()) {
      if (absl::IsUnavailable(f.status())) return absl::OkStatus();  // the host went away
      return Refuse(fd, f.status());
    }
    if (f->type == MessageType::kDescribe && f->payload.empty()) {
      if (absl::Status s = WriteFrame(fd, MessageType::kDescription, Encode(o.description));
          !s.ok()) {
        return s;
      }
    } else if (f->type == MessageType::kMeasure) {
      absl::StatusOr<MeasureRequest> request = DecodeMeasureRequest(f->payload);
      if (!request.ok()) return Refuse(fd, request.status());
      if (absl::Status s = WriteFrame(fd, MessageType::kMeasured, Encode(RunMeasurement(*request)));
          !s.ok()) {
        return s;
      }
    } else if (f->type == MessageType::kMeasureModel) {
      absl::StatusOr<MeasureModelRequest> request = DecodeMeasureModelRequest(f->payload);
      if (!request.ok()) return Refuse(fd, request.status());
      if (absl::Status s =
              WriteFrame(fd, MessageType::kMeasuredModel, Encode(RunModelMeasurement(*request)));
          !s.ok()) {
        return s;
      }
    } else {
      return Refuse(fd, absl::InvalidArgumentError(
                            StrCat("unexpected ", MessageTypeName(f->type), " message")));
    }
  }
}

absl::Status Serve(int listen_fd, const ServeOptions& options) {
  while (true) {
    sockaddr_storage peer{};
    socklen_t len = sizeof(peer);
    const int fd = accept4(listen_fd, reinterpret_cast<sockaddr*>(&peer), &len, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      return absl::UnavailableError(StrCat("accept: ", std::strerror(errno)));
    }
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    char host[NI_MAXHOST] = "?";
    getnameinfo(reinterpret_cast<sockaddr*>(&peer), len, host, sizeof(host), nullptr, 0,
                NI_NUMERICHOST);
    const absl::Status s = ServeConnection(fd, options);
    close(fd);
    std::fprintf(stderr, "kiln-board: session with %s ended: %s\n", host,
                 s.ok() ? "closed by the host" : std::string(s.message()).c_str());
  }
}

absl::StatusOr<int> ListenOn(const std::string& address, int* bound_port) {
  std::string host, port;
  if (absl::Status s = SplitAddress(address, &host, &port); !s.ok()) return s;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  if (int e = getaddrinfo(host.empty() || host == "*" ? nullptr : host.c_str(), port.c_str(),
                          &hints, &found);
      e != 0) {
    return absl::InvalidArgumentError(StrCat("cannot listen on ", address, ": ", gai_strerror(e)));
  }
  std::string why = "no address";
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, 4) == 0) {
      if (bound_port != nullptr) {
        sockaddr_storage bound{};
        socklen_t len = sizeof(bound);
        getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
        *bound_port =
            ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                              : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
      }
      freeaddrinfo(found);
      return fd;
    }
    why = std::strerror(errno);
    close(fd);
  }
  freeaddrinfo(found);
  return absl::UnavailableError(StrCat("cannot listen on ", address, ": ", why));
}

absl::StatusOr<int> Dial(const std::string& address) {
  std::string host, port;
  if (absl::Status s = SplitAddress(address, &host, &port); !s.ok()) return s;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (int e = getaddrinfo(host.c_str(), port.c_str(), &hints, &found); e != 0) {
    return absl::UnavailableError(StrCat(address, ": ", gai_strerror(e)));
  }
  int fd = -1;
  std::string why = "no address";
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    if (connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      why = std::strerror(errno);
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(found);
  if (fd < 0) return absl::UnavailableError(StrCat(address, ": ", why));
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

void ServeDialingOut(const std::string& address, const ServeOptions& options) {
  int backoff_ms = 250;
  bool said_down = false;
  while (true) {
    absl::StatusOr<int> fd = Dial(address);
    if (!fd.ok()) {
      if (!said_down) {
        std::fprintf(stderr, "kiln-board: the agent does not answer (%s): dialling again\n",
                     std::string(fd.status().message()).c_str());
        said_down = true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(backoff_ms));
      backoff_ms = std::min(backoff_ms * 2, 5000);
      continue;
    }
    if (said_down)
      std::fprintf(stderr, "kiln-board: connected to the agent at %s\n", address.c_str());
    said_down = false;
    backoff_ms = 250;
    const absl::Status s = ServeConnection(*fd, options);
    close(*fd);
    // An agent that holds connections it does not use closes them; a
    // session the host ended is the usual end. Anything else is said.
    if (!s.ok() && !absl::IsDeadlineExceeded(s) && !absl::IsUnavailable(s)) {
      std::fprintf(stderr, "kiln-board: session ended: %s\n", std::string(s.message()).c_str());
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
  }
}

absl::StatusOr<std::unique_ptr<BoardSession>> BoardSession::Open(const std::string& address,
                                                                 const std::string& key,
                                                                 int timeout_ms) {
  absl::StatusOr<int> fd = Dial(address);
  if (!fd.ok()) {
    return absl::UnavailableError(StrCat("board ", fd.status().message()));
  }
  std::unique_ptr<BoardSession> session(new BoardSession(*fd));
  absl::StatusOr<Frame> f = session->Expect(MessageType::kHello, timeout_ms);
  if (!f.ok()) return f.status();
  absl::StatusOr<Hello> hello = DecodeHello(f->payload);
  if (!hello.ok()) return hello.status();
  session->runner_version_ = hello->runner_version;
  session->name_ = hello->name;
  const std::string host_nonce = Nonce();
  if (absl::Status s =
          WriteFrame(*fd, MessageType::kAuth,
                     Encode(Auth{host_nonce, HostProof(key, hello->nonce, host_nonce)}));
      !s.ok()) {
    return s;
  }
  f = session->Expect(MessageType::kAuthOk, timeout_ms);
  if (!f.ok()) {
    return absl::IsFailedPrecondition(f.status())
               ? absl::PermissionDeniedError(
                     StrCat("board ", address, " refused the key: ", f.status().message()))
               : f.status();
  }
  absl::StatusOr<AuthOk> ok = DecodeAuthOk(f->payload);
  if (!ok.ok()) return ok.status();
  if (!SameSecret(ok->mac, BoardProof(key, hello->nonce, host_nonce))) {
    return absl::PermissionDeniedError(
        StrCat("board ", address, " does not hold the board key (its proof is wrong)"));
  }
  return session;
}

BoardSession::~BoardSession() { close(fd_); }

absl::StatusOr<Frame> BoardSession::Expect(MessageType type, int timeout_ms) {
  absl::StatusOr<Frame> f = ReadFrame(fd_, 0, timeout_ms);
  if (!f.ok()) return f.status();
  if (f->type == MessageType::kError) {
    // The board's reason, as a failed precondition the caller may refine.
    return absl::FailedPreconditionError(StrCat("the board says: ", Printable(f->payload)));
  }
  if (f->type != type) {
    return absl::InvalidArgumentError(StrCat("the board sent ", MessageTypeName(f->type), " where ",
                                             MessageTypeName(type), " was due"));
  }
  return f;
}

absl::StatusOr<Description> BoardSession::Describe() {
  if (absl::Status s = WriteFrame(fd_, MessageType::kDescribe, ""); !s.ok()) return s;
  absl::StatusOr<Frame> f = Expect(MessageType::kDescription, 60000);
  if (!f.ok()) return f.status();
  return DecodeDescription(f->payload);
}

absl::StatusOr<Frame> BoardSession::Ask(MessageType type, const std::string& payload,
                                        MessageType answer, uint32_t timeout_ms) {
  if (absl::Status s = WriteFrame(fd_, type, payload); !s.ok()) return s;
  // The board's own limit, then a margin for the request still in flight
  // (a second per MiB: a slow board's link) and the answer to arrive.
  const uint64_t margin_ms = 10000 + 1000 * (payload.size() >> 20);
  return Expect(answer,
                static_cast<int>(std::min<uint64_t>(uint64_t{timeout_ms} + margin_ms, 1u << 30)));
}

absl::StatusOr<Measured> BoardSession::Measure(const MeasureRequest& request) {
  absl::StatusOr<Frame> f =
      Ask(MessageType::kMeasure, Encode(request), MessageType::kMeasured, request.timeout_ms);
  if (!f.ok()) return f.status();
  return DecodeMeasured(f->payload);
}

absl::StatusOr<MeasuredModel> BoardSession::MeasureModel(const MeasureModelRequest& request) {
  absl::StatusOr<Frame> f = Ask(MessageType::kMeasureModel, Encode(request),
                                MessageType::kMeasuredModel, request.timeout_ms);
  if (!f.ok()) return f.status();
  return DecodeMeasuredModel(f->payload);
}

absl::StatusOr<std::string> ReadBoardKey(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(StrCat("cannot read the board key file ", path));
  std::string key((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  while (!key.empty() && (key.back() == '\n' || key.back() == '\r')) key.pop_back();
  if (key.size() < kMinKeyBytes) {
    return absl::InvalidArgumentError(StrCat("the key in ", path, " is ", key.size(),
                                             " bytes; a board key is at least ", kMinKeyBytes));
  }
  return key;
}

}  // namespace kiln::board
