// kiln-agent (AgentMain, agent_cli.h): a measurement agent that dials out
// to the tracker.
//   kiln-agent --tracker HOST:PORT --key KEY [--id ID] [--token-file FILE]
//              [--token T] [--device cpu|opencl:N|cuda:N] [--target SPEC]
//              [--workers-timeout-ms N] [--max-batch N] [--worker-memory N[K|M|G]]
// --device opencl:N measures on OpenCL device N of --list-devices (its
// target: "opencl -device=NAME"), --device cuda:N on CUDA device N (its
// target: "cuda -arch=sm_XY -device=NAME"; NVRTC and the driver are loaded
// at run time); one agent process per device.
// The agent's token comes from --token-file or KILN_TOKEN (with one, the
// tracker names the agent after the token's user); --token is the legacy
// secret shared by all agents.
//   kiln-agent --tracker HOST:PORT --key KEY [--board HOST:PORT ...]
//              [--board-listen HOST:PORT] --board-key-file FILE   (boards
//              running kiln-board, dialled or dialling in (--connect):
//              candidates built here for each board's CPU, verified and timed
//              there; one session with the tracker per board, named
//              ID/HOST:PORT or ID/NAME)
//   kiln-agent --list-devices   (the CPU and the OpenCL devices this board has)
// `--workers-timeout-ms` is the per-candidate time limit used when a batch's
// timing policy leaves timeout_ms unset. Whole-model batches (a job's
// end-to-end check) send the model's files first: --max-model-bytes bounds
// each, and they live in a temporary folder for the session.
#include "device_agent/agent_cli.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/flags.h"
#include "base/fma_peak.h"
#include "base/pem.h"
#include "base/str.h"
#include "board/session.h"
#include "compiler/codegen/cuda.h"
#include "compiler/target.h"
#include "deploy/device.h"
#include "deploy/parallel.h"
#include "device_agent/board_listener.h"
#include "device_agent/board_measure.h"
#include "device_agent/sandbox.h"
#include "device_agent/session.h"

