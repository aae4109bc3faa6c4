// The tracker's Prometheus counters (tracker/metrics.h) as exposition text.
#include "tracker/metrics.h"

#include <gtest/gtest.h>

#include "tracker/dispatcher.h"

namespace kiln::tracker {
namespace {

TEST(MetricsTest, CountsMeasurementsErrorsExpiriesAndLatency) {
  Metrics m;
  std::vector<MeasureOutcome> batch(3);
  batch[0].error_kind = storage::ErrorKind::kNone;
  batch[1].error_kind = storage::ErrorKind::kTimeout;
  batch[2].error_kind = storage::ErrorKind::kTimeout;
  m.CountResults("cpu", batch, 0.02, 5000);
  std::vector<MeasureOutcome> lost(2);
  for (auto& o : lost) o.error_kind = storage::ErrorKind::kAgentLost;
  m.CountResults("cpu", lost, -1, 5500);  // given up: no latency observed
  m.CountLeaseExpiry("cpu");
  const std::string text = m.Render();
  for (const char* line : {"kiln_measurements_total{key=\"cpu\"} 5\n",
                           "kiln_measurement_errors_total{kind=\"timeout\"} 2\n",
                           "kiln_measurement_errors_total{kind=\"agent_lost\"} 2\n",
                           "kiln_lease_expiries_total{key=\"cpu\"} 1\n",
                           "kiln_batch_latency_seconds_bucket{le=\"0.01\"} 0\n",
                           "kiln_batch_latency_seconds_bucket{le=\"0.05\"} 1\n",
                           "kiln_batch_latency_seconds_count 1\n"}) {
    EXPECT_NE(text.find(line), std::string::npos) << line << "\n" << text;
  }
  EXPECT_EQ(text.find("kind=\"none\""), std::string::npos) << text;
  EXPECT_DOUBLE_EQ(m.MeasurementsPerSecond(6000, 10000), 0.5);  // 5 in the last 10 s
}

}  // namespace
}  // namespace kiln::tracker
