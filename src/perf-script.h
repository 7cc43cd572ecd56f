/* A push parser for the text `perf script` prints, fed any split of its output, in constant
 * memory. dntrace runs perf itself, so the fields are ours to choose:
 *
 *   perf script -i FILE --ns --show-mmap-events -F comm,pid,tid,time,event,ip,sym,dso,trace
 *
 * which prints, per sample, a header `COMM PID/TID SECONDS.NANOS: EVENT: [TRACE]` (COMM may hold
 * spaces: ".NET TP Worker") and its callchain leaf first, one `\t  HEX SYM (DSO)` line a frame,
 * then a blank line; and a `... PERF_RECORD_MMAP2 PID/TID: [0xSTART(0xLEN) @ PGOFF ...]: PROT
 * FILE` line per executable mapping.
 *
 * perf prints a frame inside a file-backed mapping as an offset into that file, not as the
 * address it ran at. JIT code under W^X runs from `/memfd:doublemapper`, a file too, so the
 * address of a managed frame (what the runtime's perf map and method events give) is recovered
 * from the mappings: start + offset - pgoff (see dnt_perf_maps_absolute). */
#ifndef DNT_PERF_SCRIPT_H
#define DNT_PERF_SCRIPT_H

#include <stddef.h>
#include <stdint.h>

#define DNT_PERF_MAX_LINE (64 * 1024)
#define DNT_PERF_MAX_FRAMES 512

/* Strings are valid only during the callback. */
typedef struct dnt_perf_frame {
  uint64_t addr;   /* as printed: an offset into dso for a file-backed mapping */
  const char *sym; /* NULL when perf printed [unknown] */
  const char *dso; /* NULL when perf printed [unknown] */
} dnt_perf_frame;

typedef struct dnt_perf_sample {
  const char *comm; /* the thread's name */
  int pid, tid;
  uint64_t time_ns; /* the clock perf recorded with (-k CLOCK_MONOTONIC: EventPipe's clock) */
  const char *event; /* "cpu-clock", "sched:sched_switch" */
  const char *trace; /* a tracepoint's fields ("prev_comm=... ==> next_comm=..."), else "" */
  const dnt_perf_frame *frames; /* leaf first */
  size_t nframes;
} dnt_perf_sample;

typedef struct dnt_perf_mmap {
  int pid;
  uint64_t start, len, pgoff, time_ns;
  const char *prot; /* "r-xp" */
  const char *file;
} dnt_perf_mmap;

typedef struct dnt_perf_script_cb {
  int (*on_sample)(void *ud, const dnt_perf_sample *s); /* non-zero stops the parse with it */
  int (*on_mmap)(void *ud, const dnt_perf_mmap *m);
} dnt_perf_script_cb;

typedef struct dnt_perf_script dnt_perf_script;

/* cb is copied; ud is borrowed. NULL when out of memory. Free with dnt_perf_script_free. */
dnt_perf_script *dnt_perf_script_new(const dnt_perf_script_cb *cb, void *ud);
void dnt_perf_script_free(dnt_perf_script *p);

/* Feeds n bytes (any split). 0, a callback's non-zero value, or -ENOMEM. A malformed line is
 * counted and skipped (perf's own warnings share the stream), never fatal. */
int dnt_perf_script_feed(dnt_perf_script *p, const char *buf, size_t n);
/* The end of the input: a last sample without its blank line is delivered. */
int dnt_perf_script_finish(dnt_perf_script *p);

/* Whether a sample's event is `name`, also as perf prints it with its terms ("cpu-clock/freq=999/"). */
int dnt_perf_event_is(const char *event, const char *name);

struct dnt_perf_script_stats {
  uint64_t bytes, samples, mmaps, malformed_lines, truncated_chains;
};
void dnt_perf_script_stats(const dnt_perf_script *p, struct dnt_perf_script_stats *out);

/* ---- the mappings of one run, to turn printed offsets back into addresses ---- */

typedef struct dnt_perf_maps dnt_perf_maps;

/* NULL when out of memory. Free with dnt_perf_maps_free. */
dnt_perf_maps *dnt_perf_maps_new(void);
void dnt_perf_maps_free(dnt_perf_maps *m);
/* Records an executable mapping (its file copied). 0 or -ENOMEM. */
int dnt_perf_maps_add(dnt_perf_maps *m, const dnt_perf_mmap *mm);
/* The address a frame ran at: for a frame printed as an offset into dso, the mapping of that
 * file (in pid) holding the offset gives start + addr - pgoff; a frame with no file mapping
 * (anonymous code, the kernel) was printed as its address already. 0 when dso is mapped but not
 * at that offset. */
uint64_t dnt_perf_maps_absolute(const dnt_perf_maps *m, int pid, const dnt_perf_frame *f);

#endif
