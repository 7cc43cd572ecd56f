/* test-gcdump.c: heap snapshots from the runtime's heap walk (issue 24, first part). The sample's
 * --heap N:K builds a heap whose shape is known (tests/targets/sample/HeapWork.cs): N
 * Sample.CacheEntry objects each owning a byte[] of K bytes, 10 Sample.Finalizable, one
 * Sample.TableValue. `dntrace gcdump -p` and a recorded file both count them exactly; traces written
 * here hold the walk's checks (a lost event, references that do not add up, a walk cut short, no
 * walk) to one line and exit 1, no report. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../lib/env-cr.h"
#include "../lib/files-cr.h"
#include "../lib/ntr-writer.h"
#include "../lib/record-cr.h"
#include "../lib/run.h"
#include "../lib/target-cr.h"
#include "../lib/target.h"

#define ENTRIES "3000"
#define BYTES "500"

/* The known answers of the sample's --heap 3000:500, held to a JSON report (sys.argv[1]). */
static const char *known =
    "import json, sys\n"
    "d = json.load(open(sys.argv[1]))\n"
    "assert d['state'] == 'complete', d['state']\n"
    "t = {x['type']: x for x in d['types']}\n"
    "assert t['Sample.CacheEntry']['count'] == 3000, t.get('Sample.CacheEntry')\n"
    "assert t['Sample.Finalizable']['count'] == 10, t.get('Sample.Finalizable')\n"
    "assert t['Sample.TableValue']['count'] == 1, t.get('Sample.TableValue')\n"
    "b = t['System.Byte[]']\n"
    "assert b['count'] >= 3000 and b['bytes'] >= 3000 * 500, b\n"
    "assert sum(x['count'] for x in d['types']) == d['objects']\n"
    "assert sum(x['bytes'] for x in d['types']) == d['bytes']\n"
    "assert d['references'] >= 3000 and d['roots'] > 0, d\n"
    /* retained: the cache's array keeps its entries and their arrays alive, but the first entry's
     * array, which a pinning handle holds too: (bytes of the 2,999 arrays) = 2,999 x one array's */
    "e, a = t['Sample.CacheEntry'], t['Sample.CacheEntry[]']\n"
    "rest = a['retainedBytes'] - a['bytes'] - e['bytes']\n"
    "assert rest % 2999 == 0 and 500 <= rest // 2999 < 540, (a, e)\n"
    "assert e['retainedBytes'] == e['bytes'] + rest, (e, rest)\n"
    "assert t['Sample.TableValue']['retainedBytes'] == t['Sample.TableValue']['bytes']\n";

static void start_heap(dnt_target *t) {
  DNT_REQUIRE_TARGET();
  require_python();
  const char *const args[] = {"--heap", ENTRIES ":" BYTES, "--no-cpu", "--no-blocking", "--no-alloc",
                              "--no-exceptions", "--no-counters", NULL};
  dnt_target_opts o = {.mode = DNT_TARGET_PLAIN, .args = args, .wait_socket = 1, .timeout_ms = DNT_HANG_MS};
  char err[512];
  cr_assert_eq(dnt_target_start(t, &o, err, sizeof err), 0, "%s", err);
}

/* A live process: the session ends with the walk's collection, the counts are the heap's. */
Test(gcdump, a_process_heap_counts_are_exact, .timeout = 120) {
  dnt_target t;
  start_heap(&t);
  char dir[] = "/tmp/dnt-gcdump-XXXXXX", out[64], pid[16];
  cr_assert(mkdtemp(dir));
  snprintf(out, sizeof out, "%s/heap.json", dir);
  snprintf(pid, sizeof pid, "%d", (int)t.pid);
  struct dnt_run r;
  cr_assert_eq(dnt_run_dntrace(&r, "gcdump", "-p", pid, "--format", "json", "--top", "100000", "-o", out, NULL), 0,
               "%s", r.err);
  dnt_run_free(&r);
  expect_python(known, out, NULL);
  /* dotnet-gcdump's verb, and the text table: the cache's entries on their row */
  cr_assert_eq(dnt_run_dntrace(&r, "gcdump", "report", "-p", pid, "--top", "100000", NULL), 0, "%s", r.err);
  cr_expect(strstr(r.out, "(complete)"), "%s", r.out);
  cr_expect(strstr(r.out, "         3000  Sample.CacheEntry\n"), "%s", r.out);
  dnt_run_free(&r);
  dnt_target_stop(&t);
  unlink(out);
  rmdir(dir);
}

