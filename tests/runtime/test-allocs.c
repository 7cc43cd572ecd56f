/* dntrace allocs and analyze/'s allocation analysis:
 *   - the sample allocating a known type, 200 MB of it (at 100 MB/s, or slower when the machine
 *     is busy), recorded from its first instruction to its exit (collect -- CMD): the bytes dntrace
 *     estimates for that type are within 10% of
 *     what the sample allocated, as the runtime itself counted them in the sample
 *     (GC.GetAllocatedBytesForCurrentThread around each call of AllocWork.Allocate), from
 *     GCAllocationTick and from .NET 10's AllocationSampled (two recordings: with the sampling
 *     keyword on, the runtime writes no ticks); the allocating stack is AllocWork.Allocate's; the
 *     folded stacks through Allocate, the flame graph and go tool pprof (alloc_space) carry them;
 *   - the corpus trace with allocation ticks against TraceEvent's decoding of the same events
 *     (tests/bench-traceevent --mode allocs): per type, the same events and bytes;
 *   - a live process (-p), recorded until the sample allocated 100 MB while the session ran: the
 *     sample's type and its stack found, its bytes those the sample counted during the session;
 *   - a trace without allocation events says so in one line; bad options are usage errors. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../lib/analysis-feed.h"
#include "../lib/env-cr.h"
#include "../lib/run.h"
#include "../lib/background-cr.h"
#include "../lib/target-cr.h"

/* ---- the text report's words, on ticks made here ---- */

/* One GCAllocationTick V4 of `bytes` of type on the heap `kind` (0 small, 1 large). */
static void tick(struct feed *f, double ms, const char *type, uint32_t kind, uint64_t bytes) {
  put32(f, (uint32_t)bytes), put32(f, kind), put16(f, 0), put64(f, bytes), put64(f, 0x5000);
  putstr(f, type), put32(f, 0), put64(f, 0x6000), put64(f, 128);
  send(f, 10, 4, ms, 77);
}

/* A type some of whose bytes went to the large object heap says how many (issue 28 item 13: it
 * was called "(large objects)" when any were), in a row of their own; one type is "1 type". */
Test(allocs_rules, large_object_share_and_one_type) {
  struct dnt_schema *schema = schema_or_fail();
  struct dnt_allocs_analysis *a = dnt_allocs_analysis_new(schema, DNT_ALLOCS_TICK);
  cr_assert(a);
  ntr_callbacks cb;
  dnt_allocs_analysis_callbacks(&cb);
  struct feed f;
  feed_init(&f, &cb, a, schema);
  tick(&f, 1, "System.Byte[]", 0, 100000);
  tick(&f, 2, "System.Byte[]", 1, 300000);
  dnt_allocs_analysis_finish(a);
  char *text = NULL;
  size_t len = 0;
  FILE *fp = open_memstream(&text, &len);
  cr_assert(fp);
  cr_assert_eq(dnt_allocs_write_text(fp, a, 10, 0), 0);
  fclose(fp);
  /* the large objects' share a row of its own under the type's (issue 30 item 11: the type's
   * object count read as the large objects') */
  cr_expect(strstr(text, "System.Byte[]\n"), "%s", text);
  const char *row = strstr(text, "System.Byte[]\n");
  cr_expect(row && strstr(row, "  75.00%          1 ") && strstr(row, "    on the large object heap\n"), "%s", text);
  cr_expect(strstr(text, ", 1 type, "), "%s", text);
  free(text);
  /* by stack, and as JSON: these events carry no stack, their stacks are their type alone
   * (UBSan once saw a null pointer offset there, fuzz-allocs) */
  text = NULL;
  fp = open_memstream(&text, &len);
  cr_assert(fp);
  cr_assert_eq(dnt_allocs_write_text(fp, a, 10, 1), 0);
  cr_assert_eq(dnt_allocs_write_json(fp, a, 10), 0);
  fclose(fp);
  cr_expect(strstr(text, "400000 bytes (100.00%), 2 samples, from ?\n"), "%s", text);
  free(text);
  dnt_allocs_analysis_free(a);
  dnt_schema_free(schema);
}

