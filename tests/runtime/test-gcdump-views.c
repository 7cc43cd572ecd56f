/* test-gcdump-views.c: what `dntrace gcdump` answers from a snapshot (issue 24): the paths that
 * keep objects alive, the change between two snapshots, the heap as a profile, and .gcdump files
 * written, read back and refused when damaged. The graph of tests/lib/heap-walk-cr.h (write_graph)
 * has every answer worked out by hand; the sample's --heap process shows them on a real heap. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../lib/background-cr.h"
#include "../lib/heap-walk-cr.h"

/* ---- paths from the roots ----
 * The graph's roots are A and F (strong handles) and G (weak: left out). A breadth-first walk
 * reaches B and C from A, E from F, then D (from B, first) and H. */

static void expect_paths(const char *trace, const char *target, const char *want) {
  struct dnt_run r;
  cr_assert_eq(dnt_run_dntrace(&r, "gcdump", trace, "--paths-to", target, NULL), 0, "%s", r.err);
  cr_expect_str_eq(r.out, want, "--paths-to %s", target);
  dnt_run_free(&r);
}

Test(gcdump_views, paths_lead_from_the_roots_to_the_objects) {
  char *dir = dnt_temp_dir("dnt-gcdump"), path[4200];
  snprintf(path, sizeof path, "%s/g.nettrace", dir);
  write_graph(path);
  expect_paths(path, "TD",
               "1 object (30 bytes) of TD; 1 reached from the roots\n\n"
               "1 object, 30 bytes, held through:\n"
               "    [.NET Roots]\n    [other roots]\n    [strong Handles]\n    TA\n    TB\n    TD\n");
  /* G, a TA too, is held by a weak handle only: garbage, on no path */
  expect_paths(path, "TA",
               "2 objects (160 bytes) of TA; 1 reached from the roots (the others are garbage the walk saw)\n\n"
               "1 object, 100 bytes, held through:\n"
               "    [.NET Roots]\n    [other roots]\n    [strong Handles]\n    TA\n");
  /* one object by address: its path, each step's address */
  expect_paths(path, "0x4000",
               "1 object (30 bytes) of 0x4000; 1 reached from the roots\n\n"
               "1 object, 30 bytes, held through:\n"
               "    [.NET Roots]\n    [other roots]\n    [strong Handles]\n    0x1000 TA\n    0x2000 TB\n"
               "    0x4000 TD\n");
  /* a part of a name: every type with it; H is B's type, so TB's path is A's then TB (B and H
   * are one path: a type repeated in a row is shown once) */
  struct dnt_run r;
  cr_assert_eq(dnt_run_dntrace(&r, "gcdump", path, "--paths-to", "T", "--format", "json", NULL), 0, "%s", r.err);
  char out[4300];
  snprintf(out, sizeof out, "%s/p.json", dir);
  dnt_write_file(out, r.out, strlen(r.out));
  dnt_run_free(&r);
  expect_python("import json, sys\n"
                "d = json.load(open(sys.argv[1]))\n"
                "assert (d['objects'], d['bytes'], d['reached']) == (8, 315, 7), d\n"
                "got = {'/'.join(s['type'] for s in p['path']): (p['objects'], p['bytes']) for p in d['paths']}\n"
                "h = '[.NET Roots]/[other roots]/[strong Handles]/'\n"
                "want = {h + 'TA': (1, 100), h + 'TA/TB': (2, 15), h + 'TA/TC': (1, 20), h + 'TA/TB/TD': (1, 30),\n"
                "        h + 'TF': (1, 50), h + 'TF/TE': (1, 40)}\n"
                "assert got == want, got\n",
                out, NULL);
  /* nothing of that name, no object there: one line, exit 1, nothing written */
  cr_assert_eq(dnt_run_dntrace(&r, "gcdump", path, "--paths-to", "Nope", NULL), 1);
  cr_expect_str_eq(r.out, "");
  cr_expect(strstr(r.err, "--paths-to: no type named 'Nope'"), "%s", r.err);
  cr_expect_eq(strchr(r.err, '\n'), strrchr(r.err, '\n'), "one line: %s", r.err);
  dnt_run_free(&r);
  cr_assert_eq(dnt_run_dntrace(&r, "gcdump", path, "--paths-to", "0x4008", NULL), 1);
  cr_expect(strstr(r.err, "no object at 0x4008"), "%s", r.err);
  dnt_run_free(&r);
  dnt_rm_rf(dir);
  free(dir);
}

