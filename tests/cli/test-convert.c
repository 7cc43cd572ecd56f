/* dntrace convert on a trace of the real sample target: the folded and speedscope outputs carry
 * every sample of the file (counted by the independent reader) and the time they stand for
 * (each thread's span from its first sample to its last, by the same reader), and the speedscope
 * file passes a strict check of the format's rules. */
#include <criterion/criterion.h>
#include <libxml/parser.h>
#include <libxml/tree.h>
#include <math.h>
#include <stdio.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../lib/nt-scan.h"
#include "../lib/run.h"
#include "../lib/target-cr.h"
#include "../lib/target.h"
#include "../lib/v6-trace.h"

/* speedscope's file-format rules, checked strictly: frames with string names, sampled profiles
 * whose samples and weights pair up, frame indexes in range, weights adding up to the span. */
static const char *speedscope_check =
    "import json,sys\n"
    "d=json.load(open(sys.argv[1]))\n"
    "assert d['$schema']=='https://www.speedscope.app/file-format-schema.json'\n"
    "fr=d['shared']['frames']; assert fr and all(isinstance(f['name'],str) and f['name'] for f in fr)\n"
    "assert set(d)>={'$schema','shared','profiles','name','exporter'}\n"
    "assert 0<=d['activeProfileIndex']<len(d['profiles'])\n"
    "total=0\n"
    "for p in d['profiles']:\n"
    "  assert p['type']=='sampled' and p['unit']=='milliseconds' and isinstance(p['name'],str)\n"
    "  assert len(p['samples'])==len(p['weights'])>0\n"
    "  assert all(isinstance(i,int) and 0<=i<len(fr) for s in p['samples'] for i in s)\n"
    "  assert all(w>0 for w in p['weights'])\n"
    "  assert abs(sum(p['weights'])-(p['endValue']-p['startValue']))<1e-6*max(1,p['endValue'])\n"
    "  total+=sum(p['weights'])\n"
    "print('%.3f'%total)\n";

