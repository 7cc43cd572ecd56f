/* v6.c: NetTrace V6 blocks (header: u32 with 24-bit size and 8-bit kind). Event and stack
 * blocks share block.c's decoders; metadata rows go to metadata.c. */
#include <stdlib.h>

#include "ntr-int.h"

enum v6_kind {
  V6_END = 0,
  V6_TRACE = 1,
  V6_EVENT = 2,
  V6_METADATA = 3,
  V6_SEQUENCE_POINT = 4,
  V6_STACK = 5,
  V6_THREAD = 6,
  V6_REMOVE_THREAD = 7,
  V6_LABEL_LIST = 8
};

static int bad_varint(ntr_parser *p, int rc, uint64_t off, const char *what) {
  if (rc == -2)
    return ntr__fail(p, NTR_EFORMAT, off, "overlong varint in %s", what);
  return ntr__fail(p, NTR_EFORMAT, off, "%s runs past the end of its block", what);
}

/* varuint32 length + UTF-8; *s points into the block (not NUL-terminated). */
static int rd_str(ntr__cur *c, const uint8_t **s, uint32_t *n) {
  int rc = ntr__varu32(c, n);
  if (rc)
    return rc;
  if (*n > ntr__left(c))
    return -1;
  *s = c->p;
  c->p += *n;
  return 0;
}

static uint32_t parse_u32_dec(const char *s) {
  uint64_t v = 0;
  for (; *s >= '0' && *s <= '9'; s++) {
    v = v * 10 + (uint64_t)(*s - '0');
    if (v > 0xffffffffu)
      return 0;
  }
  return (uint32_t)v;
}

/* Trace: SYSTEMTIME, i64 sync ticks, i64 frequency, i32 pointer size, i32 count, pairs. */
static int trace_block(ntr_parser *p, const uint8_t *d, size_t len, uint64_t off) {
  ntr__cur c = {d, d + len};
  ntr_trace *t = &p->trace;
  uint32_t nkv, i, minor = t->minor_version;
  size_t strbytes = 0;
  const uint8_t *kvstart;
  char *str;
  int rc;

  if (p->have_trace)
    return ntr__fail(p, NTR_EFORMAT, off, "second Trace block");
  if (len < 40)
    return ntr__fail(p, NTR_EFORMAT, off, "Trace block of %zu bytes is too short", len);
  memset(t, 0, sizeof(*t));
  t->format = NTR_FORMAT_V6;
  t->minor_version = minor;
  for (i = 0; i < 8; i++)
    t->start_time[i] = ntr__le16(d + 2 * i);
  t->sync_time_qpc = ntr__le64(d + 16);
  t->qpc_frequency = ntr__le64(d + 24);
  t->pointer_size = ntr__le32(d + 32);
  nkv = ntr__le32(d + 36);
  if (t->pointer_size != 4 && t->pointer_size != 8)
    return ntr__fail(p, NTR_EFORMAT, off + 32, "bad pointer size %u in the Trace block",
                     t->pointer_size);
  c.p = d + 40;
  if (nkv > ntr__left(&c) / 2)
    return ntr__fail(p, NTR_EFORMAT, off + 36, "key/value count %u does not fit in the block", nkv);
  /* First pass: validate and size; second: copy with NULs. */
  kvstart = c.p;
  for (i = 0; i < 2 * nkv; i++) {
    const uint8_t *s;
    uint32_t n;
    uint64_t o = off + (uint64_t)(c.p - d);
    if ((rc = rd_str(&c, &s, &n)))
      return bad_varint(p, rc, o, "a trace key/value string");
    strbytes += (size_t)n + 1;
  }
  if (nkv) {
    p->trace_kv = ntr__malloc(nkv * sizeof(ntr_keyvalue) + strbytes);
    if (!p->trace_kv)
      return ntr__fail(p, NTR_ENOMEM, off, "out of memory for the trace key/values");
    str = (char *)(p->trace_kv + nkv);
    c.p = kvstart;
    for (i = 0; i < 2 * nkv; i++) {
      const uint8_t *s;
      uint32_t n;
      rd_str(&c, &s, &n);
      memcpy(str, s, n);
      str[n] = '\0';
      if (i & 1)
        p->trace_kv[i / 2].value = str;
      else
        p->trace_kv[i / 2].key = str;
      str += n + 1;
    }
    for (i = 0; i < nkv; i++) {
      const ntr_keyvalue *kv = &p->trace_kv[i];
      if (!strcmp(kv->key, "ProcessId"))
        t->process_id = parse_u32_dec(kv->value);
      else if (!strcmp(kv->key, "HardwareThreadCount"))
        t->cpu_count = parse_u32_dec(kv->value);
      else if (!strcmp(kv->key, "ExpectedCPUSamplingRate"))
        t->sampling_interval_ns = parse_u32_dec(kv->value);
    }
  }
  t->nkeyvalues = nkv;
  t->keyvalues = p->trace_kv;
  p->have_trace = 1;
  p->in_callback = 1;
  rc = NTR__CALL(p, on_trace, t);
  p->in_callback = 0;
  if (rc)
    return ntr__stopped(p, off, "on_trace");
  return 0;
}

