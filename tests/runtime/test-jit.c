/* dntrace jit and analyze/'s JIT analysis:
 *   - the pairing rules on event sequences made here, whose rows are known by construction (a
 *     start and its load, nested compilations on one thread, a load without a start, a load that
 *     is not a JIT's, the tier and ReadyToRun bits of MethodFlags, a later code version);
 *   - every corpus trace with JIT events against TraceEvent's own JIT statistics
 *     (tests/bench-traceevent --mode jit): the same number of methods and of completions, each
 *     method's JIT time within 0.1 ms or 1%, the same total;
 *   - a fresh trace of the sample target recorded from its first instruction (collect -- CMD),
 *     against TraceEvent the same way, and its startup: Sample.Program.Main is compiled;
 *   - the command line: JSON that Python reads, a trace without JIT events said in one line. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../lib/analysis-feed.h"
#include "../lib/run.h"
#include "../lib/target-cr.h"

/* ---- the rules, on events made here ---- */

/* f feeding a new JIT analysis (f->a) */
static void feed_jit(struct feed *f) {
  struct dnt_schema *schema = schema_or_fail();
  struct dnt_jit_analysis *a = dnt_jit_analysis_new(schema);
  cr_assert(a);
  ntr_callbacks cb;
  dnt_jit_analysis_callbacks(&cb);
  feed_init(f, &cb, a, schema);
}

static void feed_free(struct feed *f) {
  dnt_jit_analysis_free(f->a);
  dnt_schema_free(f->schema);
}

static void jitting_started(struct feed *f, double ms, uint64_t tid, uint64_t method, uint32_t il, const char *ns,
                            const char *name, const char *sig) {
  put64(f, method), put64(f, 0x1000), put32(f, 0x06000001), put32(f, il);
  putstr(f, ns), putstr(f, name), putstr(f, sig), put16(f, 0);
  send(f, 145, 1, ms, tid);
}

/* MethodLoadVerbose V2 */
static void load_verbose(struct feed *f, double ms, uint64_t tid, uint64_t method, uint32_t size, uint32_t flags,
                         uint64_t rejit, const char *ns, const char *name, const char *sig) {
  put64(f, method), put64(f, 0x1000), put64(f, 0x7f0000001000), put32(f, size), put32(f, 0x06000001), put32(f, flags);
  putstr(f, ns), putstr(f, name), putstr(f, sig), put16(f, 0), put64(f, rejit);
  send(f, 143, 2, ms, tid);
}

#define JITTED 0x8u
#define TIER(t) ((uint32_t)(t) << 7)

Test(jit_rules, a_start_and_its_load_make_one_row_on_that_thread) {
  struct feed f;
  feed_jit(&f);
  jitting_started(&f, 10, 1, 0xA, 40, "Sample.Program", "Main", "int32  (class System.String[])");
  /* another thread's compilation in between does not end it */
  jitting_started(&f, 10.5, 2, 0xB, 7, "Sample.Other", "Get", "int32  ()");
  load_verbose(&f, 12.25, 1, 0xA, 300, JITTED | TIER(DNT_JIT_TIER_QUICK), 0, "Sample.Program", "Main",
               "int32  (class System.String[])");
  load_verbose(&f, 11, 2, 0xB, 20, JITTED | TIER(DNT_JIT_TIER_TIER1) | 0x40, 0, "Sample.Other", "Get", "int32  ()");
  dnt_jit_analysis_finish(f.a);
  size_t n;
  const dnt_jit_method *m = dnt_jit_list(f.a, &n);
  cr_assert_eq(n, 2);
  cr_expect_str_eq(m[0].name, "Sample.Program.Main(class System.String[])");
  cr_expect_float_eq(m[0].jit_ms, 2.25, 1e-9, "%f", m[0].jit_ms);
  cr_expect_eq(m[0].il_size, 40);
  cr_expect_eq(m[0].native_size, 300);
  cr_expect_eq(m[0].tier, DNT_JIT_TIER_QUICK);
  cr_expect_not(m[0].r2r_rejected);
  cr_expect_float_eq(m[1].jit_ms, 0.5, 1e-9);
  cr_expect_eq(m[1].tier, DNT_JIT_TIER_TIER1);
  cr_expect(m[1].r2r_rejected);
  const dnt_jit_summary *s = dnt_jit_get_summary(f.a);
  cr_expect_eq(s->methods, 2);
  cr_expect_eq(s->completions, 2);
  cr_expect_eq(s->r2r_rejected, 1);
  cr_expect_float_eq(s->total_jit_ms, 2.75, 1e-9);
  cr_expect_eq(s->tier_count[DNT_JIT_TIER_QUICK], 1);
  cr_expect_eq(s->tier_count[DNT_JIT_TIER_TIER1], 1);
  /* both began in the 0-100 ms bucket */
  cr_assert_eq(s->n_timeline, 1);
  cr_expect_eq(s->timeline[0].methods, 2);
  feed_free(&f);
}

