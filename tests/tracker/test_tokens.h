#pragma once
// Tokens for the tracker tests that require authentication.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "storage/log_db.h"
#include "tracker/auth.h"

namespace kiln::tracker::testing {

// A token of `user` with `role` (and, for an agent, the `owner` who runs
// it) stored in `db`; returns its secret (and its row id in *id).
inline std::string AddToken(storage::LogDb& db, const std::string& user, const std::string& role,
                            int64_t* id = nullptr, const std::string& owner = "") {
  auto secret = NewTokenSecret();
  EXPECT_TRUE(secret.ok()) << secret.status();
  storage::TokenRow row;
  row.user = user;
  row.role = role;
  row.owner = owner;
  row.hash = TokenHash(*secret);
  row.created_unix_ms = 1;
  auto added = db.AddToken(row);
  EXPECT_TRUE(added.ok()) << added.status();
  if (id != nullptr) *id = added.ok() ? *added : 0;
  return *secret;
}

}  // namespace kiln::tracker::testing
