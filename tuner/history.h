#pragma once
// What the log database already knows, for a task's search strategy: its own
// past results (a resumed job, or earlier jobs on the same workload) and, for
// the cost model's warm start, other workloads' records of the same operator
// (transfer learning).

#include <cstddef>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/config.h"
#include "compiler/target.h"
#include "compiler/workload.h"
#include "storage/tuning_db.h"
#include "tuner/config_set.h"
#include "tuner/cost_model.h"

namespace kiln::tuner {

// Weight of a prior group measured on another target than the task's.
inline constexpr float kOtherTargetWeight = 0.3f;

// A record as a search strategy's result: its config and mean cost (+inf for
// a failure); nullopt for a config string that does not parse.
std::optional<std::pair<compiler::Config, double>> ResultOf(const storage::RecordRow& record);

// A transient failure (storage::IsTransient: a timeout, a lost agent, an
// invalid cost, a wrong result; an agent's fault or bad luck) says nothing
// certain about a config: it is measured again, up to this many attempts in
// all. Other outcomes (a cost, or a compile error, invalid config, runtime
// error) are final.
inline constexpr int kMaxAttempts = 2;

// What the log knows of one workload on one target by one compiler version.
struct TaskHistory {
  // Results for SearchStrategy::Update, oldest first: every final outcome
  // (failures cost +inf), and configs whose attempts all failed transiently.
  // (The tuner hands them to its strategy and clears them.)
  std::vector<std::pair<compiler::Config, double>> results;
  // Canonical configs never to measure again: final, or out of attempts.
  ConfigSet settled;
  // Configs with only transient failures so far, and how many.
  std::map<std::string, int> retry;
  double best_cost_s = 0;  // 0: none ran
};

// The history of `workload_key` from its records.
// Each function here reads the records of `scope` only (storage::RecordScope:
// a job reads the farm's and its user's).
absl::StatusOr<TaskHistory> LoadTaskHistory(storage::TuningDb& db, const std::string& workload_key,
                                            const std::string& target,
                                            const std::string& compiler_version,
                                            const storage::RecordScope& scope = {});

// The config of the fastest record of `w` on `target` that today's template
// accepts, among its kBestCandidates fastest: records of an older compiler
// or an imported log may lack knobs the template has since gained, or name
// choices it no longer offers (`skipped` counts the unusable records passed
// over). nullopt when the template's default config serves: no record is
// usable, the default is the fastest, or it was timed and that fastest
// record is not at least kDefaultMargin faster than the default's fastest.
// One timing on a shared machine moves by 10-30 %, and the fastest of
// hundreds of near-equal configs is then often only the luckiest (the BERT
// layer's two big MatMuls, tuned 2-3 % "faster" than the default, ran 7-12 %
// slower in the model: git history of docs/results.md, session sixteen).
//
// Once the tuner has confirmed configs (timed them again beside the
// default: Tuner, kConfirmRounds), the candidates are the confirmed ones,
// at least two successful records each, ranked by the median of their
// records' costs, and the default is judged by its median too: a config
// that was only lucky once no longer wins on that one timing.
inline constexpr int kBestCandidates = 16;
inline constexpr double kDefaultMargin = 0.05;
absl::StatusOr<std::optional<compiler::Config>> BestValidConfig(
    storage::TuningDb& db, const compiler::Workload& w, const compiler::Target& target,
    int* skipped = nullptr, const storage::RecordScope& scope = {});

// Up to `k` usable configs of `w` other than the default, the most
// promising first by what the log says (the confirmed ones by their median,
// as BestValidConfig ranks them, then the others by their fastest record),
// except that the fastest of each other algorithm (the values of the
// template's gating knobs) within kAlgorithmSpan of the fastest follows the
// fastest: the options a job tries inside the model
// (tracker/end_to_end.h), where BestValidConfig's margin over the default
// no longer decides. Looks at the kAlgorithmRecords fastest records.
inline constexpr double kAlgorithmSpan = 1.5;
inline constexpr int kAlgorithmRecords = 128;
absl::StatusOr<std::vector<compiler::Config>> TunedConfigs(storage::TuningDb& db,
                                                           const compiler::Workload& w,
                                                           const compiler::Target& target, int k,
                                                           const storage::RecordScope& scope = {});

// What the log says a config costs: its successful records (at most
// kMaxConfigRecords, the fastest), their fastest and median mean cost.
inline constexpr int kMaxConfigRecords = 64;
struct ConfigCost {
  int records = 0;  // 0: never ran successfully
  double fastest_s = 0;
  double median_s = 0;
};
absl::StatusOr<ConfigCost> CostOfConfig(storage::TuningDb& db, const std::string& workload_key,
                                        const std::string& target, const std::string& canonical,
                                        const storage::RecordScope& scope = {});

// Adds one record's outcome to a history (what LoadTaskHistory does per record).
void AddToHistory(const storage::RecordRow& record, TaskHistory& history);

// The newest records of other workloads of the same operator by
// `compiler_version`, one ranking group per (workload, target) with their
// features and scores (the group's best cost over each cost; 0 for a
// failure); groups measured on another target weigh kOtherTargetWeight.
// At most `max_rows` rows; records whose config no longer lowers are skipped.
absl::StatusOr<TrainingSet> PriorFromLog(storage::TuningDb& db, const compiler::Workload& workload,
                                         const compiler::Target& target,
                                         const std::string& compiler_version,
                                         size_t max_rows = 2000,
                                         const storage::RecordScope& scope = {});

}  // namespace kiln::tuner
