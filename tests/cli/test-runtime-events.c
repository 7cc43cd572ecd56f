/* The runtime's own events in `dntrace events`: the schema generated from the runtime's
 * manifest (layouts per version, arrays and structs counted by earlier fields, pointer-sized
 * fields), TraceEvent's names, 32-bit traces, execution checkpoints, and the schema found from
 * the build tree. Expected values come from TraceEvent (tests/bench-traceevent --mode names,
 * and TraceEvent 3.2.8's readers of the events named), from the corpus' own documentation, or
 * by construction; never from dntrace. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dnt-trace.h"
#include "../lib/bytes-cr.h"
#include "../lib/env-cr.h"
#include "../lib/run.h"
#include "../lib/target-cr.h"
#include "../lib/target.h"
#include "ntr.h"

/* ---- helpers ---------------------------------------------------------------------------- */

/* A schema file holding `xml`, loaded; the path goes in path (64 bytes). */
static struct dnt_schema *load_xml(const char *xml, char *path, char *err, size_t errlen, int *rc) {
  snprintf(path, 64, "/tmp/dnt-rtev-XXXXXX");
  int fd = mkstemp(path);
  cr_assert_geq(fd, 0);
  cr_assert_eq(write(fd, xml, strlen(xml)), (ssize_t)strlen(xml));
  close(fd);
  struct dnt_schema *s = dnt_schema_new();
  cr_assert(s);
  *rc = dnt_schema_load(s, path, err, errlen);
  unlink(path);
  return s;
}

static char corpus[4096];

static void need_corpus(void) { corpus_dir(corpus, sizeof corpus); }

/* tests/data/traceevent-names/NAME.tsv into buf: "provider\tid\tversion\tname" lines, as
 * tests/bench-traceevent --mode names printed them for the corpus trace. */
static void traceevent_names(const char *name, char *buf, size_t cap) {
  const char *src = getenv("DNT_SRCDIR");
  char path[4400];
  snprintf(path, sizeof path, "%s/tests/data/traceevent-names/%s.tsv", src ? src : ".", name);
  FILE *fp = fopen(path, "r");
  cr_assert(fp, "cannot read %s", path);
  size_t n = fread(buf, 1, cap - 1, fp);
  buf[n] = '\0';
  cr_assert(feof(fp), "%s is larger than %zu bytes", path, cap);
  fclose(fp);
}

/* ---- the schema format, version 2 ------------------------------------------------------- */

/* One event with every new kind of field: a pointer, a count and an array counted by it, a
 * fixed array, a struct array counted by an earlier field (its members counted inside it), a
 * Binary of a length field, an AnsiString. */
static const char LAYOUT_XML[] =
    "<dntrace-schema version=\"2\"><provider name=\"P\" guid=\"00000000-0000-0000-0000-000000000001\">"
    "<event id=\"5\" version=\"0\" name=\"T/Old\"><field name=\"a\" type=\"UInt32\"/></event>"
    "<event id=\"5\" version=\"2\" name=\"T/Op\" symbol=\"TOp_V2\" task=\"T\" opcode=\"Op\" opcode-value=\"12\""
    " level=\"5\" keywords=\"0x8000\">"
    "<field name=\"Ptr\" type=\"Pointer\"/>"
    "<field name=\"N\" type=\"UInt16\"/>"
    "<field name=\"Items\" type=\"UInt32\" count=\"N\"/>"
    "<field name=\"Pair\" type=\"Byte\" count=\"2\"/>"
    "<field name=\"Count\" type=\"UInt32\"/>"
    "<struct name=\"Values\" count=\"Count\">"
    "<field name=\"K\" type=\"UInt16\"/><field name=\"M\" type=\"Byte\"/><field name=\"L\" type=\"UInt64\" count=\"M\"/>"
    "</struct>"
    "<field name=\"Len\" type=\"UInt32\"/>"
    "<field name=\"Data\" type=\"Binary\" length=\"Len\"/>"
    "<field name=\"Ansi\" type=\"AnsiString\"/>"
    "<field name=\"Tail\" type=\"String\"/>"
    "</event></provider></dntrace-schema>";

