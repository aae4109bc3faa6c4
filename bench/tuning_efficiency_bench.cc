// Tuning efficiency of kiln's search strategies against random search, on the
// MatMul and conv2d shapes of bench/shapes.h (issue 7):
//
//   For each shape, random search with --random-trials measured configs is
//   the reference. It and each strategy (ga, xgb, and xgb warm-started from
//   the records of the shapes of the same operator before it in the run:
//   "xgb+tl") run in lockstep, a batch of 8 each in turn, each to the same
//   number of trials, so that a drift of the machine's speed hits all of
//   them alike. Then random's three best configs are re-measured twice more
//   (the median of three is their cost), every trial's cost becomes its
//   kernel's (the median of every measurement of configs that build the same
//   loops: KernelCosts), random's best defines the goal (95% of its
//   throughput), and the table prints the trials each needed, read off its
//   curve, and random's over theirs (higher is better; target: xgb >= 4,
//   xgb+tl >= 8 in geometric mean). A lucky measurement would otherwise set a
//   goal that only another lucky draw reaches. Random's figure is its expected
//   number of trials to the goal, (N+1)/(k+1) when k of its N configs reach
//   it: the trials one run needed are mostly luck (both are printed).
//
//   Then the cost model's Spearman rank correlation on held-out records (a
//   model trained on 70% of each shape's random records, ranked on the rest;
//   target >= 0.7), and the time to rank 10,000 random candidates, feature
//   extraction included (target < 1 s).
//
// Candidates are measured in-process by the tuner's LocalMeasurer
// (compiler::Measure: build, verify, time, what the agent runs in its
// sandbox), with the tracker's early stop (3x the shape's best). Every
// measurement is appended to --cache (a text file:
// shape, config, cost), so a rerun or another strategy reuses it: a config
// is measured once per run, whichever strategy proposes it first.
//
//   build/bench/tuning_efficiency_bench [--only SUBSTR,...] [--random-trials N]
//       [--strategy-trials M] [--strategies NAME,...] [--cache FILE] [--seed S]
//       [--repeats R] [--model-only] [--nchw]
//
// --repeats runs each strategy with R seeds (the geometric mean of their
// trials is its figure). --strategy-trials stops the strategies at M trials
// (default: N; one that has not reached the goal by then counts as N): they
// still run interleaved with random search, a batch of whichever has done
// the smallest share of its trials, so all are measured over the same
// minutes. A strategy needs N/4 trials or fewer to meet the xgb target on a
// shape, so M = N/4 costs nothing there and saves most of the run's time.
// --strategies picks among ga, xgb, xgb+tl (default: all three).
//
// Convolutions run in the channel-blocked layouts of a model (--nchw: NCHW
// in and out); the cache file's shape names say which.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "base/str.h"
#include "bench/shapes.h"
#include "compiler/kernel.h"
#include "compiler/target.h"
#include "tuner/cost_model.h"
#include "tuner/feature_cache.h"
#include "tuner/measurer.h"
#include "tuner/search.h"

