/* gcdump-file.c: .gcdump files, read and written: the heap snapshots of dotnet-gcdump and PerfView.
 *
 * The container is FastSerialization (the one nettrace uses), with more of it: "!FastSerialization.1",
 * then a GCHeapDump object holding a Graphs.MemoryGraph (types, per node a record in a blob, per
 * node its address), a few fields of the process, a forward-reference table, a trailer and a
 * suffix that points at it. The layout, as dotnet-gcdump 10 writes it and its report reads it, is
 * in docs/internals/gcdump-format.md. A node's record is compressed integers (signed, seven bits a
 * byte, the most significant group first): its type index times two plus a bit saying its size
 * differs from its type's (then the size), its child count, and each child as a difference from
 * its own index.
 *
 * Read: the whole file into memory, every offset, count and index checked against it before use;
 * the blob and the labels freed once the graph is made. Written: in one pass, the blob's labels
 * counted before the blob (nothing of it held). */
#include <stdlib.h>
#include <string.h>

#include "analyze-int.h"
#include "dnt-analyze.h"

#define SIGNATURE "!FastSerialization.1"
#define DUMP_TYPE "GCHeapDump"
#define GRAPH_TYPE "Graphs.MemoryGraph"
#define DUMP_VERSION 10     /* what dotnet-gcdump 10 writes */
#define DUMP_MIN_READER 8   /* ... and says a reader needs */
#define DUMP_OLDEST 9       /* the oldest layout read here (8 and before differ) */
#define TICKS_AT_1970 621355968000000000LL /* .NET DateTime ticks (100 ns since 0001-01-01) at the epoch */

enum { TAG_NULL = 1, TAG_OBJECT_REF = 2, TAG_BEGIN = 4, TAG_END = 6, TAG_BYTE = 8, TAG_SKIP_REGION = 12, TAG_STRING = 13 };

int dnt_heap_is_gcdump(const void *head, size_t n) {
  /* the signature, then a GCHeapDump object: 04 04 01, version and minReader (any), its name; a
   * file cut short is one when what it has is (its reader then says where it ends) */
  static const uint8_t start[] = {20,  0,   0,   0,   '!', 'F', 'a', 's', 't', 'S', 'e', 'r', 'i', 'a', 'l', 'i', 'z',
                                  'a', 't', 'i', 'o', 'n', '.', '1', TAG_BEGIN, TAG_BEGIN, TAG_NULL, 0,   0,   0,   0,
                                  0,   0,   0,   0,   10,  0,   0,   0,   'G', 'C', 'H', 'e', 'a', 'p', 'D', 'u', 'm', 'p'};
  const uint8_t *p = head;
  size_t k = n < sizeof start ? n : sizeof start;
  if (k < 4) return 0;
  for (size_t i = 0; i < k; i++)
    if (p[i] != start[i] && !(i >= 27 && i < 35)) return 0; /* 27..34: the version numbers */
  return 1;
}

/* ---- reading ---- */

struct in {
  const uint8_t *p;
  size_t n, at;
  char *err;
  size_t cap;
  int bad;
};

static int fail(struct in *r, const char *what) {
  if (!r->bad) snprintf(r->err, r->cap, "not a .gcdump, or a damaged one: %s (at byte %zu)", what, r->at);
  r->bad = 1;
  return -1;
}

static int need(struct in *r, size_t k, const char *what) { return r->bad ? -1 : k > r->n - r->at ? fail(r, what) : 0; }

static uint64_t get_le(struct in *r, size_t k) {
  uint64_t v = 0;
  for (size_t i = k; i-- > 0;) v = v << 8 | r->p[r->at + i];
  r->at += k;
  return v;
}

static int u8(struct in *r, uint8_t *v, const char *what) {
  if (need(r, 1, what)) return -1;
  *v = r->p[r->at++];
  return 0;
}
static int i32(struct in *r, int32_t *v, const char *what) {
  if (need(r, 4, what)) return -1;
  *v = (int32_t)(uint32_t)get_le(r, 4);
  return 0;
}
static int i64(struct in *r, int64_t *v, const char *what) {
  if (need(r, 8, what)) return -1;
  *v = (int64_t)get_le(r, 8);
  return 0;
}
static int expect(struct in *r, uint8_t tag, const char *what) {
  uint8_t b;
  if (u8(r, &b, what)) return -1;
  return b == tag ? 0 : fail(r, what);
}

