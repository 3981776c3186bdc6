# Writes the build's version into a C++ source, at every build and only when
# it changed (so an unchanged version recompiles nothing): OVERRIDE when
# given (the configure option -DHLAB_BUILD_VERSION=..., for a tree without
# .git: the Dockerfiles pass their build argument HLAB_VERSION), else the
# commit the tree was built from, `git describe --always --dirty`
# ("0388a6b", "0388a6b-dirty" with uncommitted changes), else "unknown".
#
#   cmake -DSOURCE_DIR=<repo> -DOUTPUT=<file.cc> [-DOVERRIDE=v] \
#     -P cmake/HlabVersion.cmake
#
# common/CMakeLists.txt runs it as the target hlab_build_version_stamp;
# common/build_version.h declares what the source defines.
set(version "unknown")
find_program(HLAB_GIT git)
if(NOT "${OVERRIDE}" STREQUAL "")
  set(version "${OVERRIDE}")
elseif(HLAB_GIT)
  execute_process(
    COMMAND ${HLAB_GIT} -C ${SOURCE_DIR} describe --always --dirty --abbrev=12
    OUTPUT_VARIABLE described
    RESULT_VARIABLE described_rc
    ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(described_rc EQUAL 0 AND NOT described STREQUAL "")
    set(version "${described}")
  endif()
endif()
set(text "// Written by cmake/HlabVersion.cmake at build time; not in git.
#include \"common/build_version.h\"

namespace hlab {

const char* BuildVersion() { return \"${version}\"; }

}  // namespace hlab
")
set(old "")
if(EXISTS ${OUTPUT})
  file(READ ${OUTPUT} old)
endif()
if(NOT old STREQUAL text)
  file(WRITE ${OUTPUT} "${text}")
endif()