namespace {

constexpr char kUsage[] =
    "usage: kiln-agent --tracker HOST:PORT --key KEY [--id ID] [--token-file FILE] [--token T] "
    "[--device cpu|opencl:N|cuda:N] [--target SPEC] [--workers-timeout-ms N] [--max-batch N]\n"
    "                  [--worker-memory N[K|M|G]|0]   (the measurement worker's address space;\n"
    "                  default half the memory (at least 4G) + 256M per core; 0: none;\n"
    "                  none by default for --device cuda:N)\n"
    "                  [--max-model-bytes N[K|M|G]]   (the largest model file a whole-model\n"
    "                  batch may send; default 4G)\n"
    "                  [--tls-ca PEM [--tls-cert PEM --tls-key PEM]]\n"
    "                  [--board HOST:PORT ...] [--board-listen HOST:PORT] --board-key-file FILE\n"
    "                  (measure on boards running kiln-board instead of this machine: the\n"
    "                  agent dials each --board; boards behind NAT dial --board-listen with\n"
    "                  kiln-board --connect; docs/operator-guide.md)\n"
    "       kiln-agent --list-devices\n";

std::string DescribeHardware() {
  std::string hw = kiln::compiler::DescribeHostHardware();
  std::string cl = kiln::deploy::DescribeOpenClDevices(kiln::deploy::ListOpenClDevices());
  std::string cuda = kiln::deploy::DescribeCudaDevices(kiln::deploy::ListCudaDevices());
  if (!cl.empty()) hw = kiln::StrCat(hw, "; ", cl);
  return cuda.empty() ? hw : kiln::StrCat(hw, "; ", cuda);
}

// The CPU's FMA peak over the threads kernels run on (GFLOP/s; 0 without
// FMA): every thread runs the probe at once, each timed by its own CPU time
// (fma_peak::GflopsOnThisThread), the best of five runs of about 8 ms.
// Wall time was not enough: at start-up something else (OpenCL's worker
// threads, the script that launched the agent) can hold a core for tens of
// milliseconds, and the probe once reported one core's peak for two
// (`kiln job` then showed kernels at 380 % of peak).
double MeasurePeakGflops() {
  struct Run {
    std::vector<float> sinks;
    std::vector<double> gflops;
  };
  const int threads = kiln_num_threads();
  Run run{std::vector<float>(static_cast<size_t>(threads)),
          std::vector<double>(static_cast<size_t>(threads))};
  double best = 0;
  for (int attempt = 0; attempt < 5; ++attempt) {
    kiln_parallel_for(
        threads,
        [](int64_t i, void* ctx) {
          auto* r = static_cast<Run*>(ctx);
          r->gflops[static_cast<size_t>(i)] = kiln::fma_peak::GflopsOnThisThread(
              int64_t{1} << 22, &r->sinks[static_cast<size_t>(i)]);
        },
        &run);
    double sum = 0;
    for (double g : run.gflops) sum += g;
    best = std::max(best, sum);
  }
  return best;
}

int ListDevices() {
  std::printf("cpu: %s (target %s)\n", kiln::compiler::DescribeHostHardware().c_str(),
              kiln::compiler::Target::Host().Spec().c_str());
  int i = 0;
  for (const auto& d : kiln::deploy::ListOpenClDevices()) {
    std::printf("opencl:%d: %s / %s, %s, %d compute units, %lld MiB (target opencl -device=%s)\n",
                i++, d.platform.c_str(), d.name.c_str(), d.type.c_str(), d.compute_units,
                d.global_mem_bytes >> 20, kiln::DeviceId(d.name).c_str());
  }
  i = 0;
  for (const auto& d : kiln::deploy::ListCudaDevices()) {
    std::printf("cuda:%d: %s, %s, %d SMs at %d MHz, %lld MiB (target cuda -arch=%s -device=%s)\n",
                i++, d.name.c_str(), d.arch.c_str(), d.compute_units, d.clock_mhz,
                d.global_mem_bytes >> 20, d.arch.c_str(), kiln::DeviceId(d.name).c_str());
  }
  if (i == 0) {
    auto nvrtc = kiln::compiler::codegen::NvrtcVersion();
    std::printf("cuda: none (%s)\n", nvrtc.ok() ? "no NVIDIA GPU or driver"
                                                : std::string(nvrtc.status().message()).c_str());
  }
  return 0;
}

// N of "PREFIX:N" when it numbers one of `count` devices.
std::optional<size_t> DeviceIndex(const std::string& device, const char* prefix, size_t count) {
  int64_t n = -1;
  const size_t len = std::strlen(prefix);
  if (!kiln::ParseInt64(std::string_view(device).substr(len), &n) || n < 0 ||
      n >= static_cast<int64_t>(count)) {
    return std::nullopt;
  }
  return static_cast<size_t>(n);
}

int Usage(const std::string& message) {
  std::fprintf(stderr, "kiln-agent: %s\n%s", message.c_str(), kUsage);
  return 2;
}

// The batch's timing with the agent's default time limit where it has none.
kiln::v1::MeasureBatch WithTimeout(const kiln::v1::MeasureBatch& batch, int64_t timeout_ms) {
  kiln::v1::MeasureBatch copy = batch;
  if (timeout_ms > 0 && batch.timing().timeout_ms() <= 0) {
    copy.mutable_timing()->set_timeout_ms(static_cast<int32_t>(timeout_ms));
  }
  return copy;
}

// kiln-agent --board ... / --board-listen ...: one session with the tracker
// per board, each with its own measurement worker (building for that board
// and talking to it), so that the boards measure in parallel while this host
// builds. A board's session joins the farm only while the board answers.
class BoardAgents {
 public:
  BoardAgents(kiln::agent::AgentOptions common, std::string key, std::string key_file,
              int64_t worker_memory, int64_t timeout_ms)
      : common_(std::move(common)),
        key_(std::move(key)),
        key_file_(std::move(key_file)),
        worker_memory_(worker_memory),
        timeout_ms_(timeout_ms) {}
  ~BoardAgents() {
    for (auto& b : boards_) b->session->Stop();
    for (auto& b : boards_) {
      if (b->thread.joinable()) b->thread.join();
    }
  }

