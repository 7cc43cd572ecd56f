/* An EventPipe session started from the loop (dsipc.h "Sessions"): CollectTracing on a fresh
 * connection to the runtime's socket, the older requests tried in turn when the runtime does not
 * know the newer one; the stream handed to the caller; StopTracing on a second connection. For an
 * agent that follows processes while it answers other work: nothing here waits. */
#include <stdio.h>
#include <string.h>

#include "dsipc-int.h"

#define MAX_STARTS 3 /* the version asked, then 2, then 1 */

struct dsipc_session {
  struct uv_loop_s *loop;
  char *path;
  uint64_t timeout_ms;
  dsipc_session_cb cb;
  void *ud;
  dsipc_buf start_req[MAX_STARTS];
  int start_version[MAX_STARTS];
  size_t nstarts, next_start;
  dsipc_stream *stream, *stopper;
  uint64_t id;
  int starting, running, stop_wanted, stopping, ended, closed;
  int in_callback; /* depth of the caller's callbacks under way: a close then frees on the way out */
};

static void release_starts(dsipc_session *s) {
  for (size_t i = 0; i < s->nstarts; i++) dsipc_buf_release(&s->start_req[i]);
  s->nstarts = s->next_start = 0;
}

static void session_free(dsipc_session *s) {
  dsipc_stream_close(s->stream);
  dsipc_stream_close(s->stopper);
  release_starts(s);
  dsipc__free(s->path);
  dsipc__free(s);
}

/* The caller's callbacks run between enter and leave; leave says whether s is gone (closed
 * during the callback) and must not be touched again. */
static void enter(dsipc_session *s) { s->in_callback++; }
static int leave(dsipc_session *s) {
  if (--s->in_callback == 0 && s->closed) {
    session_free(s);
    return 1;
  }
  return 0;
}

/* An older runtime's fallback, said: what only the newer request can say (a custom rundown) is lost. */
static void notice_fallback(dsipc_session *s, int asked) {
  if (!s->cb.on_notice || s->closed) return;
  char msg[200];
  snprintf(msg, sizeof msg, "this runtime takes no CollectTracing%d; asking with CollectTracing2 (default rundown)",
           asked);
  enter(s);
  s->cb.on_notice(s->ud, msg);
  leave(s);
}

/* The stream is over, however: both connections closed, then the caller told once. */
static void end_session(dsipc_session *s, const dsipc_status *st) {
  if (s->ended) return;
  s->ended = 1;
  dsipc_stream_close(s->stream);
  dsipc_stream_close(s->stopper);
  s->stream = s->stopper = NULL;
  if (!s->running || s->closed) return;
  enter(s);
  s->cb.on_end(s->ud, st);
  leave(s);
}

static void on_reply(void *ud, const dsipc_status *st, const uint8_t *payload, size_t n);
static void on_data(void *ud, const uint8_t *p, size_t n);
static void on_end(void *ud, const dsipc_status *st);
static const dsipc_stream_cb stream_cb = {on_reply, on_data, on_end};

/* Sends the next request of the list on a fresh connection. 0, or the error in st. */
static int send_next_start(dsipc_session *s, dsipc_status *st) {
  size_t i = s->next_start++;
  return dsipc_stream_open(s->loop, s->path, -1, &s->start_req[i], s->timeout_ms, &stream_cb, s, &s->stream, st);
}

void dsipc_session_stop(dsipc_session *s);

/* The runtime answered a start request: the next (older) request when it did not know this one,
 * else the caller told. Runs inside the stream's callback, where closing the stream is allowed. */
static void on_reply(void *ud, const dsipc_status *st, const uint8_t *payload, size_t n) {
  dsipc_session *s = ud;
  dsipc_status res = *st;
  if (res.code == 0 && dsipc_decode_session_id(payload, n, &s->id) != 0)
    dsipc__fail(&res, DSIPC_EPROTO, 0, "the runtime's reply has no session id");
  while (res.code == DSIPC_EUNKNOWNCMD && s->next_start < s->nstarts) {
    dsipc_stream_close(s->stream);
    s->stream = NULL;
    int asked = s->start_version[s->next_start - 1];
    enter(s); /* the notice's callback may close s: then it is gone once we leave */
    if (asked > 2) notice_fallback(s, asked);
    if (leave(s) || s->closed) return;
    if (send_next_start(s, &res) == 0) return; /* its reply comes back here */
  }
  if (res.code) {
    dsipc_stream_close(s->stream);
    s->stream = NULL;
    s->ended = 1;
  }
  s->starting = 0;
  s->running = res.code == 0;
  release_starts(s);
  enter(s);
  s->cb.on_started(s->ud, &res);
  if (leave(s)) return;
  if (s->running && s->stop_wanted && !s->ended) dsipc_session_stop(s);
}