/* On the sample: what holds the cache's entries is the static that holds the cache. */
Test(gcdump_views, a_process_paths_name_the_static_root, .timeout = 120) {
  dnt_target t;
  start_heap(&t);
  char pid[16];
  snprintf(pid, sizeof pid, "%d", (int)t.pid);
  struct dnt_run r;
  cr_assert_eq(dnt_run_dntrace(&r, "gcdump", "-p", pid, "--paths-to", "Sample.CacheEntry", "--top", "1", NULL), 0,
               "%s", r.err);
  dnt_target_stop(&t);
  cr_expect(strstr(r.out, "3000 objects (72000 bytes) of Sample.CacheEntry; 3000 reached from the roots\n"), "%s",
            r.out);
  cr_expect(strstr(r.out, "3000 objects, 72000 bytes, held through:\n    [.NET Roots]\n    [static vars]\n"
                          "    [static var Sample.CacheEntry[].Entries]\n    Sample.CacheEntry[]\n"
                          "    Sample.CacheEntry\n"),
            "%s", r.out);
  dnt_run_free(&r);
}

/* ---- two snapshots ---- */

Test(gcdump_views, a_diff_shows_what_changed_per_type) {
  char *dir = dnt_temp_dir("dnt-gcdump"), base[4200], now[4200], file[4200];
  snprintf(base, sizeof base, "%s/base.nettrace", dir);
  snprintf(now, sizeof now, "%s/now.nettrace", dir);
  snprintf(file, sizeof file, "%s/base.gcdump", dir);
  write_walk(base, 4, 2, 2, -1, 0); /* 4 objects of T, 24 bytes each */
  write_walk(now, 6, 2, 2, -1, 0);
  static const char want[] =
      "Heap change from the base snapshot: 4 -> 6 objects (+2), 96 -> 144 bytes (+48)\n"
      "1 types changed, most bytes grown first\n\n"
      "   Bytes change Retained change      Objects       Bytes now  Objects now  Type\n"
      "            +48              +0           +2             144            6  T\n";
  struct dnt_run r;
  cr_assert_eq(dnt_run_dntrace(&r, "gcdump", now, "--diff", base, NULL), 0, "%s", r.err);
  cr_expect_str_eq(r.out, want);
  dnt_run_free(&r);
  /* the base as a .gcdump: the same */
  cr_assert_eq(dnt_run_dntrace(&r, "gcdump", base, "-o", file, NULL), 0, "%s", r.err);
  dnt_run_free(&r);
  cr_assert_eq(dnt_run_dntrace(&r, "gcdump", now, "--diff", file, NULL), 0, "%s", r.err);
  cr_expect_str_eq(r.out, want);
  dnt_run_free(&r);
  /* shrinking is negative; json */
  cr_assert_eq(dnt_run_dntrace(&r, "gcdump", file, "--diff", now, "--format", "json", NULL), 0, "%s", r.err);
  cr_expect_str_eq(r.out, "{\"objects\":4,\"bytes\":96,\"baseObjects\":6,\"baseBytes\":144,\"types\":[{\"type\":\"T\","
                          "\"count\":4,\"bytes\":96,\"retainedBytes\":0,\"countChange\":-2,\"bytesChange\":-48,"
                          "\"retainedBytesChange\":0}]}\n");
  dnt_run_free(&r);
  /* a base that is no snapshot: said before anything is read */
  cr_assert_eq(dnt_run_dntrace(&r, "gcdump", now, "--diff", dir, NULL), 1);
  cr_expect_str_eq(r.out, "");
  dnt_run_free(&r);
  dnt_rm_rf(dir);
  free(dir);
}

/* The sample's list grows by 2,000 objects a second ("heap-growth N" lines, N the objects added
 * so far): a snapshot, then a second once the sample says it has added 1,000 more than the first
 * saw; the diff shows at least those 1,000 more Sample.GrowthItem, and the cache unchanged. */
struct growth {
  long last;
};

