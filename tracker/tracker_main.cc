// kiln-tracker --listen ADDR --db FILE --artifacts DIR [--port-file FILE]
//              [--token TOKEN] [--lease-timeout-ms N] [--max-model-bytes N]
#include <signal.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "deploy/flags.h"
#include "deploy/str.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"
#include "tracker/server.h"

namespace {

constexpr const char* kUsage =
    "usage: kiln-tracker --listen HOST:PORT --db FILE --artifacts DIR\n"
    "                    [--port-file FILE] [--token TOKEN] [--lease-timeout-ms N]\n"
    "                    [--max-model-bytes N[K|M|G]]   (default 4G)\n"
    "                    [--max-elements N]   (most elements of one tensor; default and "
    "cap 2^32)\n";

// "4G", "512M", "100000": bytes, with binary suffixes.
bool ParseBytes(std::string text, int64_t* out) {
  int shift = 0;
  if (!text.empty()) {
    switch (text.back()) {
      case 'K':
        shift = 10;
        break;
      case 'M':
        shift = 20;
        break;
      case 'G':
        shift = 30;
        break;
      case 'T':
        shift = 40;
        break;
      default:
        break;
    }
  }
  if (shift > 0) text.pop_back();
  int64_t v = 0;
  if (!kiln::ParseInt64(text, &v) || v <= 0 || v > (INT64_MAX >> shift)) return false;
  *out = v << shift;
  return true;
}

bool WritePortFile(const std::string& path, int port) {
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!out) return false;
    out << port << "\n";
    if (!out.flush()) return false;
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  return !ec;
}

}  // namespace

int main(int argc, char** argv) {
  auto log = spdlog::stderr_color_mt("tracker");
  log->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [tracker] [%l] %v");

  kiln::tracker::TrackerOptions options;
  options.listen = "";
  std::string port_file;
  std::vector<std::string> args(argv + 1, argv + argc);
  if (std::find(args.begin(), args.end(), "--help") != args.end() ||
      std::find(args.begin(), args.end(), "-h") != args.end()) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  auto flags =
      kiln::ParseFlags(args, {"--listen", "--db", "--artifacts", "--port-file", "--token",
                              "--lease-timeout-ms", "--max-model-bytes", "--max-elements"});
  if (!flags.ok() || !flags->positional.empty()) {
    std::string why = flags.ok() ? kiln::StrCat("unexpected argument '", flags->positional[0], "'")
                                 : std::string(flags.status().message());
    std::fprintf(stderr, "kiln-tracker: %s\n%s", why.c_str(), kUsage);
    return 2;
  }
  options.listen = flags->Get("--listen");
  options.db_path = flags->Get("--db");
  options.artifacts_dir = flags->Get("--artifacts");
  options.token = flags->Get("--token");
  port_file = flags->Get("--port-file");
  if (flags->Has("--lease-timeout-ms")) {
    int64_t ms = 0;
    if (!kiln::ParseInt64(flags->Get("--lease-timeout-ms"), &ms) || ms <= 0) {
      std::fprintf(stderr, "kiln-tracker: --lease-timeout-ms must be a positive integer\n");
      return 2;
    }
    options.lease_timeout_ms = ms;
  }
  if (flags->Has("--max-model-bytes") &&
      !ParseBytes(flags->Get("--max-model-bytes"), &options.jobs.max_model_bytes)) {
    std::fprintf(stderr,
                 "kiln-tracker: --max-model-bytes must be a positive size (e.g. 4G, 512M)\n");
    return 2;
  }
  if (flags->Has("--max-elements")) {
    int64_t n = 0;
    if (!kiln::ParseInt64(flags->Get("--max-elements"), &n) || n <= 0 || n > (int64_t{1} << 32)) {
      std::fprintf(stderr, "kiln-tracker: --max-elements must be in 1..4294967296\n");
      return 2;
    }
    options.jobs.max_elements = n;
  }
  if (options.listen.empty() || options.db_path.empty() || options.artifacts_dir.empty()) {
    std::fprintf(stderr, "kiln-tracker: --listen, --db and --artifacts are required\n%s", kUsage);
    return 2;
  }

  // Block the stop signals in every thread; the main thread waits for them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  kiln::tracker::TrackerServer server(options);
  auto port = server.Start();
  if (!port.ok()) {
    log->error("cannot start: {}", port.status().ToString());
    return 1;
  }
  std::string host = options.listen.substr(0, options.listen.rfind(':'));
  log->info("listening on {}:{}", host, *port);
  if (!port_file.empty() && !WritePortFile(port_file, *port)) {
    log->error("cannot write the port file {}", port_file);
    server.Stop();
    return 1;
  }
  int sig = 0;
  sigwait(&signals, &sig);
  log->info("signal {}: shutting down", sig);
  server.Stop();
  log->info("stopped");
  return 0;
}
