/* The analyses (exceptions, locks, ...) on traces a hostile target could write (issue 29): made
 * here with the test writer, each one the shape of an attack, read by the dntrace binary. What
 * is asserted is what the program did (its exit, its report, its peak memory), never its speed. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/bytes-cr.h"
#include "../lib/files-cr.h"
#include "../lib/ntr-writer.h"
#include "../lib/run.h"
#include "ntr.h"

#define RUNTIME "Microsoft-Windows-DotNETRuntime"
#define QPC0 1000000ull
#define FREQ 1000000ull
enum { MD_THROWN = 1, MD_START, MD_STOP };

static char *temp_dir(void) { return dnt_temp_dir("dnt-hostile"); }

/* A V5 trace's start: the header, the runtime's exception and contention events described (their
 * fields come from dntrace's schema, as for the real runtime), and stack 1 of depth made-up
 * addresses, every one distinct (a deep recursion's stack: 8 bytes a frame on the wire). */
static void begin_trace(ntrw *w, uint32_t depth) {
  ntrw_trace t = {QPC0, FREQ, 8, 4321, 2, 1000000, NULL, 0};
  ntrw_md md[] = {
      {MD_THROWN, RUNTIME, 80, "", 0x8000, 1, 2, -1, NULL, 0, 0, 1},
      {MD_START, RUNTIME, 81, "", 0x4000, 2, 4, -1, NULL, 0, 0, 1},
      {MD_STOP, RUNTIME, 91, "", 0x4000, 1, 4, -1, NULL, 0, 0, 1},
  };
  ntrw_init(w, 0);
  ntrw_trace_hdr(w, &t);
  ntrw_md_begin(w);
  for (size_t k = 0; k < sizeof md / sizeof md[0]; k++) ntrw_metadata(w, &md[k]);
  ntrw_block_end(w);
  uint64_t *frames = malloc((depth ? depth : 1) * sizeof *frames);
  cr_assert(frames);
  for (uint32_t i = 0; i < depth; i++) frames[i] = 0x7f0000100000ull + 0x40ull * i;
  const uint64_t *stacks[] = {frames};
  ntrw_stacks(w, 1, 1, stacks, &depth);
  free(frames);
}

static void event(ntrw *w, uint32_t md, uint32_t seq, uint64_t ts, const struct bytes *p) {
  ntrw_ev ev = {.metadata_id = md, .seq = seq, .thread = 77, .capture_thread = 77, .stack_id = 1,
                .ts = QPC0 + ts, .payload = p->b, .payload_size = (uint32_t)p->n};
  ntrw_event(w, &ev);
}

/* n exceptions of one type, each with a message of its own (a group each), all thrown from
 * stack 1. */
static void throws(ntrw *w, uint32_t n) {
  static struct bytes p; /* 256 KiB: off the stack */
  ntrw_ev_begin(w, 1);
  for (uint32_t i = 0; i < n; i++) {
    /* a number, which folds, and letters, which do not: a folded message of its own each */
    char msg[64], who[8] = {0};
    for (uint32_t k = 0, v = i; k < 4; k++, v /= 26) who[k] = (char)('a' + v % 26);
    snprintf(msg, sizeof msg, "request %u refused by %s", i, who);
    p.n = 0;
    putws(&p, "Hostile.Exception"), putws(&p, msg), put64(&p, 0x1234), put32(&p, 0x80131500);
    put16(&p, 0), put16(&p, 0);
    event(w, MD_THROWN, i + 1, 10 * (uint64_t)i, &p);
  }
  ntrw_block_end(w);
}

/* n waits of 1 ms, each for a lock of its own, all from stack 1. */
static void waits(ntrw *w, uint32_t n) {
  static struct bytes p; /* 256 KiB: off the stack */
  ntrw_ev_begin(w, 1);
  for (uint32_t i = 0; i < n; i++) {
    p.n = 0;
    put8(&p, 0), put16(&p, 0), put64(&p, 0x10000 + 0x20ull * i), put64(&p, 0x20000 + 0x20ull * i);
    put64(&p, 78);
    event(w, MD_START, 2 * i + 1, 10 * (uint64_t)i, &p);
    p.n = 0;
    put8(&p, 0), put16(&p, 0), putf64(&p, 1e6);
    event(w, MD_STOP, 2 * i + 2, 10 * (uint64_t)i + 1, &p);
  }
  ntrw_block_end(w);
}

