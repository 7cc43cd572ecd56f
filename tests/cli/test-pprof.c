/* pprof output, read by its real consumer (`go tool pprof`, Debian's golang-go):
 * - on corpus traces, `pprof -top` lists the functions of `dntrace report` (another code path)
 *   with the same exclusive and inclusive times, and `pprof -raw` adds up, per thread, to the
 *   SampleProfiler samples the independent reader (tests/lib/nt-scan) counts in the file;
 * - `collect --format pprof` and `perf --format pprof` on the real sample target;
 * - the protobuf encoder against the wire format's own worked examples and its edge cases
 *   (varints of 2^63 and more, negative int64, empty strings, proto3's omitted zeros), read
 *   back by a small decoder written here. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../lib/record-cr.h"
#include "../lib/nt-scan.h"
#include "../lib/run.h"
#include "../lib/target-cr.h"
#include "../lib/target.h"
#include "../lib/env-cr.h"
#include "dnt-profile.h"
#include "protobuf-int.h"

#define SAMPLER "Microsoft-DotNETCore-SampleProfiler"

static void corpus_path(char *path, size_t cap, const char *rel) {
  const char *c = getenv("DNT_CORPUS"), *src = getenv("DNT_SRCDIR");
  if (c) snprintf(path, cap, "%s/%s", c, rel);
  else snprintf(path, cap, "%s/../shared/corpus/%s", src ? src : ".", rel);
  if (access(path, R_OK) == 0) return;
  if (in_ci()) cr_assert_fail("no corpus at %s (CI=true)", path);
  cr_skip_test("no corpus at %s (set DNT_CORPUS)", path);
}

/* Runs `go tool pprof ARGS... FILE` with HOME, GOCACHE and PPROF_TMPDIR in dir (go wants them
 * writable); returns its stdout (caller frees). pprof must not complain on stderr either. */
static char *go_pprof(const char *dir, const char *file, const char *a1, const char *a2, const char *a3,
                      const char *a4, const char *a5) {
  char home[300], cache[300], tmp[300];
  snprintf(home, sizeof home, "HOME=%s", dir);
  snprintf(cache, sizeof cache, "GOCACHE=%s/gocache", dir);
  snprintf(tmp, sizeof tmp, "PPROF_TMPDIR=%s", dir);
  const char *env[] = {home, cache, tmp, NULL};
  char *argv[12] = {"/usr/bin/env", "go", "tool", "pprof"};
  int n = 4;
  const char *extra[] = {a1, a2, a3, a4, a5};
  for (size_t i = 0; i < 5; i++)
    if (extra[i]) argv[n++] = (char *)extra[i];
  argv[n++] = (char *)file;
  argv[n] = NULL;
  struct dnt_run r;
  int rc = dnt_run_argv(&r, argv, env, DNT_HANG_MS);
  cr_assert_eq(rc, 0, "go tool pprof %s %s: exit %d: %s", a1 ? a1 : "", file, rc, r.err);
  cr_expect_str_empty(r.err, "go tool pprof says: %s", r.err);
  char *out = r.out;
  r.out = NULL;
  dnt_run_free(&r);
  return out;
}

/* perf's own cpu-clock samples of thread tid in DATA (a .perf.data file), by `perf script`: the
 * independent count of what the recording holds of that thread. */
static long perf_samples_of(const char *data, pid_t tid) {
  char cmd[600];
  snprintf(cmd, sizeof cmd,
           "perf script -i '%s' -F tid,event 2>/dev/null | "
           "awk '$1 == %d && $2 ~ /^cpu-clock/ { n++ } END { print n + 0 }'",
           data, (int)tid);
  char *argv[] = {"/bin/sh", "-c", cmd, NULL};
  struct dnt_run r;
  cr_assert_eq(dnt_run_argv(&r, argv, NULL, DNT_HANG_MS), 0, "perf script: %s", r.err);
  long n = atol(r.out);
  dnt_run_free(&r);
  return n;
}

/* ---- `pprof -raw`: every sample with its values and thread_id label ---- */

struct raw {
  char types[128];   /* the line of sample types */
  char period_type[64];
  uint64_t period;
  double duration_s;
  int y, mon, d, h, min;
  double sec; /* Time: as pprof prints it (UTC) */
  uint64_t count, ns; /* totals */
  size_t nrows;
  struct {
    uint64_t thread, count, ns;
    char name[64]; /* its thread_name label, "" if none */
  } th[256];
  size_t nth;
};