/* ---- the sample, recorded from start to exit ---- */

/* A trace of the sample allocating 200 MB of `type` (at 100 MB/s, or slower when it cannot) then
 * exiting, with the runtime provider's keywords `keywords` (verbose); *allocated: the bytes the
 * sample says AllocWork.Allocate allocated (its last line). path: caller's, 64 bytes. */
static void record_sample(const char *keywords, const char *type, char *dir, char *path, double *allocated) {
  DNT_REQUIRE_TARGET();
  cr_assert(mkdtemp(dir));
  snprintf(path, 64, "%s/allocs.nettrace", dir);
  char providers[128], alloc[128];
  snprintf(providers, sizeof providers, "Microsoft-Windows-DotNETRuntime:%s:5", keywords);
  snprintf(alloc, sizeof alloc, "%s:100000000", type);
  struct dnt_run r;
  dnt_run_dntrace(&r, "collect", "--show-child-io", "--providers", providers, "-o", path, "--", dnt_target_exe(),
                  "--alloc", alloc, "--alloc-total", "200000000", "--no-cpu", "--no-blocking", "--no-exceptions",
                  "--no-counters", NULL);
  cr_assert_eq(r.status, 0, "dntrace collect: %s", r.err);
  /* the last "allocated TYPE N" line: printed once the workload has stopped */
  *allocated = -1;
  char prefix[96];
  snprintf(prefix, sizeof prefix, "allocated %s ", type);
  for (const char *l = r.out; (l = strstr(l, prefix)); l += strlen(prefix)) *allocated = atof(l + strlen(prefix));
  cr_assert_geq(*allocated, 200e6, "the sample did not allocate its 200 MB (%.0f bytes):\n%s", *allocated, r.out);
  dnt_run_free(&r);
}

static void remove_trace(char *dir, char *path) {
  unlink(path);
  rmdir(dir);
}

/* The "bytes" of type `name` in dntrace's JSON (the first "type" entry of that name), or -1. */
static double json_type_bytes(const char *json, const char *name) {
  char key[160];
  snprintf(key, sizeof key, "{\"type\":\"%s\",\"bytes\":", name);
  const char *p = strstr(json, key);
  return p ? atof(p + strlen(key)) : -1;
}

static void expect_within_10pct(double got, double truth, const char *what) {
  cr_expect(fabs(got - truth) <= 0.10 * truth, "%s: %.0f bytes estimated, the sample allocated %.0f (%+.1f%%)", what,
            got, truth, 100.0 * (got - truth) / truth);
}

/* json: the first stack (most bytes) is the sample's, from AllocWork.Allocate. */
static void expect_allocate_first(const char *json) {
  const char *stacks = strstr(json, "\"stacks\":[{");
  cr_assert(stacks, "no stacks in %s", json);
  const char *first = strstr(stacks, "\"firstUserFrame\":");
  cr_assert(first);
  cr_expect(strncmp(first, "\"firstUserFrame\":\"Sample!Sample.AllocWork.Allocate\"", 50) == 0,
            "the heaviest stack's first user frame: %.120s", first);
}

Test(allocs_sample, allocation_ticks_give_the_bytes_the_sample_allocated, .timeout = 120) {
  char dir[] = "/tmp/dnt-allocs-XXXXXX", path[64];
  double truth;
  record_sample("0x11", "Sample.Payload", dir, path, &truth);
  struct dnt_run r;
  cr_assert_eq(dnt_run_dntrace(&r, "allocs", path, "--format", "json", NULL), 0, "%s", r.err);
  cr_expect(strstr(r.out, "\"source\":\"GCAllocationTick\""), "%.300s", r.out);
  expect_within_10pct(json_type_bytes(r.out, "Sample.Payload"), truth, "Sample.Payload from GCAllocationTick");
  /* V4 ticks carry the object's size: 64 bytes a Payload */
  const char *objects = strstr(strstr(r.out, "{\"type\":\"Sample.Payload\""), "\"objects\":");
  cr_assert(objects);
  expect_within_10pct(atof(objects + 10) * 64, truth, "Sample.Payload objects x 64 bytes");
  expect_allocate_first(r.out);
  dnt_run_free(&r);
  remove_trace(dir, path);
}