/* The payload LAYOUT_XML describes, with pointers `ptr` bytes wide. */
static void layout_payload(struct bytes *b, int ptr) {
  b->n = 0;
  if (ptr == 4) put32(b, 0xdeadbeef);
  else put64(b, 0x1122334455667788ull);
  put16(b, 3), put32(b, 10), put32(b, 20), put32(b, 30); /* N, Items */
  put8(b, 7), put8(b, 8);                                /* Pair */
  put32(b, 2);                                           /* Count */
  put16(b, 100), put8(b, 1), put64(b, 1000);             /* Values[0] */
  put16(b, 200), put8(b, 0);                             /* Values[1] */
  put32(b, 3), put8(b, 0xab), put8(b, 0xcd), put8(b, 0xef); /* Len, Data */
  put8(b, 'h'), put8(b, 0xe9), put8(b, 0);                /* "hé" in Latin-1 */
  putws(b, "end");
}

static const char *text_of(const dnt_record *r, const char *name, char *buf, size_t cap) {
  const dnt_value *v = dnt_record_get(r, name);
  cr_assert(v, "no value named %s", name);
  dnt_value_format(v, buf, cap);
  return buf;
}

Test(schema_v2, every_field_kind_decodes_at_both_pointer_sizes) {
  char path[64], err[256], t[64];
  int rc;
  struct dnt_schema *s = load_xml(LAYOUT_XML, path, err, sizeof err, &rc);
  cr_assert_eq(rc, 0, "%s", err);
  uint32_t n;
  const dnt_schema_event *e = dnt_schema_find(s, "P", 5, 2, &n);
  cr_assert(e);
  cr_assert_str_eq(e->name, "T/Op");
  cr_assert_str_eq(e->symbol, "TOp_V2");
  cr_assert_str_eq(e->task, "T");
  cr_assert_str_eq(e->opcode, "Op");
  cr_assert_eq(e->opcode_value, 12);
  cr_assert_eq(e->level, 5);
  cr_assert_eq(e->keywords, 0x8000);
  cr_assert(e->has_info);
  /* versions: exact, else the highest below, else the lowest above */
  cr_assert_str_eq(dnt_schema_find(s, "P", 5, 0, &n)->name, "T/Old");
  cr_assert_str_eq(dnt_schema_find(s, "P", 5, 1, &n)->name, "T/Old");
  cr_assert_str_eq(dnt_schema_find(s, "P", 5, 9, &n)->name, "T/Op");
  cr_assert_null(dnt_schema_find(s, "P", 6, 0, &n));
  e = dnt_schema_find(s, "P", 5, 2, &n);
  dnt_record r;
  dnt_record_init(&r);
  for (int ptr = 4; ptr <= 8; ptr += 4) {
    struct bytes b;
    layout_payload(&b, ptr);
    cr_assert_eq(dnt_record_decode_layout(&r, e->fields, n, (uint32_t)ptr, b.b, b.n), 0, "%s", r.err);
    cr_assert_eq(r.trailing, 0);
    const dnt_value *p = dnt_record_get(&r, "Ptr");
    cr_assert_eq(p->u, ptr == 4 ? 0xdeadbeefu : 0x1122334455667788ull);
    cr_assert_str_eq(dnt_type_name(p->type), "Pointer");
    cr_assert_str_eq(text_of(&r, "Items[2]", t, sizeof t), "30");
    cr_assert_eq(dnt_record_get(&r, "Items")->count, 3);
    cr_assert_str_eq(text_of(&r, "Pair[1]", t, sizeof t), "8");
    cr_assert_str_eq(text_of(&r, "Values[0].K", t, sizeof t), "100");
    cr_assert_str_eq(text_of(&r, "Values[0].L[0]", t, sizeof t), "1000");
    cr_assert_str_eq(text_of(&r, "Values[1].K", t, sizeof t), "200");
    cr_assert_eq(dnt_record_get(&r, "Values[1].L")->count, 0);
    cr_assert_str_eq(text_of(&r, "Data", t, sizeof t), "abcdef");
    cr_assert_str_eq(text_of(&r, "Ansi", t, sizeof t), "h\xc3\xa9");
    cr_assert_str_eq(text_of(&r, "Tail", t, sizeof t), "end");
    /* every truncation is an error, never a read past the end */
    for (size_t cut = 0; cut < b.n; cut++)
      cr_assert_neq(dnt_record_decode_layout(&r, e->fields, n, (uint32_t)ptr, b.b, cut), 0, "cut at %zu", cut);
  }
  /* a count larger than what follows: an error, not an allocation of that size */
  struct bytes b;
  layout_payload(&b, 8);
  b.b[8] = 0xff, b.b[9] = 0xff;
  cr_assert_eq(dnt_record_decode_layout(&r, e->fields, n, 8, b.b, b.n), NTR_ETRUNCATED, "%s", r.err);
  /* the layout types mean nothing in a trace's own metadata */
  ntr_field bogus = {.name = "x", .type = DNT_TYPE_POINTER};
  cr_assert_eq(dnt_record_decode(&r, &bogus, 1, b.b, b.n), NTR_EFORMAT);
  dnt_record_release(&r);
  dnt_schema_free(s);
}

