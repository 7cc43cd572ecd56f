/* ntr-writer.c: see ntr-writer.h. Written from the format description, independently of
 * nettrace/ (it shares no code with the parser). */
#include "ntr-writer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void reserve(ntrw *w, size_t n) {
  if (w->len + n <= w->cap)
    return;
  while (w->len + n > w->cap)
    w->cap = w->cap ? w->cap * 2 : 4096;
  w->buf = realloc(w->buf, w->cap);
  if (!w->buf) {
    fprintf(stderr, "ntr-writer: out of memory\n");
    abort();
  }
}

void ntrw_bytes(ntrw *w, const void *p, size_t n) {
  reserve(w, n);
  if (n)
    memcpy(w->buf + w->len, p, n);
  w->len += n;
}
void ntrw_u8(ntrw *w, uint8_t v) { ntrw_bytes(w, &v, 1); }
void ntrw_u16(ntrw *w, uint16_t v) {
  uint8_t b[2] = {(uint8_t)v, (uint8_t)(v >> 8)};
  ntrw_bytes(w, b, 2);
}
void ntrw_u32(ntrw *w, uint32_t v) {
  uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
  ntrw_bytes(w, b, 4);
}
void ntrw_u64(ntrw *w, uint64_t v) {
  ntrw_u32(w, (uint32_t)v);
  ntrw_u32(w, (uint32_t)(v >> 32));
}
void ntrw_varuint(ntrw *w, uint64_t v) {
  do {
    uint8_t b = v & 0x7f;
    v >>= 7;
    if (v)
      b |= 0x80;
    ntrw_u8(w, b);
  } while (v);
}
static void put32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
  p[2] = (uint8_t)(v >> 16);
  p[3] = (uint8_t)(v >> 24);
}

/* UTF-8 -> UTF-16LE with terminator (BMP and supplementary planes). */
void ntrw_wstr(ntrw *w, const char *s) {
  const unsigned char *u = (const unsigned char *)(s ? s : "");
  while (*u) {
    uint32_t cp;
    if (*u < 0x80)
      cp = *u++;
    else if ((*u & 0xe0) == 0xc0)
      cp = ((uint32_t)(u[0] & 0x1f) << 6) | (u[1] & 0x3f), u += 2;
    else if ((*u & 0xf0) == 0xe0)
      cp = ((uint32_t)(u[0] & 0x0f) << 12) | ((uint32_t)(u[1] & 0x3f) << 6) | (u[2] & 0x3f), u += 3;
    else
      cp = ((uint32_t)(u[0] & 0x07) << 18) | ((uint32_t)(u[1] & 0x3f) << 12) |
           ((uint32_t)(u[2] & 0x3f) << 6) | (u[3] & 0x3f),
      u += 4;
    if (cp >= 0x10000) {
      cp -= 0x10000;
      ntrw_u16(w, (uint16_t)(0xd800 + (cp >> 10)));
      ntrw_u16(w, (uint16_t)(0xdc00 + (cp & 0x3ff)));
    } else {
      ntrw_u16(w, (uint16_t)cp);
    }
  }
  ntrw_u16(w, 0);
}

static void str6(ntrw *w, const char *s) {
  size_t n = strlen(s ? s : "");
  ntrw_varuint(w, n);
  ntrw_bytes(w, s, n);
}

void ntrw_init(ntrw *w, int v6) {
  memset(w, 0, sizeof(*w));
  w->v6 = v6;
  w->pointer_size = 8;
}

void ntrw_release(ntrw *w) {
  free(w->buf);
  memset(w, 0, sizeof(*w));
}

/* V4/V5 object type header. */
static void obj_begin(ntrw *w, const char *type, uint32_t version) {
  ntrw_u8(w, 0x05);
  ntrw_u8(w, 0x05);
  ntrw_u8(w, 0x01);
  ntrw_u32(w, version);
  ntrw_u32(w, version);
  ntrw_u32(w, (uint32_t)strlen(type));
  ntrw_bytes(w, type, strlen(type));
  ntrw_u8(w, 0x06);
}

