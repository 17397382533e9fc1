// File-system faults for seqpool-run's tests (LD_PRELOAD), each asked for by an environment
// variable:
// - rename() fails with EIO, as a full or failing disk, a quota or a network file system may:
//   a rename to a path that ends in $FAILING_RENAME, and, where $FAILING_RENAME_FROM is n, the
//   n-th rename and every one after it;
// - remove() of a path that ends in $LINK_AFTER_REMOVE makes a symbolic link to $LINK_TARGET
//   there after the real remove(), whatever it returned, as another process racing the tool
//   for the name might.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int renames = 0;

static int ends_in(const char* path, const char* variable) {
  const char* ending = getenv(variable);
  const size_t length = ending != NULL ? strlen(ending) : 0, path_length = strlen(path);
  return length > 0 && path_length >= length && strcmp(path + path_length - length, ending) == 0;
}

int rename(const char* from, const char* to) {
  ++renames;
  const char* from_count = getenv("FAILING_RENAME_FROM");
  if (ends_in(to, "FAILING_RENAME") || (from_count != NULL && renames >= atoi(from_count))) {
    errno = EIO;
    return -1;
  }
  int (*const renamed)(const char*, const char*) = (int (*)(const char*, const char*))dlsym(RTLD_NEXT, "rename");
  return renamed(from, to);
}

int remove(const char* path) {
  int (*const removed)(const char*) = (int (*)(const char*))dlsym(RTLD_NEXT, "remove");
  const int result = removed(path);
  const int failure = errno;
  if (ends_in(path, "LINK_AFTER_REMOVE") && getenv("LINK_TARGET") != NULL) symlink(getenv("LINK_TARGET"), path);
  errno = failure;
  return result;
}
