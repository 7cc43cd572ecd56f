#include <limits.h>
#include <libxml/parser.h>
#include <libxml/tree.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "dnt-trace.h"

#define MAX_FIELDS 256 /* no runtime event comes close */

/* One (provider, id, version). Fields live in `pool` (the top-level ones first, then the
 * children and elements of arrays and structs); strings in strs[]. */
struct schema_event {
  dnt_schema_event pub;
  char *provider, *name, *symbol, *task, *opcode;
  ntr_field *fields;    /* the top-level fields: pool[0..nfields) */
  uint32_t *since;      /* parallel to fields, non-decreasing (version 1 files) */
  uint32_t nfields, npool, cap_pool;
  char **names;         /* every field name, owned */
  uint32_t nnames;
};

struct dnt_schema {
  struct schema_event *events;
  size_t n, cap;
};

struct dnt_schema *dnt_schema_new(void) { return calloc(1, sizeof(struct dnt_schema)); }

static void event_release(struct schema_event *e) {
  for (uint32_t i = 0; i < e->nnames; i++) free(e->names[i]);
  free(e->names);
  free(e->fields);
  free(e->since);
  free(e->provider);
  free(e->name);
  free(e->symbol);
  free(e->task);
  free(e->opcode);
  memset(e, 0, sizeof *e);
}

void dnt_schema_free(struct dnt_schema *s) {
  if (!s) return;
  for (size_t i = 0; i < s->n; i++) event_release(&s->events[i]);
  free(s->events);
  free(s);
}

static struct schema_event *find(struct dnt_schema *s, const char *provider, uint32_t id, uint32_t version) {
  for (size_t i = 0; i < s->n; i++)
    if (s->events[i].pub.id == id && s->events[i].pub.version == version &&
        strcmp(s->events[i].provider, provider) == 0)
      return &s->events[i];
  return NULL;
}

static const struct {
  const char *name;
  uint32_t type;
} types[] = {
    {"Boolean", NTR_TYPE_BOOLEAN}, {"Byte", NTR_TYPE_BYTE},     {"UInt16", NTR_TYPE_UINT16},
    {"Int32", NTR_TYPE_INT32},     {"UInt32", NTR_TYPE_UINT32}, {"Int64", NTR_TYPE_INT64},
    {"UInt64", NTR_TYPE_UINT64},   {"Double", NTR_TYPE_DOUBLE}, {"Guid", NTR_TYPE_GUID},
    {"String", NTR_TYPE_STRING},   {"Pointer", DNT_TYPE_POINTER}, {"SByte", NTR_TYPE_SBYTE},
    {"Int16", NTR_TYPE_INT16},     {"Single", NTR_TYPE_SINGLE}, {"AnsiString", DNT_TYPE_ANSI},
    {"Binary", DNT_TYPE_BINARY},
};

static int fail(char *err, size_t errlen, const char *path, const xmlNode *n, const char *what, const char *detail) {
  snprintf(err, errlen, "%s:%ld: %s%s%s", path, n ? (long)xmlGetLineNo(n) : 0L, what, detail ? " " : "",
           detail ? detail : "");
  return -1;
}

static int is(const xmlNode *n, const char *name) {
  return n->type == XML_ELEMENT_NODE && strcmp((const char *)n->name, name) == 0;
}

static int out_of_memory(char *err, size_t errlen, const char *path, const xmlNode *n) {
  return fail(err, errlen, path, n, "out of memory", NULL);
}

/* Field nodes of a layout, from the event's pool; NULL when it is full. */
static ntr_field *pool_take(struct schema_event *e, uint32_t n) {
  if (n > e->cap_pool - e->npool) return NULL;
  ntr_field *f = e->fields + e->npool;
  e->npool += n;
  return f;
}

/* A string owned by the event (freed with it); NULL when out of memory. */
static char *keep(struct schema_event *e, const char *s) {
  char **v = realloc(e->names, (e->nnames + 1) * sizeof *v);
  if (!v) return NULL;
  e->names = v;
  if (!(v[e->nnames] = strdup(s ? s : ""))) return NULL;
  return v[e->nnames++];
}

