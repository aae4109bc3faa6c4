#pragma once
// The two ends of a board connection (docs/protocol.md, "The board
// protocol"): the board serves one host at a time; the host (the agent, a
// test) opens a session, proves it holds the board's key, checks that the
// board holds it too, then asks for the board's description and sends
// kernels to measure.
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "board/wire.h"

namespace kiln::board {

struct ServeOptions {
  std::string key;   // the shared board key (its bytes)
  std::string name;  // what the hello names the board (Hello::name)
  uint32_t max_measure_payload = kDefaultMaxMeasurePayload;
  int handshake_timeout_ms = 10000;   // for the host's auth
  int idle_timeout_ms = 3600 * 1000;  // between requests
  Description description;            // what Describe answers
};

// Serves one connection on `fd` until the host closes it (OK) or breaks the
// protocol: a wrong key (PERMISSION_DENIED, after telling the host), a
// malformed, oversized or unexpected message (INVALID_ARGUMENT or
// RESOURCE_EXHAUSTED, after an error message to the host). Never throws or
// crashes on what the peer sends; does not close `fd`.
absl::Status ServeConnection(int fd, const ServeOptions& options);

// Accepts connections on the listening socket `listen_fd`, one at a time (a
// board times one kernel at a time), logging each's end on stderr. Returns
// only when accept fails.
absl::Status Serve(int listen_fd, const ServeOptions& options);

// A board behind NAT or a firewall (kiln-board --connect HOST:PORT): dials
// the agent at `address` (kiln-agent --board-listen) and serves each
// connection as ServeConnection does, dialling again when it ends (at once)
// or when the agent does not answer (backing off from 0.25 to 5 s, saying
// so on stderr once per outage). Never returns.
[[noreturn]] void ServeDialingOut(const std::string& address, const ServeOptions& options);

// A TCP connection to HOST:PORT (TCP_NODELAY), or UNAVAILABLE saying why.
absl::StatusOr<int> Dial(const std::string& address);

// The host's end.
class BoardSession {
 public:
  // Connects to HOST:PORT and authenticates with `key`: UNAVAILABLE when
  // the board cannot be reached, PERMISSION_DENIED when it refuses the key
  // or does not prove that it holds it.
  static absl::StatusOr<std::unique_ptr<BoardSession>> Open(const std::string& address,
                                                            const std::string& key,
                                                            int timeout_ms = 10000);
  ~BoardSession();
  BoardSession(const BoardSession&) = delete;
  BoardSession& operator=(const BoardSession&) = delete;

  absl::StatusOr<Description> Describe();
  // The board's answer (its errors typed in it); UNAVAILABLE when the
  // connection breaks before it answers, DEADLINE_EXCEEDED past the
  // request's time limit and a margin.
  absl::StatusOr<Measured> Measure(const MeasureRequest& request);
  // A model's variants end to end (board/variants.h); errors as Measure's.
  absl::StatusOr<MeasuredModel> MeasureModel(const MeasureModelRequest& request);
  const std::string& runner_version() const { return runner_version_; }
  const std::string& name() const { return name_; }

 private:
  explicit BoardSession(int fd) : fd_(fd) {}
  absl::StatusOr<Frame> Expect(MessageType type, int timeout_ms);
  // Sends a request and waits for its answer: the board's limit and a margin.
  absl::StatusOr<Frame> Ask(MessageType type, const std::string& payload, MessageType answer,
                            uint32_t timeout_ms);
  int fd_;
  std::string runner_version_;
  std::string name_;
};

// The shared board key from FILE: its bytes, less a trailing newline;
// INVALID_ARGUMENT when it cannot be read or is shorter than 16 bytes.
inline constexpr size_t kMinKeyBytes = 16;
absl::StatusOr<std::string> ReadBoardKey(const std::string& path);

// A TCP socket listening on HOST:PORT (port 0: any free one, `*bound_port`
// says which), or why not.
absl::StatusOr<int> ListenOn(const std::string& address, int* bound_port = nullptr);

}  // namespace kiln::board
