/* Method names from an assembly's ECMA-335 metadata (r2r-int.h): the metadata root and its
 * streams (II.24.2), the #~ tables stream's row counts and the sizes of every table's rows before
 * NestedClass (II.22: a row's size depends on the heaps' index sizes and on the row counts of the
 * tables its indexes point into), then TypeDef, MethodDef and NestedClass rows. */
#include <stdio.h>
#include <string.h>

#include "r2r-int.h"

enum { NTABLES = 64, T_TYPEDEF = 0x02, T_METHODDEF = 0x06, T_NESTED = 0x29, KNOWN = 0x2D };

/* a column: U2, U4, a heap index, a table index (0..63) or a coded index (CODED + kind) */
enum { U2 = -1, U4 = -2, STR = -3, GUID = -4, BLOB = -5, CODED = 0x100, END = -100 };

/* the coded indexes' tables (II.24.2.6), -1 for a tag no table has */
static const struct {
  int bits;
  signed char tables[22];
  int n;
} coded[] = {
    {2, {0x02, 0x01, 0x1B}, 3},                                                         /* TypeDefOrRef */
    {2, {0x04, 0x08, 0x17}, 3},                                                         /* HasConstant */
    {5, {0x06, 0x04, 0x01, 0x02, 0x08, 0x09, 0x0A, 0x00, 0x0E, 0x17, 0x14, 0x11, 0x1A, 0x1B, 0x20, 0x23, 0x26, 0x27,
         0x28, 0x2A, 0x2C, 0x2B},
     22},                                                                               /* HasCustomAttribute */
    {1, {0x04, 0x08}, 2},                                                               /* HasFieldMarshal */
    {2, {0x02, 0x06, 0x20}, 3},                                                         /* HasDeclSecurity */
    {3, {0x02, 0x01, 0x1A, 0x06, 0x1B}, 5},                                             /* MemberRefParent */
    {1, {0x14, 0x17}, 2},                                                               /* HasSemantics */
    {1, {0x06, 0x0A}, 2},                                                               /* MethodDefOrRef */
    {1, {0x04, 0x06}, 2},                                                               /* MemberForwarded */
    {2, {0x26, 0x23, 0x27}, 3},                                                         /* Implementation */
    {3, {-1, -1, 0x06, 0x0A, -1}, 5},                                                   /* CustomAttributeType */
    {2, {0x00, 0x1A, 0x23, 0x01}, 4},                                                   /* ResolutionScope */
    {1, {0x02, 0x06}, 2},                                                               /* TypeOrMethodDef */
};
#define CI(k) (CODED + (k))

