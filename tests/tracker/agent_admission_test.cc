// Whom an agent's Hello admits, and as whom (tracker/agent_admission.h):
// the session policy on its own, with no gRPC.
#include "tracker/agent_admission.h"

#include <gtest/gtest.h>

#include <string>

#include "compiler/target.h"

namespace kiln::tracker {
namespace {

constexpr char kVersion[] = "1.2.3";

AgentHello Hello(const std::string& id = "board-1") {
  AgentHello h;
  h.agent_id = id;
  h.device_key = "x86";
  h.target = "llvm";
  h.hardware = "a CPU";
  h.compiler_version = kVersion;
  return h;
}

Caller AgentToken(const std::string& user, const std::string& owner = "") {
  return Caller{user, storage::Role::kAgent, 7, owner};
}

TEST(AgentAdmission, ATokensUserIsTheAgentsIdWhateverTheHelloSays) {
  auto a = AdmitAgent(AgentToken("rack-3"), Hello("claims-to-be-rack-9"), {}, kVersion);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->info.id, "rack-3");
  EXPECT_EQ(a->info.device_key, "x86");
  EXPECT_EQ(a->info.compiler_version, kVersion);
  EXPECT_TRUE(a->runs_for.empty());
  // Anonymous (a tracker without tokens): the Hello's id.
  a = AdmitAgent(Caller{}, Hello("claims-to-be-rack-9"), {}, kVersion);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->info.id, "claims-to-be-rack-9");
}

// One agent process serving several boards names each board's session
// ID/BOARD: kept under the token's user, whatever ID says.
TEST(AgentAdmission, ATokenNamesItsBoardsSessionsUnderItsOwnName) {
  for (const char* id :
       {"rack-3/10.0.0.7:9190", "host-123/10.0.0.7:9190", "rack-9/10.0.0.7:9190"}) {
    auto a = AdmitAgent(AgentToken("rack-3"), Hello(id), {}, kVersion);
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_EQ(a->info.id, "rack-3/10.0.0.7:9190") << id;
  }
  for (const char* id : {"rack-3", "rack-3/", "host"}) {
    auto a = AdmitAgent(AgentToken("rack-3"), Hello(id), {}, kVersion);
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_EQ(a->info.id, "rack-3") << id;
  }
}

TEST(AgentAdmission, OnlyAnAgentsTokenOpensASession) {
  for (storage::Role role : {storage::Role::kUser, storage::Role::kAdmin}) {
    auto a = AdmitAgent(Caller{"ana", role, 3, ""}, Hello(), {}, kVersion);
    EXPECT_EQ(a.status().code(), absl::StatusCode::kPermissionDenied) << storage::RoleName(role);
    EXPECT_NE(a.status().message().find("--role agent"), std::string::npos) << a.status();
  }
}

TEST(AgentAdmission, TheLegacySecretIsNeededWithoutAToken) {
  AdmissionPolicy policy;
  policy.token = "s3cret";
  AgentHello h = Hello();
  EXPECT_EQ(AdmitAgent(Caller{}, h, policy, kVersion).status().code(),
            absl::StatusCode::kUnauthenticated);
  h.token = "s3creT";
  EXPECT_EQ(AdmitAgent(Caller{}, h, policy, kVersion).status().code(),
            absl::StatusCode::kUnauthenticated);
  h.token = "s3cret";
  EXPECT_TRUE(AdmitAgent(Caller{}, h, policy, kVersion).ok());
  // A bearer token stands in for it.
  EXPECT_TRUE(AdmitAgent(AgentToken("rack-3"), Hello(), policy, kVersion).ok());
}

TEST(AgentAdmission, NamesAreBoundedAndTheVersionMustBeTheTrackers) {
  AgentHello h = Hello();
  h.device_key = std::string(10000, 'k');
  EXPECT_EQ(AdmitAgent(Caller{}, h, {}, kVersion).status().code(),
            absl::StatusCode::kInvalidArgument);
  h = Hello();
  h.hardware = "bell\x07";
  EXPECT_EQ(AdmitAgent(Caller{}, h, {}, kVersion).status().code(),
            absl::StatusCode::kInvalidArgument);
  h = Hello("");
  EXPECT_EQ(AdmitAgent(Caller{}, h, {}, kVersion).status().code(),
            absl::StatusCode::kInvalidArgument);
  h = Hello();
  h.compiler_version = "0.9";
  auto a = AdmitAgent(Caller{}, h, {}, kVersion);
  EXPECT_EQ(a.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(a.status().message().find("0.9"), std::string::npos) << a.status();
}

TEST(AgentAdmission, TheTargetIsCanonicalAndAMalformedOneRefused) {
  AgentHello h = Hello();
  h.target = "llvm  -mcpu=znver3";
  auto a = AdmitAgent(Caller{}, h, {}, kVersion);
  ASSERT_TRUE(a.ok()) << a.status();
  auto canonical = compiler::Target::Parse("llvm -mcpu=znver3");
  ASSERT_TRUE(canonical.ok());
  EXPECT_EQ(a->info.target, canonical->Spec());
  h.target = "not-a-target -x";
  EXPECT_EQ(AdmitAgent(Caller{}, h, {}, kVersion).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(AgentAdmission, AnOwnersAgentServesItsOwnerUnlessTheKeyIsShared) {
  auto a = AdmitAgent(AgentToken("anas-board", "ana"), Hello(), {}, kVersion);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->runs_for, "ana");
  AdmissionPolicy shared;
  shared.shared_keys = {"x86"};
  a = AdmitAgent(AgentToken("anas-board", "ana"), Hello(), shared, kVersion);
  ASSERT_TRUE(a.ok());
  EXPECT_TRUE(a->runs_for.empty());
  shared.shared_keys = {"*"};
  a = AdmitAgent(AgentToken("anas-board", "ana"), Hello(), shared, kVersion);
  ASSERT_TRUE(a.ok());
  EXPECT_TRUE(a->runs_for.empty());
}

}  // namespace
}  // namespace kiln::tracker
