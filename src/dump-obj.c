/* dump analyze's dumpobj: an object as SOS's dumpobj prints it: its type (the runtime's own
 * format of the name), MethodTable, size, file or array shape, a string's text, then its fields
 * (the parents' first; each class's instance fields, then its statics): the field type's
 * MethodTable, token, offset, type (20 columns, cut on the left), whether a value type, instance
 * or static, value and name. Command-line glue: it prints. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dnt-core.h"
#include "dnt-profile.h"
#include "dnt-trace.h"
#include "dump-analyze.h"
#include "util.h"

#define MT_ARRAY_MASK 0x000C0000u
#define MT_ARRAY 0x00080000u
#define MT_SZARRAY 0x00020000u
#define MT_HAS_COMPONENT_SIZE 0x80000000u
#define ARRAY_BASE_SIZE 0x18
#define MAX_STRING 0x200000
#define CONTENT 128

enum { E_BOOLEAN = 0x02, E_CHAR, E_I1, E_U1, E_I2, E_U2, E_I4, E_U4, E_I8, E_U8, E_R4, E_R8, E_STRING,
       E_PTR = 0x0F, E_VALUETYPE = 0x11, E_CLASS = 0x12, E_I = 0x18, E_U = 0x19, E_FNPTR = 0x1B };

/* The names SOS gives a CorElementType alone (its cortypeinfo). */
static const char *element_name(uint8_t t) {
  static const char *const names[] = {
      [0x01] = "Void",  [0x02] = "Boolean", [0x03] = "Char",   [0x04] = "SByte",    [0x05] = "Byte",
      [0x06] = "Int16", [0x07] = "UInt16",  [0x08] = "Int32",  [0x09] = "UInt32",   [0x0A] = "Int64",
      [0x0B] = "UInt64", [0x0C] = "Single", [0x0D] = "Double", [0x0E] = "String",   [0x0F] = "PTR",
      [0x10] = "BYREF", [0x11] = "VALUETYPE", [0x12] = "CLASS", [0x13] = "VAR",     [0x14] = "ARRAY",
      [0x15] = "GENERICINST", [0x16] = "TypedReference", [0x18] = "IntPtr", [0x19] = "UIntPtr",
      [0x1B] = "FNPTR", [0x1C] = "Object", [0x1D] = "SZARRAY", [0x1E] = "MVAR"};
  return t < sizeof names / sizeof names[0] && names[t] ? names[t] : "";
}

/* A name in SOS's 20 columns: right-aligned, or its last 17 characters after "...". */
static void put_type(const char *name) {
  size_t n = strlen(name);
  char *safe = dnt_safe_text(n > 20 ? name + n - 17 : name);
  if (n > 20) printf("...%s ", safe);
  else printf("%20s ", safe);
  free(safe);
}

static void type_column(struct analysis *a, const struct dnt_clr_field *f) {
  char name[2048];
  if ((f->type == E_VALUETYPE || f->type == E_CLASS) && f->type_mt &&
      dnt_clr_type_name_sos(a->clr, f->type_mt, name, sizeof name) == 0)
    return put_type(name);
  if (f->type == E_CLASS && f->type_token) {
    char path[4096];
    uint64_t module, off;
    if (f->type_token >> 24 == 0x02 && dnt_clr_field(a->clr, "MethodTable", "Module", &off) == 0 &&
        dnt_core_read_u64(a->core, f->enclosing + off, &module) == 0 &&
        dnt_clr_module_path(a->clr, module, path, sizeof path) == 0 &&
        dnt_assembly_type_name(path, f->type_token & 0xffffff, name, sizeof name))
      return put_type(name);
    return put_type(""); /* a TypeRef or TypeSpec: SOS names none */
  }
  uint8_t t = f->type_mt == 0 && f->sig_type && f->sig_type != f->type && !f->type_token ? f->sig_type : f->type;
  if ((t >= E_BOOLEAN && t <= E_STRING) || t == E_I || t == E_U || t == 0x1C) {
    snprintf(name, sizeof name, "System.%s", element_name(t));
    return put_type(name);
  }
  put_type(t == 0x15 ? "" : element_name(t));
}

