/* The reverse port (listener.c): its private directory, a fake runtime that dials it and
 * advertises itself (the fake server dialing, cases listener-*.case), blocking and on a libuv
 * loop, something that is no runtime, a cancel; and a real runtime started suspended that dials
 * it and is resumed. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include "dsipc.h"
#include "ipc-test.h"
#include "lib/target-cr.h"
#include "lib/target.h"

/* The fake runtime dialing the listener l, playing case_name. */
static fake_ipc *dial(const char *case_name, dsipc_listener *l) {
  fake_ipc_opts o = {.socket = dsipc_listener_path(l), .dial = 1};
  return fake_play(case_name, &o);
}

Test(listener, private_directory_and_socket_modes) {
  dsipc_listener *l;
  dsipc_status st;
  cr_assert_eq(dsipc_listener_open(&l, NULL, "dntrace.sock", &st), 0, "%s", st.msg);
  struct stat s;
  cr_assert_eq(stat(dsipc_listener_path(l), &s), 0);
  cr_assert(S_ISSOCK(s.st_mode));
  cr_assert_eq(s.st_mode & 0777, 0600, "socket mode %o", s.st_mode & 0777);
  char dir[256];
  snprintf(dir, sizeof dir, "%s", dsipc_listener_path(l));
  *strrchr(dir, '/') = '\0';
  cr_assert_eq(stat(dir, &s), 0);
  cr_assert_eq(s.st_mode & 0777, 0700, "directory mode %o", s.st_mode & 0777);
  dsipc_advertise adv;
  int fd;
  cr_assert_eq(dsipc_listener_accept(l, 100, &adv, &fd, &st), DSIPC_ETIMEDOUT);
  dsipc_listener_close(l);
  cr_assert_neq(stat(dir, &s), 0, "the directory is removed");
}

/* The real thing: a runtime started suspended dials our listener, advertises its pid, answers
 * ProcessInfo on that connection, dials again, and starts once we send ResumeRuntime. */
Test(listener, a_real_runtime_connects_and_is_resumed, .timeout = 240) {
  DNT_REQUIRE_TARGET();
  dsipc_listener *l;
  dsipc_status st;
  cr_assert_eq(dsipc_listener_open(&l, NULL, "port.sock", &st), 0, "%s", st.msg);
  char env[300];
  snprintf(env, sizeof env, "DOTNET_DiagnosticPorts=%s,suspend,connect", dsipc_listener_path(l));
  const char *const envs[] = {env, NULL};
  dnt_target t;
  dnt_target_opts o = {.mode = DNT_TARGET_PLAIN, .env = envs, .no_wait = 1, .timeout_ms = DNT_HANG_MS};
  char err[512];
  cr_assert_eq(dnt_target_start(&t, &o, err, sizeof err), 0, "%s", err);

  dsipc_advertise adv;
  int fd;
  cr_assert_eq(dsipc_listener_accept(l, IPC_HANG_MS, &adv, &fd, &st), 0, "%s", st.msg);
  cr_assert_eq(adv.pid, (uint64_t)t.pid);

  dsipc_buf req, reply;
  dsipc_buf_init(&req);
  dsipc_buf_init(&reply);
  cr_assert_eq(dsipc_encode_command(&req, DSIPC_SET_PROCESS, DSIPC_PROC_INFO2), 0);
  cr_assert_eq(dsipc_transact_fd(fd, &req, IPC_HANG_MS, &reply, NULL, &st), 0, "%s", st.msg);
  dsipc_process_info pi;
  cr_assert_eq(dsipc_decode_process_info(reply.data + 20, reply.len - 20, 2, &pi), 0);
  cr_assert_eq(pi.process_id, (uint64_t)t.pid);
  cr_assert_eq(memcmp(pi.runtime_cookie, adv.cookie, 16), 0, "the advertise and ProcessInfo name the same runtime");
  dsipc_process_info_release(&pi);

  cr_assert_eq(dsipc_listener_accept(l, IPC_HANG_MS, &adv, &fd, &st), 0, "the runtime dials again: %s", st.msg);
  cr_assert_eq(dsipc_encode_command(&req, DSIPC_SET_PROCESS, DSIPC_PROC_RESUME), 0);
  cr_assert_eq(dsipc_transact_fd(fd, &req, IPC_HANG_MS, &reply, NULL, &st), 0, "%s", st.msg);
  cr_assert_eq(dnt_target_wait_ready(&t, DNT_HANG_MS, err, sizeof err), 0, "resumed, it starts: %s", err);
  dsipc_buf_release(&req);
  dsipc_buf_release(&reply);
  dnt_target_stop(&t);
  dsipc_listener_close(l);
}