void ntrw_trace_hdr(ntrw *w, const ntrw_trace *t) {
  static const uint16_t st[8] = {2024, 5, 3, 17, 12, 34, 56, 789};
  int i;
  uint32_t k;
  ntrw_bytes(w, "Nettrace", 8);
  w->pointer_size = t->pointer_size;
  if (!w->v6) {
    ntrw_u32(w, 20);
    ntrw_bytes(w, "!FastSerialization.1", 20);
    obj_begin(w, "Trace", 4);
    for (i = 0; i < 8; i++)
      ntrw_u16(w, st[i]);
    ntrw_u64(w, t->sync_qpc);
    ntrw_u64(w, t->freq);
    ntrw_u32(w, t->pointer_size);
    ntrw_u32(w, t->pid);
    ntrw_u32(w, t->cpus);
    ntrw_u32(w, t->sampling_ns);
    ntrw_u8(w, 0x06);
    return;
  }
  ntrw_u32(w, 0);
  ntrw_u32(w, 6);
  ntrw_u32(w, 0);
  {
    size_t at = w->len;
    ntrw_u32(w, 0);
    for (i = 0; i < 8; i++)
      ntrw_u16(w, st[i]);
    ntrw_u64(w, t->sync_qpc);
    ntrw_u64(w, t->freq);
    ntrw_u32(w, t->pointer_size);
    ntrw_u32(w, t->nkv);
    for (k = 0; k < 2 * t->nkv; k++)
      str6(w, t->kv[k]);
    put32(w->buf + at, (uint32_t)(w->len - at - 4) | (1u << 24));
  }
}

/* Opens a block: V4/V5 object + size + padding, V6 block header. */
static void block_begin(ntrw *w, const char *type, uint8_t kind) {
  if (w->v6) {
    w->blk_size_at = w->len;
    ntrw_u32(w, (uint32_t)kind << 24);
    w->blk_start = w->len;
    return;
  }
  obj_begin(w, type, 2);
  w->blk_size_at = w->len;
  ntrw_u32(w, 0);
  while (w->len % 4)
    ntrw_u8(w, 0);
  w->blk_start = w->len;
}

void ntrw_block_end(ntrw *w) {
  uint32_t size = (uint32_t)(w->len - w->blk_start);
  if (w->v6) {
    put32(w->buf + w->blk_size_at, size | (w->buf[w->blk_size_at + 3] << 24));
    return;
  }
  put32(w->buf + w->blk_size_at, size);
  ntrw_u8(w, 0x06);
}

static void ev_block_header(ntrw *w, int compressed) {
  ntrw_u16(w, 20);
  ntrw_u16(w, compressed ? 1 : 0);
  ntrw_u64(w, 0);
  ntrw_u64(w, 0);
  w->blk_compressed = compressed;
  memset(&w->prev, 0, sizeof(w->prev));
}

/* ---- metadata ---- */

static void type_v2(ntrw *w, const ntrw_field *f);
static void fields_v1(ntrw *w, const ntrw_field *f, uint32_t n) {
  uint32_t i;
  ntrw_u32(w, n);
  for (i = 0; i < n; i++) {
    ntrw_u32(w, f[i].type);
    if (f[i].type == 1)
      fields_v1(w, f[i].fields, f[i].nfields);
    ntrw_wstr(w, f[i].name);
  }
}
static void fields_v2(ntrw *w, const ntrw_field *f, uint32_t n) {
  uint32_t i;
  ntrw_u32(w, n);
  for (i = 0; i < n; i++) {
    size_t at = w->len;
    ntrw_u32(w, 0);
    ntrw_wstr(w, f[i].name);
    type_v2(w, &f[i]);
    put32(w->buf + at, (uint32_t)(w->len - at));
  }
}
static void type_v2(ntrw *w, const ntrw_field *f) {
  ntrw_u32(w, f->type);
  if (f->type == 1)
    fields_v2(w, f->fields, f->nfields);
  else if (f->type == 19)
    type_v2(w, f->element);
}
static void type_v6(ntrw *w, const ntrw_field *f);
static void fields_v6(ntrw *w, const ntrw_field *f, uint32_t n) {
  uint32_t i;
  ntrw_u16(w, (uint16_t)n);
  for (i = 0; i < n; i++) {
    size_t at = w->len;
    ntrw_u16(w, 0);
    str6(w, f[i].name);
    type_v6(w, &f[i]);
    w->buf[at] = (uint8_t)(w->len - at - 2);
    w->buf[at + 1] = (uint8_t)((w->len - at - 2) >> 8);
  }
}
static void type_v6(ntrw *w, const ntrw_field *f) {
  ntrw_u8(w, (uint8_t)f->type);
  if (f->type == 19 || f->type == 22 || f->type == 24 || f->type == 25)
    type_v6(w, f->element);
  if (f->type == 22)
    ntrw_u16(w, f->fixed_count);
  if (f->type == 1)
    fields_v6(w, f->fields, f->nfields);
}

void ntrw_md_begin(ntrw *w) {
  block_begin(w, "MetadataBlock", 3);
  w->blk_is_md = 1;
  if (w->v6)
    ntrw_u16(w, 0); /* header size */
  else
    ev_block_header(w, 1);
}

