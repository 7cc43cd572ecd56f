/* The transport paths test-dsipc-transport leaves out, against fakes (a runtime cannot be made to
 * do these on cue): the environment's continuation, GenerateCoreDump3's error text and its
 * fallback, the EventPipe stream (bytes in order, end, error, deadline, early close), and the
 * listener with a fake runtime that dials, advertises and checks the command it is sent, both
 * blocking and on a libuv loop. */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "dsipc.h"

#define MAGIC 'D', 'O', 'T', 'N', 'E', 'T', '_', 'I', 'P', 'C', '_', 'V', '1', 0
#define HDR(size, set, id) MAGIC, (size) & 0xff, (size) >> 8, set, id, 0, 0

/* ---- a fake server: per connection, read one request, then write chunks with pauses ---- */

struct chunk {
  const uint8_t *p;
  size_t n;
  int pause_ms; /* before writing it */
};

struct step {
  struct chunk out[8];
  int hang; /* answer nothing; wait for the client to give up */
};

struct fake {
  int fd;
  char dir[64], path[100];
  struct step steps[3];
  int nsteps;
  uint8_t got[3][1024];
  size_t got_len[3];
  pthread_t thread;
};

static void pause_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* Reads exactly one message: the header, then what its size says. */
static size_t read_message(int c, uint8_t *buf, size_t cap) {
  size_t have = 0, want = 20;
  while (have < want && have < cap) {
    ssize_t n = read(c, buf + have, want - have);
    if (n <= 0) break;
    have += (size_t)n;
    if (have == 20) want = (size_t)(buf[14] | buf[15] << 8);
  }
  return have;
}

static void *serve(void *arg) {
  struct fake *f = arg;
  for (int i = 0; i < f->nsteps; i++) {
    int c = accept(f->fd, NULL, NULL);
    if (c < 0) return NULL;
    f->got_len[i] = read_message(c, f->got[i], sizeof f->got[i]);
    if (f->steps[i].hang) {
      uint8_t b;
      while (read(c, &b, 1) > 0) {} /* until the client hangs up */
    }
    for (int k = 0; k < 8 && f->steps[i].out[k].p; k++) {
      const struct chunk *ch = &f->steps[i].out[k];
      if (ch->pause_ms) pause_ms(ch->pause_ms);
      if (send(c, ch->p, ch->n, MSG_NOSIGNAL) < 0) break; /* the client may be gone */
    }
    close(c);
  }
  return NULL;
}

/* Listens at f->path (in f->dir, made here) and serves from a thread. */
static void fake_listen(struct fake *f) {
  if (access(f->dir, F_OK) != 0) cr_assert_eq(mkdir(f->dir, 0700), 0);
  f->fd = socket(AF_UNIX, SOCK_STREAM, 0);
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  snprintf(sa.sun_path, sizeof sa.sun_path, "%s", f->path);
  cr_assert_eq(bind(f->fd, (struct sockaddr *)&sa, sizeof sa), 0);
  cr_assert_eq(listen(f->fd, 4), 0);
  pthread_create(&f->thread, NULL, serve, f);
}

static void fake_start(struct fake *f) {
  snprintf(f->dir, sizeof f->dir, "/tmp/dnt-ipct-XXXXXX");
  cr_assert(mkdtemp(f->dir));
  snprintf(f->path, sizeof f->path, "%s/sock", f->dir);
  fake_listen(f);
}

static void fake_stop(struct fake *f) {
  shutdown(f->fd, SHUT_RDWR);
  pthread_join(f->thread, NULL);
  close(f->fd);
  unlink(f->path);
  rmdir(f->dir);
}

static double ms_since(const struct timespec *t0) {
  struct timespec t1;
  clock_gettime(CLOCK_MONOTONIC, &t1);
  return (double)(t1.tv_sec - t0->tv_sec) * 1000 + (double)(t1.tv_nsec - t0->tv_nsec) / 1e6;
}