Test(convert, folded_and_speedscope_carry_every_sample, .timeout = 120) {
  DNT_REQUIRE_TARGET();
  if (system("command -v python3 >/dev/null 2>&1") != 0) cr_skip_test("needs python3 for the strict JSON check");
  dnt_target t;
  dnt_target_opts o = {.mode = DNT_TARGET_PLAIN, .wait_socket = 1, .timeout_ms = 30000};
  char err[512];
  cr_assert_eq(dnt_target_start(&t, &o, err, sizeof err), 0, "%s", err);
  char dir[] = "/tmp/dnt-convert-XXXXXX";
  cr_assert(mkdtemp(dir));
  char trace[64], folded[64], ss[80], pid[16];
  snprintf(trace, sizeof trace, "%s/t.nettrace", dir);
  snprintf(folded, sizeof folded, "%s/t.folded", dir);
  snprintf(ss, sizeof ss, "%s/t.speedscope.json", dir);
  snprintf(pid, sizeof pid, "%d", (int)t.pid);
  struct dnt_run r;
  cr_assert_eq(dnt_run_dntrace(&r, "collect", "-p", pid, "-o", trace, "--duration", "2s", NULL), 0, "%s", r.err);
  dnt_run_free(&r);
  dnt_target_stop(&t);
  static struct nt_scan s;
  cr_assert_eq(nt_scan_file(trace, &s), 0);
  uint64_t samples = nt_scan_count(&s, "Microsoft-DotNETCore-SampleProfiler", 0, 0);
  cr_assert_gt(samples, 0);

  /* each sample weighs the time until its thread's next one: a thread's samples add up to the
   * span from its first to its last (the independent reader's timestamps) */
  double span_ms = nt_scan_spans_ms(&s, "Microsoft-DotNETCore-SampleProfiler", 0);
  cr_assert_gt(span_ms, 0);

  /* folded in integer microseconds: the spans, give or take the rounding of each line */
  cr_assert_eq(dnt_run_dntrace(&r, "convert", trace, "--format", "folded", "-o", "-", NULL), 0, "%s", r.err);
  uint64_t us = 0, lines = 0;
  for (char *l = strtok(r.out, "\n"); l; l = strtok(NULL, "\n"), lines++) us += strtoull(strrchr(l, ' ') + 1, NULL, 10);
  dnt_run_free(&r);
  cr_assert(fabs((double)us / 1000 - span_ms) <= 0.0005 * (double)lines + 1e-6 * span_ms,
            "folded: %llu us over %llu lines, the threads' spans %.3f ms", (unsigned long long)us,
            (unsigned long long)lines, span_ms);

  /* folded in samples, default name */
  cr_assert_eq(dnt_run_dntrace(&r, "convert", trace, "--format", "folded", "--weight", "samples", NULL), 0, "%s",
               r.err);
  dnt_run_free(&r);
  FILE *fp = fopen(folded, "r");
  cr_assert(fp, "%s written", folded);
  char line[8192];
  uint64_t sum = 0;
  int countprimes = 0;
  /* one line per distinct stack, as flamegraph.pl and inferno expect: no stack twice */
  size_t nstacks = 0, capstacks = 1024;
  char **stacks = calloc(capstacks, sizeof *stacks);
  while (fgets(line, sizeof line, fp)) {
    char *sp = strrchr(line, ' ');
    cr_assert(sp && strncmp(line, "Thread ", 7) == 0, "folded line: %s", line);
    sum += strtoull(sp + 1, NULL, 10);
    countprimes |= strstr(line, ";Sample!Sample.CpuWork.CountPrimes ") != NULL;
    *sp = '\0';
    for (size_t i = 0; i < nstacks; i++) cr_assert_str_neq(stacks[i], line, "a stack on two lines: %s", line);
    if (nstacks == capstacks) stacks = realloc(stacks, (capstacks *= 2) * sizeof *stacks);
    stacks[nstacks++] = strdup(line);
  }
  fclose(fp);
  for (size_t i = 0; i < nstacks; i++) free(stacks[i]);
  free(stacks);
  cr_assert_eq(sum, samples, "folded counts add up to the trace's samples");
  cr_assert(countprimes, "CountPrimes is a leaf in the folded stacks");

  /* speedscope */
  cr_assert_eq(dnt_run_dntrace(&r, "convert", trace, "--format", "speedscope", NULL), 0, "%s", r.err);
  dnt_run_free(&r);
  char py[64];
  snprintf(py, sizeof py, "%s/check.py", dir);
  fp = fopen(py, "w");
  fputs(speedscope_check, fp);
  fclose(fp);
  char *argv[] = {"/usr/bin/env", "python3", py, ss, NULL};
  cr_assert_eq(dnt_run_argv(&r, argv, NULL, 60000), 0, "speedscope check failed: %s", r.err);
  double total_ms = atof(r.out);
  /* the weights are the threads' spans (not the samples times the nominal interval: the runtime
   * samples less often than it announces) */
  cr_assert(total_ms > span_ms * 0.9999 && total_ms < span_ms * 1.0001, "weights %.3f ms, expected %.3f ms",
            total_ms, span_ms);
  cr_assert_gt(s.sampling_ns, 0);
  cr_log_info("%llu samples, %.3f ms of thread time; %.3f ms at the nominal %.3f ms", (unsigned long long)samples,
              span_ms, (double)samples * s.sampling_ns / 1e6, s.sampling_ns / 1e6);
  dnt_run_free(&r);
  cr_assert_eq(dnt_run_dntrace(&r, "convert", trace, "--format", "pdf", NULL), 2);
  dnt_run_free(&r);

  /* Chromium trace events: complete ("X") events, non-negative, on the threads of the samples,
   * every thread named ("M" thread_name), the process named after its program (process_name) */
  /* and parent first where a frame and its child start and end together (viewers break that tie
   * by file order): UNMANAGED_CODE_TIME, always a leaf, never leads such a group; the real pid */
  static const char *chromium_check =
      "import json,sys\n"
      "d=json.load(open(sys.argv[1])); allev=d['traceEvents']; assert allev\n"
      "meta=[e for e in allev if e['ph']=='M']; ev=[e for e in allev if e['ph']!='M']; assert ev\n"
      "for e in ev:\n"
      "  assert e['ph']=='X' and isinstance(e['name'],str) and e['dur']>=0 and e['ts']>=0\n"
      "  assert isinstance(e['tid'],int) and e['pid']==int(sys.argv[2]), e\n"
      "names={e['tid']:e['args']['name'] for e in meta if e['name']=='thread_name' and e['pid']==int(sys.argv[2])}\n"
      "assert {e['tid'] for e in ev} <= set(names), 'a name for every thread with events'\n"
      "proc=[e['args']['name'] for e in meta if e['name']=='process_name' and e['pid']==int(sys.argv[2])]\n"
      "assert proc==[sys.argv[3]], 'the process is named after its program: %s' % proc\n"
      "first={}\n"
      "for e in ev: first.setdefault((e['tid'],e['ts'],e['dur']),[]).append(e['name'])\n"
      "bad=[g for g in first.values() if len(g)>1 and g[0]=='UNMANAGED_CODE_TIME']\n"
      "assert not bad, 'leaf first: %s' % bad[:3]\n"
      "print(len(set(e['tid'] for e in ev)), sum(1 for e in ev if e['name'].endswith('CountPrimes')))\n";
  char chromium_json[80];
  snprintf(chromium_json, sizeof chromium_json, "%s/t.chromium.json", dir);
  cr_assert_eq(dnt_run_dntrace(&r, "convert", trace, "--format", "chromium", NULL), 0, "%s", r.err);
  dnt_run_free(&r);
  fp = fopen(py, "w");
  fputs(chromium_check, fp);
  fclose(fp);
  /* the runtime's ProcessInfo gives the command line: the sample's apphost, by its file name */
  const char *exe = strrchr(dnt_target_exe(), '/') ? strrchr(dnt_target_exe(), '/') + 1 : dnt_target_exe();
  char *cargv2[] = {"/usr/bin/env", "python3", py, chromium_json, pid, (char *)exe, NULL};
  cr_assert_eq(dnt_run_argv(&r, cargv2, NULL, 60000), 0, "chromium check failed: %s", r.err);
  int threads = 0, countprimes_events = 0;
  cr_assert_eq(sscanf(r.out, "%d %d", &threads, &countprimes_events), 2, "%s", r.out);
  cr_assert_geq(threads, 2, "several threads: %s", r.out);
  cr_assert_gt(countprimes_events, 0, "CountPrimes appears on the timeline");
  dnt_run_free(&r);

  /* the flame graph: well-formed SVG as wide as its window, one frame per node; merged across
   * threads by default (the roots span the width, no thread rows, CountPrimes's path once), one
   * tower per thread with --by-thread (neutral thread rows); a title that says what the width is;
   * labels that can show the method and its type first */
  char svg[80];
  snprintf(svg, sizeof svg, "%s/t.svg", dir);
  for (int by_thread = 0; by_thread < 2; by_thread++) {
    cr_assert_eq(dnt_run_dntrace(&r, "convert", trace, "--format", "flamegraph", by_thread ? "--by-thread" : NULL,
                                 NULL),
                 0, "%s", r.err);
    dnt_run_free(&r);
    xmlDocPtr doc = xmlReadFile(svg, NULL, XML_PARSE_NONET);
    cr_assert(doc, "%s parses as XML", svg);
    xmlNodePtr root = xmlDocGetRootElement(doc);
    cr_assert_str_eq((const char *)root->name, "svg");
    xmlChar *width = xmlGetProp(root, BAD_CAST "width");
    cr_expect_str_eq((const char *)width, "100%", "as wide as the window");
    xmlFree(width);
    int frames = 0, countprimes_frames = 0, thread_rows = 0, neutral_rows = 0, short_label = 0, titled = 0;
    double level1_width = 0;
    for (xmlNodePtr n = root->children; n; n = n->next) {
      if (n->type != XML_ELEMENT_NODE) continue;
      if (strcmp((const char *)n->name, "text") == 0) {
        xmlChar *text = xmlNodeGetContent(n);
        titled |= text && strstr((const char *)text, ": thread time, ") != NULL;
        xmlFree(text);
      }
      if (strcmp((const char *)n->name, "g") != 0) continue;
      frames++;
      xmlChar *lvl = xmlGetProp(n, BAD_CAST "data-l"), *w = xmlGetProp(n, BAD_CAST "data-w");
      xmlChar *sname = xmlGetProp(n, BAD_CAST "data-s");
      xmlChar *title = xmlNodeGetContent(n->children);
      cr_assert(title && strstr((const char *)title, " samples, "), "every frame has a tooltip: %s", title);
      if (strcmp((const char *)lvl, "1") == 0) level1_width += atof((const char *)w);
      static const char countprimes_title[] = "Sample!Sample.CpuWork.CountPrimes (";
      if (strncmp((const char *)title, countprimes_title, sizeof countprimes_title - 1) == 0) {
        countprimes_frames++;
        short_label |= sname && strcmp((const char *)sname, "CpuWork.CountPrimes") == 0;
      }
      if (strncmp((const char *)title, "Thread ", 7) == 0) {
        thread_rows++;
        for (xmlNodePtr c = n->children; c; c = c->next) {
          xmlChar *fill = c->type == XML_ELEMENT_NODE && strcmp((const char *)c->name, "rect") == 0
                              ? xmlGetProp(c, BAD_CAST "fill")
                              : NULL;
          neutral_rows += fill && strcmp((const char *)fill, "rgb(205,205,220)") == 0;
          xmlFree(fill);
        }
      }
      xmlFree(lvl);
      xmlFree(w);
      xmlFree(sname);
      xmlFree(title);
    }
    xmlFreeDoc(doc);
    cr_expect_gt(frames, 10);
    cr_expect(titled, "the title says what the width measures");
    cr_expect(level1_width > 1179 && level1_width < 1181, "the first row spans the graph: %.2f", level1_width);
    cr_expect(short_label, "CountPrimes's short label is its type and method");
    if (by_thread) {
      cr_expect_geq(thread_rows, 2, "one tower per thread");
      cr_expect_eq(neutral_rows, thread_rows, "thread rows in the neutral colour");
      cr_expect_geq(countprimes_frames, 1, "CountPrimes has a frame");
    } else {
      cr_expect_eq(thread_rows, 0, "merged: no thread rows");
      cr_expect_eq(countprimes_frames, 1, "merged: CountPrimes's path once (%d frames)", countprimes_frames);
    }
  }

  /* it renders: headless Chromium takes a screenshot of it */
  const char *chromium = access("/usr/bin/chromium", X_OK) == 0 ? "/usr/bin/chromium" : NULL;
  if (!chromium) {
    const char *ci = getenv("CI");
    if (ci && strcmp(ci, "true") == 0) cr_assert_fail("no chromium to render the flame graph (./bootstrap.sh installs it)");
  } else {
    char png[80], shot[200], url[120];
    snprintf(png, sizeof png, "%s/t.png", dir);
    snprintf(shot, sizeof shot, "--screenshot=%s", png);
    snprintf(url, sizeof url, "file://%s", svg);
    char *cargv[] = {(char *)chromium, "--headless", "--no-sandbox", "--disable-gpu", "--window-size=1400,900",
                     shot, url, NULL};
    dnt_run_argv(&r, cargv, NULL, 60000);
    struct stat st;
    cr_assert_eq(stat(png, &st), 0, "chromium wrote a screenshot: %s", r.err);
    cr_assert_gt(st.st_size, 5000, "a screenshot with something in it (%lld bytes)", (long long)st.st_size);
    dnt_run_free(&r);
  }
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  cr_assert_eq(system(cmd), 0);
}

