#include "cli/common.h"

#include <grpcpp/support/client_interceptor.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <ostream>

#include "base/net.h"
#include "base/pem.h"
#include "base/str.h"
#include "storage/vocabulary.h"

namespace kiln::cli {

int UsageError(const Command& cmd, const std::string& message, const CliEnv& env) {
  *env.err << "kiln: " << cmd.name << ": " << message << "\n"
           << "usage: kiln " << cmd.usage << "\n";
  return 2;
}

int Fail(const Command& cmd, const std::string& message, const CliEnv& env) {
  *env.err << "kiln: " << cmd.name << ": " << message << "\n";
  return 1;
}

std::string StatusCodeName(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK:
      return "OK";
    case grpc::StatusCode::CANCELLED:
      return "CANCELLED";
    case grpc::StatusCode::UNKNOWN:
      return "UNKNOWN";
    case grpc::StatusCode::INVALID_ARGUMENT:
      return "INVALID_ARGUMENT";
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::NOT_FOUND:
      return "NOT_FOUND";
    case grpc::StatusCode::ALREADY_EXISTS:
      return "ALREADY_EXISTS";
    case grpc::StatusCode::PERMISSION_DENIED:
      return "PERMISSION_DENIED";
    case grpc::StatusCode::UNAUTHENTICATED:
      return "UNAUTHENTICATED";
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::FAILED_PRECONDITION:
      return "FAILED_PRECONDITION";
    case grpc::StatusCode::ABORTED:
      return "ABORTED";
    case grpc::StatusCode::OUT_OF_RANGE:
      return "OUT_OF_RANGE";
    case grpc::StatusCode::UNIMPLEMENTED:
      return "UNIMPLEMENTED";
    case grpc::StatusCode::INTERNAL:
      return "INTERNAL";
    case grpc::StatusCode::UNAVAILABLE:
      return "UNAVAILABLE";
    case grpc::StatusCode::DATA_LOSS:
      return "DATA_LOSS";
    default:
      return StrCat("CODE_", static_cast<int>(code));
  }
}

int RpcFail(const Command& cmd, const grpc::Status& status, const CliEnv& env) {
  *env.err << "kiln: " << cmd.name << ": " << StatusCodeName(status.error_code()) << ": "
           << Printable(status.error_message()) << "\n";
  return 1;
}

namespace {

// Adds "authorization: Bearer TOKEN" to every call of a channel.
class BearerToken : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit BearerToken(const std::string& token) : value_("Bearer " + token) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo*) override {
    return new Adder(value_);
  }

 private:
  class Adder : public grpc::experimental::Interceptor {
   public:
    explicit Adder(std::string value) : value_(std::move(value)) {}
    void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
      if (methods->QueryInterceptionHookPoint(
              grpc::experimental::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
        methods->GetSendInitialMetadata()->insert({"authorization", value_});
      }
      methods->Proceed();
    }

   private:
    std::string value_;
  };
  std::string value_;
};

}  // namespace

std::unique_ptr<kiln::v1::Tracker::Stub> ConnectTracker(const std::string& address,
                                                        const CliEnv& env) {
  grpc::ChannelArguments channel_args;
  channel_args.SetMaxReceiveMessageSize(256 << 20);
  channel_args.SetMaxSendMessageSize(256 << 20);
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> interceptors;
  if (!env.token.empty()) interceptors.push_back(std::make_unique<BearerToken>(env.token));
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (!env.tls_ca.empty()) {
    auto pem = ReadPem(env.tls_ca);
    if (!pem.has_value()) {
      *env.err << "kiln: cannot read a PEM certificate from --tls-ca '" << env.tls_ca << "'\n";
      return nullptr;
    }
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = *pem;
    credentials = grpc::SslCredentials(ssl);
  }
  // Several trackers of one farm ("HOST:PORT,HOST:PORT"): the channel fails
  // over along the list.
  const std::vector<std::string> trackers = SplitAddresses(address);
  if (trackers.size() > 1) channel_args.SetString(GRPC_ARG_DEFAULT_AUTHORITY, trackers[0]);
  std::shared_ptr<grpc::Channel> channel = grpc::experimental::CreateCustomChannelWithInterceptors(
      ChannelTarget(address), credentials, channel_args, std::move(interceptors));
  if (!channel->WaitForConnected(std::chrono::system_clock::now() + env.connect_timeout)) {
    *env.err << "kiln: tracker " << address << " does not answer"
             << (env.tls_ca.empty() ? ""
                                    : " over TLS (or its certificate is not signed by --tls-ca)")
             << "\n";
    return nullptr;
  }
  return kiln::v1::Tracker::NewStub(channel);
}

