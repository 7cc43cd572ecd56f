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
  if (clr_field(r, "String", "m_StringLength", &len_off) || clr_field(r, "String", "m_FirstChar", &first_off) ||
      dnt_core_read_u32(dnt__clr_core(r), obj + len_off, &len) != 0)
    return -1;
  *out = utf8_of(dnt__clr_core(r), obj + first_off, len < max ? len : max);
  return *out ? 0 : -1;
}

/* The file of the module at module (Module.Path, UTF-16, NUL-terminated) into buf; -1 when the file
 * there now is not the one the process loaded (modules.c). */
static int module_path(const dnt_clr *r, uint64_t module, char *buf, size_t cap) {
  uint64_t off, at;
  const dnt_core *c = dnt__clr_core(r);
  if (clr_field(r, "Module", "Path", &off) || dnt_core_read_u64(c, module + off, &at) != 0 || !at) return -1;
  size_t n = 0;
  for (uint16_t u = 1; n < MAX_PATH_UNITS; n++) {
    if (dnt_core_read(c, at + 2 * n, &u, 2) != 0) return -1;
    if (!u) break;
  }
  char *path = utf8_of(c, at, n);
  if (!path) return -1;
  int ok = strlen(path) < cap && !dnt__module_stale(r, dnt__clr_module_checks(r), module, path);
  if (ok) memcpy(buf, path, strlen(path) + 1);
  free(path);
  return ok ? 0 : -1;
}

/* ---- type names, as ClrMD (and so dotnet-dump) writes them: "Namespace.Outer+Inner",
 * generic instances "List<System.String>" (a nested type's arguments after the segment that
 * declares them: "SharedArrayPool<System.Char>+<>c"), arrays "T[]", "T[,]" ---- */

#define MT_ARRAY_MASK 0x000C0000u
#define MT_ARRAY 0x00080000u
#define MT_SZARRAY 0x00020000u
#define MT_HAS_COMPONENT_SIZE 0x80000000u
#define MT_GENERIC_MASK 0x30u
#define TYPE_DESC_TAG 2u
#define ARRAY_BASE_SIZE 0x18 /* a multi-dimensional array's BaseSize: this plus 8 a rank */
#define ELEMENT_PTR 0x0F
#define ELEMENT_BYREF 0x10
#define MAX_TYPE_ARGS 64
#define MAX_DEPTH 16

struct text {
  char *buf;
  size_t cap, len;
  int cut;
};

static void put(struct text *t, const char *s, size_t n) {
  if (t->len + n >= t->cap) {
    t->cut = 1;
    return;
  }
  memcpy(t->buf + t->len, s, n);
  t->len += n;
  t->buf[t->len] = '\0';
}

static void puts_(struct text *t, const char *s) { put(t, s, strlen(s)); }

int dnt__mt_instantiation(const dnt_clr *r, uint64_t mt, uint64_t *args, uint32_t max, uint32_t *n) {
  uint64_t flags_off, inst_off, ndicts_off, nargs_off, inst, dict;
  uint32_t flags;
  uint16_t ndicts = 0, count = 0;
  const dnt_core *c = dnt__clr_core(r);
  *n = 0;
  if ((mt & TYPE_DESC_TAG) || clr_field(r, "MethodTable", "MTFlags", &flags_off) ||
      clr_field(r, "MethodTable", "PerInstInfo", &inst_off) || dnt_core_read_u32(c, mt + flags_off, &flags) != 0 ||
      dnt_core_read_u64(c, mt + inst_off, &inst) != 0)
    return -1;
  if ((flags & MT_HAS_COMPONENT_SIZE) || !(flags & MT_GENERIC_MASK) || !inst) return 0; /* not a generic instance */
  /* GenericsDictInfo just before PerInstInfo's dictionaries; the type's own is the last */
  if (clr_field(r, "GenericsDictInfo", "NumDicts", &ndicts_off) || clr_field(r, "GenericsDictInfo", "NumTypeArgs", &nargs_off) ||
      dnt_core_read(c, inst - 8 + ndicts_off, &ndicts, 2) != 0 || dnt_core_read(c, inst - 8 + nargs_off, &count, 2) != 0 ||
      !ndicts || count > max || dnt_core_read_u64(c, inst + 8ull * (ndicts - 1u), &dict) != 0 ||
      dnt_core_read(c, dict, args, 8ull * count) != 0)
    return -1;
  *n = count;
  return 0;
}

static int name_of(const dnt_clr *r, uint64_t th, struct text *t, int depth, int dac);

