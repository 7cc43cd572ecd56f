/* One request, one reply, blocking (transport.c), against the fake server playing what a real
 * runtime cannot be made to do on cue: an error reply, UNKNOWN_COMMAND and the fallbacks it
 * causes, a peer that hangs or hangs up mid-reply, garbage, the environment's continuation torn
 * into pieces or cut short, GenerateCoreDump3's error text. Each conversation, with the request
 * bytes it expects, is a case file in tests/unit/ipc/cases/transport-*.case. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dsipc.h"
#include "ipc-test.h"
#include "lib/target.h"

Test(transport, process_info_falls_back_on_unknown_command) {
  /* the case checks what was asked: ProcessInfo3 (04 08), then ProcessInfo2 (04 04), each a bare header */
  fake_ipc *f = fake_play("transport-info-v3-unknown.case", NULL);
  dsipc_process_info pi;
  dsipc_status st;
  cr_assert_eq(dsipc_process_info_get(fake_ipc_socket(f), IPC_HANG_MS, &pi, &st), 0, "%s", st.msg);
  fake_done(f);
  cr_assert_eq(pi.info_version, 2);
  cr_assert_eq(pi.process_id, 9);
  cr_assert_str_eq(pi.clr_product_version, "v");
  cr_assert_null(pi.runtime_identifier);
  dsipc_process_info_release(&pi);
}

Test(transport, a_reply_one_byte_at_a_time) {
  /* 156 writes a ms apart: on a busy machine each may wait for a CPU, so the deadline is a hang's */
  fake_ipc *f = fake_play("transport-info-bytewise.case", NULL);
  dsipc_process_info pi;
  dsipc_status st;
  cr_assert_eq(dsipc_process_info_get(fake_ipc_socket(f), IPC_HANG_MS, &pi, &st), 0, "%s", st.msg);
  fake_done(f);
  cr_assert_eq(pi.info_version, 3);
  cr_assert_eq(pi.process_id, 77);
  cr_assert_eq(pi.runtime_cookie[0], 1);
  cr_assert_eq(pi.runtime_cookie[15], 16);
  cr_assert_str_eq(pi.command_line, "app --x");
  cr_assert_str_eq(pi.arch, "arm64");
  cr_assert_str_eq(pi.runtime_identifier, "linux-arm64");
  dsipc_process_info_release(&pi);
}

Test(transport, error_reply_keeps_the_hresult) {
  fake_ipc *f = fake_play("transport-resume-fails.case", NULL);
  dsipc_status st;
  cr_assert_eq(dsipc_resume_runtime(fake_ipc_socket(f), IPC_HANG_MS, &st), DSIPC_ESERVER);
  fake_done(f);
  cr_assert_eq(st.hresult, 0x80004005);
  cr_assert(strstr(st.msg, "0x80004005"), "%s", st.msg);
}

/* A deadline that did not fire would leave the call waiting for ever (the fake never answers):
 * the test's timeout is that hang's ceiling. */
Test(transport, a_peer_that_hangs_meets_the_deadline, .timeout = 120) {
  fake_ipc *f = fake_play("transport-resume-hangs.case", NULL);
  struct timespec t0;
  /* timing: a lower bound: the deadline ended no sooner than asked */
  clock_gettime(CLOCK_MONOTONIC, &t0);
  dsipc_status st;
  int rc = dsipc_resume_runtime(fake_ipc_socket(f), 300, &st);
  /* timing: as above */
  double ms = ms_since(&t0);
  cr_assert_eq(rc, DSIPC_ETIMEDOUT, "%s", st.msg);
  cr_log_info("a deadline of 300 ms ended the call after %.0f ms", ms);
  cr_assert_geq(ms, 300 - LOOP_CLOCK_SLACK_MS,
                "a deadline of 300 ms ended the call after %.0f ms (at least %d ms expected): %s", ms,
                300 - LOOP_CLOCK_SLACK_MS, dnt_run_context(getpid()));
  cr_assert(strstr(st.msg, "within 300 ms"), "%s", st.msg);
  fake_done(f);
}

Test(transport, a_peer_that_hangs_up_mid_reply) {
  fake_ipc *f = fake_play("transport-info-cut.case", NULL); /* header and 10 of the payload bytes */
  dsipc_process_info pi;
  dsipc_status st;
  cr_assert_eq(dsipc_process_info_get(fake_ipc_socket(f), IPC_HANG_MS, &pi, &st), DSIPC_ECLOSED, "%s", st.msg);
  cr_assert(strstr(st.msg, "after 30 bytes"), "%s", st.msg);
  fake_done(f);
}

