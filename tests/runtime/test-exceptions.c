/* dntrace exceptions and analyze/'s exceptions analysis:
 *   - the rules on event sequences made here, whose answers are known by construction (handled,
 *     unhandled, nested throws, a trace without catch events, the rate per second);
 *   - the corpus trace with exception events: its throws and catches counted from the trace's own
 *     bytes (the UTF-16 strings of their payloads), its throw stacks as folded stacks;
 *   - `dntrace exceptions -p` on the sample throwing a known number of a known exception from a
 *     known method once the session runs (the sample waits for a file the test makes then):
 *     exactly that many, all handled, the stack naming the method; and one that nothing catches,
 *     the recording ending with the process it kills;
 *   - a trace without exceptions says so in one line. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../lib/analysis-feed.h"
#include "../lib/run.h"
#include "../lib/background-cr.h"
#include "../lib/target-cr.h"

#define NET10_LOADED "tbbuck__countercow/runtime-net10-loaded.nettrace"
#define NET3_WIN "microsoft__perfview/eventpipe-dotnetcore3.0-win-x64-objver4.nettrace"

/* ---- the rules, on events made here ---- */

static void thrown(struct feed *f, double ms, uint64_t tid, const char *type, const char *msg, uint16_t flags) {
  putstr(f, type), putstr(f, msg), put64(f, 0x1234), put32(f, 0x80131500), put16(f, flags), put16(f, 0);
  send_stack(f, 80, 1, ms, tid, 3);
}
static void catch_start(struct feed *f, double ms, uint64_t tid, const char *method) {
  put64(f, 0), put64(f, 0), putstr(f, method), put16(f, 0);
  send(f, 250, 0, ms, tid);
}
static void finally_start(struct feed *f, double ms, uint64_t tid) {
  put64(f, 0), put64(f, 0), putstr(f, "M.Finally"), put16(f, 0);
  send(f, 252, 0, ms, tid);
}
static void thrown_stop(struct feed *f, double ms, uint64_t tid) { send(f, 256, 0, ms, tid); }

static const dnt_exception_group *find(const struct dnt_exceptions_analysis *a, const char *type) {
  size_t n;
  const dnt_exception_group *g = dnt_exceptions_list(a, &n);
  for (size_t i = 0; i < n; i++)
    if (strcmp(g[i].type, type) == 0) return &g[i];
  cr_assert_fail("no group of %s", type);
  return NULL;
}

/* An analysis fed the events f makes; rules_end frees both. */
static struct dnt_exceptions_analysis *rules_start(struct feed *f) {
  struct dnt_schema *schema = schema_or_fail();
  struct dnt_exceptions_analysis *a = dnt_exceptions_analysis_new(schema);
  cr_assert(a);
  ntr_callbacks cb;
  dnt_exceptions_analysis_callbacks(&cb);
  feed_init(f, &cb, a, schema);
  return a;
}

static void rules_end(struct feed *f, struct dnt_exceptions_analysis *a) {
  dnt_exceptions_analysis_free(a);
  dnt_schema_free(f->schema);
}