/* Generic arguments as the runtime writes them after a name: "[[Arg, Assembly],[Arg, Assembly]]"
 * (each argument in that format too, its assembly its module's file name without extension). */
static void put_runtime_args(const uint64_t *args, uint32_t nargs, const dnt_clr *r, struct text *t, int depth) {
  if (!nargs) return;
  puts_(t, "[");
  for (uint32_t i = 0; i < nargs; i++) {
    char path[4096];
    uint64_t module_off, module;
    puts_(t, i ? ",[" : "[");
    if (name_of(r, args[i], t, depth + 1, 1) != 0) puts_(t, "?");
    if (!(args[i] & TYPE_DESC_TAG) && clr_field(r, "MethodTable", "Module", &module_off) == 0 &&
        dnt_core_read_u64(dnt__clr_core(r), args[i] + module_off, &module) == 0 &&
        module_path(r, module, path, sizeof path) == 0) {
      char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path, *dot = strrchr(base, '.');
      if (dot) *dot = '\0';
      puts_(t, ", ");
      puts_(t, base);
    }
    puts_(t, "]");
  }
  puts_(t, "]");
}

/* A TypeDef's own name with its generic arguments placed as ClrMD writes them: each
 * '+'-separated segment that ends in `N takes the next N of args ("Outer<A>+Inner<B>"). */
static void place_args(const char *def, const uint64_t *args, uint32_t nargs, const dnt_clr *r, struct text *t,
                       int depth) {
  uint32_t used = 0;
  for (const char *seg = def; *seg;) {
    size_t n = strcspn(seg, "+");
    const char *tick = memchr(seg, '`', n);
    char *end = NULL;
    unsigned long k = tick ? strtoul(tick + 1, &end, 10) : 0;
    if (tick && end == seg + n && k && used + k <= nargs) {
      put(t, seg, (size_t)(tick - seg));
      puts_(t, "<");
      for (unsigned long i = 0; i < k; i++) {
        if (i) puts_(t, ", ");
        if (name_of(r, args[used++], t, depth + 1, 0) != 0) puts_(t, "?");
      }
      puts_(t, ">");
    } else {
      put(t, seg, n);
    }
    seg += n;
    if (*seg == '+') put(t, seg++, 1);
  }
}

static int name_of(const dnt_clr *r, uint64_t th, struct text *t, int depth, int dac) {
  const dnt_core *c = dnt__clr_core(r);
  if (depth > MAX_DEPTH || !th) return -1;
  if (th & TYPE_DESC_TAG) { /* a TypeDesc: a pointer or byref to its argument */
    uint64_t desc = th & ~(uint64_t)TYPE_DESC_TAG, flags_off, arg_off, arg;
    uint32_t flags;
    if (clr_field(r, "TypeDesc", "TypeAndFlags", &flags_off) || clr_field(r, "ParamTypeDesc", "TypeArg", &arg_off) ||
        dnt_core_read_u32(c, desc + flags_off, &flags) != 0)
      return -1;
    uint8_t kind = (uint8_t)flags;
    if ((kind != ELEMENT_PTR && kind != ELEMENT_BYREF) || dnt_core_read_u64(c, desc + arg_off, &arg) != 0 ||
        name_of(r, arg, t, depth + 1, dac) != 0)
      return -1;
    puts_(t, kind == ELEMENT_PTR ? "*" : "&");
    return 0;
  }
  uint64_t flags_off, base_off, flags2_off, module_off, inst_off, module, inst;
  uint32_t flags, base, flags2;
  if (clr_field(r, "MethodTable", "MTFlags", &flags_off) || clr_field(r, "MethodTable", "BaseSize", &base_off) ||
      clr_field(r, "MethodTable", "MTFlags2", &flags2_off) || clr_field(r, "MethodTable", "Module", &module_off) ||
      clr_field(r, "MethodTable", "PerInstInfo", &inst_off) || dnt_core_read_u32(c, th + flags_off, &flags) != 0 ||
      dnt_core_read_u32(c, th + base_off, &base) != 0 || dnt_core_read_u32(c, th + flags2_off, &flags2) != 0 ||
      dnt_core_read_u64(c, th + module_off, &module) != 0 || dnt_core_read_u64(c, th + inst_off, &inst) != 0)
    return -1;
  if ((flags & MT_ARRAY_MASK) == MT_ARRAY) { /* PerInstInfo is the element's TypeHandle */
    if (name_of(r, inst, t, depth + 1, dac) != 0) return -1;
    if (flags & MT_SZARRAY) return puts_(t, "[]"), 0;
    uint32_t rank = base > ARRAY_BASE_SIZE ? (base - ARRAY_BASE_SIZE) / 8 : 1;
    puts_(t, "[");
    for (uint32_t i = 1; i < rank && i < 32; i++) puts_(t, ",");
    return puts_(t, "]"), 0;
  }
  uint32_t rid = flags2 >> 8;
  char path[4096], def[2048];
  if (!rid || module_path(r, module, path, sizeof path) != 0 || !dnt_assembly_type_name(path, rid, def, sizeof def))
    return -1;
  uint64_t args[MAX_TYPE_ARGS];
  uint32_t nargs = 0;
  if (dnt__mt_instantiation(r, th, args, MAX_TYPE_ARGS, &nargs) != 0) nargs = 0;
  if (dac) { /* the runtime's own format: "Outer`1+Inner[[Arg, Assembly],...]" */
    puts_(t, def);
    put_runtime_args(args, nargs, r, t, depth);
  } else {
    place_args(def, args, nargs, r, t, depth);
  }
  return 0;
}