/* A string: its UTF-16 length (-1: null, *s NULL), then each unit as 1 to 3 bytes (a surrogate
 * half is 3, as .NET's writer makes it): into a new UTF-8 string, a surrogate pair joined. */
static int string(struct in *r, char **s, const char *what) {
  int32_t len;
  *s = NULL;
  if (i32(r, &len, what)) return -1;
  if (len == -1) return 0;
  if (len < 0 || (size_t)len > r->n - r->at) return fail(r, what); /* at least a byte a unit */
  char *out = malloc((size_t)len * 4 + 1);
  if (!out) return -2;
  size_t o = 0;
  uint32_t high = 0; /* a high surrogate waiting for its low half */
  for (int32_t k = 0; k < len; k++) {
    uint8_t b;
    uint32_t u;
    if (u8(r, &b, what)) goto bad;
    if (b < 0x80) {
      u = b;
    } else if (b < 0xE0) {
      uint8_t c;
      if (u8(r, &c, what)) goto bad;
      u = (uint32_t)(b & 0x1F) << 6 | (c & 0x3F);
    } else {
      uint8_t c, d;
      if (u8(r, &c, what) || u8(r, &d, what)) goto bad;
      u = (uint32_t)(b & 0x0F) << 12 | (uint32_t)(c & 0x3F) << 6 | (d & 0x3F);
    }
    if (u >= 0xD800 && u < 0xDC00) { /* a high half: kept for the low one */
      if (high) o += (size_t)snprintf(out + o, 4, "\xEF\xBF\xBD"); /* one alone: U+FFFD */
      high = u;
      continue;
    }
    if (u >= 0xDC00 && u < 0xE000 && high) u = 0x10000 + ((high - 0xD800) << 10) + (u - 0xDC00);
    else if (high) o += (size_t)snprintf(out + o, 4, "\xEF\xBF\xBD");
    else if (u >= 0xDC00 && u < 0xE000) u = 0xFFFD;
    high = 0;
    if (u == 0) u = 0xFFFD; /* a NUL would end the name */
    if (u < 0x80) out[o++] = (char)u;
    else if (u < 0x800) out[o++] = (char)(0xC0 | u >> 6), out[o++] = (char)(0x80 | (u & 0x3F));
    else if (u < 0x10000)
      out[o++] = (char)(0xE0 | u >> 12), out[o++] = (char)(0x80 | (u >> 6 & 0x3F)), out[o++] = (char)(0x80 | (u & 0x3F));
    else
      out[o++] = (char)(0xF0 | u >> 18), out[o++] = (char)(0x80 | (u >> 12 & 0x3F)),
      out[o++] = (char)(0x80 | (u >> 6 & 0x3F)), out[o++] = (char)(0x80 | (u & 0x3F));
  }
  if (high) o += (size_t)snprintf(out + o, 4, "\xEF\xBF\xBD");
  out[o] = '\0';
  *s = out;
  return 0;
bad:
  free(out);
  return -1;
}

/* A type object: 04 01 version minReader name 06, its name `name`. */
static int type_object(struct in *r, const char *name, int32_t *version, int32_t *min_reader) {
  char *got = NULL;
  if (expect(r, TAG_BEGIN, "an object's type") || expect(r, TAG_NULL, "an object's type") ||
      i32(r, version, "a type's version") || i32(r, min_reader, "a type's version"))
    return -1;
  int rc = string(r, &got, "a type's name");
  if (rc) return rc;
  int same = got && strcmp(got, name) == 0;
  free(got);
  if (!same) return fail(r, name);
  return expect(r, TAG_END, "a type object's end");
}

/* A compressed integer of the blob, within [*at, end). */
static int cint(const uint8_t *p, size_t end, size_t *at, int32_t *v) {
  if (*at >= end) return -1;
  uint8_t b = p[(*at)++];
  uint32_t x = b & 0x7F;
  if (x & 0x40) x |= 0xFFFFFF80u; /* sign-extended from its seventh bit */
  for (int k = 1; b & 0x80; k++) {
    if (k == 5 || *at >= end) return -1;
    b = p[(*at)++];
    x = (x << 7) + (b & 0x7Fu);
  }
  *v = (int32_t)x;
  return 0;
}