namespace {

using Clock = std::chrono::steady_clock;
using kiln::compiler::Config;
using kiln::tuner::TrainingSet;

constexpr double kInf = std::numeric_limits<double>::infinity();

// Convolutions are tuned in the channel-blocked layouts a model's
// convolutions run in (compiler/graph/passes.h PlanLayouts), unless --nchw.
bool g_nchw = false;
kiln::compiler::Workload Workload(const kiln::bench::Shape& s) {
  return kiln::bench::KilnWorkload(s, /*blocked=*/!g_nchw);
}
// The shape's name in the cache file.
std::string Key(const kiln::bench::Shape& s) { return g_nchw ? s.name + " (nchw)" : s.name; }

// Measured costs of (shape, config), persisted in the cache file.
class Oracle {
 public:
  Oracle(std::string path, kiln::compiler::Target target)
      : path_(std::move(path)), measurer_(target, Policy()) {
    std::ifstream in(path_);
    std::string line;
    while (std::getline(in, line)) {
      std::istringstream s(line);
      std::string shape, config;
      double cost = 0;
      std::string mark;
      if (std::getline(s, shape, '\t') && std::getline(s, config, '\t') && (s >> cost)) {
        costs_[shape][config] = cost;
        if ((s >> mark) && mark == "confirmed") confirmed_[shape].insert(config);
      }
    }
  }
  // Mean cost in seconds; +inf for a candidate that failed.
  double Cost(const kiln::bench::Shape& shape, const Config& config) {
    std::string canonical = kiln::compiler::CanonicalConfig(config);
    auto& known = costs_[Key(shape)];
    if (auto it = known.find(canonical); it != known.end()) return it->second;
    // The tracker's early stop: a candidate 3x slower than the shape's best
    // so far is timed once (its cost is then one run's).
    double& best = best_[Key(shape)];
    const double cost = Measure(shape, config, best > 0 ? 3 * best : 0);
    known[canonical] = cost;
    if (std::isfinite(cost) && (best == 0 || cost < best)) best = cost;
    std::ofstream(path_, std::ios::app) << Key(shape) << '\t' << canonical << '\t' << cost << '\n';
    ++measured_;
    return cost;
  }
  // The cost of a measured config, re-measured twice more (without the early
  // stop): the median of the three. One lucky measurement of the best config
  // would otherwise set a goal no other config reaches.
  double Confirm(const kiln::bench::Shape& shape, const Config& config) {
    std::string canonical = kiln::compiler::CanonicalConfig(config);
    double first = Cost(shape, config);
    if (!std::isfinite(first) || confirmed_[Key(shape)].count(canonical)) return first;
    std::vector<double> costs = {first, Measure(shape, config, 0), Measure(shape, config, 0)};
    if (!std::isfinite(costs[1]) || !std::isfinite(costs[2])) return first;
    std::sort(costs.begin(), costs.end());
    costs_[Key(shape)][canonical] = costs[1];
    confirmed_[Key(shape)].insert(canonical);
    std::ofstream(path_, std::ios::app)
        << Key(shape) << '\t' << canonical << '\t' << costs[1] << "\tconfirmed\n";
    return costs[1];
  }
  const std::map<std::string, double>& Known(const kiln::bench::Shape& shape) {
    return costs_[Key(shape)];
  }
  int measured() const { return measured_; }

 private:
  // One measurement's mean cost in seconds (+inf for a failure), timed once
  // past `stop_above_s` (0: no early stop).
  double Measure(const kiln::bench::Shape& shape, const Config& config, double stop_above_s) {
    measurer_.Submit(kiln::tuner::MeasureBatch{Workload(shape), {config}, stop_above_s});
    auto measured = measurer_.WaitAny();
    if (!measured.ok() || measured->second.size() != 1) return kInf;
    const kiln::tuner::MeasureResult& r = measured->second[0];
    if (r.error_kind != kiln::storage::ErrorKind::kNone || r.costs_s.empty()) return kInf;
    double cost = 0;
    for (double c : r.costs_s) cost += c;
    return cost / static_cast<double>(r.costs_s.size());
  }
  static kiln::compiler::MeasurePolicy Policy() {
    kiln::compiler::MeasurePolicy p;
    p.repeat = 3;
    p.min_repeat_ms = 5;
    return p;
  }
  std::string path_;
  kiln::tuner::LocalMeasurer measurer_;
  std::map<std::string, std::map<std::string, double>> costs_;
  std::map<std::string, double> best_;                      // per shape, of this run's measurements
  std::map<std::string, std::set<std::string>> confirmed_;  // per shape: Confirm()ed configs
  int measured_ = 0;
};

struct Run {
  std::vector<Config> configs;  // each valid trial's
  std::vector<double> costs;    // of each valid trial
  // Trials until one reaches `goal` (-1: none did).
  int TrialsTo(double goal) const {
    for (size_t i = 0; i < costs.size(); ++i) {
      if (costs[i] <= goal) return static_cast<int>(i + 1);
    }
    return -1;
  }
  double Best() const {
    return costs.empty() ? kInf : *std::min_element(costs.begin(), costs.end());
  }
};

// A strategy's run on one shape, a batch at a time (8 configs, as the
// tracker sends them), up to `trials` valid configs or until its space runs
// out.
struct Tuning {
  std::string name;
  std::unique_ptr<kiln::tuner::SearchStrategy> search;
  int trials;  // to run
  Run run;
  std::set<std::string> measured;
  int empty = 0;
  bool done = false;

