// The S3 client's request signing (AWS Signature Version 4) against AWS's
// published example, and its URL parsing. (The store on a real S3 server:
// tests/e2e/s3_artifacts_test.py.)
#include "storage/s3.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace kiln::storage {
namespace {

TEST(S3Test, SignsAwsDocumentedExample) {
  // "GET Object" from the S3 documentation's SigV4 header examples.
  const std::map<std::string, std::string> headers = {
      {"host", "examplebucket.s3.amazonaws.com"},
      {"range", "bytes=0-9"},
      {"x-amz-content-sha256", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
      {"x-amz-date", "20130524T000000Z"}};
  EXPECT_EQ(SignV4("GET", "/test.txt", "", headers, "us-east-1", "AKIAIOSFODNN7EXAMPLE",
                   "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
            "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/"
            "aws4_request,SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,"
            "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
}

TEST(S3Test, ParsesBucketPrefixAndEnvironment) {
  ::setenv("AWS_ACCESS_KEY_ID", "id", 1);
  ::setenv("AWS_SECRET_ACCESS_KEY", "secret", 1);
  ::setenv("KILN_S3_ENDPOINT", "http://127.0.0.1:9000", 1);
  auto loc = ParseS3Url("s3://bucket/some/prefix/");
  ASSERT_TRUE(loc.ok()) << loc.status();
  EXPECT_EQ(loc->bucket, "bucket");
  EXPECT_EQ(loc->prefix, "some/prefix");
  EXPECT_EQ(loc->endpoint, "http://127.0.0.1:9000");
  EXPECT_EQ(ParseS3Url("s3://").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseS3Url("http://x").status().code(), absl::StatusCode::kInvalidArgument);
  ::unsetenv("AWS_SECRET_ACCESS_KEY");
  auto no_key = ParseS3Url("s3://bucket");
  EXPECT_EQ(no_key.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(no_key.status().message().find("AWS_SECRET_ACCESS_KEY"), std::string::npos);
  ::unsetenv("AWS_ACCESS_KEY_ID");
  ::unsetenv("KILN_S3_ENDPOINT");
}

TEST(S3Test, UnreachableEndpointIsUnavailable) {
  S3Location loc;
  loc.endpoint = "http://127.0.0.1:1";
  loc.bucket = "b";
  loc.access_key = "id";
  loc.secret_key = "secret";
  S3Client client(loc);
  auto head = client.Head("x");
  ASSERT_FALSE(head.ok());
  EXPECT_EQ(head.status().code(), absl::StatusCode::kUnavailable) << head.status();
}

}  // namespace
}  // namespace kiln::storage
