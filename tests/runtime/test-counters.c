/* dntrace counters: the --counters grammar and the session's providers (unit tests of
 * counters-session.c), the decoding of recorded counter traces from the corpus, and collect /
 * monitor against the real sample target. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <sys/wait.h>
#include <signal.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dnt-counters.h"
#include "../lib/env-cr.h"
#include "../lib/loopback.h"
#include "../lib/run.h"
#include "../lib/target-cr.h"
#include "../lib/target.h"

/* ---- the grammar ---- */

struct grammar_case {
  const char *spec;
  const char *want; /* "prov[a,b];prov2[]" or NULL for an error */
  const char *err;  /* a piece of the message when an error */
};

static const struct grammar_case grammar_cases[] = {
    {"System.Runtime", "System.Runtime[]", NULL},
    {"System.Runtime[cpu-usage]", "System.Runtime[cpu-usage]", NULL},
    {"System.Runtime[cpu-usage,working-set],Sample.Meter", "System.Runtime[cpu-usage,working-set];Sample.Meter[]", NULL},
    {" A [ x , y ] , B ", "A[x,y];B[]", NULL},
    {"A[x],A[y],A[x]", "A[x,y]", NULL},
    {"A[x],A", "A[]", NULL},
    {"A,A[x]", "A[]", NULL},
    {"EventCounters\\System.Runtime[cpu-usage]", "EC:System.Runtime[cpu-usage]", NULL},
    {"EventCounters\\System.Runtime,System.Runtime", "EC:System.Runtime[];System.Runtime[]", NULL},
    {"A[x", NULL, "unbalanced"},
    {"A[x[y]]", NULL, "unbalanced"},
    {"A]x", NULL, "without '['"},
    {"A[x]B", NULL, "unexpected 'B'"},
    {"", NULL, "empty provider"},
    {"A,", NULL, "empty provider"},
    {",A", NULL, "empty provider"},
    {"A[]", NULL, "empty counter"},
    {"A[x,,y]", NULL, "empty counter"},
    {"EventCounters\\", NULL, "empty provider"},
};

static void render(const struct dnt_counter_specs *l, char *out, size_t cap) {
  size_t n = 0;
  out[0] = '\0';
  for (size_t i = 0; i < l->n; i++) {
    n += (size_t)snprintf(out + n, cap - n, "%s%s%s[", i ? ";" : "", l->v[i].eventcounters_only ? "EC:" : "",
                          l->v[i].provider);
    for (size_t k = 0; k < l->v[i].nnames; k++) n += (size_t)snprintf(out + n, cap - n, "%s%s", k ? "," : "", l->v[i].names[k]);
    n += (size_t)snprintf(out + n, cap - n, "]");
  }
}

/* The live table at 40 columns: a counter's tag rows stay apart (their values shown whole, the
 * long tag key cut), and no line is wider than the terminal. */
static int columns(const char *s, size_t n) {
  int c = 0;
  for (size_t i = 0; i < n; i++) c += ((unsigned char)s[i] & 0xC0) != 0x80;
  return c;
}

/* --showDeltas (dotnet-counters'): a Last Delta column, each series' change since its previous
 * value; none before a second value; no column without the option. */
Test(counters_view, show_deltas) {
  struct dnt_counter_table t;
  memset(&t, 0, sizeof t);
  dnt_counter_value v = {.provider = "System.Runtime", .name = "dotnet.gc.heap.total_allocated",
                         .display_name = "dotnet.gc.heap.total_allocated", .unit = "By", .tags = "",
                         .kind = DNT_COUNTER_MEAN, .from_meter = 1, .value = 1000, .interval_s = 1};
  dnt_counter_value w = v;
  w.name = w.display_name = "dotnet.thread_pool.thread.count";
  w.unit = "{thread}";
  w.value = 7;
  cr_assert_eq(dnt_counter_table_put(&t, &v), 0);
  cr_assert_eq(dnt_counter_table_put(&t, &w), 0);
  v.value = 1750;
  cr_assert_eq(dnt_counter_table_put(&t, &v), 0); /* allocated: a second value; thread count: one */
  char *text = NULL;
  size_t len = 0;
  FILE *fp = open_memstream(&text, &len);
  dnt_monitor_render(fp, &t, 1, "Running", 100, 0, 0, 1);
  fclose(fp);
  cr_expect(strstr(text, "Current Value      Last Delta"), "the header has both columns:\n%s", text);
  char *alloc = strstr(text, "dotnet.gc.heap.total_allocated"), *threads = strstr(text, "dotnet.thread_pool");
  cr_assert(alloc && threads, "%s", text);
  char line[256];
  snprintf(line, sizeof line, "%.*s", (int)strcspn(alloc, "\n"), alloc);
  cr_expect(strstr(line, "1,750") && strstr(line, " 750"), "value and its change (750): '%s'", line);
  snprintf(line, sizeof line, "%.*s", (int)strcspn(threads, "\n"), threads);
  cr_expect(strstr(line, " 7") && !strstr(line, "0 "), "one value so far: no delta: '%s'", line);
  free(text);
  text = NULL;
  fp = open_memstream(&text, &len);
  dnt_monitor_render(fp, &t, 1, "Running", 100, 0, 0, 0);
  fclose(fp);
  cr_expect(!strstr(text, "Last Delta"), "no column without the option:\n%s", text);
  free(text);
  dnt_counter_table_release(&t);
}

/* A counter's names, unit and tags are the target's words (issue 29): the table escapes their
 * control characters (a C1 CSI as UTF-8 too), so they cannot drive the operator's terminal. */
