/* test-dump-gcroot.c: `dntrace dump analyze`'s gcroot (issue 25) on the sample's heap (--heap:
 * a static array of cache entries, one entry's byte[] pinned by a handle, a ConditionalWeakTable
 * entry, static lists), dumped in full by `dntrace dump`, with a workstation and a server GC. The
 * roots and paths of objects held in different ways are the ones dotnet-dump prints, byte for byte,
 * but for its lines saying it caches roots and its static variables' names (dotnet-dump 10 names
 * the static in the slot before, by its field's type: the sample's own source says which static
 * holds what, and dntrace must name that one), and the roots on the threads' stacks (locals of Main
 * and of the worker threads). -limit, --json; an address that is no object; a core whose memory is
 * damaged read without a crash. Objects ready for finalization, rooted by the finalizer queue; a
 * local of a method waiting in its catch block. */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/core-dump-cr.h"
#include "../lib/env-cr.h"
#include "../lib/files-cr.h"
#include "../lib/run.h"

#define CACHING "Caching GC roots, this may take a while.\nSubsequent runs of this command will be faster.\n\n"
#define STATIC "(static variable: "

/* text without dotnet-dump's caching lines (its warning before them has no line end of its own)
 * and without any static variable's name (malloc'ed). */
static char *normalised(const char *text) {
  size_t n = strlen(text);
  char *out = malloc(n + 2), *o = out;
  cr_assert(out);
  for (const char *p = text; *p;) {
    if (strncmp(p, CACHING, strlen(CACHING)) == 0) {
      if (o > out && o[-1] != '\n') *o++ = '\n';
      p += strlen(CACHING);
    } else if (strncmp(p, STATIC, strlen(STATIC)) == 0) {
      p += strcspn(p, "\n");
    } else {
      *o++ = *p++;
    }
  }
  *o = '\0';
  return out;
}

/* command on core by dntrace (into ours) and by dotnet-dump: the same text, normalised. */
static void gcroot_as_dotnet_dumps(const char *core, const char *command, struct dnt_run *ours) {
  struct dnt_run theirs;
  cr_assert_eq(dnt_run_dntrace(ours, "dump", "analyze", core, "-c", command, NULL), 0, "%s: %s", command, ours->err);
  const char *after = dotnet_dump_answer(core, command, &theirs);
  char *a = normalised(ours->out), *b = normalised(after);
  cr_expect_str_eq(a, b, "%s: dntrace and dotnet-dump differ\ndntrace:\n%s\ndotnet-dump:\n%s", command, ours->out, after);
  free(a), free(b);
  dnt_run_free(&theirs);
}

/* The first object of the type named exactly type, from dumpheap -stat's row and -short -mt (both
 * dotnet-dump's, test-dump-analyze shows): its address, 0 when none. */
static uint64_t first_of(const char *core, const char *type) {
  struct dnt_run r;
  char want[256], cmd[128], mt[32] = "";
  cr_assert_eq(dnt_run_dntrace(&r, "dump", "analyze", core, "-c", "dumpheap -stat", NULL), 0, "%s", r.err);
  snprintf(want, sizeof want, " %s\n", type);
  const char *row = strstr(r.out, want);
  while (row && row > r.out && row[-1] != '\n') row--;
  cr_assert(row && sscanf(row, "%31s", mt) == 1, "%s: %s", type, r.out);
  dnt_run_free(&r);
  snprintf(cmd, sizeof cmd, "dumpheap -short -mt %s", mt);
  cr_assert_eq(dnt_run_dntrace(&r, "dump", "analyze", core, "-c", cmd, NULL), 0, "%s", r.err);
  uint64_t at = strtoull(r.out, NULL, 16);
  dnt_run_free(&r);
  return at;
}

/* From dotnet-dump's gchandles: the object of the first handle of kind whose line names type, and
 * the handle's secondary object (a dependent handle's data column). */