/* A thread that starts compiling B while A is still open (the JIT compiling a helper A needs) ends
 * B first: a load ends the thread's latest open row. A load without any open row is a row of its
 * own, of no time; a load whose MethodFlags does not say Jitted (precompiled code) is no row. */
Test(jit_rules, loads_end_the_threads_latest_open_compilation) {
  struct feed f;
  feed_jit(&f);
  jitting_started(&f, 100, 1, 0xA, 10, "N", "A", "void  ()");
  jitting_started(&f, 101, 1, 0xB, 20, "N", "B", "void  ()");
  load_verbose(&f, 103, 1, 0xB, 50, JITTED | TIER(DNT_JIT_TIER_QUICK), 0, "N", "B", "void  ()");
  load_verbose(&f, 107, 1, 0xA, 60, JITTED | TIER(DNT_JIT_TIER_QUICK), 0, "N", "A", "void  ()");
  load_verbose(&f, 250, 1, 0xC, 70, JITTED | TIER(DNT_JIT_TIER_TIER1), 1, "N", "C", "void  ()");
  load_verbose(&f, 260, 1, 0xD, 80, 0 /* not jitted */, 0, "N", "D", "void  ()");
  dnt_jit_analysis_finish(f.a);
  size_t n;
  const dnt_jit_method *m = dnt_jit_list(f.a, &n);
  cr_assert_eq(n, 3, "%zu rows", n);
  cr_expect_str_eq(m[0].name, "N.A()");
  cr_expect_float_eq(m[0].jit_ms, 7.0, 1e-9, "A took %f", m[0].jit_ms);
  cr_expect_str_eq(m[1].name, "N.B()");
  cr_expect_float_eq(m[1].jit_ms, 2.0, 1e-9, "B took %f", m[1].jit_ms);
  cr_expect_str_eq(m[2].name, "N.C()");
  cr_expect_float_eq(m[2].jit_ms, 0.0, 1e-9);
  cr_expect_eq(m[2].rejit_id, 1);
  cr_expect(m[2].background, "a later code version, not OSR: tiering's background thread");
  const dnt_jit_summary *s = dnt_jit_get_summary(f.a);
  cr_expect_eq(s->foreground, 2);
  cr_expect_eq(s->background, 1);
  cr_expect_float_eq(s->total_jit_ms, 9.0, 1e-9);
  /* 100-199 ms: A and B; 200-299 ms: C */
  cr_assert_eq(s->n_timeline, 2);
  cr_expect_eq(s->timeline[0].methods, 2);
  cr_expect_float_eq(s->timeline[1].start_ms, 200.0, 1e-9);
  cr_expect_eq(s->timeline[1].methods, 1);
  feed_free(&f);
}

