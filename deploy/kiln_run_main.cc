// kiln-run: load an artifact, run it on input tensor files, write the outputs
// as TensorProto files, optionally time it. Exit codes: 0 ok, 2 bad usage or
// bad input (arguments, tensor files, artifact file), 1 runtime failure.
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/flags.h"
#include "base/pem.h"
#include "base/str.h"
#include "deploy/artifact.h"
#include "deploy/parallel.h"
#include "deploy/profile.h"
#include "deploy/runtime.h"
#include "deploy/tensor_io.h"

namespace {

using kiln::StrCat;
using kiln::deploy::Tensor;

constexpr int kExitRuntime = 1;
constexpr int kExitBadInput = 2;

constexpr char kUsage[] =
    "usage: kiln-run ARTIFACT --input NAME=FILE [--input NAME=FILE ...] --output-dir DIR\n"
    "                [--repeat N] [--warmup K] [--profile] [--device DEV]\n"
    "                [--trust-key FILE]\n"
    "\n"
    "Loads a kiln artifact, runs it once on the given inputs and writes\n"
    "DIR/output_0.pb, DIR/output_1.pb, ... (ONNX TensorProto of each output's dtype).\n"
    "\n"
    "  --input NAME=FILE  input tensor by its manifest name, as a NumPy .npy\n"
    "                     or ONNX TensorProto .pb file of the input's dtype\n"
    "                     (float64 data is converted for a float32 input);\n"
    "                     a single-input model also takes --input FILE\n"
    "  --output-dir DIR   where outputs are written (created if missing)\n"
    "  --repeat N         time N runs after the warm-up; the last line printed\n"
    "                     is median_ms=<value>\n"
    "  --warmup K         untimed runs before timing (default 1)\n"
    "  --profile          after the timed runs, run N more with each kernel\n"
    "                     timed inside them and print where the time goes\n"
    "                     (with --repeat N; needs an artifact from kiln 0.6+)\n"
    "  --device DEV       where a GPU artifact runs: opencl:N (the devices as\n"
    "                     kiln-agent --list-devices numbers them; default: the\n"
    "                     device its target names, else the first); cpu for a\n"
    "                     CPU artifact (the default)\n"
    "  --trust-key FILE   load only an artifact signed by this key (a PEM Ed25519\n"
    "                     public key: kiln-tracker keys prints the tracker's);\n"
    "                     without it an artifact's digests are checked, and a\n"
    "                     signature it carries, but none is required\n"
    "  --help             this text\n"
    "\n"
    "Threads: KILN_NUM_THREADS (default: the CPUs of the process's affinity mask);\n"
    "idle threads spin KILN_SPIN_US microseconds (default 1000) before they sleep.\n";

int Fail(int code, const std::string& msg) {
  std::fprintf(stderr, "kiln-run: %s\n", msg.c_str());
  return code;
}

bool MakeDirs(const std::string& dir, std::string* error) {
  std::string partial;
  for (std::string_view piece : kiln::StrSplit(dir, '/')) {
    partial += piece;
    partial += '/';
    if (piece.empty() || piece == ".") continue;
    if (::mkdir(partial.c_str(), 0777) != 0 && errno != EEXIST) {
      *error = StrCat("cannot create '", partial, "': ", std::strerror(errno));
      return false;
    }
  }
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    *error = StrCat("'", dir, "' is not a directory");
    return false;
  }
  return true;
}

// Per-kernel time inside the profiled runs, slowest first, and their sum
// beside the median of the timed runs (the difference: the entry point's own
// work and the profiling hooks).
void PrintProfile(std::vector<kiln::deploy::KernelTime> calls, int64_t runs, double median_ms) {
  if (calls.empty()) {
    std::printf("profile: no kernel calls recorded (an artifact from before kiln 0.6?)\n");
    return;
  }
  double sum = 0;
  for (const auto& k : calls) sum += k.total_ms / static_cast<double>(runs);
  std::sort(calls.begin(), calls.end(),
            [](const auto& a, const auto& b) { return a.total_ms > b.total_ms; });
  std::printf("profile over %lld runs: kernels %.4f ms per run (median run %.4f ms)\n",
              static_cast<long long>(runs), sum, median_ms);
  std::printf("| call | kernel | ms per run | share |\n|---:|---|---:|---:|\n");
  for (const auto& k : calls) {
    const double ms = k.total_ms / static_cast<double>(runs);
    std::printf("| %d | %s | %.4f | %.1f%% |\n", k.call, k.label.c_str(), ms, 100.0 * ms / sum);
  }
}

