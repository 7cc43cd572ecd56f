/* block.c: decoders for the blocks V4/V5 and V6 share (events, stacks) plus the V4/V5 Trace
 * object and sequence points, and the tables they feed. Every decoder gets one whole block. */
#include "ntr-int.h"

/* ---- Trace object (V4/V5) ---- */

int ntr__trace_v4(ntr_parser *p, const uint8_t *d, uint64_t off) {
  ntr_trace *t = &p->trace;
  int i, rc = 0;

  memset(t, 0, sizeof(*t));
  t->format = p->netperf ? NTR_FORMAT_NETPERF : NTR_FORMAT_V4;
  for (i = 0; i < 8; i++)
    t->start_time[i] = ntr__le16(d + 2 * i);
  t->sync_time_qpc = ntr__le64(d + 16);
  t->qpc_frequency = ntr__le64(d + 24);
  t->pointer_size = ntr__le32(d + 32);
  t->process_id = ntr__le32(d + 36);
  t->cpu_count = ntr__le32(d + 40);
  t->sampling_interval_ns = ntr__le32(d + 44);
  if (t->pointer_size != 4 && t->pointer_size != 8)
    return ntr__fail(p, NTR_EFORMAT, off + 32, "bad pointer size %u in the Trace object",
                     t->pointer_size);
  p->have_trace = 1;
  p->stats.blocks++;
  p->in_callback = 1;
  rc = NTR__CALL(p, on_trace, t);
  p->in_callback = 0;
  if (rc)
    return ntr__stopped(p, off, "on_trace");
  return 0;
}

/* ---- sequence numbers ---- */

int ntr__seq_check(ntr_parser *p, uint64_t key, uint32_t seq, int is_sp, uint64_t off) {
  uint64_t *slot;
  uint32_t last, gap;
  size_t ci = ntr__seq_cache_index(key);

  if (p->seq_cache[ci].slot && p->seq_cache[ci].key == key)
    slot = p->seq_cache[ci].slot;
  else
    slot = ntr__map_find(&p->seq, key);
  if (!slot) {
    if (p->seq.len >= p->lim.max_threads)
      return ntr__fail(p, NTR_ELIMIT, off, "more than %u threads (max_threads)",
                       p->lim.max_threads);
    ntr__seq_cache_reset(p);
    if (ntr__map_put(&p->seq, key, NTR__SEQ_USED | seq) < 0)
      return ntr__fail(p, NTR_ENOMEM, off, "out of memory for the thread table");
    return 0;
  }
  p->seq_cache[ci].key = key;
  p->seq_cache[ci].slot = slot;
  last = (uint32_t)*slot;
  /* An event should carry last+1; a sequence point carries the last number the thread tried
   * to write. Unsigned arithmetic makes the 2^32 wrap free. */
  gap = is_sp ? seq - last : seq - last - 1;
  /* V4/V5 reuse OS thread ids: a thread last seen at 0 is taken to be a recycled id, as
   * TraceEvent does. A "gap" of 2^31 or more is a step backwards, not a loss. */
  if (gap && gap < 0x80000000u && (p->trace.format == NTR_FORMAT_V6 || last != 0))
    p->stats.dropped_events += gap;
  *slot = NTR__SEQ_USED | seq;
  return 0;
}

/* ---- stack table ---- */

void ntr__stacks_clear(ntr_parser *p) {
  ntr__map_clear(&p->st);
  p->nstacks = 0;
  p->nframes = 0;
}