/* ---- the environment: a reply announcing N bytes, then exactly N bytes ---- */

/* count 2, "A=1" (count 4), "B=x y" (count 6): 4 + (4 + 8) + (4 + 12) = 32 bytes */
static const uint8_t env_block[] = {2, 0, 0, 0, 4, 0, 0, 0, 'A', 0, '=', 0, '1', 0, 0, 0,
                                    6, 0, 0, 0, 'B', 0, '=', 0, 'x', 0, ' ', 0, 'y', 0, 0, 0};
static const uint8_t env_reply[] = {HDR(26, 0xff, 0x00), 32, 0, 0, 0, 0, 0};

Test(transport, environment_in_pieces) {
  struct fake f = {.nsteps = 1};
  /* the reply and the block torn at awkward places, with pauses so they arrive apart */
  f.steps[0].out[0] = (struct chunk){env_reply, 23, 0};
  f.steps[0].out[1] = (struct chunk){env_reply + 23, 3, 20};
  f.steps[0].out[2] = (struct chunk){env_block, 5, 20};
  f.steps[0].out[3] = (struct chunk){env_block + 5, sizeof env_block - 5, 20};
  fake_start(&f);
  char **env;
  size_t n;
  dsipc_status st;
  cr_assert_eq(dsipc_process_env_get(f.path, 2000, &env, &n, &st), 0, "%s", st.msg);
  fake_stop(&f);
  const uint8_t req[] = {HDR(20, 0x04, 0x02)};
  cr_assert_eq(f.got_len[0], sizeof req);
  cr_assert_eq(memcmp(f.got[0], req, sizeof req), 0);
  cr_assert_eq(n, 2);
  cr_assert_str_eq(env[0], "A=1");
  cr_assert_str_eq(env[1], "B=x y");
  dsipc_env_free(env, n);
}

Test(transport, environment_cut_short) {
  struct fake f = {.nsteps = 1};
  f.steps[0].out[0] = (struct chunk){env_reply, sizeof env_reply, 0};
  f.steps[0].out[1] = (struct chunk){env_block, 10, 0};
  fake_start(&f);
  char **env;
  size_t n;
  dsipc_status st;
  cr_assert_eq(dsipc_process_env_get(f.path, 2000, &env, &n, &st), DSIPC_ECLOSED, "%s", st.msg);
  cr_assert(strstr(st.msg, "10 of 32 bytes"), "%s", st.msg);
  cr_assert_null(env);
  fake_stop(&f);
}

/* ---- GenerateCoreDump ---- */

/* string "/d": count 3 */
#define PATH_D 3, 0, 0, 0, '/', 0, 'd', 0, 0, 0

Test(transport, dump3_error_carries_the_runtimes_words) {
  /* HRESULT E_FAIL, then "disk full" (count 10) */
  static const uint8_t fail[] = {HDR(20 + 4 + 4 + 20, 0xff, 0xff), 0x05, 0x40, 0x00, 0x80, 10, 0, 0, 0,
                                 'd', 0, 'i', 0, 's', 0, 'k', 0, ' ', 0, 'f', 0, 'u', 0, 'l', 0, 'l', 0, 0, 0};
  struct fake f = {.nsteps = 1};
  f.steps[0].out[0] = (struct chunk){fail, sizeof fail, 0};
  fake_start(&f);
  dsipc_status st;
  cr_assert_eq(dsipc_dump_generate(f.path, "/d", DSIPC_DUMP_FULL, DSIPC_DUMP_CRASHREPORT, 2000, &st), DSIPC_ESERVER);
  fake_stop(&f);
  const uint8_t req[] = {HDR(20 + 10 + 8, 0x01, 0x03), PATH_D, 4, 0, 0, 0, 4, 0, 0, 0};
  cr_assert_eq(f.got_len[0], sizeof req);
  cr_assert_eq(memcmp(f.got[0], req, sizeof req), 0);
  cr_assert_eq(st.hresult, 0x80004005u);
  cr_assert(strstr(st.msg, "0x80004005") && strstr(st.msg, ": disk full"), "%s", st.msg);
}

