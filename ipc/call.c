/* Requests answered by one reply, on the caller's loop (dsipc.h "Calls"): ProcessInfo 3/2/1 and
 * GenerateCoreDump 3/2/1, each falling back to the older command when the runtime does not know
 * the newer one. Nothing here blocks the loop but the connect itself (a local socket). The sync
 * calls of process.c and dump.c stay for the commands that have nothing else to do meanwhile. */
#include <stdio.h>
#include <string.h>

#include "dsipc-int.h"

enum call_kind { CALL_INFO, CALL_DUMP };

struct dsipc_call {
  struct uv_loop_s *loop;
  enum call_kind kind;
  int version; /* the command being asked now: 3, then 2, then 1 */
  uint64_t timeout_ms;
  char *path, *dump_path;
  uint32_t dump_type, dump_flags;
  dsipc_stream *stream;
  dsipc_process_info_cb on_info;
  dsipc_dump_cb on_dump;
  void *ud;
};

static void call_free(dsipc_call *c) {
  dsipc_stream_close(c->stream); /* no callback after this; its memory goes on the next turn */
  dsipc__free(c->path);
  dsipc__free(c->dump_path);
  dsipc__free(c);
}

static int encode(dsipc_call *c, dsipc_buf *req) {
  static const uint8_t info_ids[] = {0, DSIPC_PROC_INFO, DSIPC_PROC_INFO2, DSIPC_PROC_INFO3};
  if (c->kind == CALL_INFO) return dsipc_encode_command(req, DSIPC_SET_PROCESS, info_ids[c->version]);
  /* v1 only knows diagnostics logging on/off */
  uint32_t flags = c->version == 1 ? (c->dump_flags & DSIPC_DUMP_LOGGING) : c->dump_flags;
  return dsipc_encode_dump(req, c->version, c->dump_path, c->dump_type, flags);
}

static void on_reply(void *ud, const dsipc_status *st, const uint8_t *payload, size_t n);
static void on_end(void *ud, const dsipc_status *st) { (void)ud, (void)st; /* the reply decides */ }

/* Sends the request for c->version on a fresh connection. 0, or the error in st. */
static int send_request(dsipc_call *c, dsipc_status *st) {
  static const dsipc_stream_cb cb = {on_reply, NULL, on_end};
  dsipc_buf req;
  dsipc_buf_init(&req);
  int rc = encode(c, &req);
  if (rc)
    dsipc__fail(st, rc, 0, "cannot encode the request: %s", dsipc_strerror(rc));
  else
    rc = dsipc_stream_open(c->loop, c->path, -1, &req, c->timeout_ms, &cb, c, &c->stream, st);
  dsipc_buf_release(&req);
  return rc;
}

/* The result, once: to the caller, then the call is gone. */
static void finish(dsipc_call *c, const dsipc_status *st, const dsipc_process_info *pi) {
  if (c->kind == CALL_INFO)
    c->on_info(c->ud, st, pi);
  else
    c->on_dump(c->ud, st);
  call_free(c);
}

static void on_reply(void *ud, const dsipc_status *st, const uint8_t *payload, size_t n) {
  dsipc_call *c = ud;
  dsipc_status next = *st;
  if (st->code == DSIPC_EUNKNOWNCMD && c->version > 1) { /* an older runtime: ask the older way */
    dsipc_stream_close(c->stream);
    c->stream = NULL;
    c->version--;
    if (send_request(c, &next) == 0) return; /* its reply comes back here */
    finish(c, &next, NULL);
    return;
  }
  if (st->code || c->kind != CALL_INFO) {
    finish(c, st, NULL);
    return;
  }
  dsipc_process_info pi;
  int rc = dsipc_decode_process_info(payload, n, c->version, &pi);
  if (rc) {
    dsipc__fail(&next, rc, 0, "malformed ProcessInfo%s reply: %s", c->version == 3 ? "3" : c->version == 2 ? "2" : "",
                dsipc_strerror(rc));
    finish(c, &next, NULL);
    return;
  }
  finish(c, &next, &pi);
  dsipc_process_info_release(&pi);
}

static int start(dsipc_call *c, const char *path, dsipc_call **out, dsipc_status *st) {
  c->version = 3; /* newest first: only the newest commands say the most (RID, the dump's reason) */
  if (!(c->path = dsipc__strdup(path))) {
    call_free(c);
    return dsipc__fail(st, DSIPC_ENOMEM, 0, "out of memory");
  }
  int rc = send_request(c, st);
  if (rc) {
    call_free(c);
    return rc;
  }
  if (out) *out = c;
  return 0;
}

int dsipc_process_info_start(struct uv_loop_s *loop, const char *path, uint64_t timeout_ms, dsipc_process_info_cb cb,
                             void *ud, dsipc_call **out, dsipc_status *st) {
  if (out) *out = NULL;
  dsipc_call *c = dsipc__calloc(1, sizeof *c);
  if (!c) return dsipc__fail(st, DSIPC_ENOMEM, 0, "out of memory");
  *c = (dsipc_call){.loop = loop, .kind = CALL_INFO, .timeout_ms = timeout_ms, .on_info = cb, .ud = ud};
  return start(c, path, out, st);
}

int dsipc_dump_start(struct uv_loop_s *loop, const char *path, const char *dump_path, uint32_t dump_type,
                     uint32_t flags, uint64_t timeout_ms, dsipc_dump_cb cb, void *ud, dsipc_call **out,
                     dsipc_status *st) {
  if (out) *out = NULL;
  if (!dump_path || !*dump_path) return dsipc__fail(st, DSIPC_EINVAL, 0, "no dump path");
  dsipc_call *c = dsipc__calloc(1, sizeof *c);
  if (!c) return dsipc__fail(st, DSIPC_ENOMEM, 0, "out of memory");
  *c = (dsipc_call){.loop = loop, .kind = CALL_DUMP, .timeout_ms = timeout_ms, .dump_type = dump_type,
                    .dump_flags = flags, .on_dump = cb, .ud = ud};
  if (!(c->dump_path = dsipc__strdup(dump_path))) {
    call_free(c);
    return dsipc__fail(st, DSIPC_ENOMEM, 0, "out of memory");
  }
  return start(c, path, out, st);
}

void dsipc_call_cancel(dsipc_call *c) {
  if (c) call_free(c);
}
