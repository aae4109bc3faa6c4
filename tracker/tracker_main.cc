// kiln-tracker --listen ADDR --db FILE --artifacts DIR [--port-file FILE]
//              [--token TOKEN] [--lease-timeout-ms N]
#include <signal.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

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
  for (size_t i = 0; i < args.size(); ++i) {
    std::string flag = args[i];
    std::string value;
    size_t eq = flag.find('=');
    if (flag.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
    } else if (flag == "--help" || flag == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (i + 1 < args.size()) {
      value = args[++i];
    } else {
      std::fprintf(stderr, "kiln-tracker: %s needs a value\n%s", flag.c_str(), kUsage);
      return 2;
    }
    if (flag == "--listen") {
      options.listen = value;
    } else if (flag == "--db") {
      options.db_path = value;
    } else if (flag == "--artifacts") {
      options.artifacts_dir = value;
    } else if (flag == "--port-file") {
      port_file = value;
    } else if (flag == "--token") {
      options.token = value;
    } else if (flag == "--lease-timeout-ms") {
      int64_t ms = 0;
      if (!kiln::ParseInt64(value, &ms) || ms <= 0) {
        std::fprintf(stderr, "kiln-tracker: --lease-timeout-ms must be a positive integer\n");
        return 2;
      }
      options.lease_timeout_ms = ms;
    } else {
      std::fprintf(stderr, "kiln-tracker: unknown flag %s\n%s", flag.c_str(), kUsage);
      return 2;
    }
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