/* A corpus trace with managed samples (CI has the corpus; elsewhere it skips). */
static void corpus_trace(char *path, size_t cap) {
  const char *c = getenv("DNT_CORPUS"), *src = getenv("DNT_SRCDIR"), *ci = getenv("CI");
  if (c && *c)
    snprintf(path, cap, "%s/microsoft__perfview/only_managed_samples.nettrace", c);
  else
    snprintf(path, cap, "%s/../shared/corpus/microsoft__perfview/only_managed_samples.nettrace", src ? src : ".");
  if (access(path, R_OK) == 0) return;
  if (ci && strcmp(ci, "true") == 0) cr_assert_fail("no corpus at %s (CI=true)", path);
  cr_skip_test("no corpus at %s (set DNT_CORPUS)", path);
}

static int lines_of(const char *s) {
  int n = 0;
  for (; *s; s++) n += *s == '\n';
  return n;
}

/* An SVG that cannot be written: one line of dntrace's own with the path and the reason (no
 * libxml2 lines), exit 1, and no half-written file left behind. */
Test(convert, an_unwritable_flame_graph_is_one_line_with_its_reason, .timeout = 120) {
  char trace[4200];
  corpus_trace(trace, sizeof trace);
  if (geteuid() != 0) {
    const char *ci = getenv("CI");
    if (ci && strcmp(ci, "true") == 0) cr_assert_fail("needs root to mount a small tmpfs (CI=true)");
    cr_skip_test("needs root to mount a small tmpfs");
  }
  char dir[] = "/tmp/dnt-convert-full-XXXXXX";
  cr_assert(mkdtemp(dir));
  struct dnt_run r;

  /* a directory that does not exist */
  char out[128], want[200];
  snprintf(out, sizeof out, "%s/no-such-dir/f.svg", dir);
  cr_assert_eq(dnt_run_dntrace(&r, "convert", trace, "--format", "flamegraph", "-o", out, NULL), 1, "%s", r.err);
  snprintf(want, sizeof want, "dntrace: error: cannot write '%s': No such file or directory\n", out);
  cr_assert_str_eq(r.err, want);
  dnt_run_free(&r);

  /* a full disk: a 64 KiB tmpfs, filled, in a private mount namespace */
  char cmd[4800];
  snprintf(cmd, sizeof cmd,
           "mount -t tmpfs -o size=64k tmpfs '%s' && { cat /dev/zero > '%s/fill'; } 2>/dev/null; "
           "\"$DNT_BIN\" convert '%s' --format flamegraph -o '%s/f.svg'; rc=$?; "
           "echo \"files: $(ls '%s' | tr '\\n' ' ')\"; exit $rc",
           dir, dir, trace, dir, dir);
  char *argv[] = {"/usr/bin/unshare", "-m", "--propagation", "private", "/bin/sh", "-c", cmd, NULL};
  cr_assert_eq(dnt_run_argv(&r, argv, NULL, 60000), 1, "out: %s err: %s", r.out, r.err);
  snprintf(want, sizeof want, "dntrace: error: cannot write '%s/f.svg': No space left on device\n", dir);
  cr_assert_str_eq(r.err, want);
  cr_assert_eq(lines_of(r.err), 1);
  cr_assert(strstr(r.out, "files: fill \n"), "the cut SVG is removed: %s", r.out);
  dnt_run_free(&r);
  rmdir(dir);
}