static int count_children(const xmlNode *n) {
  int k = 0;
  for (const xmlNode *c = n->children; c; c = c->next)
    if (is(c, "field") || is(c, "struct")) k++;
  return k;
}

/* How many field nodes the layout under n takes: 2 for an array (itself, its element), 1 for
 * anything else, plus a struct's members. Bounded by MAX_FIELDS in the caller. */
static uint32_t pool_need(const xmlNode *n, int depth) {
  uint32_t k = 0;
  if (depth > 8) return MAX_FIELDS + 1; /* no runtime event nests so deep */
  for (const xmlNode *c = n->children; c && k <= MAX_FIELDS; c = c->next) {
    if (is(c, "field")) k += 2;
    else if (is(c, "struct")) k += 2 + pool_need(c, depth + 1);
  }
  return k;
}

/* The position of the sibling named `name` among the `n` already read, or -1. */
static int sibling(const ntr_field *sibs, uint32_t n, const char *name) {
  for (uint32_t k = n; k-- > 0;)
    if (strcmp(sibs[k].name, name) == 0) return (int)k;
  return -1;
}

/* Makes `f` an array of `count` (a number, or an earlier sibling's name) elements `el`. */
static int make_array(ntr_field *f, ntr_field *el, const char *count, const ntr_field *sibs, uint32_t nsibs) {
  char *end;
  unsigned long n = strtoul(count, &end, 10);
  f->element = el;
  if (*count && !*end) {
    if (n > 0xffff) return -1;
    f->type = NTR_TYPE_FIXED_ARRAY;
    f->fixed_count = (uint32_t)n;
    return 0;
  }
  int k = sibling(sibs, nsibs, count);
  if (k < 0) return -1;
  f->type = DNT_TYPE_COUNTED;
  f->fixed_count = (uint32_t)k;
  return 0;
}

/* Reads the <field>s and <struct>s under `parent` into out[0..*n). */
static int read_fields(struct schema_event *e, const xmlNode *parent, ntr_field *out, uint32_t *n, int top,
                       const char *path, char *err, size_t errlen) {
  int rc = 0;
  for (xmlNode *c = parent->children; c && !rc; c = c->next) {
    int is_struct = is(c, "struct");
    if (!is(c, "field") && !is_struct) continue;
    xmlChar *fname = xmlGetProp(c, BAD_CAST "name"), *ftype = xmlGetProp(c, BAD_CAST "type"),
            *since = xmlGetProp(c, BAD_CAST "since"), *count = xmlGetProp(c, BAD_CAST "count"),
            *length = xmlGetProp(c, BAD_CAST "length");
    size_t t = 0;
    while (!is_struct && ftype && t < sizeof types / sizeof types[0] && strcmp(types[t].name, (const char *)ftype) != 0)
      t++;
    uint32_t v = since ? (uint32_t)strtoul((const char *)since, NULL, 10) : 0;
    ntr_field *f = &out[*n];
    memset(f, 0, sizeof *f);
    if (!fname || !*fname) {
      rc = fail(err, errlen, path, c, is_struct ? "a <struct> needs a name" : "a <field> needs a name", NULL);
    } else if (!is_struct && (!ftype || t == sizeof types / sizeof types[0])) {
      rc = fail(err, errlen, path, c, "unknown field type", ftype ? (const char *)ftype : NULL);
    } else if (top && *n && v < e->since[*n - 1]) {
      rc = fail(err, errlen, path, c, "since= goes down: fields are in payload order", NULL);
    } else if (!(f->name = keep(e, (const char *)fname))) {
      rc = out_of_memory(err, errlen, path, c);
    } else if (is_struct) {
      int nm = count_children(c);
      ntr_field *obj = pool_take(e, 1), *members = pool_take(e, (uint32_t)nm);
      if (!obj || !members) {
        rc = fail(err, errlen, path, c, "too many fields", NULL);
      } else {
        obj->name = "";
        obj->type = NTR_TYPE_OBJECT;
        obj->fields = members;
        rc = read_fields(e, c, members, &obj->nfields, 0, path, err, errlen);
        if (!rc && make_array(f, obj, count ? (const char *)count : "1", out, *n))
          rc = fail(err, errlen, path, c, "count= is neither a number up to 65535 nor an earlier field:",
                    count ? (const char *)count : "");
      }
    } else {
      f->type = types[t].type;
      if (f->type == DNT_TYPE_BINARY) {
        int k = length ? sibling(out, *n, (const char *)length) : -1;
        if (k < 0) rc = fail(err, errlen, path, c, "a Binary field needs length= naming an earlier field", NULL);
        else f->fixed_count = (uint32_t)k;
      } else if (count) {
        ntr_field *el = pool_take(e, 1);
        if (!el) {
          rc = fail(err, errlen, path, c, "too many fields", NULL);
        } else {
          el->name = "";
          el->type = f->type;
          if (make_array(f, el, (const char *)count, out, *n))
            rc = fail(err, errlen, path, c, "count= is neither a number up to 65535 nor an earlier field:",
                      (const char *)count);
        }
      }
    }
    if (!rc) {
      if (top) e->since[*n] = v;
      (*n)++;
    }
    xmlFree(fname);
    xmlFree(ftype);
    xmlFree(since);
    xmlFree(count);
    xmlFree(length);
  }
  return rc;
}

