#include "tuner/in_model.h"

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <map>
#include <optional>

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
  // One run of the board; the defaults (variant 0) must run.
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
  // A task's kernel time in a variant over its time in the defaults timed
  // beside it (nullopt where the profile lacks either).
  auto kernel_ratio = [&](size_t t, const VariantTiming& timing,
                          const VariantTiming& base) -> std::optional<double> {
    const std::string& key = tasks[t].workload_key;
    auto it = timing.kernel_costs_s.find(key);
    auto def = base.kernel_costs_s.find(key);
    if (it == timing.kernel_costs_s.end() || def == base.kernel_costs_s.end() || def->second <= 0) {
      return std::nullopt;
    }
    return it->second / def->second;
  };
  // The fastest variant of a run but the defaults, by its median (0: none ran).
  auto fastest_tuned = [&](const std::vector<ModelVariant>& variants,
                           const std::vector<VariantTiming>& timed) {
    size_t best = 0;
    for (size_t v = 1; v < variants.size(); ++v) {
      if (!Ok(timed[v]) || variants[v] == variants[0]) continue;
      if (best == 0 || Median(timed[v]) < Median(timed[best])) best = v;
    }
    return best;
  };
  const ModelVariant defaults(tasks.size(), 0);
  int k_max = 0;
  for (const InModelTask& t : tasks) k_max = std::max(k_max, last_option(t));

  // Round one: the k-th options of every task, in batches led by the
  // defaults. Per task and option: the sum and count of its kernel's time
  // over the default's beside it.
  std::vector<std::map<int, std::pair<double, int>>> option_ratios(tasks.size());
  const int per_batch = std::max(1, options.max_variants - 1);
  ModelVariant fastest = defaults;
  double fastest_ratio = 1;
  std::vector<ModelVariant> batch;
  std::vector<VariantTiming> batch_timed;
  int batches = 0;
  for (int lo = 1; batches == 0 || lo <= k_max; lo += per_batch) {
    batch = {defaults};
    for (int k = lo; k <= std::min(k_max, lo + per_batch - 1); ++k) {
      ModelVariant v;
      for (const InModelTask& t : tasks) v.push_back(std::min(k, last_option(t)));
      batch.push_back(std::move(v));
    }
    auto timed = run_round(batch);
    if (!timed.ok()) return timed.status();
    batch_timed = *std::move(timed);
    ++batches;
    const VariantTiming& base = batch_timed[0];
    for (size_t v = 1; v < batch.size(); ++v) {
      const VariantTiming& timing = batch_timed[v];
      if (!Ok(timing)) continue;
      if (const double r = Median(timing) / Median(base); r < fastest_ratio) {
        fastest_ratio = r;
        fastest = batch[v];
      }
      for (size_t t = 0; t < tasks.size(); ++t) {
        if (auto r = kernel_ratio(t, timing, base); r.has_value()) {
          auto& [sum, count] = option_ratios[t][batch[v][t]];
          sum += *r;
          ++count;
        }
      }
    }
  }

  // Each task's choice, by its own time inside the model.
  ModelVariant mix = defaults;
  for (size_t t = 0; t < tasks.size(); ++t) {
    double best = 1 - options.min_gain;
    for (const auto& [option, sum_count] : option_ratios[t]) {
      if (option == 0 || sum_count.second == 0) continue;
      if (const double r = sum_count.first / sum_count.second; r < best) {
        best = r;
        mix[t] = option;
      }
    }
  }

  // Round two: the mix beside the defaults and round one's fastest (a
  // variant of a single batch of round one has been timed already).
  auto distinct = [](std::vector<ModelVariant> in) {
    std::vector<ModelVariant> out;
    for (ModelVariant& v : in) {
      if (std::find(out.begin(), out.end(), v) == out.end()) out.push_back(std::move(v));
    }
    return out;
  };
  std::vector<ModelVariant> last = batch;
  std::vector<VariantTiming> last_timed = batch_timed;
  const bool timed_in_round_one =
      batches == 1 && std::find(batch.begin(), batch.end(), mix) != batch.end();
  if (std::vector<ModelVariant> round2 = distinct({defaults, mix, fastest});
      !timed_in_round_one && round2.size() > 1) {
    auto timed2 = run_round(round2);
    if (!timed2.ok()) return timed2.status();
    last = round2;
    last_timed = *std::move(timed2);
    // Round three: the mix less the tasks its neighbours made no faster.
    ModelVariant refined = mix;
    if (Ok(last_timed[1]) && last[1] == mix) {
      for (size_t t = 0; t < tasks.size(); ++t) {
        auto r = kernel_ratio(t, last_timed[1], last_timed[0]);
        if (mix[t] != 0 && r.has_value() && *r >= 1 - options.min_gain) refined[t] = 0;
      }
    }
    if (refined != mix && refined != defaults) {
      const size_t best2 = fastest_tuned(last, last_timed);
      std::vector<ModelVariant> round3 = distinct({defaults, refined, last[best2]});
      auto timed3 = run_round(round3);
      if (!timed3.ok()) return timed3.status();
      last = round3;
      last_timed = *std::move(timed3);
    }
  }

  InModelResult result;
  auto count_tasks = [&] {
    for (size_t t = 0; t < tasks.size(); ++t) {
      if (result.chosen[t] != 0) {
        ++result.tasks_tuned;
      } else if (tasks[t].options.size() > 1) {
        ++result.tasks_reverted;
      }
    }
  };
  // The fastest of the last round; the defaults' lead or not.
  const std::vector<double>& base = last_timed[0].costs_s;
  const size_t best_tuned = fastest_tuned(last, last_timed);
  if (best_tuned == 0) {
    result.chosen = last[0];
    result.untuned = result.tuned = StatsOf(base);
    result.note = tasks.empty() || k_max == 0
                      ? "no task has a tuned config: the defaults' module is returned"
                      : "no tuned variant ran on the board: the defaults' module is returned";
    count_tasks();
    return result;
  }
  // The two, paired round by round, run after run while undecided.
  // (A run's two variants may count different rounds: each run adds only
  // its pairs, so that round i of one stays beside round i of the other.)
  std::vector<double> base_pooled, tuned_pooled, ratios;
  auto add_pairs = [&](const std::vector<double>& b, const std::vector<double>& t) {
    const auto n = static_cast<std::ptrdiff_t>(std::min(b.size(), t.size()));
    base_pooled.insert(base_pooled.end(), b.begin(), b.begin() + n);
    tuned_pooled.insert(tuned_pooled.end(), t.begin(), t.begin() + n);
    ratios.clear();
    for (size_t i = 0; i < base_pooled.size(); ++i)
      ratios.push_back(base_pooled[i] / tuned_pooled[i]);
  };
  add_pairs(base, last_timed[best_tuned].costs_s);
  const std::vector<ModelVariant> pair = {last[0], last[best_tuned]};
  while (result.confirm_runs < options.max_confirm_runs && Quantile(ratios, 0.25) <= 1.0 &&
         Quantile(ratios, 0.75) >= 1.0) {
    // A run that fails (the board gone, the job's deadline) leaves the
    // decision to the rounds already timed.
    auto again = run_round(pair);
    if (!again.ok() || !Ok((*again)[1])) break;
    ++result.confirm_runs;
    add_pairs((*again)[0].costs_s, (*again)[1].costs_s);
  }
  result.untuned = StatsOf(base_pooled);
  result.tuned = StatsOf(tuned_pooled);
  const double q25 = Quantile(ratios, 0.25), q50 = Quantile(ratios, 0.5),
               q75 = Quantile(ratios, 0.75);
  result.beyond_noise = q25 > 1.0;
  const std::string rounds = result.confirm_runs == 0 ? std::string()
                                                      : StrCat(", ", ratios.size(), " rounds over ",
                                                               result.confirm_runs + 1, " runs");
  const std::string figures =
      StrCat("tuned ", FormatSeconds(result.tuned.median_s), ", defaults ",
             FormatSeconds(result.untuned.median_s), " (speed-up ", Ratio(q50),
             ", middle half of the rounds ", Ratio(q25), "-", Ratio(q75), rounds, ")");
  if (q50 > 1.0) {
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
  count_tasks();
  return result;
}

}  // namespace kiln::tuner
