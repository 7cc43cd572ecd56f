/* The async calls (call.c): the transport's fallbacks on the caller's loop, the deadline, a
 * cancel, a socket not there yet, against the fake server (cases call-*.case, and the transport's
 * dump fallback). */
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include "dsipc.h"
#include "ipc-test.h"
#include "lib/target.h"

/* ---- the loop never sleeps in the library ----
 * This program's own nanosleep, clock_nanosleep, usleep and poll (an executable's symbols come
 * before libc's, for the library linked into it too) count the calls that would put the thread
 * running a watched loop to sleep, then call the next definition (libc's, or the sanitizer's).
 * libuv's own wait for events (epoll) is not counted: that is the loop idle, as it should be. */
static pthread_t watched_thread;
static int watching, loop_sleeps;
static char first_sleep[64];

static void *next_symbol(const char *name) {
  void *p = dlsym(RTLD_NEXT, name);
  if (!p) abort();
  return p;
}

static void slept(const char *how, long ms) {
  if (!__atomic_load_n(&watching, __ATOMIC_SEQ_CST) || !pthread_equal(pthread_self(), watched_thread)) return;
  if (loop_sleeps++ == 0) snprintf(first_sleep, sizeof first_sleep, "%s of %ld ms", how, ms);
}

/* next_NAME: the definition of NAME after this program's */
#define NEXT(name)                                                                   \
  static __typeof__(&name) next_##name;                                              \
  if (!__atomic_load_n(&next_##name, __ATOMIC_ACQUIRE))                              \
    __atomic_store_n(&next_##name, (__typeof__(&name))next_symbol(#name), __ATOMIC_RELEASE)

int nanosleep(const struct timespec *req, struct timespec *rem) {
  NEXT(nanosleep);
  slept("nanosleep", (long)(req->tv_sec * 1000 + req->tv_nsec / 1000000));
  return next_nanosleep(req, rem);
}

int clock_nanosleep(clockid_t clk, int flags, const struct timespec *req, struct timespec *rem) {
  NEXT(clock_nanosleep);
  slept("clock_nanosleep", (long)(req->tv_sec * 1000 + req->tv_nsec / 1000000));
  return next_clock_nanosleep(clk, flags, req, rem);
}

int usleep(useconds_t us) {
  NEXT(usleep);
  slept("usleep", (long)(us / 1000));
  return next_usleep(us);
}

#if !__USE_FORTIFY_LEVEL /* fortified, poll is an inline of the header's */
int poll(struct pollfd *fds, nfds_t n, int timeout) {
  NEXT(poll);
  if (timeout) slept("poll", timeout);
  return next_poll(fds, n, timeout);
}
#endif

/* uv_run(loop, UV_RUN_DEFAULT), counting what slept on the way (loop_sleeps, first_sleep). */
static void run_watched(uv_loop_t *loop) {
  watched_thread = pthread_self();
  loop_sleeps = 0;
  first_sleep[0] = '\0';
  __atomic_store_n(&watching, 1, __ATOMIC_SEQ_CST);
  uv_run(loop, UV_RUN_DEFAULT);
  __atomic_store_n(&watching, 0, __ATOMIC_SEQ_CST);
}

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
                                DSIPC_DUMP_LOGGING | DSIPC_DUMP_VERBOSE, IPC_HANG_MS, got_dump, &a, NULL, &st),
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
  cr_assert_eq(dsipc_process_info_start(&loop, fake_ipc_socket(f), IPC_HANG_MS, got_info, &a, NULL, &st), 0, "%s",
               st.msg);
  uv_run(&loop, UV_RUN_DEFAULT);
  cr_assert_eq(uv_loop_close(&loop), 0, "every handle closed");
  fake_done(f);
  cr_expect_eq(a.calls, 1);
  cr_expect_eq(a.code, 0);
  cr_expect_eq(a.info_version, 2);
  cr_expect_str_eq(a.cmdline, "a");
  cr_expect_str_eq(a.version, "8.0");
}

/* A deadline, counted from the call even when the caller's loop did other work since its last
 * turn (its cached clock STALE_LOOP_MS behind), and a cancelled call that neither answers nor
 * holds the loop for its own 60 s deadline. */
Test(call, deadline_and_cancel, .timeout = 120) {
  fake_ipc *f = fake_play("call-info-hangs.case", NULL);
  uv_loop_t loop;
  uv_loop_init(&loop);
  struct answer late = {0}, dropped = {0};
  dsipc_status st;
  dsipc_call *c = NULL;
  let_time_pass(STALE_LOOP_MS);
  struct timespec t0;
  /* timing: a lower bound (the deadline ended no sooner than asked), and < 30 s only to tell it from the cancelled call's 60 s */
  clock_gettime(CLOCK_MONOTONIC, &t0);
  cr_assert_eq(dsipc_process_info_start(&loop, fake_ipc_socket(f), 200, got_info, &late, NULL, &st), 0, "%s", st.msg);
  cr_assert_eq(dsipc_process_info_start(&loop, fake_ipc_socket(f), 60000, got_info, &dropped, &c, &st), 0, "%s",
               st.msg);
  cr_assert(c);
  dsipc_call_cancel(c); /* no callback, and the loop does not wait for its 60 s */
  uv_run(&loop, UV_RUN_DEFAULT);
  /* timing: as above */
  double ms = ms_since(&t0);
  cr_assert_eq(uv_loop_close(&loop), 0, "every handle closed");
  fake_done(f);
  cr_expect_eq(late.calls, 1);
  cr_expect_eq(late.code, DSIPC_ETIMEDOUT);
  cr_expect_eq(dropped.calls, 0, "a cancelled call is never answered");
  cr_log_info("a deadline of 200 ms ended the call after %.0f ms", ms);
  cr_expect_geq(ms, 200 - LOOP_CLOCK_SLACK_MS,
                "a deadline of 200 ms ended the call %.0f ms after it was made (the loop's clock %d ms stale then; at "
                "least %d ms expected): %s",
                ms, STALE_LOOP_MS, 200 - LOOP_CLOCK_SLACK_MS, dnt_run_context(getpid()));
  cr_expect_lt(ms, 30000, "the loop waited %.0f ms: for the cancelled call's 60 s deadline? %s", ms,
               dnt_run_context(getpid()));
}

Test(call, no_runtime_there) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  struct answer a = {0}, none = {0};
  dsipc_status st;
  /* a socket that is not there may yet appear (a runtime starting): tried again from the loop
   * (20, 40, 80 and 160 ms apart), then the callback says no, once; the deadline, a hang's, is
   * not what ends it */
  struct timespec t0;
  /* timing: a lower bound: the tries were not cut short */
  clock_gettime(CLOCK_MONOTONIC, &t0);
  int rc = dsipc_process_info_start(&loop, "/nonexistent/dotnet-diagnostic-1-1-socket", IPC_HANG_MS, got_info, &a,
                                    NULL, &st);
  cr_expect_neq(dsipc_dump_start(&loop, "/nonexistent/s", "", 1, 0, IPC_HANG_MS, got_dump, &none, NULL, &st), 0,
                "no dump path: refused at once");
  run_watched(&loop);
  /* timing: as above */
  double ms = ms_since(&t0);
  cr_expect_eq(none.calls, 0, "no callback after an error return");
  cr_assert_eq(rc, 0, "a socket not there yet is tried again from the loop, not refused at once");
  cr_expect_eq(a.calls, 1, "one answer");
  cr_expect_eq(a.code, -ECONNREFUSED, "and it is the refusal once the tries are spent (%d: %s)", a.code,
               dsipc_strerror(a.code));
  cr_log_info("gave up after %.0f ms of tries", ms);
  cr_expect_geq(ms, 20 + 40 + 80 + 160 - LOOP_CLOCK_SLACK_MS, "gave up %.0f ms after the call: before its tries were "
                "spent? (%s)", ms, dnt_run_context(getpid()));
  cr_expect_eq(loop_sleeps, 0, "the loop slept %d times between the tries (first: %s)", loop_sleeps, first_sleep);
  cr_assert_eq(uv_loop_close(&loop), 0);
}

