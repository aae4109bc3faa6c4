#pragma once
// The C++ runtime API: load an artifact and run it. No LLVM, gRPC, protobuf
// or SQLite here; see deploy/kiln_runtime.h for the C API.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "base/dtype.h"
#include "deploy/tensor_io.h"

namespace kiln::deploy {

struct TensorInfo {
  std::string name;
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;  // empty: a scalar
  int64_t NumElements() const;
  // The size of its dense buffer: NumElements() * DTypeBytes(dtype).
  int64_t ByteSize() const;
};

// A caller's buffer for RunChecked: its element type and element count.
struct InputBuffer {
  const void* data;
  DType dtype;
  int64_t elements;
};
struct OutputBuffer {
  void* data;
  DType dtype;
  int64_t elements;
};

struct Manifest {
  int format_version = 0;
  std::string target;
  std::string compiler_version;
  std::string model_sha256;
  std::string entry;
  int64_t workspace_bytes = 0;
  int64_t weights_bytes = 0;
  int kernels = 0;
  int tuned_kernels = 0;
  std::vector<TensorInfo> inputs;
  std::vector<TensorInfo> outputs;
  // `section NAME sha256 HEX`: every section but the manifest.
  std::map<std::string, std::string> section_sha256;
};

struct LoadOptions {
  // Where a GPU artifact runs: "opencl:N" (`kiln-agent --list-devices`
  // numbers the devices), or "" for the device its target names, else the
  // first. A CPU artifact runs on the CPU ("" or "cpu").
  std::string device;
  // A PEM Ed25519 public key ("-----BEGIN PUBLIC KEY-----"): when set, only
  // an artifact signed by this key loads (UNAUTHENTICATED otherwise). Digests
  // are checked either way.
  std::string trust_key;
};

// The tensors for a model's `inputs` (the manifest's, in its order) from
// kiln-run's --input arguments: NAME=FILE, or FILE alone for a model of one
// input; each file .npy or an ONNX TensorProto (ReadTensorFile), float64
// taken as float32 where float32 is expected. INVALID_ARGUMENT naming the
// argument or input otherwise: an unknown name, an input given twice or
// missing, a file that does not read, a dtype or shape the manifest does not
// state.
absl::StatusOr<std::vector<Tensor>> ReadInputFiles(const std::vector<TensorInfo>& inputs,
                                                   const std::vector<std::string>& specs);

class DeviceProgram;

class Module {
 public:
  // Reads and checks the container: the manifest's digest, the signature
  // (against options.trust_key when given), every section's digest, and,
  // after loading the shared object, that its entry point's I/O contract
  // matches the manifest; all before anything of the file is mapped or run.
  // Then resolves the entry point (CPU), or builds the device program on its
  // device (GPU; deploy/device.h). INVALID_ARGUMENT / DATA_LOSS with a
  // message on a bad file (DATA_LOSS: altered or damaged), UNAUTHENTICATED
  // when a trust key is given and the signature is missing or not its;
  // UNAVAILABLE / NOT_FOUND when the device is not there.
  static absl::StatusOr<std::unique_ptr<Module>> LoadFile(const std::string& path,
                                                          const LoadOptions& options = {});
  static absl::StatusOr<std::unique_ptr<Module>> LoadBytes(std::string_view bytes,
                                                           const LoadOptions& options = {});
  ~Module();

  const Manifest& manifest() const { return manifest_; }
  // The fingerprint of the key that signed the artifact (KeyFingerprint in
  // base/sha256.h), or "" when it is unsigned.
  const std::string& signer() const { return signer_; }

  // Runs the model once. inputs/outputs follow the manifest's order; each is
  // a dense row-major buffer of its manifest dtype and shape (the caller has
  // checked them; see RunChecked), or null where the tensor has no elements.
  absl::Status Run(const std::vector<const void*>& inputs, const std::vector<void*>& outputs);
  // Checks the dtype and element count of every buffer against the manifest
  // first: INVALID_ARGUMENT naming the tensor, its expected and given dtype
  // and size ("input 'x': expected int64 2x3, given float32 2x3").
  absl::Status RunChecked(const std::vector<InputBuffer>& inputs,
                          const std::vector<OutputBuffer>& outputs);

 private:
  Module() = default;
  Manifest manifest_;
  std::string signer_;
  std::unique_ptr<DeviceProgram> device_;  // GPU artifacts
  void* dl_handle_ = nullptr;
  std::string so_path_;
  using EntryFn = int32_t (*)(void* const*, void* const*, const uint8_t*, uint8_t*);
  EntryFn entry_ = nullptr;
  struct AlignedFree {
    void operator()(uint8_t* p) const;
  };
  std::unique_ptr<uint8_t, AlignedFree> weights_;
  std::unique_ptr<uint8_t, AlignedFree> workspace_;
};

}  // namespace kiln::deploy
