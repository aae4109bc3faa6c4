#include "board/wire.h"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

#include "base/sha256.h"
#include "base/str.h"

namespace kiln::board {
namespace {

void PutLe(std::string* out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint64_t GetLe(std::string_view in, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= uint64_t{static_cast<uint8_t>(in[i])} << (8 * i);
  return v;
}

bool KnownType(uint16_t t) {
  return t >= static_cast<uint16_t>(MessageType::kHello) &&
         t <= static_cast<uint16_t>(MessageType::kMeasuredModel);
}

// Reads exactly `n` bytes before `deadline`.
absl::Status ReadExactly(int fd, char* out, size_t n,
                         std::chrono::steady_clock::time_point deadline) {
  size_t got = 0;
  while (got < n) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    if (left <= 0) return absl::DeadlineExceededError("the peer is too slow to send a message");
    pollfd p{fd, POLLIN, 0};
    const int ready = poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 1 << 30)));
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) return absl::UnavailableError(StrCat("poll: ", std::strerror(errno)));
    if (ready == 0) continue;
    const ssize_t r = recv(fd, out + got, n - got, 0);
    if (r == 0) return absl::UnavailableError("the peer closed the connection");
    if (r < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return absl::UnavailableError(StrCat("recv: ", std::strerror(errno)));
    }
    got += static_cast<size_t>(r);
  }
  return absl::OkStatus();
}

// An answer's outcome: its error kind (at most kTimeout) and message.
bool ReadOutcome(Reader& r, MeasureErrorKind* error, std::string* message) {
  uint8_t e = 0;
  std::string_view m;
  if (!r.U8(&e) || e > static_cast<uint8_t>(MeasureErrorKind::kTimeout) || !r.Bytes(&m, 16 << 10)) {
    return false;
  }
  *error = static_cast<MeasureErrorKind>(e);
  *message = m;
  return true;
}

// A count (at most kMaxCosts), then that many costs.
void WriteCosts(Writer& w, const std::vector<double>& costs) {
  w.U32(static_cast<uint32_t>(costs.size()));
  for (double c : costs) w.F64(c);
}
bool ReadCosts(Reader& r, std::vector<double>* costs) {
  uint32_t n = 0;
  if (!r.U32(&n) || n > kMaxCosts) return false;
  for (uint32_t i = 0; i < n; ++i) {
    double c = 0;
    if (!r.F64(&c)) return false;
    costs->push_back(c);
  }
  return true;
}

absl::Status Malformed(const char* what) {
  return absl::InvalidArgumentError(StrCat("malformed ", what, " message"));
}

}  // namespace

const char* MessageTypeName(MessageType type) {
  switch (type) {
    case MessageType::kHello:
      return "hello";
    case MessageType::kAuth:
      return "auth";
    case MessageType::kAuthOk:
      return "auth-ok";
    case MessageType::kDescribe:
      return "describe";
    case MessageType::kDescription:
      return "description";
    case MessageType::kMeasure:
      return "measure";
    case MessageType::kMeasured:
      return "measured";
    case MessageType::kError:
      return "error";
    case MessageType::kMeasureModel:
      return "measure-model";
    case MessageType::kMeasuredModel:
      return "measured-model";
  }
  return "unknown";
}

absl::StatusOr<Header> ParseHeader(std::string_view bytes, uint32_t max_payload) {
  if (bytes.size() < kHeaderBytes) return absl::InvalidArgumentError("a frame header is 12 bytes");
  if (GetLe(bytes, 4) != kMagic) {
    return absl::InvalidArgumentError("not a kiln-board frame (no KBRD magic)");
  }
  const auto version = static_cast<uint16_t>(GetLe(bytes.substr(4), 2));
  if (version != kProtocolVersion) {
    return absl::InvalidArgumentError(
        StrCat("board protocol version ", version, ", this side speaks ", kProtocolVersion));
  }
  const auto type = static_cast<uint16_t>(GetLe(bytes.substr(6), 2));
  if (!KnownType(type)) return absl::InvalidArgumentError(StrCat("unknown message type ", type));
  Header h;
  h.type = static_cast<MessageType>(type);
  h.length = static_cast<uint32_t>(GetLe(bytes.substr(8), 4));
  const uint32_t limit = h.type == MessageType::kMeasure || h.type == MessageType::kMeasureModel
                             ? max_payload
                         : h.type == MessageType::kMeasuredModel ? kMaxModelAnswerPayload
                                                                 : kMaxControlPayload;
  if (h.length > limit) {
    return absl::ResourceExhaustedError(StrCat("a ", MessageTypeName(h.type), " message of ",
                                               h.length, " bytes (at most ", limit, ")"));
  }
  return h;
}