  // The board at `address` (its kiln-board, or the listener's loopback port
  // standing for a board that dialled in), its session named ID/`name`:
  // described (asked again while it does not answer, when `wait`), its key
  // registered with the target it names, its session started.
  absl::Status Add(const std::string& name, const std::string& address, bool wait) {
    auto b = std::make_unique<Board>();
    b->link = {address, key_};
    absl::StatusOr<kiln::board::Description> d;
    for (int wait_ms = 250;; wait_ms = std::min(wait_ms * 2, 5000)) {
      d = kiln::agent::DescribeBoard(b->link);
      if (d.ok() || !wait || !absl::IsUnavailable(d.status())) break;
      std::fprintf(stderr, "kiln-agent: %s; trying again in %d ms\n",
                   std::string(d.status().message()).c_str(), wait_ms);
      std::this_thread::sleep_for(std::chrono::milliseconds(wait_ms));
    }
    if (!d.ok()) return d.status();
    absl::StatusOr<kiln::compiler::Target> target = kiln::agent::TargetOfBoard(*d);
    if (!target.ok()) return target.status();
    std::lock_guard<std::mutex> lock(mu_);
    b->options = common_;
    b->options.agent_id = kiln::StrCat(common_.agent_id, "/", name);
    b->options.target_spec = target->Spec();
    b->options.hardware = kiln::agent::BoardHardware(name, *d);
    b->options.peak_gflops = d->fma_gflops;
    b->options.files_dir = kiln::StrCat(common_.files_dir, "-", boards_.size());
    // After the board was lost, the session rejoins the farm only once the
    // board answers again; otherwise (the tracker restarted, the network to
    // it dropped) at once: the worker may hold the board's one connection.
    auto lost = std::make_shared<std::atomic<bool>>(false);
    b->options.before_session = [link = b->link, lost] {
      if (!lost->load()) return absl::OkStatus();
      absl::StatusOr<kiln::board::Description> now = kiln::agent::DescribeBoard(link);
      if (!now.ok()) return now.status();
      lost->store(false);
      return absl::OkStatus();
    };
    auto note_lost = [lost](const kiln::v1::MeasureResult& r) {
      if (r.error_kind() == kiln::v1::MEASURE_ERROR_KIND_AGENT_LOST) lost->store(true);
    };
    b->sandbox = std::make_unique<kiln::agent::Sandbox>(
        "/proc/self/exe", worker_memory_, b->options.files_dir,
        std::vector<std::string>{"--board", address, "--board-key-file", key_file_});
    kiln::agent::Sandbox* sandbox = b->sandbox.get();
    const int64_t timeout_ms = timeout_ms_;
    b->session = std::make_unique<kiln::agent::AgentSession>(
        b->options,
        [sandbox, timeout_ms, note_lost](const kiln::v1::MeasureBatch& batch, int index) {
          kiln::v1::MeasureResult r = sandbox->Measure(WithTimeout(batch, timeout_ms), index);
          note_lost(r);
          return r;
        },
        [sandbox, timeout_ms, note_lost](const kiln::v1::MeasureBatch& batch) {
          std::vector<kiln::v1::MeasureResult> results =
              sandbox->MeasureModel(WithTimeout(batch, timeout_ms));
          for (const kiln::v1::MeasureResult& r : results) note_lost(r);
          return results;
        });
    std::fprintf(stderr, "kiln-agent %s: id %s, key %s, %s, target %s, tracker %s\n", KILN_VERSION,
                 b->options.agent_id.c_str(), b->options.device_key.c_str(),
                 b->options.hardware.c_str(), b->options.target_spec.c_str(),
                 b->options.tracker.c_str());
    Board* board = b.get();
    board->thread = std::thread([board] { board->ended = board->session->Run(); });
    boards_.push_back(std::move(b));
    return absl::OkStatus();
  }

  // Waits for every board's session to end (a tracker that refuses the
  // agent); 1 when one ended with an error.
  int Wait() {
    int rc = 0;
    for (size_t i = 0;; ++i) {
      Board* b = nullptr;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (i >= boards_.size()) break;
        b = boards_[i].get();
      }
      b->thread.join();
      if (b->ended.ok()) continue;
      std::fprintf(stderr, "kiln-agent: %s: %s\n", b->options.agent_id.c_str(),
                   std::string(b->ended.message()).c_str());
      rc = 1;
    }
    return rc;
  }

 private:
  struct Board {
    kiln::agent::BoardLink link;
    kiln::agent::AgentOptions options;
    std::unique_ptr<kiln::agent::Sandbox> sandbox;
    std::unique_ptr<kiln::agent::AgentSession> session;
    std::thread thread;
    absl::Status ended;
  };
  const kiln::agent::AgentOptions common_;
  const std::string key_, key_file_;
  const int64_t worker_memory_, timeout_ms_;
  std::mutex mu_;
  std::vector<std::unique_ptr<Board>> boards_;
};

