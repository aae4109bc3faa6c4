// The SQL engines (storage/database.h): DatabaseTest and MigrationTest run on
// both engines (the `pg.` ctest entries on PostgreSQL), SqliteTest on SQLite.
#include <gtest/gtest.h>

#include "base/check.h"
#include "storage/database.h"
#include "storage/migrations.h"
#include "test_util.h"

namespace kiln::storage {
namespace {

using testing::TempDir;

TEST(DatabaseTest, TypedBindsRoundTrip) {
  TempDir dir;
  auto db = Database::Open(dir.DbUrl("t.db"));
  ASSERT_TRUE(db.ok()) << db.status();
  ASSERT_TRUE(
      (*db)
          ->Exec((*db)->SchemaSql("CREATE TABLE t(i INTEGER, d REAL, s TEXT, b BLOB, n TEXT)"))
          .ok());
  auto ins = (*db)->Prepare("INSERT INTO t VALUES(?,?,?,?,?)");
  ASSERT_TRUE(ins.ok()) << ins.status();
  std::string blob("a\0b", 3);
  ASSERT_TRUE(ins->BindInt64(1, int64_t{1} << 40).ok());
  ASSERT_TRUE(ins->BindDouble(2, 2.5).ok());
  ASSERT_TRUE(ins->BindText(3, "héllo").ok());
  ASSERT_TRUE(ins->BindBlob(4, blob).ok());
  ASSERT_TRUE(ins->BindNull(5).ok());
  ASSERT_TRUE(ins->Run().ok());
  EXPECT_EQ((*db)->Changes(), 1);

  auto sel = (*db)->Prepare("SELECT i, d, s, b, n FROM t");
  ASSERT_TRUE(sel.ok());
  auto row = sel->Step();
  ASSERT_TRUE(row.ok() && *row);
  EXPECT_EQ(sel->ColumnInt64(0), int64_t{1} << 40);
  EXPECT_EQ(sel->ColumnDouble(1), 2.5);
  EXPECT_EQ(sel->ColumnText(2), "héllo");
  EXPECT_EQ(sel->ColumnBlob(3), blob);
  EXPECT_TRUE(sel->ColumnIsNull(4));
  EXPECT_FALSE(sel->ColumnIsNull(0));
  auto done = sel->Step();
  ASSERT_TRUE(done.ok());
  EXPECT_FALSE(*done);
  // Reset allows stepping again.
  ASSERT_TRUE(sel->Reset().ok());
  auto again = sel->Step();
  ASSERT_TRUE(again.ok() && *again);
}

TEST(DatabaseTest, EmptyViewBindsEmptyTextNotNull) {
  TempDir dir;
  auto db = Database::Open(dir.DbUrl("t.db"));
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE((*db)->Exec("CREATE TABLE t(s TEXT NOT NULL)").ok());
  auto ins = (*db)->Prepare("INSERT INTO t VALUES(?)");
  ASSERT_TRUE(ins.ok());
  ASSERT_TRUE(ins->BindText(1, std::string_view()).ok());
  ASSERT_TRUE(ins->Run().ok());
  auto sel = (*db)->Prepare("SELECT s IS NULL, length(s) FROM t");
  ASSERT_TRUE(sel.ok() && *sel->Step());
  EXPECT_EQ(sel->ColumnInt64(0), 0);
  EXPECT_EQ(sel->ColumnInt64(1), 0);
}

TEST(SqliteTest, UsesWalAndForeignKeys) {
  TempDir dir;
  auto db = Database::Open(dir.DbUrl("t.db"));
  ASSERT_TRUE(db.ok());
  auto mode = (*db)->Prepare("PRAGMA journal_mode");
  ASSERT_TRUE(mode.ok());
  ASSERT_TRUE(*mode->Step());
  EXPECT_EQ(mode->ColumnText(0), "wal");
  auto fk = (*db)->Prepare("PRAGMA foreign_keys");
  ASSERT_TRUE(fk.ok());
  ASSERT_TRUE(*fk->Step());
  EXPECT_EQ(fk->ColumnInt64(0), 1);
}

TEST(SqliteTest, ErrorsCarrySqliteMessage) {
  TempDir dir;
  auto db = Database::Open(dir.DbUrl("t.db"));
  ASSERT_TRUE(db.ok());
  auto bad = (*db)->Prepare("SELECT * FROM no_such_table");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("no such table: no_such_table"), std::string::npos)
      << bad.status();
  absl::Status s = (*db)->Exec("NOT SQL AT ALL");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("syntax error"), std::string::npos) << s;
}

TEST(SqliteTest, OpenFailsInMissingFolder) {
  auto db = Database::Open("/nonexistent-kiln-dir/x/y.db");
  EXPECT_FALSE(db.ok());
}

int64_t CountRows(Database& db, const std::string& table = "t") {
  auto st = db.Prepare("SELECT COUNT(*) FROM " + table);
  KILN_CHECK(st.ok());
  KILN_CHECK(*st->Step());
  return st->ColumnInt64(0);
}

