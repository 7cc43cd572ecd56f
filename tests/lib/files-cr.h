/* Files for the tests that write their own input (static helpers, one copy per test program): a
 * fresh directory, a file written whole, a directory removed with what is in it. Failures are
 * the test's (Criterion assertions). */
#ifndef DNT_TEST_FILES_CR_H
#define DNT_TEST_FILES_CR_H

#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A new directory /tmp/PREFIX-XXXXXX (the caller frees the path). */
static inline char *dnt_temp_dir(const char *prefix) {
  char *d = malloc(strlen(prefix) + 16);
  cr_assert(d);
  sprintf(d, "/tmp/%s-XXXXXX", prefix);
  cr_assert(mkdtemp(d), "mkdtemp: %s", strerror(errno));
  return d;
}

static inline void dnt_write_file(const char *path, const void *p, size_t n) {
  FILE *fp = fopen(path, "wb");
  cr_assert(fp, "%s: %s", path, strerror(errno));
  cr_assert_eq(fwrite(p, 1, n, fp), n);
  cr_assert_eq(fclose(fp), 0);
}

static inline void dnt_rm_rf(const char *dir) {
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  cr_assert_eq(system(cmd), 0);
}

#endif