/* " (Bytes > 1K)" and the like, which dotnet-gcdump puts on the types of objects over 1,000 bytes:
 * cut, so a type is one row whatever its objects' sizes. */
static void cut_size_bucket(char *name) {
  char *b = strstr(name, " (Bytes > ");
  if (b && b[strlen(b) - 1] == ')' && !strchr(b + 2, '(')) *b = '\0';
}

static const char *base_name(const char *path) {
  const char *slash = strrchr(path, '/'), *back = strrchr(path, '\\');
  if (back && (!slash || back > slash)) slash = back;
  return slash ? slash + 1 : path;
}

/* The types: name, size, module (its file name kept). type_size[] gets each type's size. Each is
 * taken for one that names roots (or UNDEFINED) until one of its nodes has a size (read_nodes):
 * no object is 0 bytes, and the types' own sizes do not tell (PerfView's dumps leave them 0). */
static int read_types(struct in *r, struct dnt_heap *h, int32_t **type_size) {
  int32_t ntypes;
  if (i32(r, &ntypes, "the type count")) return -1;
  if (ntypes < 0 || (size_t)ntypes > (r->n - r->at) / 12) return fail(r, "the type count"); /* 12: two lengths, a size */
  *type_size = malloc(((size_t)ntypes + 1) * sizeof **type_size);
  if (!*type_size) return -2;
  for (int32_t t = 0; t < ntypes; t++) {
    char *name, *module;
    int32_t size;
    int rc = string(r, &name, "a type's name");
    if (rc) return rc;
    if (i32(r, &size, "a type's size") || (rc = string(r, &module, "a type's module"))) {
      free(name);
      return rc ? rc : -1;
    }
    if (name) cut_size_bucket(name);
    uint32_t k = dnt__heap_add_type(h, name ? name : "?", module ? base_name(module) : NULL, 1); /* see read_nodes */
    free(name);
    free(module);
    if (k == UINT32_MAX) return -2;
    (*type_size)[t] = size;
  }
  return 0;
}

/* The nodes: the labels, the blob, the addresses, then each node's record decoded (twice: the
 * children counted, then placed). */
static int read_nodes(struct in *r, struct dnt_heap *h, const int32_t *type_size) {
  int32_t nnodes, bloblen, naddresses;
  if (i32(r, &nnodes, "the node count")) return -1;
  if (nnodes < 0 || (size_t)nnodes > (r->n - r->at) / 4) return fail(r, "the node count");
  size_t n = (size_t)nnodes, labels = r->at;
  r->at += n * 4;
  if (i32(r, &bloblen, "the node blob's length")) return -1;
  if (bloblen < 0 || (size_t)bloblen > r->n - r->at) return fail(r, "the node blob's length");
  const uint8_t *blob = r->p + r->at;
  size_t len = (size_t)bloblen;
  r->at += len;
  if (i32(r, &naddresses, "the address count")) return -1;
  if (naddresses < 0 || (size_t)naddresses > (r->n - r->at) / 8) return fail(r, "the address count");
  h->nnodes = (uint32_t)n;
  h->type = malloc((n ? n : 1) * sizeof *h->type);
  h->size = malloc((n ? n : 1) * sizeof *h->size);
  h->address = calloc(n ? n : 1, sizeof *h->address);
  h->start = malloc((n + 1) * sizeof *h->start);
  if (!h->type || !h->size || !h->address || !h->start) return -2;
  for (size_t i = 0; i < (size_t)naddresses; i++) {
    uint64_t a = get_le(r, 8);
    if (i < n) h->address[i] = a;
  }
  /* first pass: each record checked, its type and size, its children counted */
  struct in lab = *r;
  lab.at = labels;
  h->start[0] = 0;
  for (size_t v = 0; v < n; v++) {
    size_t at = (size_t)get_le(&lab, 4);
    int32_t ts, size = 0, children, delta;
    if (at >= len || cint(blob, len, &at, &ts) || ts < 0) return fail(r, "a node's record");
    uint32_t t = (uint32_t)ts >> 1;
    if (t >= h->ntypes) return fail(r, "a node's type");
    if (ts & 1) {
      if (cint(blob, len, &at, &size) || size < 0) return fail(r, "a node's size");
    } else {
      size = type_size[t] > 0 ? type_size[t] : 0;
    }
    if (cint(blob, len, &at, &children) || children < 0 || (size_t)children > len - at)
      return fail(r, "a node's children");
    for (int32_t c = 0; c < children; c++) {
      int64_t w;
      if (cint(blob, len, &at, &delta) || (w = (int64_t)v + delta) < 0 || (uint64_t)w >= n)
        return fail(r, "a node's child");
    }
    h->type[v] = t;
    h->size[v] = (uint32_t)size; /* at most INT32_MAX */
    if (size) h->types[t].synthetic = 0; /* a type with an object of some size holds objects */
    h->start[v + 1] = h->start[v] + (uint64_t)children;
  }
  h->succ = malloc((h->start[n] ? h->start[n] : 1) * sizeof *h->succ);
  if (!h->succ) return -2;
  /* second pass: the children, checked already */
  lab.at = labels;
  for (size_t v = 0; v < n; v++) {
    size_t at = (size_t)get_le(&lab, 4);
    int32_t x;
    cint(blob, len, &at, &x);
    if (x & 1) cint(blob, len, &at, &x);
    cint(blob, len, &at, &x);
    for (uint64_t e = h->start[v]; e < h->start[v + 1]; e++) {
      cint(blob, len, &at, &x);
      h->succ[e] = (uint32_t)((int64_t)v + x);
    }
  }
  return 0;
}