Test(schema_v2, bad_files_are_one_line_naming_the_line) {
  static const struct {
    const char *xml, *want;
  } cases[] = {
      {"<dntrace-schema version=\"2\"><provider name=\"P\"><event id=\"1\" name=\"E\">\n"
       "<field name=\"a\" type=\"UInt32\" count=\"b\"/></event></provider></dntrace-schema>",
       ":2: count= is neither a number up to 65535 nor an earlier field: b"},
      {"<dntrace-schema version=\"2\"><provider name=\"P\"><event id=\"1\" name=\"E\">\n"
       "<field name=\"d\" type=\"Binary\"/></event></provider></dntrace-schema>",
       ":2: a Binary field needs length= naming an earlier field"},
      {"<dntrace-schema version=\"2\"><provider name=\"P\">\n<event id=\"1\" name=\"E\" version=\"x\"/>"
       "</provider></dntrace-schema>",
       ":2: version=, opcode-value= and level= are numbers"},
      {"<dntrace-schema version=\"2\"><provider name=\"P\"><event id=\"1\" name=\"E\">\n"
       "<struct name=\"s\" count=\"70000\"><field name=\"a\" type=\"Byte\"/></struct></event></provider></dntrace-schema>",
       ":2: count= is neither a number up to 65535"},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    char path[64], err[256];
    int rc;
    struct dnt_schema *s = load_xml(cases[k].xml, path, err, sizeof err, &rc);
    cr_assert_eq(rc, -1, "case %zu loaded", k);
    cr_assert(strstr(err, path) && strstr(err, cases[k].want), "case %zu: %s", k, err);
    cr_assert_null(strchr(err, '\n'));
    dnt_schema_free(s);
  }
}

/* The loader never crashes on a cut file: it loads, or says why in one line. */
Test(schema_v2, every_truncation_of_a_file_loads_or_says_why) {
  size_t n = strlen(LAYOUT_XML);
  for (size_t cut = 0; cut < n; cut += 7) {
    char xml[sizeof LAYOUT_XML], path[64], err[256];
    int rc;
    memcpy(xml, LAYOUT_XML, cut);
    xml[cut] = '\0';
    err[0] = '\0';
    struct dnt_schema *s = load_xml(xml, path, err, sizeof err, &rc);
    cr_assert(rc == 0 || (rc == -1 && err[0] && !strchr(err, '\n')), "cut at %zu: %d %s", cut, rc, err);
    dnt_schema_free(s);
  }
}

/* A version 1 file's event (no version=) replaces every version of its id. */
Test(schema_v2, an_unversioned_event_replaces_every_version) {
  char path[64], err[256];
  int rc;
  struct dnt_schema *s = load_xml(LAYOUT_XML, path, err, sizeof err, &rc);
  cr_assert_eq(rc, 0, "%s", err);
  char xml[] = "<dntrace-schema version=\"1\"><provider name=\"P\"><event id=\"5\" name=\"Mine\">"
               "<field name=\"x\" type=\"UInt32\"/><field name=\"y\" type=\"UInt32\" since=\"2\"/>"
               "</event></provider></dntrace-schema>";
  snprintf(path, sizeof path, "/tmp/dnt-rtev-XXXXXX");
  int fd = mkstemp(path);
  cr_assert_eq(write(fd, xml, strlen(xml)), (ssize_t)strlen(xml));
  close(fd);
  cr_assert_eq(dnt_schema_load(s, path, err, sizeof err), 0, "%s", err);
  unlink(path);
  uint32_t n;
  cr_assert_str_eq(dnt_schema_find(s, "P", 5, 2, &n)->name, "Mine");
  cr_assert_eq(n, 2);
  cr_assert_str_eq(dnt_schema_find(s, "P", 5, 1, &n)->name, "Mine");
  cr_assert_eq(n, 1, "since=2: absent from version 1");
  dnt_schema_free(s);
}

