/* parser.c: parser lifecycle and the outer framing state machine (states in ntr-int.h). */
#include <stdio.h>

#include "ntr-int.h"

#define MIB ((size_t)1 << 20)

void ntr_limits_default(ntr_limits *lim) {
  memset(lim, 0, sizeof(*lim));
  /* The runtime writes blocks of at most ~100 KB; V6 caps them at 16 MiB by construction.
   * 64 MiB leaves room for other writers while bounding the carry buffer. */
  lim->max_block_size = (uint32_t)(64 * MIB);
  lim->max_metadata = 1u << 20;
  lim->max_metadata_bytes = 256 * MIB;
  lim->max_stack_bytes = 256 * MIB;
  lim->max_fields = 4096;
  lim->max_depth = 16;
  lim->max_threads = 1u << 20;
  lim->max_label_bytes = 64 * MIB;
  /* The runtime writes a sequence point per 10 MB of event buffers (ep-session.c) and a stack
   * only for an event of those 10 MB, so a few hundred thousand stacks at most; real traces
   * hold hundreds. Empty stacks cost 4 bytes on the wire and 16 here, so without a count a
   * small file could fill max_stack_bytes with them. */
  lim->max_stacks = 1u << 20;
  /* A thread row costs 3 bytes on the wire and ~90 here, names aside: room for the 1 Mi
   * threads max_threads allows, with short names. */
  lim->max_thread_bytes = 128 * MIB;
}

static void merge_limits(ntr_limits *dst, const ntr_limits *src) {
  ntr_limits_default(dst);
  if (!src)
    return;
#define TAKE(f)   \
  if (src->f)     \
    dst->f = src->f;
  TAKE(max_block_size)
  TAKE(max_metadata)
  TAKE(max_metadata_bytes)
  TAKE(max_stack_bytes)
  TAKE(max_fields)
  TAKE(max_depth)
  TAKE(max_threads)
  TAKE(max_label_bytes)
  TAKE(max_stacks)
  TAKE(max_thread_bytes)
#undef TAKE
}

int ntr_parser_new(ntr_parser **out, const ntr_callbacks *cb, void *ud, const ntr_limits *lim) {
  ntr_parser *p;

  if (!out)
    return NTR_EINVAL;
  *out = NULL;
  p = ntr__calloc(1, sizeof(*p));
  if (!p)
    return NTR_ENOMEM;
  p->magic = NTR__PARSER_MAGIC;
  p->state = NTR_S_MAGIC;
  p->need = 8;
  if (cb)
    p->cb = *cb;
  p->ud = ud;
  merge_limits(&p->lim, lim);
  *out = p;
  return 0;
}

/* Misuse detection, as inflateStateCheck does: NULL, foreign or corrupted state. */
static int bad_parser(const ntr_parser *p) {
  return !p || p->magic != NTR__PARSER_MAGIC || p->state < NTR_S_MAGIC || p->state >= NTR_S_MAX;
}

void ntr_parser_free(ntr_parser *p) {
  size_t i;

  if (bad_parser(p) || p->in_callback)
    return;
  ntr__metadata_clear(p);
  ntr__map_release(&p->md);
  ntr__map_release(&p->st);
  ntr__map_release(&p->seq);
  ntr__map_release(&p->thr);
  ntr__map_release(&p->ll);
  for (i = 0; i < p->nthreads; i++)
    ntr__free(p->threads[i].name);
  ntr__free(p->threads);
  ntr__free(p->stacks);
  ntr__free(p->frames);
  ntr__labels_clear(p);
  ntr__free(p->ll_ent);
  ntr__free(p->ll_blocks);
  ntr__free(p->trace_kv);
  ntr__free(p->carry);
  p->magic = 0;
  ntr__free(p);
}

const char *ntr_parser_errmsg(const ntr_parser *p) {
  if (bad_parser(p))
    return "invalid parser";
  return p->state == NTR_S_FAILED ? p->errmsg : "";
}

uint64_t ntr_parser_offset(const ntr_parser *p) { return bad_parser(p) ? 0 : p->offset; }

void ntr_parser_stats(const ntr_parser *p, ntr_stats *out) {
  if (!out)
    return;
  if (bad_parser(p)) {
    memset(out, 0, sizeof(*out));
    return;
  }
  *out = p->stats;
  out->bytes = p->offset;
}

const ntr_trace *ntr_parser_trace(const ntr_parser *p) {
  return (!bad_parser(p) && p->have_trace) ? &p->trace : NULL;
}

