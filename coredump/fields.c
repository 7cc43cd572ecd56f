/* fields.c: an object's fields (dnt-core.h), as SOS's dumpobj lists them. A class's fields are
 * FieldDescs in an array its EEClass points at (FieldDescList): its own instance fields, then its
 * statics; NumInstanceFields counts the parents' too. A FieldDesc (16 bytes on x64; .NET 10's
 * descriptor does not describe it, so its layout is the runtime's, checked against the class it
 * must name first):
 *
 *   MethodTable *enclosing; u32 rid:24, static:1, thread_static:1, rva:1, protection:3, full:1;
 *   u32 offset:27, type:5 (a CorElementType: every reference is CLASS)
 *
 * An instance field's value is at the object + 8 + offset; a static's at its class's statics
 * base (GC or not, in the DynamicStaticsInfo just before the class's auxiliary data) + offset. The
 * field's name and its type's token come from the module's metadata; the type's MethodTable, when
 * the runtime loaded it, from the module's TypeDef and TypeRef maps (ModuleLookupMap: a chain of
 * tables of MethodTable pointers, low bits flags). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core-int.h"
#include "dnt-profile.h"

#define FIELD_DESC_SIZE 16
#define MAX_FIELDS 65536
#define MAX_DEPTH 64
#define MT_DYNAMIC_STATICS 0x2 /* MTFlags2 */

/* The value of rid in a module's ModuleLookupMap at map (0 when not there). */
static uint64_t lookup_map(const dnt_clr *r, uint64_t map, uint32_t rid) {
  uint64_t next_off, count_off, table_off, mask_off;
  if (clr_field(r, "ModuleLookupMap", "Next", &next_off) || clr_field(r, "ModuleLookupMap", "Count", &count_off) ||
      clr_field(r, "ModuleLookupMap", "TableData", &table_off) || clr_field(r, "ModuleLookupMap", "SupportedFlagsMask", &mask_off))
    return 0;
  uint64_t mask; /* only the first table's mask is kept up to date */
  if (!map || clr_u64(r, map + mask_off, &mask)) return 0;
  for (int hops = 0; map && hops < 64; hops++) {
    uint32_t count;
    uint64_t table, v;
    if (dnt_core_read_u32(dnt__clr_core(r), map + count_off, &count) || clr_u64(r, map + table_off, &table)) return 0;
    if (rid < count) return clr_u64(r, table + 8ull * rid, &v) == 0 ? v & ~mask : 0;
    rid -= count;
    if (clr_u64(r, map + next_off, &map) != 0) return 0;
  }
  return 0;
}

/* The class's module and its file. */
static int module_of(const dnt_clr *r, uint64_t mt, uint64_t *module, char *path, size_t cap) {
  uint64_t off;
  if (clr_field(r, "MethodTable", "Module", &off) || clr_u64(r, mt + off, module) || !*module) return -1;
  return dnt_clr_module_path(r, *module, path, cap);
}

/* The MethodTable of a primitive (System.NAME) from CoreLib's TypeDef map, 0 when not loaded. */
static uint64_t corelib_type(const dnt_clr *r, const char *name) {
  uint64_t at, object_mt, module, map_off;
  char path[4096];
  if (dnt_clr_global(r, "ObjectMethodTable", &at) || clr_u64(r, at, &object_mt) ||
      module_of(r, object_mt, &module, path, sizeof path) || clr_field(r, "Module", "TypeDefToMethodTableMap", &map_off))
    return 0;
  uint32_t td = dnt_assembly_find_type(path, "System", name);
  return td ? lookup_map(r, module + map_off, td) : 0;
}

static const char *const primitive_names[] = {
    [0x02] = "Boolean", [0x03] = "Char",   [0x04] = "SByte",  [0x05] = "Byte",   [0x06] = "Int16", [0x07] = "UInt16",
    [0x08] = "Int32",   [0x09] = "UInt32", [0x0A] = "Int64",  [0x0B] = "UInt64", [0x0C] = "Single", [0x0D] = "Double",
    [0x0E] = "String",  [0x18] = "IntPtr", [0x19] = "UIntPtr", [0x1C] = "Object"};

