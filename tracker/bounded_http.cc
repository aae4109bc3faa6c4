#include "tracker/bounded_http.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace kiln::tracker {
namespace {

using SteadyClock = std::chrono::steady_clock;

// Set on the accepting thread while it runs a connection it refuses.
thread_local bool t_refusing = false;

// One thread per connection, at most `max` of them, started as needed and
// kept; a connection beyond `max` is run at once on the accepting thread
// with t_refusing set (BoundedHttpServer answers 503 and closes it). Nothing
// waits in a queue.
class ConnectionThreads final : public httplib::TaskQueue {
 public:
  ConnectionThreads(size_t max, std::atomic<int64_t>* refused) : max_(max), refused_(refused) {}
  ~ConnectionThreads() override { shutdown(); }

  void enqueue(std::function<void()> fn) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!stopping_ && busy_ < max_) {
        ++busy_;
        tasks_.push_back(std::move(fn));
        if (tasks_.size() > idle_) threads_.emplace_back([this] { Work(); });
        cv_.notify_one();
        return;
      }
    }
    ++*refused_;
    t_refusing = true;
    fn();
    t_refusing = false;
  }

  void shutdown() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    for (std::thread& t : threads_) {
      if (t.joinable()) t.join();
    }
  }

 private:
  void Work() {
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      ++idle_;
      cv_.wait(lock, [&] { return !tasks_.empty() || stopping_; });
      --idle_;
      if (tasks_.empty()) return;  // stopping, nothing left
      std::function<void()> fn = std::move(tasks_.front());
      tasks_.pop_front();
      lock.unlock();
      fn();
      lock.lock();
      --busy_;
    }
  }

  const size_t max_;
  std::atomic<int64_t>* refused_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  std::vector<std::thread> threads_;  // only the accepting thread adds
  size_t busy_ = 0;                   // connections queued or being served
  size_t idle_ = 0;                   // threads waiting for one
  bool stopping_ = false;
};

// A connection's socket for httplib, read through a buffer, every read and
// write bounded by the current request's deadline and by a byte budget.
class DeadlineStream final : public httplib::Stream {
 public:
  explicit DeadlineStream(int sock) : sock_(sock) {}

  void Limit(SteadyClock::time_point deadline, int64_t byte_budget) {
    deadline_ = deadline;
    budget_ = byte_budget;
  }
  // Whether a read or write failed (deadline, budget, error): httplib
  // answers a request it could not read with a 400 whose failed write it
  // ignores, and would wait for the next request; the connection ends.
  bool failed() const { return failed_; }
  // Waits at most `wait` for the first byte of the next request.
  bool WaitForRequest(std::chrono::milliseconds wait) {
    if (begin_ < end_) return true;
    return Poll(POLLIN, std::min(deadline_, SteadyClock::now() + wait));
  }

  bool is_readable() const override { return begin_ < end_ || Check(Poll(POLLIN, deadline_)); }
  bool is_writable() const override { return Check(Poll(POLLOUT, deadline_)); }

  ssize_t read(char* ptr, size_t size) override {
    if (size == 0) return 0;
    if (begin_ == end_) {
      if (budget_ <= 0 || !Poll(POLLIN, deadline_)) return Fail();
      ssize_t n;
      do {
        n = ::recv(sock_, buf_, sizeof buf_, 0);
      } while (n < 0 && errno == EINTR);
      if (n < 0) return Fail();
      if (n == 0) return 0;
      begin_ = 0;
      end_ = static_cast<size_t>(n);
      budget_ -= n;
    }
    const size_t n = std::min(size, end_ - begin_);
    std::memcpy(ptr, buf_ + begin_, n);
    begin_ += n;
    return static_cast<ssize_t>(n);
  }