Test(transport, dump_falls_back_to_v1) {
  static const uint8_t unknown[] = {HDR(24, 0xff, 0xff), 0x85, 0x13, 0x13, 0x80};
  static const uint8_t ok[] = {HDR(24, 0xff, 0x00), 0, 0, 0, 0};
  struct fake f = {.nsteps = 3};
  f.steps[0].out[0] = (struct chunk){unknown, sizeof unknown, 0};
  f.steps[1].out[0] = (struct chunk){unknown, sizeof unknown, 0};
  f.steps[2].out[0] = (struct chunk){ok, sizeof ok, 0};
  fake_start(&f);
  dsipc_status st;
  cr_assert_eq(dsipc_dump_generate(f.path, "/d", DSIPC_DUMP_MINI, DSIPC_DUMP_LOGGING | DSIPC_DUMP_VERBOSE, 2000, &st), 0,
               "%s", st.msg);
  fake_stop(&f);
  const uint8_t v3[] = {HDR(38, 0x01, 0x03), PATH_D, 1, 0, 0, 0, 3, 0, 0, 0};
  const uint8_t v2[] = {HDR(38, 0x01, 0x02), PATH_D, 1, 0, 0, 0, 3, 0, 0, 0};
  const uint8_t v1[] = {HDR(38, 0x01, 0x01), PATH_D, 1, 0, 0, 0, 1, 0, 0, 0}; /* logging bit only */
  cr_assert_eq(memcmp(f.got[0], v3, sizeof v3), 0);
  cr_assert_eq(memcmp(f.got[1], v2, sizeof v2), 0);
  cr_assert_eq(memcmp(f.got[2], v1, sizeof v1), 0);
  cr_assert_eq(f.got_len[2], sizeof v1);
}

/* ---- the async calls (call.c): the same fallbacks on the caller's loop ---- */

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
  static const uint8_t unknown[] = {HDR(24, 0xff, 0xff), 0x85, 0x13, 0x13, 0x80};
  static const uint8_t ok[] = {HDR(24, 0xff, 0x00), 0, 0, 0, 0};
  struct fake f = {.nsteps = 3};
  f.steps[0].out[0] = (struct chunk){unknown, sizeof unknown, 0};
  f.steps[1].out[0] = (struct chunk){unknown, sizeof unknown, 0};
  f.steps[2].out[0] = (struct chunk){ok, sizeof ok, 0};
  fake_start(&f);
  uv_loop_t loop;
  uv_loop_init(&loop);
  struct answer a = {0};
  dsipc_status st;
  cr_assert_eq(dsipc_dump_start(&loop, f.path, "/d", DSIPC_DUMP_MINI, DSIPC_DUMP_LOGGING | DSIPC_DUMP_VERBOSE, 2000,
                                got_dump, &a, NULL, &st),
               0, "%s", st.msg);
  uv_run(&loop, UV_RUN_DEFAULT);
  cr_assert_eq(uv_loop_close(&loop), 0, "every handle closed");
  fake_stop(&f);
  cr_expect_eq(a.calls, 1);
  cr_expect_eq(a.code, 0);
  const uint8_t v3[] = {HDR(38, 0x01, 0x03), PATH_D, 1, 0, 0, 0, 3, 0, 0, 0};
  const uint8_t v2[] = {HDR(38, 0x01, 0x02), PATH_D, 1, 0, 0, 0, 3, 0, 0, 0};
  const uint8_t v1[] = {HDR(38, 0x01, 0x01), PATH_D, 1, 0, 0, 0, 1, 0, 0, 0}; /* logging bit only */
  cr_expect_eq(memcmp(f.got[0], v3, sizeof v3), 0);
  cr_expect_eq(memcmp(f.got[1], v2, sizeof v2), 0);
  cr_expect_eq(memcmp(f.got[2], v1, sizeof v1), 0);
}