int dnt_clr_module_path(const dnt_clr *r, uint64_t module, char *buf, size_t cap) {
  return module_path(r, module, buf, cap);
}

int dnt_clr_type_name(const dnt_clr *r, uint64_t mt, char *buf, size_t cap) {
  if (!cap) return -1;
  struct text t = {buf, cap, 0, 0};
  buf[0] = '\0';
  return name_of(r, mt, &t, 0, 0) == 0 && !t.cut ? 0 : -1;
}

int dnt_clr_type_name_sos(const dnt_clr *r, uint64_t mt, char *buf, size_t cap) {
  if (!cap) return -1;
  struct text t = {buf, cap, 0, 0};
  buf[0] = '\0';
  return name_of(r, mt, &t, 0, 1) == 0 && !t.cut ? 0 : -1;
}

/* A field of an exception holding an object (a string or another exception), 0 when none. */
static int ref_field(const dnt_clr *r, uint64_t obj, const char *name, uint64_t *v) {
  uint64_t off;
  *v = 0;
  return clr_field(r, "Exception", name, &off) || dnt_core_read_u64(dnt__clr_core(r), obj + off, v) != 0 ? -1 : 0;
}

#define ARRAY_DATA 16       /* an array's elements, after its MethodTable and length */
#define TRACE_HEADER 16     /* the trace's own header: u32 count, u32 kept-alive count, its thread */
#define TRACE_ELEMENT 32    /* ip, sp, MethodDesc, flags */
#define MAX_TRACE 100000

/* _stackTrace: a byte[] of the trace, or (since .NET 9) an object[] whose first element is. */
static void read_trace(const dnt_clr *r, uint64_t obj, struct dnt_clr_exception *e) {
  const dnt_core *c = dnt__clr_core(r);
  uint64_t off, array, mt, objects = 0, at;
  uint32_t length, flags, count;
  e->trace = DNT_CLR_TRACE_NONE;
  if (clr_field(r, "Exception", "_stackTrace", &off) || dnt_core_read_u64(c, obj + off, &array) != 0 || !array) return;
  if (dnt_clr_global(r, "ObjectArrayMethodTable", &at) == 0) dnt_core_read_u64(c, at, &objects);
  if (dnt_clr_object_mt(r, array, &mt) == 0 && mt == objects && dnt_core_read_u64(c, array + ARRAY_DATA, &array) != 0)
    return;
  e->trace = DNT_CLR_TRACE_UNAVAILABLE;
  if (!array || dnt_core_read_u32(c, array + 8, &length) != 0 || length == 0 || dnt_clr_object_mt(r, array, &mt) != 0 ||
      dnt_core_read_u32(c, mt, &flags) != 0)
    return;
  e->trace = DNT_CLR_TRACE_UNREADABLE;
  if (dnt_core_read_u32(c, array + ARRAY_DATA, &count) != 0 || count == 0 || count > MAX_TRACE ||
      count > (length - (length < TRACE_HEADER ? length : TRACE_HEADER)) / TRACE_ELEMENT)
    return;
  e->frames = calloc(count, sizeof *e->frames);
  if (!e->frames) return;
  for (uint32_t i = 0; i < count; i++) {
    uint64_t el = array + ARRAY_DATA + TRACE_HEADER + (uint64_t)i * TRACE_ELEMENT;
    struct dnt_clr_trace_frame *f = &e->frames[e->nframes];
    if (dnt_core_read_u64(c, el, &f->ip) || dnt_core_read_u64(c, el + 8, &f->sp) || dnt_core_read_u64(c, el + 16, &f->method))
      break;
    e->nframes++;
  }
  e->trace = DNT_CLR_TRACE_FRAMES;
}