static void parse_raw(const char *text, struct raw *raw) {
  memset(raw, 0, sizeof *raw);
  const char *p = strstr(text, "\nSamples:\n");
  cr_assert(p, "pprof -raw has samples:\n%.2000s", text);
  const char *q = strstr(text, "PeriodType: ");
  if (q) sscanf(q, "PeriodType: %63[^\n]", raw->period_type);
  if ((q = strstr(text, "\nPeriod: "))) raw->period = strtoull(q + 9, NULL, 10);
  if ((q = strstr(text, "\nDuration: "))) raw->duration_s = strtod(q + 11, NULL);
  if ((q = strstr(text, "\nTime: ")))
    sscanf(q, "\nTime: %d-%d-%d %d:%d:%lf", &raw->y, &raw->mon, &raw->d, &raw->h, &raw->min, &raw->sec);
  p += 10;
  sscanf(p, "%127[^\n]", raw->types);
  p = strchr(p, '\n') + 1;
  const char *end = strstr(p, "\nLocations");
  cr_assert(end, "pprof -raw lists locations");
  unsigned long long c = 0, ns = 0, th;
  int pending = 0; /* a sample row waiting for its label */
  char name[64] = "";
  while (p < end) {
    const char *eol = strchr(p, '\n');
    const char *lab = strstr(p, "thread_id:["), *named = strstr(p, "thread_name:[");
    if (named && named < eol) { /* string labels come on the line before the numbers */
      cr_assert_eq(sscanf(named, "thread_name:[%63[^]]]", name), 1);
    } else if (lab && lab < eol) {
      cr_assert(pending, "a label with no sample before it");
      cr_assert_eq(sscanf(lab, "thread_id:[%llu]", &th), 1);
      size_t t = 0;
      while (t < raw->nth && raw->th[t].thread != th) t++;
      if (t == raw->nth) {
        cr_assert_lt(raw->nth, sizeof raw->th / sizeof raw->th[0]);
        raw->th[raw->nth++].thread = th;
      }
      raw->th[t].count += c;
      raw->th[t].ns += ns;
      if (name[0]) {
        cr_expect(!raw->th[t].name[0] || strcmp(raw->th[t].name, name) == 0, "thread %llu has one name", th);
        snprintf(raw->th[t].name, sizeof raw->th[t].name, "%s", name);
      }
      name[0] = '\0';
      pending = 0;
    } else if (sscanf(p, " %llu %llu:", &c, &ns) == 2) {
      cr_assert(!pending, "a sample without a thread_id label");
      raw->count += c;
      raw->ns += ns;
      raw->nrows++;
      pending = 1;
    }
    p = eol + 1;
  }
  cr_assert(!pending, "the last sample has no thread_id label");
}

/* The time a thread's samples stand for in ns, by the weights' rule (dnt-profile.h, TraceEvent's:
 * each sample the time to its thread's next, the last none): the span from the thread's first
 * sample to its last, as the independent reader sees them. */
static double span_ns(const struct nt_scan *s, uint64_t first_ts, uint64_t last_ts) {
  cr_assert_gt(s->qpc_frequency, 0);
  return (double)(last_ts - first_ts) * 1e9 / (double)s->qpc_frequency;
}

/* pprof's integers are each stack's time rounded to the ns: a thread's sum may be off by half a
 * ns a stack */
static int close_ns(uint64_t got, double want) {
  double d = (double)got - want;
  return d < 0 ? -d <= 1000 + want * 1e-9 : d <= 1000 + want * 1e-9;
}

/* ---- function tables: `pprof -top` and `dntrace report` ---- */

struct row {
  char name[1200];
  double flat, cum; /* ms */
};

/* Rows of `pprof -top -unit=ms`: flat flat% sum% cum cum% name. */
static size_t parse_top(const char *text, struct row *rows, size_t max) {
  const char *p = strstr(text, "flat  flat%");
  cr_assert(p, "pprof -top has its table:\n%.2000s", text);
  p = strchr(p, '\n') + 1;
  size_t n = 0;
  while (*p && n < max) {
    const char *eol = strchr(p, '\n');
    if (!eol) eol = p + strlen(p);
    char tok[5][64];
    int used = 0;
    if (sscanf(p, "%63s %63s %63s %63s %63s %n", tok[0], tok[1], tok[2], tok[3], tok[4], &used) == 5 && used) {
      rows[n].flat = strtod(tok[0], NULL); /* "2590ms", "1.50ms" or "0" */
      rows[n].cum = strtod(tok[3], NULL);
      size_t len = (size_t)(eol - (p + used));
      cr_assert_lt(len, sizeof rows[n].name);
      memcpy(rows[n].name, p + used, len);
      rows[n].name[len] = '\0';
      n++;
    }
    p = *eol ? eol + 1 : eol;
  }
  return n;
}

/* The first table of `dntrace report` (or `dntrace perf`): "E ms P%  I ms P%  name" rows. */
static size_t parse_report(const char *text, struct row *rows, size_t max) {
  const char *p = strstr(text, "Function\n");
  cr_assert(p, "a report table:\n%.2000s", text);
  p += 9;
  size_t n = 0;
  while (*p && *p != '\n' && n < max) {
    const char *eol = strchr(p, '\n');
    double ep, ip;
    int used = 0;
    cr_assert_eq(sscanf(p, " %lf ms %lf%% %lf ms %lf%% %n", &rows[n].flat, &ep, &rows[n].cum, &ip, &used), 4,
                 "report row: %.200s", p);
    size_t len = (size_t)(eol - (p + used));
    cr_assert_lt(len, sizeof rows[n].name);
    memcpy(rows[n].name, p + used, len);
    rows[n].name[len] = '\0';
    /* a row on few samples says how many after the name: "  (2 samples)" */
    char *note = strstr(rows[n].name, "  (");
    if (note && strstr(note, " sample") && note[strlen(note) - 1] == ')') *note = '\0';
    n++;
    p = eol + 1;
  }
  return n;
}

/* Every function of the report is in pprof's table with the same exclusive (flat) and inclusive
 * (cum) time; report prints whole milliseconds, rounded. */