/* ---- a field's type as the runtime's debugger interface finds it: only a type it has loaded;
 * arrays and generic instances from the loaded types' table (Module.AvailableTypeParams, an
 * EETypeHashTable: buckets after 3 special slots, the first the count; chains of entries ending
 * at an odd pointer; each entry's value a TypeHandle) ---- */

#define MT_ARRAY_MASK 0x000C0000u
#define MT_ARRAY 0x00080000u
#define MT_SZARRAY 0x00020000u
#define MT_GENERIC_MASK 0x30u
#define MAX_ARGS 16
#define MAX_ENTRIES 200000

struct sigr {
  const uint8_t *p, *end;
  int bad;
};

static uint32_t sig_number(struct sigr *g) {
  if (g->p >= g->end) return g->bad = 1, 0;
  uint8_t b = *g->p;
  if (!(b & 0x80)) return g->p++, b;
  if ((b & 0xC0) == 0x80 && g->end - g->p >= 2) {
    uint32_t v = (uint32_t)(b & 0x3F) << 8 | g->p[1];
    return g->p += 2, v;
  }
  if ((b & 0xE0) == 0xC0 && g->end - g->p >= 4) {
    uint32_t v = (uint32_t)(b & 0x1F) << 24 | (uint32_t)g->p[1] << 16 | (uint32_t)g->p[2] << 8 | g->p[3];
    return g->p += 4, v;
  }
  return g->bad = 1, 0;
}

/* A MethodTable's own facts: its flags, module, TypeDef row, PerInstInfo (an array's element),
 * and a generic instance's arguments (args, *nargs). 0, or -1. */
static int mt_facts(const dnt_clr *r, uint64_t mt, uint32_t *flags, uint64_t *module, uint32_t *rid, uint64_t *inst,
                    uint64_t *args, uint32_t *nargs) {
  uint64_t flags_off, flags2_off, module_off, inst_off;
  uint32_t flags2;
  const dnt_core *c = dnt__clr_core(r);
  *nargs = 0;
  if ((mt & 2) || clr_field(r, "MethodTable", "MTFlags", &flags_off) || clr_field(r, "MethodTable", "MTFlags2", &flags2_off) ||
      clr_field(r, "MethodTable", "Module", &module_off) || clr_field(r, "MethodTable", "PerInstInfo", &inst_off) ||
      dnt_core_read_u32(c, mt + flags_off, flags) || dnt_core_read_u32(c, mt + flags2_off, &flags2) ||
      clr_u64(r, mt + module_off, module) || clr_u64(r, mt + inst_off, inst))
    return -1;
  *rid = flags2 >> 8;
  return dnt__mt_instantiation(r, mt, args, MAX_ARGS, nargs) == 0 ? 0 : -1;
}

/* Looks through module's loaded types for one that match() takes. 0 when none. */
static uint64_t find_loaded(const dnt_clr *r, uint64_t module, int (*match)(const dnt_clr *r, uint64_t th, const void *want),
                            const void *want) {
  uint64_t table_off, buckets_off, value_off, next_off, table, buckets, length;
  if (!module || clr_field(r, "Module", "AvailableTypeParams", &table_off) || clr_field(r, "EETypeHashTable", "Buckets", &buckets_off) ||
      clr_field(r, "EETypeHashTable", "VolatileEntryValue", &value_off) ||
      clr_field(r, "EETypeHashTable", "VolatileEntryNextEntry", &next_off) || clr_u64(r, module + table_off, &table) || !table ||
      clr_u64(r, table + buckets_off, &buckets) || !buckets || clr_u64(r, buckets, &length) || length > MAX_ENTRIES)
    return 0;
  size_t seen = 0;
  for (uint64_t b = 0; b < length; b++) {
    uint64_t entry;
    if (clr_u64(r, buckets + 8 * (3 + b), &entry)) return 0;
    for (; !(entry & 1) && entry && seen < MAX_ENTRIES; seen++) {
      uint64_t th;
      if (clr_u64(r, entry + value_off, &th)) return 0;
      th &= ~1ull;
      if (match(r, th, want)) return th;
      if (clr_u64(r, entry + next_off, &entry)) return 0;
    }
  }
  return 0;
}