Test(allocs_sample, allocation_samples_give_the_bytes_the_sample_allocated, .timeout = 120) {
  char dir[] = "/tmp/dnt-allocs-XXXXXX", path[64];
  double truth;
  record_sample("0x80000000011", "byte[]", dir, path, &truth);
  struct dnt_run r;
  cr_assert_eq(dnt_run_dntrace(&r, "allocs", path, "--format", "json", NULL), 0, "%s", r.err);
  cr_expect(strstr(r.out, "\"source\":\"AllocationSampled\""), "%.300s", r.out);
  /* about 2000 samples for 200 MB: a standard error near 2%, so 10% is far out */
  expect_within_10pct(json_type_bytes(r.out, "System.Byte[]"), truth, "System.Byte[] from AllocationSampled");
  expect_allocate_first(r.out);
  dnt_run_free(&r);
  /* the text table names the type and the source */
  cr_assert_eq(dnt_run_dntrace(&r, "allocs", path, NULL), 0, "%s", r.err);
  cr_expect(strstr(r.out, "System.Byte[]") && strstr(r.out, "AllocationSampled events"), "%s", r.out);
  dnt_run_free(&r);
  /* asked for ticks, this trace has none: said in one line, exit 1 */
  cr_expect_eq(dnt_run_dntrace(&r, "allocs", path, "--source", "tick", NULL), 1);
  cr_expect(strstr(r.err, "no allocation events") && !strchr(strchr(r.err, '\n') + 1, '\n'), "%s", r.err);
  dnt_run_free(&r);
  remove_trace(dir, path);
}

/* The allocation flame graph: folded stacks through AllocWork.Allocate weigh (integer bytes)
 * what the sample allocated; the SVG names Allocate and says bytes; speedscope's unit is bytes;
 * the JSON parses, its shares sum to 100%. */
Test(allocs_sample, flame_graph_and_formats_carry_the_allocating_stack, .timeout = 120) {
  require_python();
  char dir[] = "/tmp/dnt-allocs-XXXXXX", path[64];
  double truth;
  record_sample("0x11", "string", dir, path, &truth);
  struct dnt_run r;
  cr_assert_eq(dnt_run_dntrace(&r, "allocs", path, "--format", "folded", NULL), 0, "%s", r.err);
  double through_allocate = 0, as_strings = 0;
  size_t lines = 0, typed = 0;
  for (char *l = r.out; *l; lines++) {
    char *nl = strchr(l, '\n');
    if (!nl) break;
    *nl = 0;
    char *sp = strrchr(l, ' ');
    if (sp && strstr(l, ";Sample!Sample.AllocWork.Allocate")) through_allocate += atof(sp + 1);
    /* every stack ends with the type allocated, as PerfView's GC Heap Alloc view ends them ("Type
     * System.String": folded stacks write a frame's spaces as '_') */
    if (sp) {
      *sp = 0;
      const char *leaf = strrchr(l, ';');
      typed += leaf && strncmp(leaf, ";Type_", 6) == 0;
      if (leaf && strcmp(leaf, ";Type_System.String") == 0 && strstr(l, ";Sample!Sample.AllocWork.Allocate"))
        as_strings += atof(sp + 1);
    }
    l = nl + 1;
  }
  expect_within_10pct(through_allocate, truth, "folded stacks through AllocWork.Allocate");
  expect_within_10pct(as_strings, truth, "folded stacks through AllocWork.Allocate ending in Type System.String");
  cr_expect_eq(typed, lines, "%zu of %zu stacks end with their type", typed, lines);
  dnt_run_free(&r);

  char svg[96], json[96], ss[96];
  snprintf(svg, sizeof svg, "%s/a.svg", dir);
  snprintf(json, sizeof json, "%s/a.json", dir);
  snprintf(ss, sizeof ss, "%s/a.speedscope.json", dir);
  cr_assert_eq(dnt_run_dntrace(&r, "allocs", path, "--format", "flamegraph", "-o", svg, NULL), 0, "%s", r.err);
  dnt_run_free(&r);
  cr_assert_eq(dnt_run_dntrace(&r, "allocs", path, "--format", "json", "-o", json, NULL), 0, "%s", r.err);
  dnt_run_free(&r);
  cr_assert_eq(dnt_run_dntrace(&r, "allocs", path, "--format", "speedscope", "-o", ss, NULL), 0, "%s", r.err);
  dnt_run_free(&r);
  const char *py =
      "import json, sys\n"
      "svg = open(sys.argv[1]).read()\n"
      "assert 'Sample.AllocWork.Allocate' in svg and 'allocated bytes' in svg, 'svg'\n"
      "d = json.load(open(sys.argv[2]))\n"
      "assert d['source'] == 'GCAllocationTick', d['source']\n"
      "assert abs(sum(t['percent'] for t in d['types']) - 100) < 0.01, 'shares'\n"
      "assert d['types'][0]['type'] == 'System.String', d['types'][0]\n"
      "s = json.load(open(sys.argv[3]))\n"
      "assert all(p['unit'] == 'bytes' for p in s['profiles']), 'unit'\n";
  expect_python(py, svg, json, ss, NULL);
  unlink(svg);
  unlink(json);
  unlink(ss);
  remove_trace(dir, path);
}