  ssize_t write(const char* ptr, size_t size) override {
    // All of it or nothing, by the deadline: httplib writes a response's
    // headers and body with one call each, and a blocking send to a client
    // that does not read would not return.
    size_t sent = 0;
    while (sent < size) {
      if (!Poll(POLLOUT, deadline_)) return Fail();
      const ssize_t n = ::send(sock_, ptr + sent, size - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0) {
        if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
        return Fail();
      }
      sent += static_cast<size_t>(n);
    }
    return static_cast<ssize_t>(sent);
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    Address(&::getpeername, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    Address(&::getsockname, ip, port);
  }
  socket_t socket() const override { return sock_; }

 private:
  ssize_t Fail() const {
    failed_ = true;
    return -1;
  }
  bool Check(bool ok) const {
    if (!ok) failed_ = true;
    return ok;
  }
  // Until `until`: whether the socket became ready for `events`.
  bool Poll(short events, SteadyClock::time_point until) const {
    while (true) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(until - SteadyClock::now());
      if (left.count() <= 0) return false;
      pollfd p{sock_, events, 0};
      const int n = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
      if (n > 0) return (p.revents & (events | POLLHUP | POLLERR)) != 0;
      if (n < 0 && errno != EINTR) return false;
    }
  }
  void Address(int (*get)(int, sockaddr*, socklen_t*), std::string& ip, int& port) const {
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    ip.clear();
    port = 0;
    if (get(sock_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return;
    char text[INET6_ADDRSTRLEN] = {};
    if (addr.ss_family == AF_INET) {
      const auto* a = reinterpret_cast<const sockaddr_in*>(&addr);
      ::inet_ntop(AF_INET, &a->sin_addr, text, sizeof text);
      port = ntohs(a->sin_port);
    } else if (addr.ss_family == AF_INET6) {
      const auto* a = reinterpret_cast<const sockaddr_in6*>(&addr);
      ::inet_ntop(AF_INET6, &a->sin6_addr, text, sizeof text);
      port = ntohs(a->sin6_port);
    }
    ip = text;
  }

  const int sock_;
  SteadyClock::time_point deadline_ = SteadyClock::now();
  int64_t budget_ = 0;
  mutable bool failed_ = false;
  char buf_[4096];
  size_t begin_ = 0, end_ = 0;
};

constexpr int64_t kMaxHeaderBytes = 64 << 10;
constexpr size_t kMaxBodyBytes = 64 << 10;
constexpr int kMaxRequestsPerConnection = 100;

}  // namespace

BoundedHttpServer::BoundedHttpServer(const HttpLimits& limits) : limits_(limits) {
  new_task_queue = [this] {
    return new ConnectionThreads(static_cast<size_t>(std::max(1, limits_.max_connections)),
                                 &refused_);
  };
  set_payload_max_length(kMaxBodyBytes);
}

bool BoundedHttpServer::process_and_close_socket(socket_t sock) {
  if (t_refusing) {
    static constexpr char k503[] =
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\n"
        "Connection: close\r\nContent-Length: 21\r\n\r\ntoo many connections\n";
    [[maybe_unused]] ssize_t n = ::send(sock, k503, sizeof k503 - 1, MSG_DONTWAIT | MSG_NOSIGNAL);
    ::shutdown(sock, SHUT_RDWR);
    ::close(sock);
    return false;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closing_) {  // accepted as the server stopped
      ::shutdown(sock, SHUT_RDWR);
      ::close(sock);
      return false;
    }
    open_.insert(sock);
  }
  DeadlineStream stream(sock);
  bool ok = false;
  for (int i = 0; i < kMaxRequestsPerConnection && is_running(); ++i) {
    const auto start = SteadyClock::now();
    stream.Limit(start + std::chrono::milliseconds(limits_.header_timeout_ms), kMaxHeaderBytes);
    if (!stream.WaitForRequest(std::chrono::milliseconds(limits_.keep_alive_ms))) break;
    bool closed = false;
    ok =
        process_request(stream, i + 1 == kMaxRequestsPerConnection, closed, [&](httplib::Request&) {
          // The headers are in: the body and the response
          // have until the request's deadline.
          stream.Limit(start + std::chrono::milliseconds(limits_.request_timeout_ms),
                       static_cast<int64_t>(kMaxBodyBytes) + 4096);
        });
    if (!ok || closed || stream.failed()) break;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    open_.erase(sock);
  }
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
  return ok;
}

}  // namespace kiln::tracker