std::string EncodeFrame(MessageType type, std::string_view payload) {
  std::string out;
  out.reserve(kHeaderBytes + payload.size());
  PutLe(&out, kMagic, 4);
  PutLe(&out, kProtocolVersion, 2);
  PutLe(&out, static_cast<uint16_t>(type), 2);
  PutLe(&out, payload.size(), 4);
  out.append(payload);
  return out;
}

absl::StatusOr<Frame> ReadFrame(int fd, uint32_t max_measure_payload, int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  char header[kHeaderBytes];
  if (absl::Status s = ReadExactly(fd, header, kHeaderBytes, deadline); !s.ok()) return s;
  absl::StatusOr<Header> h =
      ParseHeader(std::string_view(header, kHeaderBytes), max_measure_payload);
  if (!h.ok()) return h.status();
  Frame f;
  f.type = h->type;
  f.payload.resize(h->length);
  if (absl::Status s = ReadExactly(fd, f.payload.data(), h->length, deadline); !s.ok()) return s;
  return f;
}

absl::Status WriteFrame(int fd, MessageType type, std::string_view payload) {
  const std::string frame = EncodeFrame(type, payload);
  size_t sent = 0;
  while (sent < frame.size()) {
    const ssize_t w = send(fd, frame.data() + sent, frame.size() - sent, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return absl::UnavailableError(StrCat("send: ", std::strerror(errno)));
    sent += static_cast<size_t>(w);
  }
  return absl::OkStatus();
}

Writer& Writer::U8(uint8_t v) {
  PutLe(&out_, v, 1);
  return *this;
}
Writer& Writer::U32(uint32_t v) {
  PutLe(&out_, v, 4);
  return *this;
}
Writer& Writer::U64(uint64_t v) {
  PutLe(&out_, v, 8);
  return *this;
}
Writer& Writer::F64(double v) {
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(bits));
  return U64(bits);
}
Writer& Writer::Bytes(std::string_view v) {
  U32(static_cast<uint32_t>(v.size()));
  out_.append(v);
  return *this;
}

bool Reader::Take(size_t n, std::string_view* out) {
  if (in_.size() < n) return false;
  *out = in_.substr(0, n);
  in_.remove_prefix(n);
  return true;
}
bool Reader::U8(uint8_t* v) {
  std::string_view b;
  if (!Take(1, &b)) return false;
  *v = static_cast<uint8_t>(b[0]);
  return true;
}
bool Reader::U32(uint32_t* v) {
  std::string_view b;
  if (!Take(4, &b)) return false;
  *v = static_cast<uint32_t>(GetLe(b, 4));
  return true;
}
bool Reader::U64(uint64_t* v) {
  std::string_view b;
  if (!Take(8, &b)) return false;
  *v = GetLe(b, 8);
  return true;
}
bool Reader::F64(double* v) {
  uint64_t bits = 0;
  if (!U64(&bits)) return false;
  std::memcpy(v, &bits, sizeof(bits));
  return true;
}
bool Reader::Bytes(std::string_view* v, size_t max) {
  uint32_t n = 0;
  return U32(&n) && n <= max && Take(n, v);
}

std::string HostProof(std::string_view key, std::string_view board_nonce,
                      std::string_view host_nonce) {
  return HmacSha256(key, StrCat("kiln-board host", board_nonce, host_nonce));
}
std::string BoardProof(std::string_view key, std::string_view board_nonce,
                       std::string_view host_nonce) {
  return HmacSha256(key, StrCat("kiln-board board", host_nonce, board_nonce));
}