Test(jit_rules, a_start_without_its_load_is_not_finished) {
  struct feed f;
  feed_jit(&f);
  jitting_started(&f, 5, 9, 0xA, 10, "N", "Late", "void  ()");
  dnt_jit_analysis_finish(f.a);
  const dnt_jit_summary *s = dnt_jit_get_summary(f.a);
  cr_expect_eq(s->methods, 1);
  cr_expect_eq(s->incomplete, 1);
  cr_expect_eq(s->completions, 0);
  feed_free(&f);
}

/* ---- against TraceEvent ---- */

struct method_row {
  long long tid;
  double start, ms;
  char name[256];
};

struct rows {
  struct method_row v[20000];
  size_t n, methods, completions;
  double total;
};

/* BenchTraceEvent --mode jit: "method\tTID\tSTART\tMS\tIL\tNATIVE\tTIER\tVERSION\tNAME" and
 * "jitstats\tMETHODS\tCOUNT\tTOTAL". */
static void parse_traceevent(const char *out, struct rows *r) {
  memset(r, 0, sizeof *r);
  for (const char *p = out; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
    if (strncmp(p, "jitstats\t", 9) == 0) {
      cr_assert_eq(sscanf(p, "jitstats\t%zu\t%zu\t%lf", &r->methods, &r->completions, &r->total), 3);
    } else if (strncmp(p, "method\t", 7) == 0 && r->n < 20000) {
      struct method_row *m = &r->v[r->n++];
      cr_assert_eq(sscanf(p, "method\t%lld\t%lf\t%lf", &m->tid, &m->start, &m->ms), 3, "%.200s", p);
      const char *name = p;
      for (int k = 0; k < 8 && name; k++) name = strchr(name + 1, '\t');
      cr_assert(name);
      size_t len = strcspn(name + 1, "\n");
      snprintf(m->name, sizeof m->name, "%.*s", (int)(len < 255 ? len : 255), name + 1);
    }
  }
}

/* dntrace jit --format json: the rows and the summary's counts, read with sscanf (the names are
 * compared up to their first quote or backslash: TraceEvent prints them raw). */
static void parse_dntrace(const char *json, struct rows *r) {
  memset(r, 0, sizeof *r);
  const char *end = strstr(json, "\"summary\":");
  cr_assert(end);
  for (const char *p = strstr(json, "{\"name\":\""); p && p < end && r->n < 20000; p = strstr(p + 1, "{\"name\":\"")) {
    struct method_row *m = &r->v[r->n++];
    size_t len = strcspn(p + 9, "\"\\");
    snprintf(m->name, sizeof m->name, "%.*s", (int)(len < 255 ? len : 255), p + 9);
    const char *q = strstr(p, "\"startMSec\":"), *t = strstr(p, "\"threadId\":");
    cr_assert(q && t && sscanf(q, "\"startMSec\":%lf,\"jitMSec\":%lf", &m->start, &m->ms) == 2 &&
              sscanf(t, "\"threadId\":%lld", &m->tid) == 1);
  }
  const char *s = end;
  cr_assert_eq(sscanf(strstr(s, "\"methods\":"), "\"methods\":%zu,\"completions\":%zu", &r->methods, &r->completions), 2);
  cr_assert_eq(sscanf(strstr(s, "\"totalJitMSec\":"), "\"totalJitMSec\":%lf", &r->total), 1);
}

/* Holds dntrace jit's rows for trace to TraceEvent's; returns how many methods were compared (0:
 * the trace has no JIT event). */
