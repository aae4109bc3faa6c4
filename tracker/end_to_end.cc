#include "tracker/end_to_end.h"

#include <condition_variable>
#include <memory>
#include <mutex>

#include "base/str.h"
#include "nlohmann/json.hpp"
#include "tuner/history.h"

namespace kiln::tracker {
namespace {

using nlohmann::json;

json StatsJson(const tuner::LatencyStats& s) {
  return {{"median_s", s.median_s}, {"p25_s", s.p25_s}, {"p75_s", s.p75_s}, {"rounds", s.rounds}};
}

bool StatsFrom(const json& j, tuner::LatencyStats* s) {
  if (!j.is_object()) return false;
  for (const char* k : {"median_s", "p25_s", "p75_s"}) {
    if (!j.contains(k) || !j[k].is_number()) return false;
  }
  if (!j.contains("rounds") || !j["rounds"].is_number_integer()) return false;
  s->median_s = j["median_s"].get<double>();
  s->p25_s = j["p25_s"].get<double>();
  s->p75_s = j["p75_s"].get<double>();
  s->rounds = j["rounds"].get<int>();
  return true;
}

}  // namespace

std::string EndToEndToJson(const EndToEndReport& r) {
  json curve = json::array();
  for (const EndToEndPoint& p : r.curve) {
    curve.push_back(
        {{"trials", p.trials}, {"untuned", StatsJson(p.untuned)}, {"tuned", StatsJson(p.tuned)}});
  }
  json j = {{"curve", curve}, {"decided", r.decided}, {"note", r.note}, {"threads", r.threads}};
  if (r.decided) {
    j["untuned"] = StatsJson(r.untuned);
    j["tuned"] = StatsJson(r.tuned);
    j["returned_tuned"] = r.returned_tuned;
    j["beyond_noise"] = r.beyond_noise;
    j["tasks_tuned"] = r.tasks_tuned;
    j["tasks_reverted"] = r.tasks_reverted;
    j["choices"] = r.choices;
  }
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

absl::StatusOr<EndToEndReport> EndToEndFromJson(const std::string& text) {
  EndToEndReport r;
  if (text.empty()) return r;
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  auto bad = [] { return absl::DataLossError("job end_to_end: not what kiln writes"); };
  if (j.is_discarded() || !j.is_object() || !j.contains("curve") || !j["curve"].is_array()) {
    return bad();
  }
  for (const json& p : j["curve"]) {
    EndToEndPoint point;
    if (!p.is_object() || !p.contains("trials") || !p["trials"].is_number_integer() ||
        !StatsFrom(p.value("untuned", json()), &point.untuned) ||
        !StatsFrom(p.value("tuned", json()), &point.tuned)) {
      return bad();
    }
    point.trials = p["trials"].get<int32_t>();
    r.curve.push_back(point);
  }
  if (!j.value("note", json()).is_string() || !j.value("decided", json()).is_boolean() ||
      !j.value("threads", json()).is_number_integer()) {
    return bad();
  }
  r.note = j["note"].get<std::string>();
  r.decided = j["decided"].get<bool>();
  r.threads = j["threads"].get<int32_t>();
  if (!r.decided) return r;
  if (!StatsFrom(j.value("untuned", json()), &r.untuned) ||
      !StatsFrom(j.value("tuned", json()), &r.tuned) ||
      !j.value("returned_tuned", json()).is_boolean() ||
      !j.value("beyond_noise", json()).is_boolean() ||
      !j.value("tasks_tuned", json()).is_number_integer() ||
      !j.value("tasks_reverted", json()).is_number_integer() ||
      !j.value("choices", json()).is_object()) {
    return bad();
  }
  r.returned_tuned = j["returned_tuned"].get<bool>();
  r.beyond_noise = j["beyond_noise"].get<bool>();
  r.tasks_tuned = j["tasks_tuned"].get<int32_t>();
  r.tasks_reverted = j["tasks_reverted"].get<int32_t>();
  for (const auto& [key, config] : j["choices"].items()) {
    if (!config.is_string()) return bad();
    r.choices[key] = config.get<std::string>();
  }
  return r;
}

absl::StatusOr<ModelChoices> ChoicesOf(const EndToEndReport& report) {
  ModelChoices out;
  if (!report.decided) return out;
  for (const auto& [key, canonical] : report.choices) {
    if (canonical.empty()) {
      out[key] = std::nullopt;
      continue;
    }
    auto config = compiler::ParseConfig(canonical);
    if (!config.ok()) {
      return absl::DataLossError(
          StrCat("job end_to_end: the config chosen for ", key, ": ", config.status().message()));
    }
    out[key] = *std::move(config);
  }
  return out;
}

absl::StatusOr<std::vector<tuner::InModelTask>> InModelTasks(storage::TuningDb& db,
                                                             const compiler::Model& model,
                                                             const compiler::Target& target, int k,
                                                             const storage::RecordScope& scope) {
  std::vector<tuner::InModelTask> tasks;
  for (const compiler::Task& t : model.Tasks()) {
    tuner::InModelTask task;
    task.workload_key = t.workload.Key();
    task.options.push_back(std::nullopt);
    auto tuned = tuner::TunedConfigs(db, t.workload, target, k, scope);
    if (!tuned.ok()) return tuned.status();
    for (compiler::Config& c : *tuned) task.options.push_back(std::move(c));
    tasks.push_back(std::move(task));
  }
  return tasks;
}

void RecordDecision(const tuner::InModelResult& result,
                    const std::vector<tuner::InModelTask>& tasks, int32_t trials,
                    EndToEndReport* report) {
  report->decided = true;
  report->untuned = result.untuned;
  report->tuned = result.tuned;
  report->returned_tuned = result.returned_tuned;
  report->beyond_noise = result.beyond_noise;
  report->tasks_tuned = result.tasks_tuned;
  report->tasks_reverted = result.tasks_reverted;
  report->note = result.note;
  report->curve.push_back({trials, result.untuned, result.tuned});
  for (size_t t = 0; t < tasks.size(); ++t) {
    const auto& option = tasks[t].options[static_cast<size_t>(result.chosen[t])];
    report->choices[tasks[t].workload_key] =
        option.has_value() ? compiler::CanonicalConfig(*option) : "";
  }
}

absl::StatusOr<ModelWork> ModelWorkOf(const storage::ArtifactStore& store,
                                      const std::string& model_sha256,
                                      const std::map<std::string, std::string>& external_data,
                                      const compiler::ImportOptions& import) {
  ModelWork work;
  auto add = [&](const std::string& sha, const std::string& location) -> absl::Status {
    auto path = store.LocalPath(sha);
    if (!path.ok()) return path.status();
    auto size = store.SizeOf(sha);
    if (!size.ok()) return size.status();
    work.files.push_back({sha, location, *path, *size});
    return absl::OkStatus();
  };
  if (absl::Status s = add(model_sha256, ""); !s.ok()) return s;
  for (const auto& [location, sha] : external_data) {
    if (absl::Status s = add(sha, location); !s.ok()) return s;
  }
  work.input_shapes = import.input_shapes;
  work.precision = import.precision;
  return work;
}

tuner::VariantRunner FarmVariantRunner(const std::vector<tuner::InModelTask>* tasks,
                                       FarmRunnerOptions o) {
  return [tasks, o](const std::vector<tuner::ModelVariant>& variants)
             -> absl::StatusOr<std::vector<tuner::VariantTiming>> {
    MeasureWork work = o.job;
    work.model = o.model;
    work.workload_key = "model";
    work.workload_op = "model";
    work.timing.repeat = o.rounds;
    work.timing.number = 0;
    work.timing.min_repeat_ms = o.min_block_ms;
    work.timing.timeout_ms = static_cast<int32_t>(o.timeout_ms);
    work.timing.flush_cache = false;
    work.timing.stop_above_s = 0;
    work.candidates.clear();
    for (size_t v = 0; v < variants.size(); ++v) {
      MeasureCandidate c;
      c.candidate_index = static_cast<int64_t>(v);
      for (size_t t = 0; t < tasks->size() && t < variants[v].size(); ++t) {
        const auto& option = (*tasks)[t].options.at(static_cast<size_t>(variants[v][t]));
        if (option.has_value()) c.task_configs[(*tasks)[t].workload_key] = *option;
      }
      work.candidates.push_back(std::move(c));
    }
    struct State {
      std::mutex mu;
      std::condition_variable cv;
      std::optional<std::vector<MeasureOutcome>> results;
    };
    auto state = std::make_shared<State>();
    o.dispatcher->Submit(std::move(work),
                         [state](const MeasureWork&, std::vector<MeasureOutcome> results) {
                           std::lock_guard<std::mutex> lock(state->mu);
                           state->results = std::move(results);
                           state->cv.notify_all();
                         });
    const int64_t start_ms = o.clock->NowMs();
    int64_t agent_seen_ms = start_ms;
    std::unique_lock<std::mutex> lock(state->mu);
    while (!state->results.has_value()) {
      lock.unlock();
      absl::Status stop;
      if (o.stop && o.stop()) {
        stop = absl::CancelledError("the job stopped");
      } else if (o.deadline_unix_ms > 0 && o.clock->NowMs() > o.deadline_unix_ms) {
        stop = absl::DeadlineExceededError("the job's deadline passed");
      } else if (o.agent_here && !o.agent_here() &&
                 o.clock->NowMs() - agent_seen_ms > o.no_agent_ms) {
        stop = absl::UnavailableError(
            StrCat("no agent of key '", o.job.device_key, "' is connected to this tracker (",
                   "a whole model is measured by this tracker's own agents)"));
      } else if (o.clock->NowMs() - start_ms > o.max_wait_ms) {
        stop = absl::UnavailableError(StrCat("no agent of key '", o.job.device_key,
                                             "' measured the model within ", o.max_wait_ms / 1000,
                                             " s"));
      }
      if (!stop.ok()) {
        o.dispatcher->CancelJob(o.job.job_id);
        return stop;
      }
      if (o.agent_here && o.agent_here()) agent_seen_ms = o.clock->NowMs();
      lock.lock();
      state->cv.wait_for(lock, std::chrono::milliseconds(200));
    }
    std::vector<tuner::VariantTiming> out(variants.size());
    for (const MeasureOutcome& r : *state->results) {
      if (r.candidate_index < 0 || r.candidate_index >= static_cast<int64_t>(out.size())) continue;
      tuner::VariantTiming& t = out[static_cast<size_t>(r.candidate_index)];
      if (r.error_kind == storage::ErrorKind::kNone) {
        t.costs_s = r.costs_s;
        t.kernel_costs_s = r.kernel_costs_s;
      } else {
        t.error = StrCat(storage::ErrorKindName(r.error_kind), ": ", r.error_message);
      }
    }
    for (tuner::VariantTiming& t : out) {
      if (t.costs_s.empty() && t.error.empty()) t.error = "no result from the agent";
    }
    return out;
  };
}

}  // namespace kiln::tracker