void ntrw_metadata(ntrw *w, const ntrw_md *md) {
  if (w->v6) {
    size_t at = w->len, oat;
    ntrw_u16(w, 0);
    ntrw_varuint(w, md->id);
    str6(w, md->provider);
    ntrw_varuint(w, md->event_id);
    str6(w, md->name);
    fields_v6(w, md->fields, md->nfields);
    oat = w->len;
    ntrw_u16(w, 0);
    if (md->opcode >= 0) {
      ntrw_u8(w, 1);
      ntrw_u8(w, (uint8_t)md->opcode);
    }
    ntrw_u8(w, 3);
    ntrw_u64(w, md->keywords);
    ntrw_u8(w, 8);
    ntrw_u8(w, (uint8_t)md->level);
    ntrw_u8(w, 9);
    ntrw_u8(w, (uint8_t)md->version);
    w->buf[oat] = (uint8_t)(w->len - oat - 2);
    w->buf[oat + 1] = (uint8_t)((w->len - oat - 2) >> 8);
    w->buf[at] = (uint8_t)(w->len - at - 2);
    w->buf[at + 1] = (uint8_t)((w->len - at - 2) >> 8);
    return;
  }
  {
    /* The record is the payload of an event blob with metadata id 0. */
    ntrw tmp;
    ntrw_init(&tmp, 0);
    ntrw_u32(&tmp, md->id);
    ntrw_wstr(&tmp, md->provider);
    ntrw_u32(&tmp, md->event_id);
    ntrw_wstr(&tmp, md->name);
    ntrw_u64(&tmp, md->keywords);
    ntrw_u32(&tmp, md->version);
    ntrw_u32(&tmp, md->level);
    if (!md->no_fields) {
      if (md->v2params) {
        ntrw_u32(&tmp, 0);
        {
          size_t at = tmp.len;
          ntrw_u32(&tmp, 0);
          ntrw_u8(&tmp, 2);
          fields_v2(&tmp, md->fields, md->nfields);
          put32(tmp.buf + at, (uint32_t)(tmp.len - at - 5));
        }
      } else {
        fields_v1(&tmp, md->fields, md->nfields);
      }
      if (md->opcode >= 0) {
        ntrw_u32(&tmp, 1);
        ntrw_u8(&tmp, 1);
        ntrw_u8(&tmp, (uint8_t)md->opcode);
      }
    }
    {
      ntrw_ev ev;
      memset(&ev, 0, sizeof(ev));
      ev.payload = tmp.buf;
      ev.payload_size = (uint32_t)tmp.len;
      ntrw_event(w, &ev);
    }
    ntrw_release(&tmp);
  }
}

/* ---- events ---- */

void ntrw_ev_begin(ntrw *w, int compressed) {
  block_begin(w, "EventBlock", 2);
  w->blk_is_md = 0;
  ev_block_header(w, compressed);
}

void ntrw_event(ntrw *w, const ntrw_ev *ev) {
  ntrw_ev *pv = &w->prev;
  if (!w->blk_compressed) {
    size_t at = w->len;
    ntrw_u32(w, 0);
    if (w->v6) {
      ntrw_u32(w, ev->metadata_id | (ev->sorted ? 0x80000000u : 0));
      ntrw_u32(w, ev->seq);
      ntrw_u64(w, ev->thread);
      ntrw_u64(w, ev->capture_thread);
      ntrw_u32(w, ev->proc);
      ntrw_u32(w, ev->stack_id);
      ntrw_u64(w, ev->ts);
      ntrw_u32(w, ev->label_list);
      ntrw_u32(w, ev->payload_size);
      ntrw_bytes(w, ev->payload, ev->payload_size);
    } else {
      ntrw_u32(w, ev->metadata_id | (ev->sorted ? 0 : 0x80000000u));
      ntrw_u32(w, ev->seq);
      ntrw_u64(w, ev->thread);
      ntrw_u64(w, ev->capture_thread);
      ntrw_u32(w, ev->proc);
      ntrw_u32(w, ev->stack_id);
      ntrw_u64(w, ev->ts);
      ntrw_bytes(w, ev->activity, 16);
      ntrw_bytes(w, ev->related, 16);
      ntrw_u32(w, ev->payload_size);
      ntrw_bytes(w, ev->payload, ev->payload_size);
      while (w->len % 4)
        ntrw_u8(w, 0); /* V4/V5 pad to the file's 4-byte alignment */
    }
    put32(w->buf + at, (uint32_t)(w->len - at - 4));
    return;
  }
  {
    uint8_t f = 0;
    uint32_t implied = pv->seq + ((w->v6 || ev->metadata_id != 0) ? 1 : 0);
    if (ev->metadata_id != pv->metadata_id)
      f |= 0x01;
    /* The implied sequence number depends on the metadata id of this event. */
    if (ev->seq != implied || ev->capture_thread != pv->capture_thread || ev->proc != pv->proc)
      f |= 0x02;
    if (ev->thread != pv->thread)
      f |= 0x04;
    if (ev->stack_id != pv->stack_id)
      f |= 0x08;
    if (w->v6) {
      if (ev->label_list != pv->label_list)
        f |= 0x10;
    } else {
      if (memcmp(ev->activity, pv->activity, 16))
        f |= 0x10;
      if (memcmp(ev->related, pv->related, 16))
        f |= 0x20;
    }
    if (ev->sorted)
      f |= 0x40;
    if (ev->payload_size != pv->payload_size)
      f |= 0x80;
    ntrw_u8(w, f);
    if (f & 0x01)
      ntrw_varuint(w, ev->metadata_id);
    if (f & 0x02) {
      ntrw_varuint(w, (uint32_t)(ev->seq - pv->seq - 1));
      ntrw_varuint(w, ev->capture_thread);
      ntrw_varuint(w, ev->proc);
    }
    if (f & 0x04)
      ntrw_varuint(w, ev->thread);
    if (f & 0x08)
      ntrw_varuint(w, ev->stack_id);
    ntrw_varuint(w, ev->ts - pv->ts);
    if (w->v6) {
      if (f & 0x10)
        ntrw_varuint(w, ev->label_list);
    } else {
      if (f & 0x10)
        ntrw_bytes(w, ev->activity, 16);
      if (f & 0x20)
        ntrw_bytes(w, ev->related, 16);
    }
    if (f & 0x80)
      ntrw_varuint(w, ev->payload_size);
    ntrw_bytes(w, ev->payload, ev->payload_size);
    *pv = *ev;
    pv->payload = NULL;
  }
}

