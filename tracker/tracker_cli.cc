// kiln-tracker (TrackerMain, tracker_cli.h):
// kiln-tracker --listen ADDR --db DB --artifacts DIR [--port-file FILE]
//              [--token TOKEN] [--lease-timeout-ms N] [--max-model-bytes N]
//              [--max-elements N] [--compile-timeout-s S] [--compile-memory N]
//              [--max-concurrent-compiles N] [--http HOST:PORT [--http-port-file FILE]]
//              [--require-auth | --allow-anonymous] [limits: see --help]
// kiln-tracker tokens create --db DB --user NAME [--role user|agent|admin]
//                            [--owner USER]   (an agent run by USER)
// kiln-tracker tokens list --db DB
// kiln-tracker tokens revoke --db DB ID
// kiln-tracker keys (--db DB | --signing-key FILE): makes the signing key
// if absent, prints its public key.
// kiln-tracker compile-worker ...: a job's final compile, in the child
// process the tracker starts for it (tracker/compile_sandbox.h).
#include "tracker/tracker_cli.h"

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "base/flags.h"
#include "base/names.h"
#include "base/str.h"
#include "compiler/artifact_signing.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"
#include "tracker/auth.h"
#include "tracker/compile_sandbox.h"
#include "tracker/log.h"
#include "tracker/server.h"

namespace {

constexpr const char* kUsage =
    "usage: kiln-tracker --listen HOST:PORT --db DB --artifacts DIR\n"
    "                    [--require-auth | --allow-anonymous]   (one is needed beyond "
    "loopback)\n"
    "                    [--port-file FILE] [--token TOKEN] [--lease-timeout-ms N]\n"
    "                    [--max-model-bytes N[K|M|G]]   (default 4G)\n"
    "                    [--max-elements N]   (most elements of one tensor, inputs and "
    "intermediates;\n"
    "                    default 2^28, at most 2^32)\n"
    "                    [--compile-timeout-s S]   (a job's final compile; default 1800)\n"
    "                    [--compile-memory N[K|M|G]]   (its address space; default 16G)\n"
    "                    [--max-concurrent-compiles N]   (final compiles at once; default "
    "half the cores)\n"
    "                    [--max-jobs-per-user N]   (unfinished jobs of one user; default 16)\n"
    "                    [--tls-cert PEM --tls-key PEM [--tls-client-ca PEM]]\n"
    "                    [--user-weight NAME=WEIGHT]...   (fair shares; default 1)\n"
    "                    [--shared-keys KEY[,KEY...]|*]   (keys on which an agent a user "
    "runs\n"
    "                    (tokens create --owner) measures anyone's jobs for everyone; "
    "default none)\n"
    "                    [--http HOST:PORT [--http-port-file FILE]]   (status page, "
    "/metrics)\n"
    "                    [--http-max-connections N]   (served at once; more get 503; default "
    "64)\n"
    "                    [--http-header-timeout-ms N]   (a request's headers; default 10000)\n"
    "                    [--http-request-timeout-ms N]   (a whole request; default 30000)\n"
    "                    [--http-keep-alive-ms N]   (an idle connection; default 5000)\n"
    "                    [--keepalive-time-ms N] [--keepalive-timeout-ms N]   (pings to gRPC "
    "clients:\n"
    "                    a vanished client's streams end; defaults 30000, 10000)\n"
    "                    [--max-watches-per-user N] [--max-watches N]   (open WatchJob "
    "streams;\n"
    "                    defaults 16 and 128)\n"
    "                    [--max-uploads-per-user N] [--max-uploads N]   (open uploads; "
    "defaults 4, 32)\n"
    "                    [--upload-idle-timeout-ms N]   (an upload sending nothing is "
    "cancelled;\n"
    "                    default 60000)\n"
    "                    [--upload-quota-bytes N[K|M|G]]   (a user's uploads no job uses; "
    "default 8G)\n"
    "                    [--model-grace-s S] [--model-gc-interval-s S]   (unused uploads are "
    "deleted\n"
    "                    after S, checked at startup and every S; defaults 3600, 600)\n"
    "                    [--tracker-id ID] [--job-lease-ms N]   (several trackers on one "
    "PostgreSQL\n"
    "                    database: this one's name, default host-pid-random; how long its "
    "jobs stay\n"
    "                    its own after it stops answering, default 15000)\n"
    "                    [--signing-key FILE]   (Ed25519 key that signs every artifact; "
    "default:\n"
    "                    tracker-signing-key.pem beside a SQLite DB, made if absent)\n"
    "       kiln-tracker keys (--db DB | --signing-key FILE)   (makes the key if absent, "
    "prints its\n"
    "                    public key: what kiln-run --trust-key takes)\n"
    "       kiln-tracker tokens create --db DB --user NAME [--role user|agent|admin]\n"
    "                    [--owner USER]   (an agent USER runs: it measures USER's jobs "
    "only)\n"
    "       kiln-tracker tokens list --db DB\n"
    "       kiln-tracker tokens revoke --db DB ID\n"
    "DB: the log database, a SQLite file (PATH or sqlite:PATH) or a PostgreSQL\n"
    "    server's database (postgresql://USER@HOST:PORT/NAME, shared by several trackers)\n"
    "DIR: the artifact store, a folder or an S3 bucket (s3://BUCKET/PREFIX; KILN_S3_ENDPOINT,\n"
    "    AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION; cache: KILN_ARTIFACT_CACHE)\n";

bool WritePortFile(const std::string& path, int port) {
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!out) return false;
    out << port << "\n";
    if (!out.flush()) return false;
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  return !ec;
}

