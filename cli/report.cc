// kiln report JOB (--tracker ADDR | --db FILE) -o PLOT.svg|PLOT.png
// A job's tuning curves and summary: per task, the best GFLOP/s against the
// task's trials and against wall time; for the model, the end-to-end latency
// estimate (sum over tasks of occurrences x best cost) against the job's
// trials and wall time. The plot is drawn by gnuplot; the table goes to
// stdout, with (from a tracker) the model's latency measured end to end on
// the board against trials, untuned and tuned.
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <ostream>

#include "base/str.h"
#include "base/subprocess.h"
#include "cli/common.h"
#include "storage/stores.h"

namespace kiln::cli {
namespace {

struct ReportTask {
  std::string key;
  std::string op;
  double flops = 0;
  int occurrences = 1;
  // The log's best cost of the task (what the compiled module uses), for
  // the end-to-end estimate of a task this job did not measure.
  double log_best_s = 0;
};

struct ReportRecord {
  std::string workload_key;
  double cost_s = 0;  // 0: failed
  int64_t unix_ms = 0;
  int task = -1;  // index in ReportData::tasks (IndexRecords); -1: none
};

struct ReportData {
  std::string job_id;
  std::string model_name;
  std::vector<ReportTask> tasks;
  std::vector<ReportRecord> records;  // in measurement order
  // The whole model as the board measured it (from the tracker only).
  kiln::v1::EndToEnd end_to_end;
};

absl::StatusOr<ReportData> FromTracker(kiln::v1::Tracker::Stub& stub, const std::string& job_id) {
  ReportData d;
  d.job_id = job_id;
  kiln::v1::Job job;
  {
    grpc::ClientContext ctx;
    kiln::v1::GetJobRequest req;
    req.set_job_id(job_id);
    grpc::Status st = stub.GetJob(&ctx, req, &job);
    if (!st.ok()) {
      return absl::Status(static_cast<absl::StatusCode>(st.error_code()), st.error_message());
    }
  }
  d.model_name = job.model_name();
  d.end_to_end = job.end_to_end();
  for (const auto& t : job.tasks()) {
    d.tasks.push_back({t.workload().key(), t.workload().op(), t.workload().flops(),
                       std::max(1, t.occurrences()), t.best_cost_s()});
  }
  // Page by page (the tracker sends at most 10,000 records per call).
  std::string page;
  do {
    grpc::ClientContext ctx;
    kiln::v1::QueryRecordsRequest req;
    req.set_job_id(job_id);
    req.set_page_token(page);
    kiln::v1::QueryRecordsResponse resp;
    grpc::Status st = stub.QueryRecords(&ctx, req, &resp);
    if (!st.ok()) {
      return absl::Status(static_cast<absl::StatusCode>(st.error_code()), st.error_message());
    }
    for (const auto& r : resp.records()) {
      const bool ok = r.result().error_kind() == kiln::v1::MEASURE_ERROR_KIND_NONE;
      d.records.push_back({r.workload().key(), ok ? r.mean_cost_s() : 0, r.unix_ms()});
    }
    page = resp.next_page_token();
  } while (!page.empty());
  return d;
}

absl::StatusOr<ReportData> FromDatabase(const storage::Stores& db, const std::string& job_id) {
  ReportData d;
  d.job_id = job_id;
  auto records = db.tuning->RecordsOfJob(job_id);
  if (!records.ok()) return records.status();
  for (const auto& r : *records) {
    d.records.push_back(
        {r.workload_key, r.error_kind == storage::ErrorKind::kNone ? r.mean_cost_s : 0, r.unix_ms});
  }
  // The job's target: its row's (a tracker's job), or its records' (local).
  std::string target = records->empty() ? "" : records->front().target;
  if (auto job = db.farm->GetJob(job_id); job.ok() && job->has_value()) {
    d.model_name = (*job)->model_name;
    target = (*job)->target;
  }
  auto tasks = db.tuning->JobTasks(job_id);
  if (!tasks.ok()) return tasks.status();
  for (const auto& t : *tasks) {
    ReportTask task{t.workload_key, "", 0, std::max(1, t.occurrences), 0};
    if (auto w = db.tuning->GetWorkload(t.workload_key); w.ok() && w->has_value()) {
      task.op = (*w)->op;
      task.flops = (*w)->flops;
    }
    if (auto best = db.tuning->BestRecord(t.workload_key, target); best.ok() && best->has_value()) {
      task.log_best_s = (*best)->mean_cost_s;
    }
    d.tasks.push_back(std::move(task));
  }
  return d;
}

// Sets each record's task.
void IndexRecords(ReportData& d) {
  std::map<std::string, int> index;
  for (size_t i = 0; i < d.tasks.size(); ++i) index[d.tasks[i].key] = static_cast<int>(i);
  for (ReportRecord& r : d.records) {
    auto it = index.find(r.workload_key);
    r.task = it == index.end() ? -1 : it->second;
  }
}

std::string Fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}

// A title in a data file's header line, which gnuplot reads as data
// (`title columnheader(1)`): one line, no double quote to end it early, and
// a backslash doubled (gnuplot reads escapes there).
std::string HeaderTitle(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '\\') {
      out += "\\\\";
    } else {
      out += c == '"' || (c >= 0 && c < 0x20) ? '\'' : c;
    }
  }
  return out + "\"";
}

