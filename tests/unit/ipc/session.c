/* Sessions started from the loop (ipc/session.c): the fallback to an older CollectTracing on a
 * fresh connection, the stream handed over, StopTracing of that session on another connection,
 * a refused StopTracing said, and a close from inside the session's own callbacks (its end, the
 * fallback's notice); against the fake server (cases session-*.case). */
#include <stdio.h>
#include <string.h>
#include <uv.h>

#include "dsipc.h"
#include "ipc-test.h"

struct seen {
  dsipc_session *s;
  int started, start_code, ended, end_code, notices;
  char notice[300], data[64];
  size_t ndata;
  int stop_after;      /* bytes after which on_data asks StopTracing (0: never) */
  int abandon_on_note; /* a notice gives the session up */
  int close_on_note;   /* a notice closes the session, inside its own callback */
  int close_on_end;    /* on_end closes the session, inside its own callback */
  int closed_inside;   /* ... it did */
  int running_after;   /* play: the session still ran once the loop was out */
};

static void on_started(void *ud, const dsipc_status *st) {
  struct seen *s = ud;
  s->started++;
  s->start_code = st->code;
}

static void on_data(void *ud, const uint8_t *p, size_t n) {
  struct seen *s = ud;
  if (s->ndata + n <= sizeof s->data) memcpy(s->data + s->ndata, p, n);
  s->ndata += n;
  if (s->stop_after && s->ndata >= (size_t)s->stop_after) dsipc_session_stop(s->s);
}

static void on_end(void *ud, const dsipc_status *st) {
  struct seen *s = ud;
  s->ended++;
  s->end_code = st->code;
  if (s->close_on_end) {
    dsipc_session_close(s->s);
    s->s = NULL;
    s->closed_inside = 1;
  }
}

static void on_notice(void *ud, const char *msg) {
  struct seen *s = ud;
  s->notices++;
  snprintf(s->notice, sizeof s->notice, "%s", msg);
  if (s->abandon_on_note) dsipc_session_abandon(s->s);
  if (s->close_on_note) {
    dsipc_session_close(s->s);
    s->s = NULL;
    s->closed_inside = 1;
  }
}

static const dsipc_session_cb cb = {on_started, on_data, on_end, on_notice};
static const dsipc_provider provider = {.name = "Microsoft-Windows-DotNETRuntime", .keywords = 1, .level = 4};
static const dsipc_session_config cfg = {.buffer_mb = 16, .format = 1, .providers = &provider, .n_providers = 1};

/* A session started with CollectTracing `version` against the fake playing case_name, s's flags
 * steering it; the loop run out, the session closed when s's callbacks have not (what it still
 * ran then into s->running_after), the loop run out again, then the conversation's verdict. */
static void play(const char *case_name, int version, struct seen *s) {
  fake_ipc *f = fake_play(case_name, NULL);
  uv_loop_t loop;
  uv_loop_init(&loop);
  dsipc_status st;
  cr_assert_eq(dsipc_session_start(&loop, fake_ipc_socket(f), version, &cfg, IPC_HANG_MS, &cb, s, &s->s, &st), 0, "%s",
               st.msg);
  uv_run(&loop, UV_RUN_DEFAULT);
  s->running_after = dsipc_session_running(s->s);
  dsipc_session_close(s->s);
  s->s = NULL;
  uv_run(&loop, UV_RUN_DEFAULT);
  cr_assert_eq(uv_loop_close(&loop), 0, "every handle closed");
  fake_done(f);
}

Test(session, falls_back_to_collect_tracing2_and_stops_that_session) {
  /* the case checks each request: CollectTracing5, then 2, then StopTracing of session 42 */
  struct seen s = {.stop_after = 10, .close_on_end = 1};
  play("session-fallback.case", 5, &s);
  cr_expect_eq(s.started, 1);
  cr_expect_eq(s.start_code, 0);
  cr_expect_eq(s.notices, 1, "the fallback is said once");
  cr_expect(strstr(s.notice, "no CollectTracing5"), "%s", s.notice);
  cr_expect_eq(s.ndata, 15, "the stream's bytes, the rundown's included");
  cr_expect(s.ndata == 15 && memcmp(s.data, "0123456789abcde", 15) == 0, "in order");
  cr_expect_eq(s.ended, 1);
  cr_expect_eq(s.end_code, 0, "the runtime closed the stream");
  cr_expect(s.closed_inside, "closed from inside on_end");
}

Test(session, a_close_inside_the_fallbacks_notice_ends_it_there) {
  /* the case has one connection: a second (CollectTracing2) would fail its verdict */
  struct seen s = {.close_on_note = 1};
  play("session-unknown.case", 5, &s);
  cr_expect_eq(s.notices, 1);
  cr_expect_eq(s.started + s.ended, 0, "closed: nothing more said");
  cr_expect(s.closed_inside);
}

Test(session, a_refused_stop_is_said_and_the_session_can_be_given_up) {
  struct seen s = {.stop_after = 3, .abandon_on_note = 1};
  play("session-refused-stop.case", 2, &s);
  cr_expect_eq(s.running_after, 0);
  cr_expect_eq(s.started, 1);
  cr_expect_eq(s.notices, 1);
  cr_expect(strstr(s.notice, "StopTracing:"), "%s", s.notice);
  cr_expect_eq(s.ended, 1, "abandoned: the end said once");
  cr_expect_eq(s.end_code, DSIPC_ECLOSED);
}

Test(session, a_refusal_is_the_start_answer_and_nothing_follows) {
  struct seen s = {0};
  play("stream-refused.case", 2, &s);
  cr_expect_eq(s.started, 1);
  cr_expect_eq(s.start_code, DSIPC_ESERVER);
  cr_expect_eq(s.ended, 0, "no end after a refusal");
  cr_expect_eq(s.ndata, 0);
}

Test(session, bad_arguments_call_nothing_and_a_missing_socket_is_a_failed_start) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  struct seen s = {0};
  dsipc_session *out = (dsipc_session *)&s;
  dsipc_status st;
  cr_expect_eq(dsipc_session_start(&loop, "/nonexistent/dntrace-socket", 0, &cfg, 1000, &cb, &s, &out, &st),
               DSIPC_EINVAL);
  cr_expect_null(out);
  uv_run(&loop, UV_RUN_DEFAULT);
  cr_expect_eq(s.started + s.ended + s.notices, 0);
  /* the connect is the loop's: its failure is the start's answer (an error now would do too) */
  int rc = dsipc_session_start(&loop, "/nonexistent/dntrace-socket", 2, &cfg, 1000, &cb, &s, &s.s, &st);
  uv_run(&loop, UV_RUN_DEFAULT);
  if (rc == 0) {
    cr_expect_eq(s.started, 1);
    cr_expect_neq(s.start_code, 0);
    dsipc_session_close(s.s);
    uv_run(&loop, UV_RUN_DEFAULT);
  } else {
    cr_expect_null(s.s);
    cr_expect_eq(s.started, 0);
  }
  cr_expect_eq(s.ended, 0);
  cr_assert_eq(uv_loop_close(&loop), 0, "every handle closed");
}