/* the columns of the tables up to GenericParamConstraint (II.22) */
static const short schema[KNOWN][10] = {
    {U2, STR, GUID, GUID, GUID, END},                 /* 0x00 Module */
    {CI(11), STR, STR, END},                          /* 0x01 TypeRef */
    {U4, STR, STR, CI(0), 0x04, 0x06, END},           /* 0x02 TypeDef */
    {0x04, END},                                      /* 0x03 FieldPtr */
    {U2, STR, BLOB, END},                             /* 0x04 Field */
    {0x06, END},                                      /* 0x05 MethodPtr */
    {U4, U2, U2, STR, BLOB, 0x08, END},               /* 0x06 MethodDef */
    {0x08, END},                                      /* 0x07 ParamPtr */
    {U2, U2, STR, END},                               /* 0x08 Param */
    {0x02, CI(0), END},                               /* 0x09 InterfaceImpl */
    {CI(5), STR, BLOB, END},                          /* 0x0A MemberRef */
    {U2, CI(1), BLOB, END},                           /* 0x0B Constant (a byte, and one of padding) */
    {CI(2), CI(10), BLOB, END},                       /* 0x0C CustomAttribute */
    {CI(3), BLOB, END},                               /* 0x0D FieldMarshal */
    {U2, CI(4), BLOB, END},                           /* 0x0E DeclSecurity */
    {U2, U4, 0x02, END},                              /* 0x0F ClassLayout */
    {U4, 0x04, END},                                  /* 0x10 FieldLayout */
    {BLOB, END},                                      /* 0x11 StandAloneSig */
    {0x02, 0x14, END},                                /* 0x12 EventMap */
    {0x14, END},                                      /* 0x13 EventPtr */
    {U2, STR, CI(0), END},                            /* 0x14 Event */
    {0x02, 0x17, END},                                /* 0x15 PropertyMap */
    {0x17, END},                                      /* 0x16 PropertyPtr */
    {U2, STR, BLOB, END},                             /* 0x17 Property */
    {U2, 0x06, CI(6), END},                           /* 0x18 MethodSemantics */
    {0x02, CI(7), CI(7), END},                        /* 0x19 MethodImpl */
    {STR, END},                                       /* 0x1A ModuleRef */
    {BLOB, END},                                      /* 0x1B TypeSpec */
    {U2, CI(8), STR, 0x1A, END},                      /* 0x1C ImplMap */
    {U4, 0x04, END},                                  /* 0x1D FieldRVA */
    {U4, U4, END},                                    /* 0x1E EncLog */
    {U4, END},                                        /* 0x1F EncMap */
    {U4, U2, U2, U2, U2, U4, BLOB, STR, STR, END},    /* 0x20 Assembly */
    {U4, END},                                        /* 0x21 AssemblyProcessor */
    {U4, U4, U4, END},                                /* 0x22 AssemblyOS */
    {U2, U2, U2, U2, U4, BLOB, STR, STR, BLOB, END},  /* 0x23 AssemblyRef */
    {U4, 0x23, END},                                  /* 0x24 AssemblyRefProcessor */
    {U4, U4, U4, 0x23, END},                          /* 0x25 AssemblyRefOS */
    {U4, STR, BLOB, END},                             /* 0x26 File */
    {U4, U4, STR, STR, CI(9), END},                   /* 0x27 ExportedType */
    {U4, U4, STR, CI(9), END},                        /* 0x28 ManifestResource */
    {0x02, 0x02, END},                                /* 0x29 NestedClass */
    {U2, U2, CI(12), STR, END},                       /* 0x2A GenericParam */
    {CI(7), BLOB, END},                               /* 0x2B MethodSpec */
    {0x2A, CI(0), END},                               /* 0x2C GenericParamConstraint */
};

static uint32_t rd16(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8; }
static uint32_t rd32(const uint8_t *p) { return rd16(p) | rd16(p + 2) << 16; }
static uint32_t rd_idx(const uint8_t *p, int size) { return size == 2 ? rd16(p) : rd32(p); }

static int column_size(int col, uint8_t heaps, const uint32_t *rows) {
  switch (col) {
  case U2: return 2;
  case U4: return 4;
  case STR: return heaps & 1 ? 4 : 2;
  case GUID: return heaps & 2 ? 4 : 2;
  case BLOB: return heaps & 4 ? 4 : 2;
  default: break;
  }
  if (col < CODED) return rows[col] < 0x10000 ? 2 : 4;
  int k = col - CODED;
  uint32_t most = 0;
  for (int i = 0; i < coded[k].n; i++)
    if (coded[k].tables[i] >= 0 && rows[(int)coded[k].tables[i]] > most) most = rows[(int)coded[k].tables[i]];
  return most < (1u << (16 - coded[k].bits)) ? 2 : 4;
}

/* The stream named name of the metadata root: its bytes, or NULL. */
const uint8_t *dnt__ecma_stream(const uint8_t *md, size_t len, const char *name, uint32_t *size) {
  if (len < 16 || rd32(md) != 0x424A5342) return NULL; /* "BSJB" */
  uint32_t vlen = rd32(md + 12);
  if (vlen > len - 16 || len - 16 - vlen < 4) return NULL;
  size_t p = 16 + vlen;
  uint32_t nstreams = rd16(md + p + 2);
  p += 4;
  for (uint32_t i = 0; i < nstreams; i++) {
    if (p > len || len - p < 9) return NULL; /* a name's padding may end past the file */
    uint32_t off = rd32(md + p), sz = rd32(md + p + 4);
    const char *n = (const char *)md + p + 8;
    size_t max = len - p - 8, nlen = strnlen(n, max < 32 ? max : 32);
    if (nlen == max || nlen == 32) return NULL;
    p += 8 + ((nlen + 4) & ~(size_t)3); /* the name, its NUL, padded to 4 */
    if (strcmp(n, name) == 0) {
      if (off > len || sz > len - off) return NULL;
      *size = sz;
      return md + off;
    }
  }
  return NULL;
}

