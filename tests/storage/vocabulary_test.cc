#include "storage/vocabulary.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace kiln::storage {
namespace {

TEST(VocabularyTest, EveryJobStateRoundTripsThroughItsName) {
  std::set<std::string_view> names;
  for (JobState s : kJobStates) {
    std::string_view name = JobStateName(s);
    EXPECT_NE(name, "unknown");
    EXPECT_TRUE(names.insert(name).second) << name << " names two states";
    EXPECT_EQ(ParseJobState(name), s) << name;
  }
  EXPECT_EQ(names, (std::set<std::string_view>{"queued", "tuning", "compiling", "completed",
                                               "failed", "cancelled"}));
}

TEST(VocabularyTest, JobStatesAreNumberedLikeTheProtocol) {
  EXPECT_EQ(static_cast<int>(JobState::kQueued), 1);
  EXPECT_EQ(static_cast<int>(JobState::kTuning), 2);
  EXPECT_EQ(static_cast<int>(JobState::kCompiling), 3);
  EXPECT_EQ(static_cast<int>(JobState::kCompleted), 4);
  EXPECT_EQ(static_cast<int>(JobState::kFailed), 5);
  EXPECT_EQ(static_cast<int>(JobState::kCancelled), 6);
}

TEST(VocabularyTest, UnknownJobStateNamesAreRejected) {
  EXPECT_FALSE(ParseJobState("").has_value());
  EXPECT_FALSE(ParseJobState("running").has_value());
  EXPECT_FALSE(ParseJobState("Queued").has_value());
  EXPECT_FALSE(ParseJobState("queued ").has_value());
  EXPECT_FALSE(ParseJobState("unknown").has_value());
  EXPECT_EQ(JobStateName(static_cast<JobState>(0)), "unknown");
  EXPECT_EQ(JobStateName(static_cast<JobState>(7)), "unknown");
}

TEST(VocabularyTest, FinalJobStates) {
  std::set<JobState> final;
  for (JobState s : kJobStates) {
    if (IsFinal(s)) final.insert(s);
  }
  EXPECT_EQ(final,
            (std::set<JobState>{JobState::kCompleted, JobState::kFailed, JobState::kCancelled}));
}

TEST(VocabularyTest, EveryErrorKindRoundTripsThroughItsName) {
  std::set<std::string_view> names;
  for (ErrorKind k : kErrorKinds) {
    std::string_view name = ErrorKindName(k);
    EXPECT_NE(name, "unknown");
    EXPECT_TRUE(names.insert(name).second) << name << " names two kinds";
    EXPECT_EQ(ParseErrorKind(name), k) << name;
  }
  EXPECT_EQ(names,
            (std::set<std::string_view>{"none", "compile", "runtime", "wrong_result", "timeout",
                                        "agent_lost", "invalid_config", "invalid_cost"}));
}

TEST(VocabularyTest, ErrorKindsAreNumberedLikeTheProtocol) {
  EXPECT_EQ(static_cast<int>(ErrorKind::kNone), 1);
  EXPECT_EQ(static_cast<int>(ErrorKind::kCompile), 2);
  EXPECT_EQ(static_cast<int>(ErrorKind::kRuntime), 3);
  EXPECT_EQ(static_cast<int>(ErrorKind::kWrongResult), 4);
  EXPECT_EQ(static_cast<int>(ErrorKind::kTimeout), 5);
  EXPECT_EQ(static_cast<int>(ErrorKind::kAgentLost), 6);
  EXPECT_EQ(static_cast<int>(ErrorKind::kInvalidConfig), 7);
  EXPECT_EQ(static_cast<int>(ErrorKind::kInvalidCost), 8);
}

TEST(VocabularyTest, UnknownErrorKindNamesAreRejected) {
  EXPECT_FALSE(ParseErrorKind("").has_value());
  EXPECT_FALSE(ParseErrorKind("exploded").has_value());
  EXPECT_FALSE(ParseErrorKind("NONE").has_value());
  EXPECT_FALSE(ParseErrorKind("wrong-result").has_value());
  EXPECT_FALSE(ParseErrorKind("unknown").has_value());
  EXPECT_EQ(ErrorKindName(static_cast<ErrorKind>(0)), "unknown");
  EXPECT_EQ(ErrorKindName(static_cast<ErrorKind>(9)), "unknown");
}

TEST(VocabularyTest, TransientErrorKinds) {
  std::set<ErrorKind> transient;
  for (ErrorKind k : kErrorKinds) {
    if (IsTransient(k)) transient.insert(k);
  }
  EXPECT_EQ(transient, (std::set<ErrorKind>{ErrorKind::kTimeout, ErrorKind::kAgentLost,
                                            ErrorKind::kInvalidCost, ErrorKind::kWrongResult}));
}

// Every vocabulary: distinct names, each parsed back to its value; a value
// outside the enum is "unknown", which names none.
template <class E>
class EveryVocabulary : public ::testing::Test {};
using Vocabularies =
    ::testing::Types<JobState, ErrorKind, Role, TaskState, BatchState, ArtifactKind>;
TYPED_TEST_SUITE(EveryVocabulary, Vocabularies);

TYPED_TEST(EveryVocabulary, NamesRoundTripAndStrayValuesAreUnknown) {
  std::set<std::string_view> names;
  for (TypeParam v : ValuesOf<TypeParam>()) {
    std::string_view name = NameOf(v);
    EXPECT_NE(name, "unknown");
    EXPECT_TRUE(IsKnownValue(v)) << name;
    EXPECT_TRUE(names.insert(name).second) << name << " names two values";
    EXPECT_EQ(ParseName<TypeParam>(name), v) << name;
  }
  EXPECT_EQ(NameOf(static_cast<TypeParam>(0)), "unknown");
  EXPECT_FALSE(IsKnownValue(static_cast<TypeParam>(0)));
  EXPECT_FALSE(ParseName<TypeParam>("unknown").has_value());
  EXPECT_FALSE(ParseName<TypeParam>("").has_value());
}

// What the protocol, the status page and the database carry: renaming one
// breaks clients and stored rows.
TEST(VocabularyTest, TheWireAndStorageNamesOfTasksBatchesAndArtifacts) {
  EXPECT_EQ(NamesList<TaskState>(), "waiting, tuning, done, stopped early, exhausted");
  EXPECT_EQ(NamesList<BatchState>(), "queued, leased, done");
  EXPECT_EQ(NamesList<ArtifactKind>(), "model, module");
  EXPECT_EQ(NamesList<Role>(), "user, agent, admin");
}

// Usable at compile time (the tracker's static_asserts rely on the numbers).
static_assert(ParseJobState("cancelled") == JobState::kCancelled);
static_assert(ParseErrorKind("invalid_cost") == ErrorKind::kInvalidCost);
static_assert(IsFinal(JobState::kFailed) && !IsFinal(JobState::kCompiling));
static_assert(IsTransient(ErrorKind::kTimeout) && !IsTransient(ErrorKind::kCompile));

}  // namespace
}  // namespace kiln::storage