static int attr_u64(xmlNode *n, const char *name, uint64_t max, uint64_t *out, int *present) {
  xmlChar *v = xmlGetProp(n, BAD_CAST name);
  int rc = 0;
  *present = v != NULL;
  if (v) {
    char *end;
    unsigned long long x = strtoull((const char *)v, &end, 0);
    if (!*v || *end || x > max || v[0] == '-') rc = -1;
    *out = x;
  }
  xmlFree(v);
  return rc;
}

/* Reads one <event>: its fields, or a copy of an earlier event's (like="Provider/id"). */
static int read_event(struct dnt_schema *s, const char *provider, xmlNode *ev, const char *path, char *err,
                      size_t errlen) {
  xmlChar *name = xmlGetProp(ev, BAD_CAST "name"), *like = xmlGetProp(ev, BAD_CAST "like"),
          *symbol = xmlGetProp(ev, BAD_CAST "symbol"), *task = xmlGetProp(ev, BAD_CAST "task"),
          *opcode = xmlGetProp(ev, BAD_CAST "opcode");
  int rc = -1, has_id, has_version, has_ov, has_level, has_kw;
  uint64_t id = 0, version = 0, ov = 0, level = 0, kw = 0;
  struct schema_event e;
  memset(&e, 0, sizeof e);
  if (attr_u64(ev, "id", 0xffff, &id, &has_id) || !has_id || !name || !*name) {
    fail(err, errlen, path, ev, "an <event> needs a numeric id and a name", NULL);
    goto out;
  }
  if (attr_u64(ev, "version", 0xff, &version, &has_version) || attr_u64(ev, "opcode-value", 0xff, &ov, &has_ov) ||
      attr_u64(ev, "level", 0xff, &level, &has_level) || attr_u64(ev, "keywords", UINT64_MAX, &kw, &has_kw)) {
    fail(err, errlen, path, ev, "version=, opcode-value= and level= are numbers up to 255, keywords= one of 64 bits",
         NULL);
    goto out;
  }
  uint32_t need = pool_need(ev, 0);
  if (need > MAX_FIELDS) {
    fail(err, errlen, path, ev, "too many fields", NULL);
    goto out;
  }
  struct schema_event *src = NULL; /* like=: the event whose fields are copied */
  if (like) {
    const char *slash = strrchr((const char *)like, '/');
    char *p = slash ? strndup((const char *)like, (size_t)(slash - (const char *)like)) : NULL;
    src = p ? find(s, p, (uint32_t)strtoul(slash + 1, NULL, 10), 0) : NULL;
    free(p);
    if (!src) {
      fail(err, errlen, path, ev, "like= names no earlier event:", (const char *)like);
      goto out;
    }
  }
  e.cap_pool = src ? src->npool : need;
  e.provider = strdup(provider);
  e.name = strdup((const char *)name);
  e.symbol = strdup(symbol ? (const char *)symbol : "");
  e.task = strdup(task ? (const char *)task : "");
  e.opcode = strdup(opcode ? (const char *)opcode : "");
  e.fields = calloc(e.cap_pool ? e.cap_pool : 1, sizeof *e.fields);
  e.since = calloc(MAX_FIELDS, sizeof *e.since);
  if (!e.provider || !e.name || !e.symbol || !e.task || !e.opcode || !e.fields || !e.since) {
    out_of_memory(err, errlen, path, ev);
    goto out;
  }
  uint32_t ntop = (uint32_t)count_children(ev);
  if (src) {
    if (ntop) {
      fail(err, errlen, path, ev, "an event with like= has no fields of its own", NULL);
      goto out;
    }
    /* the copy keeps the source's pool layout: its top-level fields first */
    for (uint32_t i = 0; i < src->npool; i++) {
      e.fields[i] = src->fields[i];
      if (!(e.fields[i].name = keep(&e, src->fields[i].name))) {
        out_of_memory(err, errlen, path, ev);
        goto out;
      }
      if (src->fields[i].fields) e.fields[i].fields = e.fields + (src->fields[i].fields - src->fields);
      if (src->fields[i].element) e.fields[i].element = e.fields + (src->fields[i].element - src->fields);
    }
    for (uint32_t i = 0; i < src->nfields; i++) e.since[i] = src->since[i];
    e.nfields = src->nfields;
    e.npool = src->npool;
  } else {
    e.npool = ntop;
    if (read_fields(&e, ev, e.fields, &e.nfields, 1, path, err, errlen)) goto out;
  }
  e.pub.id = (uint32_t)id;
  e.pub.version = (uint32_t)version;
  e.pub.opcode_value = (uint32_t)ov;
  e.pub.level = (uint32_t)level;
  e.pub.keywords = kw;
  e.pub.has_info = has_ov && has_level && has_kw;
  e.pub.provider = e.provider;
  e.pub.name = e.name;
  e.pub.symbol = e.symbol;
  e.pub.task = e.task;
  e.pub.opcode = e.opcode;
  e.pub.fields = e.fields;
  e.pub.nfields = e.nfields;
  if (!has_version) { /* a layout for every version: it replaces them all */
    for (size_t i = s->n; i-- > 0;) {
      if (s->events[i].pub.id != e.pub.id || strcmp(s->events[i].provider, provider) != 0) continue;
      event_release(&s->events[i]);
      s->events[i] = s->events[--s->n];
    }
  }
  struct schema_event *old = find(s, provider, e.pub.id, e.pub.version);
  if (old) {
    event_release(old);
    *old = e;
  } else {
    if (s->n == s->cap) {
      size_t cap = s->cap ? s->cap * 2 : 32;
      struct schema_event *v = realloc(s->events, cap * sizeof *v);
      if (!v) {
        out_of_memory(err, errlen, path, ev);
        goto out;
      }
      s->events = v;
      s->cap = cap;
    }
    s->events[s->n++] = e;
  }
  memset(&e, 0, sizeof e);
  rc = 0;
out:
  event_release(&e);
  xmlFree(name);
  xmlFree(like);
  xmlFree(symbol);
  xmlFree(task);
  xmlFree(opcode);
  return rc;
}

