// The build a binary comes from, for `--version` and for what a worker
// tells the coordinator when it registers (`hlab workers` shows it), so that
// workers running another build than the coordinator's are seen.
//
// Thread-safety: thread-safe (a constant).
//
//   std::cout << "hlab-worker " << BuildVersion() << "\n";
#ifndef HLAB_COMMON_BUILD_VERSION_H_
#define HLAB_COMMON_BUILD_VERSION_H_

namespace hlab {

// The commit the tree was built from, as `git describe --always --dirty`
// gives it ("0388a6b2c1d4", "...-dirty" with uncommitted changes); the
// configure option HLAB_BUILD_VERSION when set (a tree without .git, as in
// the Docker builds); else "unknown". Defined in a source that
// cmake/HlabVersion.cmake writes at every build.
const char* BuildVersion();

}  // namespace hlab

#endif  // HLAB_COMMON_BUILD_VERSION_H_
