/* Criterion glue: what the kernel says threads did in the same run, to hold a command's answer
 * against (issue 23). /proc/PID/task/TID/schedstat (ns on a CPU, ns runnable on a run queue),
 * polled every few ms by a thread while the command records, each poll stamped with
 * CLOCK_MONOTONIC, the clock of perf's records (collect --native runs perf with -k
 * CLOCK_MONOTONIC): the time a thread ran, waited for a CPU and slept over any stretch of perf's
 * window, whatever the machine's load gave it. Used by test-compare and test-waits. */
#ifndef DNT_TEST_SCHED_POLL_CR_H
#define DNT_TEST_SCHED_POLL_CR_H

#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#define POLL_TIDS 2

struct sched_row {
  uint64_t t_ns, run_ns[POLL_TIDS], wait_ns[POLL_TIDS];
};

struct sched_poll {
  pid_t pid, tids[POLL_TIDS];
  struct sched_row *rows;
  size_t n, cap;
  atomic_int stop, failed; /* failed: the thread whose schedstat could not be read, -1: no memory */
  pthread_t thread;
};

static inline uint64_t mono_ns(void) {
  struct timespec ts;
  /* timing: perf stamps its records with this clock; it places the polls in perf's window, no bound */
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline int schedstat(pid_t pid, pid_t tid, uint64_t *run_ns, uint64_t *wait_ns) {
  char path[96];
  snprintf(path, sizeof path, "/proc/%d/task/%d/schedstat", (int)pid, (int)tid);
  FILE *fp = fopen(path, "re");
  if (!fp) return -1;
  unsigned long long run, wait;
  int got = fscanf(fp, "%llu %llu", &run, &wait);
  fclose(fp);
  if (got != 2) return -1;
  *run_ns = run;
  *wait_ns = wait;
  return 0;
}

static inline void *sched_poll_loop(void *arg) {
  struct sched_poll *p = arg;
  while (!atomic_load(&p->stop)) {
    struct sched_row row;
    uint64_t before = mono_ns();
    for (int i = 0; i < POLL_TIDS; i++)
      if (schedstat(p->pid, p->tids[i], &row.run_ns[i], &row.wait_ns[i]) != 0) atomic_store(&p->failed, (int)p->tids[i]);
    row.t_ns = before + (mono_ns() - before) / 2;
    if (p->n == p->cap) {
      size_t cap = p->cap ? 2 * p->cap : 1024;
      struct sched_row *grown = realloc(p->rows, cap * sizeof *grown);
      if (!grown) {
        atomic_store(&p->failed, -1);
        break;
      }
      p->rows = grown;
      p->cap = cap;
    }
    p->rows[p->n++] = row;
    usleep(5000); /* the polls' spacing: the error of what is read between them */
  }
  return NULL;
}

static inline void sched_poll_start(struct sched_poll *p, pid_t pid, const pid_t *tids) {
  p->pid = pid;
  memcpy(p->tids, tids, sizeof p->tids);
  p->rows = NULL;
  p->n = p->cap = 0;
  atomic_init(&p->stop, 0);
  atomic_init(&p->failed, 0);
  cr_assert_eq(pthread_create(&p->thread, NULL, sched_poll_loop, p), 0);
}

/* Stops the polls; 0, or the thread whose schedstat could not be read (-1: out of memory). */
static inline int sched_poll_stop(struct sched_poll *p) {
  atomic_store(&p->stop, 1);
  pthread_join(p->thread, NULL);
  return atomic_load(&p->failed);
}

/* Thread i's time between from and to (perf's clock, ns), in ms: on a CPU, runnable, and the
 * error of each from the polls' spacing at the two ends (a counter grows at most 1 ms a ms). */
struct kernel_time {
  double run_ms, wait_ms, err_ms;
};

static inline int sched_at(const struct sched_poll *p, int i, uint64_t t, double *run_ms, double *wait_ms, double *gap_ms) {
  if (p->n < 2 || t < p->rows[0].t_ns || t > p->rows[p->n - 1].t_ns) return -1;
  size_t lo = 1, hi = p->n - 1; /* the first row at or after t */
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (p->rows[mid].t_ns < t) lo = mid + 1;
    else hi = mid;
  }
  const struct sched_row *a = &p->rows[lo - 1], *b = &p->rows[lo];
  double f = b->t_ns > a->t_ns ? (double)(t - a->t_ns) / (double)(b->t_ns - a->t_ns) : 0;
  *run_ms = ((double)a->run_ns[i] + f * ((double)b->run_ns[i] - (double)a->run_ns[i])) / 1e6;
  *wait_ms = ((double)a->wait_ns[i] + f * ((double)b->wait_ns[i] - (double)a->wait_ns[i])) / 1e6;
  *gap_ms = (double)(b->t_ns - a->t_ns) / 1e6;
  return 0;
}

static inline struct kernel_time kernel_time(const struct sched_poll *p, int i, uint64_t from, uint64_t to) {
  double r0, w0, g0, r1, w1, g1;
  cr_assert(sched_at(p, i, from, &r0, &w0, &g0) == 0 && sched_at(p, i, to, &r1, &w1, &g1) == 0,
            "the polls of thread %d (%zu of them) cover perf's window", (int)p->tids[i], p->n);
  return (struct kernel_time){r1 - r0, w1 - w0, g0 + g1};
}

/* The time the hypervisor took from this machine's CPUs, all of them, in ms (/proc/stat's steal):
 * the kernel leaves it out of a thread's time on a CPU, perf's cpu-clock does not; and while a
 * virtual CPU is taken, the timers due on it fire late. */
static inline double steal_ms(void) {
  FILE *fp = fopen("/proc/stat", "re");
  unsigned long long v[8] = {0};
  if (fp) {
    if (fscanf(fp, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6],
               &v[7]) != 8)
      v[7] = 0;
    fclose(fp);
  }
  long hz = sysconf(_SC_CLK_TCK);
  return 1000.0 * (double)v[7] / (double)(hz > 0 ? hz : 100);
}

#endif
