// A job's whole-model measurement (tracker/end_to_end.h): the report kept in
// the job's row, and variants run through the dispatcher.
#include "tracker/end_to_end.h"

#include <gtest/gtest.h>

#include <thread>

namespace kiln::tracker {
namespace {

TEST(EndToEndReport, RoundTripsThroughItsJson) {
  EndToEndReport r;
  r.curve.push_back({250, {2e-3, 1.9e-3, 2.1e-3, 7}, {1.8e-3, 1.7e-3, 1.9e-3, 7}});
  r.decided = true;
  r.untuned = {2e-3, 1.9e-3, 2.1e-3, 15};
  r.tuned = {1.7e-3, 1.6e-3, 1.8e-3, 15};
  r.returned_tuned = true;
  r.beyond_noise = true;
  r.tasks_tuned = 2;
  r.tasks_reverted = 1;
  r.threads = 2;
  r.note = "the tuned module is faster";
  r.choices = {{"conv2d-1", "tile=4"}, {"dense-2", ""}};
  auto back = EndToEndFromJson(EndToEndToJson(r));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(EndToEndToJson(*back), EndToEndToJson(r));
  EXPECT_EQ(back->curve.at(0).trials, 250);
  EXPECT_EQ(back->choices, r.choices);
  auto choices = ChoicesOf(*back);
  ASSERT_TRUE(choices.ok()) << choices.status();
  EXPECT_EQ(choices->at("conv2d-1"), (compiler::Config{{"tile", 4}}));
  EXPECT_FALSE(choices->at("dense-2").has_value());
  // An empty row is an empty report; text kiln did not write is damage.
  auto empty = EndToEndFromJson("");
  ASSERT_TRUE(empty.ok());
  EXPECT_FALSE(empty->decided);
  for (const char* bad : {"[]", "{\"curve\": 3}", "not json", "{\"curve\": [{\"trials\": 1}]}"}) {
    EXPECT_EQ(EndToEndFromJson(bad).status().code(), absl::StatusCode::kDataLoss) << bad;
  }
}

FarmRunnerOptions Options(Dispatcher* dispatcher, const Clock* clock) {
  FarmRunnerOptions o;
  o.dispatcher = dispatcher;
  o.clock = clock;
  o.job.job_id = "job-1";
  o.job.device_key = "cpu";
  o.job.timing.threads = 2;
  o.model.files.push_back({std::string(64, 'a'), "", "/nonexistent", 10});
  return o;
}

// One whole-model batch: a candidate per variant carrying the configs of
// its tuned tasks, at the job's threads; the agent's costs come back per
// variant.
TEST(FarmVariantRunner, RunsTheVariantsAsOneWholeModelBatch) {
  FakeClock clock;
  Dispatcher dispatcher(&clock);
  std::vector<tuner::InModelTask> tasks = {{"a", {std::nullopt, compiler::Config{{"tile", 2}}}},
                                           {"b", {std::nullopt, compiler::Config{{"tile", 8}}}}};
  std::thread agent([&] {
    for (int i = 0; i < 400; ++i) {
      auto lease = dispatcher.WaitLease("agent", "cpu", 1, std::chrono::milliseconds(10));
      if (!lease) continue;
      const MeasureWork& w = lease->work;
      EXPECT_TRUE(w.model.has_value());
      EXPECT_EQ(w.timing.threads, 2);
      EXPECT_GT(w.timing.repeat, 1);
      ASSERT_EQ(w.candidates.size(), 2u);
      EXPECT_TRUE(w.candidates[0].task_configs.empty());
      EXPECT_EQ(w.candidates[1].task_configs.size(), 1u);
      EXPECT_EQ(w.candidates[1].task_configs.at("b"), (compiler::Config{{"tile", 8}}));
      std::vector<MeasureOutcome> out(2);
      out[0].candidate_index = w.candidates[0].candidate_index;
      out[0].costs_s = {1e-3, 1.1e-3};
      out[0].kernel_costs_s = {{"a", 4e-4}};
      out[1].candidate_index = w.candidates[1].candidate_index;
      out[1].error_kind = storage::ErrorKind::kWrongResult;
      out[1].error_message = "output differs";
      dispatcher.Complete(w.batch_id, "agent", out);
      return;
    }
  });
  auto timed = FarmVariantRunner(&tasks, Options(&dispatcher, &clock))({{0, 0}, {0, 1}});
  agent.join();
  ASSERT_TRUE(timed.ok()) << timed.status();
  ASSERT_EQ(timed->size(), 2u);
  EXPECT_EQ((*timed)[0].costs_s, (std::vector<double>{1e-3, 1.1e-3}));
  EXPECT_DOUBLE_EQ((*timed)[0].kernel_costs_s.at("a"), 4e-4);
  EXPECT_NE((*timed)[1].error.find("output differs"), std::string::npos);
}

// No agent of the key on this tracker (the relay does not carry whole
// models): the wait ends, UNAVAILABLE, and the batch is dropped.
TEST(FarmVariantRunner, WithoutAnAgentHereTheWaitEnds) {
  FakeClock clock;
  Dispatcher dispatcher(&clock);
  std::vector<tuner::InModelTask> tasks = {{"a", {std::nullopt}}};
  FarmRunnerOptions o = Options(&dispatcher, &clock);
  o.agent_here = [&clock] {
    clock.Advance(10000);  // time passes while nobody comes
    return false;
  };
  auto timed = FarmVariantRunner(&tasks, o)({{0}});
  EXPECT_EQ(timed.status().code(), absl::StatusCode::kUnavailable) << timed.status();
  EXPECT_NE(timed.status().message().find("no agent of key 'cpu'"), std::string::npos);
  EXPECT_EQ(dispatcher.QueuedCount("cpu"), 0u);
}

}  // namespace
}  // namespace kiln::tracker