/* After the graph: the process it came from, when the fields before it are the plain ones
 * (dotnet-gcdump's: no JSHeapInfo, no DotNetHeapInfo); else left unknown. */
static void read_origin(struct in *r, struct dnt_heap *h) {
  uint8_t b;
  int32_t pid;
  int64_t ticks;
  char *log = NULL, *machine = NULL, *process = NULL;
  if (r->at < r->n && r->p[r->at] == TAG_BYTE) r->at += 2; /* Is64Bit, tagged */
  if (expect(r, TAG_END, "the graph's end") || u8(r, &b, "Is64Bit") || need(r, 8, "the multipliers")) return;
  r->at += 8;
  if (expect(r, TAG_NULL, "JSHeapInfo") || expect(r, TAG_NULL, "DotNetHeapInfo")) return;
  if (string(r, &log, "the log") == 0 && i64(r, &ticks, "the time") == 0 && string(r, &machine, "the machine") == 0 &&
      string(r, &process, "the process") == 0 && i32(r, &pid, "the pid") == 0) {
    dnt_heap_origin o = {(uint32_t)(pid > 0 ? pid : 0), process, 0};
    if (ticks > TICKS_AT_1970 && ticks < 3155378975999999999LL) o.time_unix_ns = (ticks - TICKS_AT_1970) * 100;
    dnt_heap_set_origin(h, &o); /* out of memory: the origin stays unknown */
  }
  free(log), free(machine), free(process);
}

static int read_all(FILE *fp, uint8_t **buf, size_t *len) {
  size_t cap = 1 << 20, n = 0;
  uint8_t *b = malloc(cap);
  if (!b) return -2;
  for (;;) {
    if (n == cap) {
      uint8_t *g = realloc(b, cap * 2);
      if (!g) {
        free(b);
        return -2;
      }
      b = g, cap *= 2;
    }
    size_t k = fread(b + n, 1, cap - n, fp);
    n += k;
    if (k == 0) break;
  }
  if (ferror(fp)) {
    free(b);
    return -1;
  }
  *buf = b, *len = n;
  return 0;
}