int dnt__ecma_open(struct dnt__ecma *e, const uint8_t *md, size_t len) {
  memset(e, 0, sizeof *e);
  uint32_t tlen, slen, blen = 0;
  const uint8_t *t = dnt__ecma_stream(md, len, "#~", &tlen), *s = dnt__ecma_stream(md, len, "#Strings", &slen),
                *b = dnt__ecma_stream(md, len, "#Blob", &blen);
  if (!t || !s || tlen < 24) return -1;
  uint8_t heaps = t[6];
  uint64_t valid = (uint64_t)rd32(t + 8) | (uint64_t)rd32(t + 12) << 32;
  uint32_t rows[NTABLES] = {0};
  size_t p = 24;
  for (int i = 0; i < NTABLES; i++) {
    if (!(valid >> i & 1)) continue;
    if (tlen - p < 4) return -1;
    rows[i] = rd32(t + p);
    p += 4;
  }
  if (heaps & 0x20) p += 4; /* an extra word some writers add */
  if (rows[0x05]) return -1; /* MethodPtr: uncompressed, edited metadata; not read */
  int offs[KNOWN];
  uint32_t sizes[KNOWN];
  for (int i = 0; i < KNOWN; i++) {
    uint32_t row = 0;
    for (int c = 0; schema[i][c] != END; c++) row += (uint32_t)column_size(schema[i][c], heaps, rows);
    sizes[i] = row;
  }
  for (int i = 0; i < KNOWN; i++) {
    if (p > tlen || (rows[i] && sizes[i] && rows[i] > (tlen - p) / sizes[i])) return -1;
    offs[i] = (int)p;
    p += (size_t)rows[i] * sizes[i];
  }
  e->strings = s, e->strings_len = slen;
  e->blobs = b, e->blobs_len = b ? blen : 0;
  e->typerefs = t + offs[0x01], e->ntyperefs = rows[0x01], e->typeref_row = sizes[0x01];
  e->blob_size = (uint8_t)column_size(BLOB, heaps, rows);
  e->scope_size = (uint8_t)column_size(CI(11), heaps, rows);
  e->typedefs = t + offs[T_TYPEDEF], e->ntypedefs = rows[T_TYPEDEF], e->typedef_row = sizes[T_TYPEDEF];
  e->methods = t + offs[T_METHODDEF], e->nmethods = rows[T_METHODDEF], e->method_row = sizes[T_METHODDEF];
  e->nested = t + offs[T_NESTED], e->nnested = rows[T_NESTED], e->nested_row = sizes[T_NESTED];
  e->fields = t + offs[0x04], e->nfields = rows[0x04], e->field_row = sizes[0x04];
  e->str_size = (uint8_t)column_size(STR, heaps, rows);
  e->typedef_idx = (uint8_t)column_size(T_TYPEDEF, heaps, rows);
  e->method_idx = (uint8_t)column_size(T_METHODDEF, heaps, rows);
  e->td_name = 4;
  e->td_ns = (uint8_t)(4 + e->str_size);
  e->td_methods = (uint8_t)(4 + 2 * e->str_size + column_size(CI(0), heaps, rows) + column_size(0x04, heaps, rows));
  return 0;
}

/* The string at index i of #Strings, or NULL when it does not end inside the heap. */
static const char *string_at(const struct dnt__ecma *e, uint32_t i) {
  if (i >= e->strings_len) return NULL;
  const char *s = (const char *)e->strings + i;
  return memchr(s, '\0', e->strings_len - i) ? s : NULL;
}

