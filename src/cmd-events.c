/* dntrace events: every event of a trace file, one line each (text or JSON), self-describing
 * payloads decoded field by field from their metadata. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "builtin.h"
#include "dnt-trace.h"
#include "ntr.h"
#include "options.h"
#include "util.h"

struct events_options {
  const char *trace;
  struct dnt_strlist providers, names, schemas;
  long count;
  int json, verbose;
};

#define O(f) offsetof(struct events_options, f)
static const struct dnt_option events_options[] = {
    DNT_OPT_LIST(0, "provider", "NAME", O(providers), "only events of this provider (exact, any case; may be repeated)"),
    DNT_OPT_LIST(0, "name", "NAME", O(names), "only events with this name (GC/Start, or the manifest's GCStart), or Event(ID) for unnamed ones (may be repeated)"),
    DNT_OPT_COUNT('n', "count", "N", O(count), LONG_MAX, "stop after N events"),
    DNT_OPT_FLAG(0, "json", O(json), "one JSON object per line"),
    DNT_OPT_LIST(0, "schema", "FILE", O(schemas), "more event layouts (dntrace schema XML) for events without field metadata"),
    DNT_OPT_FLAG('v', "verbose", O(verbose), "also show in hex the payloads that cannot be decoded field by field"),
    DNT_OPT_END(),
};

const struct dnt_usage usage_events = {
    .synopsis = "dntrace events FILE [--provider NAME]... [--name NAME]... [-n COUNT] [--json] [--schema FILE]... [--verbose]",
    .summary = "Print the events of a trace, one per line",
    .options = events_options,
    .operand = 1,
    .operand_offset = O(trace),
    .no_operand = "name the trace file to read",
    .many_operands = "one trace file at a time",
};
#undef O

#define MAX_JSON_NESTING 80
#define MAX_SEEN 64

struct events {
  const char **providers;
  size_t nproviders;
  const char **names;
  size_t nnames;
  int json, verbose;
  uint64_t limit;    /* 0: no limit */
  uint64_t shown;
  uint64_t undecodable;
  uint64_t partial;  /* runtime events with bytes past their layout (a version newer than it) */
  uint64_t sync_qpc, qpc_freq;
  dnt_record rec;
  struct dnt_schema *schema; /* layouts of the runtime's events, which carry no field list */
  uint32_t pointer_size;
  char *scratch;     /* value text for the text format */
  size_t scratch_cap;
  /* the providers of the trace (the first MAX_SEEN), to name them when --provider matched none */
  char *seen[MAX_SEEN];
  size_t nseen;
  int header_said;
};

static int matches(const char *s, const char **list, size_t n) {
  if (!n) return 1;
  for (size_t k = 0; k < n; k++)
    if (strcasecmp(s, list[k]) == 0) return 1;
  return 0;
}

/* --name: the event's name ("GC/Start"), or the manifest's symbol without its version suffix
 * ("GCStart" for GCStart_V2), so that either tool's spelling finds it. */
static int name_matches(const char *name, const dnt_schema_event *se, const char **list, size_t n) {
  if (matches(name, list, n)) return 1;
  if (!se || !se->symbol[0]) return 0;
  size_t len = strlen(se->symbol);
  const char *v = strstr(se->symbol, "_V");
  if (v && v[2] && strspn(v + 2, "0123456789") == strlen(v + 2)) len = (size_t)(v - se->symbol);
  for (size_t k = 0; k < n; k++)
    if (strlen(list[k]) == len && strncasecmp(se->symbol, list[k], len) == 0) return 1;
  return 0;
}

static int is_zero_guid(const uint8_t g[16]) {
  for (int k = 0; k < 16; k++)
    if (g[k]) return 0;
  return 1;
}

/* Rundown's execution checkpoints carry a timestamp in the trace's ticks: in milliseconds from
 * the session's start, as TraceEvent and PerfView show it. 1 when this event has one. */
