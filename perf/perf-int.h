/* perf/: what its files share beyond the public header (dnt-perf.h). */
#ifndef DNT_PERF_INT_H
#define DNT_PERF_INT_H

#include "dnt-perf.h"

/* leftovers.c: the note a run keeps while a target's perf map is on because of it (pid, its
 * socket), removed when it is off again; a killed run's note is how the next run finds it. */
void dnt__perfmap_note(const struct dnt_perfmap_run *m, int pid, const char *ep_path);
void dnt__perfmap_unnote(int pid);

#endif