static void on_growth(void *ud, const char *line) {
  long n;
  if (sscanf(line, "heap-growth %ld", &n) == 1) ((struct growth *)ud)->last = n;
}

Test(gcdump_views, a_diff_of_a_growing_process_shows_the_growth, .timeout = 240) {
  dnt_target t;
  start_heap_with(&t, ENTRIES ":" BYTES ":2000");
  char *dir = dnt_temp_dir("dnt-gcdump"), base[4200], out[4200], pid[16], carry[256] = "";
  snprintf(base, sizeof base, "%s/base.gcdump", dir);
  snprintf(out, sizeof out, "%s/diff.json", dir);
  snprintf(pid, sizeof pid, "%d", (int)t.pid);
  struct dnt_run r;
  cr_assert_eq(dnt_run_dntrace(&r, "gcdump", "collect", "-p", pid, "-o", base, NULL), 0, "%s", r.err);
  dnt_run_free(&r);
  cr_assert_eq(dnt_run_dntrace(&r, "gcdump", base, "--format", "json", "--top", "100000", NULL), 0, "%s", r.err);
  long before = 0; /* no row: the list had none yet */
  const char *g = strstr(r.out, "{\"type\":\"Sample.GrowthItem\",\"count\":");
  cr_assert(!g || sscanf(g, "{\"type\":\"Sample.GrowthItem\",\"count\":%ld", &before) == 1, "%s", r.out);
  dnt_run_free(&r);
  struct growth seen = {-1};
  /* the sample's own count, not a clock; only a hang reaches the ceiling */
  for (int k = 0; seen.last < before + 1000 && k < DNT_HANG_MS / 20; k++) {
    dnt_target_read_lines(t.stdout_fd, carry, sizeof carry, on_growth, &seen);
    usleep(20000);
  }
  cr_assert(seen.last >= before + 1000, "the sample stopped adding: %ld after %ld", seen.last, before);
  cr_assert_eq(dnt_run_dntrace(&r, "gcdump", "-p", pid, "--diff", base, "--format", "json", "--top", "100000", "-o",
                               out, NULL),
               0, "%s", r.err);
  dnt_run_free(&r);
  dnt_target_stop(&t);
  char py[600];
  snprintf(py, sizeof py,
           "import json, sys\n"
           "d = json.load(open(sys.argv[1]))\n"
           "t = {x['type']: x for x in d['types']}\n"
           "g = t['Sample.GrowthItem']\n"
           "assert g['countChange'] >= %ld and g['count'] - g['countChange'] == %ld, g\n"
           "assert g['bytesChange'] == g['countChange'] * (g['bytes'] // g['count']), g\n"
           "assert 'Sample.CacheEntry' not in t, t.get('Sample.CacheEntry')\n",
           seen.last - before, before);
  expect_python(py, out, NULL);
  dnt_rm_rf(dir);
  free(dir);
}

/* ---- the heap as a profile ----
 * Each object under its dominators' types: A's (TA) holds B and H (TB: one frame), C, D; E is
 * held by both roots, so by the handles' node alone. */