static void expect_same_functions(const struct row *rep, size_t nrep, const struct row *top, size_t ntop,
                                  const char *what) {
  cr_assert_gt(nrep, 0);
  for (size_t i = 0; i < nrep; i++) {
    size_t j = 0;
    while (j < ntop && strcmp(top[j].name, rep[i].name) != 0) j++;
    cr_assert_lt(j, ntop, "%s: '%s' of the report is in pprof -top", what, rep[i].name);
    cr_expect(top[j].flat > rep[i].flat - 0.51 && top[j].flat < rep[i].flat + 0.51,
              "%s: %s exclusive: pprof %.3f ms, report %.0f ms", what, rep[i].name, top[j].flat, rep[i].flat);
    cr_expect(top[j].cum > rep[i].cum - 0.51 && top[j].cum < rep[i].cum + 0.51,
              "%s: %s inclusive: pprof %.3f ms, report %.0f ms", what, rep[i].name, top[j].cum, rep[i].cum);
  }
}

/* pprof -raw's samples, per thread, are the SampleProfiler events (and allocation events) the
 * independent reader counts in the trace, and weigh what each sample stands for. */
static void expect_raw_is_the_trace(const struct raw *raw, const struct nt_scan *s, const char *what) {
  cr_assert_str_eq(raw->types, "samples/count wall/nanoseconds[dflt]", "%s: sample types", what);
  cr_expect_str_eq(raw->period_type, "wall nanoseconds", "%s", what);
  cr_expect_eq(raw->period, s->sampling_ns, "%s: the period is the sampling interval", what);
  /* the samples: the sampler's, and the allocation events TraceEvent counts as samples too */
  static struct nt_scan_thread sth[NT_SCAN_MAX];
  size_t threads = nt_scan_sample_threads(s, sth, NT_SCAN_MAX);
  uint64_t total = 0;
  for (size_t i = 0; i < threads; i++) total += sth[i].count;
  cr_assert_gt(total, 0);
  cr_expect_eq(raw->count, total, "%s: %llu samples in pprof, %llu in the trace", what,
               (unsigned long long)raw->count, (unsigned long long)total);
  double all_ns = 0;
  for (size_t i = 0; i < threads; i++) {
    uint64_t th = sth[i].thread, want = sth[i].count, got = 0, ns = 0;
    for (size_t t = 0; t < raw->nth; t++)
      if (raw->th[t].thread == th) got = raw->th[t].count, ns = raw->th[t].ns;
    cr_expect_eq(got, want, "%s: thread %llu: %llu samples in pprof, %llu in the trace", what,
                 (unsigned long long)th, (unsigned long long)got, (unsigned long long)want);
    double want_ns = span_ns(s, sth[i].first_ts, sth[i].last_ts);
    all_ns += want_ns;
    cr_expect(close_ns(ns, want_ns), "%s: thread %llu's time %llu ns, its samples span %.0f ns", what,
              (unsigned long long)th, (unsigned long long)ns, want_ns);
  }
  cr_expect(close_ns(raw->ns, all_ns), "%s: %llu ns in pprof, the threads' spans %.0f", what,
            (unsigned long long)raw->ns, all_ns);
  cr_expect_eq(raw->nth, threads, "%s: pprof labels %zu threads, the trace samples %zu", what, raw->nth, threads);
}

static int is_gzip(const char *path) {
  unsigned char m[2] = {0};
  FILE *fp = fopen(path, "rb");
  if (!fp) return 0;
  size_t n = fread(m, 1, 2, fp);
  fclose(fp);
  return n == 2 && m[0] == 0x1f && m[1] == 0x8b;
}

static void rm_rf(const char *dir) {
  char cmd[400];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  cr_assert_eq(system(cmd), 0);
}

/* convert a corpus trace; compare with the report (both rankings) and with the file's samples,
 * thread by thread: --no-async, each thread's own samples (stitching moves a task's samples to the
 * thread that made it: held to TraceEvent in tests/cli/test-oracle-stacks.c) */
static void convert_and_compare(const char *rel) {
  require_go();
  char trace[4096];
  corpus_path(trace, sizeof trace, rel);
  static struct nt_scan s;
  memset(&s, 0, sizeof s);
  cr_assert_eq(nt_scan_file(trace, &s), 0);
  char dir[] = "/tmp/dnt-pprof-XXXXXX", out[64], file[80];
  cr_assert(mkdtemp(dir));
  snprintf(out, sizeof out, "%s/p", dir);
  snprintf(file, sizeof file, "%s/p.pb.gz", dir);
  struct dnt_run r;
  cr_assert_eq(dnt_run_dntrace(&r, "convert", trace, "--format", "pprof", "--no-async", "-o", out, NULL), 0, "%s",
               r.err);
  dnt_run_free(&r);
  cr_assert(is_gzip(file), "%s is gzip-compressed", file);

  char *text = go_pprof(dir, file, "-raw", NULL, NULL, NULL, NULL);
  static struct raw raw;
  parse_raw(text, &raw);
  free(text);
  expect_raw_is_the_trace(&raw, &s, rel);
  cr_expect_gt(raw.duration_s, 0, "%s: a duration", rel);
  /* time_nanos is the trace's start: pprof's date is the header's */
  const uint16_t *st = s.start_time;
  cr_expect(raw.y == st[0] && raw.mon == st[1] && raw.d == st[3] && raw.h == st[4] && raw.min == st[5] &&
                raw.sec > st[6] + st[7] / 1000.0 - 0.0005 && raw.sec < st[6] + st[7] / 1000.0 + 0.0005,
            "%s: pprof's time %d-%d-%d %d:%d:%.3f, the trace's %u-%u-%u %u:%u:%u.%03u", rel, raw.y, raw.mon, raw.d,
            raw.h, raw.min, raw.sec, st[0], st[1], st[3], st[4], st[5], st[6], st[7]);

  static struct row top[8192], rep[40];
  text = go_pprof(dir, file, "-top", "-nodecount=1000000", "-nodefraction=0", "-edgefraction=0", "-unit=ms");
  size_t ntop = parse_top(text, top, sizeof top / sizeof top[0]);
  free(text);
  /* pprof's flat column is each frame's own time: report's exclusive view (native time a row) */
  cr_assert_str_eq(dnt_run_dntrace(&r, "report", trace, "-n", "30", "--no-fold-native", "--no-async", NULL) == 0 ? ""
                                                                                                         : r.err,
                   "");
  size_t nrep = parse_report(r.out, rep, 40);
  dnt_run_free(&r);
  expect_same_functions(rep, nrep, top, ntop, "exclusive ranking");
  /* the heaviest function is the same (ties aside: the same time) */
  cr_expect(top[0].flat > rep[0].flat - 0.51 && top[0].flat < rep[0].flat + 0.51, "%s first: pprof %s, report %s",
            rel, top[0].name, rep[0].name);
  cr_assert_str_eq(dnt_run_dntrace(&r, "report", trace, "-n", "30", "--inclusive", "--no-fold-native", "--no-async",
                                   NULL) == 0
                       ? ""
                       : r.err,
                   "");
  nrep = parse_report(r.out, rep, 40);
  dnt_run_free(&r);
  expect_same_functions(rep, nrep, top, ntop, "inclusive ranking");
  rm_rf(dir);
}