static int checkpoint_ms(const struct events *e, const dnt_schema_event *se, double *ms) {
  if (!se || se->id != 300 || strcmp(se->provider, "Microsoft-Windows-DotNETRuntimeRundown") != 0 || !e->qpc_freq)
    return 0;
  const dnt_value *v = dnt_record_get(&e->rec, "Timestamp");
  if (!v || (v->kind != DNT_VALUE_INT && v->kind != DNT_VALUE_UINT)) return 0;
  int64_t t = v->kind == DNT_VALUE_INT ? v->i : (int64_t)v->u;
  *ms = (double)(t - (int64_t)e->sync_qpc) * 1000.0 / (double)e->qpc_freq;
  return 1;
}

static int on_trace(void *ud, const ntr_trace *t) {
  struct events *e = ud;
  e->sync_qpc = t->sync_time_qpc;
  e->qpc_freq = t->qpc_frequency;
  e->pointer_size = t->pointer_size;
  return 0;
}

static void print_hex(const uint8_t *p, size_t n) {
  for (size_t k = 0; k < n; k++) printf("%02x", p[k]);
}

/* Text-format value: as is when it is one plain word, else in double quotes with C escapes
 * (logfmt's rule), so a line splits unambiguously on spaces. */
static void print_text_value(const char *s, int is_string) {
  int plain = !is_string || *s;
  for (const unsigned char *p = (const unsigned char *)s; plain && *p; p++)
    if (*p <= ' ' || *p == '"' || *p == '=' || *p == '\\' || *p == 0x7f) plain = 0;
  if (plain && dnt_text_escape(NULL, 0, s) != strlen(s)) plain = 0; /* a C1 control, a byte not UTF-8 */
  if (plain)
    fputs(s, stdout);
  else
    dnt_text_put_quoted(stdout, s); /* the trace's words: nothing a terminal acts on */
}

static const char *value_text(struct events *e, const dnt_value *v) {
  if (v->type == DNT_TYPE_POINTER) { /* addresses in hex, as the other tools print them */
    if (e->scratch_cap < 24) {
      free(e->scratch);
      e->scratch_cap = 24;
      e->scratch = dnt_xmalloc(e->scratch_cap);
    }
    snprintf(e->scratch, e->scratch_cap, "0x%llx", (unsigned long long)v->u);
    return e->scratch;
  }
  size_t n = dnt_value_format(v, e->scratch, e->scratch_cap);
  if (n >= e->scratch_cap) {
    free(e->scratch);
    e->scratch_cap = n + 1;
    e->scratch = dnt_xmalloc(e->scratch_cap);
    dnt_value_format(v, e->scratch, e->scratch_cap);
  }
  return e->scratch;
}

static void print_text_fields(struct events *e) {
  for (size_t k = 0; k < e->rec.nvalues; k++) {
    const dnt_value *v = &e->rec.values[k];
    if (v->kind == DNT_VALUE_END || ((v->kind == DNT_VALUE_OBJECT || v->kind == DNT_VALUE_ARRAY) && v->count))
      continue; /* the members speak for their container */
    putchar(' ');
    dnt_text_put(stdout, v->name); /* a self-describing event names its own fields */
    putchar('=');
    if (v->kind == DNT_VALUE_OBJECT)
      fputs("{}", stdout);
    else if (v->kind == DNT_VALUE_ARRAY)
      fputs("[]", stdout);
    else
      print_text_value(value_text(e, v), v->kind == DNT_VALUE_STRING);
  }
}

/* The fields, as members of the event's object (which has members already: each begins with
 * a comma). */
