/* test-gcdump.c: heap snapshots from the runtime's heap walk (issue 24), and .gcdump files. The sample's
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

#include "../lib/heap-walk-cr.h"

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

/* From beside a container: the sample in a PID namespace of its own (its socket reached through
 * /proc/PID/root), snapshot to dotnet-gcdump's default name in the current directory, with the
 * pid the user gave (not the one inside the namespace). */
Test(gcdump, a_process_in_its_own_pid_namespace, .timeout = 120) {
  dnt_target t;
  start_heap_in(&t, ENTRIES ":" BYTES, DNT_TARGET_PIDNS);
  cr_assert_neq(t.pid, t.ns_pid);
  char *dir = dnt_temp_dir("dnt-gcdump"), pid[16], cmd[4400], out[4300];
  snprintf(pid, sizeof pid, "%d", (int)t.pid);
  cr_assert_eq(chdir(dir), 0);
  struct dnt_run r;
  cr_assert_eq(dnt_run_dntrace(&r, "gcdump", "collect", "-p", pid, NULL), 0, "%s", r.err);
  dnt_run_free(&r);
  dnt_target_stop(&t);
  /* YYYYMMDD_HHMMSS_PID.gcdump, the only file there */
  snprintf(cmd, sizeof cmd, "ls '%s'", dir);
  char *argv[] = {"/bin/sh", "-c", cmd, NULL};
  cr_assert_eq(dnt_run_argv(&r, argv, NULL, 10000), 0);
  char name[256];
  int year, n = 0;
  cr_assert(sscanf(r.out, "%4d%*4d_%*6d_%255[0-9].gcdump%n", &year, name, &n) == 2 && n && strcmp(name, pid) == 0,
            "dotnet-gcdump's name with pid %s: %s", pid, r.out);
  snprintf(out, sizeof out, "%s/heap.json", dir);
  char file[4400];
  snprintf(file, sizeof file, "%s/%.*s", dir, n, r.out);
  dnt_run_free(&r);
  cr_assert_eq(dnt_run_dntrace(&r, "gcdump", file, "--format", "json", "--top", "100000", "-o", out, NULL), 0, "%s",
               r.err);
  dnt_run_free(&r);
  expect_python(known, out, NULL);
  cr_assert_eq(chdir("/"), 0);
  dnt_rm_rf(dir);
  free(dir);
}

/* ---- dotnet-gcdump, the reference, and .gcdump both ways ----
 * dotnet-gcdump and dntrace walk the same quiescent --heap process, each writing a .gcdump; each
 * reports the other's file. Every Sample.* type has the same object count in the four reports
 * (and in dntrace's live one), and each file's total bytes are what both tools read in it. The
 * walks differ in the objects the sessions themselves leave in the runtime, not in the sample's. */

static const char *compare_py =
    "import json, re, sys\n"
    "def ours(path):\n"
    "    d = json.load(open(path))\n"
    "    return {t['type']: t['count'] for t in d['types']}, d['bytes']\n"
    "def theirs(path):\n"
    "    rows, total = {}, None\n"
    "    for line in open(path):\n"
    "        m = re.match(r'\\s*([\\d,]+)  GC Heap bytes$', line)\n"
    "        if m: total = int(m.group(1).replace(',', ''))\n"
    "        m = re.match(r'\\s*[\\d,]+\\s+([\\d,]+)\\s+(\\S.*?)(?: \\(Bytes > \\w+\\))?(?:  \\[[^\\]]*\\])?\\s*$', line)\n"
    "        if m: rows[m.group(2)] = rows.get(m.group(2), 0) + int(m.group(1).replace(',', ''))\n"
    "    return rows, total\n"
    "live, _ = ours(sys.argv[1])\n"
    "our_file, our_bytes = ours(sys.argv[2])\n"
    "they_on_ours, their_bytes_of_ours = theirs(sys.argv[3])\n"
    "we_on_theirs, our_bytes_of_theirs = ours(sys.argv[4])\n"
    "they_on_theirs, their_bytes = theirs(sys.argv[5])\n"
    "assert our_bytes == their_bytes_of_ours, (our_bytes, their_bytes_of_ours)\n"
    "assert our_bytes_of_theirs == their_bytes, (our_bytes_of_theirs, their_bytes)\n"
    "reports = [live, our_file, they_on_ours, we_on_theirs, they_on_theirs]\n"
    "names = sorted({k for r in reports for k in r if k.startswith('Sample.')})\n"
    "assert 'Sample.CacheEntry' in names and live.get('Sample.CacheEntry') == 3000, live.get('Sample.CacheEntry')\n"
    "bad = [(k, [r.get(k) for r in reports]) for k in names if len({r.get(k) for r in reports}) != 1]\n"
    "assert not bad, bad\n"
    "print(len(names), 'Sample types alike in five reports')\n";