Test(exceptions_rules, a_catch_takes_the_innermost_exception_in_flight) {
  struct feed f;
  struct dnt_exceptions_analysis *a = rules_start(&f);
  /* thread 1: X caught in M.One; then X whose dispatch ends with no catch */
  thrown(&f, 100, 1, "X", "a", 0), catch_start(&f, 101, 1, "M.One"), thrown_stop(&f, 102, 1);
  thrown(&f, 200, 1, "X", "a", 0), thrown_stop(&f, 201, 1);
  /* thread 2: Y in flight, a finally throws X (nested) which M.Two catches; Y is never caught */
  thrown(&f, 1300, 2, "Y", "b", 0), finally_start(&f, 1301, 2);
  thrown(&f, 1302, 2, "X", "a", 0x02), catch_start(&f, 1303, 2, "M.Two"), thrown_stop(&f, 1304, 2);
  thrown_stop(&f, 1305, 2);
  /* thread 3: Z still in flight when the trace ends; a rethrow of a caught one is counted again */
  thrown(&f, 2500, 3, "W", "c", 0), catch_start(&f, 2501, 3, "M.Three");
  thrown(&f, 2502, 3, "W", "c", 0x04), catch_start(&f, 2503, 3, "M.Four"), thrown_stop(&f, 2504, 3);
  thrown(&f, 2600, 3, "Z", "d", 0);
  dnt_exceptions_analysis_finish(a, 3);
  cr_assert_eq(dnt_exceptions_analysis_failed(a), 0);
  const dnt_exception_group *x = find(a, "X"), *y = find(a, "Y"), *z = find(a, "Z"), *w = find(a, "W");
  cr_expect_eq(x->thrown, 3);
  cr_expect_eq(x->handled, 2);
  cr_expect_eq(x->unhandled, 1);
  cr_expect_eq(x->nested, 1);
  cr_expect_str_eq(x->message, "a");
  cr_expect_eq(x->catches[0].count, 1);
  cr_expect_eq(x->catches[1].count, 1);
  cr_expect_eq(y->thrown, 1);
  cr_expect_eq(y->handled, 0);
  cr_expect_eq(y->unhandled, 1);
  cr_expect_eq(w->thrown, 2);
  cr_expect_eq(w->handled, 2);
  cr_expect_eq(w->rethrown, 1);
  cr_expect_eq(z->unhandled, 1, "in flight at the end of a trace with catch events: unhandled");
  const dnt_exception_summary *s = dnt_exceptions_get_summary(a);
  cr_expect_eq(s->thrown, 7);
  cr_expect_eq(s->handled, 4);
  cr_expect_eq(s->unhandled, 3);
  cr_expect_eq(s->types, 4);
  /* throws at 0.1, 0.2 | 1.3, 1.302 | 2.5, 2.502, 2.6 s */
  /* timing: the analysis's rows of seconds, not a clock */
  cr_assert_eq(s->seconds, 3);
  cr_expect_eq(s->per_sec_counts[0], 2);
  cr_expect_eq(s->per_sec_counts[1], 2);
  cr_expect_eq(s->per_sec_counts[2], 3);
  /* each throw's stack: the same three frames for all three X */
  cr_assert_eq(x->nstacks, 1);
  cr_expect_eq(x->stacks[0].count, 3);
  cr_expect_eq(x->stacks[0].nframes, 3);
  rules_end(&f, a);
}

Test(exceptions_rules, without_catch_events_handled_is_unknown) {
  struct feed f;
  struct dnt_exceptions_analysis *a = rules_start(&f);
  for (int i = 0; i < 40; i++) thrown(&f, 10.0 * i, 7, "X", "a", 0); /* more than a thread's list holds */
  dnt_exceptions_analysis_finish(a, 3);
  const dnt_exception_summary *s = dnt_exceptions_get_summary(a);
  cr_expect_eq(s->thrown, 40);
  cr_expect_eq(s->unknown, 40);
  cr_expect_eq(s->handled + s->unhandled, 0);
  cr_expect_eq(s->catch_events, 0);
  rules_end(&f, a);
}

/* A type and message seen before are found by their UTF-16 bytes, not decoded again: the flags
 * and HRESULT still come from each event, two byte strings that decode alike (unpaired
 * surrogates both read as U+FFFD) are one group, and a payload cut after its strings counts with
 * no flags, as the decoder reads it. */
/* eip: the size of ExceptionEIP (the trace's pointers), or 0 for a payload cut after its strings */
static void thrown_units(struct feed *f, double ms, const uint16_t *type, uint32_t hresult, uint16_t flags, int eip) {
  for (; *type; type++) put16(f, *type);
  put16(f, 0);
  putstr(f, "m");
  if (eip == 4) put32(f, 0x1234);
  if (eip == 8) put64(f, 0x1234);
  if (eip) put32(f, hresult), put16(f, flags), put16(f, 0);
  send_stack(f, 80, 1, ms, 9, 2);
}

