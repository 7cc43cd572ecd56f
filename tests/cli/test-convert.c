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

#include "../lib/env-cr.h"
#include "../lib/record-cr.h"
#include "../lib/nt-scan.h"
#include "../lib/run.h"
#include "../lib/target-cr.h"
#include "../lib/target.h"
#include "../lib/v6-trace.h"
#include "../lib/ntr-writer.h"
#include "dnt-profile.h"

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

static void write_text(const char *path, const char *text) {
  FILE *fp = fopen(path, "w");
  cr_assert(fp, "%s", path);
  fputs(text, fp);
  cr_assert_eq(fclose(fp), 0, "%s", path);
}

/* Python for the checks below: `order FILE` prints each speedscope profile as
 * "name:stack=weight,..." (a stack as its frame names root first, ';' between them), profiles
 * separated by '|'; `loader JSON JS [TID]` writes the script speedscope's localProfilePath loads
 * (the JSON, only thread TID's events when given); `sandwich HTML` prints the profile names of the
 * page's profile list and the rows of its sandwich table (total, self, name), one a line.
 *
 * The browser: headless Chromium driven over its DevTools pipe (--remote-debugging-pipe: commands
 * on its fd 3, answers on its fd 4, JSON messages ended by a NUL), so that the test waits for
 * what the page does, not for a budget of (virtual) time. `view URL HTML` loads speedscope and
 * writes the page's DOM once its sandwich table shows a row: speedscope renders those rows only
 * in an animation frame (its list measures its viewport there), and a loaded machine delays
 * frames, so a DOM dumped at a moment of time can show the profile without its rows. The page is
 * watched (a MutationObserver) for a row, whatever its numbers (the test reads them), with a
 * ceiling of 60 s from the page's load that only a hang reaches; it fails with "no rows rendered"
 * and what the page said (console, exceptions, a dialog), distinct from wrong numbers.
 * `shot SVG PNG` takes a screenshot of the loaded SVG (1400x900) and prints its width, height and
 * the most pixels of one line that are neither white nor the SVG's background (its first rect).
 * Chromium's every answer comes within 150 s of its start, or the helper fails saying so. */
/* A flame graph row's tooltip names a thread: "Thread 812 (...", "Main (812) (..." or
 * ".NET TP Worker \xc3\x97" "3 (...". */
static int thread_label(const char *title) {
  unsigned long long id;
  char tail;
  if (sscanf(title, "Thread %llu %c", &id, &tail) == 2 && tail == '(') return 1;
  const char *paren = strstr(title, " (");
  if (paren && paren[2] >= '0' && paren[2] <= '9' && strspn(paren + 2, "0123456789") > 0 &&
      paren[2 + strspn(paren + 2, "0123456789")] == ')')
    return 1;
  return strstr(title, " \xc3\x97") != NULL;
}

