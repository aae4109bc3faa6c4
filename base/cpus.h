#pragma once
// The CPUs this process may run on: its affinity mask (taskset, cgroup
// cpusets, a container's --cpuset-cpus), not every CPU of the machine, which
// is what std::thread::hardware_concurrency counts. Thread pools and build
// workers size themselves with it, so that a process pinned to one core
// does not start two threads to share it.

#include <sched.h>

#include <thread>

namespace kiln {

inline int UsableCpus() {
#if defined(__linux__)
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
#endif
  const unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : static_cast<int>(hw);
}

}  // namespace kiln