Test(exceptions_rules, a_type_seen_before_is_known_by_its_bytes) {
  struct feed f;
  struct dnt_exceptions_analysis *a = rules_start(&f);
  const uint16_t plain[] = {'E', 0}, lone_high[] = {'B', 0xD800, 0}, lone_low[] = {'B', 0xDC00, 0};
  thrown_units(&f, 1, plain, 0x80004005, 0, 8);
  thrown_units(&f, 2, plain, 0x80004005, 0x04, 8); /* a rethrow: the flags of this event */
  thrown_units(&f, 3, plain, 0x80004005, 0x06, 8);
  thrown_units(&f, 4, plain, 0, 0, 0); /* cut after the strings */
  thrown_units(&f, 5, lone_high, 0x1, 0, 8);
  thrown_units(&f, 6, lone_low, 0x1, 0x02, 8);
  thrown_units(&f, 7, lone_high, 0x1, 0, 8);
  dnt_exceptions_analysis_finish(a, 3);
  cr_assert_eq(dnt_exceptions_analysis_failed(a), 0);
  const dnt_exception_group *e = find(a, "E"), *b = find(a, "B\xef\xbf\xbd");
  cr_expect_eq(e->thrown, 4);
  cr_expect_eq(e->rethrown, 2);
  cr_expect_eq(e->nested, 1);
  cr_expect_eq(e->hresult, 0x80004005u, "the first throw's");
  cr_expect_eq(b->thrown, 3, "both unpaired surrogates read as U+FFFD: one group");
  cr_expect_eq(b->nested, 1);
  cr_expect_eq(dnt_exceptions_get_summary(a)->types, 2);
  rules_end(&f, a);
}

/* A 32-bit process's trace: ExceptionEIP is 4 bytes, the flags after it read as such. */
Test(exceptions_rules, flags_after_a_32_bit_pointer) {
  struct feed f;
  struct dnt_exceptions_analysis *a = rules_start(&f);
  ntr_trace t32 = {.sync_time_qpc = 0, .qpc_frequency = 1000000, .pointer_size = 4};
  cr_assert_eq(f.cb.on_trace(a, &t32), 0);
  const uint16_t type[] = {'E', 0};
  thrown_units(&f, 1, type, 0x80131500, 0, 4);
  thrown_units(&f, 2, type, 0x80131500, 0x04, 4);
  thrown_units(&f, 3, type, 0x80131500, 0x02, 4);
  dnt_exceptions_analysis_finish(a, 3);
  const dnt_exception_group *e = find(a, "E");
  cr_expect_eq(e->thrown, 3);
  cr_expect_eq(e->rethrown, 1);
  cr_expect_eq(e->nested, 1);
  cr_expect_eq(e->hresult, 0x80131500u);
  rules_end(&f, a);
}

/* ---- the corpus ---- */

/* The .NET 10 trace's throws, all of one type and message, each caught in one lambda: counted in
 * the trace's bytes (each ExceptionThrown carries the message, each ExceptionCatchStart the
 * catching method's name, in UTF-16). */
Test(exceptions_corpus, net10_throws_and_catches_match_the_trace_bytes, .timeout = 60) {
  char dir[4096], trace[8192];
  corpus_dir(dir, sizeof dir);
  require_python();
  snprintf(trace, sizeof trace, "%s/" NET10_LOADED, dir);
  size_t throws = count_utf16(trace, "sample failure");
  size_t catches = count_utf16(trace, "Program+<>c::<<Main>$>b__0_3(int32)");
  cr_assert_gt(throws, 100);
  char tmp[] = "/tmp/dnt-exc-XXXXXX", out[64];
  cr_assert(mkdtemp(tmp));
  snprintf(out, sizeof out, "%s/e.json", tmp);
  struct dnt_run r;
  cr_assert_eq(dnt_run_dntrace(&r, "exceptions", trace, "--format", "json", "-o", out, NULL), 0, "%s", r.err);
  dnt_run_free(&r);
  char py[2048];
  snprintf(py, sizeof py,
           "import json, sys\n"
           "d = json.load(open(sys.argv[1]))\n"
           "s, e = d['summary'], d['exceptions']\n"
           "assert s['thrown'] == %zu and s['handled'] == %zu and s['unhandled'] == 0, s\n"
           "assert len(e) == 1 and e[0]['type'] == 'System.InvalidOperationException', e\n"
           "assert e[0]['message'] == 'sample failure' and e[0]['thrown'] == %zu, e[0]\n"
           "assert e[0]['caughtIn'][0]['method'].endswith('Program+<>c::<<Main>$>b__0_3(int32)'), e[0]\n"
           "assert sum(s['thrownPerSecond']) == s['thrown'], s\n"
           "assert sum(x['count'] for x in e[0]['stacks']) + e[0]['otherStacks'] == s['thrown']\n",
           throws, catches, throws);
  expect_python(py, out, NULL);
  unlink(out);
  /* the throw stacks as folded stacks: one line per thread and stack, the throw's own frame at
   * the leaf, the counts adding up to the throws */
  cr_assert_eq(dnt_run_dntrace(&r, "exceptions", trace, "--format", "folded", NULL), 0, "%s", r.err);
  size_t sum = 0, lines = 0;
  for (char *line = r.out; *line;) {
    char *nl = strchr(line, '\n');
    if (!nl) break;
    *nl = '\0';
    char *sp = strrchr(line, ' ');
    cr_assert(sp, "%s", line);
    cr_expect(strstr(line, "Throw(System.InvalidOperationException)_sample_failure") ||
                  strstr(line, "Throw(System.InvalidOperationException) sample failure"),
              "%s", line);
    sum += strtoul(sp + 1, NULL, 10);
    lines++;
    line = nl + 1;
  }
  cr_expect_gt(lines, 0);
  cr_expect_eq(sum, throws, "folded counts %zu, throws %zu", sum, throws);
  dnt_run_free(&r);
  rmdir(tmp);
}