// Runs `gnuplot -c script args...`; its messages go to our stderr. The
// script reads every string that is not kiln's own (the job's and model's
// names, the paths) as ARG1, ARG2, ...: values, never parsed as commands.
absl::Status RunGnuplot(const std::string& script, const std::vector<std::string>& script_args) {
  std::vector<std::string> args = {"gnuplot", "-c", script};
  args.insert(args.end(), script_args.begin(), script_args.end());
  ChildOptions child;
  child.search_path = true;
  auto pid = StartChild(args, child);
  if (!pid.ok()) return pid.status();
  const int status = WaitChild(*pid, /*kill=*/false);
  if (status < 0) return absl::InternalError("waiting for gnuplot failed");
  if (WIFEXITED(status) && WEXITSTATUS(status) == 127) {
    return absl::FailedPreconditionError(
        "cannot run gnuplot; install it with `apt-get install gnuplot-nox` (scripts/install-deps "
        "does)");
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::InternalError("gnuplot failed to draw the plot (its messages are above)");
  }
  return absl::OkStatus();
}

// Writes the data files and the script into `dir`; draws `out`.
absl::Status Plot(const ReportData& d, const std::string& dir, const std::string& out, bool png) {
  const int64_t t0 = d.records.empty() ? 0 : d.records.front().unix_ms;
  std::vector<std::ofstream> files;
  for (size_t i = 0; i < d.tasks.size(); ++i) {
    files.emplace_back(StrCat(dir, "/task", i, ".dat"));
    // The first line titles the task's curve (columnheader(1)).
    files.back() << HeaderTitle(StrCat(i + 1, " ", d.tasks[i].op, " x", d.tasks[i].occurrences))
                 << " seconds gflops\n";
  }
  std::ofstream model(StrCat(dir, "/model.dat"));
  model << "trial seconds latency_ms\n";
  std::vector<double> best(d.tasks.size(), 0);
  std::vector<int> trials(d.tasks.size(), 0);
  std::vector<bool> has_points(d.tasks.size(), false);
  bool model_points = false;
  // Tasks the job measured count from their first result on; the others
  // with the log's best all along.
  std::vector<bool> measured(d.tasks.size(), false);
  for (const ReportRecord& r : d.records) {
    if (r.task >= 0 && r.cost_s > 0) measured[r.task] = true;
  }
  int done = 0;
  for (const ReportRecord& r : d.records) {
    ++done;
    if (r.task < 0) continue;
    const size_t i = static_cast<size_t>(r.task);
    ++trials[i];
    if (r.cost_s > 0 && (best[i] == 0 || r.cost_s < best[i])) best[i] = r.cost_s;
    const double seconds = static_cast<double>(r.unix_ms - t0) / 1000.0;
    if (best[i] > 0 && d.tasks[i].flops > 0) {
      files[i] << trials[i] << ' ' << seconds << ' ' << d.tasks[i].flops / best[i] / 1e9 << '\n';
      has_points[i] = true;
    }
    double latency = 0;
    bool all = true;
    for (size_t k = 0; k < d.tasks.size(); ++k) {
      const double cost = measured[k] ? best[k] : d.tasks[k].log_best_s;
      all = all && cost > 0;
      latency += d.tasks[k].occurrences * cost;
    }
    if (all) {
      model << done << ' ' << seconds << ' ' << latency * 1e3 << '\n';
      model_points = true;
    }
  }
  for (auto& f : files) f.close();
  model.close();
  if (!model) return absl::InternalError(StrCat("cannot write the plot's data in ", dir));

  // The script holds no string from the job or the log: the output path is
  // ARG1, the title ARG2, the data folder ARG3 (RunGnuplot), the curves'
  // titles are the data files' header lines.
  std::ofstream gp(StrCat(dir, "/report.gp"));
  gp << (png ? "set terminal pngcairo size 1400,1000 noenhanced font 'sans,10'\n"
             : "set terminal svg size 1400,1000 dynamic noenhanced font 'sans,10' "
               "background rgb 'white'\n")
     << "set output ARG1\n"
     << "set multiplot layout 2,2 title ARG2\n"
     << "set grid\nset key outside right top font ',8'\n";
  // gnuplot refuses a plot without points: an empty panel says so instead.
  auto empty_panel = [&](const std::string& why) {
    gp << "set xrange [0:1]\nset yrange [0:1]\nset label 1 '" << why
       << "' at 0.5,0.5 center\nplot NaN notitle\nunset label 1\nset autoscale\n";
  };
  auto task_plot = [&](int x_column, const std::string& xlabel) {
    gp << "set xlabel '" << xlabel << "'\nset ylabel 'best GFLOP/s'\n";
    std::string plots;
    for (size_t i = 0; i < d.tasks.size(); ++i) {
      if (!has_points[i]) continue;
      plots += StrCat(plots.empty() ? "" : ", ", "ARG3.'/task", i, ".dat' using ", x_column,
                      ":3 with steps title columnheader(1)");
    }
    if (plots.empty()) {
      empty_panel("no task has a measured cost");
    } else {
      gp << "plot " << plots << "\n";
    }
  };
  task_plot(1, "trials of the task");
  task_plot(2, "wall time (s)");
  gp << "set key off\nset ylabel 'end-to-end estimate (ms)'\n";
  for (const auto& [column, xlabel] :
       {std::pair<int, const char*>{1, "trials of the job"}, {2, "wall time (s)"}}) {
    gp << "set xlabel '" << xlabel << "'\n";
    if (model_points) {
      gp << "plot ARG3.'/model.dat' using " << column << ":3 with steps lw 2\n";
    } else {
      empty_panel("not every task has a measured cost");
    }
  }
  gp << "unset multiplot\n";
  gp.close();
  if (!gp) return absl::InternalError(StrCat("cannot write the plot's script in ", dir));
  return RunGnuplot(StrCat(dir, "/report.gp"),
                    {out,
                     StrCat("kiln tuning report: ", d.job_id,
                            d.model_name.empty() ? "" : StrCat(" (", d.model_name, ")")),
                     dir});
}

