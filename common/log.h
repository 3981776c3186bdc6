// Minimal leveled logging to stderr, the one logging facility of hlab.
//
// Thread-safe: each message is formatted into a buffer and written with one
// call under a mutex, so lines from different threads never interleave.
//
//   HLAB_LOG(INFO) << "leased task " << id;
//   HLAB_LOG(WARNING) << "checkpoint " << path << " failed its checksum";
//
// The threshold comes from HLAB_LOG_LEVEL (DEBUG, INFO, WARNING, ERROR;
// default INFO) or SetLogLevel().
#ifndef HLAB_COMMON_LOG_H_
#define HLAB_COMMON_LOG_H_

#include <sstream>

namespace hlab {

enum class LogLevel { kDEBUG = 0, kINFO = 1, kWARNING = 2, kERROR = 3 };

void SetLogLevel(LogLevel level);
bool LogEnabled(LogLevel level);

namespace internal {

// One log line; written out in the destructor.
class LogMessage {
 public:
  LogMessage(LogLevel level, const char* file, int line);
  ~LogMessage();
  LogMessage(const LogMessage&) = delete;
  LogMessage& operator=(const LogMessage&) = delete;
  std::ostream& stream() { return stream_; }

 private:
  LogLevel level_;
  std::ostringstream stream_;
};

}  // namespace internal
}  // namespace hlab

#define HLAB_LOG(level)                                                \
  if (!::hlab::LogEnabled(::hlab::LogLevel::k##level)) {               \
  } else                                                               \
    ::hlab::internal::LogMessage(::hlab::LogLevel::k##level, __FILE__, \
                                 __LINE__)                             \
        .stream()

#endif  // HLAB_COMMON_LOG_H_