struct dnt_heap *dnt_heap_read_gcdump(FILE *fp, char *err, size_t cap) {
  uint8_t *buf = NULL;
  size_t len = 0;
  int rc = read_all(fp, &buf, &len);
  if (rc) {
    snprintf(err, cap, rc == -2 ? "out of memory" : "cannot read the file");
    return NULL;
  }
  struct in r = {buf, len, 0, err, cap, 0};
  struct dnt_heap *h = dnt__heap_new();
  int32_t *type_size = NULL, version, min_reader, graph_version, graph_min, root;
  int64_t total;
  rc = h ? 0 : -2;
  if (!rc && !dnt_heap_is_gcdump(buf, len)) rc = fail(&r, "no GCHeapDump after the FastSerialization signature");
  if (!rc && len < 24) rc = fail(&r, "the file ends in its signature");
  if (!rc) r.at = 24;
  if (!rc) rc = expect(&r, TAG_BEGIN, "the heap dump");
  if (!rc) rc = type_object(&r, DUMP_TYPE, &version, &min_reader);
  if (!rc && (version < DUMP_OLDEST || min_reader > DUMP_VERSION)) {
    snprintf(err, cap, "a .gcdump of version %d (needing a reader of version %d): read here are versions %d to %d",
             (int)version, (int)min_reader, DUMP_OLDEST, DUMP_VERSION);
    rc = -1, r.bad = 1;
  }
  if (!rc) rc = expect(&r, TAG_BEGIN, "the graph");
  if (!rc) rc = type_object(&r, GRAPH_TYPE, &graph_version, &graph_min);
  if (!rc && graph_min >= 1) { /* types deferred to a table after the blob (.NET Native's graphs) */
    snprintf(err, cap, "a graph whose types are deferred (a .NET Native heap dump) is not read here");
    rc = -1, r.bad = 1;
  }
  if (!rc) rc = i64(&r, &total, "the total size");
  if (!rc) rc = i32(&r, &root, "the root");
  if (!rc) rc = read_types(&r, h, &type_size);
  if (!rc) rc = read_nodes(&r, h, type_size);
  if (!rc && (root < 0 || (uint32_t)root >= h->nnodes)) rc = fail(&r, "the root is not a node");
  if (!rc) {
    h->root = (uint32_t)root;
    read_origin(&r, h);
  }
  if (rc == -2) snprintf(err, cap, "out of memory");
  free(type_size);
  free(buf);
  if (rc) {
    dnt_heap_free(h);
    return NULL;
  }
  return h;
}

/* ---- writing ---- */

struct out {
  FILE *fp;
  uint64_t at; /* bytes written: the offsets the table and trailer give */
};

static void put(struct out *w, const void *p, size_t n) {
  fwrite(p, 1, n, w->fp);
  w->at += n;
}
static void put_u8(struct out *w, uint8_t b) { put(w, &b, 1); }
static void put_le(struct out *w, uint64_t v, size_t n) {
  uint8_t b[8];
  for (size_t i = 0; i < n; i++) b[i] = (uint8_t)(v >> (8 * i));
  put(w, b, n);
}

/* A string as .NET's writer makes it: its UTF-16 length, then each unit in 1 to 3 bytes (a
 * character beyond the BMP is two surrogates of 3 each). s is UTF-8 (a byte that starts no valid
 * sequence is read as U+FFFD); NULL writes a null string. */
static void put_string(struct out *w, const char *s) {
  if (!s) {
    put_le(w, UINT32_MAX, 4);
    return;
  }
  for (int pass = 0; pass < 2; pass++) { /* the units counted, then written */
    uint32_t units = 0;
    for (const uint8_t *c = (const uint8_t *)s; *c;) {
      uint32_t u = 0xFFFD;
      int k = *c < 0x80 ? 1 : (*c & 0xE0) == 0xC0 ? 2 : (*c & 0xF0) == 0xE0 ? 3 : (*c & 0xF8) == 0xF0 ? 4 : 0;
      int ok = k > 0;
      for (int i = 1; ok && i < k; i++) ok = (c[i] & 0xC0) == 0x80;
      if (ok) {
        u = k == 1 ? c[0] : (uint32_t)(c[0] & (0x7F >> k));
        for (int i = 1; i < k; i++) u = u << 6 | (c[i] & 0x3F);
        c += k;
      } else {
        c++;
      }
      uint32_t unit[2] = {u, 0};
      int nu = 1;
      if (u >= 0x10000 && u < 0x110000) unit[0] = 0xD800 + ((u - 0x10000) >> 10), unit[1] = 0xDC00 + (u & 0x3FF), nu = 2;
      else if (u >= 0x10000) unit[0] = 0xFFFD;
      units += (uint32_t)nu;
      for (int i = 0; pass == 1 && i < nu; i++) {
        uint32_t x = unit[i];
        if (x < 0x80) put_u8(w, (uint8_t)x);
        else if (x < 0x800) put_u8(w, (uint8_t)(0xC0 | x >> 6)), put_u8(w, (uint8_t)(0x80 | (x & 0x3F)));
        else put_u8(w, (uint8_t)(0xE0 | x >> 12)), put_u8(w, (uint8_t)(0x80 | (x >> 6 & 0x3F))), put_u8(w, (uint8_t)(0x80 | (x & 0x3F)));
      }
    }
    if (pass == 0) put_le(w, units, 4);
  }
}