struct array_want {
  uint64_t element;
};

static int is_array_of(const dnt_clr *r, uint64_t th, const void *want) {
  uint32_t flags, rid, n;
  uint64_t module, inst, args[MAX_ARGS];
  return mt_facts(r, th, &flags, &module, &rid, &inst, args, &n) == 0 && (flags & MT_ARRAY_MASK) == MT_ARRAY &&
         (flags & MT_SZARRAY) && inst == ((const struct array_want *)want)->element;
}

struct instance_want {
  uint64_t module;
  uint32_t rid, nargs;
  uint64_t args[MAX_ARGS];
};

static int is_instance_of(const dnt_clr *r, uint64_t th, const void *want) {
  const struct instance_want *w = want;
  uint32_t flags, rid, n;
  uint64_t module, inst, args[MAX_ARGS];
  return mt_facts(r, th, &flags, &module, &rid, &inst, args, &n) == 0 && module == w->module && rid == w->rid &&
         n == w->nargs && memcmp(args, w->args, 8ull * n) == 0;
}

static uint64_t resolve(const dnt_clr *r, struct sigr *g, uint64_t module, uint64_t enclosing, uint64_t corelib, int depth);

/* A TypeDefOrRef token of module's to the loaded type's MethodTable (0: not loaded). */
static uint64_t type_of_token(const dnt_clr *r, uint64_t module, uint32_t coded) {
  uint64_t off;
  uint32_t rid = coded >> 2;
  if ((coded & 3) == 0 && clr_field(r, "Module", "TypeDefToMethodTableMap", &off) == 0) return lookup_map(r, module + off, rid);
  if ((coded & 3) == 1 && clr_field(r, "Module", "TypeRefToMethodTableMap", &off) == 0) return lookup_map(r, module + off, rid);
  return 0;
}

/* The loaded type a signature names, read from g: 0 when the runtime has not loaded it (or the
 * signature is of a kind not resolved here). module: the signature's; enclosing: the class whose
 * generic parameters VAR names. */
static uint64_t resolve(const dnt_clr *r, struct sigr *g, uint64_t module, uint64_t enclosing, uint64_t corelib, int depth) {
  if (depth > 8 || g->p >= g->end) return g->bad = 1, 0;
  uint8_t t = *g->p++;
  while ((t == 0x1F || t == 0x20) && !g->bad) sig_number(g), t = g->p < g->end ? *g->p++ : (g->bad = 1, 0);
  if (t < sizeof primitive_names / sizeof primitive_names[0] && primitive_names[t]) return corelib_type(r, primitive_names[t]);
  switch (t) {
  case 0x0F: /* PTR: the runtime gives a pointer UIntPtr's MethodTable */
    resolve(r, g, module, enclosing, corelib, depth + 1);
    return corelib_type(r, "UIntPtr");
  case 0x11: case 0x12: return type_of_token(r, module, sig_number(g));
  case 0x13: { /* VAR: the enclosing class's argument */
    uint32_t i = sig_number(g), flags, rid, n;
    uint64_t m, inst, args[MAX_ARGS];
    return mt_facts(r, enclosing, &flags, &m, &rid, &inst, args, &n) == 0 && i < n ? args[i] : 0;
  }
  case 0x1D: { /* SZARRAY: the array of the element, among the element's module's and CoreLib's */
    struct array_want w = {resolve(r, g, module, enclosing, corelib, depth + 1)};
    uint32_t flags, rid, n;
    uint64_t m = 0, inst, args[MAX_ARGS];
    if (!w.element) return 0;
    if (!(w.element & 2)) mt_facts(r, w.element, &flags, &m, &rid, &inst, args, &n);
    uint64_t th = find_loaded(r, m, is_array_of, &w);
    return th ? th : m == corelib ? 0 : find_loaded(r, corelib, is_array_of, &w);
  }
  case 0x15: { /* GENERICINST: the definition's instance with these arguments */
    if (g->p >= g->end) return g->bad = 1, 0;
    g->p++; /* CLASS or VALUETYPE */
    uint64_t def = type_of_token(r, module, sig_number(g));
    struct instance_want w = {0};
    uint32_t n = sig_number(g), flags;
    uint64_t inst, dummy[MAX_ARGS];
    uint32_t dn;
    if (g->bad || n > MAX_ARGS) return g->bad = 1, 0;
    for (uint32_t i = 0; i < n; i++) {
      w.args[i] = resolve(r, g, module, enclosing, corelib, depth + 1);
      if (!w.args[i]) return 0;
    }
    w.nargs = n;
    if (!def || mt_facts(r, def, &flags, &w.module, &w.rid, &inst, dummy, &dn) != 0) return 0;
    uint64_t th = find_loaded(r, w.module, is_instance_of, &w);
    for (uint32_t i = 0; !th && i < n; i++) { /* or among an argument's module's */
      uint32_t f, rid, k;
      uint64_t m, in, a[MAX_ARGS];
      if (!(w.args[i] & 2) && mt_facts(r, w.args[i], &f, &m, &rid, &in, a, &k) == 0 && m != w.module)
        th = find_loaded(r, m, is_instance_of, &w);
    }
    return th;
  }
  default: return 0;
  }
}

