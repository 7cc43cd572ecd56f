/* Event names and opcodes as TraceEvent gives them, kind by kind, asked of TraceEvent itself
 * (tests/bench-traceevent --mode kinds) at test time: on every corpus trace TraceEvent reads
 * whole, and on traces written here with each opcode rule of EventPipe metadata (a name ending
 * in Start or Stop with and without an opcode, each standard opcode, an unknown one), in V5 and
 * V6. TraceEvent's own slips are kept out, each named below. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../lib/env-cr.h"
#include "../lib/ntr-writer.h"
#include "../lib/run.h"
#include "ntr.h"

static char corpus[4096];

/* One JSON field of a line of `events --json`, as text (a string's without its quotes). */
static void json_field(const char *line, const char *key, char *out, size_t cap) {
  char k[64];
  snprintf(k, sizeof k, "\"%s\":", key);
  const char *eol = strchr(line, '\n');
  const char *p = strstr(line, k);
  cr_assert(p && (!eol || p < eol), "no %s in %.200s", key, line);
  p += strlen(k);
  int quoted = *p == '"';
  p += quoted;
  size_t n = quoted ? strcspn(p, "\"") : strcspn(p, ",}");
  cr_assert_lt(n, cap, "%s: %.200s", key, line);
  memcpy(out, p, n);
  out[n] = '\0';
}

/* A growing set of lines "provider<TAB>id<TAB>version<TAB>opcode<TAB>name\n". */
struct kinds {
  char *text;
  size_t len, cap;
};

static void kinds_add(struct kinds *k, const char *row) {
  if (k->text && strstr(k->text, row)) return;
  size_t n = strlen(row);
  if (k->len + n + 1 > k->cap) {
    k->cap = (k->len + n + 1) * 2;
    k->text = realloc(k->text, k->cap);
    cr_assert(k->text);
  }
  memcpy(k->text + k->len, row, n + 1);
  k->len += n;
}

/* Ours: `dntrace events --json`'s kinds. */
static void ours(const char *path, struct kinds *k) {
  char *argv[] = {(char *)dnt_bin(), "events", (char *)path, "--json", NULL};
  struct dnt_run r;
  cr_assert_eq(dnt_run_argv(&r, argv, NULL, 120000), 0, "%s: %s", path, r.err);
  /* a line at a time, copied: string functions on the whole output would go over all of it
   * each time (ASan's strstr measures its haystack first) */
  const char *end = r.out + strlen(r.out);
  for (const char *p = r.out; p < end;) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
    char l[2048], prov[256], id[16], ver[16], op[16], name[512], row[900];
    snprintf(l, sizeof l, "%.*s", (int)len, p); /* the kind's fields come before the payload's */
    p += len + 1;
    json_field(l, "provider", prov, sizeof prov);
    json_field(l, "eventId", id, sizeof id);
    json_field(l, "version", ver, sizeof ver);
    json_field(l, "opcode", op, sizeof op);
    json_field(l, "event", name, sizeof name);
    snprintf(row, sizeof row, "%s\t%s\t%s\t%s\t%s\n", prov, id, ver, op, name);
    kinds_add(k, row);
  }
  dnt_run_free(&r);
}

/* TraceEvent's, or 0 when it does not read the trace whole (it stops at a cut stream). */
static int theirs(const char *oracle, const char *path, struct kinds *k) {
  struct dnt_run r;
  int rc = te_run(&r, oracle, path, "kinds");
  if (rc == 0)
    for (const char *l = r.out; *l; l = strchr(l, '\n') + 1) {
      char row[900];
      snprintf(row, sizeof row, "%.*s\n", (int)strcspn(l, "\n"), l);
      kinds_add(k, row);
    }
  dnt_run_free(&r);
  return rc == 0 && k->len > 0;
}

/* The kind's key ("provider<TAB>id<TAB>version<TAB>") of a row. */
static void key_of(const char *row, char *key, size_t cap) {
  const char *p = row;
  for (int tabs = 0; tabs < 3 && p; tabs++) p = strchr(p, '\t'), p = p ? p + 1 : NULL;
  cr_assert(p, "%s", row);
  snprintf(key, cap, "%.*s", (int)(p - row), row);
}

/* Where TraceEvent is not the reference: kinds it has no reader for (EventID(N)), the runtime's
 * GC/DynamicEvent (39: TraceEvent makes events of its own of it) and its ids of 0xff00 and up,
 * and PinPlugAtGCTime, whose opcode TraceEvent's parser has one off the manifest's (44). */
static int te_not_the_reference(const char *row) {
  return strstr(row, "\tEventID(") || strstr(row, "GC/PinPlugAtGCTime") ||
         (strncmp(row, "Microsoft-Windows-DotNETRuntime\t", 32) == 0 &&
          (atoi(row + 32) == 39 || atoi(row + 32) >= 0xff00));
}