/* The value at addr as SOS formats a field of type t: in 16 columns (a double unpadded), or
 * unpadded (a thread static's value on one thread). */
static void put_value(struct analysis *a, uint8_t t, uint64_t addr, int is_static, int align) {
  uint8_t b[8];
  size_t size = t == E_I1 || t == E_U1 || t == E_BOOLEAN ? 1 : t == E_I2 || t == E_U2 || t == E_CHAR ? 2
              : t == E_I4 || t == E_U4 || t == E_R4 ? 4 : 8;
  int w = align ? 16 : 0;
  if (!addr) return (void)printf("%*s", w, align ? " " : "");
  if (t == E_VALUETYPE && !is_static) return (void)printf("%016" PRIx64, addr);
  if (dnt_core_read(a->core, addr, b, size) != 0) return;
  uint64_t u = 0;
  memcpy(&u, b, size);
  switch (t) {
  case E_I1: printf("%*hd", w, (short)(int8_t)u); break;
  case E_I2: printf("%*hd", w, (short)(int16_t)u); break;
  case E_I4: printf("%*d", w, (int32_t)u); break;
  case E_I8: printf("%*" PRId64, w, (int64_t)u); break;
  case E_U1: case E_BOOLEAN: printf("%*hu", w, (unsigned short)(uint8_t)u); break;
  case E_U2: printf("%*hu", w, (unsigned short)u); break;
  case E_U4: printf("%*u", w, (uint32_t)u); break;
  case E_U8: printf("%*" PRIu64, w, u); break;
  case E_CHAR: printf("%*hx", w, (unsigned short)u); break;
  case E_I: case E_U: printf("%016" PRIX64, u); break;
  case E_R4: { float f; memcpy(&f, b, 4); printf("%f", (double)f); break; }
  case E_R8: { double d; memcpy(&d, b, 8); printf("%f", d); break; }
  case E_VALUETYPE: printf("%016" PRIx64, u ? addr : 0); break; /* a static struct: its box's slot */
  default: printf("%016" PRIx64, u); break;
  }
}

/* A thread static's value on each thread that has storage for it, as SOS lists them: the
 * thread's OS id, its value. */
static void put_thread_values(struct analysis *a, const struct dnt_clr_field *f) {
  struct dnt_clr_threads ts;
  char err[256];
  printf("    Thread static values (Thread:Value)\n");
  if (dnt_clr_threads_read(a->clr, &ts, err, sizeof err) != 0) return;
  for (size_t i = 0; i < ts.n; i++) {
    uint64_t at;
    if (!ts.v[i].os_id || dnt_clr_thread_static(a->clr, f->enclosing, f, ts.v[i].address, &at) != 0) continue;
    printf("        %x:", ts.v[i].os_id);
    put_value(a, f->type, at, 1, 0);
    printf("\n");
  }
  dnt_clr_threads_release(&ts);
}

/* The pointer-sized value of obj's instance field name, 0 when none. */
static uint64_t field_value(struct analysis *a, uint64_t mt, uint64_t obj, const char *name) {
  struct dnt_clr_field *v;
  size_t n;
  uint64_t value = 0;
  if (dnt_clr_fields(a->clr, mt, obj, &v, &n) != 0) return 0;
  for (size_t i = 0; i < n; i++)
    if (!v[i].is_static && strcmp(v[i].name, name) == 0 && v[i].address) dnt_core_read_u64(a->core, v[i].address, &value);
  free(v);
  return value;
}