/* pprof, read by its real consumer: go tool pprof sees alloc_space in bytes, and AllocWork.Allocate
 * at (cumulatively) the bytes the sample allocated. */
Test(allocs_sample, pprof_says_alloc_space_of_allocate, .timeout = 120) {
  require_go();
  char dir[] = "/tmp/dnt-allocs-XXXXXX", path[64], pb[96], home[128], cache[128], tmp[128];
  double truth;
  record_sample("0x11", "Sample.Payload", dir, path, &truth);
  snprintf(pb, sizeof pb, "%s/a.pb.gz", dir);
  struct dnt_run r;
  cr_assert_eq(dnt_run_dntrace(&r, "allocs", path, "--format", "pprof", "-o", pb, NULL), 0, "%s", r.err);
  dnt_run_free(&r);
  snprintf(home, sizeof home, "HOME=%s", dir);
  snprintf(cache, sizeof cache, "GOCACHE=%s/gocache", dir);
  snprintf(tmp, sizeof tmp, "PPROF_TMPDIR=%s", dir);
  const char *env[] = {home, cache, tmp, NULL};
  char *const argv[] = {"/usr/bin/env", "go", "tool", "pprof", "-sample_index=alloc_space", "-top", "-unit=B", pb, NULL};
  cr_assert_eq(dnt_run_argv(&r, argv, env, 60000), 0, "%s", r.err);
  cr_expect(strstr(r.out, "Type: alloc_space"), "%s", r.out);
  /* "flat flat% sum% cum cum% name": the cumulative bytes of Allocate's line */
  double cum = -1;
  for (char *l = r.out; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
    char flat[32], fp[16], sp[16], c[32], name[256];
    if (sscanf(l, "%31s %15s %15s %31s %*s %255s", flat, fp, sp, c, name) == 5 &&
        strcmp(name, "Sample!Sample.AllocWork.Allocate") == 0)
      cum = atof(c);
  }
  expect_within_10pct(cum, truth, "go tool pprof: AllocWork.Allocate's alloc_space");
  dnt_run_free(&r);
  unlink(pb);
  char gocache[160];
  snprintf(gocache, sizeof gocache, "rm -rf '%s/gocache' '%s/pprof'", dir, dir);
  if (system(gocache) != 0) fprintf(stderr, "# could not remove %s's go cache\n", dir); /* cr_log_warn would fail the run */
  remove_trace(dir, path);
}

/* ---- a live process ---- */

/* The "allocated Sample.Payload N" lines: the latest N; since the mark, how many, and the N of the
 * second of them. */
struct allocated {
  int marked;
  unsigned after;
  double second, last;
};