/* like= copies an earlier event's layout, structs and counted arrays included. */
Test(schema_v2, like_copies_a_whole_layout) {
  char path[64], err[256], t[32];
  int rc;
  struct dnt_schema *s =
      load_xml("<dntrace-schema version=\"2\"><provider name=\"P\">"
               "<event id=\"8\" name=\"Orig\"><field name=\"C\" type=\"Byte\"/>"
               "<struct name=\"S\" count=\"C\"><field name=\"N\" type=\"Byte\"/><field name=\"V\" type=\"UInt16\" count=\"N\"/>"
               "</struct></event><event id=\"9\" name=\"Copy\" like=\"P/8\"/></provider></dntrace-schema>",
               path, err, sizeof err, &rc);
  cr_assert_eq(rc, 0, "%s", err);
  uint32_t n;
  const dnt_schema_event *e = dnt_schema_find(s, "P", 9, 0, &n);
  cr_assert(e);
  cr_assert_str_eq(e->name, "Copy");
  static const uint8_t payload[] = {2, 1, 0x34, 0x12, 2, 1, 0, 2, 0};
  dnt_record r;
  dnt_record_init(&r);
  cr_assert_eq(dnt_record_decode_layout(&r, e->fields, n, 8, payload, sizeof payload), 0, "%s", r.err);
  cr_assert_eq(r.trailing, 0);
  cr_assert_str_eq(text_of(&r, "S[0].V[0]", t, sizeof t), "4660");
  cr_assert_str_eq(text_of(&r, "S[1].V[1]", t, sizeof t), "2");
  dnt_record_release(&r);
  dnt_schema_free(s);
}

/* ---- the corpus ------------------------------------------------------------------------- */

/* HeartRateMonitor.10068: a 32-bit process (INDEX.md). TraceEvent 3.2.8 reads its first
 * GC/GenerationRange as Generation=3 RangeStart=4065329152 (0xf2500000) RangeUsedLength=66000
 * RangeReservedLength=16773120 ClrInstanceID=0: the ClrInstanceID after the pointer lands only
 * with 4-byte pointers. It counts 921 SampleProfiler events. */
/* .timeout: above one DNT_HANG_MS ceiling (only a hang reaches it; a failed step ends the test)
 * and a loaded healthy run */
Test(runtime_corpus, a_32_bit_trace_decodes, .timeout = 240) {
  need_corpus();
  struct dnt_run r;
  const char *f = "microsoft__perfview/HeartRateMonitor.10068.nettrace";
  cr_assert_eq(corpus_events(&r, corpus, f, NULL), 0, "%s", r.err);
  cr_assert(strstr(r.out, " GC/GenerationRange Generation=3 RangeStart=0xf2500000 RangeUsedLength=66000 "
                          "RangeReservedLength=16773120 ClrInstanceID=0\n"),
            "%.400s", r.out);
  cr_assert(strstr(r.out, " GC/Start Count=4 Depth=0 Reason=0 Type=0 ClrInstanceID=0 ClientSequenceNumber=0\n"), "%.400s",
            r.out);
  /* the runtime's events under TraceEvent's names (columns 7 and 8: provider and name) */
  char expected[16384];
  traceevent_names("HeartRateMonitor.10068", expected, sizeof expected);
  size_t samples = 0;
  for (const char *l = r.out; *l; l = strchr(l, '\n') + 1) {
    size_t len = strcspn(l, "\n");
    char prov[128], name[128], row[300];
    char head[512]; /* sscanf would measure the whole rest of the output: one line only */
    snprintf(head, sizeof head, "%.*s", (int)len, l);
    cr_assert_eq(sscanf(head, "%*s %*s %*s %*s %*s %*s %127s %127s", prov, name), 2, "%s", head);
    if (!strncmp(prov, "Microsoft-Windows-DotNETRuntime", 31)) {
      snprintf(row, sizeof row, "\t%s\n", name);
      int found = 0;
      for (const char *e = strstr(expected, row); e && !found; e = strstr(e + 1, row)) {
        const char *bol = e;
        while (bol > expected && bol[-1] != '\n') bol--;
        found = !strncmp(bol, prov, strlen(prov)) && bol[strlen(prov)] == '\t';
      }
      cr_assert(found, "TraceEvent has no %s event named %s: %.*s", prov, name, (int)len, l);
    }
    if (!memmem(l, len, " Microsoft-DotNETCore-SampleProfiler ", 37)) continue;
    samples++;
    cr_assert(len > 7 && (!memcmp(l + len - 7, " Type=1", 7) || !memcmp(l + len - 7, " Type=2", 7)), "%.*s", (int)len, l);
  }
  cr_assert_eq(samples, 921);
  /* nothing left undecoded, nothing that does not fit its layout */
  cr_assert_null(strstr(r.out, "Event("), "%.300s", strstr(r.out, "Event("));
  cr_assert_null(strstr(r.err, "did not match"), "%s", r.err);
  dnt_run_free(&r);
}