/* ProcessInfo2 (an older runtime refusing ProcessInfo3): cmdline "a", os "L", arch "x",
 * assembly "E", version "8.0" */
static const uint8_t info2_reply[] = {
    HDR(20 + 8 + 16 + 8 + 8 + 8 + 8 + 12, 0xff, 0x00), 0x2a, 0, 0, 0, 0, 0, 0, 0, /* pid 42 */
    1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,                        /* cookie */
    2, 0, 0, 0, 'a', 0, 0, 0, 2, 0, 0, 0, 'L', 0, 0, 0, 2, 0, 0, 0, 'x', 0, 0, 0, 2, 0, 0, 0, 'E', 0, 0, 0,
    4, 0, 0, 0, '8', 0, '.', 0, '0', 0, 0, 0};

Test(call, process_info_falls_back_to_v2_on_the_loop) {
  static const uint8_t unknown[] = {HDR(24, 0xff, 0xff), 0x85, 0x13, 0x13, 0x80};
  struct fake f = {.nsteps = 2};
  f.steps[0].out[0] = (struct chunk){unknown, sizeof unknown, 0};
  f.steps[1].out[0] = (struct chunk){info2_reply, sizeof info2_reply, 0};
  fake_start(&f);
  uv_loop_t loop;
  uv_loop_init(&loop);
  struct answer a = {0};
  dsipc_status st;
  cr_assert_eq(dsipc_process_info_start(&loop, f.path, 2000, got_info, &a, NULL, &st), 0, "%s", st.msg);
  uv_run(&loop, UV_RUN_DEFAULT);
  cr_assert_eq(uv_loop_close(&loop), 0, "every handle closed");
  fake_stop(&f);
  cr_expect_eq(a.calls, 1);
  cr_expect_eq(a.code, 0);
  cr_expect_eq(a.info_version, 2);
  cr_expect_str_eq(a.cmdline, "a");
  cr_expect_str_eq(a.version, "8.0");
  const uint8_t v3[] = {HDR(20, 0x04, 0x08)}, v2[] = {HDR(20, 0x04, 0x04)};
  cr_expect_eq(memcmp(f.got[0], v3, sizeof v3), 0);
  cr_expect_eq(memcmp(f.got[1], v2, sizeof v2), 0);
}