void PrintSummary(const ReportData& d, std::ostream& out) {
  std::vector<double> first(d.tasks.size(), 0), best(d.tasks.size(), 0);
  std::vector<int> trials(d.tasks.size(), 0), errors(d.tasks.size(), 0);
  for (const ReportRecord& r : d.records) {
    if (r.task < 0) continue;
    const size_t i = static_cast<size_t>(r.task);
    ++trials[i];
    if (r.cost_s <= 0) {
      ++errors[i];
      continue;
    }
    if (first[i] == 0) first[i] = r.cost_s;
    if (best[i] == 0 || r.cost_s < best[i]) best[i] = r.cost_s;
  }
  std::vector<std::vector<std::string>> rows = {
      {"TASK", "OP", "RUNS", "TRIALS", "ERRORS", "FIRST", "BEST", "SPEEDUP", "GFLOPS"}};
  double first_total = 0, best_total = 0;
  bool complete = !d.tasks.empty();
  for (size_t i = 0; i < d.tasks.size(); ++i) {
    const ReportTask& t = d.tasks[i];
    // A task this job did not measure counts with the log's best.
    const double first_cost = first[i] > 0 ? first[i] : t.log_best_s;
    const double best_cost = best[i] > 0 ? best[i] : t.log_best_s;
    complete = complete && best_cost > 0;
    first_total += t.occurrences * first_cost;
    best_total += t.occurrences * best_cost;
    rows.push_back({StrCat(i + 1), t.op, StrCat("x", t.occurrences), StrCat(trials[i]),
                    StrCat(errors[i]), FormatCost(first[i]), FormatCost(best[i]),
                    best[i] > 0 ? Fixed(first[i] / best[i], 2) + "x" : "-",
                    best[i] > 0 && t.flops > 0 ? Fixed(t.flops / best[i] / 1e9, 2) : "-"});
  }
  out << "job " << d.job_id << (d.model_name.empty() ? "" : StrCat(" (", d.model_name, ")")) << ": "
      << d.records.size() << " trials";
  if (d.records.size() >= 2) {
    out << " in "
        << FormatDuration(
               static_cast<double>(d.records.back().unix_ms - d.records.front().unix_ms) / 1000.0);
  }
  out << "\n\n";
  PrintTable(out, rows);
  if (complete) {
    out << "\nend-to-end estimate (sum of runs x cost): first " << FormatCost(first_total)
        << ", best " << FormatCost(best_total) << " (" << Fixed(first_total / best_total, 2)
        << "x)\n";
  } else {
    out << "\nend-to-end estimate: not every task has a measured cost yet\n";
  }
  PrintEndToEnd(out, d.end_to_end);
}

}  // namespace

