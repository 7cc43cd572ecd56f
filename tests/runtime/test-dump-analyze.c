/* test-dump-analyze.c: `dntrace dump analyze` (issue 25) on real cores. The sample, with idle
 * threads of its own, dumped in full by `dntrace dump`; on that core dntrace's clrthreads must
 * print what dotnet-dump's SOS prints, byte for byte (its oracle, from NuGet: ./bootstrap.sh
 * installs it), and its --json the same threads; gzipped, the same; heap, mini and triage dumps
 * too, and dumpheap as dotnet-dump's on workstation and server GC heaps, and a real web service's
 * core (tests/targets/web) read as dotnet-dump reads it. A crashed sample's own core
 * shows its exception on the thread that threw it (clrthreads, pe), as dotnet-dump does. Bad input is one line and exit 1: a file that is
 * not ELF, an empty one, a core cut short, the core of a process that is not .NET (gdb's gcore),
 * a runtime folder without the runtime; an unknown command fails the run; the prompt reads
 * commands from standard input; an assembly replaced on disk since the dump names nothing. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../lib/core-dump-cr.h"
#include "../lib/env-cr.h"
#include "../lib/files-cr.h"
#include "../lib/loopback.h"
#include "../lib/run.h"
#include "../lib/target-cr.h"
#include "../lib/target.h"
#include "../lib/web-load.h"


/* `clrthreads` of core by dntrace (into ours, the caller's) and by dotnet-dump: the same text. */
static void clrthreads_as_dotnet_dumps(const char *core, struct dnt_run *ours) {
  struct dnt_run theirs;
  cr_assert_eq(dnt_run_dntrace(ours, "dump", "analyze", core, "-c", "clrthreads", NULL), 0, "%s", ours->err);
  char *const argv[] = {(char *)dotnet_dump(), "analyze", (char *)core, "-c", "clrthreads", "-c", "exit", NULL};
  cr_assert_eq(dnt_run_argv(&theirs, argv, NULL, 120000), 0, "dotnet-dump: %s%s", theirs.out, theirs.err);
  const char *table = strstr(theirs.out, "ThreadCount:"); /* after its line saying it loads the core */
  cr_assert(table, "dotnet-dump: %s", theirs.out);
  cr_expect_str_eq(ours->out, table, "dntrace:\n%s\ndotnet-dump:\n%s", ours->out, table);
  dnt_run_free(&theirs);
}



/* A full core of the sample (its idle threads, one parked in a generic method of a generic class,
 * and workers; no exceptions thrown) in dir. Its metrics thread is left out: where the dump
 * catches it (recording a measurement, or waiting) is chance, and a test's rows are not. */
static void dump_sample(const char *dir, char *core, size_t cap) {
  const char *const args[] = {"--threads", "3", "--generic-park", "--no-exceptions", "--no-alloc", "--no-counters", NULL};
  dump_target(dir, args, NULL, "sample.core", core, cap);
}

Test(dump_analyze, clrthreads_is_what_dotnet_dump_prints, .timeout = 300) {
  DNT_REQUIRE_TARGET();
  dotnet_dump();
  char *dir = dnt_temp_dir("dnt-analyze"), core[4200];
  dump_sample(dir, core, sizeof core);
  struct dnt_run ours;
  clrthreads_as_dotnet_dumps(core, &ours);
  /* threads (the core's, the current one starred) as dotnet-dump lists them, after a setthread too */
  struct dnt_run th, oth;
  cr_assert_eq(dnt_run_dntrace(&th, "dump", "analyze", core, "-c", "setthread 2", "-c", "threads", NULL), 0, "%s", th.err);
  char *const targv[] = {(char *)dotnet_dump(), "analyze", core, "-c", "setthread 2", "-c", "threads", "-c", "exit", NULL};
  cr_assert_eq(dnt_run_argv(&oth, targv, NULL, 120000), 0, "dotnet-dump: %s%s", oth.out, oth.err);
  const char *list = strstr(oth.out, "\n");
  cr_expect(list && strstr(th.out, " 1 0x") && strstr(th.out, "*2 0x"), "%s", th.out);
  cr_expect_str_eq(th.out, list ? list + 1 : "", "dntrace:\n%s\ndotnet-dump:\n%s", th.out, oth.out);
  dnt_run_free(&th);
  dnt_run_free(&oth);
  /* the sample's three idle threads and its workers are among them, 8 and more */
  unsigned count = 0;
  cr_expect(sscanf(ours.out, "ThreadCount: %u", &count) == 1 && count >= 8, "%s", ours.out);
  /* gzipped (as `dump --compress` writes it): read the same; cut short: one line */
  char gz[4400], cut[4400], cmd[18000];
  snprintf(gz, sizeof gz, "%s.gz", core);
  snprintf(cut, sizeof cut, "%s/cut.gz", dir);
  snprintf(cmd, sizeof cmd, "gzip -1 -c '%s' > '%s' && head -c 1000000 '%s' > '%s'", core, gz, gz, cut);
  cr_assert_eq(system(cmd), 0, "%s", cmd);
  struct dnt_run z;
  cr_expect_eq(dnt_run_dntrace(&z, "dump", "analyze", gz, "-c", "clrthreads", NULL), 0, "%s", z.err);
  cr_expect_str_eq(z.out, ours.out, "the gzipped core reads the same");
  dnt_run_free(&z);
  cr_expect_eq(dnt_run_dntrace(&z, "dump", "analyze", cut, "-c", "clrthreads", NULL), 1);
  cr_expect(strstr(z.err, "its gzip stream is damaged or cut short"), "%s", z.err);
  cr_expect_eq(strchr(z.err, '\n'), strrchr(z.err, '\n'), "one line: %s", z.err);
  dnt_run_free(&z);
  /* --json: the same threads */
  char py[] = "import json, sys\n"
              "j = json.loads(open(sys.argv[1]).read())\n"
              "rows = [l.split() for l in open(sys.argv[2]).read().splitlines()[8:]]\n"
              "assert j['command'] == 'clrthreads' and j['threadCount'] == len(j['threads']), j\n"
              "assert [(t['id'], t['osId']) for t in j['threads']] == [(int(r[1]), int(r[2], 16)) for r in rows], (j, rows)\n"
              "assert sum(t['finalizer'] for t in j['threads']) == 1, j\n";
  expect_json_agrees(core, "clrthreads", ours.out, dir, py);
  dnt_run_free(&ours);
  dnt_rm_rf(dir);
  free(dir);
}