/* The TypeDef (1-based) whose method list holds MethodDef rid, or 0. */
static uint32_t owner_of(const struct dnt__ecma *e, uint32_t rid) {
  uint32_t lo = 0, hi = e->ntypedefs; /* the last row whose MethodList is at or before rid */
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (rd_idx(e->typedefs + (size_t)mid * e->typedef_row + e->td_methods, e->method_idx) <= rid) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/* The type enclosing TypeDef td (1-based), or 0. NestedClass is sorted by its first column. */
static uint32_t enclosing(const struct dnt__ecma *e, uint32_t td) {
  uint32_t lo = 0, hi = e->nnested;
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    const uint8_t *row = e->nested + (size_t)mid * e->nested_row;
    uint32_t nested = rd_idx(row, e->typedef_idx);
    if (nested == td) return rd_idx(row + e->typedef_idx, e->typedef_idx);
    if (nested < td) lo = mid + 1;
    else hi = mid;
  }
  return 0;
}

int dnt__ecma_type_name(const struct dnt__ecma *e, uint32_t td, char *buf, size_t cap) {
  uint32_t types[16], n = 0;
  for (; td && td <= e->ntypedefs && n < 16; td = enclosing(e, td)) {
    for (uint32_t k = 0; k < n; k++)
      if (types[k] == td) return 0; /* a cycle of nesting */
    types[n++] = td;
  }
  if (!cap || n == 0) return 0;
  const uint8_t *outer = e->typedefs + (size_t)(types[n - 1] - 1) * e->typedef_row;
  const char *ns = string_at(e, rd_idx(outer + e->td_ns, e->str_size));
  if (!ns) return 0;
  size_t o = (size_t)snprintf(buf, cap, "%s%s", ns, *ns ? "." : "");
  for (uint32_t k = n; k-- > 0 && o < cap;) {
    const char *name = string_at(e, rd_idx(e->typedefs + (size_t)(types[k] - 1) * e->typedef_row + e->td_name, e->str_size));
    if (!name) return 0;
    o += (size_t)snprintf(buf + o, cap - o, "%s%s", name, k ? "+" : "");
  }
  return 1;
}

int dnt__ecma_method_name(const struct dnt__ecma *e, uint32_t rid, char *buf, size_t cap) {
  if (!cap || rid == 0 || rid > e->nmethods) return 0;
  const char *method = string_at(e, rd_idx(e->methods + (size_t)(rid - 1) * e->method_row + 8, e->str_size));
  if (!method || !dnt__ecma_type_name(e, owner_of(e, rid), buf, cap)) return 0;
  size_t o = strlen(buf);
  if (o < cap) snprintf(buf + o, cap - o, ".%s", method);
  return 1;
}

/* ---- signatures (II.23.2), written as the runtime's TypeString writes a method's ---- */

struct sig {
  const struct dnt__ecma *e;
  const uint8_t *p, *end;
  char *buf;
  size_t cap, len;
  int bad;
  const char *const *targs, *const *margs; /* the instantiation's names for VAR and MVAR */
  size_t ntargs, nmargs;
};

static void out(struct sig *g, const char *text) {
  size_t n = strlen(text);
  if (g->len + n >= g->cap) {
    g->bad = 1;
    return;
  }
  memcpy(g->buf + g->len, text, n + 1);
  g->len += n;
}

/* A compressed unsigned integer (II.23.2). */
static uint32_t number(struct sig *g) {
  if (g->p >= g->end) return g->bad = 1, 0;
  uint8_t b = *g->p;
  if (!(b & 0x80)) return g->p++, b;
  if ((b & 0xC0) == 0x80) {
    if (g->end - g->p < 2) return g->bad = 1, 0;
    uint32_t v = (uint32_t)(b & 0x3F) << 8 | g->p[1];
    return g->p += 2, v;
  }
  if (g->end - g->p < 4) return g->bad = 1, 0;
  uint32_t v = (uint32_t)(b & 0x1F) << 24 | (uint32_t)g->p[1] << 16 | (uint32_t)g->p[2] << 8 | g->p[3];
  return g->p += 4, v;
}

/* A type a signature names (a TypeDef or TypeRef row): "Namespace.Name", its own name only (a
 * nested type's namespace is empty, and the runtime writes no enclosing type there). */