Test(listener, fake_runtime_blocking) {
  dsipc_listener *l;
  dsipc_status st;
  cr_assert_eq(dsipc_listener_open(&l, NULL, "port", &st), 0, "%s", st.msg);
  fake_ipc *f = dial("listener-advertise.case", l); /* the advertise in two writes */
  dsipc_advertise adv;
  int fd;
  cr_assert_eq(dsipc_listener_accept(l, IPC_HANG_MS, &adv, &fd, &st), 0, "%s", st.msg);
  cr_assert_eq(adv.pid, 4321);
  char guid[37];
  dsipc_format_guid(adv.cookie, guid);
  cr_assert_str_eq(guid, "12345678-9abc-def0-0102-030405060708");
  dsipc_buf req, reply;
  dsipc_buf_init(&req);
  dsipc_buf_init(&reply);
  cr_assert_eq(dsipc_encode_command(&req, DSIPC_SET_PROCESS, DSIPC_PROC_RESUME), 0);
  cr_assert_eq(dsipc_transact_fd(fd, &req, IPC_HANG_MS, &reply, NULL, &st), 0, "%s", st.msg);
  fake_done(f); /* it got ResumeRuntime, a bare 04 01 header */
  dsipc_buf_release(&req);
  dsipc_buf_release(&reply);
  dsipc_listener_close(l);
}

struct async_ctx {
  uv_loop_t loop;
  dsipc_listener *l;
  int calls, code, pid;
  dsipc_stream *s;
  int replies, ends, reply_code, end_code;
};

static void sink_reply(void *ud, const dsipc_status *st, const uint8_t *p, size_t n) {
  (void)p, (void)n;
  struct async_ctx *a = ud;
  a->replies++;
  a->reply_code = st->code;
}

static void sink_end(void *ud, const dsipc_status *st) {
  struct async_ctx *a = ud;
  a->ends++;
  a->end_code = st->code;
  dsipc_stream_close(a->s);
}

static void on_accepted(void *ud, const dsipc_status *st, const dsipc_advertise *adv, int fd) {
  struct async_ctx *a = ud;
  a->calls++;
  a->code = st->code;
  if (st->code) {
    cr_assert_null(adv);
    cr_assert_eq(fd, -1);
    return;
  }
  a->pid = (int)adv->pid;
  /* the command goes on the accepted connection, on the same loop */
  static const dsipc_stream_cb cb = {sink_reply, NULL, sink_end};
  dsipc_buf req;
  dsipc_buf_init(&req);
  cr_assert_eq(dsipc_encode_command(&req, DSIPC_SET_PROCESS, DSIPC_PROC_RESUME), 0);
  dsipc_status st2;
  cr_assert_eq(dsipc_stream_open(&a->loop, NULL, fd, &req, IPC_HANG_MS, &cb, a, &a->s, &st2), 0, "%s", st2.msg);
  dsipc_buf_release(&req);
}

Test(listener, fake_runtime_on_a_loop) {
  struct async_ctx a = {0};
  dsipc_status st;
  cr_assert_eq(uv_loop_init(&a.loop), 0);
  cr_assert_eq(dsipc_listener_open(&a.l, NULL, "port", &st), 0, "%s", st.msg);
  cr_assert_eq(dsipc_listener_accept_start(a.l, &a.loop, IPC_HANG_MS, on_accepted, &a, &st), 0, "%s", st.msg);
  int fd;
  dsipc_advertise adv;
  cr_assert_eq(dsipc_listener_accept(a.l, 10, &adv, &fd, &st), -EBUSY, "one accept at a time");
  fake_ipc *f = dial("listener-advertise.case", a.l);
  uv_run(&a.loop, UV_RUN_DEFAULT);
  fake_done(f); /* the command arrived byte for byte: a bare ResumeRuntime header */
  cr_assert_eq(a.calls, 1);
  cr_assert_eq(a.code, 0);
  cr_assert_eq(a.pid, 4321);
  cr_assert_eq(a.replies, 1);
  cr_assert_eq(a.reply_code, 0);
  cr_assert_eq(a.end_code, 0);
  dsipc_listener_close(a.l);
  cr_assert_eq(uv_loop_close(&a.loop), 0);
}

/* Nobody dials: the deadline ends the accept, counted from the call even when the caller's loop
 * did other work since its last turn (its cached clock STALE_LOOP_MS behind). A deadline that did
 * not fire would leave the loop waiting for ever: the test's timeout is that hang's ceiling. */
