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
#define MT_HAS_COMPONENT_SIZE 0x80000000u

static int field(const dnt_clr *r, const char *type, const char *name, uint64_t *off) {
  return dnt_clr_field(r, type, name, off);
}

static int u64_at(const dnt_clr *r, uint64_t at, uint64_t *v) { return dnt_core_read_u64(dnt__clr_core(r), at, v); }

/* The value of rid in a module's ModuleLookupMap at map (0 when not there). */
static uint64_t lookup_map(const dnt_clr *r, uint64_t map, uint32_t rid) {
  uint64_t next_off, count_off, table_off, mask_off;
  if (field(r, "ModuleLookupMap", "Next", &next_off) || field(r, "ModuleLookupMap", "Count", &count_off) ||
      field(r, "ModuleLookupMap", "TableData", &table_off) || field(r, "ModuleLookupMap", "SupportedFlagsMask", &mask_off))
    return 0;
  for (int hops = 0; map && hops < 64; hops++) {
    uint32_t count;
    uint64_t table, mask, v;
    if (dnt_core_read_u32(dnt__clr_core(r), map + count_off, &count) || u64_at(r, map + table_off, &table) ||
        u64_at(r, map + mask_off, &mask))
      return 0;
    if (rid < count) return u64_at(r, table + 8ull * rid, &v) == 0 ? v & ~mask : 0;
    rid -= count;
    if (u64_at(r, map + next_off, &map) != 0) return 0;
  }
  return 0;
}

/* The class's module and its file. */
static int module_of(const dnt_clr *r, uint64_t mt, uint64_t *module, char *path, size_t cap) {
  uint64_t off;
  if (field(r, "MethodTable", "Module", &off) || u64_at(r, mt + off, module) || !*module) return -1;
  return dnt_clr_module_path(r, *module, path, cap);
}

/* The MethodTable of a primitive (System.NAME) from CoreLib's TypeDef map, 0 when not loaded. */
static uint64_t corelib_type(const dnt_clr *r, const char *name) {
  uint64_t at, object_mt, module, map_off;
  char path[4096];
  if (dnt_clr_global(r, "ObjectMethodTable", &at) || u64_at(r, at, &object_mt) ||
      module_of(r, object_mt, &module, path, sizeof path) || field(r, "Module", "TypeDefToMethodTableMap", &map_off))
    return 0;
  uint32_t td = dnt_assembly_find_type(path, "System", name);
  return td ? lookup_map(r, module + map_off, td) : 0;
}

static const char *const primitive_names[] = {
    [0x02] = "Boolean", [0x03] = "Char",   [0x04] = "SByte",  [0x05] = "Byte",   [0x06] = "Int16", [0x07] = "UInt16",
    [0x08] = "Int32",   [0x09] = "UInt32", [0x0A] = "Int64",  [0x0B] = "UInt64", [0x0C] = "Single", [0x0D] = "Double",
    [0x0E] = "String",  [0x18] = "IntPtr", [0x19] = "UIntPtr", [0x1C] = "Object"};

/* The field's type's MethodTable as the runtime's debugger interface finds it (a type it has
 * loaded: a primitive, or a class the module's maps hold), 0 otherwise. */
static uint64_t type_mt(const dnt_clr *r, uint64_t module, uint8_t element, uint32_t token) {
  uint64_t off;
  if (element < sizeof primitive_names / sizeof primitive_names[0] && primitive_names[element])
    return corelib_type(r, primitive_names[element]);
  if (element != 0x11 && element != 0x12) return 0;
  if (token >> 24 == 0x02 && field(r, "Module", "TypeDefToMethodTableMap", &off) == 0)
    return lookup_map(r, module + off, token & 0xffffff);
  if (token >> 24 == 0x01 && field(r, "Module", "TypeRefToMethodTableMap", &off) == 0)
    return lookup_map(r, module + off, token & 0xffffff);
  return 0;
}

/* A class's statics base: its GC statics (references and structs) or the others, 0 when none. */
static uint64_t statics_base(const dnt_clr *r, uint64_t mt, int gc) {
  uint64_t flags2_off, aux_off, aux, size, gc_off, nongc_off, base, mask = ~1ull;
  uint32_t flags2;
  if (field(r, "MethodTable", "MTFlags2", &flags2_off) || field(r, "MethodTable", "AuxiliaryData", &aux_off) ||
      field(r, "DynamicStaticsInfo", "!", &size) || field(r, "DynamicStaticsInfo", "GCStatics", &gc_off) ||
      field(r, "DynamicStaticsInfo", "NonGCStatics", &nongc_off) ||
      dnt_core_read_u32(dnt__clr_core(r), mt + flags2_off, &flags2) || !(flags2 & MT_DYNAMIC_STATICS) ||
      u64_at(r, mt + aux_off, &aux) || !aux || u64_at(r, aux - size + (gc ? gc_off : nongc_off), &base))
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
  if (depth > MAX_DEPTH || field(r, "MethodTable", "ParentMethodTable", &parent_off) ||
      field(r, "MethodTable", "EEClassOrCanonMT", &canon_off) || field(r, "EEClass", "FieldDescList", &list_off) ||
      field(r, "EEClass", "NumInstanceFields", &ninst_off) || field(r, "EEClass", "NumStaticFields", &nstat_off) ||
      u64_at(r, mt + parent_off, &parent) || u64_at(r, mt + canon_off, &v))
    return -1;
  if (parent && class_fields(r, parent, obj, l, depth + 1) != 0) return -1;
  uint64_t canon = mt;
  if (v & 1) { /* the canonical MethodTable holds the class */
    canon = v & ~1ull;
    if (u64_at(r, canon + canon_off, &v) || (v & 1)) return -1;
  }
  klass = v;
  char path[4096];
  if (!klass || u64_at(r, klass + list_off, &descs) || dnt_core_read(c, klass + ninst_off, &ninst, 2) ||
      dnt_core_read(c, klass + nstat_off, &nstat, 2))
    return -1;
  if (module_of(r, mt, &module, path, sizeof path) != 0) path[0] = '\0';
  unsigned statics = 0;
  for (uint64_t d = descs; (l->instances < ninst || statics < nstat) && l->n < MAX_FIELDS; d += FIELD_DESC_SIZE) {
    uint64_t enclosing;
    uint32_t w1, w2;
    if (!descs || u64_at(r, d, &enclosing) || dnt_core_read_u32(c, d + 8, &w1) || dnt_core_read_u32(c, d + 12, &w2))
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
    uint8_t element = 0;
    uint32_t token = 0;
    if (!path[0] || !dnt_assembly_field(path, w1 & 0xffffff, f->name, sizeof f->name, &element, &token))
      snprintf(f->name, sizeof f->name, "?");
    /* a generic instance's own type is not what the runtime names it by: no token then */
    f->sig_type = element, f->type_token = element == 0x15 ? 0 : token;
    f->type_mt = type_mt(r, module, element ? element : f->type, f->type_token);
    if (!f->is_static) {
      f->address = obj ? obj + 8 + f->offset : 0;
    } else if (!f->thread_static) {
      uint64_t base = statics_base(r, mt, f->type == 0x11 || f->type == 0x12);
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