/* A listener that is not there at first and then listens: the call connects on a later attempt
 * from the loop, which meanwhile runs other timers at their time (no sleep). The socket appears
 * from a timer due 30 ms after the call: libuv runs timers in the order they are due, so it runs
 * after the second attempt (due 20 ms after the call) and before the third (due 40 ms after the
 * second ran), however late the machine runs them. A call that slept between its tries would
 * hold the timer back; the sleeps are counted too. */
struct late_listener {
  uv_timer_t appear, tick;
  fake_ipc *f;
  char dir[64];
  const struct answer *a;
  int appeared;
  int ticks;              /* a 5 ms timer beside it all, for the figure of its worst gap */
  double worst_gap_ms;
  struct timespec last;
};

static void appear(uv_timer_t *t) {
  struct late_listener *l = t->data;
  char err[800];
  cr_assert_eq(l->a->calls, 0, "answered before the socket was there");
  cr_assert_eq(mkdir(l->dir, 0700), 0);
  cr_assert_eq(fake_ipc_run(l->f, err, sizeof err), 0, "%s", err);
  l->appeared = 1;
}

static void tick(uv_timer_t *t) {
  struct late_listener *l = t->data;
  /* timing: the worst gap between ticks is printed, not asserted */
  double gap = ms_since(&l->last);
  if (l->ticks++ && gap > l->worst_gap_ms) l->worst_gap_ms = gap;
  /* timing: as above */
  clock_gettime(CLOCK_MONOTONIC, &l->last);
  if (l->a->calls) uv_timer_stop(t);
}