static void on_allocated(void *ud, const char *line) {
  struct allocated *a = ud;
  double n;
  if (sscanf(line, "allocated Sample.Payload %lf", &n) != 1) return;
  a->last = n;
  if (a->marked && ++a->after == 2) a->second = n;
}

/* 100 MB allocated since the second line after the mark, whose count was read after the first was
 * printed (after the session began): all of it while the session ran. */
static int allocated_100mb(void *ud) {
  struct allocated *a = ud;
  return a->after >= 2 && a->last >= a->second + 100e6;
}

static int a_line_after(void *ud) { return ((struct allocated *)ud)->after >= 1; }

Test(allocs_sample, live_process_by_pid, .timeout = 300) {
  DNT_REQUIRE_TARGET();
  const char *const args[] = {"--alloc", "Sample.Payload:50000000", "--no-cpu", "--no-blocking", "--no-exceptions",
                              "--no-counters", NULL};
  dnt_target t;
  char pid[32];
  dnt_start_sample(&t, args, pid, sizeof pid);
  struct lines sl = {.fd = t.stdout_fd};
  struct allocated al = {0};
  lines_read(&sl, on_allocated, &al);
  double before = al.last; /* read before the session began */
  struct bg b;
  const char *const dargs[] = {"allocs", "-p", pid, "--format", "json", NULL};
  bg_start(&b, dargs);
  int up = bg_wait_text(&b, "Recording the allocations");
  char *err = slurp(b.err);
  cr_assert(up, "dntrace allocs -p did not start its session (status %d): %s", b.status, err);
  free(err);
  lines_read(&sl, on_allocated, &al);
  al.marked = 1;
  int enough = lines_until(&sl, on_allocated, &al, allocated_100mb);
  double inside = al.last - al.second; /* allocated while the session ran */
  int status = bg_finish(&b, SIGINT);
  char *out = slurp(b.out);
  err = slurp(b.err);
  bg_remove(&b);
  /* a line printed after dntrace returned: what the sample allocated once the session was over */
  lines_read(&sl, on_allocated, &al);
  al.after = 0;
  int after = lines_until(&sl, on_allocated, &al, a_line_after);
  double around = al.last - before; /* allocated from before the session to after it */
  char context[256];
  snprintf(context, sizeof context, "%s", dnt_run_context(t.pid));
  dnt_target_stop(&t);
  cr_assert(enough, "the sample allocated %.0f bytes while dntrace recorded, not 100 MB (%s)", inside, context);
  cr_assert_eq(status, 0, "dntrace allocs -p, stopped by Ctrl+C: status %d: %s", status, err);
  cr_assert(after, "the sample printed nothing after dntrace returned");
  /* .NET 10: the sampled events (the session asks for both kinds) */
  cr_expect(strstr(out, "\"source\":\"AllocationSampled\""), "%.300s", out);
  /* what the sample counted while the session ran, and from before it to after it; some 1000
   * samples (one per 100 KB on average): a standard error near 3%, so 20% is far out */
  double bytes = json_type_bytes(out, "Sample.Payload");
  cr_log_info("allocs -p: Sample.Payload %.0f bytes estimated; the sample allocated %.0f while the session ran, %.0f "
              "around it; %s", bytes, inside, around, context);
  cr_expect(bytes >= 0.8 * inside && bytes <= 1.2 * around,
            "Sample.Payload: %.0f bytes estimated; the sample allocated %.0f while the session surely ran, %.0f from "
            "before it to after it (%s)", bytes, inside, around, context);
  expect_allocate_first(out);
  free(out);
  free(err);
}

/* ---- the corpus, against TraceEvent ---- */

/* TraceEvent's lines "type<TAB>events<TAB>bytes" (--mode allocs) and dntrace's JSON types, by
 * the ticks: every type the same events and bytes. */