Test(exceptions_cli, a_trace_without_exceptions_says_so_in_one_line) {
  char dir[4096], trace[8192];
  corpus_dir(dir, sizeof dir);
  snprintf(trace, sizeof trace, "%s/" NET3_WIN, dir);
  struct dnt_run r;
  /* nothing to analyse: one line and exit 1, as in every analysis (issue 28 item 15) */
  cr_expect_eq(dnt_run_dntrace(&r, "exceptions", trace, NULL), 1, "%s", r.err);
  cr_expect(strstr(r.err, "no exception thrown in this trace") && !strchr(strchr(r.err, '\n') + 1, '\n'), "%s",
            r.err);
  cr_expect_str_eq(r.out, "", "no report of nothing");
  dnt_run_free(&r);
  /* a flame graph of nothing is refused, with one error line */
  cr_expect_eq(dnt_run_dntrace(&r, "exceptions", trace, "--format", "folded", NULL), 1);
  cr_expect(strstr(r.err, "no exception thrown"), "%s", r.err);
  dnt_run_free(&r);
  cr_expect_eq(dnt_run_dntrace(&r, "exceptions", trace, "--format", "chromium", NULL), 2);
  dnt_run_free(&r);
  cr_expect_eq(dnt_run_dntrace(&r, "exceptions", trace, "--duration", "3s", NULL), 2);
  dnt_run_free(&r);
}

/* ---- the sample ---- */

/* The "thrown K" line the sample prints once it has thrown its count: K, -1 before. */
static void on_thrown(void *ud, const char *line) {
  long *made = ud;
  if (strncmp(line, "thrown ", 7) == 0) *made = strtol(line + 7, NULL, 10);
}

static int thrown_printed(void *ud) { return *(long *)ud >= 0; }

/* `dntrace exceptions -p PID --format json -o out` in b, its session running, then the file go
 * made: the sample (started with --start-file go) begins to throw. */
static void record_then_go(struct bg *b, const char *pid, const char *out, const char *go) {
  const char *const dargs[] = {"exceptions", "-p", pid, "--format", "json", "-o", out, NULL};
  bg_start(b, dargs);
  int up = bg_wait_text(b, "Recording the exceptions");
  char *err = slurp(b->err);
  cr_assert(up, "dntrace exceptions -p did not start its session (status %d): %s", b->status, err);
  free(err);
  int fd = open(go, O_WRONLY | O_CREAT | O_EXCL, 0644);
  cr_assert_geq(fd, 0, "cannot make %s", go);
  close(fd);
}

