// cmake/HlabTorch.cmake, the configure-time checks of the LibTorch hlab
// found (docs/training.md, "Building for GPUs"): each test lays out a fake
// LibTorch (the variables find_package(Torch) sets, and the headers and
// libraries the module looks at), configures a one-file project that
// includes the module, and reads what CMake printed and decided.
#include <stdlib.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace hlab {
namespace {

namespace fs = std::filesystem;

struct Configured {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

class HlabTorchCmakeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern =
        (fs::temp_directory_path() / "hlab-torch-cmake-XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    root_ = pattern;
    prefix_ = root_ / "site-packages" / "torch";
    fs::create_directories(prefix_ / "include" / "ATen");
    WriteFile(prefix_ / "include" / "ATen" / "ATen.h", "#pragma once\n");
    fs::create_directories(root_ / "probe");
    WriteFile(root_ / "probe" / "CMakeLists.txt",
              "cmake_minimum_required(VERSION 3.22)\n"
              "project(hlab_torch_probe LANGUAGES CXX)\n"
              "set(CMAKE_CXX_STANDARD 17)\n"
              "list(APPEND CMAKE_MODULE_PATH \"" HLAB_SOURCE_DIR
              "/cmake\")\n"
              "include(HlabTorch)\n"
              "message(STATUS \"probe: standard=${CMAKE_CXX_STANDARD} "
              "cuda=${HLAB_TORCH_CUDA} nccl=${HLAB_NCCL_INCLUDE} "
              "gloo=${HLAB_TORCH_GLOO}\")\n");
  }
  void TearDown() override {
    std::error_code ignored;
    fs::remove_all(root_, ignored);
  }

  static void WriteFile(const fs::path& path, const std::string& text) {
    fs::create_directories(path.parent_path());
    std::ofstream(path) << text;
  }

  // Configures the probe against the fake LibTorch, with this build's
  // generator and compiler. The system's own search paths are off, so only
  // the fake's files can be found.
  Configured Configure(const std::vector<std::string>& defines) {
    std::string command =
        "env -u NCCL_HOME -u CUDA_HOME '" HLAB_CMAKE_COMMAND "' -S '" +
        (root_ / "probe").string() + "' -B '" + (root_ / "build").string() +
        "' -G '" HLAB_CMAKE_GENERATOR
        "' '-DCMAKE_MAKE_PROGRAM=" HLAB_CMAKE_MAKE_PROGRAM
        "' '-DCMAKE_CXX_COMPILER=" HLAB_CXX_COMPILER
        "' --no-warn-unused-cli -DCMAKE_FIND_USE_CMAKE_SYSTEM_PATH=OFF"
        " -DCMAKE_FIND_USE_SYSTEM_ENVIRONMENT_PATH=OFF"
        " -DTorch_VERSION=2.14.0 -DTorch_DIR=/fake/share/cmake/Torch"
        " '-DTORCH_INSTALL_PREFIX=" +
        prefix_.string() +
        "' '-DTORCH_INCLUDE_DIRS=" + (prefix_ / "include").string() + "'";
    for (const std::string& define : defines) command += " '" + define + "'";
    command += " 2>&1";
    Configured result;
    FILE* pipe = popen(command.c_str(), "r");
    if (pipe == nullptr) return result;
    char buffer[4096];
    size_t n;
    while ((n = fread(buffer, 1, sizeof buffer, pipe)) > 0) {
      result.output.append(buffer, n);
    }
    int status = pclose(pipe);
    result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    // CMake wraps its error messages; one space for each run of blanks.
    std::string flat;
    for (char c : result.output) {
      bool blank = c == ' ' || c == '\n' || c == '\t';
      if (!blank || flat.empty() || flat.back() != ' ') flat += blank ? ' ' : c;
    }
    result.output = flat;
    return result;
  }

