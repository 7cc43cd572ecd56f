/* The async calls (call.c): the transport's fallbacks on the caller's loop, the deadline, a
 * cancel, a socket not there yet, against the fake server (cases call-*.case, and the transport's
 * dump fallback). */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include "dsipc.h"
#include "ipc-test.h"

struct answer {
  int calls, code;
  char cmdline[64], version[32];
  int info_version;
};

static void got_info(void *ud, const dsipc_status *st, const dsipc_process_info *pi) {
  struct answer *a = ud;
  a->calls++;
  a->code = st->code;
  if (!pi) return;
  a->info_version = pi->info_version;
  snprintf(a->cmdline, sizeof a->cmdline, "%s", pi->command_line ? pi->command_line : "");
  snprintf(a->version, sizeof a->version, "%s", pi->clr_product_version ? pi->clr_product_version : "");
}

static void got_dump(void *ud, const dsipc_status *st) {
  struct answer *a = ud;
  a->calls++;
  a->code = st->code;
}

Test(call, dump_falls_back_to_v1_on_the_loop) {
  /* the case checks versions 3, 2, then 1 with the logging bit only */
  fake_ipc *f = fake_play("transport-dump-v1.case", NULL);
  uv_loop_t loop;
  uv_loop_init(&loop);
  struct answer a = {0};
  dsipc_status st;
  cr_assert_eq(dsipc_dump_start(&loop, fake_ipc_socket(f), "/d", DSIPC_DUMP_MINI,
                                DSIPC_DUMP_LOGGING | DSIPC_DUMP_VERBOSE, 2000, got_dump, &a, NULL, &st),
               0, "%s", st.msg);
  uv_run(&loop, UV_RUN_DEFAULT);
  cr_assert_eq(uv_loop_close(&loop), 0, "every handle closed");
  fake_done(f);
  cr_expect_eq(a.calls, 1);
  cr_expect_eq(a.code, 0);
}

Test(call, process_info_falls_back_to_v2_on_the_loop) {
  /* the case checks the requests: ProcessInfo3, then ProcessInfo2, bare headers */
  fake_ipc *f = fake_play("call-info-v2.case", NULL);
  uv_loop_t loop;
  uv_loop_init(&loop);
  struct answer a = {0};
  dsipc_status st;
  cr_assert_eq(dsipc_process_info_start(&loop, fake_ipc_socket(f), 2000, got_info, &a, NULL, &st), 0, "%s", st.msg);
  uv_run(&loop, UV_RUN_DEFAULT);
  cr_assert_eq(uv_loop_close(&loop), 0, "every handle closed");
  fake_done(f);
  cr_expect_eq(a.calls, 1);
  cr_expect_eq(a.code, 0);
  cr_expect_eq(a.info_version, 2);
  cr_expect_str_eq(a.cmdline, "a");
  cr_expect_str_eq(a.version, "8.0");
}

Test(call, deadline_and_cancel) {
  fake_ipc *f = fake_play("call-info-hangs.case", NULL);
  uv_loop_t loop;
  uv_loop_init(&loop);
  struct answer late = {0}, dropped = {0};
  dsipc_status st;
  dsipc_call *c = NULL;
  cr_assert_eq(dsipc_process_info_start(&loop, fake_ipc_socket(f), 200, got_info, &late, NULL, &st), 0, "%s", st.msg);
  cr_assert_eq(dsipc_process_info_start(&loop, fake_ipc_socket(f), 60000, got_info, &dropped, &c, &st), 0, "%s",
               st.msg);
  cr_assert(c);
  dsipc_call_cancel(c); /* no callback, and the loop does not wait for its 60 s */
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  uv_run(&loop, UV_RUN_DEFAULT);
  double ms = ms_since(&t0);
  cr_assert_eq(uv_loop_close(&loop), 0, "every handle closed");
  fake_done(f);
  cr_expect_eq(late.calls, 1);
  cr_expect_eq(late.code, DSIPC_ETIMEDOUT);
  cr_expect_eq(dropped.calls, 0, "a cancelled call is never answered");
  cr_expect(ms >= 150 && ms < 5000, "the deadline: %.0f ms", ms);
}