// The signing key's file: --signing-key, else beside a SQLite database;
// "" for a PostgreSQL database without --signing-key.
std::string SigningKeyPath(const std::string& flag, const std::string& db) {
  if (!flag.empty()) return flag;
  std::string path = db;
  if (path.rfind("postgresql://", 0) == 0 || path.rfind("postgres://", 0) == 0) return "";
  if (path.rfind("sqlite:", 0) == 0) path = path.substr(7);
  if (path.empty()) return "";
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  return (parent / "tracker-signing-key.pem").string();
}

}  // namespace

// `kiln-tracker keys (--db DB | --signing-key FILE)`: makes the tracker's
// signing key if there is none, prints its public key (PEM) on stdout.
int Keys(const std::vector<std::string>& args) {
  auto fail = [](const std::string& why) {
    std::fprintf(stderr, "kiln-tracker keys: %s\n%s", why.c_str(), kUsage);
    return 2;
  };
  auto flags = kiln::ParseFlags(args, {"--db", "--signing-key"});
  if (!flags.ok()) return fail(std::string(flags.status().message()));
  if (!flags->positional.empty()) {
    return fail(kiln::StrCat("unexpected argument '", flags->positional[0], "'"));
  }
  const std::string path = SigningKeyPath(flags->Get("--signing-key"), flags->Get("--db"));
  if (path.empty()) return fail("--signing-key FILE is required (or --db with a SQLite file)");
  bool created = false;
  auto key = kiln::compiler::SigningKey::LoadOrCreate(path, &created);
  if (!key.ok()) {
    std::fprintf(stderr, "kiln-tracker keys: %s\n", key.status().ToString().c_str());
    return 1;
  }
  std::fprintf(stderr, "%s signing key %s (%s); its public key, for kiln-run --trust-key FILE:\n",
               created ? "made the" : "the", path.c_str(), key->Fingerprint().c_str());
  std::printf("%s", key->PublicKeyPem().c_str());
  return 0;
}

// `kiln-tracker compile-worker --db DB --artifacts DIR --job ID
// --max-elements N`, started by the tracker itself.
int CompileWorker(const std::vector<std::string>& args,
                  const kiln::tracker::CompileFaults* faults) {
  auto flags = kiln::ParseFlags(args, {"--db", "--artifacts", "--job", "--max-elements"});
  int64_t max_elements = 0;
  if (!flags.ok() || !flags->positional.empty() || !flags->Has("--job") ||
      !kiln::ParseInt64(flags->Get("--max-elements"), &max_elements)) {
    std::printf("error %d bad compile-worker arguments\n",
                static_cast<int>(absl::StatusCode::kInvalidArgument));
    return 2;
  }
  return kiln::tracker::RunCompileWorker(flags->Get("--db"), flags->Get("--artifacts"),
                                         flags->Get("--job"), max_elements, faults);
}