Test(counters_view, the_targets_words_are_escaped) {
  struct dnt_counter_table t;
  memset(&t, 0, sizeof t);
  dnt_counter_value v = {.provider = "Evil\x1b]0;owned\x07", .name = "requests\x1b[2J",
                         .display_name = "requests\x1b[2J\r", .unit = "\xc2\x9b" "31m", .tags = "path=/\x1b[8m",
                         .kind = DNT_COUNTER_MEAN, .from_meter = 1, .value = 5, .interval_s = 1};
  cr_assert_eq(dnt_counter_table_put(&t, &v), 0);
  char *text = NULL;
  size_t len = 0;
  FILE *fp = open_memstream(&text, &len);
  cr_assert(fp);
  dnt_monitor_render(fp, &t, 1, "Running", 100, 0, 0, 0);
  fclose(fp);
  for (const unsigned char *c = (const unsigned char *)text; *c; c++)
    cr_assert(!((*c < 0x20 && *c != '\n') || *c == 0x7f || (c[0] == 0xc2 && c[1] >= 0x80 && c[1] <= 0x9f)),
              "a raw control byte 0x%02x at offset %td:\n%s", *c, (const char *)c - text, text);
  cr_assert(strstr(text, "[Evil\\x1b]0;owned\\x07]"), "%s", text);
  cr_assert(strstr(text, "requests\\x1b[2J\\r"), "%s", text);
  cr_assert(strstr(text, "path=/\\x1b[8m"), "%s", text);
  free(text);
  dnt_counter_table_release(&t);
}

Test(counters_view, narrow_terminal_keeps_tag_rows_apart) {
  struct dnt_counter_table t;
  memset(&t, 0, sizeof t);
  static const char *const gens[] = {"gen0", "gen1", "gen2", "loh", "poh"};
  char tags[64];
  for (int i = 0; i < 5; i++) {
    snprintf(tags, sizeof tags, "gc.heap.generation=%s", gens[i]);
    dnt_counter_value v = {.provider = "System.Runtime", .name = "dotnet.gc.last_collection.heap.size",
                           .display_name = "dotnet.gc.last_collection.heap.size", .unit = "By", .tags = tags,
                           .kind = DNT_COUNTER_MEAN, .from_meter = 1, .value = 1000.0 * (i + 1), .interval_s = 1};
    cr_assert_eq(dnt_counter_table_put(&t, &v), 0);
  }
  for (int width = 30; width <= 120; width += 10) {
    char *text = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&text, &len);
    cr_assert(fp);
    dnt_monitor_render(fp, &t, 1, "Running", width, 0, 0, 0);
    fclose(fp);
    char seen[5][128];
    int rows = 0;
    for (char *l = text; *l;) {
      size_t n = strcspn(l, "\n");
      cr_assert_leq(columns(l, n), width, "width %d: '%.*s'", width, (int)n, l);
      for (int i = 0; i < 5; i++) {
        char want[16];
        snprintf(want, sizeof want, "%s ", gens[i]); /* the whole value, as a word */
        char *hit = strstr(l, want);
        if (hit && hit < l + n && hit > l && (hit[-1] == '=' || hit[-1] == ' ')) {
          cr_assert_lt(rows, 5);
          snprintf(seen[rows++], sizeof seen[0], "%.*s", (int)n, l);
        }
      }
      l += n + (l[n] == '\n');
    }
    cr_assert_eq(rows, 5, "width %d: each generation has its row, its value named:\n%s", width, text);
    for (int i = 0; i < 5; i++)
      for (int j = i + 1; j < 5; j++) cr_assert_str_neq(seen[i], seen[j], "width %d", width);
    if (width >= 100) cr_assert(strstr(text, "gc.heap.generation=gen0"), "wide: the whole tag\n%s", text);
    free(text);
  }
  dnt_counter_table_release(&t);
}

Test(counters_grammar, table) {
  for (size_t i = 0; i < sizeof grammar_cases / sizeof grammar_cases[0]; i++) {
    const struct grammar_case *c = &grammar_cases[i];
    struct dnt_counter_specs l = {0};
    char err[256] = "", got[512];
    int rc = dnt_counter_specs_parse(&l, c->spec, err, sizeof err);
    if (c->want) {
      cr_expect_eq(rc, 0, "'%s' parses (got: %s)", c->spec, err);
      render(&l, got, sizeof got);
      cr_expect_str_eq(got, c->want, "'%s'", c->spec);
    } else {
      cr_expect_lt(rc, 0, "'%s' is refused", c->spec);
      cr_expect(strstr(err, c->err) != NULL, "'%s': message '%s' mentions '%s'", c->spec, err, c->err);
    }
    dnt_counter_specs_release(&l);
  }
}

Test(counters_grammar, match) {
  struct dnt_counter_specs l = {0};
  char err[256];
  cr_assert_eq(dnt_counter_specs_parse(&l, "A[x,y],B", err, sizeof err), 0);
  cr_expect(dnt_counter_specs_match(&l, "A", "x"));
  cr_expect(!dnt_counter_specs_match(&l, "A", "z"));
  cr_expect(dnt_counter_specs_match(&l, "B", "anything"));
  cr_expect(!dnt_counter_specs_match(&l, "C", "x"));
  cr_expect(dnt_counter_specs_match(NULL, "C", "x"));
  dnt_counter_specs_release(&l);
}

