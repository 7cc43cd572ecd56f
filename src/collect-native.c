/* `collect --native`: perf beside the EventPipe session (collect-native.h). */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "builtin.h"
#include "collect-native.h"
#include "target.h"
#include "util.h"

/* perf record is started through `dntrace __child` (dntrace.c), so that it dies with us */
static char parent_pid[24];
static const char *const child_wrapper[] = {"/proc/self/exe", "__child", parent_pid, NULL};

void dnt_perf_leftovers(int verbose) {
  char report[2048];
  int n = dnt_perfmap_restore_forgotten(report, sizeof report);
  for (const char *w = report; *w;) {
    size_t len = strcspn(w, "\n");
    dnt_warning("%.*s", (int)len, w);
    w += len + (w[len] == '\n');
  }
  int dirs = dnt_perf_remove_stale(NULL);
  if (verbose)
    printf("%d perf map%s turned off again, %d %s of a killed dntrace removed\n", n, n == 1 ? "" : "s", dirs,
           dirs == 1 ? "directory" : "directories");
}

int dnt_perf_may_watch(int pid) {
  char msg[512];
  int rc = dnt_perf_check(pid, msg, sizeof msg);
  if (rc < 0) return dnt_error("%s", msg);
  if (rc > 0) dnt_warning("%s", msg);
  return 0;
}

int dnt_perf_usable(int pid) {
  if (dnt_perf_may_watch(pid) < 0) return -1;
  snprintf(parent_pid, sizeof parent_pid, "%d", (int)getpid());
  dnt_perf_set_child_wrapper(child_wrapper);
  dnt_perf_leftovers(0); /* what an earlier run killed before it could clean up */
  return 0;
}

void dnt_perfmap_on(struct dnt_perfmap_run *m, const dnt_session *s) {
  dnt_perfmap_begin(m, s->target.pid, s->target.ep.ns_pid, s->target.ep.path);
  if (m->warning[0]) dnt_warning("%s", m->warning);
}

void dnt_perfmap_off(struct dnt_perfmap_run *m, const dnt_session *s, const char *save_to) {
  dnt_perfmap_end(m, s->target.ep.path, s->ended, save_to);
  if (m->warning[0]) dnt_warning("%s", m->warning);
}

int dnt_perf_start(struct dnt_perf_record *pr, uv_loop_t *loop, int pid, int hz, int sched, const char *out,
                   void (*on_exit)(void *ud), void *ud) {
  if (dnt_perf_record_start(pr, loop, pid, hz, sched, out, on_exit, ud) == 0) return 0;
  return dnt_error("%s", pr->msg);
}

int dnt_perf_recorded(struct dnt_perf_record *pr, const char *out) {
  if (dnt_perf_record_ok(pr, out)) return 1;
  dnt_error("%s", pr->msg);
  return 0;
}

dnt_perf_reader *dnt_perf_read(struct dnt_profile *prof, const char *data, const char *trace, const char *map,
                               double sample_ms, struct dnt_symtab *perfmap, dnt_perf_observe_fn fn, void *ud) {
  struct dnt_perf_load_info info;
  dnt_perf_reader *r = dnt_perf_load(prof, data, map, sample_ms, perfmap, fn, ud, &info);
  for (const char *w = info.warnings; *w;) {
    size_t n = strcspn(w, "\n");
    dnt_warning("%.*s", (int)n, w);
    w += n + (w[n] == '\n');
  }
  if (!r) {
    dnt_error("%s", info.error);
    return NULL;
  }
  double secs = info.script_seconds, mb = (double)info.script_bytes / 1e6;
  printf("Read %.1f MB of perf script output in %.2f s (%.0f MB/s, perf script itself included)\n", mb, secs,
         secs > 0 ? mb / secs : 0);
  if (!trace) return r; /* the caller reads the method table, then finishes prof */
  char msg[1024];
  dnt_profile_methods_only(prof, 1); /* its SampleProfiler samples are another view */
  if (dnt_profiles_load(&prof, 1, 0, trace, msg, sizeof msg) < 0)
    dnt_warning("%s (managed frames are named from the perf map alone)", msg);
  dnt_profile_methods_only(prof, 0);
  if (dnt_profile_finish(prof) != 0) {
    dnt_error("out of memory naming the frames of '%s'", data);
    dnt_perf_reader_free(r);
    return NULL;
  }
  return r;
}