Test(transport, garbage_reply) {
  fake_ipc *f = fake_play("transport-resume-garbage.case", NULL);
  dsipc_status st;
  cr_assert_eq(dsipc_resume_runtime(fake_ipc_socket(f), IPC_HANG_MS, &st), DSIPC_EBADMAGIC, "%s", st.msg);
  fake_done(f);
}

Test(transport, nobody_listening) {
  dsipc_status st;
  cr_assert_eq(dsipc_resume_runtime("/tmp/dnt-no-such-dir/socket", IPC_HANG_MS, &st), -ECONNREFUSED);
  cr_assert(strstr(st.msg, "cannot connect to '/tmp/dnt-no-such-dir/socket'"), "%s", st.msg);
}

/* A socket path longer than sun_path (108 bytes) is reached through /proc/self/fd/N. */
Test(transport, long_socket_path) {
  char dir[300];
  snprintf(dir, sizeof dir, "/tmp/dnt-long-XXXXXX");
  cr_assert(mkdtemp(dir));
  strcat(dir, "/a-directory-name-that-makes-the-path-long-enough-to-overflow-sun-path-by-a-good-margin");
  cr_assert_eq(mkdir(dir, 0700), 0);
  char path[400];
  snprintf(path, sizeof path, "%s/dotnet-diagnostic-1-2-socket", dir);
  cr_assert_gt(strlen(path), 108);
  /* the fake binds it the same way */
  char alias[128];
  int dfd = open(dir, O_PATH);
  snprintf(alias, sizeof alias, "/proc/self/fd/%d/dotnet-diagnostic-1-2-socket", dfd);
  fake_ipc_opts o = {.socket = alias};
  fake_ipc *f = fake_play("transport-resume-ok.case", &o);
  dsipc_status st;
  cr_assert_eq(dsipc_resume_runtime(path, IPC_HANG_MS, &st), 0, "%s", st.msg);
  fake_done(f);
  close(dfd);
  unlink(path);
  rmdir(dir);
  *strrchr(dir, '/') = '\0';
  rmdir(dir);
}

/* ---- the environment: a reply announcing N bytes, then exactly N bytes ---- */

Test(transport, environment_in_pieces) {
  /* the reply and the block torn at awkward places, with pauses so they arrive apart */
  fake_ipc *f = fake_play("transport-env-in-pieces.case", NULL);
  char **env;
  size_t n;
  dsipc_status st;
  cr_assert_eq(dsipc_process_env_get(fake_ipc_socket(f), IPC_HANG_MS, &env, &n, &st), 0, "%s", st.msg);
  fake_done(f); /* the request was a bare 04 02 header */
  cr_assert_eq(n, 2);
  cr_assert_str_eq(env[0], "A=1");
  cr_assert_str_eq(env[1], "B=x y");
  dsipc_env_free(env, n);
}

Test(transport, environment_cut_short) {
  fake_ipc *f = fake_play("transport-env-cut.case", NULL);
  char **env;
  size_t n;
  dsipc_status st;
  cr_assert_eq(dsipc_process_env_get(fake_ipc_socket(f), IPC_HANG_MS, &env, &n, &st), DSIPC_ECLOSED, "%s", st.msg);
  cr_assert(strstr(st.msg, "10 of 32 bytes"), "%s", st.msg);
  cr_assert_null(env);
  fake_done(f);
}

/* ---- GenerateCoreDump ---- */

Test(transport, dump3_error_carries_the_runtimes_words) {
  /* the case checks the request: version 3, "/d", full, crash report */
  fake_ipc *f = fake_play("transport-dump3-error.case", NULL);
  dsipc_status st;
  cr_assert_eq(dsipc_dump_generate(fake_ipc_socket(f), "/d", DSIPC_DUMP_FULL, DSIPC_DUMP_CRASHREPORT, IPC_HANG_MS, &st),
               DSIPC_ESERVER);
  fake_done(f);
  cr_assert_eq(st.hresult, 0x80004005u);
  cr_assert(strstr(st.msg, "0x80004005") && strstr(st.msg, ": disk full"), "%s", st.msg);
}

Test(transport, dump_falls_back_to_v1) {
  /* the case checks versions 3, 2, then 1 with the logging bit only */
  fake_ipc *f = fake_play("transport-dump-v1.case", NULL);
  dsipc_status st;
  cr_assert_eq(dsipc_dump_generate(fake_ipc_socket(f), "/d", DSIPC_DUMP_MINI, DSIPC_DUMP_LOGGING | DSIPC_DUMP_VERBOSE,
                                   IPC_HANG_MS, &st),
               0, "%s", st.msg);
  fake_done(f);
}
