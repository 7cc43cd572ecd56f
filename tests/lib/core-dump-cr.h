/* Cores for the `dump analyze` tests (static helpers, one copy per test program): the sample (or
 * another program) dumped in full by `dntrace dump` once its parked threads wait, and Microsoft's
 * dotnet-dump, the oracle (./bootstrap.sh installs it from NuGet). */
#ifndef DNT_TEST_CORE_DUMP_CR_H
#define DNT_TEST_CORE_DUMP_CR_H

#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "env-cr.h"
#include "files-cr.h"
#include "loopback.h"
#include "run.h"
#include "target-cr.h"
#include "target.h"

/* Microsoft's dotnet-dump, the oracle. */
static inline const char *dotnet_dump(void) { return diag_tool("dotnet-dump"); }

/* dotnet-dump analyze's answer to command on core (into theirs, the caller's): its text after its
 * first line, which says it loads the core. */
static inline const char *dotnet_dump_answer(const char *core, const char *command, struct dnt_run *theirs) {
  char *const argv[] = {(char *)dotnet_dump(), "analyze", (char *)core, "-c", (char *)command, "-c", "exit", NULL};
  cr_assert_eq(dnt_run_argv(theirs, argv, NULL, 300000), 0, "dotnet-dump: %s%s", theirs->out, theirs->err);
  const char *after = strstr(theirs->out, "Loading core dump: ");
  after = after ? strchr(after, '\n') : NULL;
  cr_assert(after, "dotnet-dump: %s", theirs->out);
  return after + 1;
}

/* command on core with --json, beside text (the same command's plain answer): py (a Python script
 * given the JSON's file and the text's) checks that they agree. */
static inline void expect_json_agrees(const char *core, const char *command, const char *text, const char *dir, const char *py) {
  struct dnt_run js;
  cr_assert_eq(dnt_run_dntrace(&js, "dump", "analyze", core, "--json", "-c", command, NULL), 0, "%s", js.err);
  char json[4400], plain[4400];
  snprintf(json, sizeof json, "%s/answer.json", dir);
  snprintf(plain, sizeof plain, "%s/answer.txt", dir);
  dnt_write_file(json, js.out, strlen(js.out));
  dnt_write_file(plain, text, strlen(text));
  expect_python(py, json, plain, NULL);
  dnt_run_free(&js);
}

/* Whether every thread of pid whose name begins with one of the prefixes sleeps (state S): the
 * sample's parked threads have reached their wait, not still in the runtime's prestub (JIT). */
static inline int parked(int pid, const char *const *prefixes) {
  char path[400], line[512];
  snprintf(path, sizeof path, "/proc/%d/task", pid);
  DIR *d = opendir(path);
  if (!d) return 0;
  int all = 1;
  for (struct dirent *e; (e = readdir(d)) && all;) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    snprintf(path, sizeof path, "/proc/%d/task/%s/stat", pid, e->d_name);
    FILE *fp = fopen(path, "re");
    if (!fp) continue;
    char *got = fgets(line, sizeof line, fp);
    fclose(fp);
    char *open = got ? strchr(line, '(') : NULL, *close = got ? strrchr(line, ')') : NULL;
    if (!open || !close || close[1] != ' ') continue;
    for (const char *const *p = prefixes; *p; p++)
      if (strncmp(open + 1, *p, strlen(*p)) == 0 && close[2] != 'S') all = 0;
  }
  closedir(d);
  return all;
}

/* A full core, dir/name, of the program exe (NULL: the sample) started with args and env (NULL:
 * none), written by `dntrace dump`; the program stopped after. */
static inline void dump_program(const char *exe, const char *dir, const char *const *args, const char *const *env,
                                const char *name, char *core, size_t cap) {
  dnt_target t;
  dnt_target_opts o = {.mode = DNT_TARGET_PLAIN, .exe = exe, .args = args, .env = env, .wait_socket = 1};
  char err[512], pid[32];
  cr_assert_eq(dnt_target_start(&t, &o, err, sizeof err), 0, "%s", err);
  snprintf(pid, sizeof pid, "%d", (int)t.pid);
  /* the parked threads waiting, so that their stacks are the ones a test names */
  static const char *const parking[] = {"idle-", "generic-park", "catch-park", NULL};
  for (double end = dnt_now_ms() + DNT_HANG_MS; !parked((int)t.pid, parking) && dnt_now_ms() < end;) /* timing: a hang's ceiling */
    usleep(10 * 1000);
  snprintf(core, cap, "%s/%s", dir, name);
  struct dnt_run r;
  int rc = dnt_run_dntrace(&r, "dump", "-p", pid, "--type", "full", "-o", core, NULL);
  dnt_target_stop(&t);
  cr_assert_eq(rc, 0, "dntrace dump: %s", r.err);
  dnt_run_free(&r);
}

static inline void dump_target(const char *dir, const char *const *args, const char *const *env, const char *name,
                               char *core, size_t cap) {
  dump_program(NULL, dir, args, env, name, core, cap);
}

/* A full core of the sample holding a heap whose shape is known (--heap N:K: N Sample.CacheEntry
 * held by the static Sample.Cache.Entries, each with a byte[] of K bytes, the first's pinned by a
 * handle, the last the key of a ConditionalWeakTable whose value is a Sample.TableValue; statics
 * HeapWork.Growth, a List, and HeapWork.Finalizables, ten Sample.Finalizable), with the GC given by
 * env. */
static inline void dump_heap_sample(const char *dir, const char *heap, const char *const *env, char *core, size_t cap) {
  const char *const args[] = {"--heap", heap, "--threads", "2", "--no-cpu", "--no-blocking", "--no-alloc",
                              "--no-exceptions", NULL};
  dump_target(dir, args, env, "heap.core", core, cap);
}

#endif