/* ---- the timelines in a real viewer ---- */

/* speedscope's release (the npm package, unpacked by ./bootstrap.sh into build-tools/speedscope,
 * or $DNT_SPEEDSCOPE) and chromium: the path of speedscope's index.html. Skips without them,
 * except under CI=true. */
static const char *speedscope_index(void) {
  static char index[4200];
  const char *dir = getenv("DNT_SPEEDSCOPE"), *src = getenv("DNT_SRCDIR"), *ci = getenv("CI");
  if (dir && *dir)
    snprintf(index, sizeof index, "%s/dist/release/index.html", dir);
  else
    snprintf(index, sizeof index, "%s/build-tools/speedscope/dist/release/index.html", src ? src : ".");
  const char *missing = access(index, R_OK) != 0           ? "speedscope (./bootstrap.sh deps unpacks it)"
                        : access("/usr/bin/chromium", X_OK) ? "chromium"
                        : system("command -v python3 >/dev/null 2>&1") ? "python3"
                                                                       : NULL;
  if (missing) {
    if (ci && strcmp(ci, "true") == 0) cr_assert_fail("no %s (CI=true): %s", missing, index);
    cr_skip_test("no %s (%s)", missing, index);
  }
  return index;
}

/* Python for the checks below: `order FILE` prints each speedscope profile as
 * "name:stack=weight,..." (a stack as its frame names root first, ';' between them), profiles
 * separated by '|'; `loader JSON JS [TID]` writes the script speedscope's localProfilePath loads
 * (the JSON, only thread TID's events when given); `sandwich HTML` prints the profile names of the
 * page's profile list and the rows of its sandwich table (total, self, name), one a line. */