int RunReport(const Command& self, const std::vector<std::string>& argv, const CliEnv& env) {
  absl::StatusOr<Args> args = ParseFlags(argv, {"--tracker", "--db", "-o", "--output"}, {});
  if (!args.ok()) return UsageError(self, std::string(args.status().message()), env);
  if (args->positional.size() != 1) return UsageError(self, "expected one JOB id", env);
  const bool tracker = args->values.count("--tracker") > 0;
  if (tracker == (args->values.count("--db") > 0)) {
    return UsageError(self, "give either --tracker ADDR or --db FILE", env);
  }
  const std::string out = args->Get("-o", args->Get("--output"));
  if (out.empty()) return UsageError(self, "missing -o PLOT.svg or PLOT.png", env);
  const std::string ext = std::filesystem::path(out).extension().string();
  if (ext != ".svg" && ext != ".png") {
    return UsageError(self, StrCat("the plot is an .svg or a .png file, not '", out, "'"), env);
  }
  const std::string& job_id = args->positional[0];
  absl::StatusOr<ReportData> data;
  if (tracker) {
    std::unique_ptr<kiln::v1::Tracker::Stub> stub = ConnectTracker(args->Get("--tracker"), env);
    if (!stub) return 1;
    data = FromTracker(*stub, job_id);
  } else {
    if (!std::filesystem::exists(args->Get("--db"))) {
      return Fail(self, StrCat("no log database '", args->Get("--db"), "'"), env);
    }
    auto db = storage::OpenStores(args->Get("--db"));
    if (!db.ok()) return Fail(self, std::string(db.status().message()), env);
    data = FromDatabase(*db, job_id);
    if (data.ok() && data->tasks.empty() && data->records.empty()) {
      data = absl::NotFoundError(StrCat("no job '", job_id, "' in ", args->Get("--db")));
    }
  }
  if (!data.ok()) {
    return Fail(
        self, StrCat(absl::StatusCodeToString(data.status().code()), ": ", data.status().message()),
        env);
  }
  // Names from the tracker or the log are data: printable text before they
  // reach the terminal or the plot.
  data->job_id = Printable(data->job_id);
  data->model_name = Printable(data->model_name);
  for (ReportTask& t : data->tasks) t.op = Printable(t.op);
  IndexRecords(*data);
  PrintSummary(*data, *env.out);
  char tmpl[] = "/tmp/kiln-report-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) return Fail(self, "cannot make a temporary folder", env);
  absl::Status st = Plot(*data, tmpl, out, ext == ".png");
  std::error_code ec;
  std::filesystem::remove_all(tmpl, ec);
  if (!st.ok()) return Fail(self, std::string(st.message()), env);
  *env.out << "plot: " << out << "\n";
  return 0;
}

}  // namespace kiln::cli
