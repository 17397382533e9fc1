// Makes rename() fail with EIO, as a full or failing disk, a quota or a network file system
// may, for seqpool-run's tests (LD_PRELOAD): a rename to a path that ends in $FAILING_RENAME,
// and, where $FAILING_RENAME_FROM is n, the n-th rename and every one after it.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

static int renames = 0;

int rename(const char* from, const char* to) {
  ++renames;
  const char* ending = getenv("FAILING_RENAME");
  const char* from_count = getenv("FAILING_RENAME_FROM");
  const size_t length = ending != NULL ? strlen(ending) : 0, to_length = strlen(to);
  if ((length > 0 && to_length >= length && strcmp(to + to_length - length, ending) == 0) ||
      (from_count != NULL && renames >= atoi(from_count))) {
    errno = EIO;
    return -1;
  }
  int (*const renamed)(const char*, const char*) = (int (*)(const char*, const char*))dlsym(RTLD_NEXT, "rename");
  return renamed(from, to);
}