void ntr__threads_clear(ntr_parser *p) {
  size_t i;
  for (i = 0; i < p->nthreads; i++)
    ntr__free(p->threads[i].name);
  p->nthreads = 0;
  p->thread_bytes = 0;
  ntr__map_clear(&p->thr);
}

/* What max_thread_bytes charges for a thread's row and name (the index is added apart). */
static size_t thread_cost(const struct ntr__thread_ent *e) {
  return sizeof(*e) + (e->name ? strlen(e->name) + 1 : 0);
}

void ntr__labels_clear(ntr_parser *p) {
  size_t i;
  for (i = 0; i < p->nll_blocks; i++)
    ntr__free(p->ll_blocks[i]);
  p->nll_blocks = 0;
  p->nll = 0;
  p->label_bytes = 0;
  ntr__map_clear(&p->ll);
}

static int grow(void **arr, size_t *cap, size_t want, size_t elsize) {
  size_t ncap = *cap ? *cap : 16;
  void *n;
  if (want <= *cap)
    return 0;
  while (ncap < want)
    ncap *= 2;
  n = ntr__realloc(*arr, ncap * elsize);
  if (!n)
    return NTR_ENOMEM;
  *arr = n;
  *cap = ncap;
  return 0;
}

/* Removes thread `index` from the thread table (its slot is reused by swapping the last). */
static void thread_remove(ntr_parser *p, uint64_t index) {
  uint64_t v = ntr__map_del(&p->thr, index);
  size_t i, last;
  if (!v)
    return;
  i = v - 1;
  last = p->nthreads - 1;
  p->thread_bytes -= thread_cost(&p->threads[i]);
  ntr__free(p->threads[i].name);
  if (i != last) {
    p->threads[i] = p->threads[last];
    *ntr__map_find(&p->thr, p->threads[i].t.index) = i + 1;
  }
  p->nthreads--;
}

