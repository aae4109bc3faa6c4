// kiln-tracker --listen ADDR --db FILE --artifacts DIR [--port-file FILE]
//              [--token TOKEN] [--lease-timeout-ms N]
#include <signal.h>

#include <algorithm>
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
    "                    [--port-file FILE] [--token TOKEN] [--lease-timeout-ms N]\n";

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
  auto flags = kiln::ParseFlags(
      args, {"--listen", "--db", "--artifacts", "--port-file", "--token", "--lease-timeout-ms"});
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