/* `command` (a dumpheap) on core by dntrace (into ours, the caller's) and by dotnet-dump: the same
 * text (dotnet-dump's after its first line, which says it loads the core). */
static void dumpheap_as_dotnet_dumps(const char *core, const char *command, struct dnt_run *ours) {
  struct dnt_run theirs;
  cr_assert_eq(dnt_run_dntrace(ours, "dump", "analyze", core, "-c", command, NULL), 0, "%s: %s", command, ours->err);
  const char *after = dotnet_dump_answer(core, command, &theirs);
  int short_texts = strlen(ours->out) < 4096 && strlen(after) < 4096; /* small enough to show */
  cr_expect_str_eq(ours->out, after, "%s: dntrace and dotnet-dump differ (%zu and %zu bytes)%s%s%s%s", command,
                   strlen(ours->out), strlen(after), short_texts ? "\ndntrace:\n" : "", short_texts ? ours->out : "",
                   short_texts ? "\ndotnet-dump:\n" : "", short_texts ? after : "");
  dnt_run_free(&theirs);
}

/* commands (a clrstack, a setthread before it) on core by dntrace (into ours) and by dotnet-dump:
 * the same rows, source lines included. */
static void clrstack_as_dotnet_dumps(const char *core, const char *before, const char *command, struct dnt_run *ours) {
  struct dnt_run theirs;
  cr_assert_eq(dnt_run_dntrace(ours, "dump", "analyze", core, "-c", before, "-c", command, NULL), 0, "%s: %s", command,
               ours->err);
  char *const argv[] = {(char *)dotnet_dump(), "analyze", (char *)core, "-c", (char *)before, "-c", (char *)command,
                        "-c", "exit", NULL};
  cr_assert_eq(dnt_run_argv(&theirs, argv, NULL, 300000), 0, "dotnet-dump: %s%s", theirs.out, theirs.err);
  const char *after = strstr(theirs.out, "Loading core dump: ");
  after = after ? strchr(after, '\n') : NULL;
  cr_assert(after, "dotnet-dump: %s", theirs.out);
  cr_expect_str_eq(ours->out, after + 1, "%s: dntrace:\n%s\ndotnet-dump:\n%s", command, ours->out, after + 1);
  dnt_run_free(&theirs);
}

/* The count of a type's row in dumpheap -stat's text ("MT COUNT TOTAL NAME"), 0 when none. */
static unsigned long stat_count(const char *text, const char *type) {
  char want[512];
  snprintf(want, sizeof want, " %s\n", type);
  for (const char *p = strstr(text, want); p; p = strstr(p + 1, want)) {
    const char *line = p;
    while (line > text && line[-1] != '\n') line--;
    char count[32] = "";
    if (sscanf(line, "%*s %31s", count) == 1) {
      unsigned long n = 0;
      for (const char *c = count; *c; c++)
        if (*c != ',') n = n * 10 + (unsigned long)(*c - '0');
      return n;
    }
  }
  return 0;
}


/* dumpheap on a workstation GC's heap (small, large and pinned object heaps, the frozen segment
 * of string literals): -stat, -bycount, -type and -mt (and eeheap -gc) print what dotnet-dump prints, byte for
 * byte (the same objects, sizes, type names and order); the sample's 300 cache entries and their
 * arrays are counted; dumpobj of some of them is dotnet-dump's; --json says the same. */
