/* collect --ring: the flight recorder (issue 26). The session's stream goes into a ring of its
 * blocks (nettrace's ntr_ring) that keeps the last window; SIGUSR1, Enter, Ctrl+C or the process's
 * end save it as one .nettrace in a directory. To save, the session is stopped, so that its
 * rundown names what the window's stacks hold and closes the file; then, unless the recorder is
 * done, a new session starts at once (the gap between the two is the rundown's time). */
#ifndef DNT_COLLECT_RING_H
#define DNT_COLLECT_RING_H

#include <stdint.h>
#include <uv.h>

#include "session.h"

struct dnt_ring_opts {
  uint64_t window_ms;   /* the last this many ms are kept */
  uint64_t max_bytes;   /* and at most this many bytes of blocks (0: no bound) */
  uint64_t duration_ms; /* stop (saving) after this long; 0: until Ctrl+C or the process's end */
  const char *dir;      /* where the windows are saved (made when missing) */
};

/* Runs the recorder on the opened session s (its target a running process) with cfg (borrowed,
 * as dnt_session_start takes it, CollectTracing `version`): 0, or the exit code with the error
 * printed. */
int dnt_collect_ring(dnt_session *s, uv_loop_t *loop, const dsipc_session_config *cfg, int version,
                     const struct dnt_ring_opts *o);

#endif
