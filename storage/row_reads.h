#pragma once
// A query's rows read into the stores' row structs: the first one, or all.
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "storage/database.h"

namespace kiln::storage::rows {

// Reads the row a statement stands on (DATA_LOSS for text no kiln wrote).
template <typename Row>
using RowReader = absl::StatusOr<Row> (*)(const Statement&);

// The first row `st` (prepared and bound) steps to, read by `read`; nullopt
// when there is none.
template <typename Row>
absl::StatusOr<std::optional<Row>> FirstRow(Statement& st, RowReader<Row> read) {
  absl::StatusOr<bool> has_row = st.Step();
  if (!has_row.ok()) return has_row.status();
  if (!*has_row) return std::optional<Row>();
  absl::StatusOr<Row> row = read(st);
  if (!row.ok()) return row.status();
  return std::optional<Row>(*std::move(row));
}

// Every row `st` (prepared and bound) steps to, read by `read`, in order.
template <typename Row>
absl::StatusOr<std::vector<Row>> AllRows(Statement& st, RowReader<Row> read) {
  std::vector<Row> out;
  while (true) {
    absl::StatusOr<bool> has_row = st.Step();
    if (!has_row.ok()) return has_row.status();
    if (!*has_row) return out;
    absl::StatusOr<Row> row = read(st);
    if (!row.ok()) return row.status();
    out.push_back(*std::move(row));
  }
}

}  // namespace kiln::storage::rows
