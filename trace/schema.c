#include <libxml/parser.h>
#include <libxml/tree.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "dnt-trace.h"

#define MAX_FIELDS 256 /* no runtime event comes close */

struct schema_event {
  char *provider, *name;
  uint32_t id;
  ntr_field *fields;    /* names owned through names[] */
  uint32_t *since;      /* parallel to fields, non-decreasing */
  uint32_t nfields;
  char **names;
};

struct dnt_schema {
  struct schema_event *events;
  size_t n, cap;
};

struct dnt_schema *dnt_schema_new(void) { return calloc(1, sizeof(struct dnt_schema)); }

static void event_release(struct schema_event *e) {
  for (uint32_t i = 0; i < e->nfields; i++) free(e->names[i]);
  free(e->names);
  free(e->fields);
  free(e->since);
  free(e->provider);
  free(e->name);
  memset(e, 0, sizeof *e);
}

void dnt_schema_free(struct dnt_schema *s) {
  if (!s) return;
  for (size_t i = 0; i < s->n; i++) event_release(&s->events[i]);
  free(s->events);
  free(s);
}

static struct schema_event *find(struct dnt_schema *s, const char *provider, uint32_t id) {
  for (size_t i = 0; i < s->n; i++)
    if (s->events[i].id == id && strcmp(s->events[i].provider, provider) == 0) return &s->events[i];
  return NULL;
}

static const struct {
  const char *name;
  uint32_t type;
} types[] = {
    {"Boolean", NTR_TYPE_BOOLEAN}, {"Byte", NTR_TYPE_BYTE},     {"UInt16", NTR_TYPE_UINT16},
    {"Int32", NTR_TYPE_INT32},     {"UInt32", NTR_TYPE_UINT32}, {"Int64", NTR_TYPE_INT64},
    {"UInt64", NTR_TYPE_UINT64},   {"Double", NTR_TYPE_DOUBLE}, {"Guid", NTR_TYPE_GUID},
    {"String", NTR_TYPE_STRING},   {"Pointer", NTR_TYPE_UINT64}, /* 64-bit traces: see lookup */
};

static int fail(char *err, size_t errlen, const char *path, const xmlNode *n, const char *what, const char *detail) {
  snprintf(err, errlen, "%s:%ld: %s%s%s", path, n ? (long)xmlGetLineNo(n) : 0L, what, detail ? " " : "",
           detail ? detail : "");
  return -1;
}

static int is(const xmlNode *n, const char *name) {
  return n->type == XML_ELEMENT_NODE && strcmp((const char *)n->name, name) == 0;
}

