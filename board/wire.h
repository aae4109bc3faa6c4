#pragma once
// kiln-board's wire protocol (docs/protocol.md, "The board protocol"): a
// host (the agent) and a board runner exchange frames over one TCP stream.
// A frame is a 12-byte header, magic "KBRD", the protocol version (u16),
// the message type (u16) and the payload's length (u32), all little-endian,
// then the payload. Every read is bounded: a header that is not kiln's, of
// another version or an unknown type, or a payload longer than the reader
// allows, is refused before anything is allocated for it.
//
// Payloads are sequences of fields: u8, u32, u64 and f64 little-endian,
// and byte strings (a u32 length, then the bytes). Each message's fields,
// in order, are its Encode function below; a decoder refuses a payload that
// ends early, has bytes left over, or a string longer than its limit.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "base/timing.h"
#include "board/variants.h"

namespace kiln::board {

inline constexpr uint32_t kMagic = 0x4452424b;  // "KBRD" in little-endian order
inline constexpr uint16_t kProtocolVersion = 1;
inline constexpr size_t kHeaderBytes = 12;
inline constexpr size_t kNonceBytes = 32;
inline constexpr size_t kMacBytes = 32;
// Every message but a measurement request is at most this long.
inline constexpr uint32_t kMaxControlPayload = 64 << 10;
// A whole-model answer (every variant's costs and kernel times) is at most this.
inline constexpr uint32_t kMaxModelAnswerPayload = 4 << 20;
// A measurement request's default bound (kiln-board --max-message-bytes).
inline constexpr uint32_t kDefaultMaxMeasurePayload = 256u << 20;

enum class MessageType : uint16_t {
  kHello = 1,           // board -> host: its version and a challenge
  kAuth = 2,            // host -> board: its challenge and its proof of the key
  kAuthOk = 3,          // board -> host: its proof of the key
  kDescribe = 4,        // host -> board: what are you?
  kDescription = 5,     // board -> host
  kMeasure = 6,         // host -> board: a built kernel to verify and time
  kMeasured = 7,        // board -> host
  kError = 8,           // either way: why the stream ends
  kMeasureModel = 9,    // host -> board: a model's variants to verify and time end to end
  kMeasuredModel = 10,  // board -> host
};
const char* MessageTypeName(MessageType type);

struct Header {
  MessageType type = MessageType::kError;
  uint32_t length = 0;
};
// INVALID_ARGUMENT (saying what) for a header that is not kiln-board's, of
// another protocol version or an unknown type; RESOURCE_EXHAUSTED for a
// length above `max_payload` (for kMeasure and kMeasureModel;
// kMaxModelAnswerPayload for kMeasuredModel, kMaxControlPayload for every
// other type).
absl::StatusOr<Header> ParseHeader(std::string_view bytes, uint32_t max_payload);
std::string EncodeFrame(MessageType type, std::string_view payload);

// One frame from `fd`, within `timeout_ms` for the whole frame
// (DEADLINE_EXCEEDED past it), UNAVAILABLE when the peer closed the stream.
struct Frame {
  MessageType type = MessageType::kError;
  std::string payload;
};
absl::StatusOr<Frame> ReadFrame(int fd, uint32_t max_measure_payload, int timeout_ms);
absl::Status WriteFrame(int fd, MessageType type, std::string_view payload);

// Field writer and bounds-checked reader.
class Writer {
 public:
  Writer& U8(uint8_t v);
  Writer& U32(uint32_t v);
  Writer& U64(uint64_t v);
  Writer& F64(double v);
  Writer& Bytes(std::string_view v);
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  bool U8(uint8_t* v);
  bool U32(uint32_t* v);
  bool U64(uint64_t* v);
  bool F64(double* v);
  // A string of at most `max` bytes; a view into the payload.
  bool Bytes(std::string_view* v, size_t max);
  bool Done() const { return in_.empty(); }