Test(counters_wire, providers) {
  struct dnt_counter_specs l = {0};
  char err[256];
  cr_assert_eq(dnt_counter_specs_parse(&l, "System.Runtime,Sample.Meter[sample.requests,sample.latency],EventCounters\\Old", err,
                                       sizeof err), 0);
  struct dnt_counters_wire w;
  cr_assert_eq(dnt_counters_wire_build(&w, &l, 2, 500, 7), 0);
  cr_assert_eq(w.n, 4);
  for (size_t i = 0; i < 3; i++) {
    cr_expect_eq(w.v[i].keywords, 0);
    cr_expect_eq(w.v[i].level, 4);
    cr_expect_str_eq(w.v[i].args, "EventCounterIntervalSec=2");
  }
  cr_expect_str_eq(w.v[2].name, "Old");
  cr_expect_str_eq(w.v[3].name, "System.Diagnostics.Metrics");
  cr_expect_eq(w.v[3].keywords, 0x2);
  cr_expect_eq(w.v[3].level, 4);
  char want[256];
  snprintf(want, sizeof want, "SessionId=%s;Metrics=System.Runtime,Sample.Meter\\sample.requests,Sample.Meter\\sample.latency;"
                              "RefreshInterval=2;MaxTimeSeries=500;MaxHistograms=7;ClientId=", w.session_id);
  cr_expect(strncmp(w.v[3].args, want, strlen(want)) == 0, "args '%s'", w.v[3].args);
  cr_expect_eq(strlen(w.session_id), 36);
  dnt_counters_wire_release(&w);

  /* EventCounters only: no metrics provider */
  struct dnt_counter_specs l2 = {0};
  cr_assert_eq(dnt_counter_specs_parse(&l2, "EventCounters\\System.Runtime", err, sizeof err), 0);
  cr_assert_eq(dnt_counters_wire_build(&w, &l2, 1, 1000, 10), 0);
  cr_expect_eq(w.n, 1);
  cr_expect_str_eq(w.session_id, "");
  dnt_counters_wire_release(&w);
  dnt_counter_specs_release(&l);
  dnt_counter_specs_release(&l2);
}

Test(counters_wire, quantiles) {
  double q[4], v[4];
  cr_assert_eq(dnt_parse_quantiles("0.5=12.5;0.95=40;0.99=49.75", q, v, 4), 3);
  cr_expect_eq(q[0], 0.5);
  cr_expect_eq(v[0], 12.5);
  cr_expect_eq(q[2], 0.99);
  cr_expect_eq(v[2], 49.75);
  cr_expect_eq(dnt_parse_quantiles("", q, v, 4), 0);
  cr_expect_eq(dnt_parse_quantiles("0.5=", q, v, 4), 0);
  cr_expect_eq(dnt_parse_quantiles("0.5=1;junk", q, v, 4), 1);
  cr_expect_eq(dnt_parse_quantiles("0.5=1;0.9=2;0.99=3", q, v, 2), 2);
}

/* ---- the corpus ---- */

struct seen {
  char (*keys)[300];
  size_t n, cap;
  uint64_t values;
};

static int remember(void *ud, const dnt_counter_value *v) {
  struct seen *s = ud;
  s->values++;
  char key[300];
  snprintf(key, sizeof key, "%s|%s|%s", v->provider, v->name, v->unit);
  for (size_t i = 0; i < s->n; i++)
    if (strcmp(s->keys[i], key) == 0) return 0;
  if (s->n == s->cap) {
    s->cap = s->cap ? 2 * s->cap : 64;
    s->keys = realloc(s->keys, s->cap * sizeof *s->keys);
    cr_assert(s->keys);
  }
  snprintf(s->keys[s->n++], sizeof s->keys[0], "%s", key);
  return 0;
}

static int has(const struct seen *s, const char *key) {
  for (size_t i = 0; i < s->n; i++)
    if (strcmp(s->keys[i], key) == 0) return 1;
  return 0;
}

static void read_corpus(const char *name, struct seen *s) {
  char dir[4096], path[4400], err[512];
  corpus_dir(dir, sizeof dir);
  snprintf(path, sizeof path, "%s/tbbuck__countercow/%s", dir, name);
  int rc = dnt_counters_read_trace(path, NULL, remember, s, err, sizeof err);
  cr_assert_eq(rc, 0, "%s reads completely: %s", path, err);
}

Test(counters_corpus, net8_eventcounters) {
  struct seen s = {0};
  read_corpus("console-net8.nettrace", &s);
  cr_expect(has(&s, "System.Runtime|cpu-usage|%"), "cpu-usage in %%");
  cr_expect(has(&s, "System.Runtime|working-set|MB"), "working-set in MB");
  cr_expect(has(&s, "System.Runtime|gc-heap-size|MB"), "gc-heap-size in MB");
  cr_expect(has(&s, "System.Runtime|alloc-rate|B"), "alloc-rate in B");
  cr_expect(has(&s, "System.Runtime|time-in-gc|%"), "time-in-gc in %%");
  cr_expect(has(&s, "System.Runtime|threadpool-thread-count|"), "threadpool-thread-count");
  cr_expect_gt(s.values, 40);
  free(s.keys);
}

Test(counters_corpus, every_counter_trace) {
  static const char *const files[] = {"aspnet-net9.nettrace", "generic-net10.nettrace", "aspnet-net10-loaded.nettrace"};
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    struct seen s = {0};
    read_corpus(files[i], &s);
    cr_expect(has(&s, "System.Runtime|cpu-usage|%"), "%s: cpu-usage in %%", files[i]);
    cr_expect(has(&s, "System.Runtime|working-set|MB"), "%s: working-set in MB", files[i]);
    free(s.keys);
  }
  struct seen s = {0};
  read_corpus("aspnet-net9.nettrace", &s);
  int hosting = 0;
  for (size_t i = 0; i < s.n; i++) hosting |= strncmp(s.keys[i], "Microsoft.AspNetCore.Hosting|", 29) == 0;
  cr_expect(hosting, "aspnet-net9 has Microsoft.AspNetCore.Hosting counters");
  free(s.keys);
}

Test(counters_corpus, filter_by_spec) {
  char dir[4096], path[4400], err[512];
  corpus_dir(dir, sizeof dir);
  snprintf(path, sizeof path, "%s/tbbuck__countercow/console-net8.nettrace", dir);
  struct dnt_counter_specs l = {0};
  cr_assert_eq(dnt_counter_specs_parse(&l, "System.Runtime[cpu-usage]", err, sizeof err), 0);
  struct seen s = {0};
  cr_assert_eq(dnt_counters_read_trace(path, &l, remember, &s, err, sizeof err), 0, "%s", err);
  cr_expect_eq(s.n, 1);
  cr_expect(has(&s, "System.Runtime|cpu-usage|%"));
  free(s.keys);
  dnt_counter_specs_release(&l);
}