/* Reads one <event>: its fields, or a copy of an earlier event's (like="Provider/id"). */
static int read_event(struct dnt_schema *s, const char *provider, xmlNode *ev, const char *path, char *err,
                      size_t errlen) {
  xmlChar *id_s = xmlGetProp(ev, BAD_CAST "id"), *name = xmlGetProp(ev, BAD_CAST "name"),
          *like = xmlGetProp(ev, BAD_CAST "like");
  int rc = -1;
  struct schema_event e;
  memset(&e, 0, sizeof e);
  char *end;
  unsigned long id = id_s ? strtoul((const char *)id_s, &end, 10) : 0;
  if (!id_s || !*id_s || *end || id > 0xffff || !name || !*name) {
    fail(err, errlen, path, ev, "an <event> needs a numeric id and a name", NULL);
    goto out;
  }
  e.provider = strdup(provider);
  e.name = strdup((const char *)name);
  e.id = (uint32_t)id;
  e.fields = calloc(MAX_FIELDS, sizeof *e.fields);
  e.since = calloc(MAX_FIELDS, sizeof *e.since);
  e.names = calloc(MAX_FIELDS, sizeof *e.names);
  if (!e.provider || !e.name || !e.fields || !e.since || !e.names) {
    fail(err, errlen, path, ev, "out of memory", NULL);
    goto out;
  }
  if (like) {
    const char *slash = strrchr((const char *)like, '/');
    char *p = slash ? strndup((const char *)like, (size_t)(slash - (const char *)like)) : NULL;
    struct schema_event *src = p ? find(s, p, (uint32_t)strtoul(slash + 1, NULL, 10)) : NULL;
    free(p);
    if (!src) {
      fail(err, errlen, path, ev, "like= names no earlier event:", (const char *)like);
      goto out;
    }
    for (uint32_t i = 0; i < src->nfields; i++) {
      if (!(e.names[i] = strdup(src->names[i]))) {
        e.nfields = i;
        fail(err, errlen, path, ev, "out of memory", NULL);
        goto out;
      }
      e.fields[i] = src->fields[i];
      e.fields[i].name = e.names[i];
      e.since[i] = src->since[i];
    }
    e.nfields = src->nfields;
  }
  for (xmlNode *f = ev->children; f; f = f->next) {
    if (!is(f, "field")) continue;
    if (e.nfields == MAX_FIELDS) {
      fail(err, errlen, path, f, "too many fields", NULL);
      goto out;
    }
    xmlChar *fname = xmlGetProp(f, BAD_CAST "name"), *ftype = xmlGetProp(f, BAD_CAST "type"),
            *since = xmlGetProp(f, BAD_CAST "since");
    size_t t = 0;
    while (ftype && t < sizeof types / sizeof types[0] && strcmp(types[t].name, (const char *)ftype) != 0) t++;
    uint32_t v = since ? (uint32_t)strtoul((const char *)since, NULL, 10) : 0;
    int bad = !fname || !*fname || !ftype || t == sizeof types / sizeof types[0] ||
              (e.nfields && v < e.since[e.nfields - 1]);
    if (!bad && !(e.names[e.nfields] = strdup((const char *)fname))) {
      bad = 1;
      fail(err, errlen, path, f, "out of memory", NULL);
    } else if (!bad) {
      e.fields[e.nfields].name = e.names[e.nfields];
      e.fields[e.nfields].type = types[t].type;
      e.since[e.nfields] = v;
      e.nfields++;
    } else {
      fail(err, errlen, path, f,
           !fname || !*fname ? "a <field> needs a name"
           : !ftype || t == sizeof types / sizeof types[0] ? "unknown field type"
                                                            : "since= goes down: fields are in payload order",
           ftype ? (const char *)ftype : NULL);
    }
    xmlFree(fname);
    xmlFree(ftype);
    xmlFree(since);
    if (bad) goto out;
  }
  struct schema_event *old = find(s, provider, e.id);
  if (old) {
    event_release(old);
    *old = e;
  } else {
    if (s->n == s->cap) {
      size_t cap = s->cap ? s->cap * 2 : 32;
      struct schema_event *v = realloc(s->events, cap * sizeof *v);
      if (!v) {
        fail(err, errlen, path, ev, "out of memory", NULL);
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
  xmlFree(id_s);
  xmlFree(name);
  xmlFree(like);
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

int dnt_schema_load_default(struct dnt_schema *s, char *err, size_t errlen) {
  const char *dir = getenv("DNT_DATADIR");
  char path[4096];
  snprintf(path, sizeof path, "%s/runtime-events.xml", dir && *dir ? dir : DNT_PKGDATADIR);
  return dnt_schema_load(s, path, err, errlen);
}

const ntr_field *dnt_schema_lookup(const struct dnt_schema *s, const char *provider, uint32_t event_id,
                                   uint32_t version, const char **name, uint32_t *nfields) {
  for (size_t i = 0; i < s->n; i++) {
    const struct schema_event *e = &s->events[i];
    if (e->id != event_id || strcmp(e->provider, provider) != 0) continue;
    uint32_t n = 0;
    while (n < e->nfields && e->since[n] <= version) n++;
    *name = e->name;
    *nfields = n;
    return e->fields;
  }
  return NULL;
}
