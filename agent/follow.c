/* A process followed by the agent (dnt-agent.h "Following a process"): its EventPipe session,
 * started from the loop (ipc/), its stream parsed as it comes into its own engine of the rules
 * (feed.c) and, with a ring, into the flight recorder; a save-ring stops the session, whose
 * rundown closes the window, hands the window to the caller and starts the next session. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent-int.h"

#define REPLY_TIMEOUT_MS 30000 /* a session's start enables EventSources in the target: seconds when busy */

enum state { STARTING, LIVE, SAVING, RESTARTING, ENDED };

struct dnt_follow {
  const struct dnt_follow_config *c;
  void *ud;
  char *path;
  enum state state;
  int stopping;  /* the caller stopped it: no session follows a save-ring */
  int told_end;  /* on_ended was called */
  int closing;
  dsipc_session *session;
  ntr_parser *parser;
  ntr_fanout fan;
  struct dnt__feed feed;
  struct dnt_rules *rules;
  ntr_ring *ring;
  uv_timer_t restart, unseen;
  int open_timers;
};

uint64_t dnt__unix_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void notice(struct dnt_follow *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void notice(struct dnt_follow *f, const char *fmt, ...) {
  if (!f->c->cb->on_notice) return;
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  f->c->cb->on_notice(f->ud, f, msg);
}

static void ended(struct dnt_follow *f, const char *msg) {
  f->state = ENDED;
  uv_timer_stop(&f->unseen);
  if (f->told_end || f->closing) return;
  f->told_end = 1;
  f->c->cb->on_ended(f->ud, f, msg);
}

static void on_fired(void *ud, const struct dnt_firing *firing) {
  struct dnt_follow *f = ud;
  f->c->cb->on_fired(f->ud, f, firing);
}

static int on_value(void *ud, const dnt_counter_value *v) {
  struct dnt_follow *f = ud;
  dnt__feed_value(&f->feed, v);
  if (f->c->cb->on_value) f->c->cb->on_value(f->ud, f, v);
  return 0;
}

/* The process's own engine, made from the rules' texts (they parsed when the caller read them). */
static struct dnt_rules *make_rules(struct dnt_follow *f) {
  const struct dnt_follow_config *c = f->c;
  struct dnt_rules *e = dnt_rules_new(on_fired, f);
  if (!e) return NULL;
  for (size_t i = 0; i < c->nrules; i++) {
    struct dnt_rule r;
    char err[200];
    size_t col;
    if (dnt_rule_parse(c->rules[i], &r, err, sizeof err, &col) != 0 || dnt_rules_add(e, &r) != 0) {
      dnt_rule_release(&r);
      dnt_rules_free(e);
      return NULL;
    }
  }
  dnt_rules_set_limits(e, c->max_fires ? c->max_fires : 1, c->limit_ms ? c->limit_ms : 600000, c->cooldown_ms);
  return e;
}

static void drop_parser(struct dnt_follow *f) {
  ntr_parser_free(f->parser);
  dnt_counters_decoder_free(f->feed.decoder);
  dnt__feed_release(&f->feed);
  ntr_ring_free(f->ring);
  f->parser = NULL, f->ring = NULL, f->feed.decoder = NULL;
}

/* A fresh parser for a new session's stream: the rules' feed and, with a ring, a new ring. 0, or
 * -1 when out of memory. */
static int make_parser(struct dnt_follow *f) {
  const struct dnt_follow_config *c = f->c;
  drop_parser(f);
  f->feed = (struct dnt__feed){.rules = f->rules};
  if (!(f->feed.decoder = dnt_counters_decoder_new(c->specs, c->counters_session_id, on_value, f))) return -1;
  ntr_fanout_init(&f->fan);
  ntr_fanout_add(&f->fan, dnt__feed_callbacks(), &f->feed);
  if (c->ring_ms) {
    if (!(f->ring = ntr_ring_new(c->ring_ms, c->ring_bytes))) return -1;
    ntr_callbacks rcb;
    ntr_ring_callbacks(&rcb);
    ntr_fanout_add(&f->fan, &rcb, f->ring);
  }
  ntr_callbacks fcb;
  ntr_fanout_callbacks(&f->fan, &fcb);
  return ntr_parser_new(&f->parser, &fcb, &f->fan, NULL) == 0 ? 0 : -1;
}

/* ---- the session ---- */

/* After a few intervals: the counter rules whose counter has said nothing (a name misspelt?). */
static void on_unseen(uv_timer_t *h) {
  struct dnt_follow *f = h->data;
  for (size_t i = 0; i < dnt_rules_count(f->rules); i++) {
    const struct dnt_rule *r = dnt_rules_get(f->rules, i);
    if (r->kind == DNT_TRIGGER_COUNTER && !dnt_rules_counter_seen(f->rules, i))
      notice(f, "rule %zu: counter '%s' of '%s' has not reported after %.0f s: is it named right?", i + 1,
             r->counter, r->provider, (double)f->c->unseen_ms / 1000);
  }
}

static void on_started(void *ud, const dsipc_status *st) {
  struct dnt_follow *f = ud;
  int restarted = f->state == RESTARTING;
  if (st->code) {
    if (restarted) {
      char msg[600];
      snprintf(msg, sizeof msg, "the next session was refused: %s", st->msg);
      ended(f, msg);
    } else {
      f->state = ENDED;
      f->told_end = 1; /* not started: on_started says so, no on_ended follows */
      f->c->cb->on_started(f->ud, f, st->code, st->msg);
    }
    return;
  }
  f->state = LIVE;
  if (f->stopping) {
    dsipc_session_stop(f->session);
    return;
  }
  if (restarted) return; /* the same process, followed on */
  if (f->c->unseen_ms && f->c->specs && f->c->specs->n) uv_timer_start(&f->unseen, on_unseen, f->c->unseen_ms, 0);
  f->c->cb->on_started(f->ud, f, 0, "");
  dnt_rules_process_start(f->rules, dnt__unix_ms()); /* followed from now */
}

static void on_data(void *ud, const uint8_t *p, size_t n) {
  struct dnt_follow *f = ud;
  if (f->ring) ntr_ring_now(f->ring, uv_now(f->c->loop));
  int rc = ntr_parser_feed(f->parser, p, n);
  if (rc < 0 && rc != NTR_EOF) {
    notice(f, "the stream does not parse as nettrace: %s", ntr_parser_errmsg(f->parser));
    dsipc_session_abandon(f->session);
  }
}

static void on_end(void *ud, const dsipc_status *st);
static void on_session_notice(void *ud, const char *msg) { notice(ud, "%s", msg); }
static const dsipc_session_cb session_cb = {on_started, on_data, on_end, on_session_notice};

/* 0, or the dsipc error with err said. */
static int start_session(struct dnt_follow *f, char *err, size_t cap) {
  dsipc_status st = {0};
  if (make_parser(f) != 0) return snprintf(err, cap, "out of memory"), DSIPC_ENOMEM;
  int rc = dsipc_session_start(f->c->loop, f->path, 2, &f->c->session, REPLY_TIMEOUT_MS, &session_cb, f, &f->session,
                               &st);
  if (rc) snprintf(err, cap, "%s", st.msg);
  return rc;
}

/* After a save-ring's session ended (a timer: not inside the session's callbacks): the window
 * to the caller, then the next session. */
static void on_restart(uv_timer_t *h) {
  struct dnt_follow *f = h->data;
  f->c->cb->on_window(f->ud, f, f->ring);
  dsipc_session_close(f->session);
  f->session = NULL;
  if (f->stopping) {
    ended(f, NULL);
    return;
  }
  f->state = RESTARTING;
  char err[512];
  if (start_session(f, err, sizeof err) != 0) {
    char msg[600];
    snprintf(msg, sizeof msg, "cannot start the next session: %s", err);
    ended(f, msg);
  }
}

static void on_end(void *ud, const dsipc_status *st) {
  struct dnt_follow *f = ud;
  (void)st;
  if (f->state == SAVING) { /* the session's end closed the window */
    uv_timer_start(&f->restart, on_restart, 0, 0);
    return;
  }
  ended(f, NULL);
}

/* ---- the caller's side ---- */

int dnt_follow_start(const struct dnt_follow_config *c, const char *socket_path, void *ud, struct dnt_follow **out,
                     char *err, size_t cap) {
  *out = NULL;
  struct dnt_follow *f = calloc(1, sizeof *f);
  if (f) f->c = c, f->ud = ud;
  if (!f || !(f->path = strdup(socket_path)) || !(f->rules = make_rules(f))) {
    if (f) free(f->path);
    free(f);
    return snprintf(err, cap, "out of memory"), DSIPC_ENOMEM;
  }
  uv_timer_init(c->loop, &f->restart);
  uv_timer_init(c->loop, &f->unseen);
  f->restart.data = f->unseen.data = f;
  f->open_timers = 2;
  int rc = start_session(f, err, cap);
  if (rc) {
    dnt_follow_close(f);
    return rc;
  }
  *out = f;
  return 0;
}

int dnt_follow_save_ring(struct dnt_follow *f) {
  if (!f->ring || f->state != LIVE || f->stopping) return -1;
  f->state = SAVING;
  ntr_ring_hold(f->ring);
  dsipc_session_stop(f->session);
  return 0;
}

void dnt_follow_stop(struct dnt_follow *f) {
  if (f->stopping) {
    if (f->state != ENDED) dsipc_session_abandon(f->session); /* a second time: now */
    return;
  }
  f->stopping = 1;
  if (f->state == LIVE || f->state == STARTING) dsipc_session_stop(f->session);
}

const struct dnt_rules *dnt_follow_rules(const struct dnt_follow *f) { return f->rules; }
int dnt_follow_live(const struct dnt_follow *f) { return f->state == LIVE || f->state == SAVING || f->state == RESTARTING; }

static void on_timer_closed(uv_handle_t *h) {
  struct dnt_follow *f = h->data;
  if (--f->open_timers) return;
  dnt_rules_free(f->rules);
  free(f->path);
  free(f);
}

void dnt_follow_close(struct dnt_follow *f) {
  if (!f || f->closing) return;
  f->closing = 1;
  dsipc_session_close(f->session);
  f->session = NULL;
  drop_parser(f);
  uv_close((uv_handle_t *)&f->restart, on_timer_closed);
  uv_close((uv_handle_t *)&f->unseen, on_timer_closed);
}