/* Thread: rows {u16 size, varuint64 index, items {u8 kind, data}}. */
static int thread_block(ntr_parser *p, const uint8_t *d, size_t len, uint64_t off) {
  ntr__cur c = {d, d + len};
  int rc;

  while (ntr__left(&c) > 0) {
    uint64_t roff = off + (uint64_t)(c.p - d);
    uint16_t size;
    ntr__cur r;
    struct ntr__thread_ent e;
    uint64_t *slot;

    if (ntr__u16(&c, &size) || size > ntr__left(&c))
      return ntr__fail(p, NTR_EFORMAT, roff, "thread row runs past the block");
    r.p = c.p;
    r.end = c.p + size;
    c.p = r.end;
    memset(&e, 0, sizeof(e));
    if ((rc = ntr__varu64(&r, &e.t.index)))
      return bad_varint(p, rc, roff + 2, "a thread index");
    while (ntr__left(&r) > 0) {
      uint8_t kind = 0;
      const uint8_t *s;
      uint32_t n;
      uint64_t o = off + (uint64_t)(r.p - d);
      ntr__u8(&r, &kind);
      if (kind == 1) {
        if ((rc = rd_str(&r, &s, &n)))
          goto bad_item;
        ntr__free(e.name);
        e.name = ntr__malloc((size_t)n + 1);
        if (!e.name)
          return ntr__fail(p, NTR_ENOMEM, o, "out of memory for a thread name");
        memcpy(e.name, s, n);
        e.name[n] = '\0';
      } else if (kind == 2) {
        if ((rc = ntr__varu64(&r, &e.t.os_process_id)))
          goto bad_item;
        e.t.has_os_process_id = 1;
      } else if (kind == 3) {
        if ((rc = ntr__varu64(&r, &e.t.os_thread_id)))
          goto bad_item;
        e.t.has_os_thread_id = 1;
      } else if (kind == 4) {
        if ((rc = rd_str(&r, &s, &n)) || (rc = rd_str(&r, &s, &n)))
          goto bad_item;
      } else {
        break; /* unknown item kinds have no length: ignore the rest of the row */
      }
      continue;
    bad_item:
      ntr__free(e.name);
      return bad_varint(p, rc, o, "a thread row item");
    }
    e.t.name = e.name;
    slot = ntr__map_find(&p->thr, e.t.index);
    /* Names are copied out of the block: without a bound on their sum, a stream of thread
     * rows would grow the table as long as it lasts. */
    if ((uint64_t)p->thread_bytes - (slot ? thread_cost(&p->threads[*slot - 1]) : 0) +
            thread_cost(&e) + ntr__map_bytes(p->thr.len + !slot) > p->lim.max_thread_bytes) {
      ntr__free(e.name);
      return ntr__fail(p, NTR_ELIMIT, roff, "thread table exceeds %zu bytes (max_thread_bytes)",
                       p->lim.max_thread_bytes);
    }
    if (slot) {
      struct ntr__thread_ent *old = &p->threads[*slot - 1];
      p->thread_bytes -= thread_cost(old);
      ntr__free(old->name);
      *old = e;
      p->thread_bytes += thread_cost(&e);
    } else {
      if (p->nthreads >= p->lim.max_threads) {
        ntr__free(e.name);
        return ntr__fail(p, NTR_ELIMIT, roff, "more than %u threads (max_threads)",
                         p->lim.max_threads);
      }
      if (grow((void **)&p->threads, &p->threads_cap, p->nthreads + 1, sizeof(*p->threads)) < 0 ||
          ntr__map_put(&p->thr, e.t.index, p->nthreads + 1) < 0) {
        ntr__free(e.name);
        return ntr__fail(p, NTR_ENOMEM, roff, "out of memory for the thread table");
      }
      p->threads[p->nthreads++] = e;
      p->thread_bytes += thread_cost(&e);
    }
    if (p->cb.on_thread) {
      p->in_callback = 1;
      rc = p->cb.on_thread(p->ud, &e.t);
      p->in_callback = 0;
      if (rc)
        return ntr__stopped(p, roff, "on_thread");
    }
  }
  return 0;
}

static int remove_thread_block(ntr_parser *p, const uint8_t *d, size_t len, uint64_t off) {
  ntr__cur c = {d, d + len};
  int rc;
  while (ntr__left(&c) > 0) {
    uint64_t o = off + (uint64_t)(c.p - d), index;
    uint32_t seq;
    if ((rc = ntr__varu64(&c, &index)) || (rc = ntr__varu32(&c, &seq)))
      return bad_varint(p, rc, o, "a RemoveThread entry");
    if ((rc = ntr__seq_check(p, index, seq, 1, o)) < 0)
      return rc;
    ntr__map_del(&p->seq, index);
    ntr__seq_cache_reset(p);
    thread_remove(p, index);
  }
  return 0;
}