static void type_def_or_ref(struct sig *g) {
  const struct dnt__ecma *e = g->e;
  uint32_t index = number(g), rid = index >> 2;
  const char *name = NULL, *ns = NULL;
  if ((index & 3) == 0 && rid && rid <= e->ntypedefs) {
    const uint8_t *row = e->typedefs + (size_t)(rid - 1) * e->typedef_row;
    name = string_at(e, rd_idx(row + e->td_name, e->str_size));
    ns = string_at(e, rd_idx(row + e->td_ns, e->str_size));
  } else if ((index & 3) == 1 && rid && rid <= e->ntyperefs) {
    const uint8_t *row = e->typerefs + (size_t)(rid - 1) * e->typeref_row;
    name = string_at(e, rd_idx(row + e->scope_size, e->str_size));
    ns = string_at(e, rd_idx(row + e->scope_size + e->str_size, e->str_size));
  }
  if (!name || !ns) return (void)(g->bad = 1); /* a TypeSpec: not in a MethodDef's own signature */
  if (*ns) out(g, ns), out(g, ".");
  out(g, name);
}

static void type(struct sig *g, int depth) {
  static const char *const primitives[] = {
      [0x01] = "Void",  [0x02] = "Boolean", [0x03] = "Char",   [0x04] = "SByte",  [0x05] = "Byte",
      [0x06] = "Int16", [0x07] = "UInt16",  [0x08] = "Int32",  [0x09] = "UInt32", [0x0A] = "Int64",
      [0x0B] = "UInt64", [0x0C] = "Single", [0x0D] = "Double", [0x0E] = "System.String",
      [0x16] = "System.TypedReference", [0x18] = "IntPtr", [0x19] = "UIntPtr", [0x1C] = "System.Object"};
  if (g->bad || depth > 32 || g->p >= g->end) return (void)(g->bad = 1);
  uint8_t t = *g->p++;
  char num[32];
  if (t < sizeof primitives / sizeof primitives[0] && primitives[t]) return out(g, primitives[t]);
  switch (t) {
  case 0x0F: type(g, depth + 1), out(g, "*"); return;                /* PTR */
  case 0x10: type(g, depth + 1), out(g, " ByRef"); return;           /* BYREF */
  case 0x11: case 0x12: type_def_or_ref(g); return;                  /* VALUETYPE, CLASS */
  case 0x13: case 0x1E: {                                           /* VAR, MVAR */
    uint32_t i = number(g);
    const char *const *names = t == 0x13 ? g->targs : g->margs;
    if (names && i < (t == 0x13 ? g->ntargs : g->nmargs)) return out(g, names[i]); /* as instantiated */
    snprintf(num, sizeof num, "%s%u", t == 0x13 ? "!" : "!!", i);
    out(g, num);
    return;
  }
  case 0x14: { /* ARRAY: type rank, sizes, lower bounds */
    type(g, depth + 1);
    uint32_t rank = number(g), n = number(g);
    for (uint32_t i = 0; i < n && !g->bad; i++) number(g);
    n = number(g);
    for (uint32_t i = 0; i < n && !g->bad; i++) number(g); /* signed, but only skipped */
    out(g, "[");
    for (uint32_t i = 1; i < rank && i < 32; i++) out(g, ",");
    out(g, "]");
    return;
  }
  case 0x15: { /* GENERICINST: CLASS|VALUETYPE type, count, args */
    if (g->p >= g->end) return (void)(g->bad = 1);
    g->p++;
    type_def_or_ref(g);
    uint32_t n = number(g);
    out(g, "<");
    for (uint32_t i = 0; i < n && !g->bad && i < 64; i++) {
      if (i) out(g, ",");
      type(g, depth + 1);
    }
    out(g, ">");
    return;
  }
  case 0x1B: out(g, "FNPTR"); g->bad = 1; return; /* a function pointer's own signature: not written */
  case 0x1D: type(g, depth + 1), out(g, "[]"); return; /* SZARRAY */
  case 0x1F: case 0x20: number(g), type(g, depth + 1); return;          /* CMOD_REQD, CMOD_OPT */
  case 0x45: type(g, depth + 1); return;                              /* PINNED */
  default: g->bad = 1; return;
  }
}