std::string Encode(const Hello& m) {
  return Writer().Bytes(m.nonce).Bytes(m.runner_version).Bytes(m.name).Take();
}
std::string Encode(const Auth& m) { return Writer().Bytes(m.nonce).Bytes(m.mac).Take(); }
std::string Encode(const AuthOk& m) { return Writer().Bytes(m.mac).Take(); }
std::string Encode(const Description& m) {
  return Writer()
      .Bytes(m.triple)
      .Bytes(m.cpu)
      .Bytes(m.features)
      .Bytes(m.cpuinfo)
      .U32(m.cores)
      .U64(m.l2_bytes)
      .U64(m.l3_bytes)
      .F64(m.fma_gflops)
      .Bytes(m.runner_version)
      .U64(m.max_request_bytes)
      .Take();
}
std::string Encode(const MeasureRequest& m) {
  Writer w;
  w.Bytes(m.symbol).Bytes(m.object).U32(static_cast<uint32_t>(m.inputs.size()));
  for (const std::string& in : m.inputs) w.Bytes(in);
  w.U64(m.output_bytes)
      .Bytes(m.reference)
      .U8(static_cast<uint8_t>(m.compare))
      .F64(m.tolerance)
      .U32(m.off_by_one)
      .U32(m.number)
      .U32(m.repeat)
      .U32(m.min_repeat_ms)
      .U32(m.cooldown_ms)
      .F64(m.stop_above_s)
      .U8(m.flush_cache)
      .U32(m.timeout_ms)
      .U32(m.threads);
  return w.Take();
}
std::string Encode(const Measured& m) {
  Writer w;
  w.U8(static_cast<uint8_t>(m.error)).Bytes(m.message);
  WriteCosts(w, m.costs_s);
  w.U8(m.cut_short);
  return w.Take();
}

std::string Encode(const MeasureModelRequest& m) {
  Writer w;
  w.U32(static_cast<uint32_t>(m.artifacts.size()));
  for (const std::string& a : m.artifacts) w.Bytes(a);
  w.U32(m.number).U32(m.repeat).U32(m.min_repeat_ms).U32(m.threads).U32(m.timeout_ms);
  return w.Take();
}
std::string Encode(const MeasuredModel& m) {
  Writer w;
  w.U8(static_cast<uint8_t>(m.error))
      .Bytes(m.message)
      .U32(static_cast<uint32_t>(m.variants.size()));
  for (const VariantTimes& v : m.variants) {
    w.U8(static_cast<uint8_t>(v.error)).Bytes(v.message);
    WriteCosts(w, v.costs_s);
    w.U32(static_cast<uint32_t>(v.kernel_s.size()));
    for (const auto& [key, seconds] : v.kernel_s) w.Bytes(key).F64(seconds);
  }
  return w.Take();
}

absl::StatusOr<MeasureModelRequest> DecodeMeasureModelRequest(std::string_view payload) {
  Reader r(payload);
  MeasureModelRequest m;
  uint32_t n = 0;
  if (!r.U32(&n) || n == 0 || n > kMaxVariants) return Malformed("measure-model");
  for (uint32_t i = 0; i < n; ++i) {
    std::string_view a;
    if (!r.Bytes(&a, payload.size())) return Malformed("measure-model");
    m.artifacts.emplace_back(a);
  }
  if (!r.U32(&m.number) || !r.U32(&m.repeat) || !r.U32(&m.min_repeat_ms) || !r.U32(&m.threads) ||
      m.threads > kMaxThreads || !r.U32(&m.timeout_ms) || !r.Done()) {
    return Malformed("measure-model");
  }
  return m;
}

absl::StatusOr<MeasuredModel> DecodeMeasuredModel(std::string_view payload) {
  Reader r(payload);
  MeasuredModel m;
  uint32_t n = 0;
  if (!ReadOutcome(r, &m.error, &m.message) || !r.U32(&n) || n > kMaxVariants) {
    return Malformed("measured-model");
  }
  for (uint32_t i = 0; i < n; ++i) {
    VariantTimes v;
    uint8_t e = 0;
    uint32_t kernels = 0;
    std::string_view msg;
    if (!r.U8(&e) || e > static_cast<uint8_t>(VariantError::kWrongResult) ||
        !r.Bytes(&msg, 16 << 10) || !ReadCosts(r, &v.costs_s) || !r.U32(&kernels) ||
        kernels > kMaxKernelTimes) {
      return Malformed("measured-model");
    }
    v.error = static_cast<VariantError>(e);
    v.message = msg;
    for (uint32_t k = 0; k < kernels; ++k) {
      std::string_view key;
      double x = 0;
      if (!r.Bytes(&key, 256) || !r.F64(&x)) return Malformed("measured-model");
      v.kernel_s[std::string(key)] = x;
    }
    m.variants.push_back(std::move(v));
  }
  if (!r.Done()) return Malformed("measured-model");
  return m;
}