/* TraceEvent and PerfView give the three checkpoints of this .NET 6 trace as -15.97, 11.91
 * and 12.20 ms from the session's start. */
Test(runtime_corpus, execution_checkpoints_in_milliseconds) {
  need_corpus();
  struct dnt_run r;
  cr_assert_eq(
      corpus_events(&r, corpus, "microsoft__perfview/eventpipe-dotnetcore6.0-win-x64-executioncheckpoints.nettrace", NULL),
      0, "%s", r.err);
  static const struct {
    const char *name;
    double ms;
  } want[] = {{"RuntimeInit", -15.97}, {"RuntimeSuspend", 11.91}, {"RuntimeResumed", 12.20}};
  cr_assert_eq(count_lines(r.out), 3, "%s", r.out);
  const char *l = r.out;
  for (size_t k = 0; k < 3; k++, l = strchr(l, '\n') + 1) {
    char needle[64];
    snprintf(needle, sizeof needle, " Name=%s ", want[k].name);
    const char *ms = strstr(l, " TimestampMs=");
    cr_assert(strstr(l, " ExecutionCheckpointRundown/ExecutionCheckpointDCEnd ") && strstr(l, needle) && ms &&
                  ms < strchr(l, '\n'),
              "%.*s", (int)strcspn(l, "\n"), l);
    double v = strtod(ms + 13, NULL);
    cr_assert(v > want[k].ms - 0.005 && v < want[k].ms + 0.005, "%s: %f ms, TraceEvent %.2f", want[k].name, v,
              want[k].ms);
  }
  dnt_run_free(&r);
  cr_assert_eq(corpus_events(&r, corpus,
                             "microsoft__perfview/eventpipe-dotnetcore6.0-win-x64-executioncheckpoints.nettrace", "--json",
                             "-n", "1", NULL),
               0, "%s", r.err);
  cr_assert(strstr(r.out, ",\"Name\":\"RuntimeInit\",\"Timestamp\":") && strstr(r.out, ",\"TimestampMs\":-15.9"), "%s",
            r.out);
  dnt_run_free(&r);
}

/* A field of a JSON line: the text after "key": up to the next , or } (strings unquoted, no
 * escapes in the runtime's names). */
static void json_field(const char *line, const char *key, char *out, size_t cap) {
  char k[64], head[512]; /* the header members come first: search them alone (ASan's strstr
                            measures the whole haystack, which is the rest of the output) */
  snprintf(k, sizeof k, "\"%s\":", key);
  snprintf(head, sizeof head, "%.*s", (int)strcspn(line, "\n"), line);
  const char *p = strstr(head, k);
  cr_assert(p, "no %s in %.200s", key, line);
  p += strlen(k);
  if (*p == '"') p++;
  size_t n = strcspn(p, "\",}");
  cr_assert_lt(n, cap);
  memcpy(out, p, n);
  out[n] = '\0';
}

/* The names TraceEvent gives the runtime's events of each trace (tests/data/traceevent-names,
 * from tests/bench-traceevent --mode names): dntrace gives every one the same name, and names
 * no other kind otherwise. TraceEvent names some kinds EventID(N) (it has no reader for them)
 * and turns GC/DynamicEvent (39) into events of its own ids: those are not compared. (The
 * 32-bit trace's names are compared in a_32_bit_trace_decodes.) */