static int compare(const char *oracle, const char *path) {
  struct kinds te = {0}, us = {0};
  if (!theirs(oracle, path, &te)) {
    cr_log_info("%s: TraceEvent does not read it whole: not compared", path);
    free(te.text);
    return 0;
  }
  ours(path, &us);
  size_t compared = 0;
  for (const char *l = te.text; *l; l = strchr(l, '\n') + 1) {
    char row[900];
    snprintf(row, sizeof row, "%.*s\n", (int)strcspn(l, "\n"), l);
    if (te_not_the_reference(row)) continue;
    cr_expect(strstr(us.text, row), "%s: TraceEvent's kind %.*s is not ours:\n%s", path, (int)strcspn(l, "\n"), l,
              us.text);
    compared++;
  }
  for (const char *l = us.text; *l; l = strchr(l, '\n') + 1) {
    char row[900], key[600];
    snprintf(row, sizeof row, "%.*s\n", (int)strcspn(l, "\n"), l);
    key_of(row, key, sizeof key);
    const char *t = strstr(te.text, key);
    if (!t || te_not_the_reference(t) || te_not_the_reference(row) || strstr(te.text, row)) continue;
    /* TraceEvent keeps the first metadata of an event id: an EventSource's EventCounters events,
     * which share an id with another of its events in some traces (Kestrel's 11), take that
     * event's name there */
    if (strstr(row, "\tEventCounters\n")) continue;
    cr_expect_fail("%s: our kind %.*s is not TraceEvent's %.*s", path, (int)strcspn(l, "\n"), l,
                   (int)strcspn(t, "\n"), t);
  }
  free(te.text);
  free(us.text);
  return compared > 0;
}

static void compare_corpus_trace(void *ud, const char *path) {
  size_t n = strlen(path);
  /* the zipped: dntrace's own tests (the oracle reads plain files) */
  if ((n < 9 || strcmp(path + n - 9, ".nettrace") != 0) && (n < 8 || strcmp(path + n - 8, ".netperf") != 0)) return;
  *(size_t *)ud += (size_t)compare(te_oracle_or_skip("event names"), path);
}

Test(event_names, corpus_kinds_are_traceevent_kinds, .timeout = 600) {
  corpus_dir(corpus, sizeof corpus);
  size_t compared = 0;
  corpus_each(corpus, corpus_is_trace, compare_corpus_trace, &compared);
  cr_assert_geq(compared, 12, "the corpus's traces TraceEvent reads whole are compared: %zu", compared);
}

/* Every opcode rule, in one provider's events: name, opcode in the metadata (-1: none). */
static const struct {
  const char *name;
  int opcode;
} rules[] = {
    {"FooStart", -1}, {"PlainStop", -1}, {"lowerstart", -1}, {"BarStart", 1},   {"BazStop", 2},     {"WaitStart", 2},
    {"OpStart", 0},   {"Start", 1},      {"Stop", 2},        {"barstart", 1},   {"Dc", 3},          {"Dcend", 4},
    {"Ext", 5},       {"Rep", 6},        {"Res", 7},         {"Sus", 8},        {"TaskWaitBegin", 9}, {"Zed", 24},
    {"Recv", 240},    {"Plain", -1},
};

static void write_rules(const char *path, int v6) {
  ntrw w;
  ntrw_init(&w, v6);
  ntrw_trace t = {0, 1000000000, 8, 4242, 1, 1000000, NULL, 0};
  ntrw_trace_hdr(&w, &t);
  const size_t n = sizeof rules / sizeof rules[0];
  static const ntrw_field field = {.name = "X", .type = NTR_TYPE_INT32};
  ntrw_md_begin(&w);
  for (size_t i = 0; i < n; i++) {
    ntrw_md md = {(uint32_t)i + 1, "My-Source", (uint32_t)i + 1, rules[i].name, 0, 0, 4, rules[i].opcode, &field, 1, 0, 0};
    ntrw_metadata(&w, &md);
  }
  ntrw_block_end(&w);
  if (v6) ntrw_thread(&w, 1, 77, NULL);
  ntrw_ev_begin(&w, 1);
  static const uint8_t payload[4] = {1, 0, 0, 0};
  for (size_t i = 0; i < n; i++) {
    ntrw_ev e = {.metadata_id = (uint32_t)i + 1, .seq = (uint32_t)i + 1, .thread = v6 ? 1 : 77,
                 .capture_thread = v6 ? 1 : 77, .ts = 100 + i, .payload = payload, .payload_size = 4};
    ntrw_event(&w, &e);
  }
  ntrw_block_end(&w);
  ntrw_end(&w);
  FILE *fp = fopen(path, "wb");
  cr_assert(fp);
  cr_assert_eq(fwrite(w.buf, 1, w.len, fp), w.len);
  fclose(fp);
  ntrw_release(&w);
}

Test(event_names, every_opcode_rule_as_traceevent, .timeout = 240) {
  const char *oracle = te_oracle_or_skip("event names");
  char dir[] = "/tmp/dnt-opnames-XXXXXX", path[64];
  cr_assert(mkdtemp(dir));
  for (int v6 = 0; v6 < 2; v6++) {
    snprintf(path, sizeof path, "%s/rules-v%d.nettrace", dir, v6 ? 6 : 5);
    write_rules(path, v6);
    cr_assert(compare(oracle, path), "TraceEvent reads %s", path);
    unlink(path);
  }
  cr_assert_eq(rmdir(dir), 0);
}

/* --name takes either spelling, TraceEvent's and the metadata's */
Test(event_names, name_filter_takes_either_spelling) {
  char dir[] = "/tmp/dnt-opnames-XXXXXX", path[64];
  cr_assert(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/rules.nettrace", dir);
  write_rules(path, 0);
  const char *spellings[] = {"Foo/Start", "FooStart"};
  for (int i = 0; i < 2; i++) {
    char *argv[] = {(char *)dnt_bin(), "events", path, "--name", (char *)spellings[i], NULL};
    struct dnt_run r;
    cr_assert_eq(dnt_run_argv(&r, argv, NULL, DNT_HANG_MS), 0, "%s", r.err);
    cr_assert(strstr(r.out, " My-Source Foo/Start X=1\n") && strchr(r.out, '\n') == strrchr(r.out, '\n'), "%s: %s",
              spellings[i], r.out);
    dnt_run_free(&r);
  }
  unlink(path);
  cr_assert_eq(rmdir(dir), 0);
}