struct Args {
  std::string artifact;
  std::vector<std::string> inputs;
  std::string output_dir;
  int64_t repeat = 0;
  int64_t warmup = 1;
  bool profile = false;
  std::string device;
  std::string trust_key;  // file
};

// Returns -1 to continue, else an exit code.
int ParseArgs(int argc, char** argv, Args* args) {
  std::vector<std::string> argv_list(argv + 1, argv + argc);
  for (const std::string& a : argv_list) {
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
  }
  absl::StatusOr<kiln::ParsedFlags> flags = kiln::ParseFlags(
      argv_list, {"--input", "--output-dir", "--repeat", "--warmup", "--device", "--trust-key"},
      {"--profile"});
  if (!flags.ok()) return Fail(kExitBadInput, StrCat(flags.status().message(), "\n", kUsage));
  args->inputs = flags->All("--input");
  args->output_dir = flags->Get("--output-dir");
  args->device = flags->Get("--device");
  args->trust_key = flags->Get("--trust-key");
  if (flags->Has("--trust-key") && args->trust_key.empty()) {
    return Fail(kExitBadInput, "--trust-key takes a file");
  }
  for (const char* flag : {"--repeat", "--warmup"}) {
    if (!flags->Has(flag)) continue;
    int64_t n = 0;
    bool is_repeat = std::string_view(flag) == "--repeat";
    std::string value = flags->Get(flag);
    if (!kiln::ParseInt64(value, &n) || n < (is_repeat ? 1 : 0)) {
      return Fail(kExitBadInput, StrCat(flag, " takes an integer ", is_repeat ? ">= 1" : ">= 0",
                                        ", got '", value, "'"));
    }
    (is_repeat ? args->repeat : args->warmup) = n;
  }
  if (flags->positional.size() > 1) {
    return Fail(kExitBadInput,
                StrCat("unexpected argument '", flags->positional[1], "' (one ARTIFACT only)"));
  }
  if (flags->positional.empty()) return Fail(kExitBadInput, StrCat("no ARTIFACT given\n", kUsage));
  args->artifact = flags->positional[0];
  if (args->output_dir.empty()) return Fail(kExitBadInput, "--output-dir is required");
  args->profile = flags->bools.count("--profile") > 0;
  if (args->profile && args->repeat == 0) {
    return Fail(kExitBadInput, "--profile needs --repeat N (the runs to profile)");
  }
  return -1;
}

