#include "tracker/job_options.h"

#include <type_traits>

#include "base/str.h"
#include "nlohmann/json.hpp"

namespace kiln::tracker {

TimingOptions WithDefaults(const TimingOptions& t, const TimingOptions& d) {
  TimingOptions out = t;
  if (out.number <= 0) out.number = d.number;
  if (out.repeat <= 0) out.repeat = d.repeat;
  if (out.min_repeat_ms <= 0) out.min_repeat_ms = d.min_repeat_ms;
  if (out.cooldown_ms <= 0) out.cooldown_ms = d.cooldown_ms;
  if (out.timeout_ms <= 0) out.timeout_ms = d.timeout_ms;
  return out;
}

std::string OptionsToJson(const StoredOptions& o) {
  const TimingOptions& t = o.timing;
  nlohmann::json j = {{"number", t.number},
                      {"repeat", t.repeat},
                      {"min_repeat_ms", t.min_repeat_ms},
                      {"cooldown_ms", t.cooldown_ms},
                      {"flush_cache", t.flush_cache},
                      {"timeout_ms", t.timeout_ms},
                      {"strategy", NameOf(o.strategy)}};
  if (o.budget_s > 0) j["budget_s"] = o.budget_s;
  if (o.early_stopping > 0) j["early_stopping"] = o.early_stopping;
  if (o.deadline_unix_ms > 0) j["deadline_unix_ms"] = o.deadline_unix_ms;
  if (o.priority != 0) j["priority"] = o.priority;
  if (t.threads > 0) j["threads"] = t.threads;
  if (t.model_bytes > 0) j["model_bytes"] = t.model_bytes;
  if (o.skip_end_to_end) j["skip_end_to_end"] = true;
  if (o.precision != compiler::Precision::kFloat32) {
    j["precision"] = compiler::PrecisionName(o.precision);
  }
  if (!o.input_shapes.empty()) j["input_shapes"] = o.input_shapes;
  if (!o.external_data.empty()) j["external_data"] = o.external_data;
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

absl::StatusOr<StoredOptions> OptionsFromJson(const std::string& json,
                                              const TimingOptions& defaults) {
  StoredOptions o;
  o.timing = defaults;
  if (json.empty()) return o;
  const nlohmann::json doc = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) {
    return absl::DataLossError("job options: not a JSON object");
  }
  // Fields that are absent (jobs stored by older versions) keep their
  // defaults; one of the wrong type is damage.
  absl::Status bad;
  auto get = [&](const char* key, auto* out) {
    auto it = doc.find(key);
    if (it == doc.end()) return;
    using T = std::remove_pointer_t<decltype(out)>;
    const bool ok = std::is_same_v<T, bool>          ? it->is_boolean()
                    : std::is_same_v<T, std::string> ? it->is_string()
                    : std::is_floating_point_v<T>    ? it->is_number()
                                                     : it->is_number_integer();
    if (!ok) {
      bad = absl::DataLossError(StrCat("job options: \"", key, "\" has the wrong type"));
      return;
    }
    *out = it->get<T>();
  };
  get("number", &o.timing.number);
  get("repeat", &o.timing.repeat);
  get("min_repeat_ms", &o.timing.min_repeat_ms);
  get("cooldown_ms", &o.timing.cooldown_ms);
  get("timeout_ms", &o.timing.timeout_ms);
  get("flush_cache", &o.timing.flush_cache);
  get("model_bytes", &o.timing.model_bytes);
  // Jobs stored before strategies existed were tuned at random.
  std::string strategy = "random";
  get("strategy", &strategy);
  get("budget_s", &o.budget_s);
  get("early_stopping", &o.early_stopping);
  get("deadline_unix_ms", &o.deadline_unix_ms);
  get("priority", &o.priority);
  get("threads", &o.timing.threads);
  get("skip_end_to_end", &o.skip_end_to_end);
  std::string precision = "fp32";
  get("precision", &precision);
  if (!bad.ok()) return bad;
  absl::StatusOr<compiler::Precision> p = compiler::ParsePrecision(precision);
  if (!p.ok()) return absl::DataLossError(StrCat("job options: ", p.status().message()));
  o.precision = *p;
  absl::StatusOr<tuner::SearchKind> search = tuner::ParseSearch(strategy);
  if (!search.ok()) return absl::DataLossError(StrCat("job options: ", search.status().message()));
  o.strategy = *search;
  if (auto it = doc.find("input_shapes"); it != doc.end()) {
    if (!it->is_object()) return absl::DataLossError("job options: bad input_shapes");
    for (const auto& [name, dims] : it->items()) {
      if (!dims.is_array()) return absl::DataLossError("job options: bad input_shapes");
      for (const auto& d : dims) {
        if (!d.is_number_integer()) {
          return absl::DataLossError(StrCat("job options: bad dimension of input '", name, "'"));
        }
        o.input_shapes[name].push_back(d.get<int64_t>());
      }
    }
  }
  if (auto it = doc.find("external_data"); it != doc.end()) {
    if (!it->is_object()) return absl::DataLossError("job options: bad external_data");
    for (const auto& [location, sha] : it->items()) {
      if (!sha.is_string()) return absl::DataLossError("job options: bad external_data");
      o.external_data[location] = sha.get<std::string>();
    }
  }
  return o;
}

compiler::ImportOptions ImportOptionsOf(const StoredOptions& o, const storage::ArtifactStore& store,
                                        const std::string& model_sha256, int64_t max_elements,
                                        const compiler::Target& target) {
  compiler::ImportOptions import;
  import.max_elements = max_elements;
  int64_t model_bytes = store.SizeOf(model_sha256).value_or(0);
  for (const auto& [location, sha] : o.external_data) model_bytes += store.SizeOf(sha).value_or(0);
  import.max_folded_bytes = compiler::FoldedBytesBudget(model_bytes);
  import.SetTarget(target);
  import.precision = o.precision;
  import.input_shapes = o.input_shapes;
  for (const auto& [location, sha] : o.external_data) {
    // Downloaded first from an object store (a missing file fails the import).
    auto path = store.LocalPath(sha);
    import.external_files[location] = path.ok() ? *path : store.PathOf(sha);
  }
  return import;
}

}  // namespace kiln::tracker