/* The field's type's MethodTable as the runtime's debugger interface finds it (a type it has
 * loaded), 0 otherwise. */
static uint64_t type_mt(const dnt_clr *r, uint64_t module, uint64_t enclosing, const uint8_t *sig, size_t siglen) {
  uint64_t at, object_mt, corelib = 0, off;
  if (dnt_clr_global(r, "ObjectMethodTable", &at) == 0 && clr_u64(r, at, &object_mt) == 0 &&
      clr_field(r, "MethodTable", "Module", &off) == 0)
    clr_u64(r, object_mt + off, &corelib);
  struct sigr g = {sig, sig + siglen, 0};
  uint64_t th = siglen ? resolve(r, &g, module, enclosing, corelib, 0) : 0;
  return g.bad ? 0 : th;
}

uint64_t dnt__statics_base(const dnt_clr *r, uint64_t mt, int gc) {
  uint64_t flags2_off, aux_off, aux, size, gc_off, nongc_off, base, mask = ~1ull;
  uint32_t flags2;
  if (clr_field(r, "MethodTable", "MTFlags2", &flags2_off) || clr_field(r, "MethodTable", "AuxiliaryData", &aux_off) ||
      clr_field(r, "DynamicStaticsInfo", "!", &size) || clr_field(r, "DynamicStaticsInfo", "GCStatics", &gc_off) ||
      clr_field(r, "DynamicStaticsInfo", "NonGCStatics", &nongc_off) ||
      dnt_core_read_u32(dnt__clr_core(r), mt + flags2_off, &flags2) || !(flags2 & MT_DYNAMIC_STATICS) ||
      clr_u64(r, mt + aux_off, &aux) || !aux || clr_u64(r, aux - size + (gc ? gc_off : nongc_off), &base))
    return 0;
  dnt_clr_global(r, "StaticsPointerMask", &mask);
  return base & mask;
}

struct list {
  struct dnt_clr_field *v;
  size_t n, cap;
  unsigned instances; /* instance fields listed so far (the parents' included) */
};