/* one thread, managed and external samples */
/* .timeout: dntrace and go tool pprof run a few times each, under DNT_HANG_MS each (only a hang
 * reaches it, and a failed step ends the test): well above one ceiling and a loaded healthy run */
Test(pprof, mixed_samples_match_report_and_trace, .timeout = 300) {
  convert_and_compare("microsoft__perfview/mixed_managed_external_samples.nettrace");
}

/* 32-bit, two threads, a big rundown, unnamed frames */
Test(pprof, a_32bit_linux_trace_matches_report_and_trace, .timeout = 300) {
  convert_and_compare("microsoft__perfview/HeartRateMonitor.10068.nettrace");
}

/* thirteen threads */
Test(pprof, many_threads_match_report_and_trace, .timeout = 300) {
  convert_and_compare("microsoft__perfview/eventpipe-dotnetcore3.0-win-x64-objver4.nettrace");
}

/* Frames of a made-up profile named as perf's map and symbols name them: a stub of the runtime's
 * (no module), a C++ symbol of a library, a managed method. */
static int name_frame(void *ud, uint64_t ip, int leaf, char *buf, size_t cap) {
  (void)ud, (void)leaf;
  static const char *const names[] = {"[stub] ReportStubBlock<MethodCallThunk>",
                                      "libcoreclr.so!ThreadNative::KickOffThread<Thread>(void*)",
                                      "Sample!Sample.CpuWork.<Run>b__0_0"};
  if (ip < 1 || ip > 3) return 0;
  snprintf(buf, cap, "%s", names[ip - 1]);
  return 1;
}

/* pprof shows every name as `dntrace report` prints it: it "simplifies" a function whose
 * system_name equals its name when it looks like demangled C++ (cuts what is between < and >),
 * so a name with no module (a runtime stub) must not have itself as its system name (a loaded CI
 * run recorded ReportStubBlock<MethodCallThunk>, which pprof -top showed as ReportStubBlock<>). */
Test(pprof, names_kept_as_written, .timeout = 300) {
  require_go();
  struct dnt_profile *p = dnt_profile_new();
  cr_assert(p);
  cr_assert_eq(dnt_profile_add_resolver(p, name_frame, NULL), 0);
  const uint64_t stack[] = {1, 2, 3};
  for (int i = 0; i < 3; i++) dnt_profile_add_stack(p, 7, (uint64_t)i, stack + i, 3 - (size_t)i, 1.0);
  cr_assert_eq(dnt_profile_finish(p), 0);
  char dir[] = "/tmp/dnt-pprofn-XXXXXX", file[64];
  cr_assert(mkdtemp(dir));
  snprintf(file, sizeof file, "%s/n.pb.gz", dir);
  FILE *fp = fopen(file, "wb");
  cr_assert(fp);
  cr_assert_eq(dnt_profile_write(p, DNT_PROFILE_PPROF, "names", fp), 0);
  cr_assert_eq(fclose(fp), 0);
  dnt_profile_free(p);
  char *text = go_pprof(dir, file, "-top", "-nodecount=1000000", "-nodefraction=0", "-edgefraction=0", "-unit=ms");
  static struct row top[16];
  size_t ntop = parse_top(text, top, sizeof top / sizeof top[0]);
  for (uint64_t ip = 1; ip <= 3; ip++) {
    char want[200];
    name_frame(NULL, ip, 0, want, sizeof want);
    size_t j = 0;
    while (j < ntop && strcmp(top[j].name, want) != 0) j++;
    cr_expect_lt(j, ntop, "'%s' shown as written by pprof -top:\n%s", want, text);
  }
  free(text);
  rm_rf(dir);
}