// `kiln-tracker tokens create|list|revoke --db DB ...`: works on the
// database file (a running tracker sees the change at the next call).
int Tokens(const std::vector<std::string>& args) {
  auto fail = [](const std::string& why) {
    std::fprintf(stderr, "kiln-tracker tokens: %s\n%s", why.c_str(), kUsage);
    return 2;
  };
  if (args.empty()) return fail("create, list or revoke?");
  const std::string verb = args[0];
  auto flags = kiln::ParseFlags(std::vector<std::string>(args.begin() + 1, args.end()),
                                {"--db", "--user", "--role", "--owner"});
  if (!flags.ok()) return fail(std::string(flags.status().message()));
  if (!flags->Has("--db")) return fail("--db is required");
  auto db = kiln::storage::FarmStore::Open(flags->Get("--db"));
  if (!db.ok()) {
    std::fprintf(stderr, "kiln-tracker tokens: %s\n", db.status().ToString().c_str());
    return 1;
  }
  const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  if (verb == "create") {
    if (!flags->positional.empty()) return fail("create takes no positional argument");
    if (!flags->Has("--user")) return fail("--user is required");
    if (absl::Status st = kiln::CheckName("--user", flags->Get("--user")); !st.ok()) {
      return fail(std::string(st.message()));
    }
    auto secret = kiln::tracker::NewTokenSecret();
    if (!secret.ok()) return fail(secret.status().ToString());
    kiln::storage::TokenRow row;
    row.user = flags->Get("--user");
    const std::string role = flags->Has("--role") ? flags->Get("--role") : "user";
    std::optional<kiln::storage::Role> parsed = kiln::storage::ParseRole(role);
    if (!parsed.has_value()) return fail("unknown role '" + role + "' (user, agent or admin)");
    row.role = *parsed;
    if (flags->Has("--owner")) {
      if (row.role != kiln::storage::Role::kAgent) {
        return fail("--owner names who runs an agent: with --role agent");
      }
      if (absl::Status st = kiln::CheckName("--owner", flags->Get("--owner")); !st.ok()) {
        return fail(std::string(st.message()));
      }
      row.owner = flags->Get("--owner");
    }
    row.hash = kiln::tracker::TokenHash(*secret);
    row.created_unix_ms = now;
    auto id = (*db)->AddToken(row);
    if (!id.ok()) {
      std::fprintf(stderr, "kiln-tracker tokens: %s\n", id.status().ToString().c_str());
      return 1;
    }
    std::fprintf(stderr, "token %lld for %s (%s%s); it is shown this once, store it now:\n",
                 static_cast<long long>(*id), row.user.c_str(),
                 std::string(kiln::storage::RoleName(row.role)).c_str(),
                 row.owner.empty() ? "" : (", run by " + row.owner).c_str());
    std::printf("%s\n", secret->c_str());
    return 0;
  }
  if (verb == "list") {
    auto rows = (*db)->ListTokens();
    if (!rows.ok()) {
      std::fprintf(stderr, "kiln-tracker tokens: %s\n", rows.status().ToString().c_str());
      return 1;
    }
    std::printf("%-6s %-20s %-6s %-20s %-14s %s\n", "ID", "USER", "ROLE", "OWNER", "CREATED_MS",
                "STATE");
    for (const auto& t : *rows) {
      std::printf("%-6lld %-20s %-6s %-20s %-14lld %s\n", static_cast<long long>(t.id),
                  t.user.c_str(), std::string(kiln::storage::RoleName(t.role)).c_str(),
                  t.owner.empty() ? "-" : t.owner.c_str(),
                  static_cast<long long>(t.created_unix_ms),
                  t.revoked_unix_ms ? "revoked" : "valid");
    }
    return 0;
  }
  if (verb == "revoke") {
    int64_t id = 0;
    if (flags->positional.size() != 1 || !kiln::ParseInt64(flags->positional[0], &id)) {
      return fail("revoke takes one token id (kiln-tracker tokens list shows them)");
    }
    if (absl::Status st = (*db)->RevokeToken(id, now); !st.ok()) {
      std::fprintf(stderr, "kiln-tracker tokens: %s\n", st.ToString().c_str());
      return 1;
    }
    std::printf("token %lld revoked\n", static_cast<long long>(id));
    return 0;
  }
  return fail(kiln::StrCat("unknown tokens command '", verb, "'"));
}

