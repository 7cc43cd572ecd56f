/* `collect --native`: perf beside the EventPipe session (collect-native.h). */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "collect-native.h"
#include "util.h"

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
    char key[32], path[128], name[64] = "";
    snprintf(key, sizeof key, "%.20s\t", e->d_name);
    if (listed(n->names, key)) continue;
    snprintf(path, sizeof path, "/proc/%d/task/%.20s/comm", pid, e->d_name);
    FILE *fp = fopen(path, "re");
    if (!fp) continue;
    if (!fgets(name, sizeof name, fp)) name[0] = '\0';
    fclose(fp);
    name[strcspn(name, "\n")] = '\0';
    size_t add = strlen(key) + strlen(name) + 2;
    char *grown = realloc(n->names, n->names_len + add + 1);
    if (!grown) dnt_die(1, "out of memory");
    n->names = grown;
    n->names_len += (size_t)snprintf(n->names + n->names_len, add + 1, "%s%s\n", key, name);
  }
  closedir(d);
}

int dnt_native_begin(struct dnt_native *n, const dnt_session *s, const char *trace, int hz) {
  memset(n, 0, sizeof *n);
  if (dnt_perf_check() < 0) return -1;
  n->hz = hz;
  n->sched = dnt_perf_can_trace_sched();
  if (!n->sched)
    dnt_warning("perf cannot record the scheduler's switches (tracefs not mounted or not readable: as root, "
                "'mount -t tracefs nodev /sys/kernel/tracing'); compare will judge by cpu-clock samples alone");
  n->data = dnt_native_sibling(trace, ".perf.data");
  n->map = dnt_native_sibling(trace, ".perf.map");
  n->threads = dnt_native_sibling(trace, ".threads");
  dnt_perfmap_begin(&n->pm, s);
  return 0;
}

int dnt_native_start(struct dnt_native *n, uv_loop_t *loop, const dnt_session *s, void (*on_exit)(void *), void *ud) {
  note_threads(n, s->target.pid);
  return dnt_perf_record_start(&n->perf, loop, s->target.pid, n->hz, n->sched, n->data, on_exit, ud);
}

void dnt_native_stop(struct dnt_native *n, const dnt_session *s) {
  if (n->perf.running) note_threads(n, s->target.pid);
  dnt_perf_record_stop(&n->perf);
}

int dnt_native_end(struct dnt_native *n, const dnt_session *s) {
  dnt_perfmap_end(&n->pm, s, n->map);
  FILE *fp = fopen(n->threads, "w");
  int written = fp && (!n->names_len || fwrite(n->names, 1, n->names_len, fp) == n->names_len);
  if (fp && fclose(fp) != 0) written = 0;
  if (!written) dnt_warning("cannot write '%s': compare will show thread ids only", n->threads);
  if (!dnt_perf_record_ok(&n->perf, n->data)) return -1;
  printf("Native recording: %s (%s), %s\n", n->data,
         n->sched ? "cpu-clock and sched_switch" : "cpu-clock only: no readable tracefs", n->map);
  return 0;
}

void dnt_native_abandon(struct dnt_native *n, const dnt_session *s, uv_loop_t *loop) {
  dnt_perf_record_stop(&n->perf);
  uv_run(loop, UV_RUN_DEFAULT); /* until perf has exited and its pipe is closed */
  dnt_perfmap_end(&n->pm, s, NULL);
  unlink(n->data);
}

void dnt_native_release(struct dnt_native *n) {
  free(n->data);
  free(n->map);
  free(n->threads);
  free(n->names);
  memset(n, 0, sizeof *n);
}