static char *write_trace(const char *dir, const char *name, uint32_t depth, uint32_t nthrows, uint32_t nwaits) {
  ntrw w;
  begin_trace(&w, depth);
  if (nthrows) throws(&w, nthrows);
  if (nwaits) waits(&w, nwaits);
  ntrw_end(&w);
  char *path = malloc(strlen(dir) + strlen(name) + 2);
  cr_assert(path);
  sprintf(path, "%s/%s", dir, name);
  dnt_write_file(path, w.buf, w.len);
  ntrw_release(&w);
  return path;
}

/* Lines of s that contain what. */
static int lines_with(const char *s, const char *what) {
  int n = 0;
  for (const char *l = s; *l;) {
    const char *e = strchr(l, '\n');
    size_t len = e ? (size_t)(e - l) : strlen(l);
    if (memmem(l, len, what, strlen(what))) n++;
    l = e ? e + 1 : l + len;
  }
  return n;
}

/* ---- memory amplification through the analyses' stacks (issue 29, item 1) ---- */

/* What K distinct keys over one deep stack may add to the peak RSS: the stack is stored once (8
 * bytes a frame, its names once), each key a few dozen bytes. Before the fix every key copied
 * the whole stack: 2000 keys over 100,000 frames took 4.7 GB. The bound holds the sanitizer
 * build's shadow and quarantine. */
#define DEPTH 100000u
#define KEYS 2000u
#define RSS_BOUND_KB (64L * 1024)

/* The peak RSS of `dntrace CMD` on the same deep stack under two keys: what the command needs
 * before the keys multiply (the binary, the schema, the stack once). */
static long two_keys_rss_kb(const char *dir, const char *cmd, int locks) {
  char *path = write_trace(dir, "two.nettrace", DEPTH, locks ? 0 : 2, locks ? 2 : 0);
  struct dnt_run r;
  cr_assert_eq(dnt_run_dntrace(&r, cmd, path, NULL), 0, "%s: %s", cmd, r.err);
  long kb = r.maxrss_kb;
  dnt_run_free(&r);
  free(path);
  cr_assert_gt(kb, 0);
  return kb;
}

/* `dntrace CMD PATH OPT VAL` on the trace of many keys in dir: exit 0, and its peak RSS within the
 * bound over that of the same command on two keys. */
static void run_within_bound(struct dnt_run *r, const char *dir, const char *cmd, const char *path, const char *opt,
                             const char *val) {
  long base = two_keys_rss_kb(dir, cmd, strcmp(cmd, "locks") == 0);
  cr_assert_eq(dnt_run_dntrace(r, cmd, path, opt, val, NULL), 0, "%s: %s", cmd, r->err);
  cr_log_info("%s: peak RSS %ld KiB, %ld KiB with two keys", cmd, r->maxrss_kb, base);
  cr_assert_leq(r->maxrss_kb - base, RSS_BOUND_KB, "%s: peak RSS %ld KiB, %ld KiB with two keys", cmd, r->maxrss_kb,
                base);
}