Test(dump_analyze, dumpheap_is_what_dotnet_dump_prints, .timeout = 600) {
  DNT_REQUIRE_TARGET();
  dotnet_dump();
  char *dir = dnt_temp_dir("dnt-analyze"), core[4200];
  dump_heap_sample(dir, "300:100000", NULL, core, sizeof core);
  struct dnt_run stat, r;
  dumpheap_as_dotnet_dumps(core, "dumpheap -stat -noprogress", &stat);
  cr_expect_eq(stat_count(stat.out, "Sample.CacheEntry"), 300, "%s", stat.out);
  cr_expect_geq(stat_count(stat.out, "System.Byte[]"), 300, "%s", stat.out);
  cr_expect(strstr(stat.out, " Free\n") && strstr(stat.out, " System.String\n") &&
                strstr(stat.out, "System.Collections.Generic.Dictionary<System.String, System.Object>") &&
                strstr(stat.out, "\nTotal "),
            "%s", stat.out);
  dumpheap_as_dotnet_dumps(core, "dumpheap -stat -bycount -noprogress", &r);
  dnt_run_free(&r);
  dumpheap_as_dotnet_dumps(core, "eeheap -gc", &r); /* the regions, generation by generation */
  cr_expect(strstr(r.out, "\nLarge object heap\n") && strstr(r.out, "\nNumber of GC Heaps: 1\n"), "%s", r.out);
  dnt_run_free(&r);
  dumpheap_as_dotnet_dumps(core, "dumpheap -type Sample.CacheEntry", &r);
  cr_expect_eq(stat_count(r.out, "Sample.CacheEntry"), 300, "%s", r.out);
  dnt_run_free(&r);
  /* -mt: the cache entries' MethodTable, from the row */
  const char *row = strstr(stat.out, " Sample.CacheEntry\n");
  while (row && row > stat.out && row[-1] != '\n') row--;
  char mt[32] = "", cmd[64];
  cr_assert(row && sscanf(row, "%31s", mt) == 1, "%s", stat.out);
  snprintf(cmd, sizeof cmd, "dumpheap -mt %s", mt);
  dumpheap_as_dotnet_dumps(core, cmd, &r);
  dnt_run_free(&r);
  /* dumpobj of objects whose fields are primitives and strings (SOS's rows, values included), a
   * dictionary (fields of arrays and generic instances: their loaded types), an array, a string,
   * a free block and a Thread (a thread static, t_currentThread, listed with its value on each
   * thread): dotnet-dump's text */
  const char *kinds[] = {"Sample.Options", "System.Byte[]", "System.String", "Free",
                         "System.Collections.Generic.Dictionary<System.String, System.Object>",
                         "System.Threading.Thread"}; /* its thread static's value on each thread */
  for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
    char list[128], want[128], type_mt[32] = ""; /* the type's own MethodTable, from its -stat row */
    snprintf(want, sizeof want, " %s\n", kinds[k]);
    const char *at = strstr(stat.out, want);
    while (at && at > stat.out && at[-1] != '\n') at--;
    cr_assert(at && sscanf(at, "%31s", type_mt) == 1, "%s: %s", kinds[k], stat.out);
    snprintf(list, sizeof list, "dumpheap -short -mt %s", type_mt);
    cr_assert_eq(dnt_run_dntrace(&r, "dump", "analyze", core, "-c", list, NULL), 0, "%s", r.err);
    char addr[32] = "", obj[64];
    cr_assert(sscanf(r.out, "%31s", addr) == 1, "%s: %s", kinds[k], r.out);
    dnt_run_free(&r);
    snprintf(obj, sizeof obj, "dumpobj %s", addr);
    dumpheap_as_dotnet_dumps(core, obj, &r);
    if (strcmp(kinds[k], "Free") == 0) cr_expect(strstr(r.out, "Free Object\nSize:"), "%s", r.out);
    else if (strcmp(kinds[k], "System.Threading.Thread") == 0)
      cr_expect(strstr(r.out, " t_currentThread\n    Thread static values (Thread:Value)\n        "), "%s", r.out);
    else cr_expect(strncmp(r.out, "Name:        ", 13) == 0 && strstr(r.out, "\nFields:\n"), "%s: %s", kinds[k], r.out);
    dnt_run_free(&r);
  }
  /* --json: the same rows */
  char py[] = "import json, sys\n"
              "j = json.loads(open(sys.argv[1]).read())\n"
              "rows = [l.split(None, 3) for l in open(sys.argv[2]).read().splitlines()[2:-1]]\n"
              "got = [(int(s['mt'], 16), s['count'], s['size'], s['type']) for s in j['statistics']]\n"
              "want = [(int(r[0], 16), int(r[1].replace(',', '')), int(r[2].replace(',', '')), r[3]) for r in rows]\n"
              "assert got == want, (got[:5], want[:5])\n"
              "assert j['objects'] == sum(s['count'] for s in j['statistics']) and j['invalid'] == 0, j['objects']\n"
              "assert [s['count'] for s in j['statistics'] if s['type'] == 'Sample.CacheEntry'] == [300]\n";
  expect_json_agrees(core, "dumpheap -stat", stat.out, dir, py);
  dnt_run_free(&stat);
  dnt_rm_rf(dir);
  free(dir);
}

/* Server GC (two heaps): every object of both, in dotnet-dump's order, eeheap -gc's regions of
 * each as dotnet-dump lists them, and eeversion says the mode as SOS does. */
