# Writes the build's version into a C++ source, at every build and only when
# it changed (so an unchanged version recompiles nothing): the commit the
# tree was built from, `git describe --always --dirty` ("0388a6b",
# "0388a6b-dirty" with uncommitted changes), or "unknown" outside a git
# checkout (a source tarball, a Docker context without .git).
#
#   cmake -DSOURCE_DIR=<repo> -DOUTPUT=<file.cc> -P cmake/HlabVersion.cmake
#
# common/CMakeLists.txt runs it as the target hlab_build_version_stamp;
# common/build_version.h declares what the source defines.
set(version "unknown")
find_program(HLAB_GIT git)
if(HLAB_GIT)
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