/* A RuntimeType (or its cache): the type it stands for, as SOS shows it. */
static void print_runtime_type(struct analysis *a, uint64_t mt, uint64_t obj, const char *name) {
  if (strcmp(name, "System.RuntimeType+RuntimeTypeCache") == 0) {
    obj = field_value(a, mt, obj, "m_runtimeType");
    if (!obj || dnt_clr_object_mt(a->clr, obj, &mt) != 0) return;
  } else if (strcmp(name, "System.RuntimeType") != 0) {
    return;
  }
  uint64_t handle = field_value(a, mt, obj, "m_handle");
  if (!handle) return;
  if (handle & 2) return (void)printf("TypeDesc:    %016" PRIX64 "\n", (uint64_t)(handle & ~(uint64_t)2));
  char type[4096];
  if (dnt_clr_type_name_sos(a->clr, handle, type, sizeof type) != 0) return;
  char *safe = dnt_safe_text(type);
  printf("Type Name:   %s\nType MT:     %016" PRIx64 "\n", safe, handle);
  free(safe);
}

static void print_fields(struct analysis *a, uint64_t mt, uint64_t obj) {
  struct dnt_clr_field *v;
  size_t n;
  printf("Fields:\n");
  unsigned instances = 0, statics = 0; /* SOS lists fields when the type has some (its parents' instance
                                          fields, its own statics) */
  if (dnt_clr_field_counts(a->clr, mt, &instances, &statics) == 0 && instances + statics == 0)
    return (void)printf("None\n");
  if (dnt_clr_fields(a->clr, mt, obj, &v, &n) != 0) return (void)printf("Unable to display fields\n");
  if (!n) {
    printf("None\n");
    free(v);
    return;
  }
  printf("%16s %8s %8s %20s %4s %8s %16s %s\n", "MT", "Field", "Offset", "Type", "VT", "Attr", "Value", "Name");
  for (size_t i = 0; i < n; i++) {
    const struct dnt_clr_field *f = &v[i];
    int vt = (f->type >= E_BOOLEAN && f->type <= E_R8) || f->type == E_VALUETYPE || f->type == E_I || f->type == E_U;
    printf("%016" PRIx64 " %08x %8x ", f->type_mt, f->token, f->thread_static ? f->offset : f->offset + 8);
    type_column(a, f);
    printf("%4s ", vt ? "Yes" : "No");
    char *name = dnt_safe_text(f->name);
    if (f->thread_static) {
      printf("%8s  %s\n", "TLstatic", name);
      put_thread_values(a, f);
      printf("\n");
    } else {
      printf("%8s ", f->is_static ? "static" : "instance");
      put_value(a, f->type, f->address, f->is_static, 1);
      printf(" %s\n", name);
    }
    free(name);
  }
  free(v);
}

/* --json: the object and its fields' places (their values are the caller's to read). */
static void print_json(struct analysis *a, uint64_t obj, uint64_t mt, uint64_t size, const char *name) {
  struct dnt_clr_field *v = NULL;
  size_t n = 0;
  printf("{\"command\":\"dumpobj\",\"address\":\"0x%" PRIx64 "\",\"mt\":\"0x%" PRIx64 "\",\"size\":%" PRIu64 ",\"type\":",
         obj, mt, size);
  dnt_json_string(stdout, name);
  printf(",\"fields\":[");
  if (dnt_clr_fields(a->clr, mt, obj, &v, &n) == 0)
    for (size_t i = 0; i < n; i++) {
      printf("%s{\"name\":", i ? "," : "");
      dnt_json_string(stdout, v[i].name);
      printf(",\"token\":\"%08x\",\"typeMt\":\"0x%" PRIx64 "\",\"static\":%s,\"address\":\"0x%" PRIx64 "\"}",
             v[i].token, v[i].type_mt, v[i].is_static ? "true" : "false", v[i].address);
    }
  printf("]}\n");
  free(v);
}

