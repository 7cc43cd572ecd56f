/* `make bench` figures for collect: time from starting `dntrace collect` to the first byte in
 * the output, and a high-rate session (the sample target emitting EventSource events as fast as
 * asked): dntrace's CPU time, peak RSS, bytes/s and events/s received. Printed, never asserted. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/nt-scan.h"
#include "ntr.h"
#include "lib/run.h"
#include "lib/target.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static pid_t spawn(char *const argv[]) {
  pid_t pid = fork();
  if (pid == 0) {
    int devnull = open("/dev/null", O_RDWR);
    dup2(devnull, 0);
    dup2(devnull, 1);
    dup2(devnull, 2);
    execv(argv[0], argv);
    _exit(127);
  }
  return pid;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static void first_byte(const dnt_target *t) {
  enum { RUNS = 7 };
  double ms[RUNS];
  char pid[16];
  snprintf(pid, sizeof pid, "%d", (int)t->pid);
  for (int i = 0; i < RUNS; i++) {
    const char *out = "/tmp/dnt-bench-first.nettrace";
    unlink(out);
    char *argv[] = {(char *)dnt_bin(), "collect", "-p", pid, "-o", (char *)out, "--duration", "1s", "--profile",
                    "gc-collect", NULL};
    double t0 = now();
    pid_t d = spawn(argv);
    struct stat st;
    ms[i] = -1;
    /* collect writes a hidden temporary beside out (.NAME.dntrace-XXXXXX) and renames it over
     * out at the end: its first byte is the first byte written */
    while (now() - t0 < 5 && ms[i] < 0) {
      if (stat(out, &st) == 0 && st.st_size > 0) ms[i] = (now() - t0) * 1000;
      DIR *dir = opendir("/tmp");
      struct dirent *e;
      while (dir && ms[i] < 0 && (e = readdir(dir))) {
        char path[300];
        snprintf(path, sizeof path, "/tmp/%s", e->d_name);
        if (strncmp(e->d_name, ".dnt-bench-first.nettrace.", 26) == 0 && stat(path, &st) == 0 && st.st_size > 0)
          ms[i] = (now() - t0) * 1000;
      }
      if (dir) closedir(dir);
      if (ms[i] < 0) usleep(100);
    }
    waitpid(d, NULL, 0);
    unlink(out);
  }
  qsort(ms, RUNS, sizeof ms[0], cmp_double);
  printf("collect: time to the first byte written: best %.1f ms, median %.1f ms (%d runs)\n", ms[0], ms[RUNS / 2], RUNS);
}

static void high_rate(long rate, int seconds) {
  char rate_arg[32];
  snprintf(rate_arg, sizeof rate_arg, "%ld", rate);
  const char *const args[] = {"--no-cpu", "--no-alloc", "--no-blocking", "--event-rate", rate_arg, NULL};
  dnt_target t;
  dnt_target_opts o = {.mode = DNT_TARGET_PLAIN, .args = args, .wait_socket = 1, .timeout_ms = 30000};
  char err[512];
  if (dnt_target_start(&t, &o, err, sizeof err) != 0) {
    printf("collect: high-rate session skipped: %s\n", err);
    return;
  }
  const char *out = "/tmp/dnt-bench-rate.nettrace";
  unlink(out);
  char pid[16], dur[16];
  snprintf(pid, sizeof pid, "%d", (int)t.pid);
  snprintf(dur, sizeof dur, "%ds", seconds);
  char *argv[] = {(char *)dnt_bin(), "collect", "-p", pid, "-o", (char *)out, "--duration", dur, "--providers",
                  "Sample-Load:0:4", "--rundown", "false", NULL};
  double t0 = now();
  pid_t d = spawn(argv);
  int status;
  struct rusage ru;
  wait4(d, &status, 0, &ru);
  double wall = now() - t0;
  dnt_target_stop(&t);
  struct stat st;
  if (stat(out, &st) != 0) {
    printf("collect: high-rate session wrote nothing (status %d)\n", status);
    return;
  }
  static struct nt_scan s;
  nt_scan_file(out, &s);
  uint64_t events = nt_scan_count(&s, "Sample-Load", -1, 0);
  /* drops: gaps in the per-thread sequence numbers, as the nettrace parser counts them */
  ntr_stats stats = {0};
  ntr_parser *p;
  FILE *fp = fopen(out, "rb");
  if (fp && ntr_parser_new(&p, NULL, NULL, NULL) == 0) {
    static uint8_t buf[1 << 20];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, fp)) > 0) ntr_parser_feed(p, buf, n);
    ntr_parser_finish(p);
    ntr_parser_stats(p, &stats);
    ntr_parser_free(p);
  }
  if (fp) fclose(fp);
  double cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
               (double)ru.ru_stime.tv_usec / 1e6;
  printf("collect: high-rate session (asked %ld events/s for %d s): %.1f MB in %.1f s = %.1f MB/s, %.0f events/s "
         "received, %llu dropped by the runtime; dntrace CPU %.2f s (%.1f%% of a core), peak RSS %ld KB\n",
         rate, seconds, (double)st.st_size / 1e6, wall, (double)st.st_size / 1e6 / wall, (double)events / wall, (unsigned long long)stats.dropped_events, cpu,
         100 * cpu / wall, ru.ru_maxrss);
  unlink(out);
}

int main(void) {
  if (dnt_target_unavailable()) {
    printf("collect benchmarks skipped: %s\n", dnt_target_unavailable());
    return 0;
  }
  dnt_target t;
  dnt_target_opts o = {.mode = DNT_TARGET_PLAIN, .wait_socket = 1, .timeout_ms = 30000};
  char err[512];
  if (dnt_target_start(&t, &o, err, sizeof err) != 0) {
    printf("collect benchmarks skipped: %s\n", err);
    return 0;
  }
  first_byte(&t);
  dnt_target_stop(&t);
  high_rate(250000, 10);
  return 0;
}