Test(exceptions_live, the_samples_throws_counted_exactly, .timeout = 300) {
  DNT_REQUIRE_TARGET();
  require_python();
  char pid[32], tmp[] = "/tmp/dnt-exc-XXXXXX", out[64], go[64];
  cr_assert(mkdtemp(tmp));
  snprintf(out, sizeof out, "%s/e.json", tmp);
  snprintf(go, sizeof go, "%s/go", tmp);
  /* 150 throws at 100 a second, once the session runs; then Ctrl+C */
  const char *const args[] = {"--throw", "100", "--throw-count", "150", "--start-file", go, "--no-cpu",
                              "--no-blocking", "--no-alloc", "--no-exceptions", "--no-counters", NULL};
  dnt_target t;
  dnt_start_sample(&t, args, pid, sizeof pid);
  struct bg b;
  record_then_go(&b, pid, out, go);
  struct lines sl = {.fd = t.stdout_fd};
  long made = -1;
  int done = lines_until(&sl, on_thrown, &made, thrown_printed);
  int status = bg_finish(&b, SIGINT);
  char *err = slurp(b.err);
  bg_remove(&b);
  const char *context = dnt_run_context(t.pid);
  dnt_target_stop(&t);
  unlink(go);
  cr_assert(done, "the sample did not say what it threw (%s)", context);
  cr_assert_eq(status, 0, "dntrace exceptions -p, stopped by Ctrl+C: status %d: %s", status, err);
  free(err);
  cr_assert_eq(made, 150, "the sample says it threw %ld", made);
  char py[2048];
  snprintf(py, sizeof py,
           "import json, sys\n"
           "d = json.load(open(sys.argv[1]))\n"
           "e = [x for x in d['exceptions'] if x['type'] == 'Sample.SampleException']\n"
           "assert len(e) == 1, d['exceptions']\n"
           "e = e[0]\n"
           "assert e['message'] == 'thrown on purpose by Sample.ThrowWork.Fail', e\n"
           "assert e['thrown'] == %ld and e['handled'] == %ld and e['unhandled'] == 0, e\n"
           "assert e['caughtIn'][0]['method'].endswith('Sample.ThrowWork::Catch()'), e['caughtIn']\n"
           "top = e['stacks'][0]\n"
           "assert top['count'] == %ld, top\n"
           "f = top['frames']\n"
           "i = f.index('Sample!Sample.ThrowWork.Fail')\n"
           "assert f[i + 1] == 'Sample!Sample.ThrowWork.Catch', f\n",
           made, made, made);
  expect_python(py, out, NULL);
  unlink(out);
  rmdir(tmp);
}

/* ---- the corpus, against TraceEvent ---- */

/* Every (type, message) TraceEvent counts is one of ours with the same count, and the catches
 * are as many as our handled exceptions (each catch takes one exception). */
Test(exceptions_traceevent, corpus_trace_with_exceptions, .timeout = 120) {
  char dir[4096], trace[8192];
  corpus_dir(dir, sizeof dir);
  const char *dll = te_oracle_or_skip("the exceptions analysis");
  snprintf(trace, sizeof trace, "%s/" NET10_LOADED, dir);
  struct dnt_run te;
  te_run(&te, dll, trace, "exclocks");
  cr_assert_eq(te.status, 0, "TraceEvent: %s", te.err);
  struct dnt_schema *schema = schema_or_fail();
  struct dnt_exceptions_analysis *a = dnt_exceptions_analysis_new(schema);
  ntr_callbacks cb;
  dnt_exceptions_analysis_callbacks(&cb);
  char err[512];
  ntr_stats st;
  cr_assert_geq(dnt_trace_read(trace, &cb, a, &st, err, sizeof err), 0, "%s", err);
  dnt_exceptions_analysis_finish(a, 3);
  size_t n, groups = 0;
  const dnt_exception_group *g = dnt_exceptions_list(a, &n);
  unsigned long catches = 0;
  for (char *line = te.out, *next; line && *line; line = next) {
    if ((next = strchr(line, '\n'))) *next++ = '\0';
    if (sscanf(line, "catches\t%lu", &catches) == 1) continue;
    if (strncmp(line, "exc\t", 4) != 0) continue;
    char *count = line + 4, *type = strchr(count, '\t'), *msg = type ? strchr(type + 1, '\t') : NULL;
    cr_assert(msg, "%s", line);
    *type++ = '\0', *msg++ = '\0';
    const dnt_exception_group *mine = NULL;
    for (size_t i = 0; i < n && !mine; i++)
      if (strcmp(g[i].type, type) == 0 && strcmp(g[i].message, msg) == 0) mine = &g[i];
    cr_expect(mine && mine->thrown == strtoul(count, NULL, 10), "%s: %s thrown %s times (TraceEvent), dntrace %llu",
              type, msg, count, mine ? (unsigned long long)mine->thrown : 0ull);
    groups++;
  }
  cr_expect_eq(groups, n, "TraceEvent's groups %zu, dntrace's %zu", groups, n);
  cr_expect_gt(groups, 0);
  cr_expect_eq(dnt_exceptions_get_summary(a)->handled, catches);
  dnt_exceptions_analysis_free(a);
  dnt_schema_free(schema);
  dnt_run_free(&te);
}

