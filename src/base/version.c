/* The library's version: the macros as this library was built, so that a
 * program can compare them with the ones it was compiled against. */
#include "cge/version.h"

const char *cge_version(void) { return CGE_VERSION_STRING; }
int cge_version_major(void) { return CGE_VERSION_MAJOR; }
int cge_version_minor(void) { return CGE_VERSION_MINOR; }
int cge_version_patch(void) { return CGE_VERSION_PATCH; }
