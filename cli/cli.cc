#include "cli/cli.h"

#include <algorithm>
#include <ostream>

#include "cli/common.h"

namespace kiln::cli {

const std::vector<Command>& Commands() {
  static const std::vector<Command>* commands = new std::vector<Command>{
      {"tune",
       "tune MODEL --tracker ADDR --key KEY --trials N [--target SPEC] "
       "[--strategy random|grid|ga|xgb] [--budget DURATION] [--early-stopping N] "
       "[--deadline DURATION] [--priority N] [--candidate-timeout DURATION] "
       "[--flush-cache | --no-flush-cache] [--threads N] [--no-end-to-end] "
       "[--precision fp32|bf16] "
       "[--input-shape NAME=DIMS]... [--wait]\n"
       "       kiln tune MODEL --local --db DB -o PATH --trials N [--strategy S] "
       "[--budget DURATION] [--early-stopping N] [--flush-cache | --no-flush-cache] "
       "[--input-shape NAME=DIMS]...",
       "submit an ONNX model for tuning (prints the job id), or tune it on this machine", RunTune},
      {"jobs", "jobs --tracker ADDR", "list the tracker's jobs", RunJobs},
      {"job", "job JOB --tracker ADDR", "show one job and its tasks", RunJob},
      {"cancel", "cancel JOB --tracker ADDR", "cancel a job", RunCancel},
      {"devices", "devices --tracker ADDR", "list the measurement agents", RunDevices},
      {"records",
       "records --tracker ADDR [--workload KEY] [--target SPEC] [--limit N] [--job ID]\n"
       "       kiln records export --db DB [-o FILE.jsonl] [--farm NAME]\n"
       "       kiln records import FILE.jsonl... --db DB [--farm NAME]",
       "list tuning records, or move them between log databases", RunRecords},
      {"fetch", "fetch JOB --tracker ADDR -o PATH [--insecure]",
       "download a job's compiled artifact", RunFetch},
      {"report", "report JOB (--tracker ADDR | --db DB) -o PLOT.svg|PLOT.png",
       "plot a job's tuning curves and print its summary table", RunReport},
      {"compile",
       "compile MODEL --db DB -o PATH [--target SPEC] [--input-shape NAME=DIMS]... "
       "[--max-elements N] "
       "[--signing-key FILE] [--dump-ir] [--precision fp32|bf16 [--accuracy-input NAME=FILE]...]",
       "compile a model locally with the best configs of a log database", RunCompile},
  };
  return *commands;
}

namespace {
void PrintHelp(std::ostream& out) {
  out << "usage: kiln <command> [arguments]\n\ncommands:\n";
  for (const Command& c : Commands()) {
    out << "  " << c.name << std::string(c.name.size() < 10 ? 10 - c.name.size() : 1, ' ')
        << c.summary << "\n";
  }
  out << "\nkiln help <command> shows a command's arguments. Commands that call a tracker\n"
         "take --token TOKEN (or the KILN_TOKEN variable) when it requires one, and\n"
         "--tls-ca FILE (or KILN_TLS_CA) to reach a tracker that serves TLS; KILN_TRACKER\n"
         "stands for --tracker ADDR.\n";
}
}  // namespace

int RunCli(const std::vector<std::string>& args, const CliEnv& env) {
  if (args.empty()) {
    PrintHelp(*env.err);
    return 2;
  }
  const std::string& name = args[0];
  if (name == "--help" || name == "-h" || name == "help") {
    if (args.size() > 1) {
      for (const Command& c : Commands()) {
        if (c.name == args[1]) {
          *env.out << "usage: kiln " << c.usage << "\n" << c.summary << "\n";
          return 0;
        }
      }
      *env.err << "kiln: unknown command '" << args[1] << "'\n";
      return 2;
    }
    PrintHelp(*env.out);
    return 0;
  }
  if (name == "--version" || name == "version") {
    *env.out << "kiln " << KILN_VERSION << "\n";
    return 0;
  }
  for (const Command& c : Commands()) {
    if (c.name == name) {
      // --token TOKEN and --tls-ca FILE (or --name=VALUE), for every
      // command that calls a tracker; taken out before the command parses
      // its own flags.
      CliEnv with_token = env;
      std::vector<std::string> rest;
      for (size_t i = 1; i < args.size(); ++i) {
        bool taken = false;
        for (auto [flag, field] :
             {std::pair{"--token", &with_token.token}, std::pair{"--tls-ca", &with_token.tls_ca}}) {
          const std::string eq = StrCat(flag, "=");
          if (args[i] == flag && i + 1 < args.size()) {
            *field = args[++i];
            taken = true;
          } else if (args[i].rfind(eq, 0) == 0) {
            *field = args[i].substr(eq.size());
            taken = true;
          }
        }
        if (!taken) rest.push_back(args[i]);
      }
      for (const std::string& a : rest) {
        if (a == "--help" || a == "-h") {
          *env.out << "usage: kiln " << c.usage << "\n" << c.summary << "\n";
          return 0;
        }
      }
      // KILN_TRACKER stands for --tracker in commands that call one (not
      // for the local modes: tune --local, report --db, compile).
      const auto has = [&](const char* flag) {
        return std::any_of(rest.begin(), rest.end(), [&](const std::string& a) {
          return a == flag || a.rfind(StrCat(flag, "="), 0) == 0;
        });
      };
      if (!env.tracker.empty() && c.usage.find("--tracker") != std::string::npos &&
          !has("--tracker") && !has("--local") && !has("--db")) {
        rest.push_back("--tracker");
        rest.push_back(env.tracker);
      }
      return c.run(c, rest, with_token);
    }
  }
  *env.err << "kiln: unknown command '" << name << "' (see kiln help)\n";
  return 2;
}

}  // namespace kiln::cli