  fs::path root_;
  fs::path prefix_;  // the fake site-packages/torch
};

TEST_F(HlabTorchCmakeTest, AtenThatRefusesCxx17RaisesTheStandardTo20) {
  WriteFile(prefix_ / "include" / "ATen" / "ATen.h",
            "#pragma once\n#if !defined(_MSC_VER) && __cplusplus < 202002L\n"
            "#error C++20 or later compatible compiler is required to use "
            "ATen.\n#endif\n");
  Configured configured = Configure({});
  ASSERT_EQ(configured.exit_code, 0) << configured.output;
  EXPECT_NE(configured.output.find("building as C++20"), std::string::npos)
      << configured.output;
  EXPECT_NE(configured.output.find("probe: standard=20"), std::string::npos)
      << configured.output;
}

TEST_F(HlabTorchCmakeTest, AnAtenThatTakesCxx17LeavesTheStandard) {
  Configured configured = Configure({});
  ASSERT_EQ(configured.exit_code, 0) << configured.output;
  EXPECT_NE(configured.output.find("probe: standard=17 cuda=OFF"),
            std::string::npos)
      << configured.output;
  EXPECT_EQ(configured.output.find("C++20"), std::string::npos)
      << configured.output;
}

TEST_F(HlabTorchCmakeTest, TheOldCxxAbiStopsTheConfigureWithWhatToUse) {
  Configured configured =
      Configure({"-DTORCH_CXX_FLAGS=-D_GLIBCXX_USE_CXX11_ABI=0"});
  EXPECT_NE(configured.exit_code, 0) << configured.output;
  EXPECT_NE(configured.output.find("old C++ ABI"), std::string::npos)
      << configured.output;
  EXPECT_NE(configured.output.find("torch >= 2.6"), std::string::npos)
      << configured.output;
  EXPECT_EQ(configured.output.find("probe:"), std::string::npos);
}

TEST_F(HlabTorchCmakeTest, ACudaLibTorchWithoutNcclHeadersSaysWhatToInstall) {
  Configured configured = Configure({"-DTORCH_CUDA_LIBRARIES=cudart"});
  EXPECT_NE(configured.exit_code, 0) << configured.output;
  EXPECT_NE(configured.output.find("nccl.h was not found"), std::string::npos)
      << configured.output;
  EXPECT_NE(configured.output.find("NCCL_HOME"), std::string::npos)
      << configured.output;
}

TEST_F(HlabTorchCmakeTest, NcclHeadersAreFoundInTheNvidiaWheel) {
  fs::path include = root_ / "site-packages" / "nvidia" / "nccl" / "include";
  WriteFile(include / "nccl.h", "#pragma once\n");
  Configured configured = Configure({"-DTORCH_CUDA_LIBRARIES=cudart"});
  ASSERT_EQ(configured.exit_code, 0) << configured.output;
  EXPECT_NE(configured.output.find("cuda=ON nccl=" + include.string()),
            std::string::npos)
      << configured.output;
}

TEST_F(HlabTorchCmakeTest, TheWheelsOwnOpenMpRuntimeIsLinked) {
  fs::path gomp = prefix_ / "lib" / "libgomp-a34b3233.so.1";
  WriteFile(gomp, "");
  Configured configured = Configure({});
  ASSERT_EQ(configured.exit_code, 0) << configured.output;
  EXPECT_NE(
      configured.output.find("OpenMP runtime: LibTorch's own " + gomp.string()),
      std::string::npos)
      << configured.output;
}

TEST_F(HlabTorchCmakeTest, GlooHeadersDecideWhetherCpuRanksAreBuilt) {
  Configured without = Configure({});
  ASSERT_EQ(without.exit_code, 0) << without.output;
  EXPECT_NE(without.output.find("no Gloo headers"), std::string::npos)
      << without.output;
  EXPECT_NE(without.output.find("gloo=OFF"), std::string::npos);

  WriteFile(prefix_ / "include" / "gloo" / "config.h", "#pragma once\n");
  fs::remove_all(root_ / "build");
  Configured with = Configure({});
  ASSERT_EQ(with.exit_code, 0) << with.output;
  EXPECT_NE(with.output.find("gloo=ON"), std::string::npos) << with.output;
}

}  // namespace
}  // namespace hlab