static void put_type_object(struct out *w, int32_t version, int32_t min_reader, const char *name) {
  put_u8(w, TAG_BEGIN), put_u8(w, TAG_NULL);
  put_le(w, (uint32_t)version, 4), put_le(w, (uint32_t)min_reader, 4);
  put_string(w, name);
  put_u8(w, TAG_END);
}

/* A compressed integer: the fewest bytes whose 7-bit groups hold v signed. */
static size_t cint_len(int32_t v) {
  size_t n = 1;
  while (n < 5 && (v < -(1L << (7 * n - 1)) || v >= (1L << (7 * n - 1)))) n++;
  return n;
}
static size_t put_cint(struct out *w, int32_t v) {
  size_t n = cint_len(v);
  for (size_t i = n; i-- > 1;) put_u8(w, (uint8_t)(((uint32_t)v >> (7 * i) & 0x7F) | 0x80));
  put_u8(w, (uint8_t)((uint32_t)v & 0x7F));
  return n;
}

static int32_t clamp(uint64_t v) { return v > INT32_MAX ? INT32_MAX : (int32_t)v; }

/* Whether the graph's type 0 is the file's UNDEFINED already (a graph read from a .gcdump): then
 * the types are written as they are, else after one. */
static uint32_t type_shift(const struct dnt_heap *h) {
  return h->ntypes && h->types[0].synthetic && strcmp(h->types[0].name, "UNDEFINED") == 0 ? 0 : 1;
}

/* Node v's record: type (its index in the file, with the size bit), size when it differs from
 * its type's, children as differences from v. Its length when w is NULL. */
static size_t record(struct out *w, const struct dnt_heap *h, const int32_t *type_size, uint32_t v) {
  uint32_t t = h->type[v] + type_shift(h);
  int32_t size = clamp(dnt__heap_size(h, v));
  int differs = size != type_size[t];
  int32_t count = clamp(h->start[v + 1] - h->start[v]);
  size_t n = 0;
  int32_t head = (int32_t)(t << 1 | (uint32_t)differs);
  n += w ? put_cint(w, head) : cint_len(head);
  if (differs) n += w ? put_cint(w, size) : cint_len(size);
  n += w ? put_cint(w, count) : cint_len(count);
  for (int32_t c = 0; c < count; c++) {
    int32_t delta = (int32_t)((int64_t)h->succ[h->start[v] + (uint64_t)c] - v);
    n += w ? put_cint(w, delta) : cint_len(delta);
  }
  return n;
}

