/* What perf saw each thread of a target do, and the state of a thread at any moment of the
 * recording: on a CPU, blocked (asleep) or runnable (preempted or woken, waiting for a CPU).
 * Fed with the samples of `perf script` (cpu-clock, and sched_switch/sched_waking where tracefs
 * was readable); used by `dntrace compare` to classify EventPipe's samples. Both sides use
 * CLOCK_MONOTONIC nanoseconds. docs/native-stacks.md explains the method and its error bound. */
#ifndef DNT_CPU_STATES_H
#define DNT_CPU_STATES_H

#include <stddef.h>
#include <stdint.h>

#include "perf-script.h"

enum dnt_cpu_state {
  DNT_ON_CPU,
  DNT_OFF_BLOCKED,
  DNT_OFF_RUNNABLE,
  DNT_UNCOVERED, /* outside what perf recorded */
};

typedef struct dnt_cpu_states dnt_cpu_states;

/* An empty record; NULL when out of memory. Free with dnt_cpu_states_free. */
dnt_cpu_states *dnt_cpu_states_new(void);
void dnt_cpu_states_free(dnt_cpu_states *cs);

/* One sample of perf script (a dnt_perf_observe_fn; ud is the dnt_cpu_states). Samples may come
 * in any order. Other events are ignored. 0, or -ENOMEM (then the record is unusable). */
int dnt_cpu_states_add(dnt_cpu_states *cs, const dnt_perf_sample *s);
void dnt_cpu_states_observe(void *ud, const dnt_perf_sample *s);
/* A thread's name, better than perf's comm (the target's /proc at recording time); before
 * dnt_cpu_states_finish. 0, or -ENOMEM. */
int dnt_cpu_states_name(dnt_cpu_states *cs, uint64_t tid, const char *name);

/* After the last sample: sorts, measures perf's period and takes the sampler's own brief stops
 * out (window_ms 0: one and a half periods). 0, or -ENOMEM. */
int dnt_cpu_states_finish(dnt_cpu_states *cs, double window_ms);
/* The state of thread tid at time t_ns; only after dnt_cpu_states_finish. */
enum dnt_cpu_state dnt_cpu_state_at(const dnt_cpu_states *cs, uint64_t tid, uint64_t t_ns);

struct dnt_cpu_states_info {
  double period_ms, window_ms;  /* perf's measured period, the window used */
  uint64_t cpu_samples;         /* cpu-clock samples of the target */
  uint64_t first_ns, last_ns;   /* what perf recorded */
  int has_switches;             /* sched_switch records were there */
  int incomplete;               /* memory ran out while adding: the record misses samples */
};
void dnt_cpu_states_info(const dnt_cpu_states *cs, struct dnt_cpu_states_info *out);
/* perf's view of one thread: its name ("" unknown; borrowed from cs) and cpu-clock samples. */
const char *dnt_cpu_states_thread(const dnt_cpu_states *cs, uint64_t tid, uint64_t *cpu_samples);

#endif
