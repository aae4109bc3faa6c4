// A batch and its results between the tracker's types and protobuf
// (tracker/measure_proto.h), and through the relay's rows in protobuf's
// JSON mapping (tracker/relay.h): what goes in comes out, and results are
// checked where they enter.
#include "tracker/measure_proto.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "tracker/relay.h"

namespace kiln::tracker {
namespace {

namespace pb = kiln::v1;

MeasureWork Work() {
  MeasureWork w;
  w.batch_id = "job-1/b7";
  w.job_id = "job-1";
  w.device_key = "x86";
  w.workload_key = "wk";
  w.workload_op = "dense";
  w.workload_canonical = "dense(8,8,8)";
  w.workload_flops = 1024;
  w.target = "llvm -mcpu=znver5";
  w.user = "ana";
  w.priority = 3;
  w.timing.number = 2;
  w.timing.repeat = 5;
  w.timing.min_repeat_ms = 10;
  w.timing.cooldown_ms = 1;
  w.timing.flush_cache = true;
  w.timing.model_bytes = 14 << 20;
  w.timing.timeout_ms = 20000;
  w.timing.stop_above_s = 0.5;
  w.timing.threads = 2;
  w.candidates.push_back({0, {{"tile", 8}, {"unroll", 1}}, {}});
  w.candidates.push_back({1, {{"tile", 16}}, {}});
  return w;
}

TEST(MeasureProto, ARelayedBatchComesBackAsItWent) {
  const MeasureWork w = Work();
  auto back = WorkFromJson(WorkToJson(w));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->job_id, w.job_id);
  EXPECT_EQ(back->device_key, w.device_key);
  EXPECT_EQ(back->user, w.user);
  EXPECT_EQ(back->priority, w.priority);
  EXPECT_EQ(back->workload_key, w.workload_key);
  EXPECT_EQ(back->workload_canonical, w.workload_canonical);
  EXPECT_EQ(back->workload_flops, w.workload_flops);
  EXPECT_EQ(back->target, w.target);
  EXPECT_EQ(back->timing.model_bytes, w.timing.model_bytes);
  EXPECT_EQ(back->timing.threads, w.timing.threads);
  EXPECT_EQ(back->timing.stop_above_s, w.timing.stop_above_s);
  EXPECT_TRUE(back->timing.flush_cache);
  EXPECT_TRUE(back->batch_id.empty());  // the claiming tracker names it
  ASSERT_EQ(back->candidates.size(), 2u);
  EXPECT_EQ(back->candidates[0].candidate_index, 0);
  EXPECT_EQ(back->candidates[1].candidate_index, 1);
  EXPECT_EQ(back->candidates[0].config, w.candidates[0].config);
  EXPECT_EQ(back->candidates[1].config, w.candidates[1].config);
}

TEST(MeasureProto, RelayedResultsComeBackWithWhoMeasuredThem) {
  MeasureOutcome ok;
  ok.candidate_index = 0;
  ok.costs_s = {1e-3, 1.1e-3};
  ok.build_s = 0.2;
  ok.cut_short = true;
  ok.agent_id = "board-1";
  ok.owner = "ana";
  MeasureOutcome failed;
  failed.candidate_index = 1;
  failed.error_kind = storage::ErrorKind::kCompile;
  failed.error_message = "no such knob";
  failed.agent_id = "board-1";
  auto back = OutcomesFromJson(OutcomesToJson({ok, failed}));
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->size(), 2u);
  EXPECT_EQ((*back)[0].candidate_index, 0);
  EXPECT_EQ((*back)[1].candidate_index, 1);
  EXPECT_EQ((*back)[0].costs_s, ok.costs_s);
  EXPECT_EQ((*back)[0].build_s, 0.2);
  EXPECT_TRUE((*back)[0].cut_short);
  EXPECT_EQ((*back)[0].agent_id, "board-1");
  EXPECT_EQ((*back)[0].owner, "ana");
  EXPECT_EQ((*back)[1].error_kind, storage::ErrorKind::kCompile);
  EXPECT_EQ((*back)[1].error_message, "no such knob");
  EXPECT_EQ((*back)[1].owner, "");
}

TEST(MeasureProto, ImpossibleCostsAreTheMeasurersErrorWhereverTheyEnter) {
  for (double bad : {-1.0, 0.0, std::numeric_limits<double>::infinity()}) {
    pb::MeasureResult m;
    m.set_candidate_id("0");
    m.set_error_kind(pb::MEASURE_ERROR_KIND_NONE);
    m.add_costs_s(1e-3);
    m.add_costs_s(bad);
    MeasureOutcome o = OutcomeFromProto(m, "board-1", "");
    EXPECT_EQ(o.error_kind, storage::ErrorKind::kInvalidCost) << bad;
    EXPECT_TRUE(o.costs_s.empty());
    // The same through another tracker's row.
    MeasureOutcome relayed;
    relayed.candidate_index = 0;
    relayed.costs_s = {bad};
    relayed.agent_id = "board-1";
    auto back = OutcomesFromJson(OutcomesToJson({relayed}));
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ((*back)[0].error_kind, storage::ErrorKind::kInvalidCost) << bad;
  }
  pb::MeasureResult m;
  m.set_error_kind(pb::MEASURE_ERROR_KIND_NONE);
  m.add_costs_s(1e-3);
  m.add_kernel_costs()->set_cost_s(std::nan(""));
  EXPECT_EQ(OutcomeFromProto(m, "a", "").error_kind, storage::ErrorKind::kInvalidCost);
}

