// base/subprocess.h, the child processes of the agent's sandbox, the
// tracker's compile worker and `kiln report`'s gnuplot.
#include "base/subprocess.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

namespace kiln {
namespace {

// What `fd` holds until its writers close it.
std::string ReadAll(int fd) {
  std::string out;
  char buf[256];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  return out;
}

TEST(Subprocess, TheChildGetsItsDescriptorsEnvironmentAndArguments) {
  int out[2];
  ASSERT_EQ(::pipe2(out, O_CLOEXEC), 0);
  ChildOptions o;
  o.descriptors = {{out[1], 1}};
  o.env = {"KILN_SUBPROCESS_TEST=seen"};
  o.search_path = true;
  auto pid = StartChild({"sh", "-c", "echo \"$KILN_SUBPROCESS_TEST $0\"", "arg"}, o);
  ASSERT_TRUE(pid.ok()) << pid.status();
  ::close(out[1]);
  EXPECT_EQ(ReadAll(out[0]), "seen arg\n");
  ::close(out[0]);
  const int status = WaitChild(*pid, /*kill=*/false);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST(Subprocess, AProgramThatIsNotThereExitsWith127) {
  auto pid = StartChild({"/nonexistent/kiln-program"}, ChildOptions{});
  ASSERT_TRUE(pid.ok()) << pid.status();
  const int status = WaitChild(*pid, /*kill=*/false);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 127);
  EXPECT_FALSE(StartChild({}, ChildOptions{}).ok());
}

TEST(Subprocess, TheMemoryLimitHoldsAndAKilledChildSaysSo) {
  // 256 MiB of data: allowed without a limit, refused within 128 MiB of
  // address space.
  ChildOptions plain;
  plain.search_path = true;
  for (int64_t limit : {int64_t{0}, int64_t{128} << 20}) {
    ChildOptions o = plain;
    o.memory_bytes = limit;
    auto big = StartChild({"python3", "-c", "bytearray(256 << 20)"}, o);
    ASSERT_TRUE(big.ok()) << big.status();
    const int status = WaitChild(*big, /*kill=*/false);
    EXPECT_EQ(WIFEXITED(status) && WEXITSTATUS(status) == 0, limit == 0) << limit << " " << status;
  }

  auto sleeper = StartChild({"sleep", "60"}, plain);
  ASSERT_TRUE(sleeper.ok()) << sleeper.status();
  const int killed = WaitChild(*sleeper, /*kill=*/true);
  ASSERT_TRUE(WIFSIGNALED(killed));
  EXPECT_EQ(WTERMSIG(killed), SIGKILL);
}

}  // namespace
}  // namespace kiln