static int sp_block(ntr_parser *p, const uint8_t *d, size_t len, uint64_t off) {
  ntr__cur c = {d, d + len};
  ntr_sequence_point sp;
  ntr_thread_seq *th = NULL;
  uint32_t n, i;
  int rc;

  memset(&sp, 0, sizeof(sp));
  if (ntr__u64(&c, &sp.timestamp) || ntr__u32(&c, &sp.flags) || ntr__u32(&c, &n))
    return ntr__fail(p, NTR_EFORMAT, off, "sequence point block too short");
  if (n > ntr__left(&c) / 2)
    return ntr__fail(p, NTR_EFORMAT, off + 12, "sequence point thread count %u runs past the block", n);
  if (n > p->lim.max_threads)
    return ntr__fail(p, NTR_ELIMIT, off + 12, "more than %u threads (max_threads)",
                     p->lim.max_threads);
  th = ntr__malloc((size_t)n * sizeof(*th));
  if (!th)
    return ntr__fail(p, NTR_ENOMEM, off, "out of memory for a sequence point");
  for (i = 0; i < n; i++) {
    uint64_t o = off + (uint64_t)(c.p - d);
    if ((rc = ntr__varu64(&c, &th[i].thread)) || (rc = ntr__varu32(&c, &th[i].sequence))) {
      rc = bad_varint(p, rc, o, "a sequence point entry");
      goto out;
    }
    if ((rc = ntr__seq_check(p, th[i].thread, th[i].sequence, 1, o)) < 0)
      goto out;
  }
  /* Stack and label-list references do not cross a sequence point. */
  ntr__stacks_clear(p);
  ntr__labels_clear(p);
  if (sp.flags & 1) { /* flush the thread table (after the checks above) */
    ntr__threads_clear(p);
    ntr__map_clear(&p->seq);
    ntr__seq_cache_reset(p);
  }
  if (sp.flags & 2)
    ntr__metadata_clear(p);
  p->stats.sequence_points++;
  sp.nthreads = n;
  sp.threads = th;
  if (p->cb.on_sequence_point) {
    p->in_callback = 1;
    rc = p->cb.on_sequence_point(p->ud, &sp);
    p->in_callback = 0;
    if (rc) {
      rc = ntr__stopped(p, off, "on_sequence_point");
      goto out;
    }
  }
  rc = 0;
out:
  ntr__free(th);
  return rc;
}

/* One label; `fill` NULL means validate/size only. */
static int label(ntr__cur *c, ntr_label *l, char **str, size_t *strbytes, uint8_t *kind) {
  const uint8_t *s;
  uint32_t n;
  uint8_t k;
  int rc;
  uint64_t x;

  if (ntr__u8(c, &k))
    return -1;
  *kind = k;
  if (l) {
    memset(l, 0, sizeof(*l));
    l->kind = k & 0x7f;
  }
  switch (k & 0x7f) {
  case 1: case 2: case 3:
    if (ntr__left(c) < 16)
      return -1;
    if (l)
      memcpy(l->guid, c->p, 16);
    c->p += 16;
    return 0;
  case 4: case 8:
    if (ntr__u64(c, &x))
      return -1;
    if (l)
      l->u = x;
    return 0;
  case 7: case 9: case 10: {
    uint8_t b;
    if (ntr__u8(c, &b))
      return -1;
    if (l)
      l->u = b;
    return 0;
  }
  case 5: case 6: {
    int i;
    for (i = 0; i < ((k & 0x7f) == 5 ? 2 : 1); i++) {
      if ((rc = rd_str(c, &s, &n)))
        return rc;
      *strbytes += (size_t)n + 1;
      if (l) {
        memcpy(*str, s, n);
        (*str)[n] = '\0';
        if (i == 0)
          l->key = *str;
        else
          l->value = *str;
        *str += n + 1;
      }
    }
    if ((k & 0x7f) == 6) {
      if ((rc = ntr__varu64(c, &x)))
        return rc;
      if (l)
        l->i = (int64_t)(x >> 1) ^ -(int64_t)(x & 1);
    }
    return 0;
  }
  default:
    return -3; /* unknown kinds have no length */
  }
}