Test(amplification, exceptions_of_distinct_messages_over_one_deep_stack, .timeout = 600) {
  char *dir = temp_dir();
  char *path = write_trace(dir, "throws.nettrace", DEPTH, KEYS, 0);
  struct dnt_run r;
  run_within_bound(&r, dir, "exceptions", path, "--by", "message");
  cr_assert(strstr(r.out, "Exceptions: 2000 thrown"), "%s", r.out);
  cr_assert(strstr(r.out, "2000 distinct type and message"), "%s", r.out);
  /* every group is one throw from the one stack: the report shows ten of them */
  cr_assert_eq(lines_with(r.out, "Hostile.Exception"), 10, "%s", r.out);
  cr_assert(strstr(r.out, "?!0x7f0000100000"), "the stack's leaf frame: %s", r.out);
  dnt_run_free(&r);
  /* by site (the default), the 2000 messages are one group, three of them shown as examples;
   * the deep stack is walked once for all of them, within the same memory bound */
  run_within_bound(&r, dir, "exceptions", path, NULL, NULL);
  cr_assert(strstr(r.out, "1 type, 1 throw site\n"), "%s", r.out);
  cr_assert(strstr(r.out, "1 with message: request {n} refused by "), "%s", r.out);
  cr_assert(strstr(r.out, "1997 with other messages\n"), "%s", r.out);
  dnt_run_free(&r);
  free(path);
  dnt_rm_rf(dir);
  free(dir);
}

Test(amplification, waits_for_distinct_locks_over_one_deep_stack, .timeout = 600) {
  char *dir = temp_dir();
  char *path = write_trace(dir, "waits.nettrace", DEPTH, 0, KEYS);
  struct dnt_run r;
  run_within_bound(&r, dir, "locks", path, "--format", "json");
  cr_assert(strstr(r.out, "\"waits\":2000"), "%.2000s", r.out);
  dnt_run_free(&r);
  free(path);
  dnt_rm_rf(dir);
  free(dir);
}

/* ---- terminal injection through the text views (issue 29, item 2) ---- */

/* Strings as a hostile runtime (or a service quoting a request) writes them: escape sequences
 * that clear the screen, retitle the window, move the cursor, ring the bell; a C1 CSI (U+009B,
 * written as UTF-16 and read as UTF-8 C2 9B); a lone CR that would overwrite a line. */
#define EVIL_NS "Evil\x1b]0;owned\x07"
#define EVIL_METHOD "Run\x1b[2J\r"
#define EVIL_TYPE "Evil\x1b[31mException"
#define EVIL_MESSAGE "bad\r\x1b[1A\x9b" "2J"
#define EVIL_ALLOC "Evil\x1b[5mType"
#define EVIL_THREAD "owner\x1b[8m"
#define EVIL_CATCH "Catch\x1b[H"
#define METHOD_START 0x7f0000200000ull
#define SAMPLER "Microsoft-DotNETCore-SampleProfiler"
#define EVIL_PROVIDER "Evil\x1b[2JProvider"
enum { MD_METHOD = 10, MD_SAMPLE, MD_ALLOC, MD_JIT_START, MD_CATCH, MD_CATCH_STOP, MD_SELF };
static const ntrw_field evil_fields[] = {{"Count\x1b[8m", NTR_TYPE_INT32, NULL, NULL, 0, 0}};

/* ASCII and Latin-1 (one byte a character here) as UTF-16LE with its NUL. */
static void put_latin1(struct bytes *p, const char *s) {
  for (const unsigned char *c = (const unsigned char *)s; *c; c++) put16(p, *c);
  put16(p, 0);
}

/* A V6 trace of one evil method: its samples, an exception type and message thrown from it and
 * caught in another evil method, a lock it waits for (owned by a thread of an evil name), an
 * allocation of an evil type, its JIT compilation. */