/* ---- the real runtime ---- */

static void start(dnt_target *t) {
  DNT_REQUIRE_TARGET();
  dnt_target_opts o = {.mode = DNT_TARGET_PLAIN, .wait_socket = 1, .timeout_ms = DNT_HANG_MS};
  char err[512];
  cr_assert_eq(dnt_target_start(t, &o, err, sizeof err), 0, "cannot start the sample target: %s", err);
}

static char *slurp(const char *path) {
  FILE *fp = fopen(path, "r");
  cr_assert(fp, "cannot open %s", path);
  fseek(fp, 0, SEEK_END);
  long n = ftell(fp);
  fseek(fp, 0, SEEK_SET);
  char *buf = malloc((size_t)n + 1);
  cr_assert(buf);
  cr_assert_eq(fread(buf, 1, (size_t)n, fp), (size_t)n);
  buf[n] = '\0';
  fclose(fp);
  return buf;
}

struct csv_row {
  char *cell[5];
};

/* Splits one CSV line (no quotes in our cells) into exactly 5 cells, else fails the test. */
static void split_row(char *line, struct csv_row *r, int lineno) {
  int n = 0;
  for (char *p = line;; p++) {
    cr_assert_lt(n, 5, "line %d has more than 5 cells", lineno);
    r->cell[n++] = p;
    p = strchr(p, ',');
    if (!p) break;
    *p = '\0';
  }
  cr_assert_eq(n, 5, "line %d has %d cells, not 5", lineno, n);
}

/* How many values a session holds is the machine's business: one interval at least of each kind
 * is asked for; their own timestamps and how long dntrace took are printed, not bounded (the run
 * helper's ceiling, DNT_HANG_MS, catches a collect that does not stop). */
/* Counters the process does not publish (issue 28 item 7): none at all is one error line, exit 1,
 * and no file (dotnet-counters writes an empty file, exit 0); some is a warning per missing
 * provider or counter at the end. The second run is stopped (Ctrl+C) once a value of the counter
 * that exists is in its file: what the load delays, the test waits for. */
Test(counters_runtime, counters_that_never_come_are_said, .timeout = 240) {
  dnt_target t;
  start(&t);
  char dir[] = "/tmp/dnt-counters-none-XXXXXX", path[128], err[128], pid[16];
  cr_assert(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/none.csv", dir);
  snprintf(pid, sizeof pid, "%d", (int)t.pid);
  struct dnt_run r;
  int rc = dnt_run_dntrace(&r, "counters", "collect", "-p", pid, "--counters", "Nope.Provider", "--duration", "2s",
                           "-o", path, NULL);
  cr_expect_eq(rc, 1, "%s%s", r.out, r.err);
  cr_expect(strstr(r.err, "no counter value came from Nope.Provider") &&
                strchr(r.err, '\n') == r.err + strlen(r.err) - 1,
            "one line: %s", r.err);
  cr_expect(!strstr(r.out, "File saved"), "%s", r.out);
  cr_expect_neq(access(path, F_OK), 0, "no file written");
  dnt_run_free(&r);

  snprintf(path, sizeof path, "%s/some.csv", dir);
  snprintf(err, sizeof err, "%s/err", dir);
  pid_t d = fork();
  cr_assert_geq(d, 0);
  if (d == 0) {
    int e = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0644), null = open("/dev/null", O_RDWR);
    if (e < 0 || null < 0) _exit(127);
    dup2(null, 0), dup2(null, 1), dup2(e, 2);
    execl(dnt_bin(), "dntrace", "counters", "collect", "-p", pid, "--counters",
          "System.Runtime[cpu-usage,nope-counter],Nope.Provider", "-o", path, (char *)NULL);
    _exit(127);
  }
  int seen = 0;
  for (double end = dnt_now_ms() + DNT_HANG_MS; !seen && dnt_now_ms() < end;) { /* timing: a hang's ceiling */
    FILE *fp = fopen(path, "r");
    char line[512];
    while (fp && !seen && fgets(line, sizeof line, fp)) seen = strstr(line, ",System.Runtime,") != NULL;
    if (fp) fclose(fp);
    if (!seen) usleep(100 * 1000);
  }
  kill(d, SIGINT);
  int st;
  waitpid(d, &st, 0);
  cr_assert(seen, "a value of cpu-usage came (%s)", dnt_run_context(t.pid));
  cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "exit 0: some counters came");
  char *text = slurp(err);
  cr_expect(strstr(text, "warning: no value of System.Runtime[nope-counter] came"), "%s", text);
  cr_expect(strstr(text, "warning: no counter value came from Nope.Provider"), "%s", text);
  cr_expect(!strstr(text, "from System.Runtime"), "a provider that sent values is not said: %s", text);
  free(text);
  unlink(path);
  unlink(err);
  rmdir(dir);
  dnt_target_stop(&t);
}