int dnt__ecma_method_params(const struct dnt__ecma *e, uint32_t rid, const struct dnt_generic_names *inst, char *buf,
                            size_t cap) {
  if (!cap || !e->blobs || rid == 0 || rid > e->nmethods) return 0;
  uint32_t at = rd_idx(e->methods + (size_t)(rid - 1) * e->method_row + 8 + e->str_size, e->blob_size);
  struct sig g = {.e = e, .buf = buf, .cap = cap};
  if (inst) g.targs = inst->type, g.ntargs = inst->ntype, g.margs = inst->method, g.nmargs = inst->nmethod;
  if (at >= e->blobs_len) return 0;
  g.p = e->blobs + at, g.end = e->blobs + e->blobs_len;
  uint32_t len = number(&g);
  if (g.bad || len > (uint32_t)(g.end - g.p)) return 0;
  g.end = g.p + len;
  buf[0] = '\0';
  if (g.p >= g.end) return 0;
  uint8_t conv = *g.p++;
  if (conv & 0x10) number(&g); /* GENERIC: its count of type parameters */
  uint32_t n = number(&g);
  while (!g.bad && g.p < g.end && (*g.p == 0x1F || *g.p == 0x20)) g.p++, number(&g); /* the return's modifiers */
  if (!g.bad && g.p < g.end && *g.p == 0x10) g.p++;                                  /* a byref return */
  type(&g, 0); /* the return type: not written */
  g.len = 0, buf[0] = '\0';
  out(&g, "(");
  for (uint32_t i = 0; i < n && !g.bad && i < 256; i++) {
    if (i) out(&g, ", ");
    if (g.p < g.end && *g.p == 0x41) g.p++; /* SENTINEL */
    type(&g, 0);
  }
  out(&g, ")");
  return !g.bad;
}

int dnt__ecma_field(const struct dnt__ecma *e, uint32_t rid, char *buf, size_t cap, uint8_t *element, uint32_t *token,
                    uint8_t *sig, size_t sigcap, size_t *siglen) {
  *element = 0, *token = 0, *siglen = 0;
  if (!cap || !e->blobs || rid == 0 || rid > e->nfields) return 0;
  const uint8_t *row = e->fields + (size_t)(rid - 1) * e->field_row;
  const char *name = string_at(e, rd_idx(row + 2, e->str_size));
  uint32_t at = rd_idx(row + 2 + e->str_size, e->blob_size);
  if (!name || at >= e->blobs_len) return 0;
  snprintf(buf, cap, "%s", name);
  struct sig g = {.e = e, .p = e->blobs + at, .end = e->blobs + e->blobs_len};
  uint32_t len = number(&g);
  if (g.bad || len > (uint32_t)(g.end - g.p) || len < 2) return 1;
  g.end = g.p + len;
  if (*g.p++ != 0x06) return 1; /* FIELD */
  while (g.p < g.end && (*g.p == 0x1F || *g.p == 0x20)) g.p++, number(&g); /* custom modifiers */
  if (g.p >= g.end) return 1;
  if ((size_t)(g.end - g.p) <= sigcap) { /* the type's own bytes, for a caller that resolves it whole */
    *siglen = (size_t)(g.end - g.p);
    memcpy(sig, g.p, *siglen);
  }
  *element = *g.p++;
  if (*element == 0x15 && g.p < g.end) g.p++; /* GENERICINST: its CLASS or VALUETYPE, then the type */
  if (*element == 0x11 || *element == 0x12 || *element == 0x15) {
    uint32_t index = number(&g);
    static const uint32_t tables[] = {0x02000000u, 0x01000000u, 0x1B000000u, 0};
    if (!g.bad) *token = tables[index & 3] ? tables[index & 3] | (index >> 2) : 0;
  }
  return 1;
}

uint32_t dnt__ecma_find_type(const struct dnt__ecma *e, const char *ns, const char *name) {
  for (uint32_t td = 1; td <= e->ntypedefs; td++) {
    const uint8_t *row = e->typedefs + (size_t)(td - 1) * e->typedef_row;
    const char *n = string_at(e, rd_idx(row + e->td_name, e->str_size)), *s = string_at(e, rd_idx(row + e->td_ns, e->str_size));
    if (n && s && strcmp(n, name) == 0 && strcmp(s, ns) == 0) return td;
  }
  return 0;
}
