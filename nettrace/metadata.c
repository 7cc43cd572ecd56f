/* metadata.c: metadata records (V4/V5 event-blob payloads and V6 metadata rows) into a tree
 * of ntr_field, and the metadata table.
 *
 * Each record becomes ONE allocation: a first pass over the bytes validates everything and
 * counts fields and string bytes; the second pass, over the same bytes, fills the allocation.
 * So a record is either wholly valid and stored or rejected, nothing is sized from an
 * unchecked length, and freeing a record is one call. */
#include <stdlib.h>

#include "ntr-int.h"

struct ntr__md {
  ntr_metadata md; /* first, so the table can hand out the struct's address */
  size_t bytes;
};

struct bld {
  ntr_parser *p;
  const uint8_t *base; /* data[0] ... */
  uint64_t base_off;   /* ... is at this stream offset */
  int fill;            /* 0: counting pass, 1: filling pass */
  size_t nfields, nkv, nstr;
  ntr_field *fields;
  ntr_keyvalue *kv;
  char *str;
};

static uint64_t at(const struct bld *b, const ntr__cur *c) {
  return b->base_off + (uint64_t)(c->p - b->base);
}

static int short_rec(struct bld *b, const ntr__cur *c, const char *what) {
  return ntr__fail(b->p, NTR_EFORMAT, at(b, c), "metadata record too short for %s", what);
}

/* Stores a string of `n` bytes already in UTF-8 (utf16 == 0) or `n` UTF-16 code units. */
static const char *put_str(struct bld *b, const uint8_t *s, size_t n, int utf16) {
  size_t len = utf16 ? ntr__utf16_to_utf8(s, n, NULL, 0) : n;
  char *out;
  if (!b->fill) {
    b->nstr += len + 1;
    return "";
  }
  out = b->str + b->nstr;
  if (utf16)
    ntr__utf16_to_utf8(s, n, out, len);
  else
    memcpy(out, s, n);
  out[len] = '\0';
  b->nstr += len + 1;
  return out;
}

/* NUL-terminated UTF-16LE (V4/V5). */
static int wstr(struct bld *b, ntr__cur *c, const char **out, const char *what) {
  const uint8_t *s = c->p;
  size_t n = 0, max = ntr__left(c) / 2;
  while (n < max && (s[2 * n] | s[2 * n + 1]))
    n++;
  if (n == max)
    return ntr__fail(b->p, NTR_EFORMAT, at(b, c), "unterminated UTF-16 %s", what);
  *out = put_str(b, s, n, 1);
  c->p += 2 * (n + 1);
  return 0;
}

/* varuint32 length + UTF-8 (V6). */
static int str6(struct bld *b, ntr__cur *c, const char **out, const char *what) {
  uint32_t n;
  uint64_t o = at(b, c);
  int rc = ntr__varu32(c, &n);
  if (rc == -2)
    return ntr__fail(b->p, NTR_EFORMAT, o, "overlong varint in the length of %s", what);
  if (rc || n > ntr__left(c))
    return ntr__fail(b->p, NTR_EFORMAT, o, "%s runs past the end of its record", what);
  *out = put_str(b, c->p, n, 0);
  c->p += n;
  return 0;
}

/* Reserves `count` field slots; in the counting pass only checks the limit. */
static int reserve(struct bld *b, ntr__cur *c, uint32_t count, ntr_field **out) {
  if (!b->fill) {
    if (count > b->p->lim.max_fields || b->nfields + count > b->p->lim.max_fields)
      return ntr__fail(b->p, NTR_ELIMIT, at(b, c),
                       "metadata record has more than %u fields (max_fields)",
                       b->p->lim.max_fields);
    b->nfields += count;
    *out = NULL;
    return 0;
  }
  *out = b->fields + b->nfields;
  memset(*out, 0, count * sizeof(ntr_field));
  b->nfields += count;
  return 0;
}

static int too_deep(struct bld *b, ntr__cur *c, uint32_t depth) {
  if (depth < b->p->lim.max_depth)
    return 0;
  return ntr__fail(b->p, NTR_ELIMIT, at(b, c), "field types nested deeper than %u (max_depth)",
                   b->p->lim.max_depth);
}

/* ---- V4/V5 field lists ---- */