  // Share of its trials done.
  double Progress() const { return static_cast<double>(run.costs.size()) / trials; }
  void Step(const kiln::bench::Shape& shape, Oracle& oracle, const kiln::compiler::Target& target) {
    auto batch = search->Propose(8, measured);
    if (batch.empty() && ++empty > 4) done = true;
    std::vector<std::pair<Config, double>> results;
    for (const auto& c : batch) {
      measured.insert(kiln::compiler::CanonicalConfig(c));
      if (!kiln::compiler::ValidateConfig(Workload(shape), target, c).ok()) continue;
      double cost = oracle.Cost(shape, c);
      results.push_back({c, cost});
      run.configs.push_back(c);
      run.costs.push_back(cost);
      if (static_cast<int>(run.costs.size()) >= trials) break;
    }
    search->Update(results);
    if (static_cast<int>(run.costs.size()) >= trials) done = true;
  }
  // Each trial's cost replaced by its kernel's (KernelCosts).
  void Refresh(const std::map<std::string, double>& kernel_cost) {
    for (size_t i = 0; i < run.costs.size(); ++i) {
      run.costs[i] = kernel_cost.at(kiln::compiler::CanonicalConfig(run.configs[i]));
    }
  }
};

// The cost of every measured config of `shape` as its kernel's: configs
// that differ only in knobs the template does not read build the same loops
// (tuner/feature_cache.h), and a kernel's cost is the median of every
// measurement of it. Random search measures the few kernels of a small space
// (a depthwise layer has about 20) again and again under other names, and the
// luckiest of those measurements would set a goal that only the noise of
// another draw of the same kernel reaches: a goal about the timer, not the
// search.
std::map<std::string, double> KernelCosts(const kiln::bench::Shape& shape, Oracle& oracle,
                                          const kiln::compiler::Target& target) {
  kiln::tuner::FeatureCache cache(Workload(shape), target, 1 << 20);
  std::map<std::string, uint64_t> kernel_of;
  std::map<uint64_t, std::vector<double>> samples;
  for (const auto& [canonical, cost] : oracle.Known(shape)) {
    auto config = kiln::compiler::ParseConfig(canonical);
    if (!config.ok()) continue;
    const auto& f = cache.Get(*config);
    if (!f.has_value()) continue;
    kernel_of[canonical] = f->kernel_hash;
    samples[f->kernel_hash].push_back(cost);
  }
  std::map<uint64_t, double> median;
  for (auto& [kernel, costs] : samples) {
    std::sort(costs.begin(), costs.end());  // failures (+inf) last
    median[kernel] = costs[costs.size() / 2];
  }
  std::map<std::string, double> out;
  for (const auto& [canonical, cost] : oracle.Known(shape)) {
    auto it = kernel_of.find(canonical);
    out[canonical] = it == kernel_of.end() ? cost : median[it->second];
  }
  return out;
}

// The successful records of `shape` as one ranking group (score: the best
// cost over the cost), with at most `limit` rows (0: all), from `skip` on.
void AddRecords(const kiln::bench::Shape& shape, Oracle& oracle, kiln::tuner::FeatureCache& cache,
                TrainingSet& set, std::vector<double>* costs = nullptr, size_t skip = 0,
                size_t limit = 0) {
  const auto& known = oracle.Known(shape);
  double best = kInf;
  for (const auto& [c, cost] : known) best = std::min(best, cost);
  std::vector<std::vector<float>> rows;
  std::vector<float> scores;
  size_t i = 0;
  for (const auto& [canonical, cost] : known) {
    if (i++ < skip || (limit && rows.size() >= limit)) continue;
    auto config = kiln::compiler::ParseConfig(canonical);
    if (!config.ok()) continue;
    const auto& f = cache.Get(*config);
    if (!f.has_value()) continue;
    rows.push_back(f->features);
    scores.push_back(std::isfinite(cost) ? static_cast<float>(best / cost) : 0.0f);
    if (costs) costs->push_back(cost);
  }
  set.AddGroup(std::move(rows), std::move(scores));
}

std::string Cell(int trials, int cap) {
  return trials < 0 ? kiln::StrCat(">", cap) : std::to_string(trials);
}

}  // namespace