/* An exception nothing catches: the sample's crash-work thread throws one once the session runs,
 * and the process dies of it (a second later: the runtime does not flush a session when it dies,
 * the sample's handler waits for it); dntrace, recording with no --duration, ends with the process
 * (else only a hang would end it) and reports the exception unhandled: the session asked for the
 * catches, and none came. */
Test(exceptions_live, an_exception_nothing_catches_is_unhandled, .timeout = 300) {
  DNT_REQUIRE_TARGET();
  require_python();
  char pid[32], tmp[] = "/tmp/dnt-exc-XXXXXX", out[64], go[64];
  cr_assert(mkdtemp(tmp));
  snprintf(out, sizeof out, "%s/e.json", tmp);
  snprintf(go, sizeof go, "%s/go", tmp);
  const char *const args[] = {"--crash-after", "0", "--start-file", go, "--no-cpu", "--no-blocking", "--no-alloc",
                              "--no-exceptions", "--no-counters", NULL};
  dnt_target t;
  dnt_start_sample(&t, args, pid, sizeof pid);
  struct bg b;
  record_then_go(&b, pid, out, go);
  int status = bg_finish(&b, 0);
  char *err = slurp(b.err);
  bg_remove(&b);
  int died = dnt_target_stop(&t);
  unlink(go);
  cr_assert_eq(status, 0, "dntrace exceptions -p, with no --duration: status %d (-1: it did not end with the "
               "process): %s", status, err);
  free(err);
  cr_expect_neq(died, 0, "the sample died of its exception");
  const char *py = "import json, sys\n"
                   "d = json.load(open(sys.argv[1]))\n"
                   "e = [x for x in d['exceptions'] if x['type'] == 'Sample.SampleException']\n"
                   "assert len(e) == 1, d['exceptions']\n"
                   "assert e[0]['thrown'] == 1 and e[0]['unhandled'] == 1 and e[0]['handled'] == 0, e\n"
                   "assert d['summary']['catchEvents'], d['summary']\n";
  expect_python(py, out, NULL);
  unlink(out);
  rmdir(tmp);
}

/* ---- what differs between throws of one site, folded ---- */

static void expect_folded(const char *message, const char *want) {
  char out[256];
  dnt_exc_fold_message(message, out, sizeof out);
  cr_assert_str_eq(out, want, "'%s'", message);
}

Test(exceptions_fold, ids_numbers_guids_and_paths_fold_words_stay) {
  expect_folded("order 1003 is not in a state to ship", "order {n} is not in a state to ship");
  expect_folded("user 'b3f1c2d4-0a1b-4c5d-8e9f-0123456789ab' not found", "user '{guid}' not found");
  expect_folded("Could not find file '/var/data/run-7/input.json'.", "Could not find file '{path}'.");
  expect_folded("took 3.25 s, limit 1,000", "took {n} s, limit {n}");
  expect_folded("handle 0x7f3a20 and hash deadbeef42", "handle {hex} and hash {hex}");
  expect_folded("ORD-12345 failed", "ORD-{n} failed");
  /* words with digits are words: utf8, Int32, x64, IPv4 */
  expect_folded("utf8 Int32 x64 IPv4 abc", "utf8 Int32 x64 IPv4 abc");
  expect_folded("", "");
  char small[8];
  dnt_exc_fold_message("order 123456789 x", small, sizeof small);
  cr_assert_str_eq(small, "order ", "a placeholder that does not fit is left out, the rest NUL-terminated");
  cr_assert_leq(strlen(small), 7);
}
