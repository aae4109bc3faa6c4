#include "tracker/agent_registry.h"

#include <gtest/gtest.h>

#include <filesystem>

namespace kiln::tracker {
namespace {

std::string TempDb(const std::string& name) {
  auto dir =
      std::filesystem::temp_directory_path() / ("kiln-tracker-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto path = dir / name;
  std::filesystem::remove(path);
  return path.string();
}

AgentInfo Hello(const std::string& id, const std::string& key, const std::string& target) {
  AgentInfo a;
  a.id = id;
  a.device_key = key;
  a.target = target;
  a.hardware = "test cpu";
  a.compiler_version = "0.1.0";
  return a;
}

TEST(AgentRegistryTest, ConnectDisconnectAndPersist) {
  auto db = storage::FarmStore::Open(TempDb("agents.db"));
  ASSERT_TRUE(db.ok()) << db.status();
  FakeClock clock(1000);
  {
    AgentRegistry reg(db->get(), &clock);
    auto s1 = reg.Connect(Hello("a1", "cpu", "llvm -mtriple=x86_64-pc-linux-gnu -mcpu=generic"));
    ASSERT_TRUE(s1.ok()) << s1.status();
    clock.Advance(500);
    reg.Heartbeat("a1");
    reg.AddResults("a1", 3);
    auto a = reg.Get("a1");
    ASSERT_TRUE(a.has_value());
    EXPECT_TRUE(a->connected);
    EXPECT_EQ(a->first_seen_unix_ms, 1000);
    EXPECT_EQ(a->last_seen_unix_ms, 1500);
    EXPECT_EQ(a->results, 3);
    // A newer session of the same agent survives the old one's disconnect.
    auto s2 = reg.Connect(Hello("a1", "cpu", "llvm -mtriple=x86_64-pc-linux-gnu -mcpu=generic"));
    ASSERT_TRUE(s2.ok());
    reg.Disconnect("a1", *s1);
    EXPECT_TRUE(reg.Get("a1")->connected);
    EXPECT_EQ(reg.Get("a1")->results, 3);
    reg.Disconnect("a1", *s2);
    EXPECT_FALSE(reg.Get("a1")->connected);
  }
  AgentRegistry reloaded(db->get(), &clock);
  ASSERT_TRUE(reloaded.Load().ok());
  auto list = reloaded.List();
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0].id, "a1");
  EXPECT_EQ(list[0].device_key, "cpu");
  EXPECT_EQ(list[0].results, 3);
  EXPECT_FALSE(list[0].connected);
  EXPECT_EQ(reloaded.TargetForKey("cpu"), "llvm -mtriple=x86_64-pc-linux-gnu -mcpu=generic");
  EXPECT_FALSE(reloaded.TargetForKey("gpu").has_value());
}

// Heartbeats keep the in-memory time current (what silence detection reads);
// PersistStale rewrites the stored row at most every kPersistHeartbeatEveryMs
// for them, and every kPersistResultsEveryMs for a changed results count.
TEST(AgentRegistryTest, HeartbeatsAndResultsAreStoredNowAndThen) {
  auto db = storage::FarmStore::Open(TempDb("heartbeats.db"));
  ASSERT_TRUE(db.ok()) << db.status();
  FakeClock clock(1000);
  AgentRegistry reg(db->get(), &clock);
  ASSERT_TRUE(
      reg.Connect(Hello("a1", "cpu", "llvm -mtriple=x86_64-pc-linux-gnu -mcpu=generic")).ok());
  auto stored_last_seen = [&] {
    auto rows = (*db)->ListAgents();
    EXPECT_TRUE(rows.ok() && rows->size() == 1);
    return rows.ok() && !rows->empty() ? (*rows)[0].last_seen_unix_ms : -1;
  };
  for (int i = 0; i < 10; ++i) {
    clock.Advance(2000);
    reg.Heartbeat("a1");
    reg.PersistStale();
  }
  EXPECT_EQ(reg.Get("a1")->last_seen_unix_ms, 21000);
  EXPECT_EQ(stored_last_seen(), 1000);  // ten heartbeats, no write
  clock.Advance(10000);
  reg.Heartbeat("a1");
  EXPECT_EQ(reg.PersistStale(), 1);
  EXPECT_EQ(stored_last_seen(), 31000);  // 30 s after the last write
  EXPECT_EQ(reg.PersistStale(), 0);
  auto stored_results = [&] {
    auto rows = (*db)->ListAgents();
    return rows.ok() && !rows->empty() ? (*rows)[0].results : -1;
  };
  reg.AddResults("a1", 8);
  EXPECT_EQ(reg.PersistStale(), 0);  // written 0 s ago
  clock.Advance(5000);
  EXPECT_EQ(reg.PersistStale(), 1);
  EXPECT_EQ(stored_results(), 8);
}

TEST(AgentRegistryTest, TargetForKeyPrefersConnectedAgents) {
  FakeClock clock;
  AgentRegistry reg(nullptr, &clock);
  auto old = reg.Connect(Hello("old", "arm", "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a53"));
  ASSERT_TRUE(old.ok());
  clock.Advance(10);
  auto now = reg.Connect(Hello("new", "arm", "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72"));
  ASSERT_TRUE(now.ok());
  reg.Disconnect("new", *now);
  EXPECT_EQ(reg.TargetForKey("arm"), "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a53");
}

TEST(AgentRegistryTest, RepeatedFailuresQuarantineAnAgentForAWhile) {
  FakeClock clock(1000);
  HealthOptions health;
  health.max_consecutive_failures = 16;
  health.max_invalid_costs = 3;
  health.quarantine_ms = 60000;
  AgentRegistry reg(nullptr, &clock, health);
  ASSERT_TRUE(reg.Connect(Hello("bad", "cpu", "x")).ok());
  ASSERT_TRUE(reg.Connect(Hello("flaky", "cpu", "x")).ok());
  // Failures with a success in each batch never add up.
  for (int i = 0; i < 10; ++i) EXPECT_FALSE(reg.RecordOutcomes("flaky", 1, 7, 0));
  EXPECT_FALSE(reg.Quarantined("flaky"));
  EXPECT_EQ(reg.Get("flaky")->consecutive_failures, 7);
  // Two batches without a success do.
  EXPECT_FALSE(reg.RecordOutcomes("flaky", 0, 8, 0));
  EXPECT_TRUE(reg.RecordOutcomes("flaky", 0, 8, 0));
  EXPECT_TRUE(reg.Quarantined("flaky"));
  EXPECT_EQ(reg.Get("flaky")->quarantine_reason, "23 failed measurements in a row");
  // Impossible costs sooner: three in a row.
  EXPECT_FALSE(reg.RecordOutcomes("bad", 5, 2, 2));
  EXPECT_TRUE(reg.RecordOutcomes("bad", 0, 1, 1));
  EXPECT_EQ(reg.Get("bad")->quarantine_reason, "3 impossible costs in a row");
  // Reconnecting does not end a quarantine; time does.
  auto again = reg.Connect(Hello("bad", "cpu", "x"));
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(reg.Quarantined("bad"));
  clock.Advance(59999);
  EXPECT_TRUE(reg.Quarantined("bad"));
  clock.Advance(1);
  EXPECT_FALSE(reg.Quarantined("bad"));
  EXPECT_FALSE(reg.Quarantined("unknown"));
}

// An agent that connects over loopback or a Unix socket shares the
// tracker's CPUs; the farm then gives it one batch at a time.
TEST(AgentRegistryTest, CountsTheAgentsOnTheTrackersOwnMachine) {
  EXPECT_TRUE(IsLoopbackPeer("ipv4:127.0.0.1:40562"));
  EXPECT_TRUE(IsLoopbackPeer("ipv4:127.0.1.1:5000"));
  EXPECT_TRUE(IsLoopbackPeer("ipv6:[::1]:5000"));
  EXPECT_TRUE(IsLoopbackPeer("ipv6:%5B::1%5D:5000"));
  EXPECT_TRUE(IsLoopbackPeer("ipv6:[::ffff:127.0.0.1]:5000"));
  EXPECT_TRUE(IsLoopbackPeer("unix:/tmp/kiln.sock"));
  EXPECT_FALSE(IsLoopbackPeer("ipv4:10.0.0.7:40562"));
  EXPECT_FALSE(IsLoopbackPeer("ipv4:128.0.0.1:40562"));
  EXPECT_FALSE(IsLoopbackPeer("ipv6:[::12]:5000"));
  EXPECT_FALSE(IsLoopbackPeer("ipv6:[2001:db8::1]:5000"));
  EXPECT_FALSE(IsLoopbackPeer(""));

  FakeClock clock(1000);
  AgentRegistry reg(nullptr, &clock);
  AgentInfo here = Hello("here", "cpu", "llvm");
  here.on_tracker_host = true;
  ASSERT_TRUE(reg.Connect(here).ok());
  ASSERT_TRUE(reg.Connect(Hello("there", "cpu", "llvm")).ok());
  auto other_key = Hello("gpu-here", "gpu", "cuda");
  other_key.on_tracker_host = true;
  auto s = reg.Connect(other_key);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(reg.ConnectedCount("cpu"), 2);
  EXPECT_EQ(reg.OnTrackerHostCount("cpu"), 1);
  EXPECT_EQ(reg.OnTrackerHostCount("gpu"), 1);
  reg.Disconnect("gpu-here", *s);
  EXPECT_EQ(reg.OnTrackerHostCount("gpu"), 0);
  // A reconnect from elsewhere says so.
  ASSERT_TRUE(reg.Connect(Hello("here", "cpu", "llvm")).ok());
  EXPECT_EQ(reg.OnTrackerHostCount("cpu"), 0);
}

TEST(AgentRegistryTest, RejectsEmptyIdentity) {
  FakeClock clock;
  AgentRegistry reg(nullptr, &clock);
  EXPECT_EQ(reg.Connect(Hello("", "cpu", "x")).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(reg.Connect(Hello("a", "", "x")).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kiln::tracker
