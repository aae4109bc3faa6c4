// libFuzzer target: arbitrary bytes through kiln-board's wire decoders (what
// a board reads from the network before and after the key's handshake): the
// first byte picks the message, the rest is its payload, and the frame
// header parser reads the same bytes. Any outcome but a message or
// INVALID_ARGUMENT / RESOURCE_EXHAUSTED is a finding, as is every crash,
// sanitizer report, leak or allocation over -malloc_limit_mb (a payload must
// not make a decoder allocate what it does not contain).
// Built and run by scripts/fuzz board_wire (docs/development.md).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "board/wire.h"

namespace {

void Expect(const absl::Status& s) {
  if (s.ok() || s.code() == absl::StatusCode::kInvalidArgument ||
      s.code() == absl::StatusCode::kResourceExhausted) {
    return;
  }
  std::fprintf(stderr, "unexpected status: %s\n", s.ToString().c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kiln::board;
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  Expect(ParseHeader(bytes, kDefaultMaxMeasurePayload).status());
  if (bytes.empty()) return 0;
  const std::string_view payload = bytes.substr(1);
  switch (static_cast<uint8_t>(bytes[0]) % 8) {
    case 0:
      Expect(DecodeHello(payload).status());
      break;
    case 1:
      Expect(DecodeAuth(payload).status());
      break;
    case 2:
      Expect(DecodeAuthOk(payload).status());
      break;
    case 3:
      Expect(DecodeDescription(payload).status());
      break;
    case 4: {
      auto m = DecodeMeasureRequest(payload);
      Expect(m.status());
      // What a decoded request holds was in the payload.
      if (m.ok() && m->reference.size() + m->object.size() > payload.size()) std::abort();
      break;
    }
    case 5:
      Expect(DecodeMeasured(payload).status());
      break;
    case 6:
      Expect(DecodeMeasureModelRequest(payload).status());
      break;
    default:
      Expect(DecodeMeasuredModel(payload).status());
      break;
  }
  return 0;
}