static size_t compare_with_traceevent(const char *dll, const char *trace) {
  static struct rows mine, theirs;
  struct dnt_run r;
  dnt_run_dntrace(&r, "jit", "--format", "json", trace, NULL);
  if (r.status == 1 && strstr(r.err, "no JIT compilation in this trace")) { /* one line, exit 1: nothing to compare */
    dnt_run_free(&r);
    return 0;
  }
  cr_assert_eq(r.status, 0, "dntrace jit %s: %s", trace, r.err);
  parse_dntrace(r.out, &mine);
  dnt_run_free(&r);
  if (mine.methods == 0) return 0;
  struct dnt_run te;
  te_run(&te, dll, trace, "jit");
  cr_assert_eq(te.status, 0, "TraceEvent on %s: %s", trace, te.err);
  parse_traceevent(te.out, &theirs);
  dnt_run_free(&te);
  cr_expect_eq(mine.methods, theirs.methods, "%s: %zu methods, TraceEvent %zu", trace, mine.methods, theirs.methods);
  cr_expect_eq(mine.completions, theirs.completions, "%s: %zu completions, TraceEvent %zu", trace, mine.completions,
               theirs.completions);
  cr_expect(fabs(mine.total - theirs.total) <= fmax(0.1, 0.01 * theirs.total), "%s: %.4f ms of JIT, TraceEvent %.4f",
            trace, mine.total, theirs.total);
  /* each of TraceEvent's methods is one of dntrace's: the same thread and start, name and time */
  size_t bad = 0;
  for (size_t i = 0; i < theirs.n; i++) {
    const struct method_row *t = &theirs.v[i], *m = NULL;
    for (size_t j = 0; j < mine.n && !m; j++)
      if (mine.v[j].tid == t->tid && fabs(mine.v[j].start - t->start) < 0.001) m = &mine.v[j];
    double tol = fmax(0.1, 0.01 * t->ms);
    if (!m || fabs(m->ms - t->ms) > tol || strncmp(m->name, t->name, strlen(m->name)) != 0) {
      if (bad++ < 5)
        cr_expect_fail("%s: %s on thread %lld at %.4f ms took %.4f ms (TraceEvent) vs %s %.4f ms", trace, t->name,
                       t->tid, t->start, t->ms, m ? m->name : "missing in dntrace", m ? m->ms : 0.0);
    }
  }
  cr_expect_eq(bad, 0, "%s: %zu methods differ from TraceEvent's", trace, bad);
  return theirs.n;
}

struct corpus_jit {
  const char *dll;
  size_t traces, methods;
};

static int is_nettrace(const char *name) {
  size_t len = strlen(name);
  return len >= 9 && strcmp(name + len - 9, ".nettrace") == 0;
}

static void compare_corpus_trace(void *ud, const char *path) {
  struct corpus_jit *c = ud;
  size_t n = compare_with_traceevent(c->dll, path);
  if (n) c->traces++, c->methods += n;
}

Test(jit_traceevent, every_corpus_trace_with_jit_events, .timeout = 300) {
  char dir[4096];
  corpus_dir(dir, sizeof dir);
  struct corpus_jit c = {te_oracle_or_skip("the JIT analysis"), 0, 0};
  corpus_each(dir, is_nettrace, compare_corpus_trace, &c);
  size_t traces = c.traces, methods = c.methods;
  /* the corpus holds two such traces: .NET Core 3.0 (54 methods) and shirhatti's allocTrace (445) */
  cr_expect_geq(traces, 2, "%zu corpus traces with JIT events compared", traces);
  cr_expect_geq(methods, 499, "%zu methods compared", methods);
}

/* The sample recorded from its first instruction with the JIT keywords: its startup. */
static void record_sample_startup(char *trace, size_t cap, char *dir) {
  cr_assert(mkdtemp(dir));
  snprintf(trace, cap, "%s/start.nettrace", dir);
  struct dnt_run r;
  dnt_run_dntrace(&r, "collect", "--providers", "Microsoft-Windows-DotNETRuntime:0x18:5", "-o", trace, "--",
                  dnt_target_exe(), "--seconds", "1", "--no-alloc", "--no-exceptions", "--no-counters", NULL);
  cr_assert_eq(r.status, 0, "dntrace collect -- sample: %s", r.err);
  dnt_run_free(&r);
}

