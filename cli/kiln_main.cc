// kiln: the user's client (see cli/cli.h).
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "cli/cli.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  kiln::cli::CliEnv env{&std::cout, &std::cerr};
  if (const char* token = std::getenv("KILN_TOKEN")) env.token = token;
  if (const char* ca = std::getenv("KILN_TLS_CA")) env.tls_ca = ca;
  if (const char* tracker = std::getenv("KILN_TRACKER")) env.tracker = tracker;
  const char* term = std::getenv("TERM");
  env.terminal = isatty(STDOUT_FILENO) && !(term && std::string(term) == "dumb");
  return kiln::cli::RunCli(args, env);
}