int dnt_clr_exception_read(const dnt_clr *r, uint64_t obj, struct dnt_clr_exception *e, char *err, size_t cap) {
  memset(e, 0, sizeof *e);
  e->address = obj;
  uint64_t message, trace, hr_off;
  if (dnt_clr_object_mt(r, obj, &e->mt) != 0 || ref_field(r, obj, "_message", &message) ||
      ref_field(r, obj, "_innerException", &e->inner) || ref_field(r, obj, "_stackTraceString", &trace) ||
      clr_field(r, "Exception", "_HResult", &hr_off) || dnt_core_read_u32(dnt__clr_core(r), obj + hr_off, &e->hresult)) {
    snprintf(err, cap, "the core does not hold an exception at 0x%llx", (unsigned long long)obj);
    return -1;
  }
  if (dnt_clr_type_name(r, e->mt, e->type, sizeof e->type) != 0) e->type[0] = '\0';
  if (message && dnt_clr_string(r, message, MAX_MESSAGE_UNITS, &e->message) != 0) e->message = NULL;
  if (trace && dnt_clr_string(r, trace, MAX_MESSAGE_UNITS, &e->stack_trace_string) != 0) e->stack_trace_string = NULL;
  read_trace(r, obj, e);
  uint64_t inner_mt;
  if (e->inner && (dnt_clr_object_mt(r, e->inner, &inner_mt) != 0 ||
                   dnt_clr_type_name(r, inner_mt, e->inner_type, sizeof e->inner_type) != 0))
    e->inner_type[0] = '\0';
  return 0;
}

void dnt_clr_exception_release(struct dnt_clr_exception *e) {
  free(e->frames);
  free(e->message);
  free(e->stack_trace_string);
  memset(e, 0, sizeof *e);
}

#define MD_CLASSIFICATION 0x7
#define MD_INSTANTIATED 5

/* A generic method's instantiation (an InstantiatedMethodDesc's dictionary begins with it). */
static void method_instantiation(const dnt_clr *r, uint64_t md, uint64_t *args, uint32_t *n) {
  uint64_t flags_off, inst_off, count_off, dict;
  uint16_t flags, count;
  const dnt_core *c = dnt__clr_core(r);
  *n = 0;
  if (clr_field(r, "MethodDesc", "Flags", &flags_off) || clr_field(r, "InstantiatedMethodDesc", "PerInstInfo", &inst_off) ||
      clr_field(r, "InstantiatedMethodDesc", "NumGenericArgs", &count_off) || dnt_core_read(c, md + flags_off, &flags, 2) ||
      (flags & MD_CLASSIFICATION) != MD_INSTANTIATED || dnt_core_read(c, md + count_off, &count, 2) ||
      count > MAX_TYPE_ARGS || dnt_core_read_u64(c, md + inst_off, &dict) || !dict ||
      dnt_core_read(c, dict, args, 8ull * count))
    return;
  *n = count;
}

/* A type as a method's signature writes it: a primitive's short name ("Int32"), else its name
 * as the runtime writes it ("System.String", "System.__Canon"). */
static const char *signature_name(const dnt_clr *r, uint64_t th, char *buf, size_t cap) {
  static const char *const primitives[] = {
      [0x02] = "Boolean", [0x03] = "Char",  [0x04] = "SByte", [0x05] = "Byte",  [0x06] = "Int16",
      [0x07] = "UInt16",  [0x08] = "Int32", [0x09] = "UInt32", [0x0A] = "Int64", [0x0B] = "UInt64",
      [0x0C] = "Single",  [0x0D] = "Double", [0x18] = "IntPtr", [0x19] = "UIntPtr"};
  uint64_t flags_off;
  uint32_t flags;
  uint8_t et;
  if (!(th & TYPE_DESC_TAG) && clr_field(r, "MethodTable", "MTFlags", &flags_off) == 0 &&
      dnt_core_read_u32(dnt__clr_core(r), th + flags_off, &flags) == 0 && (flags & 0x000F0000u) == 0x00070000u &&
      dnt_clr_element_type(r, th, &et) == 0 && et < sizeof primitives / sizeof primitives[0] && primitives[et])
    return primitives[et];
  if (dnt_clr_type_name_sos(r, th, buf, cap) != 0) snprintf(buf, cap, "?");
  return buf;
}