Test(jit_traceevent, the_sample_from_its_first_instruction, .timeout = 300) {
  DNT_REQUIRE_TARGET();
  char dir[] = "/tmp/dnt-jit-XXXXXX", trace[64];
  record_sample_startup(trace, sizeof trace, dir);
  /* its startup: Main, and the workers it starts, compiled (QuickJitted or, with loops, OSR-ready) */
  struct dnt_run r;
  dnt_run_dntrace(&r, "jit", trace, "--top", "3", NULL);
  cr_assert_eq(r.status, 0, "%s", r.err);
  cr_expect(strstr(r.out, "Sample.Program.Main(class System.String[])"), "Main is not among:\n%.3000s", r.out);
  cr_expect(strstr(r.out, "Sample.Options.Parse(class System.String[])"), "Options.Parse is not there");
  cr_expect(strstr(r.out, "Timeline"), "no timeline");
  dnt_run_free(&r);
  const char *dll = te_oracle("the JIT analysis");
  if (dll) {
    /* as many as its startup compiled, however slowly (TraceEvent's count, held equal to
     * dntrace's above): at least Main and Options.Parse, found above */
    size_t n = compare_with_traceevent(dll, trace);
    cr_log_info("jit: %zu methods compiled in the sample's first second", n);
    cr_expect_geq(n, 2, "%zu methods in the sample's first second, not even Main and Options.Parse (%s)", n,
                  dnt_run_context(0));
  } else {
    cr_skip_test("dotnet is not installed: no TraceEvent to compare with");
  }
  unlink(trace);
  rmdir(dir);
}

/* jit -- CMD: the sample started by the analysis itself, seen from its first instruction (Main
 * is compiled before any -p could attach), and its exit code is the command's */
Test(jit_traceevent, a_command_started_by_jit, .timeout = 120) {
  DNT_REQUIRE_TARGET();
  struct dnt_run r;
  dnt_run_dntrace(&r, "jit", "--top", "3", "--", dnt_target_exe(), "--seconds", "1", "--exit-code", "3", "--no-alloc",
                  "--no-exceptions", "--no-counters", NULL);
  cr_expect_eq(r.status, 3, "the sample's exit code (3), not %d: %s", r.status, r.err);
  cr_expect(strstr(r.out, "Sample.Program.Main(class System.String[])"), "Main is not among:\n%.3000s", r.out);
  cr_expect(strstr(r.out, "Sample.Options.Parse(class System.String[])"), "Options.Parse is not there");
  cr_expect(strstr(r.err, "Recording the JIT compilations of process"), "%s", r.err);
  dnt_run_free(&r);
}

/* jit --diagnostic-port PATH,listen: the runtime dials the analysis, suspended, and is resumed
 * once the session runs; the report on stdout is JSON alone (the "waiting" line goes to stderr) */
Test(jit_traceevent, a_runtime_dialling_a_listening_jit, .timeout = 300) {
  DNT_REQUIRE_TARGET();
  require_python();
  char dir[] = "/tmp/dnt-jitlisten-XXXXXX", sock[64], spec[80], out[64], err[64];
  cr_assert(mkdtemp(dir));
  snprintf(sock, sizeof sock, "%s/port.sock", dir);
  snprintf(spec, sizeof spec, "%s,listen", sock);
  snprintf(out, sizeof out, "%s/out", dir);
  snprintf(err, sizeof err, "%s/err", dir);
  pid_t d = fork();
  cr_assert_geq(d, 0);
  if (d == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* a test that fails leaves nothing running */
    int o = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644), e = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(o, 1);
    dup2(e, 2);
    execl(dnt_bin(), dnt_bin(), "jit", "--diagnostic-port", spec, "--format", "json", "--duration", "2s", (char *)NULL);
    _exit(127);
  }
  struct stat st;
  dnt_target t;
  dnt_start_sample_dialing(&t, sock, DNT_HANG_MS, DNT_HANG_MS, &st);
  /* its 2 s from the session's start, and its report: only a hang takes DNT_HANG_MS */
  int status = -1, i;
  for (i = 0; i < DNT_HANG_MS / 50 && waitpid(d, &status, WNOHANG) != d; i++) usleep(50000);
  if (i == DNT_HANG_MS / 50) {
    kill(d, SIGKILL);
    waitpid(d, NULL, 0);
  }
  dnt_target_stop(&t);
  cr_assert(i < DNT_HANG_MS / 50, "jit --diagnostic-port --duration 2s did not exit in %d ms", DNT_HANG_MS);
  cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "jit exited with %d", status);
  /* seen from before Main: the runtime waited for the session */
  const char *py = "import json, sys\n"
                   "d = json.load(open(sys.argv[1]))\n"
                   "names = [m['name'] for m in d['methods']]\n"
                   "assert any(n.startswith('Sample.Program.Main(') for n in names), names[:20]\n";
  expect_python(py, out, NULL); /* stdout is the JSON report alone, with Main */
  unlink(out);
  unlink(err);
  rmdir(dir);
}

