/* objects.c: objects, their types and the exceptions among them (dnt-core.h). An object begins
 * with its MethodTable pointer (its low bits, ObjectToMethodTableUnmask, are flags). A type's
 * name: the TypeDef row in the high bits of MethodTable.MTFlags2 (RuntimeTypeSystem's
 * GetTypeDefToken), in the metadata of the module MethodTable.Module, whose file Module.Path
 * names (a UTF-16 string). Strings: m_StringLength UTF-16 units from m_FirstChar. Exceptions:
 * System.Exception's fields as the descriptor's type Exception places them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core-int.h"
#include "dnt-profile.h"

#define MAX_PATH_UNITS 4096
#define MAX_MESSAGE_UNITS 65536

static int field(const dnt_clr *r, const char *type, const char *name, uint64_t *off) {
  return dnt_clr_field(r, type, name, off);
}

int dnt_clr_object_mt(const dnt_clr *r, uint64_t obj, uint64_t *mt) {
  uint64_t unmask = 7, v;
  dnt_clr_global(r, "ObjectToMethodTableUnmask", &unmask);
  if (!obj || dnt_core_read_u64(dnt__clr_core(r), obj, &v) != 0) return -1;
  *mt = v & ~unmask;
  return *mt ? 0 : -1;
}

/* UTF-16 units (n of them at addr) as UTF-8 into a new string; a lone surrogate is U+FFFD. */
static char *utf8_of(const dnt_core *c, uint64_t addr, size_t n) {
  uint16_t *u = malloc((n ? n : 1) * sizeof *u);
  char *out = malloc(n * 3 + 1);
  if (!u || !out || (n && dnt_core_read(c, addr, u, n * 2) != 0)) {
    free(u), free(out);
    return NULL;
  }
  size_t o = 0;
  for (size_t i = 0; i < n; i++) {
    uint32_t cp = u[i];
    if (cp >= 0xD800 && cp < 0xDC00 && i + 1 < n && u[i + 1] >= 0xDC00 && u[i + 1] < 0xE000)
      cp = 0x10000 + ((cp - 0xD800) << 10) + (u[++i] - 0xDC00);
    else if (cp >= 0xD800 && cp < 0xE000)
      cp = 0xFFFD;
    if (cp < 0x80) {
      out[o++] = (char)cp;
    } else if (cp < 0x800) {
      out[o++] = (char)(0xC0 | cp >> 6), out[o++] = (char)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out[o++] = (char)(0xE0 | cp >> 12), out[o++] = (char)(0x80 | (cp >> 6 & 0x3F)), out[o++] = (char)(0x80 | (cp & 0x3F));
    } else { /* four bytes: two units in, four out, within the 3 per unit kept */
      out[o++] = (char)(0xF0 | cp >> 18), out[o++] = (char)(0x80 | (cp >> 12 & 0x3F));
      out[o++] = (char)(0x80 | (cp >> 6 & 0x3F)), out[o++] = (char)(0x80 | (cp & 0x3F));
    }
  }
  out[o] = '\0';
  free(u);
  return out;
}

int dnt_clr_string(const dnt_clr *r, uint64_t obj, size_t max, char **out) {
  uint64_t len_off, first_off;
  uint32_t len;
  if (field(r, "String", "m_StringLength", &len_off) || field(r, "String", "m_FirstChar", &first_off) ||
      dnt_core_read_u32(dnt__clr_core(r), obj + len_off, &len) != 0)
    return -1;
  *out = utf8_of(dnt__clr_core(r), obj + first_off, len < max ? len : max);
  return *out ? 0 : -1;
}

/* The file of the module at module (Module.Path, UTF-16, NUL-terminated) into buf. */
static int module_path(const dnt_clr *r, uint64_t module, char *buf, size_t cap) {
  uint64_t off, at;
  const dnt_core *c = dnt__clr_core(r);
  if (field(r, "Module", "Path", &off) || dnt_core_read_u64(c, module + off, &at) != 0 || !at) return -1;
  size_t n = 0;
  for (uint16_t u = 1; n < MAX_PATH_UNITS; n++) {
    if (dnt_core_read(c, at + 2 * n, &u, 2) != 0) return -1;
    if (!u) break;
  }
  char *path = utf8_of(c, at, n);
  if (!path) return -1;
  int ok = strlen(path) < cap;
  if (ok) memcpy(buf, path, strlen(path) + 1);
  free(path);
  return ok ? 0 : -1;
}

int dnt_clr_type_name(const dnt_clr *r, uint64_t mt, char *buf, size_t cap) {
  uint64_t flags2_off, module_off, module;
  uint32_t flags2;
  const dnt_core *c = dnt__clr_core(r);
  if (field(r, "MethodTable", "MTFlags2", &flags2_off) || field(r, "MethodTable", "Module", &module_off) ||
      dnt_core_read_u32(c, mt + flags2_off, &flags2) != 0 || dnt_core_read_u64(c, mt + module_off, &module) != 0)
    return -1;
  uint32_t rid = flags2 >> 8;
  char path[4096];
  if (!rid || module_path(r, module, path, sizeof path) != 0) return -1;
  return dnt_assembly_type_name(path, rid, buf, cap) ? 0 : -1;
}

/* A field of an exception holding an object (a string or another exception), 0 when none. */
static int ref_field(const dnt_clr *r, uint64_t obj, const char *name, uint64_t *v) {
  uint64_t off;
  *v = 0;
  return field(r, "Exception", name, &off) || dnt_core_read_u64(dnt__clr_core(r), obj + off, v) != 0 ? -1 : 0;
}

int dnt_clr_exception_read(const dnt_clr *r, uint64_t obj, struct dnt_clr_exception *e, char *err, size_t cap) {
  memset(e, 0, sizeof *e);
  e->address = obj;
  uint64_t message, trace, hr_off;
  if (dnt_clr_object_mt(r, obj, &e->mt) != 0 || ref_field(r, obj, "_message", &message) ||
      ref_field(r, obj, "_innerException", &e->inner) || ref_field(r, obj, "_stackTraceString", &trace) ||
      field(r, "Exception", "_HResult", &hr_off) || dnt_core_read_u32(dnt__clr_core(r), obj + hr_off, &e->hresult)) {
    snprintf(err, cap, "the core does not hold an exception at 0x%llx", (unsigned long long)obj);
    return -1;
  }
  if (dnt_clr_type_name(r, e->mt, e->type, sizeof e->type) != 0) e->type[0] = '\0';
  if (message && dnt_clr_string(r, message, MAX_MESSAGE_UNITS, &e->message) != 0) e->message = NULL;
  if (trace && dnt_clr_string(r, trace, MAX_MESSAGE_UNITS, &e->stack_trace_string) != 0) e->stack_trace_string = NULL;
  uint64_t inner_mt;
  if (e->inner && (dnt_clr_object_mt(r, e->inner, &inner_mt) != 0 ||
                   dnt_clr_type_name(r, inner_mt, e->inner_type, sizeof e->inner_type) != 0))
    e->inner_type[0] = '\0';
  return 0;
}

void dnt_clr_exception_release(struct dnt_clr_exception *e) {
  free(e->message);
  free(e->stack_trace_string);
  memset(e, 0, sizeof *e);
}