int kiln::tracker::TrackerMain(int argc, char** argv, const CompileFaults* faults) {
  if (argc > 1 && std::string(argv[1]) == "compile-worker") {
    return CompileWorker(std::vector<std::string>(argv + 2, argv + argc), faults);
  }
  if (argc > 1 && std::string(argv[1]) == "tokens") {
    return Tokens(std::vector<std::string>(argv + 2, argv + argc));
  }
  if (argc > 1 && std::string(argv[1]) == "keys") {
    return Keys(std::vector<std::string>(argv + 2, argv + argc));
  }
  auto log = spdlog::stderr_color_mt("tracker");
  log->set_formatter(std::make_unique<kiln::tracker::PrintableFormatter>(
      "[%Y-%m-%d %H:%M:%S.%e] [tracker] [%l] %v"));

  kiln::tracker::TrackerOptions options;
  options.listen = "";
  std::string port_file;
  std::vector<std::string> args(argv + 1, argv + argc);
  if (std::find(args.begin(), args.end(), "--help") != args.end() ||
      std::find(args.begin(), args.end(), "-h") != args.end()) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  // Bounds on what clients may hold (docs/operator-guide.md, "Limits").
  struct IntFlag {
    const char* name;
    int64_t lo, hi;
    std::function<void(int64_t)> set;
  };
  const std::vector<IntFlag> bounds = {
      {"--http-max-connections", 1, 10000,
       [&](int64_t v) { options.http_limits.max_connections = static_cast<int>(v); }},
      {"--http-header-timeout-ms", 100, 3600000,
       [&](int64_t v) { options.http_limits.header_timeout_ms = v; }},
      {"--http-request-timeout-ms", 100, 3600000,
       [&](int64_t v) { options.http_limits.request_timeout_ms = v; }},
      {"--http-keep-alive-ms", 100, 3600000,
       [&](int64_t v) { options.http_limits.keep_alive_ms = v; }},
      {"--keepalive-time-ms", 1000, 86400000,
       [&](int64_t v) { options.keepalive_time_ms = static_cast<int>(v); }},
      {"--keepalive-timeout-ms", 1000, 3600000,
       [&](int64_t v) { options.keepalive_timeout_ms = static_cast<int>(v); }},
      {"--max-watches-per-user", 1, 100000,
       [&](int64_t v) { options.watch_limits.per_user = static_cast<int>(v); }},
      {"--max-watches", 1, 100000,
       [&](int64_t v) { options.watch_limits.total = static_cast<int>(v); }},
      {"--max-uploads-per-user", 1, 100000,
       [&](int64_t v) { options.upload_limits.per_user = static_cast<int>(v); }},
      {"--max-uploads", 1, 100000,
       [&](int64_t v) { options.upload_limits.total = static_cast<int>(v); }},
      {"--upload-idle-timeout-ms", 100, 86400000,
       [&](int64_t v) { options.upload_limits.idle_timeout_ms = v; }},
      {"--model-grace-s", 0, 366 * 86400,
       [&](int64_t v) { options.uploaded_models.grace_ms = v * 1000; }},
      {"--model-gc-interval-s", 1, 366 * 86400,
       [&](int64_t v) { options.model_gc_interval_ms = v * 1000; }},
  };
  std::set<std::string> value_flags = {
      "--listen",
      "--db",
      "--artifacts",
      "--port-file",
      "--token",
      "--lease-timeout-ms",
      "--max-model-bytes",
      "--max-elements",
      "--compile-timeout-s",
      "--compile-memory",
      "--max-concurrent-compiles",
      "--max-jobs-per-user",
      "--tls-cert",
      "--tls-key",
      "--tls-client-ca",
      "--user-weight",
      "--shared-keys",
      "--http",
      "--http-port-file",
      "--tracker-id",
      "--job-lease-ms",
      "--signing-key",
      "--upload-quota-bytes",
  };
  for (const IntFlag& f : bounds) value_flags.insert(f.name);
  auto flags = kiln::ParseFlags(args, value_flags, {"--require-auth", "--allow-anonymous"});
  if (!flags.ok() || !flags->positional.empty()) {
    std::string why = flags.ok() ? kiln::StrCat("unexpected argument '", flags->positional[0], "'")
                                 : std::string(flags.status().message());
    std::fprintf(stderr, "kiln-tracker: %s\n%s", why.c_str(), kUsage);
    return 2;
  }
  options.listen = flags->Get("--listen");
  options.db_path = flags->Get("--db");
  options.artifacts_dir = flags->Get("--artifacts");
  options.token = flags->Get("--token");
  for (const std::string& uw : flags->All("--user-weight")) {
    size_t eq = uw.rfind('=');
    double w = 0;
    if (eq == std::string::npos || eq == 0 || !kiln::ParseDouble(uw.substr(eq + 1), &w) ||
        !(w > 0) || w > 1e6) {
      std::fprintf(stderr, "kiln-tracker: --user-weight takes NAME=WEIGHT (WEIGHT > 0), not '%s'\n",
                   uw.c_str());
      return 2;
    }
    options.user_weights[uw.substr(0, eq)] = w;
  }
  for (const std::string& list : flags->All("--shared-keys")) {
    for (std::string_view piece : kiln::StrSplit(list, ',')) {
      const std::string key(piece);
      if (absl::Status st = kiln::CheckName("--shared-keys", key); !st.ok() || key.empty()) {
        std::fprintf(stderr, "kiln-tracker: --shared-keys takes KEY[,KEY...] or *, not '%s'\n",
                     list.c_str());
        return 2;
      }
      options.shared_keys.insert(key);
    }
  }
  options.tls_cert = flags->Get("--tls-cert");
  options.tls_key = flags->Get("--tls-key");
  options.tls_client_ca = flags->Get("--tls-client-ca");
  options.require_auth = flags->Has("--require-auth");
  options.allow_anonymous = flags->Has("--allow-anonymous");
  if (options.require_auth && options.allow_anonymous) {
    std::fprintf(stderr, "kiln-tracker: --require-auth and --allow-anonymous exclude each other\n");
    return 2;
  }
  port_file = flags->Get("--port-file");
  options.http_listen = flags->Get("--http");
  const std::string http_port_file = flags->Get("--http-port-file");
  if (!http_port_file.empty() && options.http_listen.empty()) {
    std::fprintf(stderr, "kiln-tracker: --http-port-file needs --http\n");
    return 2;
  }
  options.jobs.tracker_id = flags->Get("--tracker-id");
  if (flags->Has("--job-lease-ms")) {
    int64_t ms = 0;
    if (!kiln::ParseInt64(flags->Get("--job-lease-ms"), &ms) || ms < 300 || ms > 3600000) {
      std::fprintf(stderr, "kiln-tracker: --job-lease-ms must be in 300..3600000\n");
      return 2;
    }
    options.jobs.job_lease_ms = ms;
  }
  if (flags->Has("--lease-timeout-ms")) {
    int64_t ms = 0;
    if (!kiln::ParseInt64(flags->Get("--lease-timeout-ms"), &ms) || ms <= 0) {
      std::fprintf(stderr, "kiln-tracker: --lease-timeout-ms must be a positive integer\n");
      return 2;
    }
    options.lease_timeout_ms = ms;
  }
  if (flags->Has("--max-model-bytes") &&
      !kiln::ParseBytes(flags->Get("--max-model-bytes"), &options.jobs.max_model_bytes)) {
    std::fprintf(stderr,
                 "kiln-tracker: --max-model-bytes must be a positive size (e.g. 4G, 512M)\n");
    return 2;
  }
  if (flags->Has("--max-elements")) {
    int64_t n = 0;
    if (!kiln::ParseInt64(flags->Get("--max-elements"), &n) || n <= 0 || n > (int64_t{1} << 32)) {
      std::fprintf(stderr, "kiln-tracker: --max-elements must be in 1..4294967296\n");
      return 2;
    }
    options.jobs.max_elements = n;
  }
  if (flags->Has("--max-jobs-per-user")) {
    int64_t n = 0;
    if (!kiln::ParseInt64(flags->Get("--max-jobs-per-user"), &n) || n <= 0 || n > 100000) {
      std::fprintf(stderr, "kiln-tracker: --max-jobs-per-user must be in 1..100000\n");
      return 2;
    }
    options.jobs.max_jobs_per_user = static_cast<int>(n);
  }
  if (flags->Has("--compile-timeout-s")) {
    int64_t s = 0;
    if (!kiln::ParseInt64(flags->Get("--compile-timeout-s"), &s) || s <= 0 || s > 86400) {
      std::fprintf(stderr, "kiln-tracker: --compile-timeout-s must be in 1..86400\n");
      return 2;
    }
    options.jobs.compile_limits.timeout_ms = s * 1000;
  }
  if (flags->Has("--max-concurrent-compiles")) {
    int64_t n = 0;
    if (!kiln::ParseInt64(flags->Get("--max-concurrent-compiles"), &n) || n <= 0 || n > 1024) {
      std::fprintf(stderr, "kiln-tracker: --max-concurrent-compiles must be in 1..1024\n");
      return 2;
    }
    options.jobs.max_concurrent_compiles = static_cast<int>(n);
  }
  if (flags->Has("--compile-memory") &&
      !kiln::ParseBytes(flags->Get("--compile-memory"),
                        &options.jobs.compile_limits.memory_bytes)) {
    std::fprintf(stderr, "kiln-tracker: --compile-memory must be a positive size (e.g. 16G)\n");
    return 2;
  }
  for (const IntFlag& f : bounds) {
    if (!flags->Has(f.name)) continue;
    int64_t v = 0;
    if (!kiln::ParseInt64(flags->Get(f.name), &v) || v < f.lo || v > f.hi) {
      std::fprintf(stderr, "kiln-tracker: %s must be in %lld..%lld\n", f.name,
                   static_cast<long long>(f.lo), static_cast<long long>(f.hi));
      return 2;
    }
    f.set(v);
  }
  if (options.http_limits.request_timeout_ms < options.http_limits.header_timeout_ms) {
    std::fprintf(stderr,
                 "kiln-tracker: --http-request-timeout-ms must be at least "
                 "--http-header-timeout-ms\n");
    return 2;
  }
  if (flags->Has("--upload-quota-bytes") &&
      !kiln::ParseBytes(flags->Get("--upload-quota-bytes"), &options.uploaded_models.quota_bytes)) {
    std::fprintf(stderr,
                 "kiln-tracker: --upload-quota-bytes must be a positive size (e.g. 8G, 512M)\n");
    return 2;
  }
  // The final compile runs in a child process of this binary.
  std::error_code ec;
  options.jobs.compile_worker = std::filesystem::read_symlink("/proc/self/exe", ec).string();
  if (ec) {
    std::fprintf(stderr, "kiln-tracker: cannot find its own binary: %s\n", ec.message().c_str());
    return 1;
  }
  if (options.listen.empty() || options.db_path.empty() || options.artifacts_dir.empty()) {
    std::fprintf(stderr, "kiln-tracker: --listen, --db and --artifacts are required\n%s", kUsage);
    return 2;
  }

  // The key that signs every job's artifact, made on first start.
  const std::string key_path = SigningKeyPath(flags->Get("--signing-key"), options.db_path);
  if (key_path.empty()) {
    log->warn(
        "artifacts are not signed: a PostgreSQL database needs --signing-key FILE (the "
        "same key file for every tracker on it)");
  } else {
    bool created = false;
    auto key = kiln::compiler::SigningKey::LoadOrCreate(key_path, &created);
    if (!key.ok()) {
      log->error("signing key: {}", key.status().ToString());
      return 1;
    }
    log->info("{} signing key {} ({}); kiln-tracker keys prints its public key",
              created ? "made the" : "artifacts are signed with", key_path, key->Fingerprint());
    options.jobs.signing_key = std::make_shared<const kiln::compiler::SigningKey>(*std::move(key));
  }

  // Block the stop signals in every thread; the main thread waits for them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  kiln::tracker::TrackerServer server(options);
  auto port = server.Start();
  if (!port.ok()) {
    log->error("cannot start: {}", port.status().ToString());
    return 1;
  }
  std::string host = options.listen.substr(0, options.listen.rfind(':'));
  log->info("listening on {}:{}", host, *port);
  if (!port_file.empty() && !WritePortFile(port_file, *port)) {
    log->error("cannot write the port file {}", port_file);
    server.Stop();
    return 1;
  }
  if (!options.http_listen.empty()) {
    log->info("status page and /metrics on http://{}:{}/",
              options.http_listen.substr(0, options.http_listen.rfind(':')), server.http_port());
    if (!http_port_file.empty() && !WritePortFile(http_port_file, server.http_port())) {
      log->error("cannot write the port file {}", http_port_file);
      server.Stop();
      return 1;
    }
  }
  int sig = 0;
  sigwait(&signals, &sig);
  log->info("signal {}: shutting down", sig);
  server.Stop();
  log->info("stopped");
  return 0;
}