Test(dump_analyze, dumpheap_reads_a_server_gc_heap, .timeout = 600) {
  DNT_REQUIRE_TARGET();
  dotnet_dump();
  char *dir = dnt_temp_dir("dnt-analyze"), core[4200];
  const char *const env[] = {"DOTNET_gcServer=1", "DOTNET_GCHeapCount=2", NULL};
  dump_heap_sample(dir, "3000:1000", env, core, sizeof core);
  struct dnt_run r;
  dumpheap_as_dotnet_dumps(core, "dumpheap -stat -noprogress", &r);
  cr_expect_eq(stat_count(r.out, "Sample.CacheEntry"), 3000, "%s", r.out);
  dnt_run_free(&r);
  dumpheap_as_dotnet_dumps(core, "dumpheap", &r);
  dnt_run_free(&r);
  dumpheap_as_dotnet_dumps(core, "eeheap -gc", &r);
  cr_expect(strstr(r.out, "\nHeap 0 (") && strstr(r.out, "\nHeap 1 ("), "%s", r.out);
  dnt_run_free(&r);
  cr_assert_eq(dnt_run_dntrace(&r, "dump", "analyze", core, "-c", "eeversion", NULL), 0, "%s", r.err);
  cr_expect(strstr(r.out, "\nServer mode with 2 gc heaps\n"), "%s", r.out);
  dnt_run_free(&r);
  dnt_rm_rf(dir);
  free(dir);
}

/* clrstack -all on the sample's core: every managed thread's frames as dotnet-dump prints them
 * (the same stack pointers, instruction pointers, methods with their parameters, source lines
 * from the sample's PDB, and the runtime's Frames: a P/Invoke's InlinedCallFrame twice, the
 * thread's base);
 * clrstack of the current thread after setthread; --json the same frames. */
Test(dump_analyze, clrstack_is_what_dotnet_dump_prints, .timeout = 300) {
  DNT_REQUIRE_TARGET();
  dotnet_dump();
  char *dir = dnt_temp_dir("dnt-analyze"), core[4200];
  dump_sample(dir, core, sizeof core);
  struct dnt_run all, one;
  clrstack_as_dotnet_dumps(core, "setthread 0", "clrstack -all", &all);
  cr_expect(strstr(all.out, " Sample.Program.Main(System.String[]) [") && strstr(all.out, "Program.cs @ "), "%s", all.out);
  cr_expect(strstr(all.out, " System.Threading.Thread.StartCallback()\n"), "%s", all.out);
  cr_expect(strstr(all.out, "[InlinedCallFrame: "), "%s", all.out);
  /* a generic method of a generic class: both instantiations, and its parameters named by them */
  cr_expect(strstr(all.out, " Sample.GenericPark`1[[System.Int64, System.Private.CoreLib]].Wait[[") &&
                strstr(all.out, "](Int64, "),
            "%s", all.out);
  unsigned parked = 0;
  for (const char *p = all.out; (p = strstr(p, " Sample.IdleWork.Park(System.Threading.CancellationToken) [")); p++)
    parked++;
  cr_expect_eq(parked, 3, "the sample's three idle threads: %s", all.out);
  /* the thread that runs Main, by its index among the core's */
  const char *main_row = strstr(all.out, " Sample.Program.Main(");
  cr_assert(main_row);
  const char *header = main_row;
  while (header > all.out && strncmp(header, "OS Thread Id: 0x", 16) != 0) header--;
  unsigned tid = 0;
  cr_assert(sscanf(header, "OS Thread Id: 0x%x", &tid) == 1, "%.100s", header);
  struct dnt_run threads;
  cr_assert_eq(dnt_run_dntrace(&threads, "dump", "analyze", core, "-c", "threads", NULL), 0, "%s", threads.err);
  char want[64], setthread[32];
  snprintf(want, sizeof want, " 0x%04X (%u)\n", tid, tid);
  const char *row = strstr(threads.out, want);
  cr_assert(row, "thread %u among the core's: %s", tid, threads.out);
  while (row > threads.out && row[-1] != '\n') row--;
  snprintf(setthread, sizeof setthread, "setthread %d", atoi(row + 1));
  dnt_run_free(&threads);
  clrstack_as_dotnet_dumps(core, setthread, "clrstack", &one);
  cr_expect(strstr(one.out, " Sample.Program.Main(System.String[]) ["), "%s", one.out);
  dnt_run_free(&one);
  /* --json: the same rows */
  char py[] = "import json, sys\n"
              "j = json.loads(open(sys.argv[1]).read())\n"
              "rows = [l.split(None, 2) for l in open(sys.argv[2]).read().splitlines() if l[:1] in '0123456789ABCDEF']\n"
              "got = [(int(f['sp'], 16), int(f['ip'], 16)) for t in j['threads'] for f in t['frames']]\n"
              "assert got == [(int(r[0], 16), int(r[1], 16)) for r in rows], (got[:4], rows[:4])\n"
              "main = [f for t in j['threads'] for f in t['frames'] if f['method'] == 'Sample.Program.Main(System.String[])']\n"
              "assert main and main[0]['file'].endswith('Program.cs') and main[0]['line'] > 0, main\n";
  expect_json_agrees(core, "clrstack -all", all.out, dir, py);
  dnt_run_free(&all);
  dnt_rm_rf(dir);
  free(dir);
}

/* A real web service (tests/targets/web: ASP.NET Core, server GC with DATAS by default) after a
 * load of requests, dumped in full: clrthreads, dumpheap -stat, eeheap -gc and clrstack -all (its
 * async state machines' frames, generic instances' methods "TaskAwaiter`1[[System.Int32, ...]]")
 * as dotnet-dump prints them; eeversion's first lines (the runtime's version stamp, the GC's
 * mode, DATAS) are SOS's. */