// storage::JobState is numbered like kiln.v1.JobState (checked value by value
// in tracker/server.cc); its name is "unknown" for UNSPECIFIED or a number
// outside the enum.
static_assert(static_cast<int>(storage::JobState::kQueued) == kiln::v1::JOB_STATE_QUEUED);
static_assert(static_cast<int>(storage::JobState::kCancelled) == kiln::v1::JOB_STATE_CANCELLED);
std::string JobStateName(kiln::v1::JobState state) {
  return std::string(storage::JobStateName(static_cast<storage::JobState>(state)));
}

std::string FormatCost(double seconds) { return seconds > 0 ? FormatSeconds(seconds) : "-"; }

void PrintEndToEnd(std::ostream& out, const kiln::v1::EndToEnd& e) {
  if (e.curve_size() == 0 && e.note().empty()) return;
  auto latency = [](const kiln::v1::ModelLatency& l) {
    return StrCat(FormatCost(l.median_s()), " (middle half ", FormatCost(l.p25_s()), " to ",
                  FormatCost(l.p75_s()), ", ", l.rounds(), " rounds)");
  };
  auto ratio = [](double untuned, double tuned) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.3fx", tuned > 0 ? untuned / tuned : 0.0);
    return std::string(buf);
  };
  out << "\nend to end, the whole model on the board ("
      << (e.threads() > 0 ? StrCat(e.threads(), e.threads() == 1 ? " thread" : " threads")
                          : std::string("the board's threads"))
      << "):\n";
  if (e.has_untuned() && e.untuned().rounds() > 0) {
    out << "  untuned   " << latency(e.untuned()) << "\n"
        << "  tuned     " << latency(e.tuned()) << "  "
        << ratio(e.untuned().median_s(), e.tuned().median_s()) << " the untuned\n"
        << "  returned  "
        << (e.returned_tuned() ? "the tuned module" : "the defaults' module (untuned)") << "; "
        << e.tasks_tuned() << " tasks tuned, " << e.tasks_reverted()
        << " reverted to their default inside the model\n";
  }
  if (!e.note().empty()) out << "  " << Printable(e.note()) << "\n";
  if (e.curve_size() > 0) {
    std::vector<std::vector<std::string>> rows = {{"  TRIALS", "UNTUNED", "TUNED", "SPEED-UP"}};
    for (const kiln::v1::EndToEndPoint& p : e.curve()) {
      rows.push_back({StrCat("  ", p.trials()), FormatCost(p.untuned().median_s()),
                      FormatCost(p.tuned().median_s()),
                      ratio(p.untuned().median_s(), p.tuned().median_s())});
    }
    PrintTable(out, rows);
  }
}

absl::StatusOr<double> ParseDuration(const std::string& text) {
  auto bad = [&] {
    return absl::InvalidArgumentError(
        StrCat("'", text, "' is not a duration (e.g. 30m, 90s, 2h, 1h30m, or seconds)"));
  };
  if (text.empty()) return bad();
  double total = 0;
  size_t i = 0;
  bool any_unit = false;
  while (i < text.size()) {
    if (!std::isdigit(static_cast<unsigned char>(text[i])) && text[i] != '.') return bad();
    const char* begin = text.c_str() + i;
    char* end = nullptr;
    const double value = std::strtod(begin, &end);
    if (end == begin || !std::isfinite(value)) return bad();
    i += static_cast<size_t>(end - begin);
    if (i == text.size()) {
      if (any_unit) return bad();  // "1h30": the 30 of what?
      return total + value;
    }
    const char unit = text[i++];
    if (unit == 'h') {
      total += value * 3600;
    } else if (unit == 'm') {
      total += value * 60;
    } else if (unit == 's') {
      total += value;
    } else {
      return bad();
    }
    any_unit = true;
  }
  return total;
}

std::string FormatDuration(double seconds) {
  const int64_t s = static_cast<int64_t>(std::llround(std::max(0.0, seconds)));
  char buf[32];
  if (s >= 3600) {
    std::snprintf(buf, sizeof(buf), "%lldh%02lldm", static_cast<long long>(s / 3600),
                  static_cast<long long>(s % 3600 / 60));
  } else if (s >= 60) {
    std::snprintf(buf, sizeof(buf), "%lldm%02llds", static_cast<long long>(s / 60),
                  static_cast<long long>(s % 60));
  } else {
    std::snprintf(buf, sizeof(buf), "%llds", static_cast<long long>(s));
  }
  return buf;
}

void PrintTable(std::ostream& out, const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& row : rows) {
    width.resize(std::max(width.size(), row.size()));
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  }
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(width[i] - row[i].size() + 2, ' ');
    }
    out << line << "\n";
  }
}

}  // namespace kiln::cli
