#include "tuner/in_model.h"

#include <algorithm>
#include <cstdio>
#include <set>

#include "base/str.h"

namespace kiln::tuner {
namespace {

double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(pos);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

std::string Ratio(double r) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3f", r);
  return buf;
}

bool Ok(const VariantTiming& t) { return t.error.empty() && !t.costs_s.empty(); }

double Median(const VariantTiming& t) { return Quantile(t.costs_s, 0.5); }

}  // namespace

LatencyStats StatsOf(std::vector<double> costs_s) {
  LatencyStats s;
  s.rounds = static_cast<int>(costs_s.size());
  s.median_s = Quantile(costs_s, 0.5);
  s.p25_s = Quantile(costs_s, 0.25);
  s.p75_s = Quantile(costs_s, 0.75);
  return s;
}

ModelVariant BestSoFar(const std::vector<InModelTask>& tasks) {
  ModelVariant v;
  for (const InModelTask& t : tasks) v.push_back(t.options.size() > 1 ? 1 : 0);
  return v;
}

absl::StatusOr<InModelResult> ChooseInModel(const std::vector<InModelTask>& tasks,
                                            const VariantRunner& run,
                                            const InModelOptions& options) {
  // A task's last option tried.
  auto last_option = [&](const InModelTask& t) {
    return std::min(options.max_options, static_cast<int>(t.options.size()) - 1);
  };
  // One round on the board; the defaults (variant 0) must run.
  auto run_round =
      [&](const std::vector<ModelVariant>& variants) -> absl::StatusOr<std::vector<VariantTiming>> {
    auto timed = run(variants);
    if (!timed.ok()) return timed.status();
    if (timed->size() != variants.size()) {
      return absl::InternalError("the board answered a different number of variants");
    }
    if (!Ok((*timed)[0])) {
      return absl::FailedPreconditionError(
          StrCat("the model with its default configs failed on the board: ", (*timed)[0].error));
    }
    return timed;
  };
  int k_max = 0;
  for (const InModelTask& t : tasks) k_max = std::max(k_max, last_option(t));
  // Round one: the defaults, then the k-th options of every task.
  std::vector<ModelVariant> round1;
  for (int k = 0; k <= k_max; ++k) {
    ModelVariant v;
    for (const InModelTask& t : tasks) v.push_back(std::min(k, last_option(t)));
    round1.push_back(std::move(v));
  }
  auto timed1 = run_round(round1);
  if (!timed1.ok()) return timed1.status();

  // Each task's choice, by its own time inside the model.
  InModelResult result;
  ModelVariant mix;
  for (size_t t = 0; t < tasks.size(); ++t) {
    const std::string& key = tasks[t].workload_key;
    std::map<int, std::pair<double, int>> per_option;  // option -> (sum, count)
    for (size_t v = 0; v < round1.size(); ++v) {
      const VariantTiming& timing = (*timed1)[v];
      if (!Ok(timing)) continue;
      auto it = timing.kernel_costs_s.find(key);
      if (it == timing.kernel_costs_s.end()) continue;
      auto& [sum, count] = per_option[round1[v][t]];
      sum += it->second;
      ++count;
    }
    int choice = 0;
    auto def = per_option.find(0);
    if (def != per_option.end() && def->second.second > 0) {
      const double default_s = def->second.first / def->second.second;
      double best_s = default_s * (1 - options.min_gain);
      for (const auto& [option, sum_count] : per_option) {
        if (option == 0 || sum_count.second == 0) continue;
        const double s = sum_count.first / sum_count.second;
        if (s < best_s) {
          best_s = s;
          choice = option;
        }
      }
    }
    if (tasks[t].options.size() > 1 && choice == 0) ++result.tasks_reverted;
    mix.push_back(choice);
  }

  // Round two: the mix beside the defaults and round one's fastest.
  std::vector<ModelVariant> last = round1;
  std::vector<VariantTiming> last_timed = *timed1;
  if (std::find(round1.begin(), round1.end(), mix) == round1.end()) {
    size_t fastest = 0;
    for (size_t v = 1; v < round1.size(); ++v) {
      if (Ok((*timed1)[v]) && Median((*timed1)[v]) < Median((*timed1)[fastest])) {
        fastest = v;
      }
    }
    last = {round1[0], mix};
    if (fastest != 0) last.push_back(round1[fastest]);
    auto timed2 = run_round(last);
    if (!timed2.ok()) return timed2.status();
    last_timed = *std::move(timed2);
  }

  // The fastest of the last round; the defaults' lead or not.
  const std::vector<double>& base = last_timed[0].costs_s;
  result.untuned = StatsOf(base);
  size_t best_tuned = 0;
  for (size_t v = 1; v < last.size(); ++v) {
    if (!Ok(last_timed[v]) || last[v] == last[0]) continue;
    if (best_tuned == 0 || Median(last_timed[v]) < Median(last_timed[best_tuned])) {
      best_tuned = v;
    }
  }
  if (best_tuned == 0) {
    result.chosen = last[0];
    result.tuned = result.untuned;
    result.note = tasks.empty() || k_max == 0
                      ? "no task has a tuned config: the defaults' module is returned"
                      : "no tuned variant ran on the board: the defaults' module is returned";
    return result;
  }
  const std::vector<double>& tuned = last_timed[best_tuned].costs_s;
  result.tuned = StatsOf(tuned);
  std::vector<double> ratios;
  for (size_t i = 0; i < std::min(base.size(), tuned.size()); ++i)
    ratios.push_back(base[i] / tuned[i]);
  const double q25 = Quantile(ratios, 0.25), q50 = Quantile(ratios, 0.5),
               q75 = Quantile(ratios, 0.75);
  result.beyond_noise = q25 > 1.0;
  const std::string figures =
      StrCat("tuned ", FormatSeconds(result.tuned.median_s), ", defaults ",
             FormatSeconds(result.untuned.median_s), " (speed-up ", Ratio(q50),
             ", middle half of the rounds ", Ratio(q25), "-", Ratio(q75), ")");
  if (result.tuned.median_s < result.untuned.median_s) {
    result.chosen = last[best_tuned];
    result.returned_tuned = true;
    result.note =
        result.beyond_noise
            ? StrCat("the tuned module is faster on the board: ", figures)
            : StrCat("the tuned module is not faster than the defaults beyond noise: ", figures,
                     "; the faster (tuned) module is returned");
  } else {
    result.chosen = last[0];
    result.note =
        StrCat("tuning did not pay on the board: ", figures, "; the defaults' module is returned");
  }
  for (size_t t = 0; t < tasks.size(); ++t) {
    if (result.chosen[t] != 0) ++result.tasks_tuned;
  }
  return result;
}

}  // namespace kiln::tuner
