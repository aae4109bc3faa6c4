#include "deploy/parallel.h"

#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace {

struct Counts {
  std::vector<std::atomic<int>> hits;
  explicit Counts(int64_t n) : hits(n) {}
};

void CountBody(int64_t i, void* ctx) { static_cast<Counts*>(ctx)->hits[i].fetch_add(1); }

TEST(ParallelFor, CoversEveryIndexExactlyOnce) {
  for (int64_t n : {0, 1, 2, 3, 7, 64, 1000, 100003}) {
    Counts c(n);
    kiln_parallel_for(n, CountBody, &c);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(c.hits[i].load(), 1) << "n=" << n << " i=" << i;
  }
}

TEST(ParallelFor, ManyBackToBackLoops) {
  Counts c(37);
  for (int r = 0; r < 2000; ++r) kiln_parallel_for(37, CountBody, &c);
  for (int i = 0; i < 37; ++i) EXPECT_EQ(c.hits[i].load(), 2000) << i;
}

TEST(ParallelFor, LoopsAfterTheWorkersHaveGoneToSleep) {
  // Idle workers spin for KILN_SPIN_US (1 ms by default) and then sleep:
  // loops 3 ms apart each find them asleep and must wake them.
  Counts c(64);
  for (int r = 0; r < 20; ++r) {
    std::this_thread::sleep_for(std::chrono::milliseconds(3));
    kiln_parallel_for(64, CountBody, &c);
  }
  for (int i = 0; i < 64; ++i) EXPECT_EQ(c.hits[i].load(), 20) << i;
}

TEST(ParallelFor, NumThreadsIsPositive) { EXPECT_GE(kiln_num_threads(), 1); }

struct Nested {
  Counts* inner;
  int64_t inner_n;
};

void InnerBody(int64_t i, void* ctx) { static_cast<Counts*>(ctx)->hits[i].fetch_add(1); }

void OuterBody(int64_t i, void* ctx) {
  auto* nested = static_cast<Nested*>(ctx);
  // Each outer index runs a whole inner loop over its own slice.
  struct Slice {
    Counts* c;
    int64_t base;
  } slice{nested->inner, i * nested->inner_n};
  kiln_parallel_for(
      nested->inner_n,
      [](int64_t j, void* p) {
        auto* s = static_cast<Slice*>(p);
        s->c->hits[s->base + j].fetch_add(1);
      },
      &slice);
}

TEST(ParallelFor, NestedCallsRunEveryIndexOnce) {
  const int64_t outer = 9, inner = 13;
  Counts c(outer * inner);
  Nested nested{&c, inner};
  kiln_parallel_for(outer, OuterBody, &nested);
  for (int64_t k = 0; k < outer * inner; ++k) EXPECT_EQ(c.hits[k].load(), 1) << k;
  (void)InnerBody;
}

TEST(ParallelFor, SafeFromManyThreadsAtOnce) {
  const int kThreads = 4, kN = 501, kRounds = 200;
  std::vector<Counts*> counts;
  for (int t = 0; t < kThreads; ++t) counts.push_back(new Counts(kN));
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int r = 0; r < kRounds; ++r) kiln_parallel_for(kN, CountBody, counts[t]);
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 0; i < kN; ++i) ASSERT_EQ(counts[t]->hits[i].load(), kRounds) << t << " " << i;
    delete counts[t];
  }
}

// Runs body in a forked child (alarm(20): a hang becomes SIGALRM, not a
// stuck test); the child's exit status, or -signal when it died of one.
int RunInChild(int (*body)(void*), void* ctx) {
  pid_t pid = fork();
  if (pid < 0) return -1000;
  if (pid == 0) {
    alarm(20);
    _exit(body(ctx));
  }
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return -1001;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
}

TEST(ParallelFor, ThreadsFollowTheCpuAffinity) {
  if (std::getenv("KILN_NUM_THREADS") != nullptr) GTEST_SKIP() << "KILN_NUM_THREADS is set";
  cpu_set_t mask;
  ASSERT_EQ(sched_getaffinity(0, sizeof(mask), &mask), 0);
  EXPECT_EQ(kiln_num_threads(), CPU_COUNT(&mask));
  // A child pinned to one of those CPUs (as `taskset -c N` pins a process)
  // runs its loops on one thread, not one per CPU of the machine.
  const int code = RunInChild(
      [](void* m) {
        const cpu_set_t& mask = *static_cast<cpu_set_t*>(m);
        int first = 0;
        while (!CPU_ISSET(first, &mask)) ++first;
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(first, &one);
        if (sched_setaffinity(0, sizeof(one), &one) != 0) return 2;
        if (kiln_num_threads() != 1) return 3;
        Counts c(100);
        kiln_parallel_for(100, CountBody, &c);
        for (int i = 0; i < 100; ++i) {
          if (c.hits[i].load() != 1) return 4;
        }
        return 0;
      },
      &mask);
  EXPECT_EQ(code, 0) << "3: kiln_num_threads() was not 1 on one CPU";
}

TEST(ParallelFor, WorksInAForkedChild) {
  // The parent's pool exists (its workers do not survive fork); the child
  // must get a working pool of its own instead of waiting for them forever.
  Counts warm(100);
  kiln_parallel_for(100, CountBody, &warm);
  const int code = RunInChild(
      [](void*) {
        Counts c(1000);
        for (int r = 0; r < 50; ++r) kiln_parallel_for(1000, CountBody, &c);
        for (int i = 0; i < 1000; ++i) {
          if (c.hits[i].load() != 50) return 3;
        }
        return 0;
      },
      nullptr);
  EXPECT_EQ(code, 0);
}

}  // namespace