int main(int argc, char** argv) {
  std::string only, cache_path = "tuning_efficiency.cache";
  int random_trials = 1000, strategy_trials = 0;
  std::set<std::string> strategies = {"ga", "xgb", "xgb+tl"};
  uint64_t seed = 1;
  int repeats = 1;
  bool model_only = false;  // skip the strategies: only the cost model's figures
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    int64_t v = 0;
    if (a == "--only" && i + 1 < argc) {
      only = argv[++i];
    } else if (a == "--random-trials" && i + 1 < argc && kiln::ParseInt64(argv[++i], &v) && v > 0) {
      random_trials = static_cast<int>(v);
    } else if (a == "--strategy-trials" && i + 1 < argc && kiln::ParseInt64(argv[++i], &v) &&
               v > 0) {
      strategy_trials = static_cast<int>(v);
    } else if (a == "--strategies" && i + 1 < argc) {
      strategies.clear();
      for (const auto& name : kiln::StrSplit(argv[++i], ',')) strategies.insert(std::string(name));
    } else if (a == "--cache" && i + 1 < argc) {
      cache_path = argv[++i];
    } else if (a == "--repeats" && i + 1 < argc && kiln::ParseInt64(argv[++i], &v) && v > 0) {
      repeats = static_cast<int>(v);
    } else if (a == "--nchw") {
      g_nchw = true;
    } else if (a == "--model-only") {
      model_only = true;
    } else if (a == "--seed" && i + 1 < argc && kiln::ParseInt64(argv[++i], &v)) {
      seed = static_cast<uint64_t>(v);
    } else {
      std::fprintf(stderr,
                   "usage: tuning_efficiency_bench [--only SUBSTR,...] [--random-trials N] "
                   "[--strategy-trials M] [--strategies NAME,...] [--cache FILE] [--seed S] "
                   "[--repeats R] [--model-only] [--nchw]\n");
      return 2;
    }
  }
  for (const auto& name : strategies) {
    if (name != "ga" && name != "xgb" && name != "xgb+tl") {
      std::fprintf(stderr, "--strategies: unknown strategy '%s' (ga, xgb, xgb+tl)\n", name.c_str());
      return 2;
    }
  }
  if (strategy_trials == 0 || strategy_trials > random_trials) strategy_trials = random_trials;
  const kiln::compiler::Target target = kiln::compiler::Target::Host();
  Oracle oracle(cache_path, target);
  std::vector<kiln::bench::Shape> shapes;
  // --only takes comma-separated substrings of shape names.
  std::vector<std::string> wanted;
  for (std::string rest = only; !rest.empty();) {
    size_t comma = rest.find(',');
    wanted.push_back(rest.substr(0, comma));
    rest = comma == std::string::npos ? "" : rest.substr(comma + 1);
  }
  for (const auto& s : kiln::bench::kShapes) {
    bool match = wanted.empty();
    for (const auto& w : wanted) match = match || s.name.find(w) != std::string::npos;
    if (match) shapes.push_back(s);
  }
  std::printf("tuning efficiency on %s (%s), random search with %d trials as the reference\n",
              target.Spec().c_str(), kiln::compiler::DescribeHostHardware().c_str(), random_trials);
  auto space_of = [&](const kiln::bench::Shape& s) {
    return kiln::tuner::ConfigSpace(*kiln::compiler::KnobsOf(Workload(s), target));
  };
  auto context = [&](const kiln::bench::Shape& s) {
    return kiln::tuner::SearchContext{Workload(s), target, seed, {}};
  };

  // Per shape, random search (the reference) and each strategy run in
  // lockstep, a batch of each in turn, every one to the same number of
  // trials: measured in the same minutes, a drift of the machine's speed
  // hits all of them alike. Then random's three best are confirmed, its best
  // sets the goal, and each run's trials to the goal are read off its curve.
  // Random's figure is its expected number of trials to the goal (drawing
  // without replacement from its measured configs, k of N at the goal:
  // (N+1)/(k+1)), since one run's figure is mostly luck (both are printed).
  // Transfer learning ("xgb+tl") draws on the records of the shapes of the
  // same operator before this one in the run.
  std::printf(
      "\ntrials to reach 95%% of random search's best throughput (random: in its run, and "
      "expected; each strategy, run for %d trials: geometric mean over %d seeds, one that never "
      "reaches it counting as %d)\n",
      strategy_trials, repeats, random_trials);
  std::printf("%-26s %10s %7s %9s %7s %7s %7s %11s %14s\n", "shape", "best ms", "random",
              "expected", "ga", "xgb", "xgb+tl", "random/xgb", "random/xgb+tl");
  double log_xgb = 0, log_tl = 0, log_ga = 0;
  int n = 0;
  auto t0 = Clock::now();
  for (const auto& s : shapes) {
    // The prior: the shapes of the same operator before this one in the run
    // (so that a rerun on the same cache replays the run exactly).
    TrainingSet prior;
    for (const auto& o : shapes) {
      if (o.name == s.name) break;
      if (o.conv != s.conv) continue;
      kiln::tuner::FeatureCache other(Workload(o), target);
      AddRecords(o, oracle, other, prior);
    }
    std::vector<Tuning> runs;
    runs.push_back(
        {"random",
         *kiln::tuner::MakeSearch(kiln::tuner::SearchKind::kRandom, space_of(s), context(s)),
         random_trials});
    for (int r = 0; r < repeats && !model_only; ++r) {
      for (const char* name : {"ga", "xgb", "xgb+tl"}) {
        if (!strategies.count(name)) continue;
        kiln::tuner::SearchContext c = context(s);
        // Not random search's seed: the strategies' first batch is random,
        // and with its seed it would replay random's first trials.
        c.seed = seed + 1000 + static_cast<uint64_t>(r);
        const bool tl = std::string(name) == "xgb+tl";
        if (tl) c.prior = prior;
        runs.push_back({name,
                        *kiln::tuner::MakeSearch(*kiln::tuner::ParseSearch(tl ? "xgb" : name),
                                                 space_of(s), std::move(c)),
                        strategy_trials});
      }
    }
    // A batch of the run with the smallest share of its trials done (in turn
    // when the shares are equal).
    for (;;) {
      Tuning* next = nullptr;
      for (Tuning& t : runs) {
        if (!t.done && (next == nullptr || t.Progress() < next->Progress())) next = &t;
      }
      if (next == nullptr) break;
      next->Step(s, oracle, target);
    }
    Run& r = runs[0].run;
    std::vector<size_t> order(r.costs.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return r.costs[a] < r.costs[b]; });
    for (size_t i = 0; i < std::min<size_t>(3, order.size()); ++i) {
      oracle.Confirm(s, r.configs[order[i]]);
    }
    const std::map<std::string, double> kernel_cost = KernelCosts(s, oracle, target);
    for (Tuning& t : runs) t.Refresh(kernel_cost);
    const double best = r.Best();
    const double g = best / 0.95;
    const double k = static_cast<double>(
        std::count_if(r.costs.begin(), r.costs.end(), [&](double c) { return c <= g; }));
    const double rn = (static_cast<double>(r.costs.size()) + 1) / (k + 1);
    std::fprintf(stderr, "%s: random best %.4f ms after %zu trials (%d measured so far, %.0f s)\n",
                 s.name.c_str(), best * 1e3, r.costs.size(), oracle.measured(),
                 std::chrono::duration<double>(Clock::now() - t0).count());
    if (!std::isfinite(g) || model_only) continue;
    // Trials a strategy needed, geometric mean over the seeds.
    // (NaN for a strategy not run.)
    auto needed = [&](const std::string& name) {
      if (!strategies.count(name)) return std::nan("");
      double log_sum = 0;
      for (const Tuning& t : runs) {
        if (t.name != name) continue;
        int trials = t.run.TrialsTo(g);
        log_sum += std::log(trials > 0 ? trials : random_trials);
      }
      return std::exp(log_sum / repeats);
    };
    const double ga_n = needed("ga"), xgb_n = needed("xgb"), tl_n = needed("xgb+tl");
    std::printf("%-26s %10.4f %7s %9.1f %7.1f %7.1f %7.1f %11.2f %14.2f\n", s.name.c_str(),
                best * 1e3, Cell(r.TrialsTo(g), random_trials).c_str(), rn, ga_n, xgb_n, tl_n,
                rn / xgb_n, rn / tl_n);
    std::fflush(stdout);
    log_ga += std::log(rn / ga_n);
    log_xgb += std::log(rn / xgb_n);
    log_tl += std::log(rn / tl_n);
    ++n;
  }
  if (n > 0) {
    std::printf(
        "\ngeometric mean of random's expected trials over the strategy's: ga %.2f, xgb %.2f "
        "(target >= 4), xgb+tl %.2f (target >= 8)\n",
        std::exp(log_ga / n), std::exp(log_xgb / n), std::exp(log_tl / n));
  }

  // The cost model's rank correlation on held-out records of each shape.
  std::printf("\n%-26s %8s %8s %10s\n", "shape", "train", "held out", "spearman");
  double rho_sum = 0;
  int rho_n = 0;
  for (const auto& s : shapes) {
    kiln::tuner::FeatureCache cache(Workload(s), target);
    size_t total = oracle.Known(s).size();
    size_t train = total * 7 / 10;
    if (total < 20) continue;
    TrainingSet set, held;
    std::vector<double> held_costs;
    AddRecords(s, oracle, cache, set, nullptr, 0, train);
    AddRecords(s, oracle, cache, held, &held_costs, train, 0);
    kiln::tuner::CostModel model;
    if (set.rows.empty() || held.rows.empty() || !model.Train(set).ok()) continue;
    auto pred = model.Predict(held.rows);
    if (!pred.ok()) continue;
    std::vector<double> truth, guess(pred->begin(), pred->end());
    for (double c : held_costs) truth.push_back(std::isfinite(c) ? 1.0 / c : 0.0);
    double rho = kiln::tuner::SpearmanCorrelation(truth, guess);
    std::printf("%-26s %8zu %8zu %10.3f\n", s.name.c_str(), set.rows.size(), held.rows.size(), rho);
    rho_sum += rho;
    ++rho_n;
  }
  if (rho_n > 0) std::printf("mean spearman %.3f (target >= 0.7)\n", rho_sum / rho_n);

  // Ranking 10,000 random candidates of the first conv shape (or the first
  // shape), features included.
  const kiln::bench::Shape* rank_shape = shapes.empty() ? nullptr : &shapes[0];
  for (const auto& s : shapes) {
    if (s.conv) {
      rank_shape = &s;
      break;
    }
  }
  if (rank_shape != nullptr) {
    kiln::tuner::FeatureCache cache(Workload(*rank_shape), target, 1 << 20);
    TrainingSet set;
    AddRecords(*rank_shape, oracle, cache, set);
    kiln::tuner::CostModel model;
    if (!set.rows.empty() && model.Train(set).ok()) {
      kiln::tuner::ConfigSpace space = space_of(*rank_shape);
      std::mt19937_64 rng(seed);
      std::vector<Config> configs;
      for (int i = 0; i < 10000; ++i) configs.push_back(space.Sample(rng));
      auto t = Clock::now();
      std::vector<std::vector<float>> rows;
      for (const auto* f : cache.GetMany(configs)) {
        if (f->has_value()) rows.push_back((*f)->features);
      }
      double features_s = std::chrono::duration<double>(Clock::now() - t).count();
      auto pred = model.Predict(rows);
      double total_s = std::chrono::duration<double>(Clock::now() - t).count();
      std::printf(
          "\nranking 10,000 random candidates of %s (%zu valid): %.3f s (features %.3f s, "
          "prediction %.3f s; target < 1 s)\n",
          rank_shape->name.c_str(), rows.size(), total_s, features_s, total_s - features_s);
      (void)pred;
    }
  }
  return 0;
}