int Main(int argc, char** argv) {
  Args args;
  if (int rc = ParseArgs(argc, argv, &args); rc >= 0) return rc;

  kiln::deploy::LoadOptions load;
  load.device = args.device;
  if (!args.trust_key.empty()) {
    std::optional<std::string> pem = kiln::ReadPem(args.trust_key);
    if (!pem) {
      return Fail(kExitBadInput, StrCat("--trust-key '", args.trust_key,
                                        "': cannot read a PEM public key from it"));
    }
    load.trust_key = *std::move(pem);
  }
  auto loaded = kiln::deploy::Module::LoadFile(args.artifact, load);
  if (!loaded.ok()) {
    absl::StatusCode code = loaded.status().code();
    bool bad_file = code == absl::StatusCode::kInvalidArgument ||
                    code == absl::StatusCode::kDataLoss || code == absl::StatusCode::kNotFound ||
                    code == absl::StatusCode::kUnauthenticated;
    return Fail(bad_file ? kExitBadInput : kExitRuntime, loaded.status().ToString());
  }
  kiln::deploy::Module& module = **loaded;
  const kiln::deploy::Manifest& manifest = module.manifest();
  if (args.profile && manifest.entry == "launch") {
    return Fail(kExitBadInput, StrCat("--profile times the kernels of CPU artifacts; this one is "
                                      "for '",
                                      manifest.target, "'"));
  }

  absl::StatusOr<std::vector<Tensor>> read =
      kiln::deploy::ReadInputFiles(manifest.inputs, args.inputs);
  if (!read.ok()) return Fail(kExitBadInput, std::string(read.status().message()));
  std::vector<Tensor> inputs = *std::move(read);

  std::vector<Tensor> outputs(manifest.outputs.size());
  std::vector<kiln::deploy::InputBuffer> in_bufs;
  std::vector<kiln::deploy::OutputBuffer> out_bufs;
  for (const Tensor& t : inputs) in_bufs.push_back({t.bytes.data(), t.dtype, t.NumElements()});
  for (size_t i = 0; i < outputs.size(); ++i) {
    const kiln::deploy::TensorInfo& info = manifest.outputs[i];
    outputs[i].name = info.name;
    outputs[i].shape = info.shape;
    outputs[i].dtype = info.dtype;
    try {
      outputs[i].bytes.assign(static_cast<size_t>(info.ByteSize()), 0);
    } catch (const std::exception&) {  // bad_alloc, length_error
      return Fail(kExitRuntime, StrCat("cannot allocate ", info.ByteSize(), " bytes for output '",
                                       info.name, "'"));
    }
    out_bufs.push_back({outputs[i].bytes.data(), info.dtype, info.NumElements()});
  }

  if (absl::Status s = module.RunChecked(in_bufs, out_bufs); !s.ok()) {
    return Fail(kExitRuntime, StrCat("run failed: ", s.ToString()));
  }
  std::string error;
  if (!MakeDirs(args.output_dir, &error)) return Fail(kExitRuntime, error);
  for (size_t i = 0; i < outputs.size(); ++i) {
    std::string path = StrCat(args.output_dir, "/output_", i, ".pb");
    if (absl::Status s = kiln::deploy::WriteTensorProtoFile(path, outputs[i]); !s.ok()) {
      return Fail(kExitRuntime, s.ToString());
    }
    std::printf("%s: %s %s %s\n", path.c_str(), outputs[i].name.c_str(),
                kiln::DTypeName(outputs[i].dtype),
                kiln::deploy::ShapeToString(outputs[i].shape).c_str());
  }

  if (args.repeat > 0) {
    for (int64_t w = 0; w < args.warmup; ++w) {
      if (absl::Status s = module.RunChecked(in_bufs, out_bufs); !s.ok()) {
        return Fail(kExitRuntime, StrCat("run failed: ", s.ToString()));
      }
    }
    std::vector<double> ms;
    for (int64_t r = 0; r < args.repeat; ++r) {
      auto start = std::chrono::steady_clock::now();
      absl::Status s = module.RunChecked(in_bufs, out_bufs);
      auto end = std::chrono::steady_clock::now();
      if (!s.ok()) return Fail(kExitRuntime, StrCat("run failed: ", s.ToString()));
      ms.push_back(std::chrono::duration<double, std::milli>(end - start).count());
      std::printf("run %lld: %.6f ms\n", static_cast<long long>(r), ms.back());
    }
    std::vector<double> sorted = ms;
    std::sort(sorted.begin(), sorted.end());
    size_t n = sorted.size();
    double median = n % 2 == 1 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
    double mean = 0;
    for (double v : ms) mean += v;
    mean /= static_cast<double>(n);
    std::printf("runs=%zu threads=%d min_ms=%.6f mean_ms=%.6f max_ms=%.6f\n", n, kiln_num_threads(),
                sorted.front(), mean, sorted.back());
    if (args.profile) {
      kiln::deploy::StartKernelProfile();
      for (int64_t r = 0; r < args.repeat; ++r) {
        if (absl::Status s = module.RunChecked(in_bufs, out_bufs); !s.ok()) {
          return Fail(kExitRuntime, StrCat("run failed: ", s.ToString()));
        }
      }
      PrintProfile(kiln::deploy::StopKernelProfile(), args.repeat, median);
    }
    std::printf("median_ms=%.6f\n", median);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return Main(argc, argv); }
