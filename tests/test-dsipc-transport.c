/* The transport against a fake server, only for what a real runtime cannot be made to do (an
 * error reply, UNKNOWN_COMMAND, a peer that hangs or hangs up mid-reply), and the reverse
 * direction against a real runtime that dials our listener. */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include "dsipc.h"
#include "lib/target-cr.h"
#include "lib/target.h"

/* One scripted exchange per connection: read a request, answer with `reply` (or not). */
struct script {
  const uint8_t *reply;
  size_t reply_len;
  int hang;            /* accept, read, never answer */
};

struct fake {
  int fd;
  char dir[64];
  char path[128];
  struct script steps[4];
  int nsteps;
  uint8_t got[4][512]; /* requests received, for checking */
  size_t got_len[4];
  pthread_t thread;
};

static void *serve(void *arg) {
  struct fake *f = arg;
  for (int i = 0; i < f->nsteps; i++) {
    int c = accept(f->fd, NULL, NULL);
    if (c < 0) return NULL;
    ssize_t n = read(c, f->got[i], sizeof f->got[i]);
    f->got_len[i] = n > 0 ? (size_t)n : 0;
    if (f->steps[i].hang) {
      sleep(3);
    } else if (f->steps[i].reply_len) {
      if (write(c, f->steps[i].reply, f->steps[i].reply_len) < 0) {}
    }
    close(c);
  }
  return NULL;
}

static void fake_start(struct fake *f) {
  snprintf(f->dir, sizeof f->dir, "/tmp/dnt-fake-XXXXXX");
  cr_assert(mkdtemp(f->dir));
  snprintf(f->path, sizeof f->path, "%s/sock", f->dir);
  f->fd = socket(AF_UNIX, SOCK_STREAM, 0);
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  strcpy(sa.sun_path, f->path);
  cr_assert_eq(bind(f->fd, (struct sockaddr *)&sa, sizeof sa), 0);
  cr_assert_eq(listen(f->fd, 4), 0);
  pthread_create(&f->thread, NULL, serve, f);
}

static void fake_stop(struct fake *f) {
  shutdown(f->fd, SHUT_RDWR);
  pthread_join(f->thread, NULL);
  close(f->fd);
  unlink(f->path);
  rmdir(f->dir);
}

#define HDR(size, set, id) 'D', 'O', 'T', 'N', 'E', 'T', '_', 'I', 'P', 'C', '_', 'V', '1', 0, size, 0, set, id, 0, 0

static const uint8_t unknown_command[] = {HDR(24, 0xff, 0xff), 0x85, 0x13, 0x13, 0x80};
/* ProcessInfo2: pid 9, cookie 0..., cmd "c", os "L", arch "a", entry "e", version "v" */
static const uint8_t info2_reply[] = {HDR(20 + 8 + 16 + 5 * 8, 0xff, 0x00), 9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                      0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 'c', 0, 0, 0, 2, 0, 0, 0, 'L', 0, 0, 0,
                                      2, 0, 0, 0, 'a', 0, 0, 0, 2, 0, 0, 0, 'e', 0, 0, 0, 2, 0, 0, 0, 'v', 0, 0, 0};

Test(transport, process_info_falls_back_on_unknown_command) {
  struct fake f = {.nsteps = 2};
  f.steps[0] = (struct script){unknown_command, sizeof unknown_command, 0};
  f.steps[1] = (struct script){info2_reply, sizeof info2_reply, 0};
  fake_start(&f);
  dsipc_process_info pi;
  dsipc_status st;
  cr_assert_eq(dsipc_process_info_get(f.path, 2000, &pi, &st), 0, "%s", st.msg);
  fake_stop(&f);
  /* what was asked: ProcessInfo3 (04 08), then ProcessInfo2 (04 04), each a bare header */
  cr_assert_eq(f.got_len[0], 20);
  cr_assert_eq(f.got[0][16], 0x04);
  cr_assert_eq(f.got[0][17], 0x08);
  cr_assert_eq(f.got_len[1], 20);
  cr_assert_eq(f.got[1][17], 0x04);
  cr_assert_eq(pi.info_version, 2);
  cr_assert_eq(pi.process_id, 9);
  cr_assert_str_eq(pi.clr_product_version, "v");
  cr_assert_null(pi.runtime_identifier);
  dsipc_process_info_release(&pi);
}