Test(gcdump_views, the_heap_as_a_profile_is_the_dominator_tree) {
  char *dir = dnt_temp_dir("dnt-gcdump"), path[4200], pb[4200];
  snprintf(path, sizeof path, "%s/g.nettrace", dir);
  snprintf(pb, sizeof pb, "%s/g.pb.gz", dir);
  write_graph(path);
  struct dnt_run r;
  cr_assert_eq(dnt_run_dntrace(&r, "gcdump", path, "--format", "folded", NULL), 0, "%s", r.err);
  static const char *const lines[] = {
      "[.NET_Roots];[other_roots];[strong_Handles];TA 100\n", "[.NET_Roots];[other_roots];[strong_Handles];TA;TB 15\n",
      "[.NET_Roots];[other_roots];[strong_Handles];TA;TC 20\n", "[.NET_Roots];[other_roots];[strong_Handles];TA;TD 30\n",
      "[.NET_Roots];[other_roots];[strong_Handles];TE 40\n", "[.NET_Roots];[other_roots];[strong_Handles];TF 50\n"};
  size_t total = 0;
  for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) {
    cr_expect(strstr(r.out, lines[i]), "%s in:\n%s", lines[i], r.out);
    total += strlen(lines[i]);
  }
  cr_expect_eq(strlen(r.out), total, "nothing else:\n%s", r.out);
  dnt_run_free(&r);
  /* pprof, read by go tool pprof: the space by default, A's 165 bytes retained, 2 objects of TB */
  require_go();
  cr_assert_eq(dnt_run_dntrace(&r, "gcdump", path, "--format", "pprof", "-o", pb, NULL), 0, "%s", r.err);
  dnt_run_free(&r);
  char *top[] = {"/usr/bin/env", "go", "tool", "pprof", "-top", "-unit=B", pb, NULL};
  cr_assert_eq(dnt_run_argv(&r, top, NULL, 120000), 0, "%s", r.err);
  cr_expect(strstr(r.out, "Type: inuse_space"), "%s", r.out);
  cr_expect(strstr(r.out, "Showing nodes accounting for 255B, 100% of 255B total\n"), "%s", r.out);
  cr_expect(strstr(r.out, "      100B 39.22% 39.22%       165B 64.71%  TA\n"), "%s", r.out);
  dnt_run_free(&r);
  char *objects[] = {"/usr/bin/env", "go", "tool", "pprof", "-top", "-sample_index=inuse_objects", pb, NULL};
  cr_assert_eq(dnt_run_argv(&r, objects, NULL, 120000), 0, "%s", r.err);
  cr_expect(strstr(r.out, "Type: inuse_objects"), "%s", r.out);
  cr_expect(strstr(r.out, "         2 28.57% 28.57%          2 28.57%  TB\n"), "TB's 2 of the 7 objects reached:\n%s", r.out);
  dnt_run_free(&r);
  dnt_rm_rf(dir);
  free(dir);
}

/* ---- .gcdump files ---- */

/* The graph through a .gcdump and back: the same report, to the byte; dotnet-gcdump reads the file
 * (its rows: the size of a type's first object, the count; its objects include the 3 root nodes). */
Test(gcdump_views, a_gcdump_file_holds_the_whole_graph) {
  char *dir = dnt_temp_dir("dnt-gcdump"), path[4200], file[4200];
  snprintf(path, sizeof path, "%s/g.nettrace", dir);
  snprintf(file, sizeof file, "%s/g.gcdump", dir);
  write_graph(path);
  struct dnt_run r, back;
  cr_assert_eq(dnt_run_dntrace(&r, "gcdump", path, "--format", "gcdump", "-o", file, NULL), 0, "%s", r.err);
  cr_expect(strstr(r.err, "Wrote "), "%s", r.err);
  dnt_run_free(&r);
  const char *formats[] = {"json", "text"};
  for (int i = 0; i < 2; i++) {
    cr_assert_eq(dnt_run_dntrace(&r, "gcdump", path, "--format", formats[i], NULL), 0, "%s", r.err);
    cr_assert_eq(dnt_run_dntrace(&back, "gcdump", "report", file, "--format", formats[i], NULL), 0, "%s", back.err);
    cr_expect_str_eq(back.out, r.out);
    dnt_run_free(&r);
    dnt_run_free(&back);
  }
  cr_assert_eq(dnt_run_dntrace(&r, "gcdump", file, "--paths-to", "0x4000", NULL), 0, "%s", r.err);
  cr_expect(strstr(r.out, "    0x1000 TA\n    0x2000 TB\n    0x4000 TD\n"), "%s", r.out);
  dnt_run_free(&r);
  const char *tool = gcdump_tool();
  char cmd[9000];
  snprintf(cmd, sizeof cmd, "DOTNET_CLI_TELEMETRY_OPTOUT=1 '%s' report '%s'", tool, file);
  char *argv[] = {"/bin/sh", "-c", cmd, NULL};
  cr_assert_eq(dnt_run_argv(&r, argv, NULL, 120000), 0, "%s", r.err);
  cr_expect(strstr(r.out, "            315  GC Heap bytes\n             11  GC Heap objects\n"), "%s", r.out);
  static const char *const rows[] = {"            100         2  TA\n", "             10         2  TB\n",
                                     "             20         1  TC\n", "             30         1  TD\n",
                                     "             40         1  TE\n", "             50         1  TF\n"};
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) cr_expect(strstr(r.out, rows[i]), "%s in:\n%s", rows[i], r.out);
  dnt_run_free(&r);
  dnt_rm_rf(dir);
  free(dir);
}