static uint64_t handle_object(const char *core, const char *kind, const char *type, uint64_t *secondary) {
  struct dnt_run r;
  char *const argv[] = {(char *)dotnet_dump(), "analyze", (char *)core, "-c", "gchandles", "-c", "exit", NULL};
  cr_assert_eq(dnt_run_argv(&r, argv, NULL, 300000), 0, "dotnet-dump: %s%s", r.out, r.err);
  uint64_t obj = 0;
  for (const char *line = r.out; line && *line && !obj; line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
    char handle[32], k[32], object[32], size[32], data[32];
    size_t len = strcspn(line, "\n");
    char copy[512];
    snprintf(copy, sizeof copy, "%.*s", (int)(len < sizeof copy - 1 ? len : sizeof copy - 1), line);
    if (sscanf(copy, "%31s %31s %31s %31s", handle, k, object, size) == 4 && strcmp(k, kind) == 0 &&
        strstr(copy, type)) {
      obj = strtoull(object, NULL, 16);
      if (secondary) *secondary = sscanf(copy, "%*s %*s %*s %*s %31s", data) == 1 ? strtoull(data, NULL, 16) : 0;
    }
  }
  cr_assert(obj, "no %s handle to a %s in dotnet-dump's gchandles:\n%s", kind, type, r.out);
  dnt_run_free(&r);
  return obj;
}

/* gcroot -nostacks of obj says line. */
static void expect_in_roots(const char *core, uint64_t obj, const char *line) {
  struct dnt_run r;
  char cmd[64];
  snprintf(cmd, sizeof cmd, "gcroot -nostacks %" PRIx64, obj);
  cr_assert_eq(dnt_run_dntrace(&r, "dump", "analyze", core, "-c", cmd, NULL), 0, "%s", r.err);
  cr_expect(strstr(r.out, line), "%s: no '%s' in\n%s", cmd, line, r.out);
  dnt_run_free(&r);
}

/* A copy of core whose memory has 2,000 runs of 8, 64 or 4096 bytes overwritten (0, 0xff or
 * another byte, at places a fixed sequence picks, past the first twentieth of the file): gcroot of
 * each of the three objects, with the stacks and without, exits 0 or 1, never crashes. */
static void damaged_memory_is_survived(const char *core, const char *dir, const uint64_t objects[3]) {
  char copy[4400], cmd[9000];
  snprintf(copy, sizeof copy, "%s/damaged.core", dir);
  snprintf(cmd, sizeof cmd, "cp '%s' '%s'", core, copy);
  cr_assert_eq(system(cmd), 0);
  FILE *fp = fopen(copy, "r+b");
  cr_assert(fp);
  cr_assert_eq(fseek(fp, 0, SEEK_END), 0);
  long size = ftell(fp);
  cr_assert_gt(size, 1 << 20);
  static unsigned char run[4096];
  uint64_t x = 0x9E3779B97F4A7C15ull;
  for (int i = 0; i < 2000; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17; /* xorshift: the same places every run */
    static const size_t lengths[] = {8, 64, 4096};
    size_t n = lengths[x % 3];
    long at = size / 20 + (long)((x >> 8) % (uint64_t)(size - size / 20 - 4096));
    memset(run, (x >> 4) % 3 == 0 ? 0 : (x >> 4) % 3 == 1 ? 0xff : (int)(x >> 40) & 0xff, n);
    cr_assert(fseek(fp, at, SEEK_SET) == 0 && fwrite(run, 1, n, fp) == n);
  }
  cr_assert_eq(fclose(fp), 0);
  for (int i = 0; i < 6; i++) {
    struct dnt_run r;
    char command[64];
    snprintf(command, sizeof command, "gcroot %s%" PRIx64, i < 3 ? "-nostacks " : "", objects[i % 3]);
    int rc = dnt_run_dntrace(&r, "dump", "analyze", copy, "-c", command, NULL);
    /* a sanitizer's report exits 1 too: its text is looked for */
    cr_expect((rc == 0 || rc == 1) && !strstr(r.err, "Sanitizer") && !strstr(r.err, "runtime error"),
              "%s on a damaged core: exit %d\n%s", command, rc, r.err);
    dnt_run_free(&r);
  }
}