/* V1 layout: u32 count, count x {u32 type, [nested list if Object], wstr name}. */
static int fields_v1(struct bld *b, ntr__cur *c, uint32_t depth, const ntr_field **out,
                     uint32_t *nout) {
  uint32_t count, i;
  ntr_field *arr, dummy;
  int rc;

  if (ntr__u32(c, &count))
    return short_rec(b, c, "a field count");
  /* A field takes at least 6 bytes (type + empty name). */
  if ((rc = reserve(b, c, count, &arr)))
    return rc;
  if (count > ntr__left(c) / 6)
    return ntr__fail(b->p, NTR_EFORMAT, at(b, c) - 4,
                     "field count %u does not fit in the metadata record", count);
  for (i = 0; i < count; i++) {
    ntr_field *f = arr ? &arr[i] : &dummy;
    if (ntr__u32(c, &f->type))
      return short_rec(b, c, "a field type");
    if (f->type == NTR_TYPE_OBJECT) {
      if ((rc = too_deep(b, c, depth)) || (rc = fields_v1(b, c, depth + 1, &f->fields, &f->nfields)))
        return rc;
    }
    if ((rc = wstr(b, c, &f->name, "field name")))
      return rc;
  }
  *out = arr;
  *nout = count;
  return 0;
}

static int fields_v2(struct bld *b, ntr__cur *c, uint32_t depth, const ntr_field **out,
                     uint32_t *nout);

/* V2Params type: u32 code, [element type if Array], [nested V2 list if Object]. */
static int type_v2(struct bld *b, ntr__cur *c, uint32_t depth, ntr_field *f) {
  int rc;
  if (ntr__u32(c, &f->type))
    return short_rec(b, c, "a field type");
  if (f->type == NTR_TYPE_OBJECT) {
    if ((rc = too_deep(b, c, depth)) || (rc = fields_v2(b, c, depth + 1, &f->fields, &f->nfields)))
      return rc;
  } else if (f->type == NTR_TYPE_ARRAY) {
    ntr_field *el, dummy;
    if ((rc = too_deep(b, c, depth)) || (rc = reserve(b, c, 1, &el)))
      return rc;
    if (!el) {
      memset(&dummy, 0, sizeof(dummy));
      el = &dummy;
    }
    el->name = "";
    if ((rc = type_v2(b, c, depth + 1, el)))
      return rc;
    f->element = b->fill ? el : NULL;
  }
  return 0;
}

/* V2 layout: u32 count, count x {u32 size (itself included), wstr name, type}. */
static int fields_v2(struct bld *b, ntr__cur *c, uint32_t depth, const ntr_field **out,
                     uint32_t *nout) {
  uint32_t count, i;
  ntr_field *arr, dummy;
  int rc;

  if (ntr__u32(c, &count))
    return short_rec(b, c, "a field count");
  if ((rc = reserve(b, c, count, &arr)))
    return rc;
  if (count > ntr__left(c) / 10)
    return ntr__fail(b->p, NTR_EFORMAT, at(b, c) - 4,
                     "field count %u does not fit in the metadata record", count);
  for (i = 0; i < count; i++) {
    ntr_field *f = arr ? &arr[i] : &dummy;
    uint32_t size;
    ntr__cur fc;
    if (ntr__u32(c, &size))
      return short_rec(b, c, "a field size");
    if (size < 4 || size - 4 > ntr__left(c))
      return ntr__fail(b->p, NTR_EFORMAT, at(b, c) - 4, "bad field size %u", size);
    fc.p = c->p;
    fc.end = c->p + (size - 4);
    c->p = fc.end;
    if ((rc = wstr(b, &fc, &f->name, "field name")) || (rc = type_v2(b, &fc, depth, f)))
      return rc;
  }
  *out = arr;
  *nout = count;
  return 0;
}

/* ---- V6 field lists ---- */

static int fields_v6(struct bld *b, ntr__cur *c, uint32_t depth, const ntr_field **out,
                     uint32_t *nout);