static char *write_evil_trace(const char *dir) {
  static const char *kv[] = {"ProcessId", "4321", "HardwareThreadCount", "2", "ExpectedCPUSamplingRate", "1000000"};
  ntrw_trace t = {QPC0, FREQ, 8, 0, 0, 0, kv, 3};
  ntrw_md md[] = {
      {MD_METHOD, RUNTIME, 143, "", 0x10, 1, 4, -1, NULL, 0, 0, 1},
      {MD_SAMPLE, SAMPLER, 0, "ThreadSample", 0, 0, 0, -1, NULL, 0, 0, 0},
      {MD_THROWN, RUNTIME, 80, "", 0x8000, 1, 2, -1, NULL, 0, 0, 1},
      {MD_START, RUNTIME, 81, "", 0x4000, 2, 4, -1, NULL, 0, 0, 1},
      {MD_STOP, RUNTIME, 91, "", 0x4000, 1, 4, -1, NULL, 0, 0, 1},
      {MD_ALLOC, RUNTIME, 10, "", 0x1, 4, 5, -1, NULL, 0, 0, 1},
      {MD_JIT_START, RUNTIME, 145, "", 0x10, 0, 5, -1, NULL, 0, 0, 1},
      {MD_CATCH, RUNTIME, 250, "", 0x8000, 0, 4, -1, NULL, 0, 0, 1},
      {MD_CATCH_STOP, RUNTIME, 256, "", 0x8000, 0, 4, -1, NULL, 0, 0, 1},
      /* a self-describing event: its provider, name and field name are the trace's words too */
      {MD_SELF, EVIL_PROVIDER, 1, "Tick\x07", 0, 0, 4, -1, evil_fields, 1, 0, 0},
  };
  ntrw w;
  ntrw_init(&w, 1);
  ntrw_trace_hdr(&w, &t);
  ntrw_thread(&w, 1, 77, "worker");
  ntrw_thread(&w, 2, 78, EVIL_THREAD);
  ntrw_md_begin(&w);
  for (size_t k = 0; k < sizeof md / sizeof md[0]; k++) ntrw_metadata(&w, &md[k]);
  ntrw_block_end(&w);
  static const uint64_t frames[] = {METHOD_START + 0x10, METHOD_START + 0x120}; /* leaf first */
  const uint64_t *const stacks[] = {frames};
  const uint32_t nframes[] = {2};
  ntrw_stacks(&w, 1, 1, stacks, nframes);

  static struct bytes p[16];
  for (int i = 0; i < 16; i++) p[i].n = 0;
  size_t np = 0;
  uint32_t mds[16];
  /* the method, covering both frames */
  mds[np] = MD_METHOD;
  put64(&p[np], 0x9000), put64(&p[np], 0x8000), put64(&p[np], METHOD_START), put32(&p[np], 0x200);
  put32(&p[np], 0x06000001), put32(&p[np], 0), put_latin1(&p[np], EVIL_NS), put_latin1(&p[np], EVIL_METHOD);
  put_latin1(&p[np], "void ()"), put16(&p[np], 0);
  np++;
  for (int i = 0; i < 3; i++) { /* three samples of it, managed code */
    mds[np] = MD_SAMPLE;
    put32(&p[np], 2);
    np++;
  }
  mds[np] = MD_THROWN;
  put_latin1(&p[np], EVIL_TYPE), put_latin1(&p[np], EVIL_MESSAGE), put64(&p[np], METHOD_START + 0x10);
  put32(&p[np], 0x80131500), put16(&p[np], 0), put16(&p[np], 0);
  np++;
  mds[np] = MD_CATCH;
  put64(&p[np], METHOD_START + 0x10), put64(&p[np], 0x9000), put_latin1(&p[np], EVIL_CATCH), put16(&p[np], 0);
  np++;
  mds[np] = MD_CATCH_STOP;
  np++;
  mds[np] = MD_START;
  put8(&p[np], 0), put16(&p[np], 0), put64(&p[np], 0x10000), put64(&p[np], 0x20000), put64(&p[np], 78);
  np++;
  mds[np] = MD_STOP;
  put8(&p[np], 0), put16(&p[np], 0), putf64(&p[np], 2e6);
  np++;
  mds[np] = MD_ALLOC;
  put32(&p[np], 100000), put32(&p[np], 0), put16(&p[np], 0), put64(&p[np], 100000), put64(&p[np], 0x5000);
  put_latin1(&p[np], EVIL_ALLOC), put32(&p[np], 0), put64(&p[np], 0x6000), put64(&p[np], 64);
  np++;
  mds[np] = MD_JIT_START;
  put64(&p[np], 0x9000), put64(&p[np], 0x8000), put32(&p[np], 0x06000001), put32(&p[np], 20);
  put_latin1(&p[np], EVIL_NS), put_latin1(&p[np], EVIL_METHOD), put_latin1(&p[np], "void ()"), put16(&p[np], 0);
  np++;
  mds[np] = MD_SELF;
  put32(&p[np], 7);
  np++;
  ntrw_ev_begin(&w, 1);
  for (size_t i = 0; i < np; i++) {
    ntrw_ev ev = {.metadata_id = mds[i], .seq = (uint32_t)i + 1, .thread = 1, .capture_thread = 1,
                  .stack_id = mds[i] == MD_METHOD || mds[i] == MD_JIT_START || mds[i] == MD_SELF ? 0 : 1,
                  .ts = QPC0 + 1000 * (uint64_t)(i + 1), .payload = p[i].b, .payload_size = (uint32_t)p[i].n};
    ntrw_event(&w, &ev);
  }
  ntrw_block_end(&w);
  ntrw_end(&w);
  char *path = malloc(strlen(dir) + 32);
  cr_assert(path);
  sprintf(path, "%s/evil.nettrace", dir);
  dnt_write_file(path, w.buf, w.len);
  ntrw_release(&w);
  return path;
}