static void print_json_fields(struct events *e) {
  char stack[MAX_JSON_NESTING]; /* '}' or ']' for every open container */
  size_t depth = 0;
  int first = 0;
  for (size_t k = 0; k < e->rec.nvalues; k++) {
    const dnt_value *v = &e->rec.values[k];
    if (v->kind == DNT_VALUE_END) {
      if (depth) putchar(stack[--depth]);
      first = 0;
      continue;
    }
    if (!first) putchar(',');
    first = 0;
    if (!depth || stack[depth - 1] == '}') {
      dnt_json_string(stdout, v->key);
      putchar(':');
    }
    switch (v->kind) {
    case DNT_VALUE_OBJECT:
    case DNT_VALUE_ARRAY:
      if (depth == MAX_JSON_NESTING) { /* deeper than any real payload: flatten */
        fputs("null", stdout);
        break;
      }
      putchar(v->kind == DNT_VALUE_OBJECT ? '{' : '[');
      stack[depth++] = v->kind == DNT_VALUE_OBJECT ? '}' : ']';
      first = 1;
      break;
    case DNT_VALUE_STRING:
    case DNT_VALUE_BYTES: dnt_json_string(stdout, value_text(e, v)); break;
    case DNT_VALUE_UINT:
      if (v->type == DNT_TYPE_POINTER) {
        dnt_json_string(stdout, value_text(e, v));
        break;
      }
      /* fall through */
    case DNT_VALUE_FLOAT:
      if (!isfinite(v->f)) {
        dnt_json_string(stdout, value_text(e, v));
        break;
      }
      /* fall through */
    default: fputs(value_text(e, v), stdout); break;
    }
  }
  while (depth) putchar(stack[--depth]); /* after a decode error */
}

static void print_payload_hex(const ntr_event *ev, int json) {
  fputs(json ? ",\"payload\":\"" : " payload=", stdout);
  print_hex(ev->payload, ev->payload_size);
  if (json) putchar('"');
}

/* Keeps provider among those seen (each once, the first MAX_SEEN). */
static void note_provider(struct events *e, const char *provider) {
  for (size_t k = 0; k < e->nseen; k++)
    if (strcmp(e->seen[k], provider) == 0) return;
  if (e->nseen < MAX_SEEN && (e->seen[e->nseen] = strdup(provider))) e->nseen++;
}

/* A --provider that named none of the trace's providers: said once, with those it has. */
static int say_unmatched_providers(const struct events *e) {
  int unmatched = 0;
  for (size_t i = 0; i < e->nproviders; i++) {
    size_t k = 0;
    while (k < e->nseen && strcasecmp(e->seen[k], e->providers[i]) != 0) k++;
    if (k < e->nseen) continue;
    unmatched++;
    fprintf(stderr, "dntrace: warning: no provider '");
    dnt_text_put(stderr, e->providers[i]);
    fprintf(stderr, "' in this trace; its providers:");
    for (k = 0; k < e->nseen; k++) {
      fputs(k ? ", " : " ", stderr);
      dnt_text_put(stderr, e->seen[k]);
    }
    fputs(e->nseen == MAX_SEEN ? ", ...\n" : "\n", stderr);
  }
  return unmatched;
}