static void run_tool(const char *tool, const char *args, const char *out) {
  char cmd[9000];
  snprintf(cmd, sizeof cmd, "DOTNET_CLI_TELEMETRY_OPTOUT=1 '%s' %s > '%s'", tool, args, out);
  char *argv[] = {"/bin/sh", "-c", cmd, NULL};
  struct dnt_run r;
  cr_assert_eq(dnt_run_argv(&r, argv, NULL, 120000), 0, "dotnet-gcdump %s: %s", args, r.err);
  dnt_run_free(&r);
}

Test(gcdump, gcdump_files_read_both_ways_with_dotnet_gcdump, .timeout = 300) {
  const char *tool = gcdump_tool();
  dnt_target t;
  start_heap(&t);
  char *dir = dnt_temp_dir("dnt-gcdump"), f[6][4200], pid[16], args[4400];
  static const char *const names[6] = {"live.json", "ours.gcdump", "ours.json", "they-on-ours.txt", "theirs.gcdump",
                                       "we-on-theirs.json"};
  for (int i = 0; i < 6; i++) snprintf(f[i], sizeof f[i], "%s/%s", dir, names[i]);
  snprintf(pid, sizeof pid, "%d", (int)t.pid);
  struct dnt_run r;
  cr_assert_eq(dnt_run_dntrace(&r, "gcdump", "-p", pid, "--format", "json", "--top", "100000", "-o", f[0], NULL), 0,
               "%s", r.err);
  dnt_run_free(&r);
  /* dotnet-gcdump's verb writes the snapshot */
  cr_assert_eq(dnt_run_dntrace(&r, "gcdump", "collect", "-p", pid, "-o", f[1], NULL), 0, "%s", r.err);
  cr_expect(strstr(r.err, "Wrote "), "%s", r.err);
  dnt_run_free(&r);
  snprintf(args, sizeof args, "collect -p %s -o '%s'", pid, f[4]);
  run_tool(tool, args, "/dev/null");
  dnt_target_stop(&t);
  cr_assert_eq(dnt_run_dntrace(&r, "gcdump", "report", f[1], "--format", "json", "--top", "100000", "-o", f[2], NULL),
               0, "%s", r.err);
  dnt_run_free(&r);
  snprintf(args, sizeof args, "report '%s'", f[1]);
  char they_on_theirs[4300];
  run_tool(tool, args, f[3]);
  cr_assert_eq(dnt_run_dntrace(&r, "gcdump", f[4], "--format", "json", "--top", "100000", "-o", f[5], NULL), 0, "%s",
               r.err);
  dnt_run_free(&r);
  snprintf(they_on_theirs, sizeof they_on_theirs, "%s/they-on-theirs.txt", dir);
  snprintf(args, sizeof args, "report '%s'", f[4]);
  run_tool(tool, args, they_on_theirs);
  expect_python(compare_py, f[0], f[2], f[3], f[5], they_on_theirs, NULL);
  dnt_rm_rf(dir);
  free(dir);
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