 private:
  bool Take(size_t n, std::string_view* out);
  std::string_view in_;
};

struct Hello {
  std::string nonce;  // kNonceBytes
  std::string runner_version;
  // The board's name (kiln-board --name, else its host name; printable, at
  // most 256 bytes): what an agent that boards dial in to (kiln-agent
  // --board-listen) tells their connections apart by. Not a credential: the
  // key's proofs are.
  std::string name;
};
struct Auth {
  std::string nonce;  // the host's challenge, kNonceBytes
  std::string mac;    // HostProof
};
struct AuthOk {
  std::string mac;  // BoardProof
};
// The host proves it holds the key: HMAC-SHA-256(key, "kiln-board host" ||
// board nonce || host nonce); the board answers with HMAC-SHA-256(key,
// "kiln-board board" || host nonce || board nonce). Neither sends the key.
std::string HostProof(std::string_view key, std::string_view board_nonce,
                      std::string_view host_nonce);
std::string BoardProof(std::string_view key, std::string_view board_nonce,
                       std::string_view host_nonce);

struct Description {
  std::string triple;    // the runner's own build: "aarch64-linux-gnu", "x86_64-linux-gnu"
  std::string cpu;       // /proc/cpuinfo's model name, or its CPU part
  std::string features;  // /proc/cpuinfo's flags (x86) or Features (AArch64), space-separated
  // The first processor's block of /proc/cpuinfo (at most 16 KiB), from
  // which the host names the CPU as LLVM does (its implementer and part on
  // AArch64).
  std::string cpuinfo;
  uint32_t cores = 0;                   // CPUs the runner may use
  uint64_t l2_bytes = 0, l3_bytes = 0;  // 0: unknown
  double fma_gflops = 0;                // measured at start-up over every core
  std::string runner_version;
  // The largest measurement request the board reads (--max-message-bytes):
  // a host does not send a longer one.
  uint64_t max_request_bytes = kDefaultMaxMeasurePayload;
};

// How a kernel's output is compared with the reference sent with it.
enum class Compare : uint8_t {
  kExact = 0,    // byte for byte
  kFloat32 = 1,  // float32 elements within `tolerance` (absolute)
  // int8 / uint8 elements, equal but for at most `off_by_one` of them that
  // may differ by one (a quantizing epilogue's rounding ties).
  kInt8 = 2,
  kUint8 = 3,
};

struct MeasureRequest {
  std::string symbol;               // the kernel's entry, int32_t fn(void* const* args)
  std::string object;               // the shared object, built for the board's triple
  std::vector<std::string> inputs;  // each argument but the last, as the kernel takes it
  uint64_t output_bytes = 0;
  std::string reference;  // the expected output (output_bytes)
  Compare compare = Compare::kExact;
  double tolerance = 0;
  uint32_t off_by_one = 0;
  // The farm's timing policy (base/timing.h).
  uint32_t number = 0, repeat = kDefaultRepeat, min_repeat_ms = kDefaultMinRepeatMs,
           cooldown_ms = 0;
  double stop_above_s = 0;
  // Before each run, the caches as the model leaves them (kFlush* below):
  // 0 hot (as the last run left them).
  uint8_t flush_cache = 0;
  uint32_t timeout_ms = kDefaultCandidateTimeoutMs;
  // The threads the kernel runs on (KILN_NUM_THREADS in the measuring
  // process); 0: every core the runner may use.
  uint32_t threads = 0;
};
// flush_cache: the weights and the output evicted, and the first input
// either rewritten in place as its producer leaves it (kFlushKeepFirst) or
// evicted too (kFlushAll: the first is packed weights); with
// kFlushToLastLevel added, the weights are then read back and pushed out of
// the core's own cache by a sweep of twice its size (compiler::CacheState's
// kLastLevel: a model that fits the board's last-level cache).
inline constexpr uint8_t kFlushKeepFirst = 1;
inline constexpr uint8_t kFlushAll = 2;
inline constexpr uint8_t kFlushToLastLevel = 4;
inline constexpr uint32_t kMaxInputs = 64;
inline constexpr uint32_t kMaxThreads = 1024;

enum class MeasureErrorKind : uint8_t {
  kNone = 0,
  kLoad = 1,  // the shared object does not load or lacks the symbol
  kRuntime = 2,
  kWrongResult = 3,
  kTimeout = 4,
};
struct Measured {
  MeasureErrorKind error = MeasureErrorKind::kNone;
  std::string message;
  std::vector<double> costs_s;
  uint8_t cut_short = 0;
};
inline constexpr uint32_t kMaxCosts = 4096;

// A job's whole-model check on the board (board/variants.h): the model's
// variants as kiln artifacts built for the board, verified against the
// first, timed interleaved, profiled.
struct MeasureModelRequest {
  std::vector<std::string> artifacts;  // at most kMaxVariants
  uint32_t number = 0, repeat = kDefaultRepeat, min_repeat_ms = kDefaultMinRepeatMs;
  uint32_t threads = 0;                              // as MeasureRequest's
  uint32_t timeout_ms = kDefaultCandidateTimeoutMs;  // for them all
};
inline constexpr uint32_t kMaxVariants = 64;
inline constexpr uint32_t kMaxKernelTimes = 100000;
struct MeasuredModel {
  // kNone: every variant's own outcome is in `variants` (one per artifact);
  // kTimeout or kRuntime (the measuring process crashed): none is.
  MeasureErrorKind error = MeasureErrorKind::kNone;
  std::string message;
  std::vector<VariantTimes> variants;
};

std::string Encode(const Hello& m);
std::string Encode(const Auth& m);
std::string Encode(const AuthOk& m);
std::string Encode(const Description& m);
std::string Encode(const MeasureRequest& m);
std::string Encode(const Measured& m);
std::string Encode(const MeasureModelRequest& m);
std::string Encode(const MeasuredModel& m);
// Each INVALID_ARGUMENT naming the message for a payload that is not one.
absl::StatusOr<Hello> DecodeHello(std::string_view payload);
absl::StatusOr<Auth> DecodeAuth(std::string_view payload);
absl::StatusOr<AuthOk> DecodeAuthOk(std::string_view payload);
absl::StatusOr<Description> DecodeDescription(std::string_view payload);
absl::StatusOr<MeasureRequest> DecodeMeasureRequest(std::string_view payload);
absl::StatusOr<Measured> DecodeMeasured(std::string_view payload);
absl::StatusOr<MeasureModelRequest> DecodeMeasureModelRequest(std::string_view payload);
absl::StatusOr<MeasuredModel> DecodeMeasuredModel(std::string_view payload);

}  // namespace kiln::board