/* To standard output through a pipe. */
Test(pprof, to_stdout, .timeout = 300) {
  char trace[4096];
  corpus_path(trace, sizeof trace, "microsoft__perfview/only_managed_samples.nettrace");
  struct dnt_run r;
  cr_assert_eq(dnt_run_dntrace(&r, "convert", trace, "--format", "pprof", "-o", "-", NULL), 0, "%s", r.err);
  cr_expect((unsigned char)r.out[0] == 0x1f && (unsigned char)r.out[1] == 0x8b, "gzip on stdout");
  dnt_run_free(&r);
  /* but not to a terminal, as gzip refuses: one line, a usage error (script(1) gives it a tty) */
  if (system("command -v script >/dev/null 2>&1") != 0) {
    if (in_ci()) cr_assert_fail("no script(1) (util-linux) under CI=true");
    cr_skip_test("needs script(1) from util-linux for a terminal");
  }
  char cmd[8400];
  snprintf(cmd, sizeof cmd, "'%s' convert '%s' --format pprof -o -; echo \"exit=$?\"", dnt_bin(), trace);
  char *const argv[] = {"/usr/bin/env", "script", "-qec", cmd, "/dev/null", NULL};
  cr_assert_eq(dnt_run_argv(&r, argv, NULL, DNT_HANG_MS), 0, "%s", r.err);
  cr_expect(strstr(r.out, "exit=2"), "a usage error on a terminal:\n%s", r.out);
  cr_expect(strstr(r.out, "dntrace: error: pprof is compressed binary data: not written to a terminal"), "%s", r.out);
  cr_expect(!memchr(r.out, 0x1f, strlen(r.out)), "no gzip bytes on the terminal");
  dnt_run_free(&r);
}

/* collect --format pprof on the sample target: written beside the .nettrace, from the stream.
 * Recorded until cpu-work has 10 samples in it (CountPrimes must show). The inner ceilings: the
 * sample's start and cpu-work's first CPU (DNT_HANG_MS each, only a hang), at most 126 s of
 * recording, then go tool pprof (DNT_HANG_MS each; a failed step ends the test). */
Test(pprof, collect_format_pprof, .timeout = 480) {
  require_go();
  DNT_REQUIRE_TARGET();
  dnt_target t;
  dnt_target_opts o = {.mode = DNT_TARGET_PLAIN, .wait_socket = 1};
  char err[512];
  cr_assert_eq(dnt_target_start(&t, &o, err, sizeof err), 0, "%s", err);
  char dir[] = "/tmp/dnt-pprofc-XXXXXX", trace[64], file[64];
  cr_assert(mkdtemp(dir));
  snprintf(trace, sizeof trace, "%s/t.nettrace", dir);
  snprintf(file, sizeof file, "%s/t.pb.gz", dir);
  pid_t cpu = dnt_wait_thread_ran(t.pid, "cpu-work", 0.1);
  static const char *const pprof[] = {"--format", "pprof", NULL};
  static struct nt_scan s;
  dnt_collect_until(t.pid, trace, pprof, SAMPLER, 0, cpu, 10, &s);
  dnt_target_stop(&t);
  cr_assert(is_gzip(file), "%s written", file);
  char *text = go_pprof(dir, file, "-raw", NULL, NULL, NULL, NULL);
  static struct raw raw;
  parse_raw(text, &raw);
  free(text);
  expect_raw_is_the_trace(&raw, &s, "collect");
  text = go_pprof(dir, file, "-top", "-nodecount=1000000", "-nodefraction=0", "-edgefraction=0", "-unit=ms");
  cr_expect(strstr(text, "Sample!Sample.CpuWork.CountPrimes\n"), "CountPrimes in pprof -top:\n%.3000s", text);
  cr_expect(strstr(text, "File: Sample\n"), "the sample's own module is the main mapping:\n%.500s", text);
  free(text);
  rm_rf(dir);
}

/* perf --format pprof: cpu time, each sample perf's period; the same functions as perf's report.
 * Recorded for 1 s, and again for twice as long while perf's own samples of cpu-work number fewer
 * than 10 (a starved sample makes the recording longer, not the verdict different). The inner
 * ceilings: the sample's start and cpu-work's first CPU (DNT_HANG_MS each, only a hang), at most
 * 127 s of recording, then go tool pprof (DNT_HANG_MS each; a failed step ends the test). */