Test(dump_analyze, a_web_service_reads_as_dotnet_dump_does, .timeout = 600) {
  const char *why = dnt_web_unavailable();
  if (why) {
    if (in_ci()) cr_assert_fail("needs the web target: %s (CI=true)", why);
    cr_skip_test("needs the web target: %s", why);
  }
  dotnet_dump();
  dnt_target t;
  int port;
  char err[512], pid[32], *dir = dnt_temp_dir("dnt-analyze"), core[4200];
  cr_assert_eq(dnt_web_start(&t, &port, err, sizeof err), 0, "%s", err);
  const char *const paths[] = {"/json", "/order/{n}", "/work", NULL};
  struct dnt_web_load l = {.port = port, .paths = paths, .connections = 4, .requests = 300};
  int loaded = dnt_web_load_run(&l);
  snprintf(pid, sizeof pid, "%d", (int)t.pid);
  snprintf(core, sizeof core, "%s/web.core", dir);
  struct dnt_run r;
  int rc = dnt_run_dntrace(&r, "dump", "-p", pid, "--type", "full", "-o", core, NULL);
  dnt_target_stop(&t);
  cr_assert_eq(loaded, 0, "the load: %s", l.error);
  cr_assert_eq(rc, 0, "dntrace dump: %s", r.err);
  dnt_run_free(&r);
  clrthreads_as_dotnet_dumps(core, &r);
  dnt_run_free(&r);
  dumpheap_as_dotnet_dumps(core, "dumpheap -stat -noprogress", &r);
  cr_expect(strstr(r.out, "Microsoft.AspNetCore."), "ASP.NET's objects: %s", r.out);
  dnt_run_free(&r);
  dumpheap_as_dotnet_dumps(core, "eeheap -gc", &r);
  cr_expect(strstr(r.out, "\nHeap 0 ("), "server GC: %s", r.out);
  dnt_run_free(&r);
  clrstack_as_dotnet_dumps(core, "setthread 0", "clrstack -all", &r);
  dnt_run_free(&r);
  /* eeversion: SOS's lines but its own version's (dntrace prints the library's path there) */
  struct dnt_run theirs;
  cr_assert_eq(dnt_run_dntrace(&r, "dump", "analyze", core, "-c", "eeversion", NULL), 0, "%s", r.err);
  char *const argv[] = {(char *)dotnet_dump(), "analyze", core, "-c", "eeversion", "-c", "exit", NULL};
  cr_assert_eq(dnt_run_argv(&theirs, argv, NULL, 120000), 0, "dotnet-dump: %s%s", theirs.out, theirs.err);
  const char *sos = strstr(theirs.out, "\n"), *sos_end = strstr(theirs.out, "SOS Version:");
  cr_assert(sos && sos_end, "dotnet-dump: %s", theirs.out);
  cr_expect(strncmp(r.out, sos + 1, (size_t)(sos_end - sos - 1)) == 0 && strstr(r.out, "Server mode with "),
            "dntrace:\n%s\ndotnet-dump:\n%s", r.out, theirs.out);
  dnt_run_free(&theirs);
  dnt_run_free(&r);
  dnt_rm_rf(dir);
  free(dir);
}

/* heap, mini and triage dumps hold no read-only pages: the runtime's descriptor, its JSON and
 * pointers come from libcoreclr.so's file (relocated as the loader did), the rest from the core;
 * clrthreads is dotnet-dump's, byte for byte, on each. */
Test(dump_analyze, every_dump_type_reads_as_dotnet_dumps, .timeout = 300) {
  DNT_REQUIRE_TARGET();
  dotnet_dump();
  const char *const args[] = {"--threads", "3", "--no-exceptions", "--no-alloc", "--no-counters", NULL}; /* as dump_sample */
  dnt_target t;
  char pid[32], *dir = dnt_temp_dir("dnt-analyze");
  dnt_start_sample(&t, args, pid, sizeof pid);
  const char *types[] = {"heap", "mini", "triage"};
  char cores[3][4200];
  for (int i = 0; i < 3; i++) {
    snprintf(cores[i], sizeof cores[i], "%s/%s.core", dir, types[i]);
    struct dnt_run r;
    cr_assert_eq(dnt_run_dntrace(&r, "dump", "-p", pid, "--type", types[i], "-o", cores[i], NULL), 0, "%s", r.err);
    dnt_run_free(&r);
  }
  dnt_target_stop(&t);
  for (int i = 0; i < 3; i++) {
    struct dnt_run ours;
    clrthreads_as_dotnet_dumps(cores[i], &ours);
    cr_expect(strstr(ours.out, "(Finalizer)"), "%s: %s", types[i], ours.out);
    dnt_run_free(&ours);
    clrstack_as_dotnet_dumps(cores[i], "setthread 0", "clrstack -all", &ours); /* stacks are in every type */
    cr_expect(strstr(ours.out, " Sample.IdleWork.Park("), "%s: %s", types[i], ours.out);
    dnt_run_free(&ours);
  }
  /* dumpheap: a heap dump holds the heap (dotnet-dump's text); a mini dump the GC's state but not
   * the heap's memory: nothing listed (as dotnet-dump) and a warning that says so; a triage dump
   * not even the GC's state: one line, exit 1 */
  struct dnt_run h;
  dumpheap_as_dotnet_dumps(cores[0], "dumpheap -stat -noprogress", &h);
  cr_expect(strstr(h.out, " System.String\n"), "%s", h.out);
  dnt_run_free(&h);
  dumpheap_as_dotnet_dumps(cores[1], "dumpheap -stat -noprogress", &h);
  cr_expect(strstr(h.err, "does not hold the memory of") && strstr(h.err, "a mini dump holds none"), "%s", h.err);
  dnt_run_free(&h);
  cr_expect_eq(dnt_run_dntrace(&h, "dump", "analyze", cores[2], "-c", "dumpheap -stat", NULL), 1);
  cr_expect(strstr(h.err, "a triage dump holds none of the heap"), "%s", h.err);
  cr_expect_eq(strchr(h.err, '\n'), strrchr(h.err, '\n'), "one line: %s", h.err);
  dnt_run_free(&h);
  dnt_rm_rf(dir);
  free(dir);
}


