#pragma once
// Boards that dial in (kiln-board --connect AGENT:PORT, for a board behind
// NAT; kiln-agent --board-listen HOST:PORT): each board's connection opens
// with its hello, which names it (board::Hello::name). The listener keeps
// the newest connection of each board, and gives each board a local port
// on loopback that stands for it: a connection to that port (the agent's
// BoardMeasurer, as for a board it dials) is paired with the board's
// waiting connection, its hello replayed, and the bytes relayed both ways
// until either side closes. The protocol runs end to end through the relay:
// the key's proofs are checked by the agent and the board, not here, so a
// connection that names a board it is not fails its handshake.
//
// Bounded: at most kMaxPending connections waiting for their hello (each
// for at most 10 s), at most kMaxBoards names; a waiting connection older
// than kIdleMs is closed (the board, whose handshake would time out, dials
// again at once).

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"

namespace kiln::agent {

class BoardListener {
 public:
  static constexpr int kMaxPending = 64;
  static constexpr size_t kMaxBoards = 256;
  static constexpr int kIdleMs = 5000;
  static constexpr int kPairWaitMs = 15000;

  // Called (on a thread of the listener's) when a board's name is first
  // heard, with the loopback address that stands for it; true when the
  // board is taken into the farm. A board refused (it does not hold the key)
  // is asked about again when it dials after kRetryMs.
  using NewBoard = std::function<bool(const std::string& name, const std::string& local_address)>;
  static constexpr int kRetryMs = 10000;

  // Listens on HOST:PORT (`*bound_port`: the port, for PORT 0).
  static absl::StatusOr<std::unique_ptr<BoardListener>> Listen(const std::string& address,
                                                               NewBoard on_new_board,
                                                               int* bound_port = nullptr);
  ~BoardListener();
  BoardListener(const BoardListener&) = delete;
  BoardListener& operator=(const BoardListener&) = delete;

  // Accepts boards' connections until the listening socket fails; returns why.
  absl::Status Run();

 private:
  struct Waiting {
    int fd = -1;
    std::string hello_frame;  // replayed to whoever takes the connection
    std::chrono::steady_clock::time_point since;
  };
  struct Board {
    std::string name;
    int local_fd = -1;  // listening on loopback
    std::string local_address;
    std::mutex mu;
    std::condition_variable cv;
    Waiting waiting;  // fd -1: none
    // Under the listener's mu_: whether on_new_board_ took it, or is being
    // asked, and when it last refused it.
    bool admitted = false;
    bool asking = false;
    std::chrono::steady_clock::time_point refused;
  };

  BoardListener(int fd, NewBoard on_new_board) : fd_(fd), on_new_board_(std::move(on_new_board)) {}
  // A board's connection: reads its hello, files it under the board's name.
  void Admit(int fd);
  // Accepts on the board's local port; pairs each with the board's
  // connection and relays.
  void ServeLocal(Board* board);
  // Takes the board's waiting connection (waits up to kPairWaitMs).
  bool Take(Board* board, Waiting* out);

  int fd_;
  NewBoard on_new_board_;
  std::mutex mu_;  // guards boards_ and pending_
  std::map<std::string, std::unique_ptr<Board>> boards_;
  int pending_ = 0;
};

}  // namespace kiln::agent