/* The first byte of s a terminal would act on (a C0 control other than the newline, DEL, a C1
 * control as UTF-8), or NULL. */
static const char *control_in(const char *s) {
  for (const unsigned char *c = (const unsigned char *)s; *c; c++)
    if ((*c < 0x20 && *c != '\n') || *c == 0x7f || (c[0] == 0xc2 && c[1] >= 0x80 && c[1] <= 0x9f))
      return (const char *)c;
  return NULL;
}

/* `dntrace CMD PATH [OPT [VAL]]` prints want (the escaped form) and nothing a terminal acts on. */
static void expect_escaped(const char *cmd, const char *path, const char *opt, const char *val, const char *want) {
  struct dnt_run r;
  int st = dnt_run_dntrace(&r, cmd, path, opt, val, NULL);
  cr_assert_eq(st, 0, "%s %s: exit %d: %s", cmd, opt ? opt : "", st, r.err);
  const char *bad = control_in(r.out);
  cr_assert_null(bad, "%s %s: a raw control byte 0x%02x in its output, at offset %td:\n%s", cmd, opt ? opt : "",
                 bad ? (unsigned char)*bad : 0, bad ? bad - r.out : 0, r.out);
  bad = control_in(r.err);
  cr_assert_null(bad, "%s: a raw control byte in its messages: %s", cmd, r.err);
  cr_assert(strstr(r.out, want), "%s %s: '%s' escaped is printed:\n%s", cmd, opt ? opt : "", want, r.out);
  dnt_run_free(&r);
}

/* An analysis that finds nothing in the trace says so in one line, exit 1, as every analysis
 * does (issue 28 item 15: gc and threadpool wrote a table of zeros, exit 0). */
static void expect_nothing(const char *cmd, const char *path, const char *says) {
  struct dnt_run r;
  int st = dnt_run_dntrace(&r, cmd, path, NULL);
  cr_assert_eq(st, 1, "%s: exit %d: %s%s", cmd, st, r.out, r.err);
  cr_assert_str_eq(r.out, "", "%s: no report of nothing", cmd);
  cr_assert(strstr(r.err, says) && strchr(r.err, '\n') == r.err + strlen(r.err) - 1, "%s: one line: %s", cmd,
            r.err);
  dnt_run_free(&r);
}

static void expect_convert_of(const char *cmd, const char *path, const char *format, const char *want) {
  struct dnt_run r;
  int st = dnt_run_dntrace(&r, cmd, path, "--format", format, "-o", "-", NULL);
  cr_assert_eq(st, 0, "%s --format %s: exit %d: %s", cmd, format, st, r.err);
  const char *bad = control_in(r.out);
  cr_assert_null(bad, "%s --format %s: a raw control byte 0x%02x at offset %td", cmd, format,
                 bad ? (unsigned char)*bad : 0, bad ? bad - r.out : 0);
  cr_assert(strstr(r.out, want), "%s --format %s: '%s' escaped is written:\n%.3000s", cmd, format, want, r.out);
  dnt_run_free(&r);
}

static void expect_convert(const char *path, const char *format, const char *want) {
  expect_convert_of("convert", path, format, want);
}