static int grow_array(void **arr, size_t *cap, size_t want, size_t elsize) {
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

/* The bytes max_stack_bytes charges for a table of nframes IPs and nstacks stacks, of which
 * nindexed are in the hash index. In 64 bits: nframes comes from the wire. */
static uint64_t stack_table_bytes(uint64_t nframes, uint64_t nstacks, size_t nindexed) {
  return nframes * sizeof(uint64_t) + nstacks * sizeof(struct ntr__stack_ent) +
         ntr__map_bytes(nindexed);
}

int ntr__stack_block(ntr_parser *p, const uint8_t *data, size_t len, uint64_t off) {
  ntr__cur c = {data, data + len};
  uint32_t first, count, i, ptr = p->trace.pointer_size;

  if (!p->have_trace || (ptr != 4 && ptr != 8))
    return ntr__fail(p, NTR_EFORMAT, off, "stack block before the trace header");
  if (ntr__u32(&c, &first) || ntr__u32(&c, &count))
    return ntr__fail(p, NTR_EFORMAT, off, "stack block too short for its header");
  if (count > ntr__left(&c) / 4)
    return ntr__fail(p, NTR_EFORMAT, off + 4, "stack count %u does not fit in the block", count);
  for (i = 0; i < count; i++) {
    uint64_t soff = off + (uint64_t)(c.p - data);
    uint32_t size = 0, n, k, id = first + i;
    uint64_t *fr;
    struct ntr__stack_ent *e;
    ntr_stack s;
    int rc, dense;

    if (ntr__u32(&c, &size) || size > ntr__left(&c))
      return ntr__fail(p, NTR_EFORMAT, soff, "stack %u size %u runs past the block", id, size);
    if (size % ptr)
      return ntr__fail(p, NTR_EFORMAT, soff,
                       "stack %u size %u is not a multiple of the pointer size %u", id, size, ptr);
    n = size / ptr;
    /* Empty stacks cost nothing on the wire but an entry here: count them too. */
    if (p->nstacks >= p->lim.max_stacks)
      return ntr__fail(p, NTR_ELIMIT, soff,
                       "more than %u stacks between two sequence points (max_stacks)",
                       p->lim.max_stacks);
    /* Writers number stacks densely from the first after a sequence point, and such an id
     * indexes the table directly (see ntr__event_block); only the others need the hash. */
    dense = p->nstacks == 0 || id - p->stacks[0].id == (uint32_t)p->nstacks;
    if (stack_table_bytes((uint64_t)p->nframes + n, (uint64_t)p->nstacks + 1,
                          p->st.len + !dense) > p->lim.max_stack_bytes)
      return ntr__fail(p, NTR_ELIMIT, soff, "stack table exceeds %zu bytes (max_stack_bytes)",
                       p->lim.max_stack_bytes);
    /* One IP more than needed: the pool then exists even when every stack so far is empty,
     * so a stack's frames (the pool + its offset) are never NULL + 0, which C leaves undefined,
     * and consumers may hand them to memcmp/memcpy with a length of 0. */
    if (grow_array((void **)&p->frames, &p->frames_cap, p->nframes + n + 1, sizeof(uint64_t)) < 0 ||
        grow_array((void **)&p->stacks, &p->stacks_cap, p->nstacks + 1, sizeof(*p->stacks)) < 0)
      return ntr__fail(p, NTR_ENOMEM, soff, "out of memory for the stack table");
    fr = p->frames + p->nframes;
    if (ptr == 8)
      for (k = 0; k < n; k++)
        fr[k] = ntr__le64(c.p + 8 * k);
    else
      for (k = 0; k < n; k++)
        fr[k] = ntr__le32(c.p + 4 * k);
    c.p += size;
    e = &p->stacks[p->nstacks];
    e->off = p->nframes;
    e->n = n;
    e->id = id;
    if (!dense && ntr__map_put(&p->st, id, p->nstacks + 1) < 0)
      return ntr__fail(p, NTR_ENOMEM, soff, "out of memory for the stack table");
    p->nstacks++;
    p->nframes += n;
    p->stats.stacks++;
    if (p->cb.on_stack) {
      s.id = id;
      s.nframes = n;
      s.frames = fr;
      p->in_callback = 1;
      rc = p->cb.on_stack(p->ud, &s);
      p->in_callback = 0;
      if (rc)
        return ntr__stopped(p, soff, "on_stack");
    }
  }
  if (c.p != c.end)
    return ntr__fail(p, NTR_EFORMAT, off + (uint64_t)(c.p - data),
                     "%zu stray bytes after the last stack", ntr__left(&c));
  return 0;
}

/* ---- sequence points (V4/V5) ---- */

int ntr__sp_block_v4(ntr_parser *p, const uint8_t *data, size_t len, uint64_t off) {
  ntr__cur c = {data, data + len};
  ntr_sequence_point sp;
  ntr_thread_seq *th = NULL;
  uint64_t ts;
  uint32_t n, i;
  int rc = 0;

  if (ntr__u64(&c, &ts) || ntr__u32(&c, &n))
    return ntr__fail(p, NTR_EFORMAT, off, "sequence point block too short");
  if (n > ntr__left(&c) / 12)
    return ntr__fail(p, NTR_EFORMAT, off + 8, "sequence point thread count %u runs past the block",
                     n);
  if (n > p->lim.max_threads)
    return ntr__fail(p, NTR_ELIMIT, off + 8, "more than %u threads (max_threads)",
                     p->lim.max_threads);
  th = ntr__malloc((size_t)n * sizeof(*th));
  if (!th)
    return ntr__fail(p, NTR_ENOMEM, off, "out of memory for a sequence point");
  for (i = 0; i < n; i++) {
    th[i].thread = ntr__le64(c.p);
    th[i].sequence = ntr__le32(c.p + 8);
    c.p += 12;
    rc = ntr__seq_check(p, th[i].thread, th[i].sequence, 1, off + 12 + 12 * (uint64_t)i);
    if (rc < 0)
      goto out;
  }
  /* The SP lists every live thread: forget the others so the table tracks live threads only. */
  ntr__map_clear(&p->seq);
  ntr__seq_cache_reset(p);
  for (i = 0; i < n; i++)
    if (ntr__map_put(&p->seq, th[i].thread, NTR__SEQ_USED | th[i].sequence) < 0) {
      rc = ntr__fail(p, NTR_ENOMEM, off, "out of memory for the thread table");
      goto out;
    }
  /* Stack ids restart after a sequence point. */
  ntr__stacks_clear(p);
  p->stats.sequence_points++;
  if (p->cb.on_sequence_point) {
    sp.timestamp = ts;
    sp.flags = 0;
    sp.nthreads = n;
    sp.threads = th;
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

/* ---- events ---- */

static const ntr_label *label_list(ntr_parser *p, uint32_t id, uint32_t *n) {
  uint64_t *v = id ? ntr__map_find(&p->ll, id) : NULL;
  if (!v) {
    *n = 0;
    return NULL;
  }
  *n = p->ll_ent[*v - 1].n;
  return p->ll_ent[*v - 1].labels;
}

static void resolve_labels(ntr_parser *p, ntr_event *ev) {
  uint32_t n, i;
  const ntr_label *l = label_list(p, ev->label_list_id, &n);
  ev->labels = l;
  ev->nlabels = n;
  memset(ev->activity_id, 0, 16);
  memset(ev->related_activity_id, 0, 16);
  for (i = 0; i < n; i++) {
    if (l[i].kind == NTR_LABEL_ACTIVITY_ID)
      memcpy(ev->activity_id, l[i].guid, 16);
    else if (l[i].kind == NTR_LABEL_RELATED_ACTIVITY_ID)
      memcpy(ev->related_activity_id, l[i].guid, 16);
  }
}

static uint64_t thread_os_id(ntr_parser *p, uint64_t index) {
  uint64_t *v = ntr__map_find(&p->thr, index);
  if (!v || !p->threads[*v - 1].t.has_os_thread_id)
    return 0;
  return p->threads[*v - 1].t.os_thread_id;
}

/* An event counted and handed to on_event: 0, or the stop's error when the callback asks. */
static int deliver(ntr_parser *p, const ntr_event *ev, uint64_t row) {
  int rc;
  p->stats.events++;
  if (!p->cb.on_event)
    return 0;
  p->in_callback = 1;
  rc = p->cb.on_event(p->ud, ev);
  p->in_callback = 0;
  return rc ? ntr__stopped(p, row, "on_event") : 0;
}

/* Decodes the event rows of an EventBlock (metadata == 0) or the metadata records of a
 * MetadataBlock (metadata == 1, V4/V5). V6 rows differ only in the fields noted. */
int ntr__event_block(ntr_parser *p, const uint8_t *data, size_t len, uint64_t off, int metadata) {
  const uint8_t *q = data, *end = data + len;
  const int v6 = p->trace.format == NTR_FORMAT_V6;
  uint16_t hsize, flags;
  ntr_event ev;
  uint64_t last_thread = UINT64_MAX, last_capture = UINT64_MAX;
  uint32_t last_stack = 0, last_labels = 0;
  int compressed, rc;

  if (len < 20)
    return ntr__fail(p, NTR_EFORMAT, off, "event block of %zu bytes is shorter than its header",
                     len);
  hsize = ntr__le16(q);
  flags = ntr__le16(q + 2);
  if (hsize < 20 || hsize > len)
    return ntr__fail(p, NTR_EFORMAT, off, "bad event block header size %u", hsize);
  compressed = flags & 1;
  q += hsize;
  /* The "previous header" of header compression starts all-zero in every block. */
  memset(&ev, 0, sizeof(ev));
  memset(&p->st_cur, 0, sizeof(p->st_cur));

  while (q < end) {
    const uint64_t row = off + (uint64_t)(q - data);
    const uint8_t *next;
    ntr__cur c;

    if (compressed) {
      uint8_t f;
      uint64_t x;
      c.p = q;
      c.end = end;
      f = *c.p++;
      /* Errors inside a header share one message: the offset says where. */
      if (f & 0x01) {
        if ((rc = ntr__varu32(&c, &ev.metadata_id)))
          goto bad_varint;
      }
      if (f & 0x02) {
        uint32_t delta, proc;
        if ((rc = ntr__varu32(&c, &delta)) || (rc = ntr__varu64(&c, &x)) ||
            (rc = ntr__varu32(&c, &proc)))
          goto bad_varint;
        ev.sequence += delta;
        ev.capture_thread_index = x;
        ev.processor = proc;
        if (!v6)
          ev.sequence++;
      } else if (!v6 && ev.metadata_id != 0) {
        ev.sequence++;
      }
      if (v6)
        ev.sequence++;
      if (f & 0x04) {
        if ((rc = ntr__varu64(&c, &ev.thread_index)))
          goto bad_varint;
      }
      if (f & 0x08) {
        if ((rc = ntr__varu32(&c, &ev.stack_id)))
          goto bad_varint;
      }
      if ((rc = ntr__varu64(&c, &x)))
        goto bad_varint;
      ev.timestamp += x;
      if (v6) {
        if (f & 0x10) {
          if ((rc = ntr__varu32(&c, &ev.label_list_id)))
            goto bad_varint;
        }
      } else {
        if (f & 0x10) {
          if (ntr__left(&c) < 16)
            goto short_row;
          memcpy(ev.activity_id, c.p, 16);
          c.p += 16;
        }
        if (f & 0x20) {
          if (ntr__left(&c) < 16)
            goto short_row;
          memcpy(ev.related_activity_id, c.p, 16);
          c.p += 16;
        }
      }
      ev.sorted = (f & 0x40) != 0;
      if (f & 0x80) {
        if ((rc = ntr__varu32(&c, &ev.payload_size)))
          goto bad_varint;
      }
      if (ev.payload_size > ntr__left(&c))
        return ntr__fail(p, NTR_EFORMAT, row, "event payload of %u bytes runs past the block",
                         ev.payload_size);
      ev.payload = c.p;
      next = c.p + ev.payload_size;
    } else {
      uint32_t size, mid;
      size_t hdr = v6 ? 52 : 80;
      if ((size_t)(end - q) < 4)
        goto short_row;
      size = ntr__le32(q);
      if (size > (size_t)(end - q) - 4 || size < hdr - 4)
        return ntr__fail(p, NTR_EFORMAT, row, "bad event size %u", size);
      mid = ntr__le32(q + 4);
      ev.metadata_id = mid & 0x7fffffffu;
      /* V4/V5 writers set the high bit for events that are NOT sorted (TraceEvent reads it
       * that way); V6 defines it as IsSorted. */
      ev.sorted = v6 ? (mid >> 31) : !(mid >> 31);
      ev.sequence = ntr__le32(q + 8);
      ev.thread_index = ntr__le64(q + 12);
      ev.capture_thread_index = ntr__le64(q + 20);
      ev.processor = ntr__le32(q + 28);
      ev.stack_id = ntr__le32(q + 32);
      ev.timestamp = ntr__le64(q + 36);
      if (v6) {
        ev.label_list_id = ntr__le32(q + 44);
        ev.payload_size = ntr__le32(q + 48);
      } else {
        memcpy(ev.activity_id, q + 44, 16);
        memcpy(ev.related_activity_id, q + 60, 16);
        ev.payload_size = ntr__le32(q + 76);
      }
      if (ev.payload_size > size + 4 - hdr)
        return ntr__fail(p, NTR_EFORMAT, row, "event payload of %u bytes exceeds its event size %u",
                         ev.payload_size, size);
      ev.payload = q + hdr;
      next = q + 4 + size;
    }

    if (metadata) {
      rc = ntr__metadata_v5(p, ev.payload, ev.payload_size, off + (uint64_t)(ev.payload - data));
      if (rc < 0)
        return rc;
      q = next;
      continue;
    }

    /* Resolve references; the caches skip lookups for runs of events that share them. */
    ev.metadata = ntr__metadata_get(p, ev.metadata_id);
    if (v6) {
      if (ev.thread_index != last_thread) {
        ev.thread_id = thread_os_id(p, ev.thread_index);
        last_thread = ev.thread_index;
      }
      if (ev.capture_thread_index != last_capture) {
        ev.capture_thread_id = thread_os_id(p, ev.capture_thread_index);
        last_capture = ev.capture_thread_index;
      }
      if (ev.label_list_id != last_labels || (!ev.labels && ev.label_list_id)) {
        resolve_labels(p, &ev);
        last_labels = ev.label_list_id;
      }
    } else {
      ev.thread_id = ev.thread_index;
      ev.capture_thread_id = ev.capture_thread_index;
    }
    if (ev.stack_id != last_stack || (ev.stack_id && !ev.stack)) {
      const struct ntr__stack_ent *e = NULL;
      /* Writers number stacks densely from the first id after a sequence point, so the id
       * usually indexes the table directly; the hash map holds only the others
       * (ntr__stack_block), so a dense id is never looked up there. */
      if (ev.stack_id && p->nstacks) {
        uint32_t k = ev.stack_id - p->stacks[0].id;
        if (k < p->nstacks && p->stacks[k].id == ev.stack_id)
          e = &p->stacks[k];
      }
      if (!e && ev.stack_id) {
        uint64_t *v = ntr__map_find(&p->st, ev.stack_id);
        if (v)
          e = &p->stacks[*v - 1];
      }
      if (e) {
        p->st_cur.id = e->id;
        p->st_cur.nframes = e->n;
        p->st_cur.frames = p->frames + e->off; /* never NULL: see ntr__stack_block */
        ev.stack = &p->st_cur;
      } else {
        ev.stack = NULL;
      }
      last_stack = ev.stack_id;
    }

    rc = ntr__seq_event(p, ev.capture_thread_index, ev.sequence, row);
    if (rc < 0)
      return rc;
    if ((rc = deliver(p, &ev, row)) < 0)
      return rc;
    q = next;
  }
  return 0;

bad_varint:
  if (rc == -1)
    goto short_row;
  return ntr__fail(p, NTR_EFORMAT, off + (uint64_t)(q - data),
                   "overlong varint in an event header");
short_row:
  return ntr__fail(p, NTR_EFORMAT, off + (uint64_t)(q - data), "event header runs past the block");
}

/* ---- NetPerf V3 events ----
 * An EventBlock is a run of events, each: EventSize (u32, the bytes after it), MetadataId (u32;
 * 0 for a metadata record, whose payload is laid out as in a V4/V5 MetadataBlock), ThreadId
 * (u32), TimeStamp (u64), ActivityId and RelatedActivityId (16 bytes each), PayloadSize (u32),
 * the payload, then the event's stack: its size in bytes (u32) and that many bytes of IPs of the
 * trace's pointer size (the rest of EventSize, if any, is padding). No sequence numbers. */
#define V3_HEADER 56

int ntr__event_block_v3(ntr_parser *p, const uint8_t *data, size_t len, uint64_t off) {
  const uint8_t *q = data, *end = data + len;
  const uint32_t ptr = p->trace.pointer_size;
  int rc;

  while (q < end) {
    const uint64_t row = off + (uint64_t)(q - data);
    uint32_t size, payload_size, rest, stack_size, n, k;
    ntr_event ev;

    if ((size_t)(end - q) < 4)
      return ntr__fail(p, NTR_EFORMAT, row, "event header runs past the block");
    size = ntr__le32(q);
    if (size < V3_HEADER - 4 || size > (size_t)(end - q) - 4)
      return ntr__fail(p, NTR_EFORMAT, row, "bad event size %u", size);
    memset(&ev, 0, sizeof(ev));
    ev.metadata_id = ntr__le32(q + 4);
    ev.thread_index = ev.thread_id = ntr__le32(q + 8);
    ev.capture_thread_index = ev.capture_thread_id = ev.thread_id;
    ev.timestamp = ntr__le64(q + 12);
    memcpy(ev.activity_id, q + 20, 16);
    memcpy(ev.related_activity_id, q + 36, 16);
    payload_size = ntr__le32(q + 52);
    rest = size + 4 - V3_HEADER; /* payload and stack */
    if (payload_size > rest || rest - payload_size < 4)
      return ntr__fail(p, NTR_EFORMAT, row, "event payload of %u bytes leaves no room for its stack in its "
                       "size %u", payload_size, size);
    ev.payload = q + V3_HEADER;
    ev.payload_size = payload_size;
    stack_size = ntr__le32(ev.payload + payload_size);
    if (stack_size > rest - payload_size - 4 || stack_size % ptr)
      return ntr__fail(p, NTR_EFORMAT, row, "bad event stack of %u bytes (pointer size %u)", stack_size, ptr);
    if (ev.metadata_id == 0) {
      rc = ntr__metadata_v5(p, ev.payload, payload_size, row + V3_HEADER);
      if (rc < 0)
        return rc;
      q += 4 + (size_t)size;
      continue;
    }
    ev.metadata = ntr__metadata_get(p, ev.metadata_id);
    n = stack_size / ptr;
    if (n) {
      const uint8_t *ips = ev.payload + payload_size + 4;
      /* the stack table's pool holds it: NetPerf has no stack blocks */
      if (grow_array((void **)&p->frames, &p->frames_cap, n, sizeof(uint64_t)) < 0)
        return ntr__fail(p, NTR_ENOMEM, row, "out of memory for an event's stack");
      for (k = 0; k < n; k++)
        p->frames[k] = ptr == 8 ? ntr__le64(ips + 8 * k) : ntr__le32(ips + 4 * k);
      p->st_cur.id = NTR_STACK_INLINE;
      p->st_cur.nframes = n;
      p->st_cur.frames = p->frames;
      ev.stack_id = NTR_STACK_INLINE;
      ev.stack = &p->st_cur;
    }
    if ((rc = deliver(p, &ev, row)) < 0)
      return rc;
    q += 4 + (size_t)size;
  }
  return 0;
}