Test(transport, error_reply_keeps_the_hresult) {
  static const uint8_t fail[] = {HDR(24, 0xff, 0xff), 0x05, 0x40, 0x00, 0x80};
  struct fake f = {.nsteps = 1};
  f.steps[0] = (struct script){fail, sizeof fail, 0};
  fake_start(&f);
  dsipc_status st;
  cr_assert_eq(dsipc_resume_runtime(f.path, 2000, &st), DSIPC_ESERVER);
  fake_stop(&f);
  cr_assert_eq(st.hresult, 0x80004005);
  cr_assert(strstr(st.msg, "0x80004005"), "%s", st.msg);
}

Test(transport, a_peer_that_hangs_meets_the_deadline) {
  struct fake f = {.nsteps = 1};
  f.steps[0] = (struct script){NULL, 0, 1};
  fake_start(&f);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  dsipc_status st;
  int rc = dsipc_resume_runtime(f.path, 300, &st);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double ms = (double)(t1.tv_sec - t0.tv_sec) * 1000 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
  cr_assert_eq(rc, DSIPC_ETIMEDOUT, "%s", st.msg);
  cr_assert(ms >= 290 && ms < 1500, "took %.0f ms for a 300 ms deadline", ms);
  cr_assert(strstr(st.msg, "within 300 ms"), "%s", st.msg);
  fake_stop(&f);
}

Test(transport, a_peer_that_hangs_up_mid_reply) {
  struct fake f = {.nsteps = 1};
  f.steps[0] = (struct script){info2_reply, 30, 0}; /* header and 10 of the payload bytes */
  fake_start(&f);
  dsipc_process_info pi;
  dsipc_status st;
  cr_assert_eq(dsipc_process_info_get(f.path, 2000, &pi, &st), DSIPC_ECLOSED, "%s", st.msg);
  cr_assert(strstr(st.msg, "after 30 bytes"), "%s", st.msg);
  fake_stop(&f);
}

Test(transport, garbage_reply) {
  static const uint8_t junk[] = "HTTP/1.1 400 Bad Request\r\n\r\n";
  struct fake f = {.nsteps = 1};
  f.steps[0] = (struct script){junk, sizeof junk - 1, 0};
  fake_start(&f);
  dsipc_status st;
  cr_assert_eq(dsipc_resume_runtime(f.path, 2000, &st), DSIPC_EBADMAGIC, "%s", st.msg);
  fake_stop(&f);
}

Test(transport, nobody_listening) {
  dsipc_status st;
  cr_assert_eq(dsipc_resume_runtime("/tmp/dnt-no-such-dir/socket", 1000, &st), -ECONNREFUSED);
  cr_assert(strstr(st.msg, "cannot connect to '/tmp/dnt-no-such-dir/socket'"), "%s", st.msg);
}