/* The sample crashes (--crash-after: an unhandled Sample.SampleException on thread crash-work)
 * and its runtime writes a full core of itself as it dies (DOTNET_DbgEnableMiniDump). On that
 * core, clrthreads shows the exception on the thread that threw it, as dotnet-dump does, byte for
 * byte; pe on that thread (setthread to its DBG index) gives its type, message, inner exception,
 * stack trace string and HResult as dotnet-dump's pe does; pe ADDR the same; dumpheap -stat as
 * dotnet-dump's. */
Test(dump_analyze, a_crash_shows_its_exception_as_dotnet_dump_does, .timeout = 300) {
  DNT_REQUIRE_TARGET();
  const char *oracle = dotnet_dump();
  char *dir = dnt_temp_dir("dnt-analyze"), core[4200], name_env[4300];
  snprintf(core, sizeof core, "%s/crash.core", dir);
  snprintf(name_env, sizeof name_env, "DOTNET_DbgMiniDumpName=%s", core);
  const char *const env[] = {"DOTNET_DbgEnableMiniDump=1", "DOTNET_DbgMiniDumpType=4", name_env, NULL};
  char *const sample[] = {(char *)dnt_target_exe(), "--crash-after", "1", "--no-alloc", "--no-exceptions", NULL};
  struct dnt_run r;
  int rc = dnt_run_argv(&r, sample, env, DNT_HANG_MS);
  cr_assert_neq(rc, 0, "the sample crashed: %s%s", r.out, r.err);
  dnt_run_free(&r);
  cr_assert_eq(access(core, R_OK), 0, "its runtime wrote %s", core);
  struct dnt_run ours, theirs;
  clrthreads_as_dotnet_dumps(core, &ours);
  /* the thread that threw: its row names the exception and its address (the text is dotnet-dump's too) */
  const char *row = strstr(ours.out, " Sample.SampleException ");
  cr_assert(row, "the exception shown: %s", ours.out);
  while (row > ours.out && row[-1] != '\n') row--;
  int dbg = -1;
  char addr[32] = "";
  cr_assert(sscanf(row, "%d", &dbg) == 1 && sscanf(strstr(row, "Sample.SampleException ") + 23, "%31s", addr) == 1,
            "%.200s", row);
  dnt_run_free(&ours);
  char setthread[32];
  snprintf(setthread, sizeof setthread, "setthread %d", dbg);
  char pe_addr[64];
  snprintf(pe_addr, sizeof pe_addr, "pe %s", addr);
  cr_assert_eq(dnt_run_dntrace(&ours, "dump", "analyze", core, "-c", setthread, "-c", "pe", "-c", pe_addr, NULL), 0,
               "%s", ours.err);
  char *const pe[] = {(char *)oracle, "analyze", core, "-c", setthread, "-c", "pe", "-c", "exit", NULL};
  cr_assert_eq(dnt_run_argv(&theirs, pe, NULL, 120000), 0, "dotnet-dump: %s%s", theirs.out, theirs.err);
  /* pe: dotnet-dump's text, the stack its throw recorded included (each of its lines, in order) */
  const char *theirs_pe = strstr(theirs.out, "Exception object: ");
  cr_assert(theirs_pe, "dotnet-dump: %s", theirs.out);
  cr_expect(strncmp(ours.out, theirs_pe, strlen(theirs_pe)) == 0, "dntrace:\n%s\ndotnet-dump:\n%s", ours.out,
            theirs_pe);
  cr_expect(strstr(ours.out, "StackTrace (generated):\n    SP               IP               Function\n") &&
                strstr(ours.out, " Sample.dll!Sample.ThrowWork.Fail()+0x"),
            "%s", ours.out);
  cr_expect(strstr(ours.out, "Exception type:   Sample.SampleException\n"), "%s", ours.out);
  struct dnt_run heap;
  clrstack_as_dotnet_dumps(core, setthread, "clrstack", &heap);
  cr_expect(strstr(heap.out, "[SoftwareExceptionFrame: ") && strstr(heap.out, " Sample.ThrowWork.Fail() ["), "%s", heap.out);
  dnt_run_free(&heap);
  dumpheap_as_dotnet_dumps(core, "dumpheap -stat -noprogress", &heap);
  cr_expect(strstr(heap.out, " Sample.SampleException\n"), "the exception is on the heap: %s", heap.out);
  dnt_run_free(&heap);
  /* pe ADDR: the same exception again */
  const char *second = strstr(ours.out, "Exception object: ");
  cr_expect(second && strstr(second + 1, "Exception object: "), "pe ADDR printed it too: %s", ours.out);
  dnt_run_free(&ours);
  dnt_run_free(&theirs);
  dnt_rm_rf(dir);
  free(dir);
}

