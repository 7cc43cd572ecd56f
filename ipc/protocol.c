/* Message framing: the 20-byte header, reply classification, the framer, the advertise, and the
 * encoders of the small commands. No I/O here. */
#include <stdio.h>
#include <string.h>

#include "dsipc-int.h"

int dsipc_decode_header(const uint8_t *p, size_t n, dsipc_header *h) {
  static const uint8_t magic[14] = "DOTNET_IPC_V1";
  if (n < DSIPC_HEADER_SIZE) return DSIPC_EPROTO;
  if (memcmp(p, magic, sizeof magic) != 0) return DSIPC_EBADMAGIC;
  h->size = (uint16_t)(p[14] | p[15] << 8);
  h->set = p[16];
  h->id = p[17];
  return h->size < DSIPC_HEADER_SIZE ? DSIPC_EPROTO : 0;
}

int dsipc_decode_reply(const dsipc_header *h, const uint8_t *payload, size_t n, dsipc_status *st) {
  if (h->set != DSIPC_SET_SERVER)
    return dsipc__fail(st, DSIPC_EPROTO, 0, "reply has command set 0x%02x, not a server reply", h->set);
  if (h->id == DSIPC_SERVER_OK) {
    dsipc__ok(st);
    return 0;
  }
  if (h->id != DSIPC_SERVER_ERROR)
    return dsipc__fail(st, DSIPC_EPROTO, 0, "reply has unknown server id 0x%02x", h->id);

  struct dsipc__reader r = {payload, n};
  uint32_t hr;
  if (dsipc__r_u32(&r, &hr)) return dsipc__fail(st, DSIPC_EPROTO, 0, "error reply without an HRESULT");
  /* GenerateCoreDump3 adds the runtime's own words after the HRESULT */
  char *text = NULL;
  if (r.left >= 4 && dsipc__r_string(&r, &text) != 0) text = NULL;
  int code = hr == DSIPC_HR_UNKNOWN_COMMAND ? DSIPC_EUNKNOWNCMD : DSIPC_ESERVER;
  if (text && *text)
    dsipc__fail(st, code, hr, "runtime replied 0x%08x (%s): %s", hr, dsipc_hresult_message(hr), text);
  else
    dsipc__fail(st, code, hr, "runtime replied 0x%08x (%s)", hr, dsipc_hresult_message(hr));
  dsipc__free(text);
  return code;
}

void dsipc_framer_init(dsipc_framer *f) { memset(f, 0, sizeof *f); }

void dsipc_framer_release(dsipc_framer *f) {
  dsipc__free(f->buf);
  dsipc_framer_init(f);
}

long dsipc_framer_feed(dsipc_framer *f, const uint8_t *p, size_t n) {
  /* after a bad header, f->header is garbage: never use it again */
  if (f->err) return f->err;
  if (f->complete) return 0;
  if (!f->buf && !(f->buf = dsipc__malloc(DSIPC_MAX_MESSAGE))) return DSIPC_ENOMEM;
  size_t used = 0;
  if (f->have < DSIPC_HEADER_SIZE) {
    size_t take = DSIPC_HEADER_SIZE - f->have;
    if (take > n) take = n;
    memcpy(f->buf + f->have, p, take);
    f->have += take;
    used += take;
    if (f->have < DSIPC_HEADER_SIZE) return (long)used;
    int rc = dsipc_decode_header(f->buf, f->have, &f->header);
    if (rc) return f->err = rc;
  }
  size_t take = f->header.size - f->have;
  if (take > n - used) take = n - used;
  memcpy(f->buf + f->have, p + used, take);
  f->have += take;
  used += take;
  if (f->have == f->header.size) f->complete = 1;
  return (long)used;
}

int dsipc_decode_advertise(const uint8_t *p, size_t n, dsipc_advertise *out) {
  static const uint8_t magic[8] = "ADVR_V1";
  if (n < DSIPC_ADVERTISE_SIZE) return DSIPC_EPROTO;
  if (memcmp(p, magic, sizeof magic) != 0) return DSIPC_EBADMAGIC;
  struct dsipc__reader r = {p + 8, n - 8};
  dsipc__r_bytes(&r, out->cookie, 16);
  dsipc__r_u64(&r, &out->pid);
  return 0;
}

void dsipc_format_guid(const uint8_t c[16], char out[37]) {
  /* the first three groups are stored little-endian, the rest as bytes */
  snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", c[3], c[2], c[1],
           c[0], c[5], c[4], c[7], c[6], c[8], c[9], c[10], c[11], c[12], c[13], c[14], c[15]);
}

int dsipc_decode_session_id(const uint8_t *payload, size_t n, uint64_t *session_id) {
  struct dsipc__reader r = {payload, n};
  return dsipc__r_u64(&r, session_id) ? DSIPC_EPROTO : 0;
}

int dsipc_encode_command(dsipc_buf *b, uint8_t set, uint8_t id) {
  struct dsipc__writer w;
  dsipc__w_begin(&w, b, set, id);
  return dsipc__w_end(&w);
}

int dsipc_encode_set_env(dsipc_buf *b, const char *name, const char *value) {
  if (!name || !*name || strchr(name, '=')) return DSIPC_EINVAL;
  struct dsipc__writer w;
  dsipc__w_begin(&w, b, DSIPC_SET_PROCESS, DSIPC_PROC_SET_ENV);
  dsipc__w_string(&w, name);
  dsipc__w_string(&w, value);
  return dsipc__w_end(&w);
}

int dsipc_encode_enable_perfmap(dsipc_buf *b, uint32_t perfmap_type) {
  if (perfmap_type < 1 || perfmap_type > 3) return DSIPC_EINVAL;
  struct dsipc__writer w;
  dsipc__w_begin(&w, b, DSIPC_SET_PROCESS, DSIPC_PROC_ENABLE_PERFMAP);
  dsipc__w_u32(&w, perfmap_type);
  return dsipc__w_end(&w);
}

int dsipc_encode_stop_tracing(dsipc_buf *b, uint64_t session_id) {
  struct dsipc__writer w;
  dsipc__w_begin(&w, b, DSIPC_SET_EVENTPIPE, DSIPC_EP_STOP);
  dsipc__w_u64(&w, session_id);
  return dsipc__w_end(&w);
}