/* LabelList: u32 firstIndex, u32 count, count lists of labels (the last of each has 0x80). */
static int label_block(ntr_parser *p, const uint8_t *d, size_t len, uint64_t off) {
  ntr__cur c = {d, d + len};
  uint32_t first, count, i, nlabels = 0;
  size_t strbytes = 0, total;
  const uint8_t *start;
  ntr_label *labels;
  char *str;
  void *blk;
  int rc;

  if (ntr__u32(&c, &first) || ntr__u32(&c, &count))
    return ntr__fail(p, NTR_EFORMAT, off, "label list block too short");
  if (first == 0)
    return ntr__fail(p, NTR_EFORMAT, off, "label list index 0 is reserved");
  if (count > ntr__left(&c))
    return ntr__fail(p, NTR_EFORMAT, off + 4, "label list count %u runs past the block", count);
  start = c.p;
  for (i = 0; i < count; i++) {
    uint8_t k = 0;
    do {
      uint64_t o = off + (uint64_t)(c.p - d);
      if ((rc = label(&c, NULL, NULL, &strbytes, &k))) {
        if (rc == -3)
          return ntr__fail(p, NTR_EFORMAT, o, "unknown label kind %u", k & 0x7f);
        return bad_varint(p, rc, o, "a label");
      }
      nlabels++;
    } while (!(k & 0x80));
  }
  total = (size_t)nlabels * sizeof(ntr_label) + strbytes;
  /* A one-byte label list costs ~100 bytes here with its entry and index slot: charge them
   * all, or a small block could grow the table far past the limit. */
  if ((uint64_t)p->label_bytes + total + (uint64_t)(p->nll + count) * sizeof(*p->ll_ent) +
          ntr__map_bytes(p->ll.len + count) > p->lim.max_label_bytes)
    return ntr__fail(p, NTR_ELIMIT, off, "label lists exceed %zu bytes (max_label_bytes)",
                     p->lim.max_label_bytes);
  if (grow((void **)&p->ll_ent, &p->ll_cap, p->nll + count, sizeof(*p->ll_ent)) < 0 ||
      grow((void **)&p->ll_blocks, &p->ll_blocks_cap, p->nll_blocks + 1, sizeof(void *)) < 0)
    return ntr__fail(p, NTR_ENOMEM, off, "out of memory for the label list table");
  blk = ntr__malloc(total);
  if (!blk)
    return ntr__fail(p, NTR_ENOMEM, off, "out of memory for a label list block");
  p->ll_blocks[p->nll_blocks++] = blk;
  p->label_bytes += total;
  labels = blk;
  str = (char *)(labels + nlabels);
  c.p = start;
  for (i = 0; i < count; i++) {
    uint8_t k = 0;
    struct ntr__label_ent *e = &p->ll_ent[p->nll];
    e->labels = labels;
    e->n = 0;
    do {
      label(&c, labels++, &str, &strbytes, &k);
      e->n++;
    } while (!(k & 0x80));
    if (ntr__map_put(&p->ll, (uint64_t)first + i, p->nll + 1) < 0)
      return ntr__fail(p, NTR_ENOMEM, off, "out of memory for the label list table");
    p->nll++;
  }
  return 0;
}

int ntr__v6_block(ntr_parser *p, uint32_t kind, const uint8_t *data, size_t len, uint64_t off) {
  if (kind != V6_TRACE && !p->have_trace && kind <= V6_LABEL_LIST)
    return ntr__fail(p, NTR_EFORMAT, off, "block of kind %u before the Trace block", kind);
  switch (kind) {
  case V6_TRACE: return trace_block(p, data, len, off);
  case V6_EVENT: return ntr__event_block(p, data, len, off, 0);
  case V6_METADATA: return ntr__metadata_v6(p, data, len, off);
  case V6_SEQUENCE_POINT: return sp_block(p, data, len, off);
  case V6_STACK: return ntr__stack_block(p, data, len, off);
  case V6_THREAD: return thread_block(p, data, len, off);
  case V6_REMOVE_THREAD: return remove_thread_block(p, data, len, off);
  case V6_LABEL_LIST: return label_block(p, data, len, off);
  default:
    /* Later minor versions may add kinds; the format says to skip them. */
    p->stats.skipped_blocks++;
    return 0;
  }
}