/* One error line naming the file, exit 1. */
static void refused(const char *core, const char *const *more, const char *said) {
  char *argv[12] = {(char *)dnt_bin(), "dump", "analyze", (char *)core, "-c", "clrthreads"};
  size_t n = 6;
  for (; more && *more && n < 11; more++) argv[n++] = (char *)*more;
  argv[n] = NULL;
  struct dnt_run r;
  int rc = dnt_run_argv(&r, argv, NULL, 60000);
  cr_expect_eq(rc, 1, "%s: exit %d: %s", core, rc, r.err);
  cr_expect(strstr(r.err, said), "%s: wanted '%s': %s", core, said, r.err);
  cr_expect_eq(strchr(r.err, '\n'), strrchr(r.err, '\n'), "one line: %s", r.err);
  cr_expect_str_eq(r.out, "", "nothing on stdout: %s", r.out);
  dnt_run_free(&r);
}

Test(dump_analyze, bad_cores_are_one_line, .timeout = 300) {
  DNT_REQUIRE_TARGET();
  char *dir = dnt_temp_dir("dnt-analyze"), core[4200], path[4400];
  dump_sample(dir, core, sizeof core);
  snprintf(path, sizeof path, "%s/text", dir);
  dnt_write_file(path, "not a core\n", 11);
  refused(path, NULL, "not an ELF file");
  snprintf(path, sizeof path, "%s/empty", dir);
  dnt_write_file(path, "", 0);
  refused(path, NULL, "an empty file");
  refused("/nonexistent/core", NULL, "cannot open '/nonexistent/core'");
  /* cut after its headers and notes: the runtime's memory is not in it */
  struct stat st;
  cr_assert_eq(stat(core, &st), 0);
  snprintf(path, sizeof path, "%s/cut", dir);
  char cmd[9000];
  snprintf(cmd, sizeof cmd, "head -c 1048576 '%s' > '%s'", core, path);
  cr_assert_eq(system(cmd), 0);
  refused(path, NULL, "does not hold the runtime's");
  /* its runtime's folder named wrong; a folder whose libcoreclr.so is another build (the
   * runtime's own JIT library under that name) */
  const char *const nowhere[] = {"--runtime-dir", "/nonexistent", NULL};
  refused(core, nowhere, "cannot open '/nonexistent/libcoreclr.so'");
  struct dnt_run v;
  cr_assert_eq(dnt_run_dntrace(&v, "dump", "analyze", core, "-c", "eeversion", NULL), 0, "%s", v.err);
  char *lib = strstr(v.out, "/libcoreclr.so\n"), other[4400];
  cr_assert(lib, "eeversion names the library: %s", v.out);
  *lib = '\0';
  snprintf(cmd, sizeof cmd, "mkdir '%s/other' && cp '%s/libclrjit.so' '%s/other/libcoreclr.so'", dir, strrchr(v.out, '\n') + 1,
           dir);
  cr_assert_eq(system(cmd), 0, "%s", cmd);
  dnt_run_free(&v);
  snprintf(other, sizeof other, "%s/other", dir);
  const char *const another[] = {"--runtime-dir", other, NULL};
  refused(core, another, "is another build than the core's runtime (build id ");
  /* a process that is not .NET, its core written by gdb */
  if (system("command -v gcore >/dev/null 2>&1") != 0) {
    if (in_ci()) cr_assert_fail("no gcore (CI=true: ./bootstrap.sh installs gdb)");
  } else {
    pid_t sleeper = fork();
    cr_assert_geq(sleeper, 0);
    if (sleeper == 0) {
      execlp("sleep", "sleep", "600", (char *)NULL);
      _exit(127);
    }
    snprintf(path, sizeof path, "%s/sleep", dir);
    snprintf(cmd, sizeof cmd, "gcore -o '%s' %d >/dev/null 2>&1", path, (int)sleeper);
    int rc = system(cmd);
    kill(sleeper, SIGKILL);
    waitpid(sleeper, NULL, 0);
    cr_assert_eq(rc, 0, "%s", cmd);
    snprintf(path, sizeof path, "%s/sleep.%d", dir, (int)sleeper);
    refused(path, NULL, "not a .NET process: libcoreclr.so is not among the core's mapped files");
  }
  dnt_rm_rf(dir);
  free(dir);
}