Test(counters_runtime, collect_csv, .timeout = 240) {
  dnt_target t;
  start(&t);
  char dir[] = "/tmp/dnt-counters-XXXXXX", path[128], pid[16];
  cr_assert(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/out.csv", dir);
  snprintf(pid, sizeof pid, "%d", (int)t.pid);
  struct dnt_run r;
  int rc = dnt_run_dntrace(&r, "counters", "collect", "-p", pid, "--counters", "Sample-Counters,Sample.Meter,System.Runtime",
                           "--refresh-interval", "1", "--duration", "4s", "--format", "csv", "-o", path, NULL);
  cr_assert_eq(rc, 0, "dntrace counters collect: %s%s", r.out, r.err);
  double took = r.seconds; /* timing: a figure, printed below */
  dnt_run_free(&r);
  char *text = slurp(path);
  char *save = NULL;
  char *line = strtok_r(text, "\n", &save);
  cr_assert(line);
  cr_assert_str_eq(line, "Timestamp,Provider,Counter Name,Counter Type,Mean/Increment");
  int lineno = 1, work = 0, work_done = 0, requests = 0, latency = 0, cpu = 0, gc = 0, threads = 0, working_set = 0;
  double first_t = -1, last_t = -1;
  while ((line = strtok_r(NULL, "\n", &save))) {
    struct csv_row row;
    lineno++;
    split_row(line, &row, lineno);
    char *end;
    double v = strtod(row.cell[4], &end);
    cr_assert(end != row.cell[4] && *end == '\0', "line %d: '%s' is a number", lineno, row.cell[4]);
    cr_expect(strcmp(row.cell[3], "Rate") == 0 || strcmp(row.cell[3], "Metric") == 0, "line %d: type '%s'", lineno,
              row.cell[3]);
    cr_expect_eq(strlen(row.cell[0]), 23, "line %d: timestamp '%s'", lineno, row.cell[0]);
    int hh, mm;
    double ss;
    if (sscanf(row.cell[0] + 11, "%d:%d:%lf", &hh, &mm, &ss) == 3) {
      double at = hh * 3600 + mm * 60 + ss;
      if (first_t < 0) first_t = at;
      last_t = at;
    }
    const char *prov = row.cell[1], *name = row.cell[2];
    /* Counter Name as dotnet-counters writes it: the display name, the unit (per interval for
     * a rate: the session's 1 s refresh), tags in brackets with ';' between them */
    if (strcmp(prov, "Sample-Counters") == 0 && strcmp(name, "Work Items (items)") == 0) {
      work++;
      /* an interval in which a loaded machine did not run the sample's worker counts 0 */
      cr_expect_geq(v, 0, "work-items %g is not negative", v);
      if (v > 0) work_done++;
      cr_expect_lt(v, 1e7, "work-items %g is plausible", v);
    } else if (strcmp(prov, "Sample.Meter") == 0 && strncmp(name, "sample.requests ({request} / 1 sec)[", 36) == 0) {
      requests++;
      cr_expect_geq(v, 0, "sample.requests rate %g", v);
      cr_expect(strstr(name, "[route=/") != NULL, "tagged name '%s'", name);
      cr_expect_str_eq(row.cell[3], "Rate");
    } else if (strcmp(prov, "Sample.Meter") == 0 && strncmp(name, "sample.latency (ms)[Percentile=", 31) == 0) {
      latency++;
      cr_expect(v >= 5 && v <= 50, "%s = %g ms is within 5..50", name, v);
    } else if (strcmp(prov, "System.Runtime") == 0) {
      cpu += strncmp(name, "dotnet.process.cpu.time (s / 1 sec)[cpu.mode=", 45) == 0;
      gc += strncmp(name, "dotnet.gc.collections ({collection} / 1 sec)", 44) == 0 ||
            strcmp(name, "dotnet.gc.heap.total_allocated (By / 1 sec)") == 0;
      threads += strncmp(name, "dotnet.thread_pool.thread.count ({thread}", 41) == 0;
      working_set += strcmp(name, "dotnet.process.memory.working_set (By)") == 0;
    }
  }
  const char *context = dnt_run_context(t.pid);
  cr_expect_geq(work, 1, "work-items rows: %d (%s)", work, context);
  /* the sample's metrics thread reports every 100 ms: an interval in which it ran is positive */
  cr_expect_geq(work_done, 1, "work-items positive in an interval: %d of %d (%s)", work_done, work, context);
  cr_expect_geq(last_t - first_t, 0, "the last row not before the first (%.1f s from first to last)",
                last_t - first_t);
  cr_expect_geq(requests, 1, "sample.requests rows: %d (%s)", requests, context);
  cr_expect_geq(latency, 1, "sample.latency rows: %d (%s)", latency, context);
  cr_log_info("collect --duration 4s: %.1f s in all, values spanning %.1f s, %d work-items rows (%d positive)", took,
              last_t - first_t, work, work_done);
  cr_expect_gt(cpu, 0, "dotnet.process.cpu.time rows");
  cr_expect_gt(gc, 0, "dotnet.gc.* rows");
  cr_expect_gt(threads, 0, "dotnet.thread_pool.thread.count rows");
  cr_expect_gt(working_set, 0, "dotnet.process.memory.working_set rows");
  free(text);
  unlink(path);
  rmdir(dir);
  dnt_target_stop(&t);
}

/* collect into a full disk (a filled 64 KiB tmpfs in a private mount namespace): exit 1 and one
 * line that says why, for the CSV file and for the Prometheus snapshot alike. */
Test(counters_runtime, collect_to_a_full_disk_says_why, .timeout = 400) {
  dnt_target t;
  start(&t);
  if (geteuid() != 0) {
    const char *ci = getenv("CI");
    if (ci && strcmp(ci, "true") == 0) cr_assert_fail("needs root to mount a small tmpfs (CI=true)");
    cr_skip_test("needs root to mount a small tmpfs");
  }
  char dir[] = "/tmp/dnt-counters-full-XXXXXX";
  cr_assert(mkdtemp(dir));
  static const char *const formats[] = {"csv", "prometheus"};
  for (int i = 0; i < 2; i++) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "mount -t tmpfs -o size=64k tmpfs '%s' && { cat /dev/zero > '%s/fill'; } 2>/dev/null; "
             "exec \"$DNT_BIN\" counters collect -p %d --counters System.Runtime --refresh-interval 1 "
             "--format %s -o '%s/out'",
             dir, dir, (int)t.pid, formats[i], dir);
    char *argv[] = {"/usr/bin/unshare", "-m", "--propagation", "private", "/bin/sh", "-c", cmd, NULL};
    struct dnt_run r;
    int rc = dnt_run_argv(&r, argv, NULL, DNT_HANG_MS); /* it stops at its first write; a hang meets the ceiling */
    cr_assert_eq(rc, 1, "%s: out: %s err: %s", formats[i], r.out, r.err);
    char want[256];
    snprintf(want, sizeof want, "dntrace: error: cannot write '%s/out.%s': No space left on device\n", dir,
             i == 0 ? "csv" : "prom");
    cr_assert(strstr(r.err, want), "%s: %s", formats[i], r.err);
    cr_assert_eq(strchr(r.err, '\n'), r.err + strlen(r.err) - 1, "%s: said once: %s", formats[i], r.err);
    cr_assert(!strstr(r.out, "File saved"), "%s: no file claimed: %s", formats[i], r.out);
    dnt_run_free(&r);
  }
  dnt_target_stop(&t);
  rmdir(dir);
}