/* A trace recorded with collect's gc-heap-snapshot profile gives the same answers. */
Test(gcdump, a_recorded_walk_reads_the_same, .timeout = 120) {
  dnt_target t;
  start_heap(&t);
  char dir[] = "/tmp/dnt-gcdump-XXXXXX", trace[64], out[64], pid[16];
  cr_assert(mkdtemp(dir));
  snprintf(trace, sizeof trace, "%s/heap.nettrace", dir);
  snprintf(out, sizeof out, "%s/heap.json", dir);
  snprintf(pid, sizeof pid, "%d", (int)t.pid);
  struct dnt_run r;
  /* the walk happens as the session starts; 2 s holds its end */
  cr_assert_eq(dnt_run_dntrace(&r, "collect", "-p", pid, "--profile", "gc-heap-snapshot", "--duration", "2s", "-o",
                               trace, NULL),
               0, "%s", r.err);
  dnt_run_free(&r);
  dnt_target_stop(&t);
  cr_assert_eq(dnt_run_dntrace(&r, "gcdump", trace, "--format", "json", "--top", "100000", "-o", out, NULL), 0, "%s",
               r.err);
  dnt_run_free(&r);
  expect_python(known, out, NULL);
  unlink(trace);
  unlink(out);
  rmdir(dir);
}

/* ---- dotnet-gcdump, the reference ----
 * Microsoft's dotnet-gcdump (NuGet, installed by ./bootstrap.sh into build-tools/dotnet-tools, or
 * $DNT_DOTNET_TOOLS) walks the same quiescent --heap process: every Sample.* type has the same
 * object count in both reports. Its rows are "BYTES COUNT TYPE[ (Bytes > N)]  [MODULE]", a type
 * split over rows by its objects' sizes; the walks differ in the objects the sessions themselves
 * leave in the runtime, not in the sample's. */

static const char *gcdump_tool(void) {
  static char path[4200];
  const char *dir = getenv("DNT_DOTNET_TOOLS"), *src = getenv("DNT_SRCDIR");
  if (dir && *dir) snprintf(path, sizeof path, "%s/dotnet-gcdump", dir);
  else snprintf(path, sizeof path, "%s/build-tools/dotnet-tools/dotnet-gcdump", src ? src : ".");
  if (access(path, X_OK) != 0) {
    if (in_ci()) cr_assert_fail("no dotnet-gcdump (CI=true: ./bootstrap.sh deps installs it): %s", path);
    cr_skip_test("no dotnet-gcdump (./bootstrap.sh deps installs it): %s", path);
  }
  return path;
}

static const char *compare_py =
    "import json, re, sys\n"
    "ours = {t['type']: t['count'] for t in json.load(open(sys.argv[1]))['types']}\n"
    "theirs = {}\n"
    "for line in open(sys.argv[2]):\n"
    "    m = re.match(r'\\s*[\\d,]+\\s+([\\d,]+)\\s+(\\S.*?)(?: \\(Bytes > \\w+\\))?\\s+\\[[^\\]]*\\]\\s*$', line)\n"
    "    if m: theirs[m.group(2)] = theirs.get(m.group(2), 0) + int(m.group(1).replace(',', ''))\n"
    "mine = sorted(k for k in set(ours) | set(theirs) if k.startswith('Sample.'))\n"
    "assert 'Sample.CacheEntry' in mine and theirs.get('Sample.CacheEntry') == 3000, theirs.get('Sample.CacheEntry')\n"
    "bad = [(k, ours.get(k), theirs.get(k)) for k in mine if ours.get(k) != theirs.get(k)]\n"
    "assert not bad, bad\n"
    "print(len(mine), 'Sample types alike')\n";