Test(call, no_runtime_there) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  struct answer a = {0}, none = {0};
  dsipc_status st;
  /* a socket that is not there may yet appear (a runtime starting): tried again from the loop,
   * then the callback says no, once */
  int rc = dsipc_process_info_start(&loop, "/nonexistent/dotnet-diagnostic-1-1-socket", 500, got_info, &a, NULL, &st);
  cr_expect_neq(dsipc_dump_start(&loop, "/nonexistent/s", "", 1, 0, 500, got_dump, &none, NULL, &st), 0,
                "no dump path: refused at once");
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  uv_run(&loop, UV_RUN_DEFAULT);
  cr_expect_lt(ms_since(&t0), 2000, "gave up within the retries");
  cr_expect_eq(none.calls, 0, "no callback after an error return");
  if (rc == 0) {
    cr_expect_eq(a.calls, 1, "one answer");
    cr_expect_neq(a.code, 0, "and it is an error");
  } else {
    cr_expect_eq(a.calls, 0);
  }
  cr_assert_eq(uv_loop_close(&loop), 0);
}

/* A listener that refuses at first (no socket yet) and then listens: the call connects on a
 * later attempt from the loop, which meanwhile runs other timers at their time (no sleep). */
struct late_listener {
  uv_timer_t t;
  fake_ipc *f;
  char dir[64];
  int ticks;
  double worst_gap_ms;
  struct timespec last;
};

static void tick(uv_timer_t *t) {
  struct late_listener *l = t->data;
  double gap = ms_since(&l->last);
  if (l->ticks++ && gap > l->worst_gap_ms) l->worst_gap_ms = gap;
  clock_gettime(CLOCK_MONOTONIC, &l->last);
  if (l->ticks == 20) { /* the socket appears ~100 ms in, after the pauses of 20 and 40 ms */
    char err[800];
    cr_assert_eq(mkdir(l->dir, 0700), 0);
    cr_assert_eq(fake_ipc_run(l->f, err, sizeof err), 0, "%s", err);
  }
  if (l->ticks > 60) uv_timer_stop(t);
}

Test(call, a_socket_that_appears_a_moment_later) {
  /* an older runtime: ProcessInfo3 unknown, then ProcessInfo2 */
  struct late_listener l = {0};
  snprintf(l.dir, sizeof l.dir, "/tmp/dnt-ipcl-XXXXXX");
  cr_assert(mkdtemp(l.dir));
  rmdir(l.dir); /* made again at the third tick: until then the path does not exist */
  char path[100], err[800];
  snprintf(path, sizeof path, "%s/sock", l.dir);
  fake_ipc_opts o = {.socket = path};
  cr_assert_eq(fake_ipc_new(&l.f, "call-info-v2.case", &o, err, sizeof err), 0, "%s", err);
  uv_loop_t loop;
  uv_loop_init(&loop);
  uv_timer_init(&loop, &l.t);
  l.t.data = &l;
  clock_gettime(CLOCK_MONOTONIC, &l.last);
  uv_timer_start(&l.t, tick, 5, 5);
  struct answer a = {0};
  dsipc_status st;
  cr_assert_eq(dsipc_process_info_start(&loop, path, 2000, got_info, &a, NULL, &st), 0, "%s", st.msg);
  uv_run(&loop, UV_RUN_DEFAULT);
  uv_close((uv_handle_t *)&l.t, NULL);
  uv_run(&loop, UV_RUN_DEFAULT);
  cr_assert_eq(uv_loop_close(&loop), 0);
  fake_done(l.f);
  unlink(path);
  rmdir(l.dir);
  cr_expect_eq(a.calls, 1);
  cr_expect_eq(a.code, 0, "answered once the socket was there");
  /* a connect that slept in the loop would hold the timer for the 80 ms pause before the third
   * attempt; a loaded machine delays a 5 ms timer by 10-16 ms at worst */
  cr_expect_lt(l.worst_gap_ms, 50, "a 5 ms timer ran on time meanwhile (worst gap %.1f ms)", l.worst_gap_ms);
}