Test(listener, async_deadline_and_bad_advertise, .timeout = 120) {
  struct async_ctx a = {0};
  dsipc_status st;
  cr_assert_eq(uv_loop_init(&a.loop), 0);
  cr_assert_eq(dsipc_listener_open(&a.l, NULL, "port", &st), 0, "%s", st.msg);
  let_time_pass(STALE_LOOP_MS);
  struct timespec t0;
  /* timing: a lower bound: the deadline ended no sooner than asked */
  clock_gettime(CLOCK_MONOTONIC, &t0);
  cr_assert_eq(dsipc_listener_accept_start(a.l, &a.loop, 200, on_accepted, &a, &st), 0, "%s", st.msg);
  uv_run(&a.loop, UV_RUN_DEFAULT);
  /* timing: as above */
  double ms = ms_since(&t0);
  cr_assert_eq(a.calls, 1);
  cr_assert_eq(a.code, DSIPC_ETIMEDOUT);
  cr_log_info("an accept deadline of 200 ms ended after %.0f ms", ms);
  cr_assert_geq(ms, 200 - LOOP_CLOCK_SLACK_MS,
                "an accept deadline of 200 ms ended %.0f ms after the call (the loop's clock %d ms stale then; at "
                "least %d ms expected): %s",
                ms, STALE_LOOP_MS, 200 - LOOP_CLOCK_SLACK_MS, dnt_run_context(getpid()));

  /* something that is not a runtime: the same length, another magic */
  a.calls = 0;
  cr_assert_eq(dsipc_listener_accept_start(a.l, &a.loop, IPC_HANG_MS, on_accepted, &a, &st), 0, "%s", st.msg);
  fake_ipc *f = dial("listener-bad-advertise.case", a.l);
  uv_run(&a.loop, UV_RUN_DEFAULT);
  cr_assert_eq(a.calls, 1);
  cr_assert_eq(a.code, DSIPC_EBADMAGIC);
  fake_done(f); /* nothing was sent to it before the listener hung up */
  dsipc_listener_close(a.l);
  cr_assert_eq(uv_loop_close(&a.loop), 0);
}

Test(listener, close_cancels_a_pending_accept) {
  struct async_ctx a = {0};
  dsipc_status st;
  cr_assert_eq(uv_loop_init(&a.loop), 0);
  cr_assert_eq(dsipc_listener_open(&a.l, NULL, "port", &st), 0, "%s", st.msg);
  cr_assert_eq(dsipc_listener_accept_start(a.l, &a.loop, 0, on_accepted, &a, &st), 0, "%s", st.msg);
  uv_run(&a.loop, UV_RUN_NOWAIT);
  dsipc_listener_close(a.l);
  uv_run(&a.loop, UV_RUN_DEFAULT); /* lets libuv release the handles; must not block */
  cr_assert_eq(a.calls, 0, "no callback after a cancel");
  cr_assert_eq(uv_loop_close(&a.loop), 0);
}

/* What ps shows when the runtime cannot be asked (its socket another user's): the version of the
 * libcoreclr.so the process has mapped. It must be what the runtime itself says (ProcessInfo2's
 * product version, without a "+commit" suffix); a process without a runtime (this one) has none. */
Test(discover, the_mapped_runtime_version_is_the_runtime_s_own, .timeout = 240) {
  DNT_REQUIRE_TARGET();
  dnt_target t;
  dnt_target_opts o = {.mode = DNT_TARGET_PLAIN, .timeout_ms = DNT_HANG_MS};
  char err[512];
  cr_assert_eq(dnt_target_start(&t, &o, err, sizeof err), 0, "%s", err);
  dsipc_endpoint ep;
  cr_assert_eq(dsipc_endpoint_find(t.pid, &ep), 0, "%s", ep.errmsg);
  dsipc_process_info pi;
  dsipc_status st;
  cr_assert_eq(dsipc_process_info_get(ep.path, IPC_HANG_MS, &pi, &st), 0, "%s", st.msg);
  cr_assert(pi.clr_product_version && *pi.clr_product_version, "ProcessInfo2 names the runtime's version");
  char mapped[64];
  cr_assert_eq(dsipc_mapped_runtime_version(t.pid, mapped, sizeof mapped), 0);
  size_t n = strcspn(pi.clr_product_version, "+");
  cr_assert(strlen(mapped) == n && strncmp(mapped, pi.clr_product_version, n) == 0, "mapped '%s', the runtime says '%s'",
            mapped, pi.clr_product_version);
  dsipc_process_info_release(&pi);
  dnt_target_stop(&t);
  cr_assert_eq(dsipc_mapped_runtime_version(getpid(), mapped, sizeof mapped), -ENOENT);
}