int RunBoardAgents(const kiln::agent::AgentOptions& common, const std::vector<std::string>& boards,
                   const std::string& listen, const std::string& key_file, int64_t worker_memory,
                   int64_t timeout_ms) {
  absl::StatusOr<std::string> key = kiln::board::ReadBoardKey(key_file);
  if (!key.ok()) return Usage(std::string(key.status().message()));
  BoardAgents agents(common, *key, key_file, worker_memory, timeout_ms);
  // A board that refuses the key, or is not a kiln-board, ends the agent.
  for (const std::string& address : boards) {
    if (absl::Status s = agents.Add(address, address, /*wait=*/true); !s.ok()) {
      std::fprintf(stderr, "kiln-agent: board %s: %s\n", address.c_str(),
                   std::string(s.message()).c_str());
      return 1;
    }
  }
  if (listen.empty()) return agents.Wait();
  int port = 0;
  auto listener = kiln::agent::BoardListener::Listen(
      listen,
      [&agents](const std::string& name, const std::string& local) {
        absl::Status s = agents.Add(name, local, /*wait=*/false);
        if (!s.ok()) {
          std::fprintf(stderr, "kiln-agent: board '%s' is not taken: %s\n", name.c_str(),
                       std::string(s.message()).c_str());
        }
        return s.ok();
      },
      &port);
  if (!listener.ok()) {
    std::fprintf(stderr, "kiln-agent: %s\n", std::string(listener.status().message()).c_str());
    return 1;
  }
  std::fprintf(stderr, "kiln-agent %s: key %s, boards dial in on port %d (kiln-board --connect)\n",
               KILN_VERSION, common.device_key.c_str(), port);
  const absl::Status s = (*listener)->Run();
  std::fprintf(stderr, "kiln-agent: the board listener ended: %s\n",
               std::string(s.message()).c_str());
  // The listener's threads may still be admitting boards: end here, the
  // measurement workers with us (they die with their parent).
  std::fflush(stderr);
  std::_Exit(1);
}

}  // namespace