Test(runtime_corpus, names_are_traceevent_names, .timeout = 180) {
  need_corpus();
  static const char *const traces[][2] = {
      {"microsoft__perfview/eventpipe-dotnetcore6.0-win-x64-executioncheckpoints.nettrace",
       "eventpipe-dotnetcore6.0-win-x64-executioncheckpoints"},
      {"microsoft__perfview/mixed_managed_external_samples.nettrace", "mixed_managed_external_samples"},
      {"microsoft__perfview/eventpipe-dotnetcore3.0-win-x64-objver4.nettrace", "eventpipe-dotnetcore3.0-win-x64-objver4"},
      {"shirhatti__Nettrace/allocTrace.nettrace", "allocTrace"},
      {"zetslief__nettrace/perf.nettrace", "perf"},
      {"tbbuck__countercow/runtime-net10-loaded.nettrace", "runtime-net10-loaded"},
  };
  for (size_t k = 0; k < sizeof traces / sizeof traces[0]; k++) {
    char expected[16384];
    traceevent_names(traces[k][1], expected, sizeof expected);
    struct dnt_run r;
    cr_assert_eq(corpus_events(&r, corpus, traces[k][0], "--json", NULL), 0, "%s", r.err);
    /* ours, one "provider\tid\tversion\tname" line per kind */
    char *ours = calloc(1, 65536);
    cr_assert(ours);
    for (const char *l = r.out; *l; l = strchr(l, '\n') + 1) {
      char prov[128], id[16], ver[16], name[128], row[320];
      json_field(l, "provider", prov, sizeof prov);
      if (strncmp(prov, "Microsoft-Windows-DotNETRuntime", 31) != 0) continue;
      json_field(l, "eventId", id, sizeof id);
      json_field(l, "version", ver, sizeof ver);
      json_field(l, "event", name, sizeof name);
      snprintf(row, sizeof row, "%s\t%s\t%s\t%s\n", prov, id, ver, name);
      if (!strstr(ours, row)) {
        cr_assert_lt(strlen(ours) + strlen(row), 65536);
        strcat(ours, row);
      }
    }
    dnt_run_free(&r);
    size_t compared = 0;
    for (const char *l = expected; *l; l = strchr(l, '\n') + 1) {
      char row[320];
      size_t len = strcspn(l, "\n");
      snprintf(row, sizeof row, "%.*s\n", (int)len, l);
      if (strstr(row, "\tEventID(") || atoi(strchr(row, '\t') + 1) >= 0xff00) continue;
      cr_assert(strstr(ours, row), "%s: TraceEvent's %.*s is not ours:\n%s", traces[k][1], (int)len, l, ours);
      compared++;
    }
    for (const char *l = ours; *l; l = strchr(l, '\n') + 1) {
      char key[200];
      size_t len = strcspn(l, "\n");
      const char *name = l + len;
      while (name > l && name[-1] != '\t') name--;
      snprintf(key, sizeof key, "%.*s", (int)(name - l), l); /* provider, id, version */
      if (atoi(strchr(l, '\t') + 1) == 39) continue;
      const char *te = strstr(expected, key);
      cr_assert(te, "%s: TraceEvent has no %.*s", traces[k][1], (int)len, l);
      if (!strncmp(te + strlen(key), "EventID(", 8)) continue;
      cr_assert(!strncmp(te, l, len + 1), "%s: ours %.*s, TraceEvent's %.*s", traces[k][1], (int)len, l,
                (int)strcspn(te, "\n"), te);
    }
    cr_assert_gt(compared, 0, "%s", traces[k][1]);
    free(ours);
  }
}

/* ---- a fresh trace, from the build tree ------------------------------------------------- */

/* Without DNT_DATADIR (the test environment sets it), dntrace run from its build tree finds the
 * source tree's data/runtime-events.xml, and every runtime event of a default collect of the
 * sample target is decoded: no Event(N) left for the runtime's providers. */
/* .timeout: the sample's start, its 3 s trace and dntrace on it, under DNT_HANG_MS each (only a
 * hang reaches it; a failed step ends the test) */
Test(runtime_target, fresh_trace_decodes_from_the_build_tree, .timeout = 300) {
  DNT_REQUIRE_TARGET();
  char dir[] = "/tmp/dnt-rtev-XXXXXX", trace[64];
  dnt_collect_sample_trace(dir, trace, sizeof trace);
  struct dnt_run r;
  char *argv[] = {(char *)dnt_bin(), "events", trace, "-v", NULL};
  static const char *const env[] = {"DNT_DATADIR=", NULL};
  cr_assert_eq(dnt_run_argv(&r, argv, env, DNT_HANG_MS), 0, "%s", r.err);
  cr_assert(strstr(r.err, "dntrace: runtime event layouts from '") && strstr(r.err, "/data/runtime-events.xml'"), "%s",
            r.err);
  size_t runtime = 0;
  for (const char *l = r.out; *l; l = strchr(l, '\n') + 1) {
    size_t len = strcspn(l, "\n");
    const char *p = memmem(l, len, " Microsoft-Windows-DotNETRuntime", 32);
    if (!p && !memmem(l, len, " Microsoft-DotNETCore-SampleProfiler ", 37)) continue;
    runtime++;
    cr_assert_null(memmem(l, len, " Event(", 7), "%.*s", (int)len, l);
  }
  cr_assert_gt(runtime, 10);
  cr_assert_null(strstr(r.err, "did not match"), "%s", r.err);
  dnt_run_free(&r);
  unlink(trace);
  rmdir(dir);
}