/* ---- the command line ---- */

Test(jit_cli, a_trace_without_jit_events_says_so_in_one_line) {
  char dir[4096], trace[8192];
  corpus_dir(dir, sizeof dir);
  snprintf(trace, sizeof trace, "%s/zetslief__nettrace/perf.nettrace", dir);
  struct dnt_run r;
  cr_assert_eq(dnt_run_dntrace(&r, "jit", trace, NULL), 1, "nothing to analyse: exit 1 in every analysis: %s", r.err);
  cr_expect(strstr(r.err, "no JIT compilation in this trace"), "%s", r.err);
  cr_expect_str_eq(r.out, "", "no report of nothing");
  cr_expect_eq(strchr(r.err, '\n'), strrchr(r.err, '\n'), "one line: %s", r.err);
  dnt_run_free(&r);
  cr_expect_eq(dnt_run_dntrace(&r, "jit", NULL), 2);
  cr_expect(strstr(r.err, "name a trace file, or a process"), "%s", r.err);
  dnt_run_free(&r);
  cr_expect_eq(dnt_run_dntrace(&r, "jit", trace, "--duration", "3s", NULL), 2);
  dnt_run_free(&r);
  cr_expect_eq(dnt_run_dntrace(&r, "jit", trace, "--", "/bin/true", NULL), 2, "a FILE and a command: %s", r.err);
  dnt_run_free(&r);
  cr_expect_eq(dnt_run_dntrace(&r, "jit", "-p", "1", "--show-child-io", NULL), 2, "%s", r.err);
  cr_expect(strstr(r.err, "--show-child-io goes with a command"), "%s", r.err);
  dnt_run_free(&r);
}

/* The JSON report read by Python's json module, its summary recomputed there from its rows. */
Test(jit_cli, json_report_is_json_and_its_summary_its_rows) {
  const char *py =
      "import json, math, sys\n"
      "d = json.load(open(sys.argv[1]))\n"
      "m, s = d['methods'], d['summary']\n"
      "done = [x for x in m if x['completed']]\n"
      "assert s['methods'] == len(m) and s['incomplete'] == len(m) - len(done), s\n"
      "assert abs(s['totalJitMSec'] - sum(x['jitMSec'] for x in done)) < 1e-3, s\n"
      "assert s['ilBytes'] == sum(x['ilSize'] for x in m), s\n"
      "tiers = {}\n"
      "for x in done: tiers[x['tier']] = tiers.get(x['tier'], 0) + 1\n"
      "assert tiers == {k: v['methods'] for k, v in s['byTier'].items()}, (tiers, s['byTier'])\n"
      "top = sorted((x['jitMSec'] for x in done), reverse=True)[:3]\n"
      "assert [x['jitMSec'] for x in s['slowest']] == top, (s['slowest'], top)\n"
      "b = {}\n"
      "for x in m: k = math.floor(x['startMSec'] / 100) * 100; b[k] = b.get(k, 0) + 1\n"
      "assert b == {t['startMSec']: t['methods'] for t in s['timeline']}, (b, s['timeline'])\n";
  expect_json_report("jit", "shirhatti__Nettrace/allocTrace.nettrace", "3", py);
}