static int on_event(void *ud, const ntr_event *ev) {
  struct events *e = ud;
  const ntr_metadata *md = ev->metadata;
  const dnt_schema_event *se = NULL;
  char unnamed[32], te_name[512];
  const char *provider = md ? md->provider : "(undefined)", *name;
  uint32_t md_opcode = 0;
  if (md && md->event_name[0]) {
    name = dnt_event_te_name(md, te_name, sizeof te_name, &md_opcode); /* "Request/Start", as TraceEvent */
  } else {
    if (md)
      snprintf(unnamed, sizeof unnamed, "Event(%u)", md->event_id);
    else
      snprintf(unnamed, sizeof unnamed, "Metadata(%u)", ev->metadata_id);
    name = unnamed;
  }
  double t = e->qpc_freq ? (double)(int64_t)(ev->timestamp - e->sync_qpc) / (double)e->qpc_freq : 0.0;
  int described = md && md->nfields > 0, rc = 0;
  e->rec.nvalues = 0;
  if (described) {
    rc = dnt_record_decode_event(&e->rec, ev);
    if (rc) e->undecodable++;
  } else if (md && e->schema) {
    /* the runtime's own events: layouts and names from the schema, pointers as wide as the
     * trace header says */
    uint32_t n;
    if ((se = dnt_schema_find(e->schema, md->provider, md->event_id, md->version, &n))) {
      name = se->name;
      md_opcode = md->has_opcode ? md->opcode : se->opcode_value;
      described = 1;
      rc = dnt_record_decode_layout(&e->rec, se->fields, n, e->pointer_size, ev->payload, ev->payload_size);
      if (rc) e->undecodable++;
      else if (e->rec.trailing) e->partial++;
    }
  }
  if (e->nproviders) note_provider(e, provider);
  /* a name as TraceEvent gives it, or as the metadata has it ("RequestStart") */
  if (!matches(provider, e->providers, e->nproviders) ||
      !(name_matches(name, se, e->names, e->nnames) ||
        (md && md->event_name[0] && matches(md->event_name, e->names, e->nnames))))
    return 0;
  if (!e->json && !e->header_said) { /* for a reader at a terminal, on stderr: stdout holds nothing but events */
    e->header_said = 1;
    if (isatty(STDOUT_FILENO) && isatty(STDERR_FILENO))
    fprintf(stderr, "columns: seconds since the trace's start, thread, processor (-1: not recorded), level, "
                    "keywords, opcode, provider, event, its fields (Name=value), activity ids (@)\n");
  }
  uint32_t level = md ? md->level : 0, opcode = md_opcode;
  uint64_t keywords = md ? md->keywords : 0;
  char act[37] = "", rel[37] = "";
  if (!is_zero_guid(ev->activity_id)) dnt_format_guid(ev->activity_id, act);
  if (!is_zero_guid(ev->related_activity_id)) dnt_format_guid(ev->related_activity_id, rel);
  double ms = 0;
  int has_ms = described && !rc && checkpoint_ms(e, se, &ms);
  if (e->json) {
    printf("{\"timestamp\":%.6f,\"thread\":%llu,\"processor\":%d,\"provider\":", t, (unsigned long long)ev->thread_id,
           (int32_t)ev->processor); /* -1: not recorded */
    dnt_json_string(stdout, provider);
    fputs(",\"event\":", stdout);
    dnt_json_string(stdout, name);
    printf(",\"eventId\":%u,\"version\":%u,\"level\":%u,\"keywords\":\"0x%llx\",\"opcode\":%u", md ? md->event_id : 0,
           md ? md->version : 0, level, (unsigned long long)keywords, opcode);
    if (act[0]) printf(",\"activityId\":\"%s\"", act);
    if (rel[0]) printf(",\"relatedActivityId\":\"%s\"", rel);
    if (described) {
      print_json_fields(e);
      if (has_ms) printf(",\"TimestampMs\":%.3f", ms);
      if (rc) {
        fputs(",\"error\":", stdout);
        dnt_json_string(stdout, e->rec.err);
        if (e->verbose) print_payload_hex(ev, 1);
      }
    } else {
      printf(",\"payloadSize\":%u", ev->payload_size);
      if (e->verbose) print_payload_hex(ev, 1);
    }
    fputs("}\n", stdout);
  } else {
    /* columns: time, thread, processor, level, keywords, opcode, provider, name; then the
     * fields; activity ids (when set) last, marked with @ so no field name can be taken for them */
    printf("%.6f %llu %d %u 0x%llx %u ", t, (unsigned long long)ev->thread_id, (int32_t)ev->processor, level,
           (unsigned long long)keywords, opcode);
    dnt_text_put(stdout, provider); /* the trace's words */
    putchar(' ');
    dnt_text_put(stdout, name);
    if (described) {
      print_text_fields(e);
      if (has_ms) printf(" TimestampMs=%.3f", ms);
      if (rc) {
        fputs(" (undecodable: ", stdout);
        dnt_text_put(stdout, e->rec.err); /* it may quote a field's name */
        putchar(')');
        if (e->verbose) print_payload_hex(ev, 0);
      }
    } else {
      printf(" size=%u", ev->payload_size);
      if (e->verbose) print_payload_hex(ev, 0);
    }
    if (act[0]) printf(" @activity=%s", act);
    if (rel[0]) printf(" @related=%s", rel);
    putchar('\n');
  }
  e->shown++;
  if (ferror(stdout)) return 1; /* a closed pipe: stop reading, the exit reports it */
  return e->limit && e->shown >= e->limit;
}

