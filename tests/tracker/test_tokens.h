#pragma once
// Tokens for the tracker tests that require authentication, and calls made
// with them.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "base/sha256.h"
#include "kiln/v1/tracker.grpc.pb.h"
#include "storage/farm_store.h"
#include "tracker/auth.h"

namespace kiln::tracker::testing {

// A token of `user` with `role` (and, for an agent, the `owner` who runs
// it) stored in `db`; returns its secret (and its row id in *id).
inline std::string AddToken(storage::FarmStore& db, const std::string& user,
                            const std::string& role, int64_t* id = nullptr,
                            const std::string& owner = "") {
  auto secret = NewTokenSecret();
  EXPECT_TRUE(secret.ok()) << secret.status();
  storage::TokenRow row;
  row.user = user;
  row.role = *storage::ParseRole(role);
  row.owner = owner;
  row.hash = TokenHash(*secret);
  row.created_unix_ms = 1;
  auto added = db.AddToken(row);
  EXPECT_TRUE(added.ok()) << added.status();
  if (id != nullptr) *id = added.ok() ? *added : 0;
  return *secret;
}

// Uploads `bytes` in one chunk (UploadModel) as `token`'s user ("": none).
inline grpc::Status UploadAs(kiln::v1::Tracker::Stub& tracker, const std::string& token,
                             const std::string& bytes,
                             kiln::v1::UploadModelResponse* resp = nullptr) {
  grpc::ClientContext ctx;
  if (!token.empty()) ctx.AddMetadata("authorization", "Bearer " + token);
  kiln::v1::UploadModelResponse ignored;
  auto writer = tracker.UploadModel(&ctx, resp ? resp : &ignored);
  kiln::v1::ModelChunk c;
  c.set_data(bytes);
  c.set_total_size(static_cast<int64_t>(bytes.size()));
  c.set_sha256(kiln::Sha256Hex(bytes));
  writer->Write(c);
  writer->WritesDone();
  return writer->Finish();
}

}  // namespace kiln::tracker::testing