// The candidate's time limit (its batch's timeout) bounds what it may have
// cost, for an agent's answer and a relayed one alike; an error keeps no
// costs; a success with none is impossible.
TEST(MeasureProto, CostsAboveTheCandidatesTimeLimitAndErrorsWithCostsAreChecked) {
  MeasureWork w = Work();
  w.timing.timeout_ms = 10000;
  EXPECT_EQ(CostLimitOf(w), 10.0);
  pb::MeasureResult m;
  m.set_candidate_id("0");
  m.set_error_kind(pb::MEASURE_ERROR_KIND_NONE);
  m.add_costs_s(11.0);
  EXPECT_EQ(OutcomeFromProto(m, "a", "").error_kind, storage::ErrorKind::kNone);  // no limit
  MeasureOutcome o = OutcomeFromProto(m, "a", "", CostLimitOf(w));
  EXPECT_EQ(o.error_kind, storage::ErrorKind::kInvalidCost);
  EXPECT_NE(o.error_message.find("time limit"), std::string::npos) << o.error_message;
  MeasureOutcome relayed;
  relayed.candidate_index = 0;
  relayed.costs_s = {11.0};
  auto back = OutcomesFromJson(OutcomesToJson({relayed}), CostLimitOf(w));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ((*back)[0].error_kind, storage::ErrorKind::kInvalidCost);

  m.set_error_kind(pb::MEASURE_ERROR_KIND_RUNTIME);
  EXPECT_TRUE(OutcomeFromProto(m, "a", "").costs_s.empty());
  m.set_error_kind(pb::MEASURE_ERROR_KIND_NONE);
  m.clear_costs_s();
  EXPECT_EQ(OutcomeFromProto(m, "a", "").error_kind, storage::ErrorKind::kInvalidCost);
  // More repeats than a job may ask for.
  for (int i = 0; i <= kMaxCosts; ++i) m.add_costs_s(1e-3);
  EXPECT_EQ(OutcomeFromProto(m, "a", "").error_kind, storage::ErrorKind::kInvalidCost);
  // A whole-model batch's runs are not bounded by the candidate timeout.
  w.model.emplace();
  EXPECT_EQ(CostLimitOf(w), 0.0);
}

TEST(MeasureProto, CandidateIdsAreTheCandidatesPlacesInDecimal) {
  pb::MeasureBatch b;
  FillMeasureBatch(Work(), &b);
  ASSERT_EQ(b.candidates_size(), 2);
  EXPECT_EQ(b.candidates(0).candidate_id(), "0");
  EXPECT_EQ(b.candidates(1).candidate_id(), "1");
  pb::MeasureResult m;
  m.set_error_kind(pb::MEASURE_ERROR_KIND_NONE);
  m.add_costs_s(1e-3);
  for (const char* id : {"", "c1", "-1", "1x", "99999999999999999999"}) {
    m.set_candidate_id(id);
    EXPECT_EQ(OutcomeFromProto(m, "a", "").candidate_index, -1) << id;  // answers none
  }
  m.set_candidate_id("7");
  EXPECT_EQ(OutcomeFromProto(m, "a", "").candidate_index, 7);
  b.mutable_candidates(1)->set_candidate_id("c1");
  EXPECT_EQ(WorkFromMeasureBatch(b).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(MeasureProto, TextThatIsNotARelayedRowIsDataLoss) {
  EXPECT_EQ(WorkFromJson("{").status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(WorkFromJson(R"({"jobId": 7})").status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(OutcomesFromJson("[1, 2]").status().code(), absl::StatusCode::kDataLoss);
  // A config that does not parse.
  EXPECT_EQ(WorkFromJson(R"({"batch": {"candidates": [{"config": {"canonical": "tile="}}]}})")
                .status()
                .code(),
            absl::StatusCode::kDataLoss);
}

TEST(MeasureProto, AWholeModelBatchCarriesItsModelNotAWorkload) {
  MeasureWork w = Work();
  w.model = ModelWork{};
  w.model->files.push_back({std::string(64, 'a'), "", "/tmp/m.onnx", 10});
  w.model->input_shapes["x"] = {1, 3, 224, 224};
  pb::MeasureBatch b;
  FillMeasureBatch(w, &b);
  EXPECT_FALSE(b.has_workload());
  ASSERT_TRUE(b.has_model());
  EXPECT_EQ(b.model().model_sha256(), std::string(64, 'a'));
  ASSERT_EQ(b.model().input_shapes_size(), 1);
  EXPECT_EQ(b.model().input_shapes(0).dims_size(), 4);
  EXPECT_FALSE(WorkFromMeasureBatch(b).ok());  // never relayed
}

}  // namespace
}  // namespace kiln::tracker