char *dnt_native_sibling(const char *trace, const char *ext) {
  size_t n = strlen(trace);
  size_t stem = n > 9 && strcmp(trace + n - 9, ".nettrace") == 0 ? n - 9 : n;
  char *out = dnt_xmalloc(stem + strlen(ext) + 1);
  memcpy(out, trace, stem);
  strcpy(out + stem, ext);
  return out;
}

/* Whether "tid\t" starts a line of the list. */
static int listed(const char *names, const char *key) {
  if (!names) return 0;
  if (strncmp(names, key, strlen(key)) == 0) return 1;
  char nl_key[40];
  snprintf(nl_key, sizeof nl_key, "\n%s", key);
  return strstr(names, nl_key) != NULL;
}

/* Adds the target's threads to the list (a thread seen twice keeps its first line). */
static void note_threads(struct dnt_native *n, int pid) {
  char dir[64];
  snprintf(dir, sizeof dir, "/proc/%d/task", pid);
  DIR *d = opendir(dir);
  if (!d) return;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
    char key[32], name[64];
    snprintf(key, sizeof key, "%.20s\t", e->d_name);
    if (listed(n->names, key)) continue;
    if (!dsipc_thread_comm(pid, strtoull(e->d_name, NULL, 10), name, sizeof name)[0]) continue; /* gone */
    size_t add = strlen(key) + strlen(name) + 2;
    char *grown = realloc(n->names, n->names_len + add + 1);
    if (!grown) dnt_die(1, "out of memory");
    n->names = grown;
    n->names_len += (size_t)snprintf(n->names + n->names_len, add + 1, "%s%s\n", key, name);
  }
  closedir(d);
}

void dnt_native_begin(struct dnt_native *n, const dnt_session *s, const char *trace, int hz, int sched_and_threads) {
  memset(n, 0, sizeof *n);
  n->hz = hz;
  n->began = 1;
  if (sched_and_threads) {
    n->sched = dnt_perf_can_trace_sched();
    if (!n->sched)
      dnt_warning("perf cannot record the scheduler's switches (tracefs not mounted or not readable: as root, "
                  "'mount -t tracefs nodev /sys/kernel/tracing'); compare will judge by cpu-clock samples alone");
    n->threads = dnt_native_sibling(trace, ".threads");
  }
  n->data = dnt_native_sibling(trace, ".perf.data");
  n->map = dnt_native_sibling(trace, ".perf.map");
  dnt_perfmap_on(&n->pm, s);
}

int dnt_native_start(struct dnt_native *n, uv_loop_t *loop, const dnt_session *s, void (*on_exit)(void *), void *ud) {
  if (n->threads) note_threads(n, s->target.pid);
  return dnt_perf_start(&n->perf, loop, s->target.pid, n->hz, n->sched, n->data, on_exit, ud);
}

void dnt_native_stop(struct dnt_native *n, const dnt_session *s) {
  if (n->perf.running && n->threads) note_threads(n, s->target.pid);
  dnt_perf_record_stop(&n->perf);
}

int dnt_native_end(struct dnt_native *n, const dnt_session *s) {
  n->began = 0;
  dnt_perfmap_off(&n->pm, s, n->map);
  if (n->threads) {
    FILE *fp = fopen(n->threads, "w");
    int written = fp && (!n->names_len || fwrite(n->names, 1, n->names_len, fp) == n->names_len);
    if (fp && fclose(fp) != 0) written = 0;
    if (!written) dnt_warning("cannot write '%s': compare will show thread ids only", n->threads);
  }
  return dnt_perf_recorded(&n->perf, n->data) ? 0 : -1;
}

void dnt_native_abandon(struct dnt_native *n, const dnt_session *s, uv_loop_t *loop) {
  n->began = 0;
  dnt_perf_record_stop(&n->perf);
  dnt_loop_run(loop, UV_RUN_DEFAULT, __func__); /* until perf has exited and its pipe is closed */
  dnt_perfmap_off(&n->pm, s, NULL);
  unlink(n->data);
}

void dnt_native_release(struct dnt_native *n) {
  free(n->data);
  free(n->map);
  free(n->threads);
  free(n->names);
  memset(n, 0, sizeof *n);
}
