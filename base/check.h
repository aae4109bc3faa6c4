#pragma once
// KILN_CHECK(cond) << "message": aborts with file, line, condition and message
// when an invariant is broken. Part of base/: header-only and dependency-free,
// so every component (deploy/ included) can use it. Not for user errors:
// those are absl::Status.
#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace kiln::internal {

class CheckFailure {
 public:
  CheckFailure(const char* file, int line, const char* cond) {
    stream_ << file << ":" << line << ": check failed: " << cond << " ";
  }
  [[noreturn]] ~CheckFailure() {
    std::fprintf(stderr, "%s\n", stream_.str().c_str());
    std::abort();
  }
  std::ostream& stream() { return stream_; }

 private:
  std::ostringstream stream_;
};

struct Voidify {
  void operator&(std::ostream&) {}
};

}  // namespace kiln::internal

#define KILN_CHECK(cond)                 \
  (cond) ? (void)0                       \
         : ::kiln::internal::Voidify() & \
               ::kiln::internal::CheckFailure(__FILE__, __LINE__, #cond).stream()