Test(gcdump, sample_types_count_as_dotnet_gcdump_counts, .timeout = 240) {
  const char *tool = gcdump_tool();
  dnt_target t;
  start_heap(&t);
  char dir[] = "/tmp/dnt-gcdump-XXXXXX", ours[64], theirs[64], pid[16], cmd[8400];
  cr_assert(mkdtemp(dir));
  snprintf(ours, sizeof ours, "%s/ours.json", dir);
  snprintf(theirs, sizeof theirs, "%s/theirs.txt", dir);
  snprintf(pid, sizeof pid, "%d", (int)t.pid);
  struct dnt_run r;
  cr_assert_eq(dnt_run_dntrace(&r, "gcdump", "-p", pid, "--format", "json", "--top", "100000", "-o", ours, NULL), 0,
               "%s", r.err);
  dnt_run_free(&r);
  snprintf(cmd, sizeof cmd, "DOTNET_CLI_TELEMETRY_OPTOUT=1 '%s' report -p %s > '%s'", tool, pid, theirs);
  char *argv[] = {"/bin/sh", "-c", cmd, NULL};
  cr_assert_eq(dnt_run_argv(&r, argv, NULL, 120000), 0, "dotnet-gcdump: %s", r.err);
  dnt_run_free(&r);
  dnt_target_stop(&t);
  expect_python(compare_py, ours, theirs, NULL);
  unlink(ours);
  unlink(theirs);
  rmdir(dir);
}

/* ---- walks written here ---- */

#define RUNTIME "Microsoft-Windows-DotNETRuntime"

struct walk {
  ntrw w;
  uint32_t seq;
  uint64_t ts;
};

static void put(struct walk *k, uint32_t md, const uint8_t *p, uint32_t n) {
  ntrw_ev e = {.metadata_id = md, .seq = ++k->seq, .thread = 5, .capture_thread = 5, .ts = k->ts += 10,
               .payload = p, .payload_size = n};
  ntrw_event(&k->w, &e);
}

