#include "tracker/job_options.h"

#include "deploy/str.h"
#include "storage/jsonl.h"

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
  storage::JsonWriter w;
  const TimingOptions& t = o.timing;
  w.BeginObject();
  w.Key("number").Int(t.number);
  w.Key("repeat").Int(t.repeat);
  w.Key("min_repeat_ms").Int(t.min_repeat_ms);
  w.Key("cooldown_ms").Int(t.cooldown_ms);
  w.Key("flush_cache").Bool(t.flush_cache);
  w.Key("timeout_ms").Int(t.timeout_ms);
  w.Key("strategy").String(o.strategy);
  if (o.budget_s > 0) w.Key("budget_s").Number(o.budget_s);
  if (o.early_stopping > 0) w.Key("early_stopping").Int(o.early_stopping);
  if (!o.input_shapes.empty()) {
    w.Key("input_shapes").BeginObject();
    for (const auto& [name, dims] : o.input_shapes) {
      w.Key(name).BeginArray();
      for (int64_t d : dims) w.Int(d);
      w.EndArray();
    }
    w.EndObject();
  }
  if (!o.external_data.empty()) {
    w.Key("external_data").BeginObject();
    for (const auto& [location, sha] : o.external_data) w.Key(location).String(sha);
    w.EndObject();
  }
  w.EndObject();
  return w.str();
}

absl::StatusOr<StoredOptions> OptionsFromJson(const std::string& json,
                                              const TimingOptions& defaults) {
  StoredOptions o;
  o.timing = defaults;
  if (json.empty()) return o;
  auto doc = storage::ParseJson(json);
  if (!doc.ok()) return doc.status();
  auto field = [&](const char* name, int32_t* out) {
    if (auto v = storage::JsonGetInt64(*doc, name); v.ok()) *out = static_cast<int32_t>(*v);
  };
  field("number", &o.timing.number);
  field("repeat", &o.timing.repeat);
  field("min_repeat_ms", &o.timing.min_repeat_ms);
  field("cooldown_ms", &o.timing.cooldown_ms);
  field("timeout_ms", &o.timing.timeout_ms);
  if (const auto* f = doc->Find("flush_cache"); f && f->kind == storage::JsonKind::kBool) {
    o.timing.flush_cache = f->boolean;
  }
  // Jobs stored before strategies existed were tuned at random.
  o.strategy = "random";
  if (const auto* s = doc->Find("strategy"); s && s->kind == storage::JsonKind::kString) {
    o.strategy = s->string;
  }
  if (auto v = storage::JsonGetNumber(*doc, "budget_s"); v.ok()) o.budget_s = *v;
  field("early_stopping", &o.early_stopping);
  if (const auto* shapes = doc->Find("input_shapes")) {
    for (const auto& [name, dims] : shapes->object) {
      std::vector<int64_t>& out = o.input_shapes[name];
      for (const auto& d : dims.array) {
        int64_t v = 0;
        if (!ParseInt64(d.number_text, &v)) {
          return absl::DataLossError(StrCat("job options: bad dimension of input '", name, "'"));
        }
        out.push_back(v);
      }
    }
  }
  if (const auto* ext = doc->Find("external_data")) {
    for (const auto& [location, sha] : ext->object) o.external_data[location] = sha.string;
  }
  return o;
}

compiler::ImportOptions ImportOptionsOf(const StoredOptions& o, const storage::ArtifactStore& store,
                                        int64_t max_elements) {
  compiler::ImportOptions import;
  import.max_elements = max_elements;
  import.input_shapes = o.input_shapes;
  for (const auto& [location, sha] : o.external_data) {
    import.external_files[location] = store.PathOf(sha);
  }
  return import;
}

}  // namespace kiln::tracker