namespace kiln::agent {

int AgentMain(int argc, char** argv, const WorkerFaults* faults) {
  if (argc >= 2 && std::strcmp(argv[1], "--measure-worker") == 0) {
    // --measure-worker FILES_DIR [--board HOST:PORT --board-key-file FILE]
    if (argc == 7 && std::strcmp(argv[3], "--board") == 0 &&
        std::strcmp(argv[5], "--board-key-file") == 0) {
      absl::StatusOr<std::string> key = kiln::board::ReadBoardKey(argv[6]);
      if (!key.ok()) {
        std::fprintf(stderr, "kiln-agent worker: %s\n",
                     std::string(key.status().message()).c_str());
        return 1;
      }
      const kiln::agent::BoardLink link{argv[4], *std::move(key)};
      return kiln::agent::RunMeasureWorker(0, 3, argv[2], &link, faults);
    }
    return kiln::agent::RunMeasureWorker(0, 3, argc >= 3 ? argv[2] : "", nullptr, faults);
  }
  std::vector<std::string> args(argv + 1, argv + argc);
  for (const std::string& a : args) {
    if (a == "--list-devices") return ListDevices();
    if (a == "--help" || a == "-h") {
      std::printf("%s", kUsage);
      return 0;
    }
  }
  auto parsed =
      kiln::ParseFlags(args, {"--tracker", "--key", "--id", "--token", "--token-file", "--target",
                              "--device", "--workers-timeout-ms", "--max-batch", "--worker-memory",
                              "--max-model-bytes", "--tls-ca", "--tls-cert", "--tls-key", "--board",
                              "--board-listen", "--board-key-file"});
  if (!parsed.ok()) return Usage(std::string(parsed.status().message()));
  if (!parsed->positional.empty()) {
    return Usage(kiln::StrCat("unexpected argument '", parsed->positional[0], "'"));
  }
  std::map<std::string, std::string> flags;
  for (const auto& [name, values] : parsed->values) flags[name] = values.back();
  if (!flags.count("--tracker")) return Usage("missing --tracker");
  if (!flags.count("--key")) return Usage("missing --key");

  kiln::agent::AgentOptions options;
  options.tracker = flags["--tracker"];
  options.device_key = flags["--key"];
  options.agent_id = flags.count("--id") ? flags["--id"] : kiln::agent::DefaultAgentId();
  options.token = flags["--token"];
  // The agent's own token: from a file (never on the command line, where
  // every user of the board can read it), else KILN_TOKEN.
  if (flags.count("--token-file")) {
    std::ifstream in(flags["--token-file"]);
    if (!in || !std::getline(in, options.bearer_token) || options.bearer_token.empty()) {
      return Usage(kiln::StrCat("cannot read a token from ", flags["--token-file"]));
    }
    while (!options.bearer_token.empty() &&
           std::isspace(static_cast<unsigned char>(options.bearer_token.back()))) {
      options.bearer_token.pop_back();
    }
  } else if (const char* token = std::getenv("KILN_TOKEN")) {
    options.bearer_token = token;
  }
  // TLS: --tls-ca, and --tls-cert/--tls-key for a tracker that wants mutual TLS.
  for (auto [flag, out] :
       {std::pair{"--tls-ca", &options.tls_ca_pem}, std::pair{"--tls-cert", &options.tls_cert_pem},
        std::pair{"--tls-key", &options.tls_key_pem}}) {
    if (!flags.count(flag)) continue;
    auto pem = kiln::ReadPem(flags[flag]);
    if (!pem.has_value()) {
      return Usage(kiln::StrCat("cannot read a PEM file from ", flag, " ", flags[flag]));
    }
    *out = *std::move(pem);
  }
  if (options.tls_cert_pem.empty() != options.tls_key_pem.empty()) {
    return Usage("--tls-cert and --tls-key go together");
  }
  if (!options.tls_cert_pem.empty() && options.tls_ca_pem.empty()) {
    return Usage("--tls-cert needs --tls-ca (the tracker's CA)");
  }
  // The device this agent measures on: the CPU (its LLVM target), or one
  // OpenCL device (one agent process per device).
  const std::string device = flags.count("--device") ? flags["--device"] : "cpu";
  options.hardware = DescribeHardware();
  // The peak `kiln job` compares a task's GFLOP/s with (CPU boards only).
  const bool boards = flags.count("--board") > 0 || flags.count("--board-listen") > 0;
  if (boards && (flags.count("--device") || flags.count("--target"))) {
    return Usage(
        "--board measures on boards: it takes no --device or --target (each board's "
        "target comes from its description)");
  }
  if (boards != (flags.count("--board-key-file") > 0)) {
    return Usage("--board (or --board-listen) and --board-key-file go together");
  }
  if (device == "cpu" && !flags.count("--target") && !boards) {
    options.peak_gflops = MeasurePeakGflops();
  }
  if (device != "cpu" && flags.count("--target")) {
    return Usage("--target is for the CPU; --device names the device");
  }
  if (device.rfind("opencl:", 0) == 0) {
    const auto devices = kiln::deploy::ListOpenClDevices();
    const std::optional<size_t> index = DeviceIndex(device, "opencl:", devices.size());
    if (!index) {
      return Usage(kiln::StrCat("no OpenCL device '", device, "' (", devices.size(),
                                " found: kiln-agent --list-devices)"));
    }
    const auto& d = devices[*index];
    options.target_spec = kiln::StrCat("opencl -device=", kiln::DeviceId(d.name));
    options.hardware = kiln::StrCat(
        "OpenCL ", d.platform, "/", d.name, " (", d.type, ", ", d.version, ", ", d.compute_units,
        " CUs at ", d.clock_mhz, " MHz, ", d.global_mem_bytes >> 20, " MiB, work-groups of ",
        d.max_threads_per_block, ", ", d.local_mem_bytes >> 10, " KiB of local memory)");
  } else if (device.rfind("cuda:", 0) == 0) {
    const auto devices = kiln::deploy::ListCudaDevices();
    const std::optional<size_t> index = DeviceIndex(device, "cuda:", devices.size());
    if (!index) {
      return Usage(kiln::StrCat("no CUDA device '", device, "' (", devices.size(),
                                " found: kiln-agent --list-devices)"));
    }
    if (auto nvrtc = kiln::compiler::codegen::NvrtcVersion(); !nvrtc.ok()) {
      return Usage(kiln::StrCat("--device ", device, ": ", nvrtc.status().message()));
    }
    const auto& d = devices[*index];
    options.target_spec = kiln::StrCat("cuda -arch=", d.arch, " -device=", kiln::DeviceId(d.name));
    options.hardware =
        kiln::StrCat("CUDA ", d.name, " (", d.arch, ", ", d.compute_units, " SMs at ", d.clock_mhz,
                     " MHz, ", d.global_mem_bytes >> 20, " MiB, ", d.local_mem_bytes,
                     " bytes of shared memory per block)");
  } else if (device != "cpu") {
    return Usage(kiln::StrCat("unknown --device '", device, "' (cpu, opencl:N or cuda:N)"));
  } else if (flags.count("--target")) {
    absl::StatusOr<kiln::compiler::Target> t = kiln::compiler::Target::Parse(flags["--target"]);
    if (!t.ok()) return Usage(std::string(t.status().message()));
    // This machine times what it builds: code of another architecture
    // cannot run here (it would be timed as x86 under an ARM key).
    auto arch = [](const std::string& triple) { return triple.substr(0, triple.find('-')); };
    if (arch(t->triple) != arch(kiln::compiler::Target::Host().triple)) {
      return Usage(kiln::StrCat("--target ", flags["--target"], " is for ", arch(t->triple),
                                ", and this machine runs ",
                                arch(kiln::compiler::Target::Host().triple),
                                " code: put a board of another architecture in the farm with "
                                "kiln-board on it and --board here (docs/operator-guide.md)"));
    }
    options.target_spec = t->Spec();
  } else {
    options.target_spec = kiln::compiler::Target::Host().Spec();
  }
  options.compiler_version = KILN_VERSION;
  int64_t default_timeout_ms = 0;
  if (flags.count("--workers-timeout-ms") &&
      (!kiln::ParseInt64(flags["--workers-timeout-ms"], &default_timeout_ms) ||
       default_timeout_ms <= 0 || default_timeout_ms > (1 << 30))) {
    return Usage("--workers-timeout-ms must be a positive integer");
  }
  int64_t max_batch = 0;
  if (flags.count("--max-batch") && (!kiln::ParseInt64(flags["--max-batch"], &max_batch) ||
                                     max_batch < 0 || max_batch > 100000)) {
    return Usage("--max-batch must be a non-negative integer");
  }
  options.max_batch = static_cast<int>(max_batch);

  // The worker's address space: bounded, so that an oversized tensor fails
  // its allocation (an error record) instead of exhausting the board. CUDA
  // reserves address space for the whole device and host memory, so a CUDA
  // agent has no limit unless one is given.
  int64_t worker_memory = device.starts_with("cuda:") ? 0 : kiln::agent::DefaultWorkerMemoryBytes();
  if (flags.count("--worker-memory")) {
    const std::string& given = flags["--worker-memory"];
    if (given == "0") {
      worker_memory = 0;
    } else if (!kiln::ParseBytes(given, &worker_memory)) {
      return Usage("--worker-memory must be a size (e.g. 8G, 512M) or 0 for none");
    }
  }
  if (flags.count("--max-model-bytes") &&
      (!kiln::ParseBytes(flags["--max-model-bytes"], &options.max_model_bytes) ||
       options.max_model_bytes <= 0)) {
    return Usage("--max-model-bytes must be a size (e.g. 2G)");
  }
  options.files_dir = kiln::StrCat(std::filesystem::temp_directory_path().string(), "/kiln-agent-",
                                   ::getpid(), "-files");
  if (boards) {
    return RunBoardAgents(options, parsed->values["--board"], flags["--board-listen"],
                          flags["--board-key-file"], worker_memory, default_timeout_ms);
  }
  kiln::agent::Sandbox sandbox("/proc/self/exe", worker_memory, options.files_dir);
  auto with_timeout = [&](const kiln::v1::MeasureBatch& batch) {
    return WithTimeout(batch, default_timeout_ms);
  };
  kiln::agent::AgentSession session(
      options,
      [&](const kiln::v1::MeasureBatch& batch, int index) {
        return sandbox.Measure(with_timeout(batch), index);
      },
      [&](const kiln::v1::MeasureBatch& batch) {
        return sandbox.MeasureModel(with_timeout(batch));
      });
  std::fprintf(stderr, "kiln-agent %s: id %s, key %s, target %s, tracker %s, worker memory %s\n",
               KILN_VERSION, options.agent_id.c_str(), options.device_key.c_str(),
               options.target_spec.c_str(), options.tracker.c_str(),
               worker_memory > 0 ? kiln::StrCat(worker_memory >> 20, " MiB").c_str() : "unlimited");
  absl::Status s = session.Run();
  if (!s.ok()) {
    std::fprintf(stderr, "kiln-agent: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  return 0;
}

}  // namespace kiln::agent
