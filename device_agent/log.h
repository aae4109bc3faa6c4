#pragma once
// The agent's logger ("agent", on stderr), shared by its session with the
// tracker and its board listener.
#include <memory>

#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"

namespace kiln::agent {

inline std::shared_ptr<spdlog::logger> Log() {
  static std::shared_ptr<spdlog::logger> logger = [] {
    std::shared_ptr<spdlog::logger> l = spdlog::get("agent");
    if (!l) l = spdlog::stderr_color_mt("agent");
    return l;
  }();
  return logger;
}

}  // namespace kiln::agent