static const char *viewer_py =
    "import base64,json,re,sys\n"
    "if sys.argv[1]=='order':\n"
    "  d=json.load(open(sys.argv[2])); fr=[f['name'] for f in d['shared']['frames']]\n"
    "  print('|'.join(p['name']+':'+','.join(';'.join(fr[i] for i in s)+'=%g'%w for s,w in zip(p['samples'],p['weights'])) for p in d['profiles']))\n"
    "elif sys.argv[1]=='loader':\n"
    "  d=json.load(open(sys.argv[2]))\n"
    "  if len(sys.argv)>4: d['traceEvents']=[e for e in d['traceEvents'] if e['tid'] in (0,int(sys.argv[4]))]\n"
    "  b=base64.b64encode(json.dumps(d).encode()).decode()\n"
    "  open(sys.argv[3],'w').write('speedscope.loadFileFromBase64(%s,%s)'%(json.dumps('t.chromium.json'),json.dumps(b)))\n"
    "else:\n"
    "  s=open(sys.argv[2]).read(); s=re.sub(r'<style.*?</style>','',s,flags=re.S)\n"
    "  t=[x.strip() for x in re.sub(r'<[^>]+>','\\n',s).replace('&lt;','<').split('\\n') if x.strip()]\n"
    "  for x in t:\n"
    "    if ' (tid ' in x: print('profile', x)\n"
    "  i=t.index('Symbol Name')+1\n"
    "  while i+2<len(t) and re.match(r'^[0-9.]+[a-z]+ \\(',t[i]): print('row', t[i], '|', t[i+1], '|', t[i+2]); i+=3\n";