static const char *viewer_py =
    "import base64,fcntl,json,os,re,select,struct,subprocess,sys,tempfile,time,zlib\n"
    "def chromium(url,extra):\n"
    "  t0=time.monotonic(); hang=150; said=[]; held=[]; buf=[b'']; n=[0]\n"
    "  def high(fd): h=fcntl.fcntl(fd,fcntl.F_DUPFD_CLOEXEC,10); os.close(fd); return h\n"
    "  cr,cw=map(high,os.pipe()); rr,rw=map(high,os.pipe()); err=tempfile.TemporaryFile()\n"
    "  p=subprocess.Popen(['/usr/bin/chromium','--headless','--no-sandbox','--disable-gpu','--remote-debugging-pipe']+extra,\n"
    "    stdin=subprocess.DEVNULL,stdout=subprocess.DEVNULL,stderr=err,close_fds=False,preexec_fn=lambda:(os.dup2(cr,3),os.dup2(rw,4)))\n"
    "  os.close(cr); os.close(rw)\n"
    "  def fail(why,own=False):\n"
    "    p.kill(); p.wait(); err.seek(0)\n"
    "    sys.stderr.write('%s (%.1f s after chromium started); the page said: %s\\n'%(why,time.monotonic()-t0,' / '.join(said[-6:]) or 'nothing'))\n"
    "    if own: sys.stderr.write('chromium said: %s\\n'%err.read().decode(errors='replace')[-1500:])\n"
    "    sys.exit(1)\n"
    "  def read():\n"
    "    while b'\\0' not in buf[0]:\n"
    "      left=t0+hang-time.monotonic()\n"
    "      if left<=0 or not select.select([rr],[],[],left)[0]: fail('chromium: no answer within %d s (a hang)'%hang,True)\n"
    "      d=os.read(rr,1<<20)\n"
    "      if not d: fail('chromium exited (status %s)'%p.wait(),True)\n"
    "      buf[0]+=d\n"
    "    m,buf[0]=buf[0].split(b'\\0',1); m=json.loads(m); ev=m.get('method'); a=m.get('params',{})\n"
    "    if ev=='Runtime.exceptionThrown': said.append('exception: %s'%a['exceptionDetails'].get('exception',{}).get('description',a['exceptionDetails']['text']))\n"
    "    elif ev=='Runtime.consoleAPICalled': said.append('console.%s: %s'%(a['type'],' '.join(str(x.get('value',x.get('description',''))) for x in a['args'])))\n"
    "    elif ev=='Log.entryAdded' and a['entry']['level']=='error' and 'WebGL' not in a['entry']['text']: said.append('log: %s'%a['entry']['text'])\n"
    "    elif ev=='Page.javascriptDialogOpening': said.append('dialog: %s'%a['message']); fail('the page opened a dialog')\n"
    "    return m\n"
    "  def call(method,params={},session=None):\n"
    "    n[0]+=1; m={'id':n[0],'method':method,'params':params}\n"
    "    if session: m['sessionId']=session\n"
    "    os.write(cw,json.dumps(m).encode()+b'\\0')\n"
    "    while True:\n"
    "      m=read()\n"
    "      if m.get('id')==n[0]:\n"
    "        if 'error' in m: fail('%s: %s'%(method,m['error']))\n"
    "        return m['result']\n"
    "      held.append(m)\n"
    "  tid=call('Target.createTarget',{'url':'about:blank'})['targetId']\n"
    "  ss=call('Target.attachToTarget',{'targetId':tid,'flatten':True})['sessionId']\n"
    "  for d in ('Page.enable','Runtime.enable','Log.enable'): call(d,{},ss)\n"
    "  call('Page.setLifecycleEventsEnabled',{'enabled':True},ss)\n"
    "  nav=call('Page.navigate',{'url':url},ss)\n"
    "  if nav.get('errorText'): fail('cannot load %s: %s'%(url,nav['errorText']))\n"
    "  loaded=lambda m:m.get('method')=='Page.lifecycleEvent' and m['params']['name']=='load' and m['params']['loaderId']==nav['loaderId']\n"
    "  if not any(loaded(m) for m in held):\n"
    "    while not loaded(read()): pass\n"
    "  def close():\n"
    "    os.write(cw,json.dumps({'id':0,'method':'Browser.close'}).encode()+b'\\0')\n"
    "    try: p.wait(timeout=max(1,t0+hang-time.monotonic()))\n"
    "    except subprocess.TimeoutExpired: p.kill(); p.wait()\n"
    "  return lambda method,params={}:call(method,params,ss),fail,close\n"
    "if sys.argv[1]=='order':\n"
    "  d=json.load(open(sys.argv[2])); fr=[f['name'] for f in d['shared']['frames']]\n"
    "  print('|'.join(p['name']+':'+','.join(';'.join(fr[i] for i in s)+'=%g'%w for s,w in zip(p['samples'],p['weights'])) for p in d['profiles']))\n"
    "elif sys.argv[1]=='loader':\n"
    "  d=json.load(open(sys.argv[2]))\n"
    "  if len(sys.argv)>4: d['traceEvents']=[e for e in d['traceEvents'] if e['tid'] in (0,int(sys.argv[4]))]\n"
    "  b=base64.b64encode(json.dumps(d).encode()).decode()\n"
    "  open(sys.argv[3],'w').write('speedscope.loadFileFromBase64(%s,%s)'%(json.dumps('t.chromium.json'),json.dumps(b)))\n"
    "elif sys.argv[1]=='sandwich':\n"
    "  s=open(sys.argv[2]).read(); s=re.sub(r'<style.*?</style>','',s,flags=re.S)\n"
    "  t=[x.strip() for x in re.sub(r'<[^>]+>','\\n',s).replace('&lt;','<').split('\\n') if x.strip()]\n"
    "  for x in t:\n"
    "    if ' (tid ' in x: print('profile', x)\n"
    "  i=t.index('Symbol Name')+1\n"
    "  while i+2<len(t) and re.match(r'^[0-9.]+[a-z]+ \\(',t[i]): print('row', t[i], '|', t[i+1], '|', t[i+2]); i+=3\n"
    "elif sys.argv[1]=='view':\n"
    "  call,fail,close=chromium(sys.argv[2],['--allow-file-access-from-files'])\n"
    "  js=('new Promise(done=>{const rows=()=>{const h=[...document.querySelectorAll(\"th\")].find(e=>e.textContent.trim()==\"Symbol Name\");'\n"
    "      'return !!h&&[...document.querySelectorAll(\"tr\")].some(r=>r.querySelector(\"td\")&&h.compareDocumentPosition(r)&Node.DOCUMENT_POSITION_FOLLOWING);};'\n"
    "      'const check=()=>{if(rows()){mo.disconnect();done(document.documentElement.outerHTML);}'\n"
    "      'else if(/Something went wrong/.test(document.body.textContent)){mo.disconnect();done(\"error: \"+document.body.innerText);}};'\n"
    "      'const mo=new MutationObserver(check);mo.observe(document,{subtree:true,childList:true,characterData:true,attributes:true});'\n"
    "      'setTimeout(()=>{mo.disconnect();done(\"\");},60000);check();})')\n"
    "  v=call('Runtime.evaluate',{'expression':js,'awaitPromise':True,'returnByValue':True})['result'].get('value')\n"
    "  if not v: fail('no rows rendered: speedscope showed no row of its sandwich table within 60 s of the page\\'s load')\n"
    "  if v.startswith('error: '): fail('no rows rendered: speedscope could not load the profile (%s)'%' '.join(v[7:].split()))\n"
    "  open(sys.argv[3],'w').write(v); close()\n"
    "elif sys.argv[1]=='shot':\n"
    "  call,fail,close=chromium('file://'+sys.argv[2],['--window-size=1400,900'])\n"
    "  png=base64.b64decode(call('Page.captureScreenshot',{'format':'png'})['data']); close()\n"
    "  open(sys.argv[3],'wb').write(png)\n"
    "  assert png[:8]==b'\\x89PNG\\r\\n\\x1a\\n','not a PNG'\n"
    "  i=8; idat=b''\n"
    "  while i<len(png):\n"
    "    k,=struct.unpack('>I',png[i:i+4]); t=png[i+4:i+8]; d=png[i+8:i+8+k]; i+=12+k\n"
    "    if t==b'IHDR': w,h,depth,ct,_,_,il=struct.unpack('>IIBBBBB',d)\n"
    "    elif t==b'IDAT': idat+=d\n"
    "  assert depth==8 and ct in (2,6) and not il,'an 8-bit RGB(A) PNG'\n"
    "  bpp=3 if ct==2 else 4; raw=zlib.decompress(idat); stride=w*bpp; prev=bytearray(stride); q=0; widest=0\n"
    "  bg={b'\\xff\\xff\\xff',bytes(map(int,re.search(r'<rect [^>]*fill=\"rgb\\((\\d+),(\\d+),(\\d+)\\)\"',open(sys.argv[2]).read()).groups()))}\n"
    "  for y in range(h):\n"
    "    f=raw[q]; line=bytearray(raw[q+1:q+1+stride]); q+=1+stride\n"
    "    if f==2: line=bytearray((a+b)&255 for a,b in zip(line,prev))\n"
    "    elif f in (1,3,4):\n"
    "      for x in range(stride):\n"
    "        a=line[x-bpp] if x>=bpp else 0; up=prev[x]; c=prev[x-bpp] if x>=bpp else 0\n"
    "        if f==1: line[x]=(line[x]+a)&255\n"
    "        elif f==3: line[x]=(line[x]+(a+up)//2)&255\n"
    "        else:\n"
    "          pa=abs(up-c); pb=abs(a-c); pc=abs(a+up-2*c)\n"
    "          line[x]=(line[x]+(a if pa<=pb and pa<=pc else up if pb<=pc else c))&255\n"
    "    widest=max(widest,sum(bytes(line[x:x+3]) not in bg for x in range(0,stride,bpp))); prev=line\n"
    "  print(w,h,widest)\n";