/* A socket path longer than sun_path (108 bytes) is reached through /proc/self/fd/N. */
Test(transport, long_socket_path) {
  static const uint8_t ok[] = {HDR(24, 0xff, 0x00), 0, 0, 0, 0};
  char dir[300];
  snprintf(dir, sizeof dir, "/tmp/dnt-long-XXXXXX");
  cr_assert(mkdtemp(dir));
  strcat(dir, "/a-directory-name-that-makes-the-path-long-enough-to-overflow-sun-path-by-a-good-margin");
  cr_assert_eq(mkdir(dir, 0700), 0);
  char path[400];
  snprintf(path, sizeof path, "%s/dotnet-diagnostic-1-2-socket", dir);
  cr_assert_gt(strlen(path), 108);
  /* bind it the same way */
  char alias[128];
  int dfd = open(dir, O_PATH);
  snprintf(alias, sizeof alias, "/proc/self/fd/%d/dotnet-diagnostic-1-2-socket", dfd);
  struct fake f = {.nsteps = 1};
  f.steps[0] = (struct script){ok, sizeof ok, 0};
  f.fd = socket(AF_UNIX, SOCK_STREAM, 0);
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  strcpy(sa.sun_path, alias);
  cr_assert_eq(bind(f.fd, (struct sockaddr *)&sa, sizeof sa), 0, "%s", strerror(errno));
  listen(f.fd, 1);
  pthread_create(&f.thread, NULL, serve, &f);
  dsipc_status st;
  cr_assert_eq(dsipc_resume_runtime(path, 2000, &st), 0, "%s", st.msg);
  pthread_join(f.thread, NULL);
  close(f.fd);
  close(dfd);
  unlink(path);
  rmdir(dir);
  *strrchr(dir, '/') = '\0';
  rmdir(dir);
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
Test(listener, a_real_runtime_connects_and_is_resumed, .timeout = 60) {
  DNT_REQUIRE_TARGET();
  dsipc_listener *l;
  dsipc_status st;
  cr_assert_eq(dsipc_listener_open(&l, NULL, "port.sock", &st), 0, "%s", st.msg);
  char env[300];
  snprintf(env, sizeof env, "DOTNET_DiagnosticPorts=%s,suspend,connect", dsipc_listener_path(l));
  const char *const envs[] = {env, NULL};
  dnt_target t;
  dnt_target_opts o = {.mode = DNT_TARGET_PLAIN, .env = envs, .no_wait = 1, .timeout_ms = 30000};
  char err[512];
  cr_assert_eq(dnt_target_start(&t, &o, err, sizeof err), 0, "%s", err);

  dsipc_advertise adv;
  int fd;
  cr_assert_eq(dsipc_listener_accept(l, 20000, &adv, &fd, &st), 0, "%s", st.msg);
  cr_assert_eq(adv.pid, (uint64_t)t.pid);

  dsipc_buf req, reply;
  dsipc_buf_init(&req);
  dsipc_buf_init(&reply);
  cr_assert_eq(dsipc_encode_command(&req, DSIPC_SET_PROCESS, DSIPC_PROC_INFO2), 0);
  cr_assert_eq(dsipc_transact_fd(fd, &req, 5000, &reply, NULL, &st), 0, "%s", st.msg);
  dsipc_process_info pi;
  cr_assert_eq(dsipc_decode_process_info(reply.data + 20, reply.len - 20, 2, &pi), 0);
  cr_assert_eq(pi.process_id, (uint64_t)t.pid);
  cr_assert_eq(memcmp(pi.runtime_cookie, adv.cookie, 16), 0, "the advertise and ProcessInfo name the same runtime");
  dsipc_process_info_release(&pi);

  cr_assert_eq(dsipc_listener_accept(l, 20000, &adv, &fd, &st), 0, "the runtime dials again: %s", st.msg);
  cr_assert_eq(dsipc_encode_command(&req, DSIPC_SET_PROCESS, DSIPC_PROC_RESUME), 0);
  cr_assert_eq(dsipc_transact_fd(fd, &req, 5000, &reply, NULL, &st), 0, "%s", st.msg);
  cr_assert_eq(dnt_target_wait_ready(&t, 20000, err, sizeof err), 0, "resumed, it starts: %s", err);
  dsipc_buf_release(&req);
  dsipc_buf_release(&reply);
  dnt_target_stop(&t);
  dsipc_listener_close(l);
}

/* What ps shows when the runtime cannot be asked (its socket another user's): the version of the
 * libcoreclr.so the process has mapped. It must be what the runtime itself says (ProcessInfo2's
 * product version, without a "+commit" suffix); a process without a runtime (this one) has none. */
Test(discover, the_mapped_runtime_version_is_the_runtime_s_own, .timeout = 60) {
  DNT_REQUIRE_TARGET();
  dnt_target t;
  dnt_target_opts o = {.mode = DNT_TARGET_PLAIN, .timeout_ms = 30000};
  char err[512];
  cr_assert_eq(dnt_target_start(&t, &o, err, sizeof err), 0, "%s", err);
  dsipc_endpoint ep;
  cr_assert_eq(dsipc_endpoint_find(t.pid, &ep), 0, "%s", ep.errmsg);
  dsipc_process_info pi;
  dsipc_status st;
  cr_assert_eq(dsipc_process_info_get(ep.path, 5000, &pi, &st), 0, "%s", st.msg);
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