int cmd_events(int argc, char **argv) {
  struct events e;
  memset(&e, 0, sizeof e);
  struct events_options o = {0};
  int ret = dnt_options_parse(&usage_events, "events", argc, argv, &o);
  if (ret) {
    ret = ret == DNT_OPTIONS_DONE ? DNT_EXIT_OK : ret;
    goto out;
  }
  e.providers = o.providers.v;
  e.nproviders = o.providers.n;
  e.names = o.names.v;
  e.nnames = o.names.n;
  e.limit = (uint64_t)o.count;
  e.json = o.json;
  e.verbose = o.verbose;
  const char **schemas = o.schemas.v;
  size_t nschemas = o.schemas.n;
  const char *path = o.trace;

  /* the built-in layouts, then the user's files, which may replace them */
  char why[512], schema_path[4096];
  if (!(e.schema = dnt_schema_new())) dnt_die(DNT_EXIT_FAILURE, "out of memory");
  if (dnt_schema_default_path(schema_path, sizeof schema_path) < 0 ||
      dnt_schema_load(e.schema, schema_path, why, sizeof why) < 0)
    dnt_warning("no layouts of the runtime's events (its events show as Event(N) with their size): %s%s",
                dnt_schema_default_path(schema_path, sizeof schema_path) < 0 ? "cannot read " : "",
                dnt_schema_default_path(schema_path, sizeof schema_path) < 0 ? schema_path : why);
  else if (e.verbose)
    fprintf(stderr, "dntrace: runtime event layouts from '%s'\n", schema_path);
  for (size_t k = 0; k < nschemas; k++) {
    if (access(schemas[k], R_OK) != 0) { /* our own line, not libxml2's "failed to load external entity" */
      dnt_error("--schema: cannot read '%s': %s", schemas[k], strerror(errno));
      ret = DNT_EXIT_FAILURE;
      goto out;
    }
    if (dnt_schema_load(e.schema, schemas[k], why, sizeof why) < 0) {
      dnt_error("--schema: %s", why);
      ret = DNT_EXIT_FAILURE; /* a file that is no schema is bad input, as a trace that is no trace */
      goto out;
    }
  }
  dnt_record_init(&e.rec);
  ntr_callbacks cb = {.on_trace = on_trace, .on_event = on_event};
  ntr_stats st;
  char err[512];
  if (dnt_trace_zip_note(path, err, sizeof err) > 0) dnt_warning("%s", err);
  int rc = dnt_trace_read(path, &cb, &e, &st, err, sizeof err);
  fflush(stdout);
  if (rc < 0) {
    dnt_error("%s", err);
    ret = DNT_EXIT_FAILURE;
    goto out_rec;
  }
  /* The summary goes to stderr, so stdout holds nothing but events. */
  fprintf(stderr, "%llu event%s shown (%s %llu %s)\n", (unsigned long long)e.shown, e.shown == 1 ? "" : "s",
          rc == DNT_TRACE_STOPPED ? "stopped after" : "of", (unsigned long long)st.events,
          rc == DNT_TRACE_STOPPED ? "read" : "in the trace");
  if (st.dropped_events)
    dnt_warning("the trace misses %llu events that its writer dropped (sequence number gaps)",
                (unsigned long long)st.dropped_events);
  if (e.undecodable)
    dnt_warning("%llu events did not match their metadata's field description", (unsigned long long)e.undecodable);
  if (e.partial && e.verbose)
    dnt_warning("%llu runtime events have bytes past the fields their layout describes (versions newer than the "
                "schema's are shown with the fields it knows)",
                (unsigned long long)e.partial);
  /* a provider asked for that the trace does not have (read whole): say which it has */
  if (rc != DNT_TRACE_STOPPED) say_unmatched_providers(&e);
  if (rc == DNT_TRACE_TRUNCATED) {
    dnt_warning("%s: the events before the cut are shown", err);
  } else if (rc == DNT_TRACE_DAMAGED) {
    dnt_error("%s: the events before it are shown", err);
    ret = DNT_EXIT_FAILURE;
  }
out_rec:
  dnt_record_release(&e.rec);
  free(e.scratch);
  for (size_t k = 0; k < e.nseen; k++) free(e.seen[k]);
out:
  dnt_schema_free(e.schema);
  free(o.schemas.v);
  free(o.providers.v);
  free(o.names.v);
  return ret;
}