static void le(uint8_t *p, uint64_t v, int n) {
  for (int i = 0; i < n; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* A trace of process pid with the metadata of the walk's events (1 GCStart, 2 GCEnd, 3 BulkType,
 * 4 BulkNode, 5 BulkEdge, 6 BulkRootEdge), its event block begun. */
static void walk_begin(struct walk *k, uint32_t pid) {
  memset(k, 0, sizeof *k);
  ntrw_trace t = {.sync_qpc = 1000, .freq = 1000000, .pointer_size = 8, .pid = pid, .cpus = 1, .sampling_ns = 1000000};
  ntrw_md md[] = {
      {.id = 1, .provider = RUNTIME, .event_id = 1, .version = 2, .level = 4, .keywords = 1, .name = "", .opcode = -1, .no_fields = 1},
      {.id = 2, .provider = RUNTIME, .event_id = 2, .version = 1, .level = 4, .keywords = 1, .name = "", .opcode = -1, .no_fields = 1},
      {.id = 3, .provider = RUNTIME, .event_id = 15, .version = 0, .level = 4, .keywords = 0x80000, .name = "", .opcode = -1, .no_fields = 1},
      {.id = 4, .provider = RUNTIME, .event_id = 18, .version = 0, .level = 4, .keywords = 0x100000, .name = "", .opcode = -1, .no_fields = 1},
      {.id = 5, .provider = RUNTIME, .event_id = 19, .version = 0, .level = 4, .keywords = 0x100000, .name = "", .opcode = -1, .no_fields = 1},
      {.id = 6, .provider = RUNTIME, .event_id = 16, .version = 0, .level = 4, .keywords = 0x100000, .name = "", .opcode = -1, .no_fields = 1},
  };
  ntrw_init(&k->w, 0);
  ntrw_trace_hdr(&k->w, &t);
  ntrw_md_begin(&k->w);
  for (size_t i = 0; i < sizeof md / sizeof md[0]; i++) ntrw_metadata(&k->w, &md[i]);
  ntrw_block_end(&k->w);
  ntrw_ev_begin(&k->w, 1);
  k->ts = 2000;
}

/* GCStart v2: Count 7, Depth 2, Reason 1 (induced), Type 0 (blocking), ClrInstanceID and
 * ClientSequenceNumber 0. */
static void gc_start(struct walk *k) {
  uint8_t p[26] = {0};
  le(p, 7, 4), le(p + 4, 2, 4), le(p + 8, 1, 4), le(p + 12, 0, 4);
  put(k, 1, p, sizeof p);
}

/* GCEnd v1: Count 7, Depth 2, ClrInstanceID 0. */
static void gc_end(struct walk *k) {
  uint8_t p[10] = {0};
  le(p, 7, 4), le(p + 4, 2, 4);
  put(k, 2, p, sizeof p);
}

/* The trace ended and saved to path. */
static void walk_end(struct walk *k, const char *path) {
  ntrw_block_end(&k->w);
  ntrw_end(&k->w);
  dnt_write_file(path, k->w.buf, k->w.len);
  ntrw_release(&k->w);
}

/* GCStart (Count 7, Depth 2, Reason 1 induced, Type 0 blocking; none when nodes < 0), a type, `nodes` node events of
 * one object with `edges` references each (their Index from 0, but skip_node leaves one out),
 * one edge event per node with `edges_sent` references, and GCEnd unless cut. */
static void write_walk(const char *path, int nodes, int edges, int edges_sent, int skip_node, int cut) {
  struct walk k;
  walk_begin(&k, 4545);
  uint8_t p[256];
  if (nodes >= 0) gc_start(&k); /* else no collection at all: no walk */
  /* BulkType: Count 1, ClrInstanceID, then TypeID 0x100, ModuleID, TypeNameID, Flags,
   * CorElementType, "T\0" in UTF-16, TypeParameterCount 0 */
  memset(p, 0, sizeof p);
  le(p, 1, 4), le(p + 6, 0x100, 8), p[31] = 'T', le(p + 35, 0, 4);
  put(&k, 3, p, 39);
  for (int i = 0, index = 0; i < nodes; i++, index++) {
    if (i == skip_node) index++; /* an event of the sequence never comes */
    memset(p, 0, sizeof p);
    le(p, (uint64_t)index, 4), le(p + 4, 1, 4);
    le(p + 10, 0x10000 + 0x20 * (uint64_t)i, 8), le(p + 18, 24, 8), le(p + 26, 0x100, 8), le(p + 34, (uint64_t)edges, 8);
    put(&k, 4, p, 42);
    memset(p, 0, sizeof p);
    le(p, (uint64_t)i, 4), le(p + 4, (uint64_t)edges_sent, 4);
    for (int e = 0; e < edges_sent; e++) le(p + 10 + 12 * e, 0x10000, 8);
    put(&k, 5, p, 10 + 12 * (uint32_t)edges_sent);
  }
  if (!cut) gc_end(&k);
  walk_end(&k, path);
}

static void expect_gcdump(const char *path, int status, const char *what) {
  struct dnt_run r;
  cr_assert_eq(dnt_run_dntrace(&r, "gcdump", path, NULL), status, "%s: %s%s", what, r.out, r.err);
  if (status == 0) {
    cr_expect(strstr(r.out, "Heap snapshot: 4 objects, 96 bytes, 8 references, 0 roots (complete)\n"), "%s", r.out);
    /* no root: nothing reached, nothing retained */
    cr_expect(strstr(r.out, "\n0 objects reached from the roots;"), "%s", r.out);
    cr_expect(strstr(r.out, "             96               0            4  T\n"), "%s", r.out);
  } else {
    cr_expect_str_eq(r.out, "", "no report");
    cr_expect(strstr(r.err, what), "'%s' in: %s", what, r.err);
    cr_expect_eq(strchr(r.err, '\n'), strrchr(r.err, '\n'), "one line: %s", r.err);
  }
  dnt_run_free(&r);
}

Test(gcdump, a_walk_is_complete_or_no_report) {
  char dir[] = "/tmp/dnt-gcdump-XXXXXX", path[64];
  cr_assert(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/w.nettrace", dir);
  write_walk(path, 4, 2, 2, -1, 0);
  expect_gcdump(path, 0, "a whole walk");
  write_walk(path, 4, 2, 2, 2, 0);
  expect_gcdump(path, 1, "the heap walk is incomplete: 1 of its object and reference events were lost");
  write_walk(path, 4, 2, 1, -1, 0);
  expect_gcdump(path, 1, "its references do not add up to what its objects said");
  write_walk(path, 4, 2, 2, -1, 1);
  expect_gcdump(path, 1, "the trace ends before its garbage collection does");
  write_walk(path, -1, 0, 0, -1, 1);
  expect_gcdump(path, 1, "no heap walk in this trace");
  unlink(path);
  rmdir(dir);
}

/* ---- retained sizes, by construction ----
 * Types TA..TF; objects A (100 bytes, TA), B (10, TB), C (20, TC), D (30, TD), E (40, TE),
 * F (50, TF), G (60, TA), H (5, TB); references A→B, A→C, B→D, B→H, C→D, D→E, F→E, G→A; roots A
 * and F, and a weak one to G (left out, so G is garbage). Dominators: D by A (reached through B
 * and through C), E by the roots alone (through A and through F), H by B. Retained: A 100+15+20+30
 * = 165, B 10+5 = 15, C 20, D 30, E 40, F 50, G nothing. Per type: TA 165 (G retains nothing),
 * TB 15 (H is B's: counted once), TC 20, TD 30, TE 40, TF 50. */
static void write_graph(const char *path) {
  struct walk k;
  walk_begin(&k, 4646);
  static uint8_t p[1024];
  gc_start(&k);
  /* the types: TypeID 0x100 * (i + 1), named "TA".."TF" */
  size_t n = 6;
  memset(p, 0, sizeof p);
  le(p, 6, 4);
  for (int i = 0; i < 6; i++) {
    le(p + n, 0x100 * (uint64_t)(i + 1), 8), n += 25;
    p[n] = 'T', p[n + 2] = (uint8_t)('A' + i), n += 6; /* "T?" and its NUL, UTF-16 */
    le(p + n, 0, 4), n += 4;
  }
  put(&k, 3, p, (uint32_t)n);
  static const struct { uint64_t size, type, edges; } obj[8] = {
      {100, 1, 2}, {10, 2, 2}, {20, 3, 1}, {30, 4, 1}, {40, 5, 0}, {50, 6, 1}, {60, 1, 1}, {5, 2, 0}};
  memset(p, 0, sizeof p);
  le(p, 0, 4), le(p + 4, 8, 4);
  for (int i = 0; i < 8; i++) {
    uint8_t *v = p + 10 + 32 * i;
    le(v, 0x1000 * (uint64_t)(i + 1), 8), le(v + 8, obj[i].size, 8), le(v + 16, 0x100 * obj[i].type, 8);
    le(v + 24, obj[i].edges, 8);
  }
  put(&k, 4, p, 10 + 32 * 8);
  /* A→B, A→C, B→D, B→H, C→D, D→E, F→E, G→A: targets by address (A is 0x1000 .. H 0x8000) */
  static const uint64_t to[8] = {0x2000, 0x3000, 0x4000, 0x8000, 0x4000, 0x5000, 0x5000, 0x1000};
  memset(p, 0, sizeof p);
  le(p, 0, 4), le(p + 4, 8, 4);
  for (int i = 0; i < 8; i++) le(p + 10 + 12 * i, to[i], 8);
  put(&k, 5, p, 10 + 12 * 8);
  /* roots: A and F strong (a handle, kind 2), G weak (flag 2) */
  static const uint64_t rooted[3] = {0x1000, 0x6000, 0x7000};
  memset(p, 0, sizeof p);
  le(p, 0, 4), le(p + 4, 3, 4);
  for (int i = 0; i < 3; i++) {
    uint8_t *v = p + 10 + 21 * i;
    le(v, rooted[i], 8), v[8] = 2, le(v + 9, i == 2 ? 2 : 0, 4), le(v + 13, 0x900 + (uint64_t)i, 8);
  }
  put(&k, 6, p, 10 + 21 * 3);
  gc_end(&k);
  walk_end(&k, path);
}

Test(gcdump, retained_sizes_follow_the_dominator_tree) {
  require_python();
  char dir[] = "/tmp/dnt-gcdump-XXXXXX", path[64], out[64];
  cr_assert(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/g.nettrace", dir);
  snprintf(out, sizeof out, "%s/g.json", dir);
  write_graph(path);
  struct dnt_run r;
  cr_assert_eq(dnt_run_dntrace(&r, "gcdump", path, "--format", "json", "-o", out, NULL), 0, "%s", r.err);
  dnt_run_free(&r);
  expect_python("import json, sys\n"
                "d = json.load(open(sys.argv[1]))\n"
                "assert d['state'] == 'complete' and d['objects'] == 8 and d['reachable'] == 7, d\n"
                "got = {t['type']: (t['count'], t['bytes'], t['retainedBytes']) for t in d['types']}\n"
                "want = {'TA': (2, 160, 165), 'TB': (2, 15, 15), 'TC': (1, 20, 20), 'TD': (1, 30, 30),\n"
                "        'TE': (1, 40, 40), 'TF': (1, 50, 50)}\n"
                "assert got == want, got\n",
                out, NULL);
  unlink(path);
  unlink(out);
  rmdir(dir);
}
