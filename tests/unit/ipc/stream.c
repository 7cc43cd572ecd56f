/* The EventPipe stream (stream.c) against the fake server: bytes in order, the end, an error
 * reply, the reply's deadline, a reply cut short, a caller closing early (cases stream-*.case).
 * The fake and the client go in lockstep where the pieces matter: on_data tells the fake what it
 * took (fake_ipc_raise "gotN", "closed") and the case sends its next piece only then (`wait`). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "dsipc.h"
#include "ipc-test.h"
#include "lib/target.h"

struct sink {
  uv_loop_t loop;
  uv_timer_t hang; /* a hang's ceiling (IPC_HANG_MS): closes the stream, says so in hung */
  int hung;
  fake_ipc *f;     /* told what on_data took, for a case that waits for it */
  long stale_ms;   /* the loop's clock this far behind when the stream opens (0: fresh) */
  double ms;       /* from just before dsipc_stream_open to the loop's end */
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
  int closed = 0;
  if (k->close_after && k->n >= k->close_after) {
    dsipc_stream_close(k->s);
    k->s = NULL;
    closed = 1;
  }
  char took[32];
  snprintf(took, sizeof took, "got%zu", k->n);
  cr_assert_eq(fake_ipc_raise(k->f, took), 0);
  if (closed) cr_assert_eq(fake_ipc_raise(k->f, "closed"), 0);
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

static void on_hang(uv_timer_t *t) {
  struct sink *k = t->data;
  k->hung = 1;
  dsipc_stream_close(k->s);
  k->s = NULL;
}

/* Runs a stream against the fake playing case_name until the loop has nothing left (or a hang's
 * ceiling, which fails the test). */
static void run_stream(const char *case_name, struct sink *k, uint64_t timeout_ms) {
  dsipc_buf req;
  collect_request(&req);
  fake_ipc *f = fake_play(case_name, NULL);
  k->f = f;
  cr_assert_eq(uv_loop_init(&k->loop), 0);
  uv_timer_init(&k->loop, &k->hang);
  k->hang.data = k;
  uv_timer_start(&k->hang, on_hang, IPC_HANG_MS, 0);
  uv_unref((uv_handle_t *)&k->hang); /* the stream's handles decide when the loop ends */
  if (k->stale_ms) let_time_pass(k->stale_ms);
  struct timespec t0;
  /* timing: a lower bound: the reply deadline ended no sooner than asked */
  clock_gettime(CLOCK_MONOTONIC, &t0);
  dsipc_status st;
  cr_assert_eq(dsipc_stream_open(&k->loop, fake_ipc_socket(f), -1, &req, timeout_ms, &sink_cb, k, &k->s, &st), 0, "%s",
               st.msg);
  uv_run(&k->loop, UV_RUN_DEFAULT);
  /* timing: as above */
  k->ms = ms_since(&t0);
  cr_assert_not(k->hung, "%s: the stream still ran after %d s (%s)", case_name, IPC_HANG_MS / 1000,
                dnt_run_context(getpid()));
  uv_close((uv_handle_t *)&k->hang, NULL);
  uv_run(&k->loop, UV_RUN_DEFAULT);
  cr_assert_eq(uv_loop_close(&k->loop), 0, "every handle is closed");
  fake_check(f);
  size_t got_len;
  const uint8_t *got = fake_ipc_request(f, 0, &got_len);
  cr_assert_eq(got_len, req.len);
  cr_assert_eq(memcmp(got, req.data, req.len), 0, "the request arrives byte for byte");
  fake_ipc_free(f);
  dsipc_buf_release(&req);
}

/* what stream-in-order.case streams: "Nettrace", a length, a serializer's name, some words, a NUL */
static const uint8_t nettrace[] = "Nettrace\x14\0\0\0!FastSerialization.1 and then some events";

Test(stream, continuation_in_order_then_end) {
  /* the reply and the first stream bytes in one write, then the rest in pieces */
  struct sink k = {0};
  run_stream("stream-in-order.case", &k, IPC_HANG_MS);
  cr_assert_eq(k.replies, 1);
  cr_assert_eq(k.reply_code, 0);
  cr_assert_eq(k.session, 0x1122334455667788ull);
  cr_assert_eq(k.n, sizeof nettrace);
  cr_assert_eq(memcmp(k.data, nettrace, sizeof nettrace), 0);
  /* the case sends each piece only once the one before reached on_data: a client that collected
   * the stream would meet the hang's ceiling above */
  cr_assert_geq(k.chunks, 3, "delivered as it came, not collected: %zu calls", k.chunks);
  cr_assert_eq(k.ends, 1);
  cr_assert_eq(k.end_code, 0, "the peer closing after the reply is the normal end");
}

Test(stream, error_reply_ends_it) {
  struct sink k = {0};
  run_stream("stream-refused.case", &k, IPC_HANG_MS);
  cr_assert_eq(k.replies, 1);
  cr_assert_eq(k.reply_code, DSIPC_ESERVER);
  cr_assert_eq(k.hresult, 0x80131384u);
  cr_assert_eq(k.n, 0);
  cr_assert_eq(k.ends, 1);
  cr_assert_eq(k.end_code, DSIPC_ESERVER);
}

Test(stream, reply_deadline) {
  /* the caller's loop did other work since its last turn: the deadline still counts from the
   * open, not from the loop's cached clock */
  struct sink k = {.stale_ms = STALE_LOOP_MS};
  run_stream("stream-hangs.case", &k, 250);
  cr_assert_eq(k.replies, 1, "on_reply reports the failure");
  cr_assert_eq(k.reply_code, DSIPC_ETIMEDOUT);
  cr_assert_eq(k.end_code, DSIPC_ETIMEDOUT);
  cr_log_info("a reply deadline of 250 ms ended %.0f ms after the open", k.ms);
  cr_assert_geq(k.ms, 250 - LOOP_CLOCK_SLACK_MS,
                "a reply deadline of 250 ms ended %.0f ms after the open (the loop's clock %d ms stale then; "
                "at least %d ms expected): %s",
                k.ms, STALE_LOOP_MS, 250 - LOOP_CLOCK_SLACK_MS, dnt_run_context(getpid()));
}

Test(stream, peer_closes_before_replying) {
  struct sink k = {0};
  run_stream("stream-cut-reply.case", &k, IPC_HANG_MS); /* 5 of the 8 payload bytes */
  cr_assert_eq(k.reply_code, DSIPC_ECLOSED);
  cr_assert_eq(k.end_code, DSIPC_ECLOSED);
  cr_assert_eq(k.ends, 1);
}

Test(stream, closed_early_by_the_caller) {
  /* the case sends its second 8 bytes only once on_data closed the stream at the first 8 */
  struct sink k = {.close_after = 1};
  run_stream("stream-slow.case", &k, IPC_HANG_MS);
  cr_assert_eq(k.replies, 1);
  cr_assert_eq(k.n, 8, "nothing after the close: %zu bytes", k.n);
  cr_assert_eq(k.ends, 0, "no callback after dsipc_stream_close");
}