Test(call, deadline_and_cancel) {
  struct fake f = {.nsteps = 2};
  f.steps[0].hang = 1;
  f.steps[1].hang = 1;
  fake_start(&f);
  uv_loop_t loop;
  uv_loop_init(&loop);
  struct answer late = {0}, dropped = {0};
  dsipc_status st;
  dsipc_call *c = NULL;
  cr_assert_eq(dsipc_process_info_start(&loop, f.path, 200, got_info, &late, NULL, &st), 0, "%s", st.msg);
  cr_assert_eq(dsipc_process_info_start(&loop, f.path, 60000, got_info, &dropped, &c, &st), 0, "%s", st.msg);
  cr_assert(c);
  dsipc_call_cancel(c); /* no callback, and the loop does not wait for its 60 s */
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  uv_run(&loop, UV_RUN_DEFAULT);
  double ms = ms_since(&t0);
  cr_assert_eq(uv_loop_close(&loop), 0, "every handle closed");
  fake_stop(&f);
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

/* A listener that refuses at first (no socket yet) and then listens: the stream connects on a
 * later attempt from the loop, which meanwhile runs other timers at their time (no sleep). */
struct late_listener {
  uv_timer_t t;
  struct fake *f;
  int ticks;
  double worst_gap_ms;
  struct timespec last;
};

static void tick(uv_timer_t *t) {
  struct late_listener *l = t->data;
  double gap = ms_since(&l->last);
  if (l->ticks++ && gap > l->worst_gap_ms) l->worst_gap_ms = gap;
  clock_gettime(CLOCK_MONOTONIC, &l->last);
  if (l->ticks == 3) fake_listen(l->f); /* the socket appears ~15 ms in */
  if (l->ticks > 40) uv_timer_stop(t);
}

Test(call, a_socket_that_appears_a_moment_later) {
  static const uint8_t unknown[] = {HDR(24, 0xff, 0xff), 0x85, 0x13, 0x13, 0x80};
  struct fake f = {.nsteps = 2}; /* an older runtime: ProcessInfo3 unknown, then ProcessInfo2 */
  f.steps[0].out[0] = (struct chunk){unknown, sizeof unknown, 0};
  f.steps[1].out[0] = (struct chunk){info2_reply, sizeof info2_reply, 0};
  snprintf(f.dir, sizeof f.dir, "/tmp/dnt-ipcl-XXXXXX");
  cr_assert(mkdtemp(f.dir));
  snprintf(f.path, sizeof f.path, "%s/sock", f.dir);
  rmdir(f.dir); /* fake_listen makes it again: until then the path does not exist */
  uv_loop_t loop;
  uv_loop_init(&loop);
  struct late_listener l = {.f = &f};
  uv_timer_init(&loop, &l.t);
  l.t.data = &l;
  clock_gettime(CLOCK_MONOTONIC, &l.last);
  uv_timer_start(&l.t, tick, 5, 5);
  struct answer a = {0};
  dsipc_status st;
  cr_assert_eq(dsipc_process_info_start(&loop, f.path, 2000, got_info, &a, NULL, &st), 0, "%s", st.msg);
  uv_run(&loop, UV_RUN_DEFAULT);
  uv_close((uv_handle_t *)&l.t, NULL);
  uv_run(&loop, UV_RUN_DEFAULT);
  cr_assert_eq(uv_loop_close(&loop), 0);
  fake_stop(&f);
  cr_expect_eq(a.calls, 1);
  cr_expect_eq(a.code, 0, "answered once the socket was there");
  cr_expect_lt(l.worst_gap_ms, 15, "a 5 ms timer ran on time meanwhile (worst gap %.1f ms)", l.worst_gap_ms);
}

/* ---- the EventPipe stream ---- */

struct sink {
  uv_loop_t loop;
  dsipc_stream *s;
  int replies, ends, reply_code, end_code;
  uint32_t hresult;
  uint64_t session;
  uint8_t data[256];
  size_t n, chunks;
  size_t close_after; /* close the stream from on_data once this much arrived (0: never) */
};

static void on_reply(void *ud, const dsipc_status *st, const uint8_t *payload, size_t n) {
  struct sink *k = ud;
  k->replies++;
  k->reply_code = st->code;
  k->hresult = st->hresult;
  if (st->code == 0) cr_assert_eq(dsipc_decode_session_id(payload, n, &k->session), 0);
}

static void on_data(void *ud, const uint8_t *p, size_t n) {
  struct sink *k = ud;
  cr_assert_leq(k->n + n, sizeof k->data);
  memcpy(k->data + k->n, p, n);
  k->n += n;
  k->chunks++;
  if (k->close_after && k->n >= k->close_after) {
    dsipc_stream_close(k->s);
    k->s = NULL;
  }
}

static void on_end(void *ud, const dsipc_status *st) {
  struct sink *k = ud;
  k->ends++;
  k->end_code = st->code;
  dsipc_stream_close(k->s);
  k->s = NULL;
}

static const dsipc_stream_cb sink_cb = {on_reply, on_data, on_end};

static void collect_request(dsipc_buf *req) {
  dsipc_provider p = {.name = "Microsoft-DotNETCore-SampleProfiler", .level = 4};
  dsipc_session_config cfg = {.buffer_mb = 64, .format = 1, .request_rundown = 1, .providers = &p, .n_providers = 1};
  dsipc_buf_init(req);
  cr_assert_eq(dsipc_encode_collect_tracing(req, 2, &cfg), 0);
}

/* Runs a stream against f until the loop has nothing left. */
static void run_stream(struct fake *f, struct sink *k, uint64_t timeout_ms) {
  dsipc_buf req;
  collect_request(&req);
  fake_start(f);
  cr_assert_eq(uv_loop_init(&k->loop), 0);
  dsipc_status st;
  cr_assert_eq(dsipc_stream_open(&k->loop, f->path, -1, &req, timeout_ms, &sink_cb, k, &k->s, &st), 0, "%s", st.msg);
  uv_run(&k->loop, UV_RUN_DEFAULT);
  cr_assert_eq(uv_loop_close(&k->loop), 0, "every handle is closed");
  fake_stop(f);
  cr_assert_eq(f->got_len[0], req.len);
  cr_assert_eq(memcmp(f->got[0], req.data, req.len), 0, "the request arrives byte for byte");
  dsipc_buf_release(&req);
}

static const uint8_t session_ok[] = {HDR(28, 0xff, 0x00), 0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11};
static const uint8_t nettrace[] = "Nettrace\x14\0\0\0!FastSerialization.1 and then some events";

Test(stream, continuation_in_order_then_end) {
  /* the reply and the first stream bytes in one write, then the rest in pieces */
  static uint8_t first[sizeof session_ok + 5];
  memcpy(first, session_ok, sizeof session_ok);
  memcpy(first + sizeof session_ok, nettrace, 5);
  struct fake f = {.nsteps = 1};
  f.steps[0].out[0] = (struct chunk){first, sizeof first, 0};
  f.steps[0].out[1] = (struct chunk){nettrace + 5, 10, 30};
  f.steps[0].out[2] = (struct chunk){nettrace + 15, sizeof nettrace - 15, 30};
  struct sink k = {0};
  run_stream(&f, &k, 2000);
  cr_assert_eq(k.replies, 1);
  cr_assert_eq(k.reply_code, 0);
  cr_assert_eq(k.session, 0x1122334455667788ull);
  cr_assert_eq(k.n, sizeof nettrace);
  cr_assert_eq(memcmp(k.data, nettrace, sizeof nettrace), 0);
  cr_assert_geq(k.chunks, 2, "delivered as it came, not collected");
  cr_assert_eq(k.ends, 1);
  cr_assert_eq(k.end_code, 0, "the peer closing after the reply is the normal end");
}

Test(stream, error_reply_ends_it) {
  static const uint8_t fail[] = {HDR(24, 0xff, 0xff), 0x84, 0x13, 0x13, 0x80};
  struct fake f = {.nsteps = 1};
  f.steps[0].out[0] = (struct chunk){fail, sizeof fail, 0};
  struct sink k = {0};
  run_stream(&f, &k, 2000);
  cr_assert_eq(k.replies, 1);
  cr_assert_eq(k.reply_code, DSIPC_ESERVER);
  cr_assert_eq(k.hresult, 0x80131384u);
  cr_assert_eq(k.n, 0);
  cr_assert_eq(k.ends, 1);
  cr_assert_eq(k.end_code, DSIPC_ESERVER);
}

Test(stream, reply_deadline) {
  struct fake f = {.nsteps = 1};
  f.steps[0].hang = 1;
  struct sink k = {0};
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  run_stream(&f, &k, 250);
  double ms = ms_since(&t0);
  cr_assert_eq(k.replies, 1, "on_reply reports the failure");
  cr_assert_eq(k.reply_code, DSIPC_ETIMEDOUT);
  cr_assert_eq(k.end_code, DSIPC_ETIMEDOUT);
  cr_assert(ms >= 240 && ms < 1500, "took %.0f ms for a 250 ms deadline", ms);
}

Test(stream, peer_closes_before_replying) {
  struct fake f = {.nsteps = 1};
  f.steps[0].out[0] = (struct chunk){session_ok, 25, 0}; /* 5 of the 8 payload bytes */
  struct sink k = {0};
  run_stream(&f, &k, 2000);
  cr_assert_eq(k.reply_code, DSIPC_ECLOSED);
  cr_assert_eq(k.end_code, DSIPC_ECLOSED);
  cr_assert_eq(k.ends, 1);
}

Test(stream, closed_early_by_the_caller) {
  struct fake f = {.nsteps = 1};
  f.steps[0].out[0] = (struct chunk){session_ok, sizeof session_ok, 0};
  f.steps[0].out[1] = (struct chunk){nettrace, 8, 10};
  f.steps[0].out[2] = (struct chunk){nettrace + 8, 8, 100};
  struct sink k = {.close_after = 1};
  run_stream(&f, &k, 2000);
  cr_assert_eq(k.replies, 1);
  cr_assert_eq(k.n, 8, "nothing after the close");
  cr_assert_eq(k.ends, 0, "no callback after dsipc_stream_close");
}

/* ---- the listener, with a fake runtime ---- */

struct runtime {
  const char *path;
  int split;            /* send the advertise in two writes */
  const uint8_t *adv;   /* NULL: a good ADVR_V1 for pid 4321 */
  uint8_t got[256];
  size_t got_len;
  pthread_t thread;
};

static const uint8_t good_adv[] = {'A', 'D', 'V', 'R', '_', 'V', '1', 0, 0x78, 0x56, 0x34, 0x12, 0xbc, 0x9a, 0xf0, 0xde,
                                   1, 2, 3, 4, 5, 6, 7, 8, 0xe1, 0x10, 0, 0, 0, 0, 0, 0, 0, 0};
static const uint8_t resume_ok[] = {HDR(24, 0xff, 0x00), 0, 0, 0, 0};

static void *dial(void *arg) {
  struct runtime *r = arg;
  int c = socket(AF_UNIX, SOCK_STREAM, 0);
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  snprintf(sa.sun_path, sizeof sa.sun_path, "%s", r->path);
  if (connect(c, (struct sockaddr *)&sa, sizeof sa) < 0) {
    close(c);
    return NULL;
  }
  const uint8_t *adv = r->adv ? r->adv : good_adv;
  if (r->split) {
    if (write(c, adv, 13) < 0) {}
    pause_ms(50);
    if (write(c, adv + 13, 21) < 0) {}
  } else if (write(c, adv, 34) < 0) {}
  r->got_len = read_message(c, r->got, sizeof r->got);
  if (r->got_len && send(c, resume_ok, sizeof resume_ok, MSG_NOSIGNAL) < 0) {}
  close(c);
  return NULL;
}

static const uint8_t resume_req[] = {HDR(20, 0x04, 0x01)};

Test(listener, fake_runtime_blocking) {
  dsipc_listener *l;
  dsipc_status st;
  cr_assert_eq(dsipc_listener_open(&l, NULL, "port", &st), 0, "%s", st.msg);
  struct runtime r = {.path = dsipc_listener_path(l), .split = 1};
  pthread_create(&r.thread, NULL, dial, &r);
  dsipc_advertise adv;
  int fd;
  cr_assert_eq(dsipc_listener_accept(l, 2000, &adv, &fd, &st), 0, "%s", st.msg);
  cr_assert_eq(adv.pid, 4321);
  char guid[37];
  dsipc_format_guid(adv.cookie, guid);
  cr_assert_str_eq(guid, "12345678-9abc-def0-0102-030405060708");
  dsipc_buf req, reply;
  dsipc_buf_init(&req);
  dsipc_buf_init(&reply);
  cr_assert_eq(dsipc_encode_command(&req, DSIPC_SET_PROCESS, DSIPC_PROC_RESUME), 0);
  cr_assert_eq(dsipc_transact_fd(fd, &req, 2000, &reply, NULL, &st), 0, "%s", st.msg);
  pthread_join(r.thread, NULL);
  cr_assert_eq(r.got_len, sizeof resume_req);
  cr_assert_eq(memcmp(r.got, resume_req, sizeof resume_req), 0);
  dsipc_buf_release(&req);
  dsipc_buf_release(&reply);
  dsipc_listener_close(l);
}

struct async_ctx {
  uv_loop_t loop;
  dsipc_listener *l;
  int calls, code, pid;
  dsipc_stream *s;
  struct sink k;
};

static void sink_reply(void *ud, const dsipc_status *st, const uint8_t *p, size_t n) {
  (void)p, (void)n;
  struct async_ctx *a = ud;
  a->k.replies++;
  a->k.reply_code = st->code;
}

static void sink_end(void *ud, const dsipc_status *st) {
  struct async_ctx *a = ud;
  a->k.ends++;
  a->k.end_code = st->code;
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
  cr_assert_eq(dsipc_stream_open(&a->loop, NULL, fd, &req, 2000, &cb, a, &a->s, &st2), 0, "%s", st2.msg);
  dsipc_buf_release(&req);
}

Test(listener, fake_runtime_on_a_loop) {
  struct async_ctx a = {0};
  dsipc_status st;
  cr_assert_eq(uv_loop_init(&a.loop), 0);
  cr_assert_eq(dsipc_listener_open(&a.l, NULL, "port", &st), 0, "%s", st.msg);
  cr_assert_eq(dsipc_listener_accept_start(a.l, &a.loop, 2000, on_accepted, &a, &st), 0, "%s", st.msg);
  int fd;
  dsipc_advertise adv;
  cr_assert_eq(dsipc_listener_accept(a.l, 10, &adv, &fd, &st), -EBUSY, "one accept at a time");
  struct runtime r = {.path = dsipc_listener_path(a.l), .split = 1};
  pthread_create(&r.thread, NULL, dial, &r);
  uv_run(&a.loop, UV_RUN_DEFAULT);
  pthread_join(r.thread, NULL);
  cr_assert_eq(a.calls, 1);
  cr_assert_eq(a.code, 0);
  cr_assert_eq(a.pid, 4321);
  cr_assert_eq(a.k.replies, 1);
  cr_assert_eq(a.k.reply_code, 0);
  cr_assert_eq(a.k.end_code, 0);
  cr_assert_eq(r.got_len, sizeof resume_req);
  cr_assert_eq(memcmp(r.got, resume_req, sizeof resume_req), 0, "the command arrives byte for byte");
  dsipc_listener_close(a.l);
  cr_assert_eq(uv_loop_close(&a.loop), 0);
}

Test(listener, async_deadline_and_bad_advertise) {
  struct async_ctx a = {0};
  dsipc_status st;
  cr_assert_eq(uv_loop_init(&a.loop), 0);
  cr_assert_eq(dsipc_listener_open(&a.l, NULL, "port", &st), 0, "%s", st.msg);
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  cr_assert_eq(dsipc_listener_accept_start(a.l, &a.loop, 200, on_accepted, &a, &st), 0, "%s", st.msg);
  uv_run(&a.loop, UV_RUN_DEFAULT);
  double ms = ms_since(&t0);
  cr_assert_eq(a.calls, 1);
  cr_assert_eq(a.code, DSIPC_ETIMEDOUT);
  cr_assert(ms >= 190 && ms < 1500, "took %.0f ms for a 200 ms deadline", ms);

  /* something that is not a runtime: the same length, another magic */
  uint8_t junk[34];
  memcpy(junk, good_adv, sizeof junk);
  memcpy(junk, "HELLO_V1", 8);
  struct runtime r = {.path = dsipc_listener_path(a.l), .adv = junk};
  a.calls = 0;
  cr_assert_eq(dsipc_listener_accept_start(a.l, &a.loop, 2000, on_accepted, &a, &st), 0, "%s", st.msg);
  pthread_create(&r.thread, NULL, dial, &r);
  uv_run(&a.loop, UV_RUN_DEFAULT);
  pthread_join(r.thread, NULL);
  cr_assert_eq(a.calls, 1);
  cr_assert_eq(a.code, DSIPC_EBADMAGIC);
  cr_assert_eq(r.got_len, 0, "nothing is sent to it");
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
