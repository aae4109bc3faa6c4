#include "tracker/http.h"

#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <string>

#include "base/names.h"
#include "base/str.h"
#include "nlohmann/json.hpp"
#include "tracker/end_to_end.h"

namespace kiln::tracker {
namespace {

using nlohmann::json;

// The status page: one file, its script polls /api/state every second and
// the curve of the selected job; ?token=... is passed on to the API.
constexpr char kPage[] = R"HTML(<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>kiln farm</title>
<style>
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}
h1{font-size:1.4em;margin:0 0 .2em} h2{font-size:1.1em;margin:1.2em 0 .4em}
table{border-collapse:collapse;font-size:.9em} td,th{padding:.25em .6em;border-bottom:1px solid #ddd;text-align:left}
th{background:#f4f4f4} .ok{color:#1a7f37} .bad{color:#cf222e} .warn{color:#9a6700} .muted{color:#777}
.bar{display:inline-block;width:8em;height:.7em;background:#eee;vertical-align:middle}
.bar>span{display:block;height:100%;background:#4c8bf5}
#curve{border:1px solid #ddd;background:#fff} tr.job{cursor:pointer} tr.sel{background:#eef4ff}
</style></head><body>
<h1>kiln farm</h1><div id="summary" class="muted">loading...</div>
<h2>Devices</h2><table id="devices"><thead><tr><th>key</th><th>agent</th><th>health</th><th>target</th>
<th>current batch</th><th>results</th><th>last heartbeat</th><th>hardware</th></tr></thead><tbody></tbody></table>
<h2>Jobs</h2><table id="jobs"><thead><tr><th>job</th><th>model</th><th>key</th><th>owner</th><th>state</th>
<th>trials</th><th>best latency</th><th>tasks</th></tr></thead><tbody></tbody></table>
<h2>Tuning curve <span id="curve-job" class="muted"></span></h2>
<svg id="curve" width="640" height="240"></svg>
<script>
const token = new URLSearchParams(location.search).get('token');
const q = token ? '?token=' + encodeURIComponent(token) : '';
let selected = null;
const esc = s => String(s).replace(/[&<>"]/g, c => ({'&':'&amp;','<':'&lt;','>':'&gt;','"':'&quot;'}[c]));
const ms = v => v > 0 ? (v < 1 ? v.toFixed(3) : v.toFixed(2)) + ' ms' : '-';
function ago(t) { if (!t) return '-'; const s = Math.max(0, (Date.now() - t) / 1000);
  return s < 60 ? s.toFixed(0) + ' s ago' : (s / 60).toFixed(0) + ' min ago'; }
async function refresh() {
  let st;
  try { const r = await fetch('/api/state' + q); if (!r.ok) throw new Error(r.status + ' ' + await r.text());
        st = await r.json(); }
  catch (e) { document.getElementById('summary').textContent = 'cannot read the farm: ' + e.message; return; }
  document.getElementById('summary').textContent = `${st.devices.length} agents, ${st.jobs.length} jobs, ` +
    `${st.measurements_per_second.toFixed(1)} measurements/s, updated ${new Date().toLocaleTimeString()}`;
  document.querySelector('#devices tbody').innerHTML = st.devices.map(d => `<tr><td>${esc(d.key)}</td>
    <td>${esc(d.id)}</td><td class="${d.health == 'healthy' ? 'ok' : d.health == 'offline' ? 'muted' : 'bad'}">${esc(d.health)}</td>
    <td>${esc(d.target)}</td><td>${d.in_flight ? d.in_flight + ' candidates' : 'idle'}</td><td>${d.results}</td>
    <td>${ago(d.last_seen_unix_ms)}</td><td class="muted">${esc(d.hardware)}</td></tr>`).join('');
  document.querySelector('#jobs tbody').innerHTML = st.jobs.map(j => `<tr class="job${j.id == selected ? ' sel' : ''}" data-id="${esc(j.id)}">
    <td>${esc(j.id)}</td><td>${esc(j.model)}</td><td>${esc(j.key)}</td><td>${esc(j.owner || '-')}</td>
    <td class="${j.state == 'failed' ? 'bad' : j.state == 'completed' ? 'ok' : 'warn'}">${esc(j.state)}</td>
    <td>${j.trials_done} / ${j.trials}</td><td>${ms(j.best_latency_ms)}${j.end_to_end.tuned_ms ? `<div title="${esc(j.end_to_end.note)}">on the board: ${ms(j.end_to_end.returned_tuned ? j.end_to_end.tuned_ms : j.end_to_end.untuned_ms)} (untuned ${ms(j.end_to_end.untuned_ms)})</div>` : ''}</td><td>${j.tasks.map(t =>
      `<div title="${esc(t.state)}">${esc(t.op)} <span class="bar"><span style="width:${Math.min(100, 100 * t.trials / Math.max(1, j.trials_per_task))}%"></span></span>
       ${t.trials} trials, ${ms(t.best_ms)}${t.errors ? ', <span class=bad>' + t.errors + ' errors</span>' : ''}</div>`).join('')}</td></tr>`).join('');
  for (const tr of document.querySelectorAll('tr.job')) tr.onclick = () => { selected = tr.dataset.id; refresh(); };
  if (!selected && st.jobs.length) selected = st.jobs[0].id;
  if (selected) drawCurve(selected);
}
async function drawCurve(id) {
  const svg = document.getElementById('curve');
  const r = await fetch('/api/jobs/' + encodeURIComponent(id) + '/curve' + q);
  if (!r.ok) return;
  const pts = (await r.json()).points.filter(p => p.estimate_ms > 0);
  document.getElementById('curve-job').textContent = id + ': estimated model latency (sum of best kernels) against trials';
  if (!pts.length) { svg.innerHTML = '<text x="20" y="30" fill="#777">no measurement yet</text>'; return; }
  const W = 640, H = 240, L = 60, B = 30;
  const xmax = Math.max(1, ...pts.map(p => p.trials));
  const lo = Math.min(...pts.map(p => p.estimate_ms)), hi = Math.max(...pts.map(p => p.estimate_ms));
  const ymin = lo * 0.95, ymax = hi * 1.02;
  const x = t => L + (W - L - 10) * t / xmax, y = v => H - B - (H - B - 10) * (v - ymin) / (ymax - ymin);
  svg.innerHTML = `<line x1="${L}" y1="${H-B}" x2="${W-10}" y2="${H-B}" stroke="#999"/><line x1="${L}" y1="10" x2="${L}" y2="${H-B}" stroke="#999"/>
    <text x="${L}" y="${H-8}" font-size="11">0</text><text x="${W-60}" y="${H-8}" font-size="11">${xmax} trials</text>
    <text x="4" y="16" font-size="11">${ymax.toFixed(4)} ms</text><text x="4" y="${H-B}" font-size="11">${ymin.toFixed(4)} ms</text>
    <polyline fill="none" stroke="#4c8bf5" stroke-width="2" points="${pts.map(p => x(p.trials) + ',' + y(p.estimate_ms)).join(' ')}"/>
    <text x="${L+8}" y="28" font-size="12">best ${lo.toFixed(4)} ms</text>`;
}
refresh(); setInterval(refresh, 1000);
</script></body></html>
)HTML";

std::string HealthOf(const AgentInfo& a, int64_t now_ms) {
  if (a.quarantined_until_unix_ms > now_ms) return "quarantined";
  if (!a.connected) return "offline";
  return a.consecutive_failures > 0 ? "failing" : "healthy";
}

// The bearer token of a request: the Authorization header or ?token=.
std::string AuthorizationOf(const httplib::Request& req) {
  if (req.has_header("Authorization")) return req.get_header_value("Authorization");
  if (req.has_param("token")) return "Bearer " + req.get_param_value("token");
  return "";
}

}  // namespace

HttpServer::HttpServer(HttpDeps deps) : deps_(deps) {}

HttpServer::~HttpServer() { Stop(); }

std::string HttpServer::StateJson(const Caller& viewer) const {
  const int64_t now = deps_.clock->NowMs();
  json devices = json::array();
  for (const AgentInfo& a : deps_.agents->List()) {
    devices.push_back({{"id", a.id},
                       {"key", a.device_key},
                       {"target", a.target},
                       {"hardware", a.hardware},
                       {"health", HealthOf(a, now)},
                       {"in_flight", a.in_flight},
                       {"results", a.results},
                       {"last_seen_unix_ms", a.last_seen_unix_ms},
                       {"quarantine_reason", a.quarantine_reason}});
  }
  json jobs = json::array();
  std::set<std::string> job_keys;  // of the jobs the viewer sees
  if (auto list = deps_.jobs->List(); list.ok()) {
    for (const JobStatus& j : *list) {
      if (!viewer.MaySee(j.row.owner)) continue;
      job_keys.insert(j.row.device_key);
      json tasks = json::array();
      for (const TaskStatus& t : j.tasks) {
        tasks.push_back({{"op", t.op},
                         {"key", t.workload_key},
                         {"trials", t.trials_done},
                         {"errors", t.errors},
                         {"best_ms", t.best_cost_s * 1e3},
                         {"runs", t.occurrences},
                         {"state", NameOf(t.state)}});
      }
      const int n = std::max<int>(1, static_cast<int>(j.tasks.size()));
      // The whole model as the board measured it (end_to_end.h), once decided.
      json board = json::object();
      if (auto e2e = EndToEndFromJson(j.row.end_to_end_json); e2e.ok() && e2e->decided) {
        board = {{"untuned_ms", e2e->untuned.median_s * 1e3},
                 {"tuned_ms", e2e->tuned.median_s * 1e3},
                 {"returned_tuned", e2e->returned_tuned},
                 {"note", e2e->note}};
      }
      jobs.push_back({{"id", j.row.id},
                      {"model", ShownName(j.row.model_name)},
                      {"key", j.row.device_key},
                      {"target", j.row.target},
                      {"owner", j.row.owner},
                      {"state", std::string(storage::JobStateName(j.row.state))},
                      {"trials", j.row.trials},
                      {"trials_done", j.row.trials_done},
                      {"trials_per_task", (j.row.trials + n - 1) / n},
                      {"best_latency_ms", j.EstimatedLatencyS() * 1e3},
                      {"end_to_end", board},
                      {"error", j.row.error},
                      {"created_unix_ms", j.row.created_unix_ms},
                      {"tasks", tasks}});
    }
  }
  // Queues by key follow the jobs' rule: a key only another user's job
  // names is that user's business (the farm's agents are everyone's).
  json queues = json::object();
  for (const auto& [key, n] : deps_.dispatcher->QueuedByKey()) {
    if (viewer.admin() || job_keys.count(key) > 0) queues[key] = n;
  }
  return json{{"devices", devices},
              {"jobs", jobs},
              {"queues", queues},
              {"measurements_per_second", deps_.metrics->MeasurementsPerSecond(now)}}
      .dump();
}

absl::StatusOr<std::string> HttpServer::CurveJson(const Caller& viewer,
                                                  const std::string& job_id) const {
  auto job = deps_.jobs->Get(job_id);
  if (!job.ok()) return job.status();
  if (!viewer.MaySee(job->row.owner)) {
    return absl::NotFoundError(StrCat("unknown job '", job_id, "'"));  // as for a stranger's
  }
  size_t next = 0;
  bool finished = false;
  auto events = deps_.jobs->WaitEvents(job_id, &next, std::chrono::milliseconds(0), &finished);
  if (!events.ok()) return events.status();
  json points = json::array();
  for (const JobEventEntry& e : *events) {
    points.push_back({{"unix_ms", e.unix_ms},
                      {"trials", e.job.row.trials_done},
                      {"estimate_ms", e.job.EstimatedLatencyS() * 1e3}});
  }
  return json{{"job", job_id}, {"points", points}}.dump();
}

std::string HttpServer::MetricsText() const {
  const int64_t now = deps_.clock->NowMs();
  std::string out = deps_.metrics->Render();
  out +=
      "# HELP kiln_measurements_per_second Measurements recorded per second over the last 10 s.\n";
  out += "# TYPE kiln_measurements_per_second gauge\n";
  out += PromSample("kiln_measurements_per_second", {}, deps_.metrics->MeasurementsPerSecond(now));
  out += "# HELP kiln_queue_length Batches waiting for an agent, by device key.\n";
  out += "# TYPE kiln_queue_length gauge\n";
  std::map<std::string, size_t> queued = deps_.dispatcher->QueuedByKey();
  std::map<std::pair<std::string, std::string>, int> agents;  // (key, state)
  for (const AgentInfo& a : deps_.agents->List()) {
    queued.try_emplace(a.device_key, 0);
    agents[{a.device_key, HealthOf(a, now)}]++;
  }
  for (const auto& [key, n] : queued) {
    out += PromSample("kiln_queue_length", {{"key", key}}, static_cast<double>(n));
  }
  out += "# HELP kiln_agents Agents known to the tracker, by device key and state.\n";
  out += "# TYPE kiln_agents gauge\n";
  for (const auto& [ks, n] : agents) {
    out += PromSample("kiln_agents", {{"key", ks.first}, {"state", ks.second}}, n);
  }
  out += "# HELP kiln_jobs Jobs held by the tracker, by state.\n";
  out += "# TYPE kiln_jobs gauge\n";
  std::map<std::string, int> jobs;
  for (storage::JobState s :
       {storage::JobState::kQueued, storage::JobState::kTuning, storage::JobState::kCompiling,
        storage::JobState::kCompleted, storage::JobState::kFailed, storage::JobState::kCancelled}) {
    jobs[std::string(storage::JobStateName(s))] = 0;
  }
  if (auto list = deps_.jobs->List(); list.ok()) {
    for (const JobStatus& j : *list) jobs[std::string(storage::JobStateName(j.row.state))]++;
  }
  for (const auto& [state, n] : jobs) out += PromSample("kiln_jobs", {{"state", state}}, n);
  return out;
}

absl::StatusOr<int> HttpServer::Start(const std::string& listen) {
  const size_t colon = listen.rfind(':');
  int64_t port = -1;
  if (colon == std::string::npos ||
      !ParseInt64(std::string_view(listen).substr(colon + 1), &port) || port < 0 || port > 65535) {
    return absl::InvalidArgumentError(StrCat("--http '", listen, "' is not HOST:PORT"));
  }
  std::string host = listen.substr(0, colon);
  if (host.size() > 1 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  server_ = std::make_unique<BoundedHttpServer>(deps_.limits);
  httplib::Server& s = *server_;
  // Who is asking: nullopt (and a 401 written) when the token is refused.
  auto caller = [this](const httplib::Request& req,
                       httplib::Response& res) -> std::optional<Caller> {
    auto c = deps_.auth->Authenticate(AuthorizationOf(req));
    if (!c.ok()) {
      res.status = 401;
      res.set_header("WWW-Authenticate", "Bearer");
      res.set_content(std::string(c.status().message()) + "\n", "text/plain");
      return std::nullopt;
    }
    // An agent's token measures; it reads nothing of the farm (as over gRPC).
    if (c->role == storage::Role::kAgent) {
      res.status = 403;
      res.set_content("an agent's token cannot read the farm's state\n", "text/plain");
      return std::nullopt;
    }
    return *c;
  };
  s.Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(kPage, "text/html; charset=utf-8");
  });
  s.Get("/api/state", [this, caller](const httplib::Request& req, httplib::Response& res) {
    if (auto c = caller(req, res)) res.set_content(StateJson(*c), "application/json");
  });
  s.Get(R"(/api/jobs/([^/]+)/curve)",
        [this, caller](const httplib::Request& req, httplib::Response& res) {
          auto c = caller(req, res);
          if (!c) return;
          auto curve = CurveJson(*c, req.matches[1]);
          if (!curve.ok()) {
            res.status = curve.status().code() == absl::StatusCode::kNotFound ? 404 : 500;
            res.set_content(std::string(curve.status().message()) + "\n", "text/plain");
            return;
          }
          res.set_content(*curve, "application/json");
        });
  // Every user's job counts and keys: for admins (or anyone, on a tracker
  // that does not require tokens).
  s.Get("/metrics", [this, caller](const httplib::Request& req, httplib::Response& res) {
    auto c = caller(req, res);
    if (!c) return;
    if (c->role.has_value() && !c->admin()) {
      res.status = 403;
      res.set_content(
          "/metrics is for an admin's token (kiln-tracker tokens create --role admin)\n",
          "text/plain");
      return;
    }
    res.set_content(MetricsText(), "text/plain; version=0.0.4");
  });
  int bound = port == 0
                  ? s.bind_to_any_port(host)
                  : (s.bind_to_port(host, static_cast<int>(port)) ? static_cast<int>(port) : -1);
  if (bound <= 0) {
    return absl::UnavailableError(StrCat("cannot listen on ", listen, " for HTTP"));
  }
  server_->WidenBacklog();
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  return bound;
}

int HttpServer::OpenConnections() const { return server_ ? server_->Open() : 0; }
int64_t HttpServer::RefusedConnections() const { return server_ ? server_->Refused() : 0; }

void HttpServer::Stop() {
  if (server_) {
    server_->stop();
    server_->CloseAll();
  }
  if (thread_.joinable()) thread_.join();
  server_.reset();
}

}  // namespace kiln::tracker
