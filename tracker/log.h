#pragma once
// The tracker's logger ("tracker", set up by kiln-tracker; spdlog's default
// one in tests), and its formatter: log lines stay one line each, whatever a
// user put in a string that reaches one (an ONNX node's name in an import
// error, a file location): the message's control characters are escaped
// (base/str.h: Printable) before spdlog's pattern lays it out.
#include <memory>
#include <string>
#include <string_view>

#include "base/str.h"
#include "spdlog/pattern_formatter.h"
#include "spdlog/spdlog.h"

namespace kiln::tracker {

inline std::shared_ptr<spdlog::logger> Log() {
  auto log = spdlog::get("tracker");
  return log ? log : spdlog::default_logger();
}

class PrintableFormatter final : public spdlog::formatter {
 public:
  explicit PrintableFormatter(std::string pattern)
      : pattern_(std::move(pattern)), inner_(pattern_) {}

  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    const std::string text = Printable(std::string_view(msg.payload.data(), msg.payload.size()));
    spdlog::details::log_msg escaped = msg;
    escaped.payload = spdlog::string_view_t(text.data(), text.size());
    inner_.format(escaped, dest);
  }

  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<PrintableFormatter>(pattern_);
  }

 private:
  std::string pattern_;
  spdlog::pattern_formatter inner_;
};

}  // namespace kiln::tracker