int dnt_clr_method_module(const dnt_clr *r, uint64_t md, char *buf, size_t cap) {
  uint64_t mt, module_off, module;
  uint32_t token;
  return dnt_clr_method_desc(r, md, &mt, &token) != 0 || clr_field(r, "MethodTable", "Module", &module_off) ||
                 dnt_core_read_u64(dnt__clr_core(r), mt + module_off, &module) != 0
             ? -1
             : module_path(r, module, buf, cap);
}

int dnt_clr_method_name(const dnt_clr *r, uint64_t md, char *buf, size_t cap) {
  uint64_t mt, module_off, module;
  uint32_t token;
  char path[4096];
  if (dnt_clr_method_desc(r, md, &mt, &token) != 0 || clr_field(r, "MethodTable", "Module", &module_off) ||
      dnt_core_read_u64(dnt__clr_core(r), mt + module_off, &module) != 0 ||
      module_path(r, module, path, sizeof path) != 0)
    return -1;
  if (!dnt_assembly_method_name(path, token & 0xffffff, buf, cap)) return -1;
  /* a generic type's method: its type as the runtime names the instance ("TaskAwaiter`1[[System.Int32,
   * System.Private.CoreLib]]", shared code's "[[System.__Canon, ...]]"), in place of the definition */
  char type[2048];
  if (dnt_clr_type_name_sos(r, mt, type, sizeof type) == 0 && strchr(type, '[')) {
    size_t def = (size_t)(strchr(type, '[') - type), rest = strlen(buf) - def;
    if (strncmp(buf, type, def) == 0 && buf[def] == '.' && strlen(type) + rest < cap) {
      memmove(buf + strlen(type), buf + def, rest + 1);
      memcpy(buf, type, strlen(type));
    }
  }
  /* a generic method's own instantiation, as the runtime writes it after the name */
  uint64_t margs[MAX_TYPE_ARGS], targs[MAX_TYPE_ARGS];
  uint32_t nm = 0, nt = 0;
  method_instantiation(r, md, margs, &nm);
  if (nm) {
    struct text t = {buf, cap, strlen(buf), 0};
    put_runtime_args(margs, nm, r, &t, 0);
    if (t.cut) return -1;
  }
  /* its parameters, as SOS writes them after the name (left out when they do not read), the
   * generic parameters named by the instantiations */
  if (dnt__mt_instantiation(r, mt, targs, MAX_TYPE_ARGS, &nt) != 0) nt = 0;
  char names[2 * MAX_TYPE_ARGS][512];
  const char *tn[MAX_TYPE_ARGS], *mn[MAX_TYPE_ARGS];
  for (uint32_t i = 0; i < nt; i++) tn[i] = signature_name(r, targs[i], names[i], sizeof names[i]);
  for (uint32_t i = 0; i < nm; i++) mn[i] = signature_name(r, margs[i], names[MAX_TYPE_ARGS + i], sizeof names[0]);
  struct dnt_generic_names inst = {tn, mn, nt, nm};
  size_t n = strlen(buf);
  char params[2048];
  if (dnt_assembly_method_params(path, token & 0xffffff, &inst, params, sizeof params) && n + strlen(params) < cap)
    memcpy(buf + n, params, strlen(params) + 1);
  return 0;
}

int dnt_clr_element_type(const dnt_clr *r, uint64_t th, uint8_t *type) {
  uint64_t canon_off, et_off, flags_off, v;
  uint32_t flags;
  const dnt_core *c = dnt__clr_core(r);
  *type = 0;
  if (!th || (th & TYPE_DESC_TAG)) return -1;
  if (clr_field(r, "MethodTable", "EEClassOrCanonMT", &canon_off) || clr_field(r, "EEClass", "InternalCorElementType", &et_off) ||
      clr_field(r, "MethodTable", "MTFlags", &flags_off) || dnt_core_read_u32(c, th + flags_off, &flags) != 0 ||
      dnt_core_read_u64(c, th + canon_off, &v) != 0)
    return -1;
  if ((flags & 0x000C0000u) == 0x00040000u && (flags & 0x000F0000u) != 0x00070000u) /* a struct or enum */
    return *type = 0x11, 0;
  if ((v & 1) && dnt_core_read_u64(c, (v & ~1ull) + canon_off, &v) != 0) return -1;
  if ((v & 1) || !v || dnt_core_read(c, v + et_off, type, 1) != 0) return -1;
  if (*type == 0x0E || *type == 0x1C || *type == 0x1D || *type == 0x14) *type = 0x12; /* references: CLASS */
  return 0;
}