/* One class of the hierarchy (its parents first, as SOS). 0, or -1. */
static int class_fields(const dnt_clr *r, uint64_t mt, uint64_t obj, struct list *l, int depth) {
  uint64_t parent_off, canon_off, list_off, ninst_off, nstat_off, parent, v, klass, descs, module;
  uint16_t ninst, nstat;
  const dnt_core *c = dnt__clr_core(r);
  if (depth > MAX_DEPTH || clr_field(r, "MethodTable", "ParentMethodTable", &parent_off) ||
      clr_field(r, "MethodTable", "EEClassOrCanonMT", &canon_off) || clr_field(r, "EEClass", "FieldDescList", &list_off) ||
      clr_field(r, "EEClass", "NumInstanceFields", &ninst_off) || clr_field(r, "EEClass", "NumStaticFields", &nstat_off) ||
      clr_u64(r, mt + parent_off, &parent) || clr_u64(r, mt + canon_off, &v))
    return -1;
  if (parent && class_fields(r, parent, obj, l, depth + 1) != 0) return -1;
  uint64_t canon = mt;
  if (v & 1) { /* the canonical MethodTable holds the class */
    canon = v & ~1ull;
    if (clr_u64(r, canon + canon_off, &v) || (v & 1)) return -1;
  }
  klass = v;
  char path[4096];
  if (!klass || clr_u64(r, klass + list_off, &descs) || dnt_core_read(c, klass + ninst_off, &ninst, 2) ||
      dnt_core_read(c, klass + nstat_off, &nstat, 2))
    return -1;
  if (module_of(r, mt, &module, path, sizeof path) != 0) path[0] = '\0';
  unsigned statics = 0;
  for (uint64_t d = descs; (l->instances < ninst || statics < nstat) && l->n < MAX_FIELDS; d += FIELD_DESC_SIZE) {
    uint64_t enclosing;
    uint32_t w1, w2;
    if (!descs || clr_u64(r, d, &enclosing) || dnt_core_read_u32(c, d + 8, &w1) || dnt_core_read_u32(c, d + 12, &w2))
      return -1;
    if (enclosing != canon && enclosing != mt) return -1; /* not a FieldDesc of this class: a layout unknown here */
    if (l->n == l->cap) {
      size_t cap = l->cap ? l->cap * 2 : 32;
      struct dnt_clr_field *nv = realloc(l->v, cap * sizeof *nv);
      if (!nv) return -1;
      l->v = nv, l->cap = cap;
    }
    struct dnt_clr_field *f = &l->v[l->n++];
    memset(f, 0, sizeof *f);
    f->token = 0x04000000u | (w1 & 0xffffff);
    f->is_static = (w1 >> 24) & 1;
    f->thread_static = (w1 >> 25) & 1;
    f->offset = w2 & 0x7ffffff;
    f->type = (uint8_t)(w2 >> 27);
    f->enclosing = mt;
    if (f->is_static) statics++;
    else l->instances++;
    uint8_t element = 0, sig[256];
    uint32_t token = 0;
    size_t siglen = 0;
    if (!path[0] || !dnt_assembly_field(path, w1 & 0xffffff, f->name, sizeof f->name, &element, &token, sig, sizeof sig,
                                        &siglen))
      snprintf(f->name, sizeof f->name, "?");
    /* a generic instance's own type is not what the runtime names it by: no token then */
    f->sig_type = element, f->type_token = element == 0x15 ? 0 : token;
    f->type_mt = type_mt(r, module, canon, sig, siglen);
    if (!f->is_static) {
      f->address = obj ? obj + 8 + f->offset : 0;
    } else if (!f->thread_static) {
      uint64_t base = dnt__statics_base(r, mt, f->type == 0x11 || f->type == 0x12);
      f->address = base ? base + f->offset : 0;
    }
  }
  return 0;
}

int dnt_clr_fields(const dnt_clr *r, uint64_t mt, uint64_t obj, struct dnt_clr_field **v, size_t *n) {
  struct list l = {0};
  *v = NULL, *n = 0;
  if (class_fields(r, mt, obj, &l, 0) != 0) {
    free(l.v);
    return -1;
  }
  *v = l.v, *n = l.n;
  return 0;
}

int dnt_clr_field_counts(const dnt_clr *r, uint64_t mt, unsigned *instances, unsigned *statics) {
  uint64_t canon_off, ninst_off, nstat_off, v;
  uint16_t ninst, nstat;
  const dnt_core *c = dnt__clr_core(r);
  if (clr_field(r, "MethodTable", "EEClassOrCanonMT", &canon_off) || clr_field(r, "EEClass", "NumInstanceFields", &ninst_off) ||
      clr_field(r, "EEClass", "NumStaticFields", &nstat_off) || clr_u64(r, mt + canon_off, &v))
    return -1;
  if ((v & 1) && clr_u64(r, (v & ~1ull) + canon_off, &v)) return -1;
  if ((v & 1) || !v || dnt_core_read(c, v + ninst_off, &ninst, 2) || dnt_core_read(c, v + nstat_off, &nstat, 2)) return -1;
  *instances = ninst, *statics = nstat;
  return 0;
}

