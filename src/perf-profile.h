/* `perf script` output of one process turned into a dnt_profile: the frames' addresses recovered
 * from the mappings (perf-script.h), managed frames named by the profile's own method table (a
 * nettrace with method events loaded into it first) or else the runtime's perf map, native and
 * kernel frames by perf's symbols (`libcoreclr.so!Symbol`, `[kernel]!schedule`). From there
 * report, folded stacks, speedscope and flame graphs work as for an EventPipe trace. */
#ifndef DNT_PERF_PROFILE_H
#define DNT_PERF_PROFILE_H

#include <stddef.h>
#include <stdint.h>

#include "perf-script.h"
#include "profile.h"
#include "symtab.h"

typedef struct dnt_perf_reader dnt_perf_reader;

/* Reads samples of `event` (e.g. "cpu-clock") of process pid (0: every process) into prof
 * (borrowed), weighing each sample_ms. perfmap (borrowed, may be NULL) names JIT code the
 * method table does not. Both must outlive the reader, which must outlive dnt_profile_finish
 * (it names frames then). NULL when out of memory; free with dnt_perf_reader_free. */
dnt_perf_reader *dnt_perf_reader_new(struct dnt_profile *prof, int pid, const char *event, double sample_ms,
                                     struct dnt_symtab *perfmap);
void dnt_perf_reader_free(dnt_perf_reader *r);

/* Feeds `perf script` text (any split). 0 or -ENOMEM. */
int dnt_perf_reader_feed(dnt_perf_reader *r, const char *buf, size_t n);
/* The end of the text. 0 or -ENOMEM. Then call dnt_profile_finish(prof). */
int dnt_perf_reader_finish(dnt_perf_reader *r);

/* Samples taken, and how many of their frames no table could name. */
void dnt_perf_reader_stats(const dnt_perf_reader *r, struct dnt_perf_script_stats *st, uint64_t *samples_used);

/* Sees every sample perf script gave (all events, sched_switch too), before the profile does. */
typedef void (*dnt_perf_observe_fn)(void *ud, const dnt_perf_sample *s);
void dnt_perf_reader_observe(dnt_perf_reader *r, dnt_perf_observe_fn fn, void *ud);

/* The whole post-processing of a recording: the method table of `trace` (a .nettrace with
 * method events, may be NULL) and the perf map copy `map` (may be NULL or missing) loaded, then
 * `perf script` run on `data` (argv, no shell) and read as a stream into prof, which is then
 * finished. perfmap: caller-owned storage for the map (release it after the profile). Prints the
 * throughput. Returns the reader (free it after prof), or NULL with the error printed. */
dnt_perf_reader *dnt_perf_load(struct dnt_profile *prof, const char *data, const char *trace, const char *map,
                               double sample_ms, struct dnt_symtab *perfmap, dnt_perf_observe_fn fn, void *ud);

#endif