/* Commands from a prompt (standard input), an unknown one failing the run. */
Test(dump_analyze, the_prompt_and_an_unknown_command, .timeout = 300) {
  DNT_REQUIRE_TARGET();
  char *dir = dnt_temp_dir("dnt-analyze"), core[4200], cmd[9000];
  dump_sample(dir, core, sizeof core);
  snprintf(cmd, sizeof cmd, "printf 'help\\neeversion\\nclrthreads\\nexit\\nthreads\\n' | '%s' dump analyze '%s'",
           dnt_bin(), core);
  FILE *p = popen(cmd, "r");
  cr_assert(p);
  static char out[1 << 16];
  out[fread(out, 1, sizeof out - 1, p)] = '\0';
  cr_expect_eq(pclose(p), 0);
  cr_expect(strstr(out, "Commands:\n  clrthreads"), "%s", out);
  cr_expect(strstr(out, "ThreadCount:"), "%s", out);
  cr_expect(strstr(out, "/libcoreclr.so\n"), "eeversion names the library: %s", out);
  cr_expect(!strstr(out, "*0 0x"), "nothing after exit: %s", out);
  struct dnt_run r;
  cr_expect_eq(dnt_run_dntrace(&r, "dump", "analyze", core, "-c", "clrthreads", "-c", "nosuchcommand 0", NULL), 1);
  cr_expect(strstr(r.err, "unknown command 'nosuchcommand'"), "%s", r.err);
  cr_expect(strstr(r.out, "ThreadCount:"), "the commands before it ran: %s", r.out);
  dnt_run_free(&r);
  dnt_rm_rf(dir);
  free(dir);
}

/* A core whose assembly has been replaced on disk since (a redeployed app, a rebuild): the file
 * would name its types and methods wrongly, and its PDB give wrong lines. The sample runs from a
 * copy of its folder; once dumped, the copy's Sample.dll gets another build stamp (its COFF
 * TimeDateStamp, as a rebuild changes it). Before: Sample's frames and types are named. After:
 * they are left unnamed, and a warning names the file, once. */
static void set_stamp(const char *dll, uint32_t xor) {
  FILE *fp = fopen(dll, "r+b");
  cr_assert(fp, "%s", dll);
  unsigned char hdr[0x40], stamp[4];
  cr_assert_eq(fread(hdr, 1, sizeof hdr, fp), sizeof hdr);
  long pe = (long)(hdr[0x3c] | hdr[0x3d] << 8 | hdr[0x3e] << 16 | (unsigned)hdr[0x3f] << 24);
  cr_assert(fseek(fp, pe + 8, SEEK_SET) == 0 && fread(stamp, 1, 4, fp) == 4);
  for (int i = 0; i < 4; i++) stamp[i] ^= (unsigned char)(xor >> (8 * i));
  cr_assert(fseek(fp, pe + 8, SEEK_SET) == 0 && fwrite(stamp, 1, 4, fp) == 4);
  cr_assert_eq(fclose(fp), 0);
}

Test(dump_analyze, an_assembly_replaced_since_the_dump_is_not_read, .timeout = 300) {
  DNT_REQUIRE_TARGET();
  char *dir = dnt_temp_dir("dnt-analyze"), app[4200], exe[4300], dll[4300], core[4200], cmd[9000];
  snprintf(app, sizeof app, "%s/app", dir);
  char *from = strdup(dnt_target_exe()), *slash = strrchr(from, '/');
  cr_assert(slash);
  *slash = '\0';
  snprintf(cmd, sizeof cmd, "cp -r '%s' '%s'", from, app);
  cr_assert_eq(system(cmd), 0, "%s", cmd);
  free(from);
  snprintf(exe, sizeof exe, "%s/Sample", app);
  snprintf(dll, sizeof dll, "%s/Sample.dll", app);
  const char *const args[] = {"--no-exceptions", "--no-alloc", "--no-counters", NULL};
  dump_program(exe, dir, args, NULL, "app.core", core, sizeof core);
  struct dnt_run r;
  cr_assert_eq(dnt_run_dntrace(&r, "dump", "analyze", core, "-c", "clrstack -all", "-c", "dumpheap -stat", NULL), 0,
               "%s", r.err);
  cr_expect(strstr(r.out, "Sample.Program.Main(System.String[])") && strstr(r.out, " Sample.Options\n"),
            "the loaded file: named: %s", r.out);
  cr_expect(!strstr(r.err, "is not the file"), "%s", r.err);
  dnt_run_free(&r);
  set_stamp(dll, 0x01010101u);
  cr_assert_eq(dnt_run_dntrace(&r, "dump", "analyze", core, "-c", "clrstack -all", "-c", "dumpheap -stat", NULL), 0,
               "%s", r.err);
  cr_expect(!strstr(r.out, "Sample.Program") && !strstr(r.out, " Sample.Options\n") && !strstr(r.out, "Program.cs @"),
            "a replaced file names nothing: %s", r.out);
  cr_expect(strstr(r.out, "System.Threading.WaitHandle.WaitOneNoCheck"), "the framework's still named: %s", r.out);
  char want[4400];
  snprintf(want, sizeof want, "dntrace: warning: %s is not the file the process loaded", dll);
  const char *said = strstr(r.err, want);
  cr_expect(said && !strstr(said + 1, want), "said once: %s", r.err);
  dnt_run_free(&r);
  set_stamp(dll, 0x01010101u); /* the same file again: named again */
  cr_assert_eq(dnt_run_dntrace(&r, "dump", "analyze", core, "-c", "clrstack -all", NULL), 0, "%s", r.err);
  cr_expect(strstr(r.out, "Sample.Program.Main(System.String[])"), "%s", r.out);
  dnt_run_free(&r);
  dnt_rm_rf(dir);
  free(dir);
}