/* more than the helper's own ceiling (150 s), so that it says what it waited for */
#define VIEWER_CEILING_MS 180000

/* The inner ceilings: the sample's start and its cpu-work's first 0.1 s of CPU (DNT_HANG_MS each,
 * only a hang), at most 126 s of recording, and the screenshot (VIEWER_CEILING_MS); one of them at
 * most is reached, the test's assertion ending it, and a healthy run under load takes about a
 * minute. */
Test(convert, folded_and_speedscope_carry_every_sample, .timeout = 480) {
  DNT_REQUIRE_TARGET();
  if (system("command -v python3 >/dev/null 2>&1") != 0) cr_skip_test("needs python3 for the strict JSON check");
  dnt_target t;
  dnt_target_opts o = {.mode = DNT_TARGET_PLAIN, .wait_socket = 1};
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
  /* cpu-work in CountPrimes, and sampled there: what the assertions on CountPrimes below need,
   * whatever share of the CPU the machine gives the sample */
  pid_t cpu_tid = dnt_wait_thread_ran(t.pid, "cpu-work", 0.1);
  static struct nt_scan s;
  dnt_collect_until(t.pid, trace, NULL, "Microsoft-DotNETCore-SampleProfiler", 0, cpu_tid, 10, &s);
  dnt_target_stop(&t);
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
  cr_assert_eq(dnt_run_argv(&r, argv, NULL, DNT_HANG_MS), 0, "speedscope check failed: %s", r.err);
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
  cr_assert_eq(dnt_run_argv(&r, cargv2, NULL, DNT_HANG_MS), 0, "chromium check failed: %s", r.err);
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
    /* drawn at its own size (issue 28 item 2): a deep stack scrolls, its labels stay readable */
    xmlChar *width = xmlGetProp(root, BAD_CAST "width"), *height = xmlGetProp(root, BAD_CAST "height");
    xmlChar *box = xmlGetProp(root, BAD_CAST "viewBox");
    char want_box[64];
    snprintf(want_box, sizeof want_box, "0 0 1200 %s", height ? (const char *)height : "?");
    cr_expect_str_eq((const char *)width, "1200", "1200 pixels wide, as flamegraph.pl draws");
    cr_expect_str_eq((const char *)box, want_box, "its own size, unscaled");
    xmlFree(width);
    xmlFree(height);
    xmlFree(box);
    int frames = 0, countprimes_frames = 0, thread_rows = 0, neutral_rows = 0, short_label = 0, titled = 0;
    int wide = 0, labelled = 0;
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
      /* the label is in the file, not only made by the script (an <img> runs none: item 3) */
      if (atof((const char *)w) >= 6 + 7 * 3) {
        wide++;
        for (xmlNodePtr c = n->children; c; c = c->next)
          if (c->type == XML_ELEMENT_NODE && strcmp((const char *)c->name, "text") == 0) {
            xmlChar *shown = xmlNodeGetContent(c);
            labelled += shown && shown[0];
            xmlFree(shown);
          }
      }
      static const char countprimes_title[] = "Sample!Sample.CpuWork.CountPrimes (";
      if (strncmp((const char *)title, countprimes_title, sizeof countprimes_title - 1) == 0) {
        countprimes_frames++;
        short_label |= sname && strcmp((const char *)sname, "CpuWork.CountPrimes") == 0;
      }
      /* a thread row is labelled "Thread 812", "Main (812)" or ".NET TP Worker ×3" (one tower
       * for threads of one name); rows under it are frames */
      int level1 = strcmp((const char *)lvl, "1") == 0;
      if (level1 && thread_label((const char *)title)) thread_rows++;
      for (xmlNodePtr c = n->children; c; c = c->next) {
        xmlChar *fill = c->type == XML_ELEMENT_NODE && strcmp((const char *)c->name, "rect") == 0
                            ? xmlGetProp(c, BAD_CAST "fill")
                            : NULL;
        neutral_rows += level1 && fill && strcmp((const char *)fill, "rgb(205,205,220)") == 0;
        xmlFree(fill);
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
    cr_expect(wide > 0 && labelled == wide, "every frame wide enough for a label has it in the file (%d of %d)",
              labelled, wide);
    if (by_thread) {
      cr_expect_geq(thread_rows, 2, "one tower per thread");
      cr_expect_eq(neutral_rows, thread_rows, "thread rows in the neutral colour");
      cr_expect_geq(countprimes_frames, 1, "CountPrimes has a frame");
    } else {
      cr_expect_eq(thread_rows, 0, "merged: no thread rows");
      cr_expect_eq(neutral_rows, 0, "merged: no row in the threads' colour");
      cr_expect_eq(countprimes_frames, 1, "merged: CountPrimes's path once (%d frames)", countprimes_frames);
    }
  }

  /* it renders: headless Chromium, driven over its DevTools pipe, shows it once the page has
   * loaded (its script, which refits the labels, has run): a line of the screenshot is covered by
   * frames across the graph's width, as the first row spans it. A blank page (whose PNG weighs
   * more than 5000 bytes too) or one that shows an error has no such line. */
  if (access("/usr/bin/chromium", X_OK) != 0) {
    const char *ci = getenv("CI");
    if (ci && strcmp(ci, "true") == 0) cr_assert_fail("no chromium to render the flame graph (./bootstrap.sh installs it)");
  } else {
    char png[80], vpy[80];
    snprintf(png, sizeof png, "%s/t.png", dir);
    snprintf(vpy, sizeof vpy, "%s/viewer.py", dir);
    write_text(vpy, viewer_py);
    char *sargv[] = {"/usr/bin/env", "python3", vpy, "shot", svg, png, NULL};
    cr_assert_eq(dnt_run_argv(&r, sargv, NULL, VIEWER_CEILING_MS), 0, "chromium shows the flame graph: %s", r.err);
    int w = 0, h = 0, widest = 0;
    cr_assert_eq(sscanf(r.out, "%d %d %d", &w, &h, &widest), 3, "%s", r.out);
    /* the graph is drawn at its own size: its first row spans 1180 of its 1200 pixels, at the
     * window's left, whatever the window's width */
    cr_assert_geq(widest, 1100,
                  "a line of the %dx%d screenshot %s covered by frames across the graph's 1180 pixels: at most %d", w,
                  h, png, widest);
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
/* .timeout: above one DNT_HANG_MS ceiling (only a hang reaches it; a failed step ends the test)
 * and a loaded healthy run */
Test(convert, an_unwritable_flame_graph_is_one_line_with_its_reason, .timeout = 240) {
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
  cr_assert_eq(dnt_run_argv(&r, argv, NULL, DNT_HANG_MS), 1, "out: %s err: %s", r.out, r.err);
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

/* Loads the chromium file into speedscope in headless Chromium (its sandwich view: a table of
 * every frame's total and self time) and returns what the page shows (viewer_py's `sandwich`),
 * once it shows a row (viewer_py's `view`). */
static char *speedscope_view(const char *dir, const char *index, const char *py, const char *json, const char *tid) {
  char js[128], html[128], url[4400];
  snprintf(js, sizeof js, "%s/load.js", dir);
  snprintf(html, sizeof html, "%s/view.html", dir);
  char *largv[] = {"/usr/bin/env", "python3", (char *)py, "loader", (char *)json, js, (char *)tid, NULL};
  struct dnt_run r;
  cr_assert_eq(dnt_run_argv(&r, largv, NULL, DNT_HANG_MS), 0, "loader: %s", r.err);
  dnt_run_free(&r);
  /* the page loads the script from a file: URL (allowed with --allow-file-access-from-files) */
  snprintf(url, sizeof url, "file://%s#localProfilePath=%s&view=sandwich", index, js);
  char *vargv[] = {"/usr/bin/env", "python3", (char *)py, "view", url, html, NULL};
  cr_assert_eq(dnt_run_argv(&r, vargv, NULL, VIEWER_CEILING_MS), 0, "speedscope in chromium: %s", r.err);
  dnt_run_free(&r);
  char *sargv[] = {"/usr/bin/env", "python3", (char *)py, "sandwich", html, NULL};
  cr_assert_eq(dnt_run_argv(&r, sargv, NULL, DNT_HANG_MS), 0, "the page has a sandwich table: %s", r.err);
  char *out = strdup(r.out);
  dnt_run_free(&r);
  return out;
}

/* The trace of lib/v6-trace.h, whose threads, stacks and times are known: speedscope's samples
 * come in time order (the file has them out of order), its profiles named after the threads; the
 * Chromium file loads in speedscope, which names its profiles after the process and thread
 * names and nests the frames root first (self time on the leaves, none on the root), also where a
 * frame and its child begin and end together (blocking-work: one stack throughout). */
/* The inner ceilings: two pages in Chromium (VIEWER_CEILING_MS each; a failed one ends the test),
 * and python and dntrace on a small file (DNT_HANG_MS, only a hang); a healthy run under load
 * takes well under a minute. */
Test(convert, timelines_in_time_order_and_in_a_real_viewer, .timeout = 360) {
  const char *index = speedscope_index();
  char dir[] = "/tmp/dnt-timeline-XXXXXX";
  cr_assert(mkdtemp(dir));
  char trace[64], py[64], ss[80], chrome[80];
  snprintf(trace, sizeof trace, "%s/t.nettrace", dir);
  snprintf(py, sizeof py, "%s/viewer.py", dir);
  snprintf(ss, sizeof ss, "%s/t.speedscope.json", dir);
  snprintf(chrome, sizeof chrome, "%s/t.chromium.json", dir);
  cr_assert_eq(dnt_write_v6_trace(trace), 0);
  write_text(py, viewer_py);
  struct dnt_run r;
  cr_assert_eq(dnt_run_dntrace(&r, "convert", trace, "--format", "speedscope", NULL), 0, "%s", r.err);
  dnt_run_free(&r);
  cr_assert_eq(dnt_run_dntrace(&r, "convert", trace, "--format", "chromium", NULL), 0, "%s", r.err);
  dnt_run_free(&r);

  /* cpu-work: A B A A B, 2 ms apart: each weighs the time to the next, the two As in a row as one
   * sample (4 ms), the last B none (left out); blocking-work: B B B, 4 ms in all */
  char *oargv[] = {"/usr/bin/env", "python3", py, "order", ss, NULL};
  cr_assert_eq(dnt_run_argv(&r, oargv, NULL, DNT_HANG_MS), 0, "%s", r.err);
  const char *ra = V6_ROOT ";" V6_LEAF_A, *rb = V6_ROOT ";" V6_LEAF_B;
  char want[512];
  snprintf(want, sizeof want, "cpu-work (4001):%s=2,%s=2,%s=4|blocking-work (4002):%s=4\n", ra, rb, ra, rb);
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

/* A flame graph's short labels (what a narrow frame shows first) of names as perf's symbols and
 * the trace name them, on a made-up profile: the type and method of a managed frame, a native
 * function without its library, and a versioned ELF symbol without its version (issue 28 item
 * 12: pthread_cond_signal@@GLIBC_2.3.2 was labelled "3.2"). */
static int name_frame(void *ud, uint64_t ip, int leaf, char *buf, size_t cap) {
  (void)ud, (void)leaf;
  static const char *const names[] = {"libc.so.6!pthread_cond_signal@@GLIBC_2.3.2", "libc.so.6!__futex_wait",
                                      "Sample!Sample.CpuWork.CountPrimes"};
  if (ip < 1 || ip > 3) return 0;
  snprintf(buf, cap, "%s", names[ip - 1]);
  return 1;
}

Test(convert, flame_graph_short_labels) {
  struct dnt_profile *p = dnt_profile_new();
  cr_assert(p);
  cr_assert_eq(dnt_profile_add_resolver(p, name_frame, NULL), 0);
  const uint64_t stack[] = {1, 2, 3}; /* leaf first */
  dnt_profile_add_stack(p, 7, 0, stack, 3, 1.0);
  cr_assert_eq(dnt_profile_finish(p), 0);
  char dir[] = "/tmp/dnt-fgshort-XXXXXX", svg[64], msg[256];
  cr_assert(mkdtemp(dir));
  snprintf(svg, sizeof svg, "%s/s.svg", dir);
  struct dnt_flamegraph_opts o = {.title = "short"};
  cr_assert_eq(dnt_flamegraph_write(p, &o, svg, msg, sizeof msg), 0, "%s", msg);
  dnt_profile_free(p);
  xmlDocPtr doc = xmlReadFile(svg, NULL, XML_PARSE_NONET);
  cr_assert(doc);
  static const char *const want[][2] = {{"libc.so.6!pthread_cond_signal@@GLIBC_2.3.2", "pthread_cond_signal"},
                                        {"libc.so.6!__futex_wait", "__futex_wait"},
                                        {"Sample!Sample.CpuWork.CountPrimes", "CpuWork.CountPrimes"}};
  int found = 0;
  for (xmlNodePtr n = xmlDocGetRootElement(doc)->children; n; n = n->next) {
    if (n->type != XML_ELEMENT_NODE || strcmp((const char *)n->name, "g") != 0) continue;
    xmlChar *title = xmlNodeGetContent(n->children), *sname = xmlGetProp(n, BAD_CAST "data-s");
    for (int k = 0; k < 3; k++)
      if (title && strncmp((const char *)title, want[k][0], strlen(want[k][0])) == 0 &&
          title[strlen(want[k][0])] == ' ') {
        cr_expect_str_eq((const char *)sname, want[k][1], "%s", title);
        found++;
      }
    xmlFree(title);
    xmlFree(sname);
  }
  xmlFreeDoc(doc);
  cr_expect_eq(found, 3, "each frame found");
  unlink(svg);
  rmdir(dir);
}

/* A trace read from standard input is converted to standard output (issue 28 item 14: it was
 * written to a file named '-.folded' in the working directory). */
Test(convert, from_stdin_to_stdout, .timeout = 120) {
  char trace[4096], dir[] = "/tmp/dnt-convstdin-XXXXXX", cmd[8400];
  corpus_trace(trace, sizeof trace);
  cr_assert(mkdtemp(dir));
  snprintf(cmd, sizeof cmd, "cd '%s' && exec '%s' convert - --format folded < '%s'", dir, dnt_bin(), trace);
  char *const argv[] = {"/bin/sh", "-c", cmd, NULL};
  struct dnt_run r;
  cr_assert_eq(dnt_run_argv(&r, argv, NULL, DNT_HANG_MS), 0, "%s", r.err);
  cr_expect_eq(strncmp(r.out, "Thread ", 7), 0, "folded stacks on stdout: %.200s", r.out);
  dnt_run_free(&r);
  snprintf(cmd, sizeof cmd, "%s/-.folded", dir);
  cr_expect_neq(access(cmd, F_OK), 0, "no file named '-.folded'");
  unlink(cmd);
  /* -o DIR: the name convert chooses (FILE's, with the format's extension), inside it (issue 28
   * item 22) */
  cr_assert_eq(dnt_run_dntrace(&r, "convert", trace, "--format", "folded", "-o", dir, NULL), 0, "%s", r.err);
  dnt_run_free(&r);
  snprintf(cmd, sizeof cmd, "%s/only_managed_samples.folded", dir);
  cr_expect_eq(access(cmd, F_OK), 0, "%s written", cmd);
  unlink(cmd);
  rmdir(dir);
}

/* `convert -o - | head`: the reader went away, and what was not written was not wanted: exit 0,
 * no error (issue 28 item 16: "cannot write to standard output: Broken pipe", exit 1). The trace's
 * output is far beyond a pipe's buffer, so the writer meets the closed pipe in every format. */
Test(convert, a_closed_pipe_ends_quietly, .timeout = 300) {
  char corpus[4096], trace[4200], cmd[9000];
  corpus_dir(corpus, sizeof corpus);
  snprintf(trace, sizeof trace, "%s/microsoft__perfview/HeartRateMonitor.10068.nettrace", corpus);
  static const char *const formats[] = {"folded", "chromium", "speedscope", "flamegraph"};
  for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++) {
    snprintf(cmd, sizeof cmd, "{ '%s' convert '%s' --format %s -o -; echo \"dntrace=$?\" >&2; } | head -c 100 >/dev/null",
             dnt_bin(), trace, formats[i]);
    char *const argv[] = {"/bin/sh", "-c", cmd, NULL};
    struct dnt_run r;
    cr_assert_eq(dnt_run_argv(&r, argv, NULL, DNT_HANG_MS), 0, "%s", r.err);
    cr_expect_str_eq(r.err, "dntrace=0\n", "%s: quiet, exit 0", formats[i]);
    dnt_run_free(&r);
  }
}

/* The flame graph's title counts the samples as report does (issue 28 item 20): a thread's last
 * sample stands for no time and is not drawn, but it is a sample of the trace. Two threads here. */
Test(convert, flame_graph_title_counts_as_report, .timeout = 120) {
  char corpus[4096], trace[4200], dir[] = "/tmp/dnt-fgcount-XXXXXX", svg[64];
  corpus_dir(corpus, sizeof corpus);
  snprintf(trace, sizeof trace, "%s/microsoft__perfview/HeartRateMonitor.10068.nettrace", corpus);
  cr_assert(mkdtemp(dir));
  snprintf(svg, sizeof svg, "%s/h.svg", dir);
  struct dnt_run r;
  cr_assert_eq(dnt_run_dntrace(&r, "report", trace, NULL), 0, "%s", r.err);
  unsigned long long reported = 0, drawn = 0;
  cr_assert_eq(sscanf(r.out, "%llu samples on ", &reported), 1, "%s", r.out);
  dnt_run_free(&r);
  cr_assert_eq(dnt_run_dntrace(&r, "convert", trace, "--format", "flamegraph", "-o", svg, NULL), 0, "%s", r.err);
  dnt_run_free(&r);
  FILE *fp = fopen(svg, "r");
  cr_assert(fp);
  static char text[1 << 20];
  size_t n = fread(text, 1, sizeof text - 1, fp);
  fclose(fp);
  text[n] = '\0';
  const char *in = strstr(text, " ms in ");
  cr_assert(in && sscanf(in, " ms in %llu samples", &drawn) == 1, "a title with its samples");
  cr_expect_eq(drawn, reported, "the title's %llu samples, report's %llu", drawn, reported);
  unlink(svg);
  rmdir(dir);
}

/* speedscope as TraceEvent writes it (issue 28 item 24): each thread's profile starts where its
 * first sample is in the trace (startValue, in ms from the trace's start), and the profile shown
 * first is the busiest thread's, not the first thread's. A written trace: thread 1 sampled twice
 * from 1 ms on (1 ms of time), thread 2 from 5 ms on, ten times (9 ms); the clock counts
 * microseconds. */
Test(convert, speedscope_places_threads_and_opens_the_busiest) {
  char dir[] = "/tmp/dnt-ssplace-XXXXXX", trace[64], out[64];
  cr_assert(mkdtemp(dir));
  snprintf(trace, sizeof trace, "%s/t.nettrace", dir);
  snprintf(out, sizeof out, "%s/t.speedscope.json", dir);
  ntrw w;
  ntrw_trace t = {1000, 1000000, 8, 4321, 2, 1000000, NULL, 0};
  ntrw_md md = {1, "Microsoft-DotNETCore-SampleProfiler", 0, "ThreadSample", 0, 0, 0, -1, NULL, 0, 0, 0};
  static const uint64_t frames[] = {0x1100, 0x9000};
  const uint64_t *const stacks[] = {frames};
  const uint32_t nframes[] = {2};
  static const uint8_t managed[4] = {2, 0, 0, 0};
  ntrw_init(&w, 0);
  ntrw_trace_hdr(&w, &t);
  ntrw_md_begin(&w);
  ntrw_metadata(&w, &md);
  ntrw_block_end(&w);
  ntrw_stacks(&w, 1, 1, stacks, nframes);
  ntrw_ev_begin(&w, 1);
  uint32_t seq[3] = {0};
  for (int i = 0; i < 12; i++) {
    uint64_t th = i < 2 ? 1 : 2, us = i < 2 ? 1000 * (uint64_t)(i + 1) : 5000 + 1000 * (uint64_t)(i - 2);
    ntrw_ev ev = {.metadata_id = 1, .seq = ++seq[th], .thread = th, .capture_thread = th, .stack_id = 1,
                  .ts = 1000 + us, .payload = managed, .payload_size = 4};
    ntrw_event(&w, &ev);
  }
  ntrw_block_end(&w);
  ntrw_end(&w);
  FILE *fp = fopen(trace, "wb");
  cr_assert(fp && fwrite(w.buf, 1, w.len, fp) == w.len);
  fclose(fp);
  ntrw_release(&w);
  struct dnt_run r;
  cr_assert_eq(dnt_run_dntrace(&r, "convert", trace, "--format", "speedscope", "-o", out, NULL), 0, "%s", r.err);
  dnt_run_free(&r);
  const char *py = "import json, sys\n"
                   "d = json.load(open(sys.argv[1]))\n"
                   "p = d['profiles']\n"
                   "print(len(p), d['activeProfileIndex'], p[d['activeProfileIndex']]['name'],\n"
                   "      '%g %g' % (p[1]['startValue'], p[1]['endValue']), '%g' % p[0]['startValue'])\n";
  char *argv[] = {"/usr/bin/env", "python3", "-c", (char *)py, out, NULL};
  cr_assert_eq(dnt_run_argv(&r, argv, NULL, DNT_HANG_MS), 0, "%s", r.err);
  cr_expect_str_eq(r.out, "2 1 Thread 2 5 14 1\n", "two profiles, the second (9 ms) shown first, placed at 5 ms");
  dnt_run_free(&r);
  unlink(out);
  unlink(trace);
  rmdir(dir);
}

/* --format NetTrace, dotnet-trace convert's own format (issue 28 item 11): one line why not, exit
 * 2, no file. */
Test(convert, nettrace_is_refused_with_its_reason) {
  char dir[] = "/tmp/dnt-cvnt-XXXXXX", trace[64];
  cr_assert(mkdtemp(dir));
  snprintf(trace, sizeof trace, "%s/t.nettrace", dir);
  cr_assert_eq(dnt_write_v6_trace(trace), 0);
  struct dnt_run r;
  cr_assert_eq(dnt_run_dntrace(&r, "convert", trace, "--format", "NetTrace", NULL), 2);
  cr_assert(strstr(r.err, "--format nettrace: ") && strstr(r.err, "is a trace already"), "%s", r.err);
  cr_assert_eq(strchr(r.err, '\n'), strrchr(r.err, '\n'), "one line: %s", r.err);
  dnt_run_free(&r);
  unlink(trace);
  cr_assert_eq(rmdir(dir), 0, "nothing else written beside it");
}

/* The by-thread flame graph draws threads of one name as one tower, with their count (issue 27:
 * "idle-* ×40"); a named thread alone says its id. The names: a `.threads` file beside the
 * trace of lib/v6-trace.h naming its two sampled threads alike, then apart. */
static char **thread_rows(const char *svg, size_t *n) {
  xmlDocPtr doc = xmlReadFile(svg, NULL, XML_PARSE_NONET);
  cr_assert(doc, "%s parses", svg);
  char **rows = calloc(64, sizeof *rows);
  *n = 0;
  for (xmlNodePtr g = xmlDocGetRootElement(doc)->children; g; g = g->next) {
    if (g->type != XML_ELEMENT_NODE || strcmp((const char *)g->name, "g") != 0) continue;
    xmlChar *level = xmlGetProp(g, BAD_CAST "data-l"), *title = xmlNodeGetContent(g->children);
    if (level && strcmp((const char *)level, "1") == 0 && *n < 64) rows[(*n)++] = strdup((const char *)title);
    xmlFree(level);
    xmlFree(title);
  }
  xmlFreeDoc(doc);
  return rows;
}

Test(convert, by_thread_flame_graph_groups_threads_of_one_name) {
  char dir[] = "/tmp/dnt-fgnames-XXXXXX", trace[64], names[64], svg[64];
  cr_assert(mkdtemp(dir));
  snprintf(trace, sizeof trace, "%s/t.nettrace", dir);
  snprintf(names, sizeof names, "%s/t.threads", dir);
  snprintf(svg, sizeof svg, "%s/t.svg", dir);
  cr_assert_eq(dnt_write_v6_trace(trace), 0);
  for (int apart = 0; apart < 2; apart++) {
    FILE *fp = fopen(names, "w");
    cr_assert(fp);
    fprintf(fp, "4001\tworker\n4002\t%s\n", apart ? "other" : "worker");
    fclose(fp);
    struct dnt_run r;
    cr_assert_eq(dnt_run_dntrace(&r, "convert", trace, "--format", "flamegraph", "--by-thread", "-o", svg, NULL), 0,
                 "%s", r.err);
    dnt_run_free(&r);
    size_t n;
    char **rows = thread_rows(svg, &n);
    if (!apart) {
      cr_assert_eq(n, 1, "one tower for two threads named worker");
      cr_assert(strncmp(rows[0], "worker \xc3\x97" "2 (", 10) == 0, "%s", rows[0]);
    } else {
      cr_assert_eq(n, 2);
      int worker = 0, other = 0;
      for (size_t i = 0; i < n; i++) {
        worker += strncmp(rows[i], "worker (4001) (", 15) == 0;
        other += strncmp(rows[i], "other (4002) (", 14) == 0;
      }
      cr_assert(worker == 1 && other == 1, "%s | %s", rows[0], rows[1]);
    }
    for (size_t i = 0; i < n; i++) free(rows[i]);
    free(rows);
  }
  unlink(svg);
  unlink(names);
  unlink(trace);
  rmdir(dir);
}