TEST(DatabaseTest, QuestionMarksInQuotesAreNotParameters) {
  TempDir dir;
  auto db = Database::Open(dir.DbUrl("t.db"));
  ASSERT_TRUE(db.ok()) << db.status();
  ASSERT_TRUE((*db)->Exec("CREATE TABLE t(s TEXT NOT NULL, n INTEGER NOT NULL)").ok());
  auto ins = (*db)->Prepare("INSERT INTO t VALUES('what?', ?2), (?1, ?2)");
  ASSERT_TRUE(ins.ok()) << ins.status();
  ASSERT_TRUE(ins->BindText(1, "x").ok());
  ASSERT_TRUE(ins->BindInt64(2, 7).ok());
  ASSERT_TRUE(ins->Run().ok());
  EXPECT_EQ((*db)->Changes(), 2);
  auto sel = (*db)->Prepare("SELECT n FROM t WHERE s = 'what?' AND n = ?");
  ASSERT_TRUE(sel.ok()) << sel.status();
  ASSERT_TRUE(sel->BindInt64(1, 7).ok());
  auto row = sel->Step();
  ASSERT_TRUE(row.ok() && *row) << row.status();
  EXPECT_EQ(sel->ColumnInt64(0), 7);
}

TEST(DatabaseTest, ConstraintViolationIsFailedPrecondition) {
  TempDir dir;
  auto db = Database::Open(dir.DbUrl("t.db"));
  ASSERT_TRUE(db.ok()) << db.status();
  ASSERT_TRUE((*db)->Exec("CREATE TABLE t(k TEXT PRIMARY KEY)").ok());
  ASSERT_TRUE((*db)->Exec("INSERT INTO t VALUES('a')").ok());
  auto ins = (*db)->Prepare("INSERT INTO t VALUES(?)");
  ASSERT_TRUE(ins.ok());
  ASSERT_TRUE(ins->BindText(1, "a").ok());
  absl::Status s = ins->Run();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  // The connection goes on working.
  EXPECT_EQ(CountRows(**db, "t"), 1);
}

TEST(PostgresTest, UnreachableServerIsUnavailableAndHidesThePassword) {
  auto db = Database::Open("postgresql://kiln:s3cret@127.0.0.1:1/kiln?connect_timeout=2");
  ASSERT_FALSE(db.ok());
  EXPECT_EQ(db.status().code(), absl::StatusCode::kUnavailable) << db.status();
  EXPECT_EQ(db.status().message().find("s3cret"), std::string::npos) << db.status();
  EXPECT_NE(db.status().message().find("127.0.0.1"), std::string::npos) << db.status();
}

TEST(DatabaseTest, TransactionRollsBackUnlessCommitted) {
  TempDir dir;
  auto db = Database::Open(dir.DbUrl("t.db"));
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE((*db)->Exec("CREATE TABLE t(x INTEGER)").ok());
  {
    Transaction tx(**db);
    ASSERT_TRUE(tx.status().ok());
    ASSERT_TRUE((*db)->Exec("INSERT INTO t VALUES(1)").ok());
    EXPECT_EQ(CountRows(**db), 1);
  }  // no Commit: rolled back
  EXPECT_EQ(CountRows(**db), 0);
  {
    Transaction tx(**db);
    ASSERT_TRUE((*db)->Exec("INSERT INTO t VALUES(2)").ok());
    ASSERT_TRUE(tx.Commit().ok());
  }
  EXPECT_EQ(CountRows(**db), 1);
}

TEST(MigrationTest, AppliesMissingStepsInOrder) {
  TempDir dir;
  auto db = Database::Open(dir.DbUrl("m.db"));
  ASSERT_TRUE(db.ok());
  std::vector<std::string> ladder = {"CREATE TABLE a(x INTEGER);"};
  ASSERT_TRUE(MigrateSchema(**db, ladder).ok());
  EXPECT_EQ(*ReadSchemaVersion(**db), 1);
  ladder.push_back("ALTER TABLE a ADD COLUMN y TEXT;");
  ASSERT_TRUE(MigrateSchema(**db, ladder).ok());
  EXPECT_EQ(*ReadSchemaVersion(**db), 2);
  EXPECT_TRUE((*db)->Exec("INSERT INTO a(x, y) VALUES(1, 'b')").ok());
  // Idempotent when up to date.
  ASSERT_TRUE(MigrateSchema(**db, ladder).ok());
  EXPECT_EQ(*ReadSchemaVersion(**db), 2);
}

TEST(MigrationTest, FailingStepRollsBackThatStepOnly) {
  TempDir dir;
  auto db = Database::Open(dir.DbUrl("m.db"));
  ASSERT_TRUE(db.ok());
  std::vector<std::string> ladder = {"CREATE TABLE a(x INTEGER);",
                                     "CREATE TABLE b(x INTEGER); CREATE TABLE a(x INTEGER);"};
  absl::Status s = MigrateSchema(**db, ladder);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("schema version 2"), std::string::npos) << s;
  EXPECT_EQ(*ReadSchemaVersion(**db), 1);
  // Table b of the failed step was rolled back.
  EXPECT_FALSE((*db)->Prepare("SELECT * FROM b").ok());
}

}  // namespace
}  // namespace kiln::storage