int dnt_analyze_dumpobj(struct analysis *a, int argc, char **argv) {
  char *end = NULL;
  const char *arg = argc > 1 ? argv[argc - 1] : "";
  uint64_t obj = strtoull(arg + (strncasecmp(arg, "0x", 2) == 0 ? 2 : 0), &end, 16), mt, free_mt = 0, at;
  if (argc < 2 || *end || !obj) {
    dnt_error("dumpobj: give an object's address (hex)");
    return 1;
  }
  uint32_t flags, base, count = 0;
  if (dnt_clr_object_mt(a->clr, obj, &mt) != 0 || dnt_core_read_u32(a->core, mt, &flags) != 0 ||
      dnt_core_read_u32(a->core, mt + 4, &base) != 0 ||
      ((flags & MT_HAS_COMPONENT_SIZE) && dnt_core_read_u32(a->core, obj + 8, &count) != 0)) {
    dnt_error("dumpobj: %s%" PRIx64 " is not an object the core holds", "0x", obj);
    return 1;
  }
  uint64_t size = base + ((flags & MT_HAS_COMPONENT_SIZE) ? (uint64_t)(flags & 0xffff) * count : 0);
  if (dnt_clr_global(a->clr, "FreeObjectMethodTable", &at) == 0) dnt_core_read_u64(a->core, at, &free_mt);
  char name[4096], path[4096];
  if (mt == free_mt) snprintf(name, sizeof name, "Free");
  else if (dnt_clr_type_name_sos(a->clr, mt, name, sizeof name) != 0) snprintf(name, sizeof name, "<Unknown>");
  if (a->o->json) return print_json(a, obj, mt, size, name), 0;
  if (mt == free_mt) {
    printf("Free Object\nSize:        %" PRIu64 "(0x%" PRIx64 ") bytes\n", size, size);
    return 0;
  }
  char *safe = dnt_safe_text(name);
  printf("Name:        %s\nMethodTable: %016" PRIx64 "\nSize:        %" PRIu64 "(0x%" PRIx64 ") bytes\n", safe, mt, size,
         size);
  free(safe);
  print_runtime_type(a, mt, obj, name);
  if ((flags & MT_ARRAY_MASK) == MT_ARRAY) {
    uint64_t element = 0, inst_off;
    uint32_t rank = flags & MT_SZARRAY ? 1 : (base > ARRAY_BASE_SIZE ? (base - ARRAY_BASE_SIZE) / 8 : 1);
    uint8_t et = 0;
    if (dnt_clr_field(a->clr, "MethodTable", "PerInstInfo", &inst_off) == 0)
      dnt_core_read_u64(a->core, mt + inst_off, &element);
    dnt_clr_element_type(a->clr, element, &et);
    printf("Array:       Rank %u, Number of elements %u, Type %s\n", rank, count, element_name(et));
    if (et == E_I1 || et == E_U1 || et == E_CHAR) { /* the first elements, as text (a line even for none, as SOS) */
      uint32_t k = count < CONTENT ? count : CONTENT;
      printf("Content:     ");
      for (uint32_t i = 0; i < k; i++) {
        uint16_t ch = 0;
        if (dnt_core_read(a->core, obj + 16 + (uint64_t)i * (et == E_CHAR ? 2 : 1), &ch, et == E_CHAR ? 2 : 1) != 0) break;
        putchar(ch < 32 || ch > 126 ? '.' : (char)ch);
      }
      printf("\n");
    }
  } else {
    uint64_t module, off;
    if (dnt_clr_field(a->clr, "MethodTable", "Module", &off) != 0 || dnt_core_read_u64(a->core, mt + off, &module) != 0 ||
        dnt_clr_module_path(a->clr, module, path, sizeof path) != 0)
      snprintf(path, sizeof path, "Unknown Module");
    safe = dnt_safe_text(path);
    printf("File:        %s\n", safe);
    free(safe);
    uint64_t string_mt = 0;
    if (dnt_clr_global(a->clr, "StringMethodTable", &at) == 0) dnt_core_read_u64(a->core, at, &string_mt);
    if (mt == string_mt) {
      char *text = NULL;
      if (size > MAX_STRING || count > MAX_STRING || dnt_clr_string(a->clr, obj, MAX_STRING, &text) != 0) {
        printf("<String is invalid or too large to print>\n\n");
      } else {
        safe = dnt_safe_text(text);
        printf("String:      %s\n", safe);
        free(safe);
      }
      free(text);
    }
  }
  print_fields(a, mt, obj);
  return 0;
}
