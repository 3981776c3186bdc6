#include "analysis/points_csv.h"
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

namespace hlab::analysis {
namespace {

// The status message, or "" when ok.
template <typename T>
std::string Message(const absl::StatusOr<T>& result) {
  return result.ok() ? "" : std::string(result.status().message());
}

TEST(PointsCsvTest, ParsesHeaderCaseInsensitivelyInAnyOrder) {
  const std::string text =
      "# runs of the swa-128 sweep\n"
      "arch, LOSS ,d,n\r\n"
      "swa,3.25,1e9,\"1.2e8\"\r\n"
      "\n"
      "swa,2.75,2e9,3e8\n";
  auto points = ParsePointsCsv(text, "runs.csv");
  ASSERT_TRUE(points.ok()) << points.status();
  ASSERT_EQ(points->size(), 2u);
  EXPECT_EQ((*points)[0].n, 1.2e8);
  EXPECT_EQ((*points)[0].d, 1e9);
  EXPECT_EQ((*points)[0].loss, 3.25);
  EXPECT_EQ((*points)[1].n, 3e8);
}

TEST(PointsCsvTest, ErrorsNameTheFileLineAndColumn) {
  struct Case {
    const char* text;
    const char* expected;
  };
  const Case cases[] = {
      {"N,D,loss\n1e8,1e9,3.1\n1e8,abc,3.0\n",
       "runs.csv:3: column 'D': 'abc' is not a number"},
      {"N,D,loss\n1e8,1e9,3.1\n\n1e8,1e9,-2\n",
       "runs.csv:4: column 'loss': -2 must be finite and > 0"},
      {"N,D,loss\n0,1e9,3.1\n", "runs.csv:2: column 'N': 0 must be"},
      {"N,D,loss\n1e8,nan,3.1\n", "runs.csv:2: column 'D': nan must be"},
      {"N,D,loss\n1e8,inf,3.1\n", "runs.csv:2: column 'D': inf must be"},
      {"N,D,loss\n1e8,1e9\n", "runs.csv:2: expected 3 fields"},
      {"# comment\nN,tokens,loss\n1,2,3\n",
       "runs.csv:2: missing column 'D' (header: N,tokens,loss)"},
      {"", "runs.csv: empty file"},
      {"N,D,loss\n", "runs.csv: no data rows"},
  };
  for (const Case& c : cases) {
    auto points = ParsePointsCsv(c.text, "runs.csv");
    EXPECT_EQ(points.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(Message(points).find(c.expected), std::string::npos)
        << "got: " << Message(points) << "\nwant: " << c.expected;
  }
}

TEST(PointsCsvTest, ReadsFilesAndReportsMissingOnes) {
  char path[] = "/tmp/hlab-points-csv-test-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  std::ofstream(path) << "N,D,loss\n1e8,1e9,3.1\n1e8,2e9,x\n";
  auto points = ReadPointsCsv(path);
  EXPECT_NE(Message(points).find(std::string(path) + ":3: column 'loss'"),
            std::string::npos)
      << Message(points);
  std::ofstream(path) << "N,D,loss\n1e8,1e9,3.1\n";
  points = ReadPointsCsv(path);
  ASSERT_TRUE(points.ok());
  EXPECT_EQ(points->size(), 1u);
  std::remove(path);

  points = ReadPointsCsv("/nonexistent/runs.csv");
  EXPECT_EQ(points.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(Message(points).find("cannot open '/nonexistent/runs.csv'"),
            std::string::npos);
}

TEST(PointsCsvTest, ChinchillaPreprocessingAsTheReplication) {
  // Columns as in the shipped file; D = FLOP / (6 N); the 2 highest losses
  // (5.0 and 4.0) are dropped, the others keep file order.
  const std::string text =
      "x,y,color,Model Size,Training FLOP,hex_color,loss\n"
      "1,2,#fff,1e8,6e18,#fff,3.0\n"
      "1,2,#fff,2e8,1.2e19,#fff,5.0\n"
      "1,2,#fff,4e8,2.4e19,#fff,2.5\n"
      "1,2,#fff,1e9,6e19,#fff,4.0\n"
      "1,2,#fff,3e9,1.8e20,#fff,2.2\n";
  auto points = ParseChinchillaCsv(text, "fig4.csv", 2);
  ASSERT_TRUE(points.ok()) << points.status();
  ASSERT_EQ(points->size(), 3u);
  EXPECT_EQ((*points)[0].n, 1e8);
  EXPECT_DOUBLE_EQ((*points)[0].d, 6e18 / (6 * 1e8));
  EXPECT_EQ((*points)[0].loss, 3.0);
  EXPECT_EQ((*points)[1].loss, 2.5);
  EXPECT_EQ((*points)[2].n, 3e9);
  EXPECT_NE(
      Message(ParseChinchillaCsv(text, "fig4.csv", 5)).find("cannot drop 5"),
      std::string::npos);
  EXPECT_NE(Message(ParseChinchillaCsv("N,D,loss\n1,2,3\n", "fig4.csv"))
                .find("missing column 'Model Size'"),
            std::string::npos);
}

}  // namespace
}  // namespace hlab::analysis