Test(counters_runtime, collect_json, .timeout = 240) {
  dnt_target t;
  start(&t);
  char dir[] = "/tmp/dnt-counters-XXXXXX", base[128], path[160], pid[16], cmd[1024];
  cr_assert(mkdtemp(dir));
  snprintf(base, sizeof base, "%s/out", dir); /* the extension is added */
  snprintf(path, sizeof path, "%s.json", base);
  snprintf(pid, sizeof pid, "%d", (int)t.pid);
  struct dnt_run r;
  int rc = dnt_run_dntrace(&r, "counters", "collect", "-p", pid, "--counters", "Sample-Counters,Sample.Meter",
                           "--duration", "3s", "--format", "json", "-o", base, NULL);
  cr_assert_eq(rc, 0, "dntrace counters collect: %s%s", r.out, r.err);
  dnt_run_free(&r);
  snprintf(cmd, sizeof cmd,
           "python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); e=d[\"Events\"]; "
           "assert d[\"TargetProcess\"] and d[\"StartTime\"]; "
           "assert any(x[\"name\"]==\"work-items\" and x[\"unit\"]==\"items\" and x[\"value\"]>0 for x in e); "
           "assert any(x[\"name\"]==\"sample.requests\" and x[\"counterType\"]==\"Rate\" for x in e); "
           "assert all(set(x)>={\"timestamp\",\"provider\",\"name\",\"tags\",\"counterType\",\"value\"} for x in e)' %s",
           path);
  if (system("python3 -c 1 >/dev/null 2>&1") != 0) {
    unlink(path);
    rmdir(dir);
    dnt_target_stop(&t);
    require_python(); /* under CI=true, a failure */
  }
  cr_expect_eq(system(cmd), 0, "%s parses as JSON with the expected events", path);
  unlink(path);
  rmdir(dir);
  dnt_target_stop(&t);
}

/* -o - streams the values to stdout (no file named "-.csv"), collect's own lines to stderr. */
Test(counters_runtime, collect_to_stdout, .timeout = 240) {
  dnt_target t;
  start(&t);
  char dir[] = "/tmp/dnt-counters-XXXXXX", pid[16], old[4096];
  cr_assert(mkdtemp(dir));
  cr_assert(getcwd(old, sizeof old));
  cr_assert_eq(chdir(dir), 0);
  snprintf(pid, sizeof pid, "%d", (int)t.pid);
  struct dnt_run r;
  int rc = dnt_run_dntrace(&r, "counters", "collect", "-p", pid, "--counters", "Sample-Counters", "--duration", "3s",
                           "-o", "-", NULL);
  cr_assert_eq(rc, 0, "dntrace counters collect -o -: %s", r.err);
  static const char header[] = "Timestamp,Provider,Counter Name,Counter Type,Mean/Increment\n";
  cr_expect(strncmp(r.out, header, sizeof header - 1) == 0,
            "the CSV header first on stdout:\n%.300s", r.out);
  cr_expect(strstr(r.out, ",Sample-Counters,"), "Sample-Counters rows on stdout:\n%.300s", r.out);
  cr_expect(!strstr(r.out, "Starting a counter session"), "collect's own lines are not mixed into the CSV");
  cr_expect_neq(access("-.csv", F_OK), 0, "no file named -.csv");
  cr_expect_neq(access("-", F_OK), 0, "no file named -");
  dnt_run_free(&r);
  cr_assert_eq(chdir(old), 0);
  rmdir(dir);
  dnt_target_stop(&t);
}

Test(counters_runtime, monitor_plain, .timeout = 240) {
  dnt_target t;
  start(&t);
  char pid[16];
  snprintf(pid, sizeof pid, "%d", (int)t.pid);
  struct dnt_run r;
  int rc = dnt_run_dntrace(&r, "counters", "monitor", "-p", pid, "--counters", "Sample-Counters", "--duration", "3s", NULL);
  cr_assert_eq(rc, 0, "dntrace counters monitor: %s%s", r.out, r.err);
  cr_expect(strstr(r.out, "[Sample-Counters]\n    Work Items (items)  ") != NULL, "work-items shown:\n%s", r.out);
  cr_expect_null(strstr(r.out, "\033"), "no terminal escapes into a pipe");
  cr_expect_null(strstr(r.out, "Press p"), "no key hint into a pipe");
  cr_log_info("monitor --duration 3s: %.1f s in all", r.seconds); /* timing: a figure */
  dnt_run_free(&r);
  dnt_target_stop(&t);
}