/* A damaged .gcdump, cut anywhere or with a byte changed, and files that are none: one line,
 * exit 1, never a report. */
Test(gcdump_views, a_damaged_gcdump_is_refused) {
  char *dir = dnt_temp_dir("dnt-gcdump"), path[4200], file[4200], cut[4200];
  snprintf(path, sizeof path, "%s/g.nettrace", dir);
  snprintf(file, sizeof file, "%s/g.gcdump", dir);
  snprintf(cut, sizeof cut, "%s/cut.gcdump", dir);
  write_graph(path);
  struct dnt_run r;
  cr_assert_eq(dnt_run_dntrace(&r, "gcdump", path, "-o", file, NULL), 0, "%s", r.err);
  dnt_run_free(&r);
  FILE *fp = fopen(file, "rb");
  cr_assert(fp);
  static uint8_t buf[8192];
  size_t n = fread(buf, 1, sizeof buf, fp);
  fclose(fp);
  cr_assert(n > 200 && n < sizeof buf, "%zu", n);
  /* cut anywhere past the signature's check, up to the end of the addresses (what follows is
   * the process's fields, read when there) */
  size_t cuts[] = {40, 60, 90, 150, n / 2, n - 120};
  for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
    dnt_write_file(cut, buf, cuts[i]);
    cr_assert_eq(dnt_run_dntrace(&r, "gcdump", cut, NULL), 1, "cut at %zu: %s", cuts[i], r.out);
    cr_expect_str_eq(r.out, "");
    cr_expect(strstr(r.err, "not a .gcdump, or a damaged one"), "cut at %zu: %s", cuts[i], r.err);
    cr_expect_eq(strchr(r.err, '\n'), strrchr(r.err, '\n'), "one line: %s", r.err);
    dnt_run_free(&r);
  }
  /* a version before the layout read here (GCHeapDump's version, right after its name's length) */
  uint8_t old[8192];
  memcpy(old, buf, n);
  old[27] = 8;
  dnt_write_file(cut, old, n);
  cr_assert_eq(dnt_run_dntrace(&r, "gcdump", cut, NULL), 1);
  cr_expect(strstr(r.err, "a .gcdump of version 8"), "%s", r.err);
  dnt_run_free(&r);
  /* not a .gcdump at all: read as a trace, refused as one */
  dnt_write_file(cut, "hello, heap\n", 12);
  cr_assert_eq(dnt_run_dntrace(&r, "gcdump", cut, NULL), 1);
  cr_expect_str_eq(r.out, "");
  cr_expect_eq(strchr(r.err, '\n'), strrchr(r.err, '\n'), "one line: %s", r.err);
  dnt_run_free(&r);
  dnt_rm_rf(dir);
  free(dir);
}

/* ---- PerfView's own test file ----
 * The public corpus's test1.gcdump (a JavaScript heap PerfView dumped) with the XML PerfView's
 * test expects of its graph: every node of some size is an object; per type name the objects and
 * their bytes, and the references of all, equal what dntrace reads. Its types' own sizes are 0 (as
 * PerfView leaves them): the objects are told by their nodes' sizes. */