/* A thread static's storage on one thread (the Thread contract's GetThreadLocalStaticBase): the
 * class's TLS index (in its ThreadStaticsInfo, just before its auxiliary data: the GC index for
 * references and structs, else the other), its type and offset (the top byte, the low 24 bits);
 * the thread's ThreadLocalData: a non-collectible index is an element of its array (an Object[],
 * the first elements unused), a collectible one a handle in its array, a direct one an offset in
 * the ThreadLocalData itself; storage not there yet may be in flight (a list of index, object). */
int dnt_clr_thread_static(const dnt_clr *r, uint64_t mt, const struct dnt_clr_field *f, uint64_t thread, uint64_t *at) {
  uint64_t aux_off, size, index_off, tld_off, tld, aux, base = 0, unused = 2, data_off = 16;
  uint32_t raw;
  const dnt_core *c = dnt__clr_core(r);
  int gc = f->type == 0x11 || f->type == 0x12;
  if (!f->thread_static || clr_field(r, "MethodTable", "AuxiliaryData", &aux_off) ||
      clr_field(r, "ThreadStaticsInfo", "!", &size) ||
      clr_field(r, "ThreadStaticsInfo", gc ? "GCTlsIndex" : "NonGCTlsIndex", &index_off) ||
      clr_field(r, "Thread", "ThreadLocalDataPtr", &tld_off) || clr_u64(r, mt + aux_off, &aux) || !aux ||
      dnt_core_read_u32(c, aux - size + index_off, &raw) || raw == UINT32_MAX || clr_u64(r, thread + tld_off, &tld) ||
      !tld)
    return -1;
  dnt_clr_global(r, "NumberOfTlsOffsetsNotUsedInNoncollectibleArray", &unused);
  dnt_clr_global(r, "PtrArrayOffsetToDataArray", &data_off);
  uint32_t type = raw >> 24, offset = raw & 0xffffff, count;
  uint64_t count_off, array_off, array;
  if (type == 0 && !clr_field(r, "ThreadLocalData", "NonCollectibleTlsDataCount", &count_off) &&
      !clr_field(r, "ThreadLocalData", "NonCollectibleTlsArrayData", &array_off) &&
      !dnt_core_read_u32(c, tld + count_off, &count) && count > offset && offset >= unused &&
      !clr_u64(r, tld + array_off, &array) && array)
    clr_u64(r, array + data_off + 8ull * (offset - unused), &base);
  else if (type == 1 && !clr_field(r, "ThreadLocalData", "CollectibleTlsDataCount", &count_off) &&
           !clr_field(r, "ThreadLocalData", "CollectibleTlsArrayData", &array_off) &&
           !dnt_core_read_u32(c, tld + count_off, &count) && count > offset && !clr_u64(r, tld + array_off, &array) &&
           array && !clr_u64(r, array + 8ull * offset, &base) && base)
    clr_u64(r, base, &base); /* a handle: the object it holds */
  else if (type == 2)
    base = tld + offset;
  uint64_t flight_off, next_off, idx_off, data_field, node = 0;
  if (!base && !clr_field(r, "ThreadLocalData", "InFlightData", &flight_off) &&
      !clr_field(r, "InFlightTLSData", "Next", &next_off) && !clr_field(r, "InFlightTLSData", "TlsIndex", &idx_off) &&
      !clr_field(r, "InFlightTLSData", "TLSData", &data_field) && !clr_u64(r, tld + flight_off, &node))
    for (int hops = 0; node && hops < 1024; hops++) {
      uint32_t idx;
      if (!dnt_core_read_u32(c, node + idx_off, &idx) && idx == raw) {
        if (!clr_u64(r, node + data_field, &base) && base) clr_u64(r, base, &base); /* a handle: its object */
        break;
      }
      if (clr_u64(r, node + next_off, &node)) break;
    }
  if (!base) return -1;
  *at = base + f->offset;
  return 0;
}