Test(counters_cli, errors) {
  struct dnt_run r;
  cr_expect_eq(dnt_run_dntrace(&r, "counters", "collect", "-p", "1", "--counters", "A[x", NULL), 2);
  cr_expect(strstr(r.err, "--counters: unbalanced") != NULL, "%s", r.err);
  dnt_run_free(&r);
  cr_expect_eq(dnt_run_dntrace(&r, "counters", "collect", "--counters", "A", NULL), 2);
  dnt_run_free(&r);
  cr_expect_eq(dnt_run_dntrace(&r, "counters", "collect", "-p", "1", "--format", "xml", NULL), 2);
  dnt_run_free(&r);
  cr_expect_eq(dnt_run_dntrace(&r, "counters", "frobnicate", NULL), 2);
  dnt_run_free(&r);
  /* a slip of a subcommand gets a suggestion, as the top level's do (issue 28 item 17) */
  cr_expect_eq(dnt_run_dntrace(&r, "counters", "moniter", "-p", "1", NULL), 2);
  cr_expect(strstr(r.err, "did you mean 'monitor'?"), "%s", r.err);
  dnt_run_free(&r);
  /* a bad --listen is a usage error before any target is looked for (item 15) */
  cr_expect_eq(dnt_run_dntrace(&r, "counters", "serve", "-p", "1", "--listen", "nonsense", NULL), 2, "%s", r.err);
  cr_expect(strstr(r.err, "--listen: 'nonsense' is not HOST:PORT"), "%s", r.err);
  dnt_run_free(&r);
  cr_expect_eq(dnt_run_dntrace(&r, "serve", "-p", "1", "--listen", "127.0.0.1:99999", NULL), 2, "%s", r.err);
  cr_expect(strstr(r.err, "'99999' is not a port number"), "%s", r.err);
  dnt_run_free(&r);
  cr_expect_eq(dnt_run_dntrace(&r, "counters", "list", "--help", NULL), 0);
  cr_expect(strncmp(r.out, "usage: dntrace counters list", 28) == 0, "its own help: %s", r.out);
  dnt_run_free(&r);
  cr_expect_eq(dnt_run_dntrace(&r, "counters", "list", NULL), 0);
  cr_expect(strstr(r.out, "dotnet.gc.collections") && strstr(r.out, "cpu-usage"), "%s", r.out);
  dnt_run_free(&r);
  cr_expect_eq(dnt_run_dntrace(&r, "counters", "--help", NULL), 0);
  cr_expect(strncmp(r.out, "usage: dntrace counters", 23) == 0 || strstr(r.out, "dntrace counters (collect"), "%s", r.out);
  dnt_run_free(&r);
  /* each subcommand its own help (item 17): its synopsis, its options, none of the others' */
  static const struct {
    const char *sub, *has, *hasnt[3];
  } own[] = {{"monitor", "--showDeltas", {"--listen", "--format", "--output"}},
             {"serve", "--listen", {"--plain", "--format", "--showDeltas"}},
             {"collect", "--format", {"--plain", "--listen", "--showDeltas"}}};
  for (size_t i = 0; i < sizeof own / sizeof own[0]; i++) {
    cr_expect_eq(dnt_run_dntrace(&r, "counters", own[i].sub, "--help", NULL), 0);
    char want[64];
    snprintf(want, sizeof want, "usage: dntrace counters %s (-p PID", own[i].sub);
    cr_expect(strncmp(r.out, want, strlen(want)) == 0, "%s", r.out);
    cr_expect(strstr(r.out, own[i].has) && strstr(r.out, "--counters LIST"), "%s", r.out);
    for (int k = 0; k < 3; k++) cr_expect_null(strstr(r.out, own[i].hasnt[k]), "%s: %s", own[i].hasnt[k], r.out);
    dnt_run_free(&r);
  }
}

/* ---- the full-screen monitor, in a real terminal (tmux) ---- */

/* The ceiling of a wait, DNT_HANG_MS from now: only a hang reaches it. */
static double hang_deadline(void) { return dnt_now_ms() + DNT_HANG_MS; } /* timing: a hang's ceiling */

/* 1 while a wait may go on: its ceiling (hang_deadline) is not reached. */
static int waiting(double end) { return dnt_now_ms() < end; } /* timing: a hang's ceiling */


static char *tmux_screen(const char *session, const char *dir) {
  char cmd[512], path[256];
  snprintf(cmd, sizeof cmd, "tmux capture-pane -p -t %s > '%s/screen'", session, dir);
  cr_assert_eq(system(cmd), 0);
  snprintf(path, sizeof path, "%s/screen", dir);
  return slurp(path);
}

/* Polls the pane until it shows `want` (DNT_HANG_MS at most); returns the last screen. */
static char *tmux_wait_for(const char *session, const char *dir, const char *want) {
  char *screen = NULL;
  for (double end = hang_deadline();; usleep(100 * 1000)) {
    free(screen);
    screen = tmux_screen(session, dir);
    if (strstr(screen, want) || !waiting(end)) break;
  }
  return screen;
}

static int tmux_alternate_on(const char *session) {
  char cmd[256], out[16] = "";
  snprintf(cmd, sizeof cmd, "tmux display-message -p -t %s '#{alternate_on}'", session);
  FILE *p = popen(cmd, "r");
  cr_assert(p);
  cr_assert(fgets(out, sizeof out, p));
  pclose(p);
  return atoi(out);
}

/* tmux VERB -t SESSION ARGS */
static void tmux(const char *verb, const char *session, const char *args) {
  char cmd[512];
  snprintf(cmd, sizeof cmd, "tmux %s -t %s %s", verb, session, args);
  cr_assert_eq(system(cmd), 0, "%s", cmd);
}

/* The line of the pane that holds `what`, cut at its end (a pointer into screen). */
static const char *screen_line(char *screen, const char *what) {
  char *p = strstr(screen, what);
  if (!p) return NULL;
  while (p > screen && p[-1] != '\n') p--;
  char *end = strchr(p, '\n');
  if (end) *end = '\0';
  return p;
}