Test(pprof, perf_format_pprof, .timeout = 480) {
  require_go();
  DNT_REQUIRE_PERF();
  dnt_target t;
  dnt_target_opts o = {.mode = DNT_TARGET_PLAIN, .wait_socket = 1};
  char err[512];
  cr_assert_eq(dnt_target_start(&t, &o, err, sizeof err), 0, "%s", err);
  char dir[] = "/tmp/dnt-pprofp-XXXXXX", base[64], file[80], data[80], pid[16];
  cr_assert(mkdtemp(dir));
  snprintf(base, sizeof base, "%s/p", dir);
  snprintf(file, sizeof file, "%s/p.pb.gz", dir);
  snprintf(data, sizeof data, "%s/p.perf.data", dir);
  snprintf(pid, sizeof pid, "%d", (int)t.pid);
  pid_t cpu = dnt_wait_thread_ran(t.pid, "cpu-work", 0.1);
  struct dnt_run r;
  int rc = -1;
  long cpu_samples = 0;
  for (int secs = 1; secs <= 64; secs *= 2) {
    char dur[16];
    snprintf(dur, sizeof dur, "%ds", secs);
    rc = dnt_run_dntrace(&r, "perf", "-p", pid, "--duration", dur, "-o", base, "--top", "30", "--format", "pprof",
                         NULL);
    cr_assert_eq(rc, 0, "dntrace perf: %s%s", r.out, r.err);
    if ((cpu_samples = perf_samples_of(data, cpu)) >= 10) break;
    cr_log_info("%s: perf has %ld samples of cpu-work, fewer than 10: recording again, for longer (%s)", dur,
                cpu_samples, dnt_run_context(t.pid));
    dnt_run_free(&r);
  }
  cr_assert_geq(cpu_samples, 10, "127 s of recording hold %ld perf samples of cpu-work: %s", cpu_samples,
                dnt_run_context(t.pid));
  /* the kernel's names of the target's threads, the independent side of thread_name */
  char ls[200];
  snprintf(ls, sizeof ls, "cd /proc/%s/task && for t in *; do printf '%%s %%s\\n' \"$t\" \"$(cat $t/comm)\"; done", pid);
  char *const sh[] = {"/bin/sh", "-c", ls, NULL};
  struct dnt_run comms;
  cr_assert_eq(dnt_run_argv(&comms, sh, NULL, DNT_HANG_MS), 0, "%s", comms.err);
  dnt_target_stop(&t);
  unsigned long long samples = 0;
  const char *line = strstr(r.out, " samples on ");
  while (line && line > r.out && line[-1] >= '0' && line[-1] <= '9') line--;
  cr_assert(line && sscanf(line, "%llu samples on", &samples) == 1 && samples > 0, "%s", r.out);
  static struct row rep[40], top[8192];
  size_t nrep = parse_report(r.out, rep, 40);
  dnt_run_free(&r);

  char *text = go_pprof(dir, file, "-raw", NULL, NULL, NULL, NULL);
  static struct raw raw;
  parse_raw(text, &raw);
  free(text);
  cr_assert_str_eq(raw.types, "samples/count cpu/nanoseconds[dflt]");
  /* perf's comm (or, where perf never learnt it, the kernel's at the end) names every thread
   * still there: as the kernel does, and the sample's cpu-work among them */
  int cpu_work = 0;
  for (size_t i = 0; i < raw.nth; i++) {
    char want[80];
    snprintf(want, sizeof want, "\n%llu %s\n", (unsigned long long)raw.th[i].thread, raw.th[i].name);
    size_t cap = strlen(comms.out) + 2;
    char *all = malloc(cap);
    snprintf(all, cap, "\n%s", comms.out);
    const char *tid = strstr(all, want);
    char idonly[32];
    snprintf(idonly, sizeof idonly, "\n%llu ", (unsigned long long)raw.th[i].thread);
    if (strstr(all, idonly)) /* still there at the end: named, the same name */
      cr_expect(raw.th[i].name[0] && tid, "thread %llu is '%s' for the kernel too:\n%s",
                (unsigned long long)raw.th[i].thread, raw.th[i].name, comms.out);
    free(all);
    cpu_work |= strcmp(raw.th[i].name, "cpu-work") == 0;
  }
  cr_expect(cpu_work, "the cpu-work thread is named");
  dnt_run_free(&comms);
  cr_expect_str_eq(raw.period_type, "cpu nanoseconds");
  uint64_t period = (uint64_t)(1e9 / 999 + 0.5); /* dntrace perf's default -F 999 */
  cr_expect_eq(raw.period, period);
  cr_expect_eq(raw.count, samples, "pprof %llu samples, perf %llu", (unsigned long long)raw.count, samples);
  /* each row's time is rounded to the ns: at most half a ns off per row */
  double want = (double)samples * 1e9 / 999;
  cr_expect(raw.ns > want - (double)raw.nrows && raw.ns < want + (double)raw.nrows, "cpu time %llu ns, want %.0f",
            (unsigned long long)raw.ns, want);

  text = go_pprof(dir, file, "-top", "-nodecount=1000000", "-nodefraction=0", "-edgefraction=0", "-unit=ms");
  size_t ntop = parse_top(text, top, sizeof top / sizeof top[0]);
  free(text);
  expect_same_functions(rep, nrep, top, ntop, "perf");
  rm_rf(dir);
}

/* compare --format pprof: the on-CPU and off-CPU views split the trace's samples between them,
 * each thread labelled with the name compare shows. Recorded for 1 s, and again for twice as long
 * until the recording holds 10 of perf's own samples of cpu-work and 10 EventPipe samples of it
 * and of blocking-work (a starved sample makes the recording longer, not the verdict different).
 * The inner ceilings: the sample's start and cpu-work's first CPU (DNT_HANG_MS each, only a hang),
 * at most 127 s of recording, then dntrace and go tool pprof (DNT_HANG_MS each). */