static int type_v6(struct bld *b, ntr__cur *c, uint32_t depth, ntr_field *f) {
  uint8_t code;
  int rc;
  if (ntr__u8(c, &code))
    return short_rec(b, c, "a field type");
  f->type = code;
  if (code == NTR_TYPE_ARRAY || code == NTR_TYPE_FIXED_ARRAY || code == NTR_TYPE_RELLOC ||
      code == NTR_TYPE_DATALOC) {
    ntr_field *el, dummy;
    if ((rc = too_deep(b, c, depth)) || (rc = reserve(b, c, 1, &el)))
      return rc;
    if (!el) {
      memset(&dummy, 0, sizeof(dummy));
      el = &dummy;
    }
    el->name = "";
    if ((rc = type_v6(b, c, depth + 1, el)))
      return rc;
    f->element = b->fill ? el : NULL;
    if (code == NTR_TYPE_FIXED_ARRAY) {
      uint16_t n;
      if (ntr__u16(c, &n))
        return short_rec(b, c, "an array length");
      f->fixed_count = n;
    }
  } else if (code == NTR_TYPE_OBJECT) {
    if ((rc = too_deep(b, c, depth)) || (rc = fields_v6(b, c, depth + 1, &f->fields, &f->nfields)))
      return rc;
  }
  return 0;
}

/* u16 count, count x {u16 size (itself excluded), str name, type, [ignored tail]}. */
static int fields_v6(struct bld *b, ntr__cur *c, uint32_t depth, const ntr_field **out,
                     uint32_t *nout) {
  uint16_t count, i;
  ntr_field *arr, dummy;
  int rc;

  if (ntr__u16(c, &count))
    return short_rec(b, c, "a field count");
  if ((rc = reserve(b, c, count, &arr)))
    return rc;
  if (count > ntr__left(c) / 4)
    return ntr__fail(b->p, NTR_EFORMAT, at(b, c) - 2,
                     "field count %u does not fit in the metadata record", count);
  for (i = 0; i < count; i++) {
    ntr_field *f = arr ? &arr[i] : &dummy;
    uint16_t size;
    ntr__cur fc;
    if (ntr__u16(c, &size))
      return short_rec(b, c, "a field size");
    if (size > ntr__left(c))
      return ntr__fail(b->p, NTR_EFORMAT, at(b, c) - 2, "bad field size %u", size);
    fc.p = c->p;
    fc.end = c->p + size;
    c->p = fc.end;
    if ((rc = str6(b, &fc, &f->name, "a field name")) || (rc = type_v6(b, &fc, depth, f)))
      return rc;
  }
  *out = arr;
  *nout = count;
  return 0;
}

/* ---- records ---- */

/* V4/V5: u32 id, wstr provider, u32 event id, wstr name, u64 keywords, u32 version,
 * u32 level, [V1 field list], [tags: u32 size, u8 kind, payload]. */
static int record_v5(struct bld *b, ntr__cur *c, ntr_metadata *m) {
  int rc;
  if (ntr__u32(c, &m->id))
    return short_rec(b, c, "its id");
  if ((rc = wstr(b, c, &m->provider, "provider name")))
    return rc;
  if (ntr__u32(c, &m->event_id))
    return short_rec(b, c, "an event id");
  if ((rc = wstr(b, c, &m->event_name, "event name")))
    return rc;
  if (ntr__u64(c, &m->keywords) || ntr__u32(c, &m->version) || ntr__u32(c, &m->level))
    return short_rec(b, c, "keywords, version and level");
  if (ntr__left(c) == 0)
    return 0; /* no field description available */
  if ((rc = fields_v1(b, c, 0, &m->fields, &m->nfields)))
    return rc;
  while (ntr__left(c) > 0) {
    uint32_t size;
    uint8_t kind;
    ntr__cur tc;
    if (ntr__u32(c, &size) || ntr__u8(c, &kind))
      return short_rec(b, c, "a tag header");
    if (size > ntr__left(c))
      return ntr__fail(b->p, NTR_EFORMAT, at(b, c) - 5, "metadata tag of %u bytes runs past its record",
                       size);
    tc.p = c->p;
    tc.end = c->p + size;
    c->p = tc.end;
    if (kind == 1) { /* OpCode */
      uint8_t op;
      if (ntr__u8(&tc, &op))
        return short_rec(b, &tc, "an opcode");
      m->opcode = op;
      m->has_opcode = 1;
    } else if (kind == 2) { /* V2Params: replaces the V1 list */
      if ((rc = fields_v2(b, &tc, 0, &m->fields, &m->nfields)))
        return rc;
      m->fields_from_v2params = 1;
    }
    /* other tags: reserved for later formats, skipped */
  }
  return 0;
}