Test(injection, every_text_view_escapes_what_the_trace_named) {
  char *dir = temp_dir();
  char *path = write_evil_trace(dir);
  const char *method = "Evil\\x1b]0;owned\\x07.Run\\x1b[2J\\r";
  expect_escaped("report", path, NULL, NULL, method);
  expect_escaped("report", path, "--threads", NULL, method);
  expect_escaped("exceptions", path, "--by", "message", "Evil\\x1b[31mException: bad\\r\\x1b[1A\\u009b2J");
  expect_escaped("exceptions", path, NULL, NULL, "1 with message: bad\\r\\x1b[1A\\u009b2J");
  expect_escaped("exceptions", path, NULL, NULL, method);
  expect_escaped("exceptions", path, NULL, NULL, "caught in Catch\\x1b[H");
  expect_escaped("locks", path, NULL, NULL, method);
  expect_escaped("locks", path, NULL, NULL, "owner\\x1b[8m");
  expect_escaped("allocs", path, NULL, NULL, "Evil\\x1b[5mType");
  expect_escaped("allocs", path, "--by", "stack", method);
  expect_escaped("jit", path, NULL, NULL, method);
  expect_escaped("info", path, NULL, NULL, "owner\\x1b[8m");
  expect_nothing("gc", path, "no GC in this trace");
  expect_nothing("threadpool", path, "no thread-pool event in this trace");
  expect_escaped("events", path, NULL, NULL, "Evil\\x1b[5mType");
  expect_escaped("events", path, NULL, NULL, "Evil\\x1b[2JProvider Tick\\x07 Count\\x1b[8m=7");
  /* the profile formats read as text: folded on a terminal, a flame graph's labels (XML has no
   * place for a control character: a browser refuses the whole file) */
  expect_convert(path, "folded", "Evil\\x1b]0:owned\\x07.Run\\x1b[2J\\r");
  expect_convert(path, "flamegraph", method);
  expect_convert_of("exceptions", path, "folded", "Throw(Evil");
  free(path);
  dnt_rm_rf(dir);
  free(dir);
}

/* ---- a clock that wraps ---- */

/* Two exceptions whose times lie more than 2^63 ticks apart (a hostile writer's): the session's
 * length comes out negative. The exceptions' report (which counts the session's seconds) is
 * written without undefined behaviour: a negative length converted to a count of seconds, found
 * by fuzz-exclocks, asked for a row of seconds beyond any memory. */
Test(clock, events_further_apart_than_the_clock_counts, .timeout = 120) {
  char *dir = temp_dir();
  ntrw w;
  begin_trace(&w, 1);
  static struct bytes p;
  const uint64_t when[] = {0, (1ull << 63) + 1000};
  ntrw_ev_begin(&w, 1);
  for (uint32_t i = 0; i < 2; i++) {
    p.n = 0;
    putws(&p, "Hostile.Exception"), putws(&p, "far apart"), put64(&p, 0x1234), put32(&p, 0x80131500);
    put16(&p, 0), put16(&p, 0);
    event(&w, MD_THROWN, i + 1, when[i], &p);
  }
  ntrw_block_end(&w);
  ntrw_end(&w);
  char path[4200];
  snprintf(path, sizeof path, "%s/wrapped.nettrace", dir);
  dnt_write_file(path, w.buf, w.len);
  ntrw_release(&w);
  for (int json = 0; json < 2; json++) {
    struct dnt_run r;
    int rc = json ? dnt_run_dntrace(&r, "exceptions", path, "--format", "json", NULL)
                  : dnt_run_dntrace(&r, "exceptions", path, NULL);
    cr_expect(rc == 0 && !strstr(r.err, "runtime error") && !strstr(r.err, "Sanitizer"), "exceptions%s: exit %d: %s",
              json ? " --format json" : "", rc, r.err);
    cr_expect(strstr(r.out, json ? "\"thrown\":2" : "Hostile.Exception"), "%s", r.out);
    dnt_run_free(&r);
  }
  dnt_rm_rf(dir);
  free(dir);
}
