/* dntrace convert on a trace of the real sample target: the folded and speedscope outputs carry
 * every sample of the file (counted by the independent reader), and the speedscope file passes a
 * strict check of the format's rules. */
#include <criterion/criterion.h>
#include <libxml/parser.h>
#include <libxml/tree.h>
#include <stdio.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/nt-scan.h"
#include "lib/run.h"
#include "lib/target-cr.h"
#include "lib/target.h"

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

  /* folded, default name */
  cr_assert_eq(dnt_run_dntrace(&r, "convert", trace, "--format", "folded", NULL), 0, "%s", r.err);
  dnt_run_free(&r);
  FILE *fp = fopen(folded, "r");
  cr_assert(fp, "%s written", folded);
  char line[8192];
  uint64_t sum = 0;
  int countprimes = 0;
  while (fgets(line, sizeof line, fp)) {
    char *sp = strrchr(line, ' ');
    cr_assert(sp && strncmp(line, "Thread ", 7) == 0, "folded line: %s", line);
    sum += strtoull(sp + 1, NULL, 10);
    countprimes |= strstr(line, ";Sample!Sample.CpuWork.CountPrimes ") != NULL;
  }
  fclose(fp);
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
  /* the weights are the samples times the sampling interval the Trace object announces */
  double want_ms = (double)samples * s.sampling_ns / 1e6;
  cr_assert_gt(s.sampling_ns, 0);
  cr_assert(total_ms > want_ms * 0.9999 && total_ms < want_ms * 1.0001, "weights %.3f ms, expected %.3f ms",
            total_ms, want_ms);
  dnt_run_free(&r);
  cr_assert_eq(dnt_run_dntrace(&r, "convert", trace, "--format", "pdf", NULL), 2);
  dnt_run_free(&r);

  /* Chromium trace events: complete ("X") events, non-negative, on the threads of the samples */
  static const char *chromium_check =
      "import json,sys\n"
      "d=json.load(open(sys.argv[1])); ev=d['traceEvents']; assert ev\n"
      "for e in ev:\n"
      "  assert e['ph']=='X' and isinstance(e['name'],str) and e['dur']>=0 and e['ts']>=0\n"
      "  assert isinstance(e['tid'],int) and isinstance(e['pid'],int)\n"
      "print(len(set(e['tid'] for e in ev)), sum(1 for e in ev if e['name'].endswith('CountPrimes')))\n";
  char chromium_json[80];
  snprintf(chromium_json, sizeof chromium_json, "%s/t.chromium.json", dir);
  cr_assert_eq(dnt_run_dntrace(&r, "convert", trace, "--format", "chromium", NULL), 0, "%s", r.err);
  dnt_run_free(&r);
  fp = fopen(py, "w");
  fputs(chromium_check, fp);
  fclose(fp);
  char *cargv2[] = {"/usr/bin/env", "python3", py, chromium_json, NULL};
  cr_assert_eq(dnt_run_argv(&r, cargv2, NULL, 60000), 0, "chromium check failed: %s", r.err);
  int threads = 0, countprimes_events = 0;
  cr_assert_eq(sscanf(r.out, "%d %d", &threads, &countprimes_events), 2, "%s", r.out);
  cr_assert_geq(threads, 2, "several threads: %s", r.out);
  cr_assert_gt(countprimes_events, 0, "CountPrimes appears on the timeline");
  dnt_run_free(&r);

  /* the flame graph: well-formed SVG, one frame per node, thread towers spanning the width */
  char svg[80];
  snprintf(svg, sizeof svg, "%s/t.svg", dir);
  cr_assert_eq(dnt_run_dntrace(&r, "convert", trace, "--format", "flamegraph", NULL), 0, "%s", r.err);
  dnt_run_free(&r);
  xmlDocPtr doc = xmlReadFile(svg, NULL, XML_PARSE_NONET);
  cr_assert(doc, "%s parses as XML", svg);
  xmlNodePtr root = xmlDocGetRootElement(doc);
  cr_assert_str_eq((const char *)root->name, "svg");
  int frames = 0, found = 0;
  double thread_width = 0;
  for (xmlNodePtr n = root->children; n; n = n->next) {
    if (n->type != XML_ELEMENT_NODE || strcmp((const char *)n->name, "g") != 0) continue;
    frames++;
    xmlChar *lvl = xmlGetProp(n, BAD_CAST "data-l"), *w = xmlGetProp(n, BAD_CAST "data-w");
    xmlChar *title = xmlNodeGetContent(n->children);
    cr_assert(title && strstr((const char *)title, " samples, "), "every frame has a tooltip: %s", title);
    if (strcmp((const char *)lvl, "1") == 0) thread_width += atof((const char *)w);
    found |= strstr((const char *)title, "Sample!Sample.CpuWork.CountPrimes") != NULL;
    xmlFree(lvl);
    xmlFree(w);
    xmlFree(title);
  }
  xmlFreeDoc(doc);
  cr_assert_gt(frames, 10);
  cr_assert(found, "CountPrimes has a frame");
  cr_assert(thread_width > 1179 && thread_width < 1181, "the threads span the graph: %.2f", thread_width);

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
    char *cargv[] = {(char *)chromium, "--headless", "--no-sandbox", "--disable-gpu", "--window-size=1200,800",
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
