/* perf/: what its files share beyond the public header (dnt-perf.h). */
#ifndef DNT_PERF_INT_H
#define DNT_PERF_INT_H

#include "dnt-perf.h"

/* leftovers.c: the note a run keeps while a target's perf map is on because of it (pid, its
 * socket), removed when it is off again; a killed run's note is how the next run finds it. */
void dnt__perfmap_note(const struct dnt_perfmap_run *m, int pid, const char *ep_path);
void dnt__perfmap_unnote(int pid);

/* waits.c: growing an array by doubling (0 or -ENOMEM), and the hashes of its tables, which the
 * views (waits-views.c) use too. */
int dnt__waits_grow(void **arr, size_t *cap, size_t n, size_t size);
uint32_t dnt__waits_hash_u64s(const uint64_t *v, size_t n);
uint32_t dnt__waits_hash_str(const char *s);

/* record.c: perf record spawned with its events off and its control fifos made (no_cache: -N,
 * no copies into perf's build-id cache); 0 or -1 with pr->msg. The close callback of every
 * handle of a dnt_perf_record (counts pr->open_handles). */
int dnt__perf_record_spawn(struct dnt_perf_record *pr, uv_loop_t *loop, int pid, int hz, int sched, int no_cache,
                           const char *out);
void dnt__perf_record_closed(uv_handle_t *h);
/* record-async.c: the wait for perf's ack ends without it (perf exited, or too slow): on_started
 * gets -1 with why in pr->msg. */
void dnt__perf_record_unwait(struct dnt_perf_record *pr, const char *why);

#endif