/* ---- other blocks ---- */

void ntrw_stacks(ntrw *w, uint32_t first, uint32_t count, const uint64_t *const *frames,
                 const uint32_t *nframes) {
  uint32_t i, k;
  block_begin(w, "StackBlock", 5);
  ntrw_u32(w, first);
  ntrw_u32(w, count);
  for (i = 0; i < count; i++) {
    ntrw_u32(w, nframes[i] * w->pointer_size);
    for (k = 0; k < nframes[i]; k++) {
      if (w->pointer_size == 8)
        ntrw_u64(w, frames[i][k]);
      else
        ntrw_u32(w, (uint32_t)frames[i][k]);
    }
  }
  ntrw_block_end(w);
}

void ntrw_sp(ntrw *w, uint64_t ts, uint32_t flags, uint32_t n, const uint64_t *threads,
             const uint32_t *seqs) {
  uint32_t i;
  block_begin(w, "SPBlock", 4);
  ntrw_u64(w, ts);
  if (w->v6) {
    ntrw_u32(w, flags);
    ntrw_u32(w, n);
    for (i = 0; i < n; i++) {
      ntrw_varuint(w, threads[i]);
      ntrw_varuint(w, seqs[i]);
    }
  } else {
    ntrw_u32(w, n);
    for (i = 0; i < n; i++) {
      ntrw_u64(w, threads[i]);
      ntrw_u32(w, seqs[i]);
    }
  }
  ntrw_block_end(w);
}

void ntrw_thread(ntrw *w, uint64_t index, uint64_t os_tid, const char *name) {
  size_t at;
  block_begin(w, NULL, 6);
  at = w->len;
  ntrw_u16(w, 0);
  ntrw_varuint(w, index);
  if (name) {
    ntrw_u8(w, 1);
    str6(w, name);
  }
  ntrw_u8(w, 2);
  ntrw_varuint(w, 4242);
  ntrw_u8(w, 3);
  ntrw_varuint(w, os_tid);
  w->buf[at] = (uint8_t)(w->len - at - 2);
  w->buf[at + 1] = (uint8_t)((w->len - at - 2) >> 8);
  ntrw_block_end(w);
}

void ntrw_remove_thread(ntrw *w, uint64_t index, uint32_t seq) {
  block_begin(w, NULL, 7);
  ntrw_varuint(w, index);
  ntrw_varuint(w, seq);
  ntrw_block_end(w);
}

void ntrw_label_list(ntrw *w, uint32_t index, const uint8_t *activity, const char *key,
                     const char *value) {
  block_begin(w, NULL, 8);
  ntrw_u32(w, index);
  ntrw_u32(w, 1);
  if (activity) {
    ntrw_u8(w, 1);
    ntrw_bytes(w, activity, 16);
  }
  ntrw_u8(w, 5 | 0x80);
  str6(w, key);
  str6(w, value);
  ntrw_block_end(w);
}

void ntrw_raw_v6_block(ntrw *w, uint8_t kind, const uint8_t *data, uint32_t len) {
  ntrw_u32(w, len | ((uint32_t)kind << 24));
  ntrw_bytes(w, data, len);
}

void ntrw_end(ntrw *w) {
  if (w->v6)
    ntrw_u32(w, 0);
  else
    ntrw_u8(w, 0x01);
}