/* The sample's heap under the GC env asks for: gcroot as dotnet-dump's, statics named. */
static void roots_of_the_heap_sample(const char *const *env) {
  DNT_REQUIRE_TARGET();
  dotnet_dump();
  char *dir = dnt_temp_dir("dnt-gcroot"), core[4200], cmd[128];
  dump_heap_sample(dir, "300:1000", env, core, sizeof core);
  uint64_t value = 0, pinned = handle_object(core, "Pinned", "System.Byte[]", NULL);
  uint64_t key = handle_object(core, "Dependent", "Sample.CacheEntry", &value);
  cr_assert(value, "the ConditionalWeakTable's value");
  uint64_t finalizable = first_of(core, "Sample.Finalizable"), growth = first_of(core, "System.Collections.Generic.List<Sample.GrowthItem>"),
           options = first_of(core, "Sample.Options"), workers = first_of(core, "Sample.Workers");
  /* the pinned array: reached from the statics, then its pinned handle (two roots); the table's
   * value: through its key, a dependent handle's link; objects held by statics; no object */
  const uint64_t targets[] = {pinned, value, key, finalizable, growth, options, pinned + 24};
  struct dnt_run r;
  for (size_t i = 0; i < sizeof targets / sizeof targets[0]; i++) {
    snprintf(cmd, sizeof cmd, "gcroot -nostacks %" PRIx64, targets[i]);
    gcroot_as_dotnet_dumps(core, cmd, &r);
    cr_expect(strstr(r.out, i < 6 ? "\nFound " : "Warning: "), "%s", r.out);
    dnt_run_free(&r);
  }
  expect_in_roots(core, pinned, " (pinned handle)\n          -> ");
  expect_in_roots(core, pinned, "\nFound 2 unique roots.\n");
  expect_in_roots(core, value, " Sample.TableValue (dependent handle)\n");
  /* the statics the sample's source declares */
  expect_in_roots(core, key, " Sample.CacheEntry[] (static variable: Sample.Cache.Entries)\n");
  expect_in_roots(core, finalizable, " Sample.Finalizable[] (static variable: Sample.HeapWork.Finalizables)\n");
  expect_in_roots(core, growth, " (static variable: Sample.HeapWork.Growth)\n");
  /* -limit */
  snprintf(cmd, sizeof cmd, "gcroot -nostacks -limit 1 %" PRIx64, pinned);
  gcroot_as_dotnet_dumps(core, cmd, &r);
  cr_expect(strstr(r.out, "\nFound 1 unique roots.\n"), "%s", r.out);
  dnt_run_free(&r);
  /* the threads' stacks too: the sample's Workers object is held by locals of Main and of its
   * worker threads' methods (each frame's GC info read at its call), the pinned array and the
   * options by those and by locals of the runtime's own threads */
  const uint64_t held[] = {workers, pinned, options, value};
  struct dnt_run all;
  for (size_t i = 0; i < sizeof held / sizeof held[0]; i++) {
    snprintf(cmd, sizeof cmd, "gcroot %" PRIx64, held[i]);
    gcroot_as_dotnet_dumps(core, cmd, &all);
    dnt_run_free(&all);
  }
  snprintf(cmd, sizeof cmd, "gcroot %" PRIx64, workers);
  cr_assert_eq(dnt_run_dntrace(&all, "dump", "analyze", core, "-c", cmd, NULL), 0, "%s", all.err);
  cr_expect(strstr(all.out, " Sample.Program.Main(System.String[]) [") && strstr(all.out, "\n        rbp-") &&
                strstr(all.out, "\nThread "),
            "%s", all.out);
  /* --json: the text's roots and paths */
  expect_json_agrees(core, cmd, all.out, dir,
                     "import json, sys, re\n"
                     "j = json.loads(open(sys.argv[1]).read())\n"
                     "text = open(sys.argv[2]).read()\n"
                     "lines = [l.strip() for l in text.splitlines()]\n"
                     "def slot(r):\n"
                     "    if r['kind'] != 'stack': return (int(r['address'], 16), r['kind'])\n"
                     "    o = r['offset']\n"
                     "    return (int(r['address'], 16), r['register'] + ('+%x' % o if o > 0 else '-%x' % -o if o < 0 else ''))\n"
                     "roots = []\n"
                     "for l in lines:\n"
                     "    m = re.match(r'^([0-9a-f]{16}) \\((.*)\\)$', l)\n"
                     "    if m: roots.append((int(m.group(1), 16), m.group(2)))\n"
                     "    m = re.match(r'^([a-z0-9.]+(?:[+-][0-9a-f]+)?):(?: ([0-9a-f]{16}))?$', l)\n"
                     "    if m: roots.append((int(m.group(2) or '0', 16), m.group(1)))\n"
                     "assert [slot(r) for r in j['roots']] == roots, ([slot(r) for r in j['roots']], roots)\n"
                     "paths = [int(l.split()[1], 16) for l in lines if l.startswith('->')]\n"
                     "assert [int(p['address'], 16) for r in j['roots'] for p in r['path']] == paths, (j, paths)\n"
                     "assert j['found'] == len(roots) and j['valid'] and j['stacksSearched'] is True\n"
                     "assert any(r['kind'] == 'stack' and r['method'] == 'Sample.Program.Main(System.String[])' for r in j['roots'])\n");
  dnt_run_free(&all);
  /* bad arguments: one line each, the command failed */
  const char *const bad[] = {"gcroot", "gcroot zz", "gcroot -nostack 10", "gcroot -limit x 10"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    cr_expect_eq(dnt_run_dntrace(&r, "dump", "analyze", core, "-c", bad[i], NULL), 1, "%s", bad[i]);
    cr_expect(strstr(r.err, "gcroot: ") && strchr(r.err, '\n') == r.err + strlen(r.err) - 1, "%s: %s", bad[i], r.err);
    dnt_run_free(&r);
  }
  if (!env) damaged_memory_is_survived(core, dir, (const uint64_t[]){value, pinned, finalizable});
  dnt_rm_rf(dir);
  free(dir);
}