/* V6 row (after its u16 size): varuint32 id, str provider, varuint32 event id, str name,
 * FieldDescriptions, OptionalMetadata, [ignored tail]. */
static int record_v6(struct bld *b, ntr__cur *c, ntr_metadata *m) {
  int rc;
  uint16_t osize;
  ntr__cur oc;
  uint64_t o = at(b, c);

  if ((rc = ntr__varu32(c, &m->id)))
    return rc == -2 ? ntr__fail(b->p, NTR_EFORMAT, o, "overlong varint metadata id")
                    : short_rec(b, c, "its id");
  if ((rc = str6(b, c, &m->provider, "the provider name")))
    return rc;
  o = at(b, c);
  if ((rc = ntr__varu32(c, &m->event_id)))
    return rc == -2 ? ntr__fail(b->p, NTR_EFORMAT, o, "overlong varint event id")
                    : short_rec(b, c, "an event id");
  if ((rc = str6(b, c, &m->event_name, "the event name")))
    return rc;
  if (ntr__left(c) == 0)
    return 0;
  if ((rc = fields_v6(b, c, 0, &m->fields, &m->nfields)))
    return rc;
  if (ntr__left(c) == 0)
    return 0;
  if (ntr__u16(c, &osize))
    return short_rec(b, c, "its optional metadata size");
  if (osize > ntr__left(c))
    return ntr__fail(b->p, NTR_EFORMAT, at(b, c) - 2, "optional metadata of %u bytes runs past its record",
                     osize);
  oc.p = c->p;
  oc.end = c->p + osize;
  c->p = oc.end;
  while (ntr__left(&oc) > 0) {
    uint8_t kind = 0, u8;
    ntr_keyvalue kvd, *kv;
    ntr_keyvalue *kvs;
    ntr__u8(&oc, &kind);
    switch (kind) {
    case 1:
      if (ntr__u8(&oc, &u8))
        return short_rec(b, &oc, "an opcode");
      m->opcode = u8;
      m->has_opcode = 1;
      break;
    case 3:
      if (ntr__u64(&oc, &m->keywords))
        return short_rec(b, &oc, "keywords");
      break;
    case 4:
      if ((rc = str6(b, &oc, &m->message_template, "a message template")))
        return rc;
      break;
    case 5:
      if ((rc = str6(b, &oc, &m->description, "a description")))
        return rc;
      break;
    case 6:
      /* Attributes are counted in the first pass and laid out in the second. */
      kvs = (ntr_keyvalue *)m->attributes;
      kv = b->fill ? &kvs[m->nattributes] : &kvd;
      if ((rc = str6(b, &oc, &kv->key, "an attribute key")) ||
          (rc = str6(b, &oc, &kv->value, "an attribute value")))
        return rc;
      m->nattributes++;
      if (!b->fill)
        b->nkv++;
      break;
    case 7:
      if (ntr__left(&oc) < 16)
        return short_rec(b, &oc, "a provider GUID");
      memcpy(m->provider_guid, oc.p, 16);
      oc.p += 16;
      m->has_provider_guid = 1;
      break;
    case 8:
      if (ntr__u8(&oc, &u8))
        return short_rec(b, &oc, "a level");
      m->level = u8;
      break;
    case 9:
      if (ntr__u8(&oc, &u8))
        return short_rec(b, &oc, "a version");
      m->version = u8;
      break;
    default:
      /* Unknown kinds carry no length: the rest cannot be read, and may be ignored. */
      oc.p = oc.end;
      break;
    }
  }
  return 0;
}

void ntr__metadata_clear(ntr_parser *p) {
  size_t i;
  for (i = 0; i < p->md.cap; i++)
    if (p->md.vals[i])
      ntr__free((void *)(uintptr_t)p->md.vals[i]);
  ntr__map_clear(&p->md);
  p->md_bytes = 0;
  p->md_last = NULL;
}