static void on_data(void *ud, const uint8_t *p, size_t n) {
  dsipc_session *s = ud;
  if (!s->running || s->ended || s->closed) return;
  enter(s);
  s->cb.on_data(s->ud, p, n);
  leave(s);
}

static void on_end(void *ud, const dsipc_status *st) {
  dsipc_session *s = ud;
  if (s->starting) return; /* a refusal: its reply decides */
  end_session(s, st);
}

int dsipc_session_start(struct uv_loop_s *loop, const char *path, int version, const dsipc_session_config *cfg,
                        uint64_t reply_timeout_ms, const dsipc_session_cb *cb, void *ud, dsipc_session **out,
                        dsipc_status *st) {
  *out = NULL;
  if (!loop || !path || !cb || !cb->on_started || !cb->on_data || !cb->on_end || version < 1 || version > 6)
    return dsipc__fail(st, DSIPC_EINVAL, 0, "invalid session request");
  dsipc_session *s = dsipc__calloc(1, sizeof *s);
  if (!s || !(s->path = dsipc__strdup(path))) {
    dsipc__free(s);
    return dsipc__fail(st, DSIPC_ENOMEM, 0, "out of memory");
  }
  s->loop = loop, s->timeout_ms = reply_timeout_ms, s->cb = *cb, s->ud = ud;
  /* every fallback encoded now: cfg is the caller's for this call only */
  int versions[MAX_STARTS], n = 0, rc = 0;
  versions[n++] = version;
  if (version > 2) versions[n++] = 2;
  if (version > 1) versions[n++] = 1;
  for (int i = 0; i < n && !rc; i++) {
    dsipc_buf_init(&s->start_req[i]);
    s->start_version[i] = versions[i];
    s->nstarts = (size_t)i + 1;
    rc = dsipc_encode_collect_tracing(&s->start_req[i], versions[i], cfg);
  }
  if (rc) {
    dsipc__fail(st, rc, 0, "cannot encode the session request: %s", dsipc_strerror(rc));
  } else if ((rc = send_next_start(s, st)) == 0) {
    s->starting = 1;
    *out = s;
    return 0;
  }
  session_free(s);
  return rc;
}

uint64_t dsipc_session_id(const dsipc_session *s) { return s ? s->id : 0; }
int dsipc_session_running(const dsipc_session *s) { return s && s->running && !s->ended; }

static void on_stop_reply(void *ud, const dsipc_status *st, const uint8_t *payload, size_t n) {
  (void)payload, (void)n;
  dsipc_session *s = ud;
  if (st->code && s->cb.on_notice && !s->closed) {
    enter(s);
    char msg[sizeof st->msg + 16];
    snprintf(msg, sizeof msg, "StopTracing: %s", st->msg);
    s->cb.on_notice(s->ud, msg);
    leave(s);
  }
}

static void on_stop_end(void *ud, const dsipc_status *st) {
  (void)ud, (void)st; /* the session stream's end is what counts */
}

void dsipc_session_stop(dsipc_session *s) {
  if (!s || s->closed || s->stopping || s->ended) return;
  if (!s->running) { /* asked before the runtime answered: stop once started */
    s->stop_wanted = 1;
    return;
  }
  static const dsipc_stream_cb stop_cb = {on_stop_reply, NULL, on_stop_end};
  s->stopping = 1;
  dsipc_buf req;
  dsipc_buf_init(&req);
  dsipc_status st = {0};
  int rc = dsipc_encode_stop_tracing(&req, s->id);
  if (rc == 0) rc = dsipc_stream_open(s->loop, s->path, -1, &req, s->timeout_ms, &stop_cb, s, &s->stopper, &st);
  else dsipc__fail(&st, rc, 0, "out of memory");
  dsipc_buf_release(&req);
  if (rc) { /* the session cannot be stopped: it is given up, what came is kept */
    dsipc_status end;
    dsipc__fail(&end, rc, 0, "cannot send StopTracing: %s", st.msg);
    end_session(s, &end);
  }
}

void dsipc_session_abandon(dsipc_session *s) {
  if (!s || s->closed || s->ended) return;
  dsipc_status st;
  dsipc__fail(&st, DSIPC_ECLOSED, 0, "the session was abandoned");
  if (s->starting) { /* no answer yet: the caller hears that it did not start */
    s->starting = 0;
    s->ended = 1;
    dsipc_stream_close(s->stream);
    s->stream = NULL;
    release_starts(s);
    enter(s);
    s->cb.on_started(s->ud, &st);
    leave(s);
    return;
  }
  end_session(s, &st);
}

void dsipc_session_close(dsipc_session *s) {
  if (!s || s->closed) return;
  s->closed = 1;
  dsipc_stream_close(s->stream);
  dsipc_stream_close(s->stopper);
  s->stream = s->stopper = NULL;
  if (!s->in_callback) session_free(s);
}