static const char *waiting_for(int state) {
  switch (state) {
  case NTR_S_MAGIC: return "the Nettrace magic";
  case NTR_S_HEADER_WORD: return "the stream header";
  case NTR_S_FAST_NAME: return "the FastSerialization preamble";
  case NTR_S_NETPERF_NAME: return "the FastSerialization preamble";
  case NTR_S_OBJ_TAG: return "the next object or the end-of-stream tag";
  case NTR_S_OBJ_TYPE: return "an object's type header";
  case NTR_S_OBJ_NAME: return "an object's type name";
  case NTR_S_TRACE_BODY: return "the Trace object";
  case NTR_S_BLOCK_SIZE: return "a block size";
  case NTR_S_BLOCK_BODY: return "the rest of a block";
  case NTR_S_V6_VERSION: return "the V6 version numbers";
  case NTR_S_V6_BLOCK_HDR: return "the next block or the end-of-stream block";
  case NTR_S_V6_BLOCK_BODY: return "the rest of a block";
  default: return "nothing";
  }
}

static int object_kind(const uint8_t *name, size_t len) {
  static const struct { const char *name; int kind; } kinds[] = {
      {"Trace", NTR_OBJ_TRACE},          {"EventBlock", NTR_OBJ_EVENT},
      {"MetadataBlock", NTR_OBJ_METADATA}, {"StackBlock", NTR_OBJ_STACK},
      {"SPBlock", NTR_OBJ_SP},
      {"Microsoft.DotNet.Runtime.EventPipeFile", NTR_OBJ_NETPERF_OLD},
  };
  size_t i;
  for (i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
    if (strlen(kinds[i].name) == len && memcmp(kinds[i].name, name, len) == 0)
      return kinds[i].kind;
  return 0;
}

static void set_state(ntr_parser *p, int state, size_t need) {
  p->state = state;
  p->need = need;
}

/* The end-of-stream marker: on_end, then DONE. */
static int reach_end(ntr_parser *p, uint64_t off) {
  int rc;
  set_state(p, NTR_S_DONE, 1);
  p->in_callback = 1;
  rc = p->cb.on_end ? p->cb.on_end(p->ud) : 0;
  p->in_callback = 0;
  if (rc)
    return ntr__stopped(p, off, "on_end");
  return 0;
}

/* One step: `d` holds exactly p->need bytes starting at absolute offset p->offset. */
/* The object's body to on_block, when there is one. */
static int give_block(ntr_parser *p, int kind, const uint8_t *body, size_t n, uint64_t off) {
  if (!p->cb.on_block)
    return 0;
  p->in_callback = 1;
  int rc = p->cb.on_block(p->ud, kind, body, n);
  p->in_callback = 0;
  return rc ? ntr__stopped(p, off, "on_block") : 0;
}

static int step(ntr_parser *p, const uint8_t *d) {
  uint64_t off = p->offset;
  uint32_t v;

  switch (p->state) {
  case NTR_S_MAGIC:
    if (memcmp(d, "Nettrace", 8) == 0) {
      set_state(p, NTR_S_HEADER_WORD, 4);
      return 0;
    }
    if (memcmp(d, "\x14\0\0\0!Fas", 8) == 0) { /* NetPerf: the FastSerialization header alone */
      p->netperf = 1;
      set_state(p, NTR_S_NETPERF_NAME, 16);
      return 0;
    }
    return ntr__fail(p, NTR_EFORMAT, off, "bad magic: not a nettrace stream");

  case NTR_S_NETPERF_NAME:
    if (memcmp(d, "tSerialization.1", 16) != 0)
      return ntr__fail(p, NTR_EFORMAT, off, "bad FastSerialization preamble");
    set_state(p, NTR_S_OBJ_TAG, 1);
    return 0;

  case NTR_S_HEADER_WORD:
    v = ntr__le32(d);
    if (v == 20) {
      set_state(p, NTR_S_FAST_NAME, 20);
      return 0;
    }
    if (v == 0) {
      set_state(p, NTR_S_V6_VERSION, 8);
      return 0;
    }
    return ntr__fail(p, NTR_EFORMAT, off, "bad stream header word %u (want 20 or 0)", v);

  case NTR_S_FAST_NAME:
    if (memcmp(d, "!FastSerialization.1", 20) != 0)
      return ntr__fail(p, NTR_EFORMAT, off, "bad FastSerialization preamble");
    set_state(p, NTR_S_OBJ_TAG, 1);
    return 0;

  case NTR_S_OBJ_TAG:
    if (d[0] == 0x01) {
      if (!p->have_trace)
        return ntr__fail(p, NTR_EFORMAT, off, "end of stream before the Trace object");
      return reach_end(p, off);
    }
    /* NetPerf's objects begin with BeginObject (4), NetTrace's with BeginPrivateObject (5) */
    if (d[0] != (p->netperf ? 0x04 : 0x05))
      return ntr__fail(p, NTR_EFORMAT, off, "bad object tag 0x%02x (want 0x%02x or 0x01)", d[0],
                       p->netperf ? 0x04 : 0x05);
    set_state(p, NTR_S_OBJ_TYPE, 14);
    return 0;

  case NTR_S_OBJ_TYPE:
    if (d[0] != (p->netperf ? 0x04 : 0x05) || d[1] != 0x01)
      return ntr__fail(p, NTR_EFORMAT, off, "bad type header tags 0x%02x 0x%02x", d[0], d[1]);
    p->obj_version = ntr__le32(d + 2);
    v = ntr__le32(d + 10);
    /* Type names are short identifiers; a long one is garbage, not a name. */
    if (v == 0 || v > 64)
      return ntr__fail(p, NTR_EFORMAT, off + 10, "bad type name length %u", v);
    set_state(p, NTR_S_OBJ_NAME, (size_t)v + 1);
    return 0;

  case NTR_S_OBJ_NAME: {
    size_t n = p->need - 1;
    int kind = object_kind(d, n);
    if (!kind)
      return ntr__fail(p, NTR_EFORMAT, off, "unknown object type '%.*s'", (int)n, (const char *)d);
    if (d[n] != 0x06)
      return ntr__fail(p, NTR_EFORMAT, off + n, "missing EndObject after type name");
    if (kind == NTR_OBJ_NETPERF_OLD)
      return ntr__fail(p, NTR_EUNSUPPORTED, off,
                       "NetPerf V1/V2 (.NET Core 2.0) traces are not supported (this reader knows NetPerf V3 "
                       "and NetTrace 4 to 6)");
    if (p->netperf && kind == NTR_OBJ_TRACE && p->obj_version != 3)
      return ntr__fail(p, NTR_EUNSUPPORTED, off, "NetPerf Trace object version %u is not supported (this "
                       "reader knows 3)", p->obj_version);
    if (p->netperf && kind != NTR_OBJ_TRACE && kind != NTR_OBJ_EVENT)
      return ntr__fail(p, NTR_EFORMAT, off, "a '%.*s' object in a NetPerf stream (which has only events)",
                       (int)n, (const char *)d);
    if (kind == NTR_OBJ_TRACE && p->have_trace)
      return ntr__fail(p, NTR_EFORMAT, off, "second Trace object");
    if (kind != NTR_OBJ_TRACE && !p->have_trace)
      return ntr__fail(p, NTR_EFORMAT, off, "block before the Trace object");
    p->obj_kind = kind;
    if (kind == NTR_OBJ_TRACE)
      set_state(p, NTR_S_TRACE_BODY, 49);
    else
      set_state(p, NTR_S_BLOCK_SIZE, 4);
    return 0;
  }

  case NTR_S_TRACE_BODY: {
    int rc;
    if (d[48] != 0x06)
      return ntr__fail(p, NTR_EFORMAT, off + 48, "missing EndObject after the Trace object");
    rc = ntr__trace_v4(p, d, off);
    if (rc < 0)
      return rc;
    if (!p->netperf && (rc = give_block(p, NTR_BLOCK_TRACE, d, 48, off)) < 0)
      return rc;
    set_state(p, NTR_S_OBJ_TAG, 1);
    return 0;
  }

  case NTR_S_BLOCK_SIZE:
    v = ntr__le32(d);
    if (v > p->lim.max_block_size)
      return ntr__fail(p, v > 0x7fffffffu ? NTR_EFORMAT : NTR_ELIMIT, off,
                       "block size %u exceeds the limit of %u bytes", v, p->lim.max_block_size);
    /* Padding aligns the block content on the absolute stream offset. */
    p->pad = (uint32_t)((4 - ((off + 4) & 3)) & 3);
    p->block_size = v;
    set_state(p, NTR_S_BLOCK_BODY, (size_t)p->pad + v + 1);
    return 0;

  case NTR_S_BLOCK_BODY: {
    const uint8_t *b = d + p->pad;
    uint64_t boff = off + p->pad;
    size_t n = p->block_size;
    int rc = 0;
    if (b[n] != 0x06)
      return ntr__fail(p, NTR_EFORMAT, boff + n,
                       "missing EndObject after a block (block size wrong?)");
    p->stats.blocks++;
    switch (p->obj_kind) {
    case NTR_OBJ_EVENT: rc = p->netperf ? ntr__event_block_v3(p, b, n, boff) : ntr__event_block(p, b, n, boff, 0); break;
    case NTR_OBJ_METADATA: rc = ntr__event_block(p, b, n, boff, 1); break;
    case NTR_OBJ_STACK: rc = ntr__stack_block(p, b, n, boff); break;
    case NTR_OBJ_SP: rc = ntr__sp_block_v4(p, b, n, boff); break;
    }
    if (rc < 0)
      return rc;
    /* the object kinds are numbered as the blocks' kinds */
    if (!p->netperf && (rc = give_block(p, (int)p->obj_kind, b, n, boff)) < 0)
      return rc;
    set_state(p, NTR_S_OBJ_TAG, 1);
    return 0;
  }

  case NTR_S_V6_VERSION: {
    uint32_t major = ntr__le32(d), minor = ntr__le32(d + 4);
    if (major != 6)
      return ntr__fail(p, NTR_EUNSUPPORTED, off, "nettrace major version %u is not supported "
                       "(this reader knows 4, 5 and 6)", major);
    p->trace.minor_version = minor;
    set_state(p, NTR_S_V6_BLOCK_HDR, 4);
    return 0;
  }

  case NTR_S_V6_BLOCK_HDR:
    v = ntr__le32(d);
    p->v6_kind = v >> 24;
    p->block_size = v & 0xffffff;
    if (p->v6_kind == 0)
      return reach_end(p, off);
    if (p->block_size > p->lim.max_block_size)
      return ntr__fail(p, NTR_ELIMIT, off, "block size %u exceeds the limit of %u bytes",
                       p->block_size, p->lim.max_block_size);
    if (p->block_size == 0) {
      /* Nothing to wait for: decode the empty block now (need must stay nonzero). */
      int rc;
      p->stats.blocks++;
      rc = ntr__v6_block(p, p->v6_kind, d + 4, 0, off + 4);
      if (rc < 0)
        return rc;
      set_state(p, NTR_S_V6_BLOCK_HDR, 4);
      return 0;
    }
    set_state(p, NTR_S_V6_BLOCK_BODY, p->block_size);
    return 0;

  case NTR_S_V6_BLOCK_BODY: {
    int rc;
    p->stats.blocks++;
    rc = ntr__v6_block(p, p->v6_kind, d, p->block_size, off);
    if (rc < 0)
      return rc;
    if (p->state == NTR_S_V6_BLOCK_BODY)
      set_state(p, NTR_S_V6_BLOCK_HDR, 4);
    return 0;
  }
  }
  return ntr__fail(p, NTR_EINVAL, off, "parser in impossible state %d", p->state);
}

static int carry_reserve(ntr_parser *p, size_t n) {
  size_t cap;
  uint8_t *nb;
  if (n <= p->carry_cap)
    return 0;
  cap = p->carry_cap ? p->carry_cap : 256;
  while (cap < n)
    cap *= 2;
  nb = ntr__realloc(p->carry, cap);
  if (!nb)
    return NTR_ENOMEM;
  p->carry = nb;
  p->carry_cap = cap;
  return 0;
}

int ntr_parser_feed(ntr_parser *p, const uint8_t *buf, size_t len) {
  if (bad_parser(p) || p->in_callback || p->finished || (!buf && len))
    return NTR_EINVAL;
  if (p->state == NTR_S_FAILED)
    return p->err;

  while (len > 0) {
    const uint8_t *d;
    size_t need;
    int rc;

    if (p->state == NTR_S_DONE) {
      p->stats.trailing_bytes += len;
      return NTR_EOF;
    }
    need = p->need;
    if (p->carry_len == 0 && len >= need) {
      /* Zero-copy: the whole step is in the caller's buffer. */
      d = buf;
      buf += need;
      len -= need;
    } else {
      size_t take = need - p->carry_len;
      if (take > len)
        take = len;
      if (carry_reserve(p, need) < 0)
        return ntr__fail(p, NTR_ENOMEM, p->offset, "out of memory for a %zu-byte carry buffer",
                         need);
      memcpy(p->carry + p->carry_len, buf, take);
      p->carry_len += take;
      buf += take;
      len -= take;
      if (p->carry_len > p->stats.carry_peak)
        p->stats.carry_peak = p->carry_len;
      if (p->carry_len < need)
        break;
      d = p->carry;
    }
    rc = step(p, d);
    p->carry_len = 0;
    if (rc < 0)
      return rc;
    p->offset += need;
  }
  if (p->state == NTR_S_DONE)
    return NTR_EOF;
  return 0;
}

int ntr_parser_finish(ntr_parser *p) {
  if (bad_parser(p) || p->in_callback)
    return NTR_EINVAL;
  p->finished = 1;
  if (p->state == NTR_S_FAILED)
    return p->err;
  if (p->state == NTR_S_DONE)
    return 0;
  {
    /* Report the cut at the last byte we have, carried bytes included. */
    uint64_t at = p->offset + p->carry_len;
    const char *what = waiting_for(p->state);
    if (p->carry_len)
      ntr__fail(p, NTR_ETRUNCATED, at, "truncated at byte %llu inside an object (waiting for %s)",
                (unsigned long long)at, what);
    else
      ntr__fail(p, NTR_ETRUNCATED, at, "truncated at byte %llu (waiting for %s)",
                (unsigned long long)at, what);
  }
  return NTR_ETRUNCATED;
}