Test(counters_runtime, monitor_full_screen, .timeout = 400) {
  if (system("command -v tmux >/dev/null 2>&1") != 0) {
    if (in_ci()) cr_assert_fail("tmux is not installed (CI=true: ./bootstrap.sh installs it)");
    cr_skip_test("needs tmux (./bootstrap.sh installs it)");
  }
  dnt_target t;
  start(&t);
  char dir[] = "/tmp/dnt-monitor-XXXXXX", script[128], session[32], cmd[256];
  cr_assert(mkdtemp(dir));
  snprintf(session, sizeof session, "dntm%d", (int)getpid());
  snprintf(script, sizeof script, "%s/run.sh", dir);
  FILE *fp = fopen(script, "w");
  cr_assert(fp);
  /* the terminal settings before and after tell whether dntrace put them back */
  fprintf(fp, "s=$(stty -g)\n'%s' counters monitor -p %d --counters Sample-Counters,Sample.Meter\n"
              "echo EXIT=$?\n[ \"$(stty -g)\" = \"$s\" ] && echo TTY=restored\nsleep 600\n",
          dnt_bin(), (int)t.pid);
  fclose(fp);
  snprintf(cmd, sizeof cmd, "tmux new-session -d -s %s -x 100 -y 40 \"sh '%s'\"", session, script);
  cr_assert_eq(system(cmd), 0);

  /* each counter arrives on its own first interval; rows stay once shown */
  char *screen = tmux_wait_for(session, dir, "sample.latency (ms)");
  free(screen);
  screen = tmux_wait_for(session, dir, "route=/");
  free(screen);
  screen = tmux_wait_for(session, dir, "Work Items (items)");
  cr_expect_eq(tmux_alternate_on(session), 1, "the table is on the alternate screen");
  cr_expect(strstr(screen, "Press p to pause, r to resume, q to quit."), "%s", screen);
  cr_expect(strstr(screen, "Status: Running"), "%s", screen);
  cr_expect(strstr(screen, "[Sample-Counters]") && strstr(screen, "[Sample.Meter]"), "%s", screen);
  cr_expect(strstr(screen, "Percentile=95"), "histogram percentiles as rows:\n%s", screen);
  cr_expect(strstr(screen, "route=/a") || strstr(screen, "route=/b"), "tag sets as rows:\n%s", screen);
  const char *row = screen_line(screen, "Work Items (items)");
  cr_assert(row, "%s", screen);
  size_t n = strlen(row);
  cr_expect(n > 0 && row[n - 1] >= '0' && row[n - 1] <= '9', "a value at the end of '%s'", row);
  free(screen);

  tmux("send-keys", session, "p");
  screen = tmux_wait_for(session, dir, "Status: Paused");
  cr_expect(strstr(screen, "Status: Paused"), "p pauses:\n%s", screen);
  free(screen);
  tmux("send-keys", session, "r");
  screen = tmux_wait_for(session, dir, "Status: Running");
  cr_expect(strstr(screen, "Status: Running"), "r resumes:\n%s", screen);
  free(screen);

  /* a narrower terminal: rows are cut to fit instead of wrapping, values stay at the end */
  tmux("resize-window", session, "-x 50 -y 40");
  for (double end = hang_deadline(); waiting(end);) { /* its next redraw */
    usleep(100 * 1000);
    screen = tmux_screen(session, dir);
    char *p = strstr(screen, "Work Items"), *eol = p ? strchr(p, '\n') : NULL;
    while (p && p > screen && p[-1] != '\n') p--;
    size_t width = p ? (eol ? (size_t)(eol - p) : strlen(p)) : 0;
    if (width > 0 && width <= 50 && !strstr(screen, "\n            ")) break;
    free(screen);
    screen = NULL;
  }
  if (!screen) screen = tmux_screen(session, dir);
  row = screen_line(screen, "Work Items");
  cr_assert(row, "%s", screen);
  n = strlen(row);
  cr_expect(n <= 50 && n > 0 && row[n - 1] >= '0' && row[n - 1] <= '9', "'%s' fits 50 columns with its value", row);
  cr_expect_null(strstr(screen, "\n            "), "no wrapped continuation lines:\n%s", screen);
  free(screen);

  tmux("send-keys", session, "q");
  screen = tmux_wait_for(session, dir, "TTY=restored");
  cr_expect(strstr(screen, "EXIT=0"), "q quits with 0:\n%s", screen);
  cr_expect(strstr(screen, "TTY=restored"), "the terminal settings are back:\n%s", screen);
  cr_expect_eq(tmux_alternate_on(session), 0, "back on the normal screen");
  free(screen);
  tmux("kill-session", session, "");
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  cr_assert_eq(system(cmd), 0);
  dnt_target_stop(&t);
}

/* `-- CMD`: the command starts with the session already on, its values are recorded until it
 * exits, and its exit code is ours. */
Test(counters_runtime, collect_a_command, .timeout = 240) {
  DNT_REQUIRE_TARGET();
  char dir[] = "/tmp/dnt-counters-XXXXXX", path[128];
  cr_assert(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/cmd.csv", dir);
  struct dnt_run r;
  int rc = dnt_run_dntrace(&r, "counters", "collect", "--counters", "Sample-Counters", "-o", path, "--",
                           dnt_target_exe(), "--seconds", "4", "--exit-code", "7", NULL);
  cr_expect_eq(rc, 7, "the command's exit code (7) is dntrace's: %d\n%s%s", rc, r.out, r.err);
  cr_expect(strstr(r.out, "The target ended the session"), "%s", r.out);
  dnt_run_free(&r);
  char *text = slurp(path);
  int rows = 0;
  for (const char *p = text; (p = strstr(p, ",Sample-Counters,Work Items (items),Metric,")); p++) rows++;
  cr_expect_geq(rows, 1, "work-items values of the command's life (%s):\n%s", dnt_run_context(0), text);
  free(text);
  unlink(path);
  rmdir(dir);
}
