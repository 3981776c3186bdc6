// Helpers for the data tests: a scratch directory removed at exit, file
// writers (plain and gzip), and where the shared real data lives.
#ifndef HLAB_TESTS_DATA_TEST_UTIL_H_
#define HLAB_TESTS_DATA_TEST_UTIL_H_

#include <zlib.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

#include "gtest/gtest.h"

namespace hlab::data::testing {

// A fresh directory under the system temp dir, removed on destruction.
class ScratchDir {
 public:
  ScratchDir() {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "hlab_data_test_XXXXXX")
            .string();
    path_ = ::mkdtemp(pattern.data());
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string path() const { return path_; }
  std::string operator/(const std::string& name) const {
    return path_ + "/" + name;
  }

 private:
  std::string path_;
};

inline void WriteFile(const std::string& path, const std::string& contents) {
  std::filesystem::create_directories(
      std::filesystem::path(path).parent_path());
  std::ofstream out(path, std::ios::binary);
  out << contents;
  ASSERT_TRUE(out.good()) << path;
}

inline void WriteGzipFile(const std::string& path,
                          const std::string& contents) {
  gzFile gz = gzopen(path.c_str(), "wb");
  ASSERT_NE(gz, nullptr) << path;
  ASSERT_EQ(
      gzwrite(gz, contents.data(), static_cast<unsigned>(contents.size())),
      static_cast<int>(contents.size()));
  ASSERT_EQ(gzclose(gz), Z_OK);
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// $HLAB_SHARED_DIR/data (a relative HLAB_SHARED_DIR is taken relative to the
// repository root), default <repo>/../shared/data.
inline std::string SharedDataDir() {
  const char* shared = std::getenv("HLAB_SHARED_DIR");
  std::string dir = shared != nullptr ? shared : "../shared";
  if (dir.empty() || dir[0] != '/')
    dir = std::string(HLAB_REPO_ROOT) + "/" + dir;
  return dir + "/data";
}

// The shared file or directory `relative`, or "" when it is absent.
inline std::string SharedDataPath(const std::string& relative) {
  std::string path = SharedDataDir() + "/" + relative;
  std::error_code ec;
  return std::filesystem::exists(path, ec) ? path : "";
}

}  // namespace hlab::data::testing

#endif  // HLAB_TESTS_DATA_TEST_UTIL_H_