/* Loads the chromium file into speedscope in headless chromium (its sandwich view: a table of
 * every frame's total and self time) and returns what the page shows (viewer_py's `sandwich`). */
static char *speedscope_view(const char *dir, const char *index, const char *py, const char *json, const char *tid) {
  char js[128], html[128], url[4400], script[4400];
  snprintf(js, sizeof js, "%s/load.js", dir);
  snprintf(html, sizeof html, "%s/view.html", dir);
  char *largv[] = {"/usr/bin/env", "python3", (char *)py, "loader", (char *)json, js, (char *)tid, NULL};
  struct dnt_run r;
  cr_assert_eq(dnt_run_argv(&r, largv, NULL, 60000), 0, "loader: %s", r.err);
  dnt_run_free(&r);
  snprintf(url, sizeof url, "file://%s#localProfilePath=%s&view=sandwich", index, js);
  /* the page loads the script from a file: URL: allowed for file: pages with this switch */
  char *cargv[] = {"/usr/bin/chromium", "--headless", "--no-sandbox", "--disable-gpu", "--allow-file-access-from-files",
                   "--virtual-time-budget=10000", "--dump-dom", url, NULL};
  cr_assert_eq(dnt_run_argv(&r, cargv, NULL, 90000), 0, "chromium: %s", r.err);
  FILE *fp = fopen(html, "w");
  cr_assert(fp);
  fputs(r.out, fp);
  fclose(fp);
  dnt_run_free(&r);
  snprintf(script, sizeof script, "%s", html);
  char *sargv[] = {"/usr/bin/env", "python3", (char *)py, "sandwich", script, NULL};
  cr_assert_eq(dnt_run_argv(&r, sargv, NULL, 60000), 0, "the page has a sandwich table: %s", r.err);
  char *out = strdup(r.out);
  dnt_run_free(&r);
  return out;
}