Test(pprof, compare_format_pprof, .timeout = 480) {
  require_go();
  DNT_REQUIRE_PERF();
  dnt_target t;
  dnt_target_opts o = {.mode = DNT_TARGET_PLAIN, .wait_socket = 1};
  char err[512];
  cr_assert_eq(dnt_target_start(&t, &o, err, sizeof err), 0, "%s", err);
  char dir[] = "/tmp/dnt-pprofx-XXXXXX", trace[64], data[80], on[80], off[80], pid[16];
  cr_assert(mkdtemp(dir));
  snprintf(trace, sizeof trace, "%s/run.nettrace", dir);
  snprintf(data, sizeof data, "%s/run.perf.data", dir);
  snprintf(on, sizeof on, "%s/run.oncpu.pb.gz", dir);
  snprintf(off, sizeof off, "%s/run.offcpu.pb.gz", dir);
  snprintf(pid, sizeof pid, "%d", (int)t.pid);
  pid_t cpu = dnt_wait_thread_ran(t.pid, "cpu-work", 0.1), blocking = dnt_wait_thread_ran(t.pid, "blocking-work", 0);
  struct dnt_run r;
  static struct nt_scan s;
  long perf_cpu = 0;
  uint64_t ep_cpu = 0, ep_blocking = 0;
  for (int secs = 1; secs <= 64; secs *= 2) {
    char dur[16];
    snprintf(dur, sizeof dur, "%ds", secs);
    int rc = dnt_run_dntrace(&r, "collect", "-p", pid, "--native", "--duration", dur, "-o", trace, NULL);
    cr_assert_eq(rc, 0, "collect --native: %s%s", r.out, r.err);
    dnt_run_free(&r);
    memset(&s, 0, sizeof s);
    cr_assert_eq(nt_scan_file(trace, &s), 0);
    perf_cpu = perf_samples_of(data, cpu);
    ep_cpu = nt_scan_count(&s, SAMPLER, 0, (uint64_t)cpu);
    ep_blocking = nt_scan_count(&s, SAMPLER, 0, (uint64_t)blocking);
    if (perf_cpu >= 10 && ep_cpu >= 10 && ep_blocking >= 10) break;
    cr_log_info("%s: perf has %ld samples of cpu-work, EventPipe %llu of it and %llu of blocking-work, fewer than 10: "
                "recording again, for longer (%s)",
                dur, perf_cpu, (unsigned long long)ep_cpu, (unsigned long long)ep_blocking, dnt_run_context(t.pid));
  }
  dnt_target_stop(&t);
  cr_assert(perf_cpu >= 10 && ep_cpu >= 10 && ep_blocking >= 10,
            "127 s of recording hold %ld perf samples of cpu-work, %llu EventPipe ones of it and %llu of blocking-work",
            perf_cpu, (unsigned long long)ep_cpu, (unsigned long long)ep_blocking);
  cr_assert_eq(dnt_run_dntrace(&r, "compare", trace, "--format", "pprof", "--top", "3", NULL), 0, "%s%s", r.out,
               r.err);
  unsigned long long uncovered = 0;
  const char *left = strstr(r.out, " EventPipe samples fell outside");
  if (left) {
    while (left > r.out && left[-1] != '\n') left--;
    cr_assert_eq(sscanf(left, "%llu", &uncovered), 1);
  }
  dnt_run_free(&r);
  static struct raw ron, roff;
  char *text = go_pprof(dir, on, "-raw", NULL, NULL, NULL, NULL);
  parse_raw(text, &ron);
  free(text);
  text = go_pprof(dir, off, "-raw", NULL, NULL, NULL, NULL);
  parse_raw(text, &roff);
  free(text);
  cr_expect_str_eq(ron.types, "samples/count wall/nanoseconds[dflt]");
  cr_expect_str_eq(roff.types, "samples/count wall/nanoseconds[dflt]");
  uint64_t total = nt_scan_count(&s, SAMPLER, 0, 0);
  cr_expect_eq(ron.count + roff.count + uncovered, total, "on %llu + off %llu + outside %llu = %llu samples",
               (unsigned long long)ron.count, (unsigned long long)roff.count, uncovered, (unsigned long long)total);
  int cpu_work_on = 0, blocking_off = 0;
  for (size_t i = 0; i < ron.nth; i++) cpu_work_on |= strcmp(ron.th[i].name, "cpu-work") == 0;
  for (size_t i = 0; i < roff.nth; i++) blocking_off |= strcmp(roff.th[i].name, "blocking-work") == 0;
  cr_expect(cpu_work_on, "cpu-work is named in the on-CPU profile");
  cr_expect(blocking_off, "blocking-work is named in the off-CPU profile");
  if (!uncovered) /* then every thread's samples are split between the two */
    for (int i = 0; i < s.ncounts; i++) {
      if (strcmp(s.counts[i].provider, SAMPLER) != 0 || s.counts[i].event_id != 0) continue;
      uint64_t got = 0;
      for (size_t k = 0; k < ron.nth; k++) got += ron.th[k].thread == s.counts[i].thread ? ron.th[k].count : 0;
      for (size_t k = 0; k < roff.nth; k++) got += roff.th[k].thread == s.counts[i].thread ? roff.th[k].count : 0;
      cr_expect_eq(got, s.counts[i].count, "thread %llu", (unsigned long long)s.counts[i].thread);
    }
  rm_rf(dir);
}

/* ---- the encoder ---- */

/* A decoder of our own for the test: varint at *p (advancing it); -1 when it runs past end or
 * over 10 bytes. */
static int get_varint(const uint8_t **p, const uint8_t *end, uint64_t *v) {
  *v = 0;
  for (int shift = 0; shift < 70; shift += 7) {
    if (*p >= end) return -1;
    uint8_t b = *(*p)++;
    *v |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) return 0;
  }
  return -1;
}

static void expect_bytes(const struct dnt__pb *b, const char *hex, const char *what) {
  char got[512] = "";
  for (size_t i = 0; i < b->len && i < 200; i++) snprintf(got + 2 * i, 3, "%02x", b->buf[i]);
  cr_expect_str_eq(got, hex, "%s: %s, want %s", what, got, hex);
}

/* The wire format's worked examples (protobuf.dev, Encoding): 150 in field 1, "testing" in field
 * 2, [3, 270, 86942] packed in field 4. */
Test(pprof_encoder, the_wire_format_examples) {
  struct dnt__pb b = {0};
  dnt__pb_uint(&b, 1, 150);
  expect_bytes(&b, "089601", "varint 150");
  dnt__pb_reset(&b);
  dnt__pb_bytes(&b, 2, "testing", 7);
  expect_bytes(&b, "120774657374696e67", "string");
  dnt__pb_reset(&b);
  uint64_t v[] = {3, 270, 86942};
  dnt__pb_packed(&b, 4, v, 3);
  expect_bytes(&b, "2206038e029ea705", "packed"); /* key (4 << 3) | 2 */
  dnt__pb_release(&b);
}