int dnt_heap_write_gcdump(FILE *fp, const struct dnt_heap *h, const dnt_heap_origin *origin, char *err, size_t cap) {
  if (!origin) origin = &h->origin;
  if (h->nnodes > INT32_MAX / 2 || h->ntypes > INT32_MAX / 2 - 2) {
    snprintf(err, cap, "too many objects or types for a .gcdump");
    return -1;
  }
  /* each type's size in the file: its first object's (a node whose size differs says its own),
   * -1 for a type with none; 0 for the synthetic ones; type 0 is UNDEFINED, the graph's types
   * follow */
  int32_t *type_size = malloc(((size_t)h->ntypes + 1) * sizeof *type_size);
  if (!type_size) {
    snprintf(err, cap, "out of memory");
    return -1;
  }
  uint32_t shift = type_shift(h);
  type_size[0] = 0;
  for (uint32_t t = 0; t < h->ntypes; t++) type_size[t + shift] = h->types[t].synthetic ? 0 : -1;
  uint64_t total = 0;
  for (uint32_t v = 0; v < h->nnodes; v++) {
    uint64_t size = dnt__heap_size(h, v);
    total += size;
    /* an objects' type never gets size 0, which marks the nodes that name roots */
    if (type_size[h->type[v] + shift] == -1 && size) type_size[h->type[v] + shift] = clamp(size);
  }
  /* the blob's length first: the labels come before it */
  uint64_t bloblen = 2;
  for (uint32_t v = 0; v < h->nnodes; v++) bloblen += record(NULL, h, type_size, v);
  uint64_t addresses = 4 + 8 * (uint64_t)h->nnodes;
  if (bloblen > INT32_MAX || 1024 + 8 * (uint64_t)h->ntypes + 4 * (uint64_t)h->nnodes + bloblen + addresses > UINT32_MAX) {
    free(type_size);
    snprintf(err, cap, "the snapshot is too big for a .gcdump (4 GB)");
    return -1;
  }
  struct out w = {fp, 0};
  put_string(&w, SIGNATURE);
  put_u8(&w, TAG_BEGIN);
  put_type_object(&w, DUMP_VERSION, DUMP_MIN_READER, DUMP_TYPE);
  put_u8(&w, TAG_BEGIN);
  put_type_object(&w, 1, 0, GRAPH_TYPE);
  put_le(&w, total, 8);
  put_le(&w, h->root, 4);
  put_le(&w, h->ntypes + shift, 4);
  if (shift) put_string(&w, "UNDEFINED"), put_le(&w, 0, 4), put_string(&w, NULL);
  for (uint32_t t = 0; t < h->ntypes; t++) {
    put_string(&w, h->types[t].name);
    put_le(&w, (uint32_t)type_size[t + shift], 4);
    put_string(&w, h->types[t].module);
  }
  put_le(&w, h->nnodes, 4);
  uint64_t label = 2; /* after the record of UNDEFINED nodes (none here) */
  for (uint32_t v = 0; v < h->nnodes; v++) {
    put_le(&w, label, 4);
    label += record(NULL, h, type_size, v);
  }
  put_le(&w, bloblen, 4);
  put_u8(&w, 0), put_u8(&w, 0);
  for (uint32_t v = 0; v < h->nnodes; v++) record(&w, h, type_size, v);
  put_le(&w, h->nnodes, 4);
  for (uint32_t v = 0; v < h->nnodes; v++) put_le(&w, h->address[v], 8);
  int is64 = h->pointer_size != 4;
  put_u8(&w, TAG_BYTE), put_u8(&w, (uint8_t)is64);
  put_u8(&w, TAG_END); /* the graph */
  put_u8(&w, (uint8_t)is64);
  put_le(&w, 0x3F800000, 4), put_le(&w, 0x3F800000, 4); /* the multipliers: 1.0f, nothing sampled */
  put_u8(&w, TAG_NULL), put_u8(&w, TAG_NULL);           /* JSHeapInfo, DotNetHeapInfo */
  put_string(&w, NULL);                                  /* the collection's log */
  put_le(&w, origin->time_unix_ns > 0 ? (uint64_t)(origin->time_unix_ns / 100 + TICKS_AT_1970) : 0, 8);
  put_string(&w, NULL); /* the machine */
  put_string(&w, origin->process);
  put_le(&w, origin->pid, 4);
  put_le(&w, 0, 8), put_le(&w, 0, 8); /* the process's commit and working set: not known */
  put_le(&w, 0, 4);                   /* no multiplier per type */
  put_u8(&w, TAG_SKIP_REGION), put_le(&w, 0, 4), put_u8(&w, TAG_NULL); /* InteropInfo, none */
  uint64_t tool = w.at; /* forward reference 0 ends the region here */
  put_u8(&w, TAG_STRING), put_string(&w, "dntrace");
  put_u8(&w, TAG_END); /* the heap dump */
  put_u8(&w, TAG_END); /* the end of the objects */
  uint64_t table = w.at;
  put_le(&w, 1, 4), put_le(&w, tool, 4);
  uint64_t trailer = w.at;
  put_le(&w, table, 4);
  put_le(&w, trailer, 4);
  free(type_size);
  return 0;
}
