/* collect --ring: the flight recorder (collect-ring.h). Command-line glue: it prints. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "builtin.h"
#include "collect-ring.h"
#include "ntr.h"
#include "output.h"
#include "util.h"

struct ring_run {
  uv_loop_t *loop;
  dnt_session *s;
  const dsipc_session_config *cfg;
  int version;
  const struct dnt_ring_opts *o;
  ntr_parser *parser;
  ntr_ring *ring;
  uv_signal_t sigint, sigterm, sigusr1;
  uv_timer_t duration, next;
  struct dnt_enter_watch enter;
  int saving, quitting, handles_closed, rc;
  int pid;
  char app[256];
  unsigned saved;
};

static const dnt_session_cb ring_cb;

/* A fresh ring and parser: a new session is a new stream. */
static void fresh(struct ring_run *r) {
  ntr_parser_free(r->parser);
  ntr_ring_free(r->ring);
  r->parser = NULL;
  if (!(r->ring = ntr_ring_new(r->o->window_ms, r->o->max_bytes))) dnt_die(DNT_EXIT_FAILURE, "out of memory");
  ntr_callbacks cb;
  ntr_ring_callbacks(&cb);
  if (ntr_parser_new(&r->parser, &cb, r->ring, NULL) != 0) dnt_die(DNT_EXIT_FAILURE, "out of memory");
}

static void close_handles(struct ring_run *r) {
  if (r->handles_closed) return;
  r->handles_closed = 1;
  uv_close((uv_handle_t *)&r->sigint, NULL);
  uv_close((uv_handle_t *)&r->sigterm, NULL);
  uv_close((uv_handle_t *)&r->sigusr1, NULL);
  uv_close((uv_handle_t *)&r->duration, NULL);
  uv_close((uv_handle_t *)&r->next, NULL);
  dnt_enter_watch_close(&r->enter);
}

/* The window as DIR/APP_YYYYMMDD_HHMMSS[_N].nettrace, said on stderr. */
static void save(struct ring_run *r) {
  ntr_ring_info info;
  ntr_ring_stats(r->ring, &info);
  char stamp[32], *path = NULL;
  time_t t = time(NULL);
  struct tm tm;
  localtime_r(&t, &tm);
  strftime(stamp, sizeof stamp, "%Y%m%d_%H%M%S", &tm);
  size_t cap = strlen(r->o->dir) + strlen(r->app) + 64;
  path = dnt_xmalloc(cap);
  snprintf(path, cap, "%s/%s_%s.nettrace", r->o->dir, r->app, stamp);
  for (int n = 2; access(path, F_OK) == 0 && n < 1000; n++)
    snprintf(path, cap, "%s/%s_%s_%d.nettrace", r->o->dir, r->app, stamp, n);
  struct dnt_output out = {0};
  if (dnt_output_open(&out, path, 0) < 0) {
    r->rc = DNT_EXIT_FAILURE;
  } else if (ntr_ring_write(r->ring, out.fp) != 0) {
    dnt_output_abort(&out);
    dnt_error("nothing to save: the session sent no trace header%s", ntr_ring_failed(r->ring) ? " (out of memory)" : "");
    r->rc = DNT_EXIT_FAILURE;
  } else if (dnt_output_commit(&out) < 0) {
    r->rc = DNT_EXIT_FAILURE;
  } else {
    r->saved++;
    fprintf(stderr, "Saved the last %.0f s of process %d: %s (%.1f MB of events, %s)\n",
            (double)r->o->window_ms / 1000, r->pid, path, (double)info.bytes / 1e6,
            info.threads_cut ? "its start cut to the window" : "the whole session so far");
  }
  free(path);
}

static void on_started(void *ud, int rc) {
  struct ring_run *r = ud;
  if (rc) {
    dnt_error("process %d refused the next session: %s", r->pid, r->s->reply_msg);
    r->rc = DNT_EXIT_FAILURE;
    close_handles(r);
    return;
  }
  fprintf(stderr, "Recording again into the ring\n");
}

/* After a session's end (from a timer: not inside the session's own callback): save the window
 * when asked, then stop, or start the next session. */
static void on_next(uv_timer_t *t) {
  struct ring_run *r = t->data;
  int ended_alone = !r->saving && !r->quitting; /* the process went: what it did last is kept */
  if (ended_alone) fprintf(stderr, "Process %d ended the session: saving the ring\n", r->pid);
  save(r);
  r->saving = 0;
  if (r->quitting || ended_alone || r->rc) {
    close_handles(r);
    return;
  }
  dnt_session_close(r->s);
  struct dnt_session_target want = {.pid = r->pid};
  if (dnt_session_open(r->s, r->loop, &want) != 0) { /* it printed why */
    r->rc = DNT_EXIT_FAILURE;
    close_handles(r);
    return;
  }
  fresh(r);
  if (dnt_session_start_async(r->s, r->version, r->cfg, &ring_cb, r, on_started) != 0) {
    dnt_error("cannot start the next session on process %d: %s", r->pid, r->s->reply_msg);
    r->rc = DNT_EXIT_FAILURE;
    close_handles(r);
  }
}