/* Objects whose only root is the finalizer queue: the sample's finalizer thread blocked for good
 * (--stuck-finalizer), five unreachable Sample.Orphan wait behind it, ready for finalization.
 * gcroot of one, with the stacks and without, is dotnet-dump's: the queue's slot, as a root. And
 * a thread waiting inside a catch block (--catch-park): the handler's frame (a funclet) reports
 * the locals of its method, whose own frame then reports none, as dotnet-dump shows them. */
Test(dump_gcroot, the_finalizer_queue_and_a_catch_block_root_as_dotnet_dump_says, .timeout = 600) {
  DNT_REQUIRE_TARGET();
  dotnet_dump();
  char *dir = dnt_temp_dir("dnt-gcroot"), core[4200], cmd[128];
  const char *const args[] = {"--stuck-finalizer", "5", "--catch-park", "--threads", "1", "--no-cpu", "--no-blocking",
                              "--no-alloc", "--no-exceptions", NULL};
  dump_target(dir, args, NULL, "stuck.core", core, sizeof core);
  uint64_t orphan = first_of(core, "Sample.Orphan");
  struct dnt_run r;
  for (int stacks = 0; stacks < 2; stacks++) {
    snprintf(cmd, sizeof cmd, "gcroot %s%" PRIx64, stacks ? "" : "-nostacks ", orphan);
    gcroot_as_dotnet_dumps(core, cmd, &r);
    cr_expect(strstr(r.out, "Finalizer Queue:\n    ") && strstr(r.out, " (finalizer root)\n          -> ") &&
                  strstr(r.out, " Sample.Orphan \n\nFound 1 unique roots.\n"),
              "%s", r.out);
    dnt_run_free(&r);
  }
  snprintf(cmd, sizeof cmd, "gcroot %" PRIx64, first_of(core, "Sample.CatchHeld"));
  gcroot_as_dotnet_dumps(core, cmd, &r);
  const char *frame = strstr(r.out, " Sample.CatchPark.Run(System.Threading.CancellationToken) [");
  cr_expect(frame && !strstr(frame + 1, " Sample.CatchPark.Run("), "one frame of Run reports its locals: %s", r.out);
  dnt_run_free(&r);
  dnt_rm_rf(dir);
  free(dir);
}

Test(dump_gcroot, a_workstation_heaps_roots_are_what_dotnet_dump_prints, .timeout = 600) {
  roots_of_the_heap_sample(NULL);
}

Test(dump_gcroot, a_server_heaps_roots_are_what_dotnet_dump_prints, .timeout = 600) {
  const char *const env[] = {"DOTNET_gcServer=1", "DOTNET_GCHeapCount=2", NULL};
  roots_of_the_heap_sample(env);
}