Test(gcdump_views, perfviews_test_file_reads_as_its_baseline_says, .timeout = 120) {
  require_python();
  char corpus[4096], file[4300], xml[4300];
  corpus_dir(corpus, sizeof corpus);
  snprintf(file, sizeof file, "%s/microsoft__perfview/test1.gcdump", corpus);
  snprintf(xml, sizeof xml, "%s/microsoft__perfview/test1_baseline.gcdump.xml", corpus);
  cr_assert(access(file, R_OK) == 0 && access(xml, R_OK) == 0, "the corpus has test1.gcdump and its baseline");
  char *dir = dnt_temp_dir("dnt-gcdump"), out[4300];
  snprintf(out, sizeof out, "%s/t1.json", dir);
  struct dnt_run r;
  cr_assert_eq(dnt_run_dntrace(&r, "gcdump", file, "--format", "json", "--top", "100000", "-o", out, NULL), 0, "%s",
               r.err);
  dnt_run_free(&r);
  expect_python("import json, sys, xml.etree.ElementTree as ET\n"
                "ours = json.load(open(sys.argv[1]))\n"
                "graph = ET.parse(sys.argv[2]).getroot().find('MemoryGraph')\n"
                "want, refs, objects = {}, 0, 0\n"
                "for n in graph.iter('Node'):\n"
                "    size = int(n.get('Size'))\n"
                "    if size == 0: continue\n"
                "    objects += 1\n"
                "    refs += int(n.get('NumChildren'))\n"
                "    c, b = want.get(n.get('Type'), (0, 0))\n"
                "    want[n.get('Type')] = (c + 1, b + size)\n"
                "assert (ours['objects'], ours['references']) == (objects, refs) == (6479, 15016), (ours['objects'], objects, refs)\n"
                "assert ours['bytes'] == int(graph.get('TotalSize')), ours['bytes']\n"
                "got = {t['type']: (t['count'], t['bytes']) for t in ours['types']}\n"
                "bad = [(k, want.get(k), got.get(k)) for k in set(want) | set(got) if want.get(k) != got.get(k)]\n"
                "assert not bad and len(got) == 1991, (len(got), bad[:5])\n",
                out, xml, NULL);
  /* written again by dntrace, read again: the same report, to the byte */
  char again[4300];
  snprintf(again, sizeof again, "%s/t1.gcdump", dir);
  cr_assert_eq(dnt_run_dntrace(&r, "gcdump", file, "-o", again, NULL), 0, "%s", r.err);
  dnt_run_free(&r);
  struct dnt_run first, second;
  cr_assert_eq(dnt_run_dntrace(&first, "gcdump", file, "--format", "json", "--top", "100000", NULL), 0);
  cr_assert_eq(dnt_run_dntrace(&second, "gcdump", again, "--format", "json", "--top", "100000", NULL), 0, "%s",
               second.err);
  cr_expect_str_eq(second.out, first.out);
  dnt_run_free(&first);
  dnt_run_free(&second);
  dnt_rm_rf(dir);
  free(dir);
}

/* The runtime names each type once, and forgets what it named only when no session has its events
 * on. With a watch on the process (its rules want the runtime's exception events) a first snapshot
 * is named; a second comes with its objects' types unnamed, which dntrace takes again and then
 * refuses in one line, exit 1: never a report of "(unknown type)" rows. Once the watch has ended,
 * a snapshot is named again. */
Test(gcdump_views, a_walk_the_runtime_leaves_unnamed_is_refused, .timeout = 240) {
  dnt_target t;
  start_heap(&t);
  char pid[16];
  snprintf(pid, sizeof pid, "%d", (int)t.pid);
  struct bg w;
  const char *const wargs[] = {"watch", "-p", pid, "--rule", "exception 5 in 1h => stacks", NULL};
  bg_start(&w, wargs);
  cr_assert(bg_wait_text(&w, "Watching process"), "watch started");
  struct dnt_run r;
  cr_expect_eq(dnt_run_dntrace(&r, "gcdump", "-p", pid, NULL), 0, "%s", r.err);
  cr_expect(strstr(r.out, "Sample.CacheEntry"), "the first snapshot is named: %s", r.out);
  dnt_run_free(&r);
  cr_expect_eq(dnt_run_dntrace(&r, "gcdump", "-p", pid, NULL), 1, "%s%s", r.out, r.err);
  cr_expect(strstr(r.err, "walking the heap again"), "%s", r.err);
  cr_expect(strstr(r.err, "dntrace: error: the heap walk is incomplete: the runtime named no type for "), "%s", r.err);
  cr_expect_str_eq(r.out, "", "no report");
  dnt_run_free(&r);
  cr_expect_eq(bg_finish(&w, SIGINT), 0);
  bg_remove(&w);
  cr_expect_eq(dnt_run_dntrace(&r, "gcdump", "-p", pid, NULL), 0, "%s", r.err);
  cr_expect(strstr(r.out, "Sample.CacheEntry"), "named again once the watch ended: %s", r.out);
  dnt_run_free(&r);
  dnt_target_stop(&t);
}
