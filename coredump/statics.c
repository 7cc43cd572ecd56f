/* statics.c: which static field lives at an address (dnt-core.h), for gcroot's "(static
 * variable: ...)". A class's reference-type statics are slots of an Object[] the runtime keeps
 * (its GC statics base points at the first of them). The classes are the modules' loaded ones:
 * the AppDomain's list of assemblies (an ArrayList: a count, then blocks of {next, size,
 * elements}; an element is a DomainAssembly, a pointer to its Assembly), each assembly's module, each module's TypeDef-to-MethodTable map (a chain of
 * tables: {next, table, count, flags mask}; the first table's mask is the one that holds). The class whose statics base is the last at or
 * below the address holds it, if one of its fields is there. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core-int.h"

#define MAX_ASSEMBLIES 65536
#define MAX_TYPES (1u << 22)
#define MAX_HOPS 64
#define E_CLASS 0x12

struct best {
  uint64_t addr, mt, base;
};

/* The classes of the module's TypeDef map: the one whose GC statics begin nearest below addr. */
static void scan_module(const dnt_clr *r, uint64_t module, struct best *b) {
  uint64_t map_off, next_off, count_off, table_off, mask_off, map;
  if (clr_field(r, "Module", "TypeDefToMethodTableMap", &map_off) || clr_field(r, "ModuleLookupMap", "Next", &next_off) ||
      clr_field(r, "ModuleLookupMap", "Count", &count_off) || clr_field(r, "ModuleLookupMap", "TableData", &table_off) ||
      clr_field(r, "ModuleLookupMap", "SupportedFlagsMask", &mask_off))
    return;
  map = module + map_off;
  uint64_t seen = 0, mask;
  if (clr_u64(r, map + mask_off, &mask)) return;
  for (int hops = 0; map && hops < MAX_HOPS; hops++) {
    uint32_t count;
    uint64_t table;
    if (dnt_core_read_u32(dnt__clr_core(r), map + count_off, &count) || clr_u64(r, map + table_off, &table)) return;
    for (uint32_t i = 0; i < count && seen < MAX_TYPES; i++, seen++) {
      uint64_t mt, base;
      if (clr_u64(r, table + 8ull * i, &mt) != 0) break;
      mt &= ~mask;
      if (mt && (base = dnt__statics_base(r, mt, 1)) && base <= b->addr && base > b->base) b->base = base, b->mt = mt;
    }
    if (clr_u64(r, map + next_off, &map) != 0) return;
  }
}

int dnt_clr_static_at(const dnt_clr *r, uint64_t addr, uint64_t *mt, char *name, size_t cap) {
  uint64_t domain_at, domain, list_off, count_off, first_off, next_off, size_off, start_off, module_off;
  uint32_t count;
  if (dnt_clr_global(r, "AppDomain", &domain_at) || clr_u64(r, domain_at, &domain) || !domain ||
      clr_field(r, "AppDomain", "DomainAssemblyList", &list_off) || clr_field(r, "ArrayListBase", "Count", &count_off) ||
      clr_field(r, "ArrayListBase", "FirstBlock", &first_off) || clr_field(r, "ArrayListBlock", "Next", &next_off) ||
      clr_field(r, "ArrayListBlock", "Size", &size_off) || clr_field(r, "ArrayListBlock", "ArrayStart", &start_off) ||
      clr_field(r, "Assembly", "Module", &module_off) ||
      dnt_core_read_u32(dnt__clr_core(r), domain + list_off + count_off, &count))
    return -1;
  struct best b = {.addr = addr};
  uint64_t block = domain + list_off + first_off;
  for (uint32_t done = 0, hops = 0; block && done < count && done < MAX_ASSEMBLIES && hops < MAX_ASSEMBLIES; hops++) {
    uint32_t size;
    if (dnt_core_read_u32(dnt__clr_core(r), block + size_off, &size)) break;
    for (uint32_t i = 0; i < size && done < count; i++, done++) {
      uint64_t domain_assembly, assembly, module; /* a DomainAssembly: one pointer, to its Assembly */
      if (clr_u64(r, block + start_off + 8ull * i, &domain_assembly) == 0 && domain_assembly &&
          clr_u64(r, domain_assembly, &assembly) == 0 && assembly &&
          clr_u64(r, assembly + module_off, &module) == 0 && module)
        scan_module(r, module, &b);
    }
    if (clr_u64(r, block + next_off, &block)) break;
  }
  if (!b.mt) return -1;
  struct dnt_clr_field *v;
  size_t n;
  if (dnt_clr_fields(r, b.mt, 0, &v, &n) != 0) return -1;
  int rc = -1;
  for (size_t i = 0; i < n && rc; i++)
    if (v[i].is_static && !v[i].thread_static && v[i].type == E_CLASS && v[i].address == addr) {
      snprintf(name, cap, "%s", v[i].name);
      *mt = b.mt, rc = 0;
    }
  free(v);
  return rc;
}