/* Runs both passes of `rec` over data[0..len) and stores the record. */
static int build(ntr_parser *p, const uint8_t *data, size_t len, uint64_t off,
                 int (*rec)(struct bld *, ntr__cur *, ntr_metadata *)) {
  struct bld b;
  ntr__cur c = {data, data + len};
  ntr_metadata tmp;
  struct ntr__md *r;
  uint64_t *old;
  size_t total, fields_at, kv_at, str_at;
  int rc;

  memset(&b, 0, sizeof(b));
  memset(&tmp, 0, sizeof(tmp));
  b.p = p;
  b.base = data;
  b.base_off = off;
  if ((rc = rec(&b, &c, &tmp)))
    return rc < 0 ? rc : ntr__fail(p, NTR_EFORMAT, off, "bad metadata record");

  fields_at = sizeof(struct ntr__md);
  fields_at = (fields_at + 7) & ~(size_t)7;
  kv_at = fields_at + b.nfields * sizeof(ntr_field);
  str_at = kv_at + b.nkv * sizeof(ntr_keyvalue);
  total = str_at + b.nstr;

  old = ntr__map_find(&p->md, tmp.id);
  if (!old && p->md.len >= p->lim.max_metadata)
    return ntr__fail(p, NTR_ELIMIT, off, "more than %u metadata records (max_metadata)",
                     p->lim.max_metadata);
  /* The index is charged too: a small record costs a slot as well as its tree. */
  if ((uint64_t)p->md_bytes + total + ntr__map_bytes(p->md.len + !old) >
      p->lim.max_metadata_bytes)
    return ntr__fail(p, NTR_ELIMIT, off, "metadata exceeds %zu bytes (max_metadata_bytes)",
                     p->lim.max_metadata_bytes);
  r = ntr__malloc(total);
  if (!r)
    return ntr__fail(p, NTR_ENOMEM, off, "out of memory for a metadata record");

  memset(r, 0, sizeof(*r));
  b.fill = 1;
  b.fields = (ntr_field *)(void *)((char *)r + fields_at);
  b.kv = (ntr_keyvalue *)(void *)((char *)r + kv_at);
  b.str = (char *)r + str_at;
  b.nfields = b.nkv = b.nstr = 0;
  r->md.attributes = b.kv;
  c.p = data;
  rec(&b, &c, &r->md); /* cannot fail: same bytes as the first pass */
  if (!r->md.nattributes)
    r->md.attributes = NULL;
  r->bytes = total;

  /* Redefining an id replaces the old record. */
  old = ntr__map_find(&p->md, tmp.id);
  if (old) {
    struct ntr__md *o = (struct ntr__md *)(uintptr_t)*old;
    p->md_bytes -= o->bytes;
    ntr__free(o);
    *old = (uint64_t)(uintptr_t)r;
  } else if (ntr__map_put(&p->md, tmp.id, (uint64_t)(uintptr_t)r) < 0) {
    ntr__free(r);
    return ntr__fail(p, NTR_ENOMEM, off, "out of memory for the metadata table");
  }
  p->md_bytes += total;
  p->md_last = NULL;
  p->stats.metadata++;
  if (p->cb.on_metadata) {
    p->in_callback = 1;
    rc = p->cb.on_metadata(p->ud, &r->md);
    p->in_callback = 0;
    if (rc)
      return ntr__stopped(p, off, "on_metadata");
  }
  return 0;
}

int ntr__metadata_v5(ntr_parser *p, const uint8_t *data, size_t len, uint64_t off) {
  return build(p, data, len, off, record_v5);
}

/* A V6 Metadata block: u16 header size + header, then rows of {u16 size, row}. */
int ntr__metadata_v6(ntr_parser *p, const uint8_t *data, size_t len, uint64_t off) {
  ntr__cur c = {data, data + len};
  uint16_t hsize;
  int rc;

  if (ntr__u16(&c, &hsize) || ntr__skip(&c, hsize))
    return ntr__fail(p, NTR_EFORMAT, off, "metadata block header runs past the block");
  while (ntr__left(&c) > 0) {
    uint16_t size;
    uint64_t roff = off + (uint64_t)(c.p - data);
    if (ntr__u16(&c, &size) || size > ntr__left(&c))
      return ntr__fail(p, NTR_EFORMAT, roff, "metadata row runs past the block");
    if ((rc = build(p, c.p, size, roff + 2, record_v6)) < 0)
      return rc;
    c.p += size;
  }
  return 0;
}