static void on_data(void *ud, const uint8_t *p, size_t n) {
  struct ring_run *r = ud;
  ntr_ring_now(r->ring, uv_now(r->loop));
  int rc = ntr_parser_feed(r->parser, p, n);
  if (rc < 0 && rc != NTR_EOF) {
    dnt_error("the stream does not parse as nettrace: %s", ntr_parser_errmsg(r->parser));
    r->rc = DNT_EXIT_FAILURE;
    dnt_session_abandon(r->s);
  }
}

static void on_end(void *ud) {
  struct ring_run *r = ud;
  if (!r->handles_closed) uv_timer_start(&r->next, on_next, 0, 0);
}

static const dnt_session_cb ring_cb = {on_data, on_end};

/* Save now: the session stops (its rundown comes), on_next saves and goes on. */
static void trigger(struct ring_run *r, const char *why) {
  if (r->saving || r->quitting || !r->s->running) return;
  r->saving = 1;
  ntr_ring_hold(r->ring); /* the window as it is now, and the rundown after it */
  fprintf(stderr, "%s: saving the last %.0f s (the runtime writes its rundown first)\n", why,
          (double)r->o->window_ms / 1000);
  dnt_session_stop(r->s);
}

static void on_usr1(uv_signal_t *h, int signum) {
  (void)signum;
  trigger(h->data, "SIGUSR1");
}

static void on_enter(void *ud) { trigger(ud, "Enter"); }

static void quit(struct ring_run *r) {
  if (r->quitting) { /* a second Ctrl+C: what came is saved, without the rundown */
    dnt_session_abandon(r->s);
    return;
  }
  r->quitting = 1;
  ntr_ring_hold(r->ring);
  if (!r->saving) dnt_session_stop(r->s);
}

static void on_signal(uv_signal_t *h, int signum) {
  (void)signum;
  quit(h->data);
}

static void on_duration(uv_timer_t *t) { quit(t->data); }

int dnt_collect_ring(dnt_session *s, uv_loop_t *loop, const dsipc_session_config *cfg, int version,
                     const struct dnt_ring_opts *o) {
  if (s->listener) {
    dnt_error("--ring needs a running process (-p or -n): each save starts its next session");
    return DNT_EXIT_USAGE;
  }
  if (mkdir(o->dir, 0755) != 0 && errno != EEXIST) {
    dnt_error("cannot make '%s': %s", o->dir, strerror(errno));
    return DNT_EXIT_FAILURE;
  }
  struct ring_run r = {.loop = loop, .s = s, .cfg = cfg, .version = version, .o = o, .pid = s->target.pid};
  snprintf(r.app, sizeof r.app, "%s", s->target.name);
  for (char *c = r.app; *c; c++)
    if (*c == '/' || *c == ' ' || (unsigned char)*c < 0x20) *c = '_';
  fresh(&r);
  if (dnt_session_start(s, version, cfg, &ring_cb, &r) != 0) {
    int rc = dnt_session_start_failed(s);
    ntr_parser_free(r.parser);
    ntr_ring_free(r.ring);
    return rc;
  }
  uv_signal_init(loop, &r.sigint);
  uv_signal_init(loop, &r.sigterm);
  uv_signal_init(loop, &r.sigusr1);
  uv_timer_init(loop, &r.duration);
  uv_timer_init(loop, &r.next);
  r.sigint.data = r.sigterm.data = r.sigusr1.data = r.duration.data = r.next.data = &r;
  uv_signal_start(&r.sigint, on_signal, SIGINT);
  uv_signal_start(&r.sigterm, on_signal, SIGTERM);
  uv_signal_start(&r.sigusr1, on_usr1, SIGUSR1);
  if (o->duration_ms) uv_timer_start(&r.duration, on_duration, o->duration_ms, 0);
  dnt_enter_watch_start(&r.enter, loop, on_enter, &r);
  char *name = dnt_safe_text(s->target.name);
  fprintf(stderr, "Recording process %d (%s) into a ring of the last %.0f s", r.pid, name, (double)o->window_ms / 1000);
  if (o->max_bytes) fprintf(stderr, " (at most %.0f MB)", (double)o->max_bytes / 1048576);
  fprintf(stderr, ": SIGUSR1 (kill -USR1 %d) or Enter saves it into %s, Ctrl+C saves it and stops\n", (int)getpid(),
          o->dir);
  free(name);
  dnt_loop_run(loop, UV_RUN_DEFAULT, __func__);
  ntr_parser_free(r.parser);
  ntr_ring_free(r.ring);
  return r.rc;
}
