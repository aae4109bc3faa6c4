#pragma once
// The `kiln` command line client. RunCli is main() without the process:
// it takes the arguments after the program name and writes to the given
// streams, so tests drive it in-process.
//
// Exit codes: 0 success, 1 failure (RPC error, unreachable tracker, failed
// job, bad file), 2 usage error.

#include <chrono>
#include <iosfwd>
#include <string>
#include <vector>

namespace kiln::cli {

struct CliEnv {
  std::ostream* out;
  std::ostream* err;
  // How long to wait for the tracker's channel to connect.
  std::chrono::milliseconds connect_timeout{5000};
  // The bearer token sent with every tracker call (KILN_TOKEN; any
  // command's --token overrides it); empty: none.
  std::string token;
  // A PEM file of the CA that signed the tracker's certificate (KILN_TLS_CA;
  // --tls-ca overrides it): the tracker is then reached over TLS.
  std::string tls_ca;
  // The tracker a command calls when it has no --tracker (KILN_TRACKER).
  std::string tracker;
  // Standard output is a terminal: `kiln tune --wait` redraws a live
  // progress display instead of printing one line per event.
  bool terminal = false;
};

int RunCli(const std::vector<std::string>& args, const CliEnv& env);

}  // namespace kiln::cli