int dnt_schema_load(struct dnt_schema *s, const char *path, char *err, size_t errlen) {
  xmlDocPtr doc = xmlReadFile(path, NULL, XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
  if (!doc) {
    const xmlError *e = xmlGetLastError();
    snprintf(err, errlen, "%s:%d: %s", path, e ? e->line : 0, e && e->message ? e->message : "not readable XML\n");
    err[strcspn(err, "\n")] = '\0';
    return -1;
  }
  int rc = 0;
  xmlNode *root = xmlDocGetRootElement(doc);
  if (!root || !is(root, "dntrace-schema")) {
    rc = fail(err, errlen, path, root, "not a dntrace schema (the root must be <dntrace-schema>)", NULL);
    goto out;
  }
  for (xmlNode *p = root->children; p && !rc; p = p->next) {
    if (!is(p, "provider")) continue;
    xmlChar *pname = xmlGetProp(p, BAD_CAST "name");
    if (!pname || !*pname) rc = fail(err, errlen, path, p, "a <provider> needs a name", NULL);
    for (xmlNode *ev = p->children; ev && !rc; ev = ev->next)
      if (is(ev, "event")) rc = read_event(s, (const char *)pname, ev, path, err, errlen);
    xmlFree(pname);
  }
out:
  xmlFreeDoc(doc);
  return rc;
}

/* Whether the running program lives in this build tree (its directory or that directory's
 * parent: tests/ programs), so that the source tree's data/ is the one to read. */
static int in_build_tree(void) {
  char exe[4096], tree[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0 || !realpath(DNT_BUILD_TREE, tree)) return 0;
  exe[n] = '\0';
  for (int up = 0; up < 2; up++) {
    char *slash = strrchr(exe, '/');
    if (!slash) return 0;
    *slash = '\0';
    if (strcmp(exe, tree) == 0) return 1;
  }
  return 0;
}

int dnt_schema_default_path(char *path, size_t cap) {
  const char *dir = getenv("DNT_DATADIR");
  if (dir && *dir) {
    snprintf(path, cap, "%s/runtime-events.xml", dir);
    if (access(path, R_OK) == 0) return 0;
  }
  char real[PATH_MAX];
  if (in_build_tree() && realpath(DNT_SOURCE_TREE "/data/runtime-events.xml", real)) {
    snprintf(path, cap, "%s", real);
    if (access(path, R_OK) == 0) return 0;
  }
  snprintf(path, cap, "%s/runtime-events.xml", DNT_PKGDATADIR);
  return access(path, R_OK) == 0 ? 0 : -1;
}

int dnt_schema_load_default(struct dnt_schema *s, char *err, size_t errlen) {
  char path[4096];
  dnt_schema_default_path(path, sizeof path);
  return dnt_schema_load(s, path, err, errlen);
}

const dnt_schema_event *dnt_schema_find(const struct dnt_schema *s, const char *provider, uint32_t event_id,
                                        uint32_t version, uint32_t *nfields) {
  const struct schema_event *best = NULL;
  for (size_t i = 0; i < s->n; i++) {
    const struct schema_event *e = &s->events[i];
    if (e->pub.id != event_id || strcmp(e->provider, provider) != 0) continue;
    uint32_t v = e->pub.version, b = best ? best->pub.version : 0;
    /* exact, else the highest below, else the lowest above */
    if (!best || (v <= version && (b > version || v > b)) || (v > version && b > version && v < b)) best = e;
  }
  if (!best) return NULL;
  uint32_t n = 0; /* version 1 files: the fields present in this version */
  while (n < best->nfields && best->since[n] <= version) n++;
  *nfields = n;
  return &best->pub;
}

int dnt_schema_enabling(const struct dnt_schema *s, const char *provider, const char *name, uint64_t *keywords,
                        uint32_t *level) {
  int found = 0;
  *keywords = 0, *level = 0;
  for (size_t i = 0; i < s->n; i++) {
    const struct schema_event *e = &s->events[i];
    if (strcmp(e->provider, provider) != 0 ||
        (strcmp(e->pub.name, name) != 0 && strcmp(e->pub.symbol, name) != 0))
      continue;
    found = 1;
    *keywords |= e->pub.keywords;
    if (e->pub.level > *level) *level = e->pub.level;
  }
  return found;
}

const ntr_field *dnt_schema_lookup(const struct dnt_schema *s, const char *provider, uint32_t event_id,
                                   uint32_t version, const char **name, uint32_t *nfields) {
  const dnt_schema_event *pub = dnt_schema_find(s, provider, event_id, version, nfields);
  if (!pub) return NULL;
  *name = pub->name;
  return pub->fields;
}