/* The trace of lib/v6-trace.h, whose threads, stacks and times are known: speedscope's samples
 * come in time order (the file has them out of order), its profiles named after the threads; the
 * Chromium file loads in speedscope, which names its profiles after the process and thread
 * names and nests the frames root first (self time on the leaves, none on the root), also where a
 * frame and its child begin and end together (blocking-work: one stack throughout). */
Test(convert, timelines_in_time_order_and_in_a_real_viewer, .timeout = 180) {
  const char *index = speedscope_index();
  char dir[] = "/tmp/dnt-timeline-XXXXXX";
  cr_assert(mkdtemp(dir));
  char trace[64], py[64], ss[80], chrome[80];
  snprintf(trace, sizeof trace, "%s/t.nettrace", dir);
  snprintf(py, sizeof py, "%s/viewer.py", dir);
  snprintf(ss, sizeof ss, "%s/t.speedscope.json", dir);
  snprintf(chrome, sizeof chrome, "%s/t.chromium.json", dir);
  cr_assert_eq(dnt_write_v6_trace(trace), 0);
  FILE *fp = fopen(py, "w");
  cr_assert(fp);
  fputs(viewer_py, fp);
  fclose(fp);
  struct dnt_run r;
  cr_assert_eq(dnt_run_dntrace(&r, "convert", trace, "--format", "speedscope", NULL), 0, "%s", r.err);
  dnt_run_free(&r);
  cr_assert_eq(dnt_run_dntrace(&r, "convert", trace, "--format", "chromium", NULL), 0, "%s", r.err);
  dnt_run_free(&r);

  /* cpu-work: A B A A B, 2 ms apart: each weighs the time to the next, the two As in a row as one
   * sample (4 ms), the last B none (left out); blocking-work: B B B, 4 ms in all */
  char *oargv[] = {"/usr/bin/env", "python3", py, "order", ss, NULL};
  cr_assert_eq(dnt_run_argv(&r, oargv, NULL, 60000), 0, "%s", r.err);
  const char *ra = V6_ROOT ";" V6_LEAF_A, *rb = V6_ROOT ";" V6_LEAF_B;
  char want[512];
  snprintf(want, sizeof want, "cpu-work:%s=2,%s=2,%s=4|blocking-work:%s=4\n", ra, rb, ra, rb);
  cr_assert_str_eq(r.out, want);
  dnt_run_free(&r);

  /* the whole file: both threads by name; cpu-work shown: A 6 of its 8 ms (0-2, 4-8), B 2 (2-4;
   * the last B, at 8, stands for no time), all under the root */
  char *view = speedscope_view(dir, index, py, chrome, NULL);
  cr_assert(strstr(view, "profile t.nettrace (pid 4321), cpu-work (tid 4001)\n"), "%s", view);
  cr_assert(strstr(view, "profile t.nettrace (pid 4321), blocking-work (tid 4002)\n"), "%s", view);
  cr_assert(strstr(view, "row 6.00ms (75%) | 6.00ms (75%) | " V6_LEAF_A "\n"), "%s", view);
  cr_assert(strstr(view, "row 2.00ms (25%) | 2.00ms (25%) | " V6_LEAF_B "\n"), "%s", view);
  cr_assert(strstr(view, "row 8.00ms (100%) | 0.00ns (<0.01%) | " V6_ROOT "\n"), "%s", view);
  free(view);

  /* blocking-work alone (10 to 14 ms): root and leaf begin and end together; the root is still
   * the root */
  view = speedscope_view(dir, index, py, chrome, "4002");
  cr_assert(strstr(view, "row 4.00ms (100%) | 4.00ms (100%) | " V6_LEAF_B "\n"), "%s", view);
  cr_assert(strstr(view, "row 4.00ms (100%) | 0.00ns (<0.01%) | " V6_ROOT "\n"), "%s", view);
  free(view);

  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  cr_assert_eq(system(cmd), 0);
}
