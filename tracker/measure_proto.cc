#include "tracker/measure_proto.h"

#include <utility>

#include "base/str.h"
#include "tracker/rpc.h"
#include "tuner/measurer.h"

namespace kiln::tracker {

namespace pb = kiln::v1;

void FillMeasureBatch(const MeasureWork& w, pb::MeasureBatch* b) {
  b->set_batch_id(w.batch_id);
  b->mutable_target()->set_spec(w.target);
  pb::TimingPolicy* t = b->mutable_timing();
  t->set_number(w.timing.number);
  t->set_repeat(w.timing.repeat);
  t->set_min_repeat_ms(w.timing.min_repeat_ms);
  t->set_cooldown_ms(w.timing.cooldown_ms);
  t->set_flush_cache(w.timing.flush_cache);
  t->set_model_bytes(w.timing.model_bytes);
  t->set_timeout_ms(w.timing.timeout_ms);
  t->set_stop_above_s(w.timing.stop_above_s);
  t->set_threads(w.timing.threads);
  for (const auto& c : w.candidates) {
    pb::Candidate* pc = b->add_candidates();
    pc->set_candidate_id(StrCat(c.candidate_index));
    if (!w.model.has_value()) rpc::FillConfig(c.config, pc->mutable_config());
    for (const auto& [key, config] : c.task_configs) {
      pb::TaskConfig* tc = pc->add_task_configs();
      tc->set_workload_key(key);
      rpc::FillConfig(config, tc->mutable_config());
    }
  }
  if (!w.model.has_value()) {
    b->mutable_workload()->set_key(w.workload_key);
    b->mutable_workload()->set_op(w.workload_op);
    b->mutable_workload()->set_canonical(w.workload_canonical);
    b->mutable_workload()->set_flops(w.workload_flops);
    return;
  }
  pb::ModelSpec* spec = b->mutable_model();
  for (const ModelFile& f : w.model->files) {
    if (f.location.empty()) {
      spec->set_model_sha256(f.sha256);
    } else {
      pb::ExternalFile* e = spec->add_external_data();
      e->set_location(f.location);
      e->set_sha256(f.sha256);
    }
  }
  for (const auto& [name, dims] : w.model->input_shapes) {
    pb::ModelInputShape* in = spec->add_input_shapes();
    in->set_name(name);
    for (int64_t d : dims) in->add_dims(d);
  }
  if (w.model->precision != compiler::Precision::kFloat32) {
    spec->set_precision(compiler::PrecisionName(w.model->precision));
  }
}

absl::StatusOr<MeasureWork> WorkFromMeasureBatch(const pb::MeasureBatch& b) {
  if (b.has_model()) return absl::InvalidArgumentError("a whole-model batch is never relayed");
  MeasureWork w;
  w.batch_id = b.batch_id();
  w.workload_key = b.workload().key();
  w.workload_op = b.workload().op();
  w.workload_canonical = b.workload().canonical();
  w.workload_flops = b.workload().flops();
  w.target = b.target().spec();
  const pb::TimingPolicy& t = b.timing();
  w.timing.number = t.number();
  w.timing.repeat = t.repeat();
  w.timing.min_repeat_ms = t.min_repeat_ms();
  w.timing.cooldown_ms = t.cooldown_ms();
  w.timing.flush_cache = t.flush_cache();
  w.timing.model_bytes = t.model_bytes();
  w.timing.timeout_ms = t.timeout_ms();
  w.timing.stop_above_s = t.stop_above_s();
  w.timing.threads = t.threads();
  for (const pb::Candidate& c : b.candidates()) {
    auto config = compiler::ParseConfig(c.config().canonical());
    if (!config.ok()) {
      return absl::InvalidArgumentError(
          StrCat("candidate ", c.candidate_id(), ": ", std::string(config.status().message())));
    }
    int64_t index = 0;
    if (!ParseInt64(c.candidate_id(), &index) || index < 0) {
      return absl::InvalidArgumentError(
          StrCat("candidate id '", c.candidate_id(), "' is not a candidate's place in its batch"));
    }
    w.candidates.push_back({index, *std::move(config), {}});
  }
  return w;
}

double CostLimitOf(const MeasureWork& work) {
  return work.model.has_value() ? 0 : std::max<int64_t>(work.timing.timeout_ms, 0) / 1000.0;
}

MeasureOutcome OutcomeFromProto(const pb::MeasureResult& m, const std::string& agent_id,
                                const std::string& owner, double max_cost_s) {
  MeasureOutcome o;
  if (int64_t index = 0; ParseInt64(m.candidate_id(), &index) && index >= 0) {
    o.candidate_index = index;  // else -1: the result answers no candidate and is dropped
  }
  o.error_kind = rpc::ErrorKindFromProto(m.error_kind());
  o.error_message = m.error_message();
  o.costs_s.assign(m.costs_s().begin(), m.costs_s().end());
  o.build_s = m.build_s();
  o.cut_short = m.cut_short();
  o.agent_id = agent_id;  // who measured it and for whom: the receiver knows, not the message
  o.owner = owner;
  if (o.error_kind != storage::ErrorKind::kNone) {
    o.costs_s.clear();
    return o;
  }
  std::vector<double> kernel_costs;
  for (const pb::KernelCost& k : m.kernel_costs()) {
    o.kernel_costs_s[k.workload_key()] = k.cost_s();
    kernel_costs.push_back(k.cost_s());
  }
  absl::Status st = tuner::CheckCosts(o.costs_s, max_cost_s);
  if (st.ok() && !kernel_costs.empty()) st = tuner::CheckCosts(kernel_costs);
  if (st.ok() && o.costs_s.size() > static_cast<size_t>(kMaxCosts)) {
    st = absl::InvalidArgumentError(StrCat("more than ", kMaxCosts, " costs"));
  }
  if (st.ok() && o.kernel_costs_s.size() > kMaxKernelCosts) {
    st = absl::InvalidArgumentError(StrCat("more than ", kMaxKernelCosts, " kernel costs"));
  }
  if (!st.ok()) {
    o.error_kind = storage::ErrorKind::kInvalidCost;
    o.error_message = std::string(st.message());
    o.costs_s.clear();
    o.kernel_costs_s.clear();
  }
  return o;
}

void FillMeasureResult(const MeasureOutcome& o, pb::MeasureResult* m) {
  m->set_candidate_id(StrCat(o.candidate_index));
  m->set_error_kind(rpc::ErrorKindToProto(o.error_kind));
  m->set_error_message(o.error_message);
  for (double c : o.costs_s) m->add_costs_s(c);
  m->set_build_s(o.build_s);
  m->set_agent_id(o.agent_id);
  m->set_cut_short(o.cut_short);
  for (const auto& [key, cost] : o.kernel_costs_s) {
    pb::KernelCost* k = m->add_kernel_costs();
    k->set_workload_key(key);
    k->set_cost_s(cost);
  }
}

}  // namespace kiln::tracker