Test(allocs_traceevent, corpus_ticks_per_type_as_traceevent_decodes_them, .timeout = 300) {
  char dir[4096], trace[8192];
  corpus_dir(dir, sizeof dir);
  const char *dll = te_oracle_or_skip("the allocation analysis");
  snprintf(trace, sizeof trace, "%s/tbbuck__countercow/runtime-net10-loaded.nettrace", dir);
  struct dnt_run te, r;
  cr_assert_eq(te_run(&te, dll, trace, "allocs"), 0, "%s", te.err);
  cr_assert_eq(dnt_run_dntrace(&r, "allocs", trace, "--source", "tick", "--format", "json", "--top", "100000", NULL),
               0, "%s", r.err);
  size_t types = 0;
  for (char *l = te.out; *l;) {
    char *nl = strchr(l, '\n');
    if (!nl) break;
    *nl = 0;
    char name[1024];
    unsigned long long events;
    double bytes;
    if (sscanf(l, "%1023[^\t]\t%llu\t%lf", name, &events, &bytes) == 3) {
      types++;
      char key[1100];
      snprintf(key, sizeof key, "{\"type\":\"%s\",\"bytes\":", name);
      const char *p = strstr(r.out, key);
      cr_expect(p, "type %s (TraceEvent: %llu ticks) missing from dntrace's", name, events);
      if (p) {
        cr_expect(fabs(atof(p + strlen(key)) - bytes) < 0.5, "%s: %.0f bytes, TraceEvent %.0f", name,
                  atof(p + strlen(key)), bytes);
        const char *s = strstr(p, "\"samples\":");
        cr_expect(s && strtoull(s + 10, NULL, 10) == events, "%s: %llu ticks in TraceEvent", name, events);
      }
    }
    l = nl + 1;
  }
  cr_expect_geq(types, 20, "%zu types from TraceEvent:\n%s", types, te.out);
  /* and no type TraceEvent does not have */
  size_t mine = 0;
  for (const char *p = r.out; (p = strstr(p, "{\"type\":")); p++) mine++;
  cr_expect_eq(mine, types, "dntrace lists %zu types, TraceEvent %zu", mine, types);
  dnt_run_free(&te);
  dnt_run_free(&r);
}

/* ---- no allocation events, and the command line ---- */

Test(allocs_cli, a_trace_without_allocation_events_says_so_in_one_line) {
  char dir[4096], trace[8192];
  corpus_dir(dir, sizeof dir);
  /* a .NET 5 trace of type, method and GC-handle events, its allocations a profiler's own */
  snprintf(trace, sizeof trace, "%s/shirhatti__Nettrace/allocTrace.nettrace", dir);
  struct dnt_run r;
  cr_expect_eq(dnt_run_dntrace(&r, "allocs", trace, NULL), 1);
  cr_expect_str_empty(r.out);
  const char *nl = strchr(r.err, '\n');
  cr_expect(strstr(r.err, "no allocation events in this trace") && nl && !nl[1], "%s", r.err);
  dnt_run_free(&r);
}

Test(allocs_cli, bad_options_are_usage_errors) {
  struct dnt_run r;
  cr_expect_eq(dnt_run_dntrace(&r, "allocs", NULL), 2);
  dnt_run_free(&r);
  cr_expect_eq(dnt_run_dntrace(&r, "allocs", "x.nettrace", "--by", "size", NULL), 2);
  cr_expect(strstr(r.err, "--by: 'size' is not type or stack"), "%s", r.err);
  dnt_run_free(&r);
  cr_expect_eq(dnt_run_dntrace(&r, "allocs", "x.nettrace", "--source", "all", NULL), 2);
  dnt_run_free(&r);
  cr_expect_eq(dnt_run_dntrace(&r, "allocs", "x.nettrace", "--format", "chromium", NULL), 2);
  dnt_run_free(&r);
  cr_expect_eq(dnt_run_dntrace(&r, "allocs", "x.nettrace", "--duration", "3s", NULL), 2);
  dnt_run_free(&r);
  cr_expect_eq(dnt_run_dntrace(&r, "allocs", "/nonexistent.nettrace", NULL), 1);
  cr_expect(strstr(r.err, "/nonexistent.nettrace"), "%s", r.err);
  dnt_run_free(&r);
}