Test(call, a_socket_that_appears_a_moment_later) {
  /* an older runtime: ProcessInfo3 unknown, then ProcessInfo2 */
  struct late_listener l = {0};
  struct answer a = {0};
  l.a = &a;
  snprintf(l.dir, sizeof l.dir, "/tmp/dnt-ipcl-XXXXXX");
  cr_assert(mkdtemp(l.dir));
  rmdir(l.dir); /* made again by the timer: until then the path does not exist */
  char path[100], err[800];
  snprintf(path, sizeof path, "%s/sock", l.dir);
  fake_ipc_opts o = {.socket = path};
  cr_assert_eq(fake_ipc_new(&l.f, "call-info-v2.case", &o, err, sizeof err), 0, "%s", err);
  uv_loop_t loop;
  uv_loop_init(&loop);
  uv_timer_init(&loop, &l.appear);
  uv_timer_init(&loop, &l.tick);
  l.appear.data = l.tick.data = &l;
  dsipc_status st;
  cr_assert_eq(dsipc_process_info_start(&loop, path, IPC_HANG_MS, got_info, &a, NULL, &st), 0, "%s", st.msg);
  uv_timer_start(&l.appear, appear, 30, 0); /* the same loop time as the call's first retry (20 ms) */
  /* timing: as above */
  clock_gettime(CLOCK_MONOTONIC, &l.last);
  uv_timer_start(&l.tick, tick, 5, 5);
  run_watched(&loop);
  uv_close((uv_handle_t *)&l.appear, NULL);
  uv_close((uv_handle_t *)&l.tick, NULL);
  uv_run(&loop, UV_RUN_DEFAULT);
  cr_assert_eq(uv_loop_close(&loop), 0);
  fake_done(l.f);
  unlink(path);
  rmdir(l.dir);
  cr_expect(l.appeared, "the socket was made");
  cr_expect_eq(a.calls, 1);
  cr_expect_eq(a.code, 0, "answered once the socket was there: %d (%s)", a.code, dsipc_strerror(a.code));
  cr_expect_eq(a.info_version, 2);
  cr_expect_eq(loop_sleeps, 0, "the loop slept %d times while the call tried again (first: %s)", loop_sleeps,
               first_sleep);
  cr_log_info("a 5 ms timer beside the retries: %d ticks, worst gap %.1f ms", l.ticks, l.worst_gap_ms);
}
