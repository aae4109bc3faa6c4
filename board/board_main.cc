// kiln-board: the runner for a board that cannot host a compiler (docs/
// operator-guide.md, "Boards"). Listens for one host agent at a time,
// proves and checks the shared board key, describes the board, and loads,
// verifies and times the kernels the agent built for it. Exit codes: 0
// never (it serves until stopped), 1 when it cannot listen, 2 bad usage.
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "base/flags.h"
#include "base/str.h"
#include "board/runner.h"
#include "board/session.h"

namespace {

constexpr char kUsage[] =
    "usage: kiln-board (--listen HOST:PORT | --connect HOST:PORT) --key-file FILE\n"
    "                  [--name NAME] [--max-message-bytes N[K|M|G]]\n"
    "\n"
    "Serves one host agent at a time (kiln-agent --board HOST:PORT): the agent\n"
    "proves it holds the board key in FILE (at least 16 bytes; the same file\n"
    "on both sides, never sent), then sends kernels built for this board,\n"
    "which are verified against their reference output and timed here.\n"
    "  --listen HOST:PORT       where to listen (0.0.0.0:9190 for every address)\n"
    "  --connect HOST:PORT      dial out to the agent instead (kiln-agent\n"
    "                           --board-listen HOST:PORT), for a board behind NAT\n"
    "  --name NAME              what the board calls itself (default: its host name)\n"
    "  --key-file FILE          the shared board key\n"
    "  --max-message-bytes N    the largest measurement request (default 256M)\n"
    "  --describe               print what the board reports of itself and exit\n";

int Usage(const std::string& why) {
  std::fprintf(stderr, "kiln-board: %s\n%s", why.c_str(), kUsage);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  auto flags = kiln::ParseFlags(
      args, {"--listen", "--connect", "--key-file", "--name", "--max-message-bytes"},
      {"--help", "--describe"});
  if (!flags.ok()) return Usage(std::string(flags.status().message()));
  if (flags->Has("--help")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  const kiln::board::Description self = kiln::board::DescribeThisBoard();
  if (flags->Has("--describe")) {
    std::printf(
        "triple: %s\ncpu: %s\ncores: %u\nl2: %llu bytes\nl3: %llu bytes\n"
        "fma peak: %.1f GFLOP/s\nfeatures: %s\n",
        self.triple.c_str(), self.cpu.c_str(), self.cores,
        static_cast<unsigned long long>(self.l2_bytes),
        static_cast<unsigned long long>(self.l3_bytes), self.fma_gflops, self.features.c_str());
    return 0;
  }
  if (!flags->positional.empty()) return Usage("unexpected argument " + flags->positional[0]);
  if (flags->Has("--listen") == flags->Has("--connect")) {
    return Usage("one of --listen HOST:PORT and --connect HOST:PORT is required");
  }
  if (!flags->Has("--key-file")) return Usage("--key-file FILE is required");
  absl::StatusOr<std::string> key = kiln::board::ReadBoardKey(flags->Get("--key-file"));
  if (!key.ok()) return Usage(std::string(key.status().message()));
  kiln::board::ServeOptions options;
  options.key = *std::move(key);
  options.description = self;
  if (flags->Has("--max-message-bytes")) {
    int64_t n = 0;
    if (!kiln::ParseBytes(flags->Get("--max-message-bytes"), &n) || n < 1024 ||
        n > int64_t{1} << 31) {
      return Usage("--max-message-bytes takes 1K to 2G");
    }
    options.max_measure_payload = static_cast<uint32_t>(n);
  }
  options.description.max_request_bytes = options.max_measure_payload;
  char host[256] = "";
  gethostname(host, sizeof(host) - 1);
  options.name = flags->Has("--name") ? flags->Get("--name") : std::string(host);
  if (options.name.empty() || options.name.size() > 256 || !kiln::IsPrintableUtf8(options.name) ||
      options.name.find('/') != std::string::npos) {
    return Usage("--name takes 1 to 256 printable bytes, without '/'");
  }
  if (flags->Has("--connect")) {
    std::fprintf(stderr, "kiln-board: %s, %u cores, %s, dialling %s\n", self.triple.c_str(),
                 self.cores, options.name.c_str(), flags->Get("--connect").c_str());
    kiln::board::ServeDialingOut(flags->Get("--connect"), options);
  }
  int port = 0;
  auto fd = kiln::board::ListenOn(flags->Get("--listen"), &port);
  if (!fd.ok()) {
    std::fprintf(stderr, "kiln-board: %s\n", std::string(fd.status().message()).c_str());
    return 1;
  }
  std::fprintf(stderr, "kiln-board: %s, %u cores, listening on port %d\n", self.triple.c_str(),
               self.cores, port);
  const absl::Status s = kiln::board::Serve(*fd, options);
  std::fprintf(stderr, "kiln-board: %s\n", std::string(s.message()).c_str());
  return 1;
}
