/* The EventPipe stream (stream.c) against the fake server: bytes in order, the end, an error
 * reply, the reply's deadline, a reply cut short, a caller closing early (cases stream-*.case). */
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "dsipc.h"
#include "ipc-test.h"

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

/* Runs a stream against the fake playing case_name until the loop has nothing left. */
static void run_stream(const char *case_name, struct sink *k, uint64_t timeout_ms) {
  dsipc_buf req;
  collect_request(&req);
  fake_ipc *f = fake_play(case_name, NULL);
  cr_assert_eq(uv_loop_init(&k->loop), 0);
  dsipc_status st;
  cr_assert_eq(dsipc_stream_open(&k->loop, fake_ipc_socket(f), -1, &req, timeout_ms, &sink_cb, k, &k->s, &st), 0, "%s",
               st.msg);
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
  run_stream("stream-in-order.case", &k, 2000);
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
  struct sink k = {0};
  run_stream("stream-refused.case", &k, 2000);
  cr_assert_eq(k.replies, 1);
  cr_assert_eq(k.reply_code, DSIPC_ESERVER);
  cr_assert_eq(k.hresult, 0x80131384u);
  cr_assert_eq(k.n, 0);
  cr_assert_eq(k.ends, 1);
  cr_assert_eq(k.end_code, DSIPC_ESERVER);
}

Test(stream, reply_deadline) {
  struct sink k = {0};
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  run_stream("stream-hangs.case", &k, 250);
  double ms = ms_since(&t0);
  cr_assert_eq(k.replies, 1, "on_reply reports the failure");
  cr_assert_eq(k.reply_code, DSIPC_ETIMEDOUT);
  cr_assert_eq(k.end_code, DSIPC_ETIMEDOUT);
  cr_assert(ms >= 240 && ms < 1500, "took %.0f ms for a 250 ms deadline", ms);
}

Test(stream, peer_closes_before_replying) {
  struct sink k = {0};
  run_stream("stream-cut-reply.case", &k, 2000); /* 5 of the 8 payload bytes */
  cr_assert_eq(k.reply_code, DSIPC_ECLOSED);
  cr_assert_eq(k.end_code, DSIPC_ECLOSED);
  cr_assert_eq(k.ends, 1);
}

Test(stream, closed_early_by_the_caller) {
  struct sink k = {.close_after = 1};
  run_stream("stream-slow.case", &k, 2000);
  cr_assert_eq(k.replies, 1);
  cr_assert_eq(k.n, 8, "nothing after the close");
  cr_assert_eq(k.ends, 0, "no callback after dsipc_stream_close");
}