/* proto3: a scalar equal to 0 is not written; a string is, even empty (string_table[0] is ""),
 * and so is an empty message (an element of a repeated field); packed with no values is not. */
Test(pprof_encoder, zeros_and_empties) {
  struct dnt__pb b = {0}, empty = {0};
  dnt__pb_uint(&b, 1, 0);
  dnt__pb_int(&b, 2, 0);
  dnt__pb_bool(&b, 7, 0);
  dnt__pb_packed(&b, 2, NULL, 0);
  cr_expect_eq(b.len, 0, "zeros omitted");
  dnt__pb_bytes(&b, 6, "", 0);
  expect_bytes(&b, "3200", "an empty string");
  dnt__pb_reset(&b);
  dnt__pb_message(&b, 2, &empty);
  expect_bytes(&b, "1200", "an empty message");
  dnt__pb_reset(&b);
  dnt__pb_bool(&b, 7, 5);
  expect_bytes(&b, "3801", "true is 1");
  dnt__pb_reset(&b);
  dnt__pb_uint(&b, 16, 1); /* field 16: a two-byte key */
  expect_bytes(&b, "800101", "field 16");
  dnt__pb_release(&b);
}

/* The largest values: 2^63 and 2^64 - 1 take ten bytes, and so does a negative int64 (its two's
 * complement, as protobuf writes int64). */
Test(pprof_encoder, big_and_negative) {
  struct dnt__pb b = {0};
  dnt__pb_uint(&b, 1, UINT64_C(1) << 63);
  expect_bytes(&b, "0880808080808080808001", "2^63");
  dnt__pb_reset(&b);
  dnt__pb_uint(&b, 1, UINT64_MAX);
  expect_bytes(&b, "08ffffffffffffffffff01", "2^64 - 1");
  dnt__pb_reset(&b);
  dnt__pb_int(&b, 1, -1);
  expect_bytes(&b, "08ffffffffffffffffff01", "-1");
  dnt__pb_reset(&b);
  dnt__pb_int(&b, 1, INT64_MIN);
  expect_bytes(&b, "0880808080808080808001", "INT64_MIN");
  dnt__pb_release(&b);
  cr_expect_eq(dnt__pb_varint_size(0), 1);
  cr_expect_eq(dnt__pb_varint_size(127), 1);
  cr_expect_eq(dnt__pb_varint_size(128), 2);
  cr_expect_eq(dnt__pb_varint_size((UINT64_C(1) << 63) - 1), 9);
  cr_expect_eq(dnt__pb_varint_size(UINT64_C(1) << 63), 10);
}

/* Every bit length, packed and as fields, nested in a message, read back by the decoder above:
 * the lengths written are the lengths of what follows. */
Test(pprof_encoder, round_trip_every_bit_length) {
  uint64_t v[130];
  size_t n = 0;
  for (int bits = 0; bits <= 64; bits++) { /* 0, then 2^k - 1 and 2^k for every k */
    uint64_t top = bits == 64 ? UINT64_MAX : (UINT64_C(1) << bits) - 1;
    v[n++] = top;
    if (bits < 64) v[n++] = top + 1;
  }
  struct dnt__pb inner = {0}, outer = {0};
  dnt__pb_packed(&inner, 2, v, n);
  for (size_t i = 0; i < n; i++) dnt__pb_uint(&inner, 1, v[i]);
  dnt__pb_bytes(&inner, 3, "", 0);
  dnt__pb_message(&outer, 5, &inner);
  cr_assert(!outer.oom && !inner.oom);

  const uint8_t *p = outer.buf, *end = outer.buf + outer.len;
  uint64_t key, len;
  cr_assert_eq(get_varint(&p, end, &key), 0);
  cr_assert_eq(key, 5 << 3 | 2);
  cr_assert_eq(get_varint(&p, end, &len), 0);
  cr_assert_eq(len, (uint64_t)(end - p), "the message's length is what follows");
  cr_assert_eq(get_varint(&p, end, &key), 0);
  cr_assert_eq(key, 2 << 3 | 2, "packed first");
  cr_assert_eq(get_varint(&p, end, &len), 0);
  const uint8_t *packed_end = p + len;
  for (size_t i = 0; i < n; i++) {
    uint64_t x;
    cr_assert_eq(get_varint(&p, packed_end, &x), 0);
    cr_expect_eq(x, v[i], "packed %zu: %llu, want %llu", i, (unsigned long long)x, (unsigned long long)v[i]);
  }
  cr_assert_eq(p, packed_end, "the packed length is its varints' bytes");
  for (size_t i = 0; i < n; i++) {
    if (v[i] == 0) continue; /* omitted */
    uint64_t x;
    cr_assert_eq(get_varint(&p, end, &key), 0);
    cr_assert_eq(key, 1 << 3 | 0);
    cr_assert_eq(get_varint(&p, end, &x), 0);
    cr_expect_eq(x, v[i]);
  }
  cr_assert_eq(get_varint(&p, end, &key), 0);
  cr_assert_eq(key, 3 << 3 | 2);
  cr_assert_eq(get_varint(&p, end, &len), 0);
  cr_expect_eq(len, 0);
  cr_expect_eq(p, end);
  dnt__pb_release(&inner);
  dnt__pb_release(&outer);
}