absl::StatusOr<Hello> DecodeHello(std::string_view payload) {
  Reader r(payload);
  std::string_view nonce, version, name;
  if (!r.Bytes(&nonce, kNonceBytes) || nonce.size() != kNonceBytes || !r.Bytes(&version, 256) ||
      !r.Bytes(&name, 256) || !r.Done()) {
    return Malformed("hello");
  }
  return Hello{std::string(nonce), std::string(version), std::string(name)};
}

absl::StatusOr<Auth> DecodeAuth(std::string_view payload) {
  Reader r(payload);
  std::string_view nonce, mac;
  if (!r.Bytes(&nonce, kNonceBytes) || nonce.size() != kNonceBytes || !r.Bytes(&mac, kMacBytes) ||
      mac.size() != kMacBytes || !r.Done()) {
    return Malformed("auth");
  }
  return Auth{std::string(nonce), std::string(mac)};
}

absl::StatusOr<AuthOk> DecodeAuthOk(std::string_view payload) {
  Reader r(payload);
  std::string_view mac;
  if (!r.Bytes(&mac, kMacBytes) || mac.size() != kMacBytes || !r.Done())
    return Malformed("auth-ok");
  return AuthOk{std::string(mac)};
}

absl::StatusOr<Description> DecodeDescription(std::string_view payload) {
  Reader r(payload);
  Description d;
  std::string_view triple, cpu, features, cpuinfo, version;
  if (!r.Bytes(&triple, 256) || !r.Bytes(&cpu, 1024) || !r.Bytes(&features, 16 << 10) ||
      !r.Bytes(&cpuinfo, 16 << 10) || !r.U32(&d.cores) || !r.U64(&d.l2_bytes) ||
      !r.U64(&d.l3_bytes) || !r.F64(&d.fma_gflops) || !r.Bytes(&version, 256) ||
      !r.U64(&d.max_request_bytes) || !r.Done()) {
    return Malformed("description");
  }
  d.triple = triple;
  d.cpu = cpu;
  d.features = features;
  d.cpuinfo = cpuinfo;
  d.runner_version = version;
  return d;
}

absl::StatusOr<MeasureRequest> DecodeMeasureRequest(std::string_view payload) {
  Reader r(payload);
  MeasureRequest m;
  std::string_view symbol, object, reference;
  uint32_t inputs = 0;
  if (!r.Bytes(&symbol, 256) || symbol.empty() || !r.Bytes(&object, payload.size()) ||
      !r.U32(&inputs) || inputs > kMaxInputs) {
    return Malformed("measure");
  }
  for (uint32_t i = 0; i < inputs; ++i) {
    std::string_view in;
    if (!r.Bytes(&in, payload.size())) return Malformed("measure");
    m.inputs.emplace_back(in);
  }
  uint8_t compare = 0;
  if (!r.U64(&m.output_bytes) || !r.Bytes(&reference, payload.size()) ||
      reference.size() != m.output_bytes || !r.U8(&compare) || compare > 3 ||
      !r.F64(&m.tolerance) || !r.U32(&m.off_by_one) || !r.U32(&m.number) || !r.U32(&m.repeat) ||
      !r.U32(&m.min_repeat_ms) || !r.U32(&m.cooldown_ms) || !r.F64(&m.stop_above_s) ||
      !r.U8(&m.flush_cache) || (m.flush_cache & 3) == 3 || m.flush_cache > 6 ||
      m.flush_cache == kFlushToLastLevel || !r.U32(&m.timeout_ms) || !r.U32(&m.threads) ||
      m.threads > kMaxThreads || !r.Done()) {
    return Malformed("measure");
  }
  m.symbol = symbol;
  m.object = object;
  m.reference = reference;
  m.compare = static_cast<Compare>(compare);
  return m;
}

absl::StatusOr<Measured> DecodeMeasured(std::string_view payload) {
  Reader r(payload);
  Measured m;
  if (!ReadOutcome(r, &m.error, &m.message) || !ReadCosts(r, &m.costs_s) || !r.U8(&m.cut_short) ||
      !r.Done()) {
    return Malformed("measured");
  }
  return m;
}

}  // namespace kiln::board
