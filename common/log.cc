#include "common/log.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>
#include <string>

namespace hlab {
namespace {

LogLevel LevelFromEnv() {
  const char* env = std::getenv("HLAB_LOG_LEVEL");
  if (env == nullptr) return LogLevel::kINFO;
  std::string v(env);
  if (v == "DEBUG") return LogLevel::kDEBUG;
  if (v == "WARNING") return LogLevel::kWARNING;
  if (v == "ERROR") return LogLevel::kERROR;
  return LogLevel::kINFO;
}

std::atomic<int>& Threshold() {
  static std::atomic<int> threshold{static_cast<int>(LevelFromEnv())};
  return threshold;
}

std::mutex& OutputMutex() {
  static std::mutex mu;
  return mu;
}

const char* LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDEBUG:
      return "D";
    case LogLevel::kINFO:
      return "I";
    case LogLevel::kWARNING:
      return "W";
    case LogLevel::kERROR:
      return "E";
  }
  return "?";
}

}  // namespace

void SetLogLevel(LogLevel level) { Threshold() = static_cast<int>(level); }

bool LogEnabled(LogLevel level) {
  return static_cast<int>(level) >= Threshold().load();
}

namespace internal {

LogMessage::LogMessage(LogLevel level, const char* file, int line)
    : level_(level) {
  const auto now = std::chrono::system_clock::now();
  const std::time_t secs = std::chrono::system_clock::to_time_t(now);
  std::tm tm{};
  localtime_r(&secs, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), "%H:%M:%S", &tm);
  const char* base = std::strrchr(file, '/');
  stream_ << LevelName(level_) << " " << stamp << " "
          << (base ? base + 1 : file) << ":" << line << "] ";
}

LogMessage::~LogMessage() {
  stream_ << '\n';
  const std::string text = stream_.str();
  std::lock_guard<std::mutex> lock(OutputMutex());
  std::fwrite(text.data(), 1, text.size(), stderr);
  std::fflush(stderr);
}

}  // namespace internal
}  // namespace hlab
