/* `dntrace perf`: the perf script parser fed every split and truncation, the mappings that turn
 * printed offsets back into addresses, the perf map table, and the command on the real sample
 * with real perf (CountPrimes on top, WaitLoop near zero, the perf map off again, a target in a
 * private mount namespace still named), and perf record started without waiting (serve --cpu). */
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "../lib/files-cr.h"
#include "../lib/run.h"
#include "../lib/target-cr.h"
#include "../lib/target.h"
#include "dnt-perf.h"

/* ---- the parser ---- */

/* Everything the callbacks saw, as text: two parses agree when their transcripts do. */
struct transcript {
  char *buf;
  size_t len;
  FILE *fp;
  int samples, mmaps;
  dnt_perf_maps *maps;
  const char *chains_of; /* when set, frames of this event only (the others' chains left out) */
};

static int t_sample(void *ud, const dnt_perf_sample *s) {
  struct transcript *t = ud;
  t->samples++;
  fprintf(t->fp, "S[%s] %d/%d %llu <%s> <%s>\n", s->comm, s->pid, s->tid, (unsigned long long)s->time_ns, s->event,
          t->chains_of ? "" : s->trace);
  if (t->chains_of && !dnt_perf_event_is(s->event, t->chains_of)) {
    /* its fields only (name=value words): printed with every field, a chain-less event has its
     * address and symbol at the end of the line */
    fprintf(t->fp, "  fields:");
    for (const char *w = s->trace; *w;) {
      size_t len = strcspn(w, " ");
      if (memchr(w, '=', len)) fprintf(t->fp, " %.*s", (int)len, w);
      w += len;
      w += strspn(w, " ");
    }
    fputc('\n', t->fp);
    return 0;
  }
  for (size_t i = 0; i < s->nframes; i++)
    fprintf(t->fp, "  %llx %s | %s | %llx\n", (unsigned long long)s->frames[i].addr,
            s->frames[i].sym ? s->frames[i].sym : "-", s->frames[i].dso ? s->frames[i].dso : "-",
            (unsigned long long)(t->maps ? dnt_perf_maps_absolute(t->maps, s->pid, &s->frames[i]) : 0));
  return 0;
}

static int t_mmap(void *ud, const dnt_perf_mmap *m) {
  struct transcript *t = ud;
  t->mmaps++;
  fprintf(t->fp, "M %d %llx %llx %llx %s [%s]\n", m->pid, (unsigned long long)m->start, (unsigned long long)m->len,
          (unsigned long long)m->pgoff, m->prot, m->file);
  if (t->maps) cr_assert_eq(dnt_perf_maps_add(t->maps, m), 0);
  return 0;
}

/* Parses text fed in pieces of the given sizes (cycled), returns the transcript (heap). */
static char *parse_in_pieces(const char *text, size_t len, size_t first, size_t rest, struct transcript *out) {
  struct transcript t = {0};
  t.fp = open_memstream(&t.buf, &t.len);
  t.maps = dnt_perf_maps_new();
  static const dnt_perf_script_cb cb = {t_sample, t_mmap};
  dnt_perf_script *p = dnt_perf_script_new(&cb, &t);
  cr_assert(p);
  size_t off = 0, piece = first ? first : rest;
  while (off < len) {
    size_t n = len - off < piece ? len - off : piece;
    cr_assert_eq(dnt_perf_script_feed(p, text + off, n), 0);
    off += n;
    piece = rest;
  }
  cr_assert_eq(dnt_perf_script_finish(p), 0);
  struct dnt_perf_script_stats st;
  dnt_perf_script_stats(p, &st);
  fprintf(t.fp, "stats %llu %llu %llu\n", (unsigned long long)st.samples, (unsigned long long)st.mmaps,
          (unsigned long long)st.malformed_lines);
  dnt_perf_script_free(p);
  dnt_perf_maps_free(t.maps);
  fclose(t.fp);
  if (out) *out = t;
  return t.buf;
}

/* What perf prints, written for the test: a JIT frame in the double mapping, a thread name with
 * spaces and a pid-like word, a tracepoint, C++ symbols with spaces and parentheses. */
static const char sample_text[] =
    "Sample     0/0         0.000000000: PERF_RECORD_MMAP2 100/100: [0x7f0000400000(0xa000) @ 0x111000 00:01 18935 0]: r-xs /memfd:doublemapper (deleted)\n"
    "Sample     0/0         0.000000000: PERF_RECORD_MMAP2 100/100: [0x7f0000000000(0x3c5000) @ 0xb0000 fe:00 351013 0]: r-xp /usr/lib/libcoreclr.so\n"
    "cpu-work 100/101 20639.099779057: cpu-clock: \n"
    "\t          1181b3 [unknown] (/memfd:doublemapper (deleted))\n"
    "\t          0b1234 MethodDesc::DoPrestub(MethodTable*, int) (/usr/lib/libcoreclr.so)\n"
    "\t          891f5 start_thread (/usr/lib/x86_64-linux-gnu/libc.so.6)\n"
    "\tffffffff81001234 finish_task_switch.isra.0 ([kernel.kallsyms])\n"
    "\n"
    ".NET TP Worker 3/4 x 100/102 20639.100000001: cpu-clock: \n"
    "\t          deadbeef [unknown] ([unknown])\n"
    "\n"
    "blocking-work 100/103 20639.2: sched:sched_switch: prev_comm=blocking-work prev_pid=103 prev_prio=120 prev_state=S ==> next_comm=swapper/1 next_pid=0 next_prio=120\n"
    "\n"
    "this line is perf's chatter, not a sample\n"
    "cpu-work 100/101 20639.300000000: cpu-clock: \n"
    "\t 1181b3 [unknown] (/memfd:doublemapper (deleted))\n";

/* kernel.perf_event_paranoid as Documentation/admin-guide/perf-security.rst describes it: at 2 a
 * user still profiles the user space of its own processes; only at 3 (Debian) is perf root's. */
Test(perf_check, paranoid_levels_and_whose_process) {
  char msg[512];
  cr_assert_eq(dnt_perf_check_access(2, 1000, 42, 1000, msg, sizeof msg), 1, "own process at 2");
  cr_assert(strstr(msg, "no kernel frames"), "a warning, not a refusal: %s", msg);
  cr_assert_not(strstr(msg, "may not watch other processes"), "%s", msg);
  cr_assert_eq(dnt_perf_check_access(2, 1000, 42, 0, msg, sizeof msg), -1, "root's process at 2");
  cr_assert(strstr(msg, "process 42 belongs to uid 0"), "%s", msg);
  cr_assert_eq(dnt_perf_check_access(3, 1000, 42, 1000, msg, sizeof msg), -1, "own process at 3");
  cr_assert(strstr(msg, "root only"), "%s", msg);
  cr_assert_eq(dnt_perf_check_access(1, 1000, 42, 1000, msg, sizeof msg), 0);
  cr_assert_eq(dnt_perf_check_access(-1, 1000, 42, 1000, msg, sizeof msg), 0);
  cr_assert_eq(dnt_perf_check_access(3, 0, 42, 1000, msg, sizeof msg), 0, "root at any level");
}

/* The command as a user at paranoid 2 against its own process: the check lets it through (the
 * process is no .NET one, so the target check is what stops it), not "may not watch". */
Test(perf_check, own_process_at_paranoid_2_is_not_refused) {
  FILE *fp = fopen("/proc/sys/kernel/perf_event_paranoid", "r");
  int level = -9;
  if (fp) {
    if (fscanf(fp, "%d", &level) != 1) level = -9;
    fclose(fp);
  }
  if (level != 2 || geteuid() != 0)
    cr_skip_test("needs kernel.perf_event_paranoid=2 (it is %d) and root, to run as another user", level);
  int child = dnt_spawn_sleeper_as(65534, 0);
  cr_assert_gt(child, 0);
  char out_dir[] = "/tmp/dnt-perf-paranoid-XXXXXX";
  cr_assert_not_null(mkdtemp(out_dir));
  cr_assert_eq(chmod(out_dir, 0777), 0);
  char cmd[4300];
  snprintf(cmd, sizeof cmd,
           "cd / && exec setpriv --reuid=65534 --regid=65534 --clear-groups \"$DNT_BIN\" perf -p %d --duration 1s "
           "-o %s/perf.nettrace",
           (int)child, out_dir);
  char *argv[] = {"/bin/sh", "-c", cmd, NULL};
  struct dnt_run r;
  int rc = dnt_run_argv(&r, argv, NULL, DNT_HANG_MS);
  char rm[128];
  snprintf(rm, sizeof rm, "rm -rf %s", out_dir);
  (void)!system(rm);
  kill(child, SIGKILL);
  waitpid(child, NULL, 0);
  cr_assert_not(strstr(r.err, "may not watch"), "%s", r.err);
  cr_assert_eq(rc, 3, "the target check stops it: %s", r.err);
  cr_assert(strstr(r.err, "not a .NET process"), "%s", r.err);
  dnt_run_free(&r);
}

Test(perf_script, fields_of_each_line) {
  struct transcript t;
  char *out = parse_in_pieces(sample_text, strlen(sample_text), 0, strlen(sample_text), &t);
  cr_expect_eq(t.samples, 4, "%s", out);
  cr_expect_eq(t.mmaps, 2, "%s", out);
  /* 0x7f0000400000 + 0x1181b3 - 0x111000 */
  cr_expect(strstr(out, "  1181b3 - | /memfd:doublemapper (deleted) | 7f00004071b3\n"), "%s", out);
  /* 0x7f0000000000 + 0xb1234 - 0xb0000 */
  cr_expect(strstr(out, "  b1234 MethodDesc::DoPrestub(MethodTable*, int) | /usr/lib/libcoreclr.so | 7f0000001234\n"),
            "%s", out);
  cr_expect(strstr(out, "  ffffffff81001234 finish_task_switch.isra.0 | [kernel.kallsyms] | ffffffff81001234\n"), "%s",
            out);
  cr_expect(strstr(out, "S[.NET TP Worker 3/4 x] 100/102 20639100000001 <cpu-clock> <>\n  deadbeef - | - | deadbeef\n"),
            "%s", out);
  cr_expect(strstr(out, "S[blocking-work] 100/103 20639200000000 <sched:sched_switch> <prev_comm=blocking-work prev_pid=103"),
            "%s", out);
  cr_expect(strstr(out, "stats 4 2 1\n"), "one malformed line counted: %s", out);
  /* the last sample has no blank line after it: finish delivers it */
  cr_expect(strstr(out, "S[cpu-work] 100/101 20639300000000"), "%s", out);
  free(out);
}

/* The period field (`-F ...,time,period,event`): each cpu-clock sample's share of CPU time, which
 * perf adjusts to hold its frequency; compare adds them up into a thread's CPU time (under load a
 * count times the nominal period missed a tenth of it). A line without it reads as before. */
static int keep_periods(void *ud, const dnt_perf_sample *s) {
  uint64_t *v = ud;
  v[v[0] + 1] = s->period;
  v[0]++;
  cr_assert_str_eq(s->event, "cpu-clock");
  cr_assert_eq(s->tid, 101);
  return 0;
}

Test(perf_script, the_period_field) {
  static const char text[] = "cpu-work 100/101 20639.099779057:    1001001 cpu-clock: \n"
                             "\t          1181b3 [unknown] (/memfd:doublemapper (deleted))\n"
                             "\n"
                             "cpu-work 100/101 20639.100779057:     250000 cpu-clock: \n"
                             "\n"
                             "cpu-work 100/101 20639.101779057: cpu-clock: \n";
  uint64_t got[4] = {0};
  static const dnt_perf_script_cb cb = {keep_periods, NULL};
  dnt_perf_script *p = dnt_perf_script_new(&cb, got);
  cr_assert(p);
  cr_assert_eq(dnt_perf_script_feed(p, text, strlen(text)), 0);
  cr_assert_eq(dnt_perf_script_finish(p), 0);
  dnt_perf_script_free(p);
  cr_assert_eq(got[0], 3);
  cr_expect_eq(got[1], 1001001);
  cr_expect_eq(got[2], 250000);
  cr_expect_eq(got[3], 0, "no period printed: 0");
  /* into a thread's CPU time */
  dnt_cpu_states *cs = dnt_cpu_states_new();
  cr_assert(cs);
  dnt_perf_sample a = {.comm = "cpu-work", .pid = 100, .tid = 101, .time_ns = 1000, .event = "cpu-clock", .trace = "",
                       .period = 1001001};
  dnt_perf_sample b = a;
  b.time_ns = 2000000, b.period = 250000;
  cr_assert_eq(dnt_cpu_states_add(cs, &a), 0);
  cr_assert_eq(dnt_cpu_states_add(cs, &b), 0);
  cr_assert_eq(dnt_cpu_states_finish(cs, 0), 0);
  cr_expect_eq(dnt_cpu_states_thread_cpu_ns(cs, 101), 1251001);
  cr_expect_eq(dnt_cpu_states_thread_cpu_ns(cs, 102), 0);
  dnt_cpu_states_free(cs);
}

/* What `perf script -F sw:...,ip,sym,dso -F trace:comm,...,trace` prints (compare asks for it:
 * the switches' call chains are most of the text and unused): tracepoint lines with COMM right-
 * aligned and no blank line after them, one after another. Copied in form from perf 6.1's output. */
static const char per_type_text[] =
    "              sh 15424/15424   414.866297029:  sched:sched_switch: prev_comm=sh prev_pid=15424 prev_prio=120 prev_state=R+ ==> next_comm=tokio-rt-worker next_pid=69 next_prio=120\n"
    "sh 15424/15424   414.866943610: cpu-clock/freq=999/: \n"
    "\t            e15b [unknown] (/usr/bin/dash)\n"
    "\t            ae77 [unknown] (/usr/bin/dash)\n"
    "\n"
    "  dotnet worker 1 15426/15427   414.872522306:  sched:sched_waking: comm=sh pid=15424 prio=120 target_cpu=001\n"
    "             seq 15426/15426   414.872685178:  sched:sched_switch: prev_comm=seq prev_pid=15426 prev_prio=120 prev_state=S ==> next_comm=aclocal next_pid=15164 next_prio=120\n"
    "sh 15424/15424   414.877283948: cpu-clock/freq=999/: \n"
    "\tffffffff8161bac3 get_page_from_freelist ([kernel.kallsyms])\n"
    "\n";

Test(perf_script, tracepoints_printed_without_chains) {
  size_t len = strlen(per_type_text);
  struct transcript t;
  char *out = parse_in_pieces(per_type_text, len, 0, len, &t);
  cr_expect_eq(t.samples, 5, "%s", out);
  cr_expect(strstr(out, "S[sh] 15424/15424 414866297029 <sched:sched_switch> <prev_comm=sh prev_pid=15424"), "%s", out);
  cr_expect(strstr(out, "S[sh] 15424/15424 414866943610 <cpu-clock/freq=999/> <>\n  e15b - | /usr/bin/dash"), "%s", out);
  cr_expect(strstr(out, "S[dotnet worker 1] 15426/15427 414872522306 <sched:sched_waking> <comm=sh pid=15424"), "%s", out);
  cr_expect(strstr(out, "S[seq] 15426/15426 414872685178 <sched:sched_switch> <prev_comm=seq"), "%s", out);
  cr_expect(strstr(out, "stats 5 0 0\n"), "nothing malformed: %s", out);
  for (size_t cut = 1; cut < len; cut++) {
    char *two = parse_in_pieces(per_type_text, len, cut, len, NULL);
    cr_assert_str_eq(two, out, "split at %zu", cut);
    free(two);
  }
  free(out);
}

/* Runs `perf script` on data with the given -F arguments, parsed into a transcript (heap). */
static char *script_of(const char *data, const char *f1, const char *f2) {
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "perf script -i %s --ns --show-mmap-events -F %s%s%s 2>/dev/null", data, f1,
           f2 ? " -F " : "", f2 ? f2 : "");
  FILE *in = popen(cmd, "r");
  cr_assert(in, "%s", cmd);
  struct transcript t = {0};
  t.fp = open_memstream(&t.buf, &t.len);
  t.chains_of = "cpu-clock";
  static const dnt_perf_script_cb cb = {t_sample, t_mmap};
  dnt_perf_script *p = dnt_perf_script_new(&cb, &t);
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, in)) > 0) cr_assert_eq(dnt_perf_script_feed(p, buf, n), 0);
  cr_assert_eq(pclose(in), 0, "%s", cmd);
  cr_assert_eq(dnt_perf_script_finish(p), 0);
  struct dnt_perf_script_stats st;
  dnt_perf_script_stats(p, &st);
  fprintf(t.fp, "stats %llu %llu %llu\n", (unsigned long long)st.samples, (unsigned long long)st.mmaps,
          (unsigned long long)st.malformed_lines);
  dnt_perf_script_free(p);
  fclose(t.fp);
  return t.buf;
}

/* Real perf, a real recording of switches, wake-ups and cpu-clock samples: printed with every
 * chain, or with the tracepoints' chains left out (what compare reads), the parser sees the same
 * samples, the same cpu-clock frames and nothing malformed. */
Test(perf_script, real_perf_same_samples_with_or_without_tracepoint_chains, .timeout = 60) {
  DNT_REQUIRE_PERF();
  char dir[] = "/tmp/dnt-perf-fmt-XXXXXX", data[64], cmd[512];
  cr_assert(mkdtemp(dir));
  snprintf(data, sizeof data, "%s/p.data", dir);
  snprintf(cmd, sizeof cmd,
           "perf record --quiet -e cpu-clock/freq=999/ -e sched:sched_switch -e sched:sched_waking/call-graph=no/ "
           "-g -k CLOCK_MONOTONIC -o %s -- sh -c 'for j in 1 2 3; do i=0; while [ $i -lt 20000 ]; do i=$((i+1)); "
           "done; sleep 0.02; done' >/dev/null 2>&1",
           data);
  cr_assert_eq(system(cmd), 0, "%s", cmd);
  char *all = script_of(data, "comm,pid,tid,time,event,ip,sym,dso,trace", NULL);
  char *lean = script_of(data, "sw:comm,pid,tid,time,event,ip,sym,dso", "trace:comm,pid,tid,time,event,trace");
  /* every wake-up perf printed is a sample (chain-less, they follow one another with no blank
   * line between, COMM right-aligned: a reader that took them for frames lost a third of them) */
  snprintf(cmd, sizeof cmd, "perf script -i %s --ns -F comm,pid,tid,time,event,trace 2>/dev/null | grep -c ' sched:sched_waking: '",
           data);
  FILE *count = popen(cmd, "r");
  long printed = -1;
  cr_assert(count && fscanf(count, "%ld", &printed) == 1);
  pclose(count);
  long parsed = 0;
  for (const char *w = all; (w = strstr(w, "<sched:sched_waking>")); w++) parsed++;
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  (void)!system(cmd);
  cr_assert_gt(printed, 0, "the recording has wake-ups");
  cr_expect_eq(parsed, printed, "wake-ups parsed %ld, printed by perf %ld", parsed, printed);
  cr_assert(strstr(all, "<sched:sched_switch>") && strstr(all, "<cpu-clock"), "%.2000s", all);
  cr_assert(strstr(all, "\nstats ") && !strstr(all, "\nstats 0 "), "%s", strstr(all, "\nstats "));
  size_t n = strlen(all);
  cr_expect(n > 3 && strcmp(all + n - 3, " 0\n") == 0, "nothing malformed: %s", strstr(all, "\nstats "));
  if (strcmp(lean, all) != 0) {
    size_t at = 0;
    while (lean[at] == all[at]) at++;
    size_t from = at > 300 ? at - 300 : 0;
    cr_assert_fail("the two printings parse alike; they part at byte %zu:\n-- every chain:\n%.600s\n-- lean:\n%.600s",
                   at, all + from, lean + from);
  }
  free(all);
  free(lean);
}

Test(perf_script, every_split_gives_the_same_result) {
  size_t len = strlen(sample_text);
  char *whole = parse_in_pieces(sample_text, len, 0, len, NULL);
  for (size_t cut = 1; cut < len; cut++) {
    char *two = parse_in_pieces(sample_text, len, cut, len, NULL);
    cr_assert_str_eq(two, whole, "split at %zu", cut);
    free(two);
  }
  char *bytes = parse_in_pieces(sample_text, len, 0, 1, NULL);
  cr_expect_str_eq(bytes, whole, "a byte at a time");
  free(bytes);
  free(whole);
}

Test(perf_script, every_truncation_is_survived) {
  size_t len = strlen(sample_text);
  int last = 0;
  for (size_t n = 0; n <= len; n++) {
    struct transcript t;
    char *out = parse_in_pieces(sample_text, n, 0, 7, &t);
    /* a cut line is at most one header: never more samples than the whole text has */
    cr_assert_leq(t.samples, 4, "%zu bytes: %s", n, out);
    last = t.samples;
    free(out);
  }
  cr_expect_eq(last, 4);
}

Test(perf_script, limits) {
  /* a line longer than the maximum is skipped and counted; the next sample still parses */
  size_t big = DNT_PERF_MAX_LINE + 100;
  char *text = malloc(big + 256);
  memset(text, 'x', big);
  text[big] = '\n';
  strcpy(text + big + 1, "t 1/2 3.000000001: cpu-clock: \n\t 10 f (/lib/a.so)\n\n");
  struct transcript t;
  char *out = parse_in_pieces(text, strlen(text), 0, 4096, &t);
  cr_expect_eq(t.samples, 1, "%s", out);
  cr_expect(strstr(out, "stats 1 0 1\n"), "%s", out);
  free(out);
  free(text);
  /* a chain deeper than the maximum keeps its leaf end */
  size_t cap = (DNT_PERF_MAX_FRAMES + 50) * 32 + 64;
  text = malloc(cap);
  size_t o = (size_t)snprintf(text, cap, "t 1/2 3.000000001: cpu-clock: \n");
  for (int i = 0; i < DNT_PERF_MAX_FRAMES + 50; i++) o += (size_t)snprintf(text + o, cap - o, "\t %x f%d (/lib/a.so)\n", i + 1, i);
  snprintf(text + o, cap - o, "\n");
  struct dnt_perf_script_stats st;
  static const dnt_perf_script_cb cb = {NULL, NULL};
  dnt_perf_script *p = dnt_perf_script_new(&cb, NULL);
  cr_assert_eq(dnt_perf_script_feed(p, text, strlen(text)), 0);
  cr_assert_eq(dnt_perf_script_finish(p), 0);
  dnt_perf_script_stats(p, &st);
  cr_expect_eq(st.samples, 1);
  cr_expect_eq(st.truncated_chains, 1);
  dnt_perf_script_free(p);
  free(text);
}

Test(perf_script, garbage_is_counted_never_fatal) {
  unsigned seed = 12345;
  char buf[4096];
  static const dnt_perf_script_cb cb = {NULL, NULL};
  for (int round = 0; round < 200; round++) {
    for (size_t i = 0; i < sizeof buf; i++) {
      seed = seed * 1103515245u + 12345u;
      static const char alphabet[] = "0123456789abcdef /:()[]\t\n.xPERF_RECORD_MMAP2@-";
      buf[i] = alphabet[(seed >> 16) % (sizeof alphabet - 1)];
    }
    dnt_perf_script *p = dnt_perf_script_new(&cb, NULL);
    cr_assert_eq(dnt_perf_script_feed(p, buf, sizeof buf), 0);
    cr_assert_eq(dnt_perf_script_finish(p), 0);
    dnt_perf_script_free(p);
  }
}

/* ---- the sched tracepoints read from perf.data itself ---- */

/* `perf record --quiet OPTIONS -o DIR/p.data -- WORKLOAD` into a new folder (prefix: its name's):
 * 1 when perf recorded. */
static int perf_record(const char *prefix, char *dir, size_t cap, char *data, size_t dcap, const char *options,
                       const char *workload) {
  snprintf(dir, cap, "/tmp/%s-XXXXXX", prefix);
  cr_assert(mkdtemp(dir));
  snprintf(data, dcap, "%s/p.data", dir);
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "perf record --quiet %s -o %s -- %s >/dev/null 2>&1", options, data, workload);
  return system(cmd) == 0;
}

/* A real recording of switches (some preempted: two busy loops share one CPU; some asleep) and
 * wake-ups, as `dntrace collect --native` records them; 0 when perf or tracefs cannot. */
static int record_sched(char *dir, size_t cap, char *data, size_t dcap) {
  return perf_record("dnt-perfdata", dir, cap, data, dcap,
                     "-e cpu-clock/freq=999/ -e sched:sched_switch -e sched:sched_waking -g -k CLOCK_MONOTONIC",
                     "taskset -c 0 sh -c 'busy() { i=0; while [ $i -lt 15000 ]; do i=$((i+1)); done; }; "
                     "for j in 1 2 3; do busy & busy; wait; sleep 0.01; done'");
}

static void remove_dir(const char *dir) {
  char cmd[256];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  (void)!system(cmd);
}

static void *map_whole(const char *path, size_t *len) {
  int fd = open(path, O_RDONLY);
  cr_assert_geq(fd, 0, "%s", path);
  struct stat st;
  cr_assert_eq(fstat(fd, &st), 0);
  void *buf = malloc((size_t)st.st_size);
  cr_assert(buf);
  cr_assert_eq(read(fd, buf, (size_t)st.st_size), st.st_size);
  close(fd);
  *len = (size_t)st.st_size;
  return buf;
}

/* One line per sched sample: "switch PID/TID TIME runnable|asleep" or "waking PID/TID TIME WOKEN". */
struct sched_lines {
  char *buf;
  size_t len;
  FILE *fp;
  long runnable, asleep, wakings;
};

static void line_of(struct sched_lines *l, const dnt_perf_sample *s, int runnable, unsigned long long woken) {
  if (!strcmp(s->event, "sched:sched_switch")) {
    fprintf(l->fp, "switch %d/%d %llu %s\n", s->pid, s->tid, (unsigned long long)s->time_ns, runnable ? "runnable" : "asleep");
    runnable ? l->runnable++ : l->asleep++;
  } else if (!strcmp(s->event, "sched:sched_waking")) {
    fprintf(l->fp, "waking %d/%d %llu %llu\n", s->pid, s->tid, (unsigned long long)s->time_ns, woken);
    l->wakings++;
  }
}

static void decoded_line(void *ud, const dnt_perf_sample *s) {
  cr_assert(s->decoded && !*s->trace && !s->nframes);
  line_of(ud, s, s->left_runnable, (unsigned long long)s->woken_tid);
}

/* What perf printed, read here without the library's decoding: prev_state's first letter (R
 * and R+ left the CPU runnable), and the woken thread's pid= (the field before prio=). */
static int printed_line(void *ud, const dnt_perf_sample *s) {
  const char *state = strstr(s->trace, " prev_state="), *pid = strstr(s->trace, " pid=");
  unsigned long long woken = 0;
  if (pid) woken = strtoull(pid + 5, NULL, 10);
  line_of(ud, s, state && state[12] == 'R', woken);
  return 0;
}

static int by_line(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The lines sorted (perf prints in time order, the file holds them as the CPUs' buffers flushed). */
static char *sorted(struct sched_lines *l) {
  fclose(l->fp);
  size_t n = 0, cap = 1024;
  char **v = malloc(cap * sizeof *v);
  for (char *p = strtok(l->buf, "\n"); p; p = strtok(NULL, "\n")) {
    if (n == cap) v = realloc(v, (cap *= 2) * sizeof *v);
    v[n++] = p;
  }
  qsort(v, n, sizeof *v, by_line);
  char *out;
  size_t len;
  FILE *fp = open_memstream(&out, &len);
  for (size_t i = 0; i < n; i++) fprintf(fp, "%s\n", v[i]);
  fclose(fp);
  free(v);
  free(l->buf);
  return out;
}

/* compare reads the switches and wake-ups from the file instead of having perf print them: on a
 * real recording, the same samples (pid, tid, time to the ns), each switch left runnable exactly
 * when perf prints prev_state=R or R+, each wake-up the thread perf prints as pid=. */
Test(perfdata, sched_samples_as_perf_script_prints_them, .timeout = 60) {
  DNT_REQUIRE_PERF();
  if (!dnt_perf_can_trace_sched()) {
    if (getenv("CI") && !strcmp(getenv("CI"), "true")) cr_assert_fail("perf cannot record sched tracepoints (CI=true)");
    cr_skip_test("SKIP: tracefs is not readable: no sched tracepoints to record");
  }
  char dir[64], data[96], cmd[256];
  cr_assert(record_sched(dir, sizeof dir, data, sizeof data), "perf record of sched tracepoints failed");

  struct sched_lines printed = {0}, decoded = {0};
  printed.fp = open_memstream(&printed.buf, &printed.len);
  decoded.fp = open_memstream(&decoded.buf, &decoded.len);
  snprintf(cmd, sizeof cmd, "perf script -i %s --ns -F comm,pid,tid,time,event,trace 2>/dev/null", data);
  FILE *in = popen(cmd, "r");
  cr_assert(in, "%s", cmd);
  static const dnt_perf_script_cb cb = {printed_line, NULL};
  dnt_perf_script *p = dnt_perf_script_new(&cb, &printed);
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, in)) > 0) cr_assert_eq(dnt_perf_script_feed(p, buf, n), 0);
  cr_assert_eq(pclose(in), 0, "%s", cmd);
  cr_assert_eq(dnt_perf_script_finish(p), 0);
  dnt_perf_script_free(p);

  size_t len;
  uint8_t *file = map_whole(data, &len);
  struct dnt_perfdata_stats st;
  char msg[256];
  int rc = dnt_perfdata_sched(file, len, decoded_line, &decoded, &st, msg, sizeof msg);
  free(file);
  remove_dir(dir);
  cr_assert_eq(rc, 0, "%s", msg);
  cr_expect_eq(st.tracepoint_events, 2);
  cr_expect_eq(st.other_tracepoint_events, 0);
  cr_expect_eq((long)st.switches, decoded.runnable + decoded.asleep);
  cr_expect_eq((long)st.wakings, decoded.wakings);
  cr_expect_gt(printed.runnable, 0, "two busy loops on one CPU preempt each other");
  cr_expect_gt(printed.asleep, 0, "sh waits for its children");
  cr_expect_gt(printed.wakings, 0, "and is woken");
  long pr = printed.runnable, pa = printed.asleep, pw = printed.wakings;
  long dr = decoded.runnable, da = decoded.asleep, dw = decoded.wakings;
  char *want = sorted(&printed), *got = sorted(&decoded);
  if (strcmp(want, got) != 0) {
    size_t at = 0;
    while (want[at] == got[at]) at++;
    size_t from = at > 200 ? at - 200 : 0;
    cr_assert_fail("perf printed %ld runnable, %ld asleep, %ld wake-ups; the file gave %ld, %ld, %ld; they part at "
                   "byte %zu:\n-- perf script:\n%.400s\n-- perf.data:\n%.400s",
                   pr, pa, pw, dr, da, dw, at, want + from, got + from);
  }
  free(want);
  free(got);
}

/* A perf.data built here, byte by byte, as perf.data-file-format.txt lays it out: two tracepoint
 * attrs (sched_switch id 11, sched_waking id 12; IDENTIFIER|TID|TIME|RAW), their samples, and the
 * tracing data holding the formats given: what each kernel's print format says decides. */
struct built {
  uint8_t b[8192];
  size_t n;
};

static size_t put(struct built *f, const void *p, size_t n) {
  cr_assert_leq(f->n + n, sizeof f->b);
  memcpy(f->b + f->n, p, n);
  f->n += n;
  return f->n - n;
}
static size_t put64(struct built *f, uint64_t v) { return put(f, &v, 8); }
static size_t put32(struct built *f, uint32_t v) { return put(f, &v, 4); }
static void set64(struct built *f, size_t at, uint64_t v) { memcpy(f->b + at, &v, 8); }

static void put_sample(struct built *f, uint64_t id, uint32_t tid, uint64_t time, const void *raw, uint32_t raw_len) {
  uint32_t size = 8 + 8 + 8 + 8 + 4 + raw_len;
  size = (size + 7) & ~7u;
  uint32_t type = 9; /* PERF_RECORD_SAMPLE */
  uint16_t misc = 0, sz = (uint16_t)size;
  size_t start = f->n;
  put(f, &type, 4), put(f, &misc, 2), put(f, &sz, 2);
  put64(f, id), put32(f, 1000), put32(f, tid), put64(f, time), put32(f, raw_len), put(f, raw, raw_len);
  while (f->n < start + size) put(f, "", 1);
}

/* switches[i]: prev_state values (offset 32, 8 bytes, as on Linux 6); one waking of pid 77 and one
 * of pid -1. */
static void build(struct built *f, const char *switch_print_fmt, const uint64_t *states, size_t nstates) {
  f->n = 0;
  put(f, "PERFILE2", 8), put64(f, 104), put64(f, 80);
  size_t attrs = put64(f, 0);
  put64(f, 2 * 80);
  size_t data = put64(f, 0), data_size = put64(f, 0);
  put64(f, 0), put64(f, 0);
  put64(f, 1u << 1), put64(f, 0), put64(f, 0), put64(f, 0); /* features: HEADER_TRACING_DATA */
  size_t ids[2];
  set64(f, attrs, f->n);
  for (int i = 0; i < 2; i++) {
    put32(f, 2), put32(f, 64), put64(f, 300 + (uint64_t)i), put64(f, 1);
    put64(f, (1u << 16) | (1u << 1) | (1u << 2) | (1u << 10)); /* IDENTIFIER|TID|TIME|RAW */
    for (int k = 0; k < 4; k++) put64(f, 0);                  /* the rest of a 64-byte attr */
    ids[i] = put64(f, 0);
    put64(f, 8);
  }
  set64(f, ids[0], put64(f, 11));
  set64(f, ids[1], put64(f, 12));
  set64(f, data, f->n);
  uint8_t raw[64] = {0};
  for (size_t i = 0; i < nstates; i++) {
    memcpy(raw + 32, &states[i], 8);
    put_sample(f, 11, 100 + (uint32_t)i, 5000 + i, raw, 64);
  }
  int32_t pid = 77;
  memcpy(raw + 24, &pid, 4);
  put_sample(f, 12, 200, 9000, raw, 40);
  pid = -1;
  memcpy(raw + 24, &pid, 4);
  put_sample(f, 12, 201, 9001, raw, 40);
  put_sample(f, 99, 202, 9002, raw, 40); /* an id no attr has: perf skips it */
  uint64_t data_off;
  memcpy(&data_off, f->b + data, 8);
  set64(f, data_size, f->n - data_off);
  size_t sec = put64(f, 0);
  put64(f, 0);
  size_t tracing = f->n;
  put(f, "\027\010\104tracing", 10), put(f, "0.6", 4), put(f, "\0\010", 2), put32(f, 4096);
  put(f, "header_page", 12), put64(f, 0), put(f, "header_event", 13), put64(f, 0), put32(f, 0);
  put32(f, 1), put(f, "sched", 6), put32(f, 2);
  char fmt[2048];
  int len = snprintf(fmt, sizeof fmt,
                     "name: sched_switch\nID: 300\nformat:\n\tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;\n"
                     "\tfield:long prev_state;\toffset:32;\tsize:8;\tsigned:1;\n\nprint fmt: \"prev_state=%%s\", %s\n",
                     switch_print_fmt);
  put64(f, (uint64_t)len), put(f, fmt, (size_t)len);
  len = snprintf(fmt, sizeof fmt,
                 "name: sched_waking\nID: 301\nformat:\n\tfield:char comm[16];\toffset:8;\tsize:16;\tsigned:0;\n"
                 "\tfield:pid_t pid;\toffset:24;\tsize:4;\tsigned:1;\n\nprint fmt: \"comm=%%s pid=%%d\", REC->comm, REC->pid\n");
  put64(f, (uint64_t)len), put(f, fmt, (size_t)len);
  set64(f, sec, tracing);
  set64(f, sec + 8, f->n - tracing);
}

struct decoded_list {
  char text[1024];
  size_t len;
};

static void note_decoded(void *ud, const dnt_perf_sample *s) {
  struct decoded_list *l = ud;
  l->len += (size_t)snprintf(l->text + l->len, sizeof l->text - l->len, "%s %d %llu %s %llu;", s->event + 12, s->tid,
                             (unsigned long long)s->time_ns, s->left_runnable ? "R" : "-",
                             (unsigned long long)s->woken_tid);
}

/* Each kernel's sched_switch print format, its prev_state values, and what perf prints for them
 * (the kernel's __trace_sched_switch_state and libtraceevent's ternary: no letter bit set is R). */
Test(perfdata, prev_state_read_by_each_kernels_print_format) {
  static const struct {
    const char *print_fmt;
    uint64_t states[4];
    const char *want; /* R: perf prints R or R+, -: a letter */
  } cases[] = {
      /* Linux 4.14 and later: TASK_REPORT_MAX (0x100 on 6.x) marks a preemption, R+ */
      {"(REC->prev_state & ((((0x00000000 | 0x00000001 | 0x00000002 | 0x00000004 | 0x00000008 | 0x00000010 | "
       "0x00000020 | 0x00000040) + 1) << 1) - 1)) ? __print_flags(REC->prev_state & ((((0x00000000 | 0x00000001 | "
       "0x00000002 | 0x00000004 | 0x00000008 | 0x00000010 | 0x00000020 | 0x00000040) + 1) << 1) - 1), \"|\", "
       "{ 0x00000001, \"S\" }) : \"R\", REC->prev_state & (((0x00000000 | 0x00000001) + 1) << 1) ? \"+\" : \"\"",
       {0, 0x100, 0x1, 0x80},
       "R R - -"},
      /* Linux 4.4 to 4.13: TASK_STATE_MAX (2048) marks a preemption */
      {"REC->prev_state & (2048-1) ? __print_flags(REC->prev_state & (2048-1), \"|\", { 1, \"S\"} , { 2, \"D\" }) : "
       "\"R\", REC->prev_state & 2048 ? \"+\" : \"\"",
       {0, 2048, 2, 1024},
       "R R - -"},
      /* older still: every bit a letter */
      {"REC->prev_state ? __print_flags(REC->prev_state, \"|\", { 1, \"S\"} ) : \"R\"", {0, 1, 2048, 0}, "R - - R"},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    static struct built f;
    build(&f, cases[c].print_fmt, cases[c].states, 4);
    struct decoded_list l = {{0}, 0};
    struct dnt_perfdata_stats st;
    char msg[256];
    cr_assert_eq(dnt_perfdata_sched(f.b, f.n, note_decoded, &l, &st, msg, sizeof msg), 0, "case %zu: %s", c, msg);
    char want[1024];
    const char *w = cases[c].want;
    snprintf(want, sizeof want,
             "switch 100 5000 %c 0;switch 101 5001 %c 0;switch 102 5002 %c 0;switch 103 5003 %c 0;"
             "waking 200 9000 - 77;waking 201 9001 - 0;",
             w[0], w[2], w[4], w[6]);
    cr_expect_str_eq(l.text, want, "case %zu", c);
    cr_expect(st.switches == 4 && st.wakings == 2 && st.tracepoint_events == 2 && !st.other_tracepoint_events);
  }
  /* a print format read by no rule here: a tracepoint left to perf (the loader has it printed) */
  static struct built f;
  uint64_t zero[1] = {0};
  char msg[256];
  struct dnt_perfdata_stats st;
  build(&f, "__print_symbolic(REC->prev_state, { 0, \"R\" })", zero, 1);
  cr_expect_eq(dnt_perfdata_sched(f.b, f.n, NULL, NULL, &st, msg, sizeof msg), 0, "%s", msg);
  cr_expect(st.other_tracepoint_events == 1 && st.switches == 0 && st.wakings == 2);
  /* a file perf did not finish (data size 0), and a pipe-mode header (16 bytes): refused */
  build(&f, "REC->prev_state ? 1 : \"R\"", zero, 1);
  cr_expect_eq(dnt_perfdata_sched(f.b, f.n, NULL, NULL, NULL, msg, sizeof msg), 0, "%s", msg);
  uint64_t v = 0;
  memcpy(f.b + 48, &v, 8);
  cr_expect_eq(dnt_perfdata_sched(f.b, f.n, NULL, NULL, NULL, msg, sizeof msg), DNT_PERFDATA_UNSUPPORTED);
  v = 16;
  memcpy(f.b + 8, &v, 8);
  cr_expect_eq(dnt_perfdata_sched(f.b, f.n, NULL, NULL, NULL, msg, sizeof msg), DNT_PERFDATA_UNSUPPORTED);
}

struct rss_watch { /* this process's resident memory (kB), and a cut of the file at one sample */
  uint64_t samples, cut_at;
  long base_kb, peak_kb;
  int fd;
};

static void watch_rss(void *ud, const dnt_perf_sample *s) {
  struct rss_watch *w = ud;
  (void)s;
  if (++w->samples % 20000 == 0) {
    long kb = dnt_proc_status_kb(0, "VmRSS");
    if (kb > w->peak_kb) w->peak_kb = kb;
  }
  if (w->cut_at && w->samples == w->cut_at) cr_assert_eq(ftruncate(w->fd, 32 << 20), 0);
}

/* A 64 MiB perf.data: a built one whose first switch record is repeated to fill the data
 * section; its path in path (a mkstemp template), open at the returned fd; *copies: the switches. */
static int big_perfdata(char *path, size_t *copies_out) {
  static struct built f;
  uint64_t zero[1] = {0};
  build(&f, "REC->prev_state ? 1 : \"R\"", zero, 1);
  uint64_t data_off, data_size, tracing_off;
  memcpy(&data_off, f.b + 40, 8);
  memcpy(&data_size, f.b + 48, 8);
  const uint8_t *rec = f.b + data_off; /* the switch: 8-byte header, its size at +6 */
  uint16_t rsize;
  memcpy(&rsize, rec + 6, 2);
  const size_t copies = (64u << 20) / rsize;
  const uint64_t grow = (uint64_t)(copies - 1) * rsize;
  int fd = mkstemp(path);
  cr_assert_geq(fd, 0);
  uint64_t new_size = data_size + grow;
  memcpy(f.b + 48, &new_size, 8);
  cr_assert_eq(write(fd, f.b, data_off), (ssize_t)data_off);
  static uint8_t block[1u << 20];
  size_t per = sizeof block / rsize, left = copies;
  for (size_t i = 0; i < per; i++) memcpy(block + i * rsize, rec, rsize);
  while (left) {
    size_t n = left < per ? left : per;
    cr_assert_eq(write(fd, block, n * rsize), (ssize_t)(n * rsize));
    left -= n;
  }
  /* the rest: the other records, the feature section (its offset of the tracing data moved) */
  size_t rest = data_off + rsize;
  size_t sec = data_off + data_size;
  memcpy(&tracing_off, f.b + sec, 8);
  tracing_off += grow;
  memcpy(f.b + sec, &tracing_off, 8);
  cr_assert_eq(write(fd, f.b + rest, f.n - rest), (ssize_t)(f.n - rest));
  *copies_out = copies;
  return fd;
}

/* A 64 MiB perf.data read from its file: a window at a time, records cut by a window's end
 * carried over, so the process grows by a few MiB, not by the file (compare on a long
 * recording); every sample read, as from the whole file in memory. */
Test(perfdata, a_file_is_read_in_flat_memory, .timeout = 60) {
  char path[] = "/tmp/dnt-perfdata-big-XXXXXX";
  size_t copies;
  int fd = big_perfdata(path, &copies);
  struct rss_watch w = {.base_kb = dnt_proc_status_kb(0, "VmRSS")};
  w.peak_kb = w.base_kb;
  struct dnt_perfdata_stats st;
  char msg[256];
  cr_assert_eq(dnt_perfdata_sched_fd(fd, watch_rss, &w, &st, msg, sizeof msg), 0, "%s", msg);
  cr_expect_eq(st.switches, copies, "every switch read: %llu of %zu", (unsigned long long)st.switches, copies);
  cr_expect_eq(st.wakings, 2);
  cr_expect_eq(w.samples, copies + 2);
  cr_expect_leq(w.peak_kb - w.base_kb, 24 * 1024, "resident memory grew by %ld kB reading a %lld kB file",
                w.peak_kb - w.base_kb, (long long)lseek(fd, 0, SEEK_END) / 1024);
  /* the same file whole in memory: the same samples */
  off_t len = lseek(fd, 0, SEEK_END);
  uint8_t *whole = malloc((size_t)len);
  cr_assert(whole);
  cr_assert_eq(pread(fd, whole, (size_t)len, 0), (ssize_t)len);
  struct dnt_perfdata_stats mem;
  cr_assert_eq(dnt_perfdata_sched(whole, (size_t)len, NULL, NULL, &mem, msg, sizeof msg), 0, "%s", msg);
  cr_expect_eq(mem.switches, st.switches);
  cr_expect_eq(mem.wakings, st.wakings);
  free(whole);
  close(fd);
  unlink(path);
}

/* The file cut (by perf, a user) while it is read: one clear error, no crash (a mapping of it
 * would die of SIGBUS on the pages past the new end). */
Test(perfdata, a_file_cut_while_it_is_read_is_an_error, .timeout = 60) {
  char path[] = "/tmp/dnt-perfdata-cut-XXXXXX";
  size_t copies;
  int fd = big_perfdata(path, &copies);
  struct rss_watch w = {.cut_at = 10, .fd = fd};
  struct dnt_perfdata_stats st;
  char msg[256];
  int rc = dnt_perfdata_sched_fd(fd, watch_rss, &w, &st, msg, sizeof msg);
  cr_expect_eq(rc, DNT_PERFDATA_UNSUPPORTED, "%d: %s", rc, msg);
  cr_expect(strstr(msg, "cut"), "%s", msg);
  cr_expect_lt(w.samples, copies, "the samples after the cut are not invented: %llu", (unsigned long long)w.samples);
  /* cut before the read: the check says so, nothing handed on */
  w = (struct rss_watch){0};
  rc = dnt_perfdata_sched_fd(fd, watch_rss, &w, &st, msg, sizeof msg);
  cr_expect_eq(rc, DNT_PERFDATA_UNSUPPORTED, "%s", msg);
  cr_expect_eq(w.samples, 0);
  close(fd);
  unlink(path);
}

/* CPU states fed by an observer that also notes the threads it saw. */
struct states_seen {
  dnt_cpu_states *cs;
  uint64_t tids[256];
  size_t ntids;
};

static void see(void *ud, const dnt_perf_sample *s) {
  struct states_seen *v = ud;
  size_t i = 0;
  while (i < v->ntids && v->tids[i] != (uint64_t)s->tid) i++;
  if (i == v->ntids && v->ntids < 256) v->tids[v->ntids++] = (uint64_t)s->tid;
  dnt_cpu_states_observe(v->cs, s);
}

/* compare's loader (dnt_perf_load: the switches and wake-ups from the file, perf script for the
 * cpu-clock samples alone) gives the CPU states perf script's whole text gives (the reading
 * before), for every thread at every 50 us of the recording. */
Test(perfdata, the_loader_judges_as_perf_scripts_text_does, .timeout = 60) {
  DNT_REQUIRE_PERF();
  if (!dnt_perf_can_trace_sched()) {
    if (getenv("CI") && !strcmp(getenv("CI"), "true")) cr_assert_fail("perf cannot record sched tracepoints (CI=true)");
    cr_skip_test("SKIP: tracefs is not readable: no sched tracepoints to record");
  }
  char dir[64], data[96], cmd[512];
  cr_assert(record_sched(dir, sizeof dir, data, sizeof data), "perf record of sched tracepoints failed");
  struct states_seen loaded = {.cs = dnt_cpu_states_new()}, text = {.cs = dnt_cpu_states_new()};
  struct dnt_profile *p1 = dnt_profile_new(), *p2 = dnt_profile_new();
  struct dnt_symtab perfmap = {0};
  struct dnt_perf_load_info info;
  dnt_perf_reader *r1 = dnt_perf_load(p1, data, NULL, 1.0, &perfmap, see, &loaded, &info);
  cr_assert(r1, "%s", info.error);
  cr_expect_gt(info.sched_read, 0, "the switches were read from the file");

  dnt_perf_reader *r2 = dnt_perf_reader_new(p2, 0, "cpu-clock", 1.0, NULL);
  dnt_perf_reader_observe(r2, see, &text);
  snprintf(cmd, sizeof cmd,
           "perf script -i %s --ns --show-mmap-events -F sw:comm,pid,tid,time,event,ip,sym,dso "
           "-F trace:comm,pid,tid,time,event,trace 2>/dev/null", data);
  FILE *in = popen(cmd, "r");
  cr_assert(in, "%s", cmd);
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, in)) > 0) cr_assert_eq(dnt_perf_reader_feed(r2, buf, n), 0);
  cr_assert_eq(pclose(in), 0, "%s", cmd);
  cr_assert_eq(dnt_perf_reader_finish(r2), 0);
  remove_dir(dir);

  cr_assert_eq(dnt_cpu_states_finish(loaded.cs, 0), 0);
  cr_assert_eq(dnt_cpu_states_finish(text.cs, 0), 0);
  struct dnt_cpu_states_info a, b;
  dnt_cpu_states_info(loaded.cs, &a);
  dnt_cpu_states_info(text.cs, &b);
  cr_expect(a.has_switches && b.has_switches);
  cr_expect_eq(a.cpu_samples, b.cpu_samples);
  cr_expect_eq(a.first_ns, b.first_ns);
  cr_expect_eq(a.last_ns, b.last_ns);
  cr_expect(a.period_ms == b.period_ms && a.window_ms == b.window_ms);
  cr_assert_eq(loaded.ntids, text.ntids);
  long runnable = 0, blocked = 0;
  for (size_t i = 0; i < text.ntids; i++)
    for (uint64_t t = b.first_ns - 1000000; t <= b.last_ns + 1000000; t += 50000) {
      enum dnt_cpu_state want = dnt_cpu_state_at(text.cs, text.tids[i], t), got = dnt_cpu_state_at(loaded.cs, text.tids[i], t);
      cr_assert_eq(got, want, "thread %llu at %llu: %d, perf script's text says %d", (unsigned long long)text.tids[i],
                   (unsigned long long)t, got, want);
      runnable += want == DNT_OFF_RUNNABLE;
      blocked += want == DNT_OFF_BLOCKED;
    }
  cr_expect(runnable > 0 && blocked > 0, "the recording has both off-CPU states (%ld, %ld)", runnable, blocked);
  dnt_perf_reader_free(r1);
  dnt_perf_reader_free(r2);
  dnt_profile_free(p1);
  dnt_profile_free(p2);
  dnt_symtab_release(&perfmap);
  dnt_cpu_states_free(loaded.cs);
  dnt_cpu_states_free(text.cs);
}

/* Where the tracepoints' formats end: the first feature section (HEADER_TRACING_DATA, bit 1). */
static size_t data_end_of_formats(const uint8_t *file, size_t len) {
  uint64_t data_off, data_size, off, size;
  memcpy(&data_off, file + 40, 8);
  memcpy(&data_size, file + 48, 8);
  cr_assert(file[72] & 2, "the recording has its tracing data");
  cr_assert_leq(data_off + data_size + 16, len);
  memcpy(&off, file + data_off + data_size, 8);
  memcpy(&size, file + data_off + data_size + 8, 8);
  cr_assert_leq(off + size, len);
  return (size_t)(off + size);
}

/* The recording with its data section cut to its first max_records records (what a shorter
 * recording holds) and its feature sections moved up behind them (their offsets too): a loaded
 * machine makes perf write more sched_switch records for the same work, and the work below grows
 * with the square of the file's length; this bounds it. Heap; its length in *out_len. */
static uint8_t *first_records(const uint8_t *file, size_t len, size_t max_records, size_t *out_len, size_t *kept) {
  uint64_t data_off, data_size;
  memcpy(&data_off, file + 40, 8);
  memcpy(&data_size, file + 48, 8);
  cr_assert_leq(data_off + data_size, len);
  size_t off = (size_t)data_off, end = (size_t)(data_off + data_size);
  *kept = 0;
  while (off + 8 <= end && *kept < max_records) { /* perf_event_header: u32 type, u16 misc, u16 size */
    uint16_t size;
    memcpy(&size, file + off + 6, 2);
    cr_assert(size >= 8 && off + size <= end, "a record at %zu of size %u", off, size);
    off += size;
    ++*kept;
  }
  size_t cut = end - off;
  uint8_t *out = malloc(len - cut);
  cr_assert(out);
  memcpy(out, file, off);
  memcpy(out + off, file + end, len - end);
  uint64_t new_size = off - data_off;
  memcpy(out + 48, &new_size, 8);
  int features = 0; /* the header's feature bits (256 of them, at 72): a section each, in that table */
  for (int bit = 0; bit < 256; bit++) features += (file[72 + bit / 8] >> (bit % 8)) & 1;
  cr_assert_leq(off + 16 * (size_t)features, len - cut);
  for (int k = 0; k < features; k++) {
    uint64_t at;
    memcpy(&at, out + off + 16 * (size_t)k, 8);
    cr_assert_geq(at, end, "feature section %d lies behind the records", k);
    at -= cut;
    memcpy(out + off + 16 * (size_t)k, &at, 8);
  }
  *out_len = len - cut;
  return out;
}

/* Every truncation of a real recording (its first 100 records), and a byte changed at every place
 * of its header, attrs and formats (and every 97th of its records): refused or read, never read
 * past the end (ASan). */
Test(perfdata, every_truncation_and_corruption_is_survived, .timeout = 120) {
  DNT_REQUIRE_PERF();
  if (!dnt_perf_can_trace_sched()) {
    if (getenv("CI") && !strcmp(getenv("CI"), "true")) cr_assert_fail("perf cannot record sched tracepoints (CI=true)");
    cr_skip_test("SKIP: tracefs is not readable: no sched tracepoints to record");
  }
  char dir[64], data[96], msg[256];
  cr_assert(record_sched(dir, sizeof dir, data, sizeof data), "perf record of sched tracepoints failed");
  size_t recorded_len, len, records;
  uint8_t *recorded = map_whole(data, &recorded_len);
  remove_dir(dir);
  uint8_t *file = first_records(recorded, recorded_len, 100, &len, &records);
  free(recorded);
  cr_log_info("the recording: %zu bytes; its first %zu records: %zu bytes", recorded_len, records, len);
  struct dnt_perfdata_stats whole;
  cr_assert_eq(dnt_perfdata_sched(file, len, NULL, NULL, &whole, msg, sizeof msg), 0, "%s", msg);
  cr_assert_gt(whole.switches, 0, "sched_switch records among the first %zu", records);
  cr_log_info("%llu switches, %llu wakings", (unsigned long long)whole.switches, (unsigned long long)whole.wakings);
  uint8_t *room = malloc(len);
  for (size_t cut = 0; cut < len; cut++) {
    uint8_t *part = room + len - cut; /* the cut file ends where the allocation does: ASan sees any read past it */
    memcpy(part, file, cut);
    struct dnt_perfdata_stats st;
    int rc = dnt_perfdata_sched(part, cut, NULL, NULL, &st, msg, sizeof msg);
    /* the formats follow the records: cut before their end, the file is refused; after, the
     * features that come later (build ids...) are not read */
    if (cut < data_end_of_formats(file, len))
      cr_assert_eq(rc, DNT_PERFDATA_UNSUPPORTED, "cut at %zu of %zu: %d", cut, len, rc);
    else
      cr_assert(rc == 0 && st.switches == whole.switches && st.wakings == whole.wakings, "cut at %zu: %d", cut, rc);
  }
  free(room);
  uint64_t data_off, data_size;
  memcpy(&data_off, file + 40, 8);
  memcpy(&data_size, file + 48, 8);
  uint8_t *copy = malloc(len);
  for (size_t at = 0; at < len; at += at < data_off || at >= data_off + data_size ? 1 : 97) {
    for (int flip = 0; flip < 2; flip++) {
      memcpy(copy, file, len);
      copy[at] = flip ? (uint8_t)~copy[at] : 0xff;
      struct dnt_perfdata_stats st;
      int rc = dnt_perfdata_sched(copy, len, NULL, NULL, &st, msg, sizeof msg);
      cr_assert(rc == 0 || rc == DNT_PERFDATA_UNSUPPORTED, "byte %zu changed: %d", at, rc);
    }
  }
  free(copy);
  free(file);
}

/* Issue 29 item 9: a perf.data cut short, as a full disk leaves it, at points through its records
 * (between two, inside one): mended, it is read by perf script itself up to its last whole record:
 * as many samples as the cut file holds whole (counted from its bytes here: a record's header
 * gives its type and size). A whole file needs no mending. */
static int record_cpu(char *dir, size_t cap, char *data, size_t dcap) {
  return perf_record("dnt-perfcut", dir, cap, data, dcap, "-e cpu-clock/freq=999/ -g",
                     "sh -c 'i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done'");
}

/* perf script's samples of the file at path (its lines naming the event). */
static long perf_script_samples(const char *path) {
  char cmd[512], line[64];
  snprintf(cmd, sizeof cmd, "perf script -i '%s' 2>/dev/null | grep -c 'cpu-clock'", path);
  FILE *p = popen(cmd, "r");
  cr_assert(p);
  long n = fgets(line, sizeof line, p) ? atol(line) : -1;
  pclose(p);
  return n;
}

Test(perfdata, a_cut_recording_is_mended_to_its_whole_records, .timeout = 240) {
  DNT_REQUIRE_PERF();
  char dir[64], data[96], cut_path[128], mended[128], msg[256];
  cr_assert(record_cpu(dir, sizeof dir, data, sizeof data), "perf record failed");
  size_t len;
  uint8_t *file = map_whole(data, &len);
  uint64_t data_off, data_size;
  memcpy(&data_off, file + 40, 8);
  memcpy(&data_size, file + 48, 8);
  cr_assert(data_size > 0 && data_off + data_size <= len);
  long whole = perf_script_samples(data);
  cr_assert_gt(whole, 10, "samples in the recording");
  snprintf(cut_path, sizeof cut_path, "%s/cut.data", dir);
  snprintf(mended, sizeof mended, "%s/mended.data", dir);
  for (int k = 1; k <= 8; k++) {
    /* an eighth of the records at a time, a few bytes into one; the last: all the records */
    size_t cut = (size_t)(data_off + data_size * (uint64_t)k / 8) - (k == 8 ? 0 : 5);
    long samples = 0;
    size_t end = (size_t)data_off;
    for (;;) { /* the whole records before the cut */
      uint32_t type;
      uint16_t size;
      memcpy(&type, file + end, 4);
      memcpy(&size, file + end + 6, 2);
      if (end + 8 > cut || end + size > cut) break;
      samples += type == 9; /* PERF_RECORD_SAMPLE */
      end += size;
    }
    FILE *fp = fopen(cut_path, "wb");
    cr_assert(fp);
    cr_assert_eq(fwrite(file, 1, cut, fp), cut);
    fclose(fp);
    int in = open(cut_path, O_RDONLY), out = open(mended, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    cr_assert(in >= 0 && out >= 0);
    uint64_t kept, claimed;
    int rc = dnt_perfdata_mend(in, out, &kept, &claimed, msg, sizeof msg);
    close(in);
    close(out);
    if (k == 8) { /* the records whole, only the feature sections cut: perf script reads it as it is */
      cr_assert_eq(rc, 1, "cut after the records: %d %s", rc, msg);
      cr_assert_eq(perf_script_samples(cut_path), whole);
      continue;
    }
    cr_assert_eq(rc, 0, "cut at %zu of %zu: %d %s", cut, len, rc, msg);
    cr_assert_eq(kept, end - data_off, "cut at %zu: the whole records", cut);
    cr_assert_eq(claimed, data_size);
    long got = perf_script_samples(mended);
    cr_assert_eq(got, samples, "cut at %zu (%zu%% of the records): perf script reads %ld samples of the %ld whole",
                 cut, (size_t)(100 * (cut - data_off) / data_size), got, samples);
  }
  int in = open(data, O_RDONLY), out = open(mended, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  uint64_t kept, claimed;
  cr_assert_eq(dnt_perfdata_mend(in, out, &kept, &claimed, msg, sizeof msg), 1, "a whole file needs no mending");
  close(in);
  close(out);
  free(file);
  remove_dir(dir);
}

/* ---- the perf map ---- */

Test(cpu_states, thread_names_file) {
  char path[] = "/tmp/dnt-threads-XXXXXX";
  int fd = mkstemp(path);
  cr_assert_geq(fd, 0);
  char longline[400];
  memset(longline, 'x', sizeof longline);
  memcpy(longline, "14\t", 3);
  memcpy(longline + 255, "17\tpiece", 8); /* where a 256-byte buffer would cut it */
  longline[sizeof longline - 1] = '\n';
  const char *head = "12\tmain\nx\tnot a tid\n13 no tab\n0\tzero\n";
  cr_assert_eq(write(fd, head, strlen(head)), (ssize_t)strlen(head));
  cr_assert_eq(write(fd, longline, sizeof longline), (ssize_t)sizeof longline);
  const char *tail = "15\t.NET TP Worker\n16\tlast";
  cr_assert_eq(write(fd, tail, strlen(tail)), (ssize_t)strlen(tail));
  close(fd);
  dnt_cpu_states *cs = dnt_cpu_states_new();
  cr_assert(cs);
  cr_expect_eq(dnt_cpu_states_load_names(cs, path), 0);
  unlink(path);
  cr_expect_eq(dnt_cpu_states_load_names(cs, path), -ENOENT);
  cr_assert_eq(dnt_cpu_states_finish(cs, 0), 0);
  cr_expect_str_eq(dnt_cpu_states_thread(cs, 12, NULL), "main");
  cr_expect_str_eq(dnt_cpu_states_thread(cs, 13, NULL), "");
  cr_expect_str_eq(dnt_cpu_states_thread(cs, 14, NULL), "", "a line too long is skipped, its tail too");
  cr_expect_str_eq(dnt_cpu_states_thread(cs, 17, NULL), "");
  cr_expect_str_eq(dnt_cpu_states_thread(cs, 15, NULL), ".NET TP Worker");
  cr_expect_str_eq(dnt_cpu_states_thread(cs, 16, NULL), "last", "the last line needs no newline");
  dnt_cpu_states_free(cs);
}

Test(symtab, lookup_and_perf_map) {
  char path[] = "/tmp/dnt-perfmap-XXXXXX";
  int fd = mkstemp(path);
  cr_assert_geq(fd, 0);
  const char *map = "0x1000 100 stub ReportStubBlock<X>\n"
                    "1040 10 int32 [Sample] Sample.CpuWork::CountPrimes(int32)[OptimizedTier1]\n"
                    "not a line\n"
                    "2000 0 zero size\n"
                    "3000 20 void [System.Private.CoreLib] System.Threading.Monitor::Wait(object)[PreJIT]\n";
  cr_assert_eq(write(fd, map, strlen(map)), (ssize_t)strlen(map));
  close(fd);
  struct dnt_symtab t = {0};
  size_t bad = 0;
  cr_assert_eq(dnt_perfmap_load(&t, path, &bad), 0);
  unlink(path);
  cr_expect_eq(bad, 2);
  cr_expect_eq(t.n, 3);
  char name[256];
  const char *s = dnt_symtab_find(&t, 0x1045);
  cr_assert(s);
  cr_expect_str_eq(dnt_perfmap_frame_name(s, name, sizeof name), "Sample!Sample.CpuWork.CountPrimes");
  s = dnt_symtab_find(&t, 0x1050); /* past the method, still in the stub block */
  cr_assert(s);
  cr_expect_str_eq(dnt_perfmap_frame_name(s, name, sizeof name), "[stub] ReportStubBlock<X>");
  cr_expect_null(dnt_symtab_find(&t, 0x1100));
  cr_expect_null(dnt_symtab_find(&t, 0xfff));
  s = dnt_symtab_find(&t, 0x301f);
  cr_assert(s);
  cr_expect_str_eq(dnt_perfmap_frame_name(s, name, sizeof name), "System.Private.CoreLib!System.Threading.Monitor.Wait");
  cr_expect_null(dnt_symtab_find(&t, 0x3020));
  cr_expect_eq(dnt_perfmap_load(&t, "/nonexistent/perf.map", NULL), -ENOENT);
  dnt_symtab_release(&t);
}

/* ---- the command, with real perf ---- */

/* The exclusive share (%) of the report row naming fn, -1 when absent; its ms into *ms_out when
 * not NULL (0 when absent). */
static double share_ms_of(const char *report, const char *fn, double *ms_out) {
  if (ms_out) *ms_out = 0;
  const char *p = strstr(report, fn);
  if (!p) return -1;
  while (p > report && p[-1] != '\n') p--;
  double ms, pct;
  if (sscanf(p, " %lf ms %lf%%", &ms, &pct) != 2) return -1;
  if (ms_out) *ms_out = ms;
  return pct;
}

static double share_of(const char *report, const char *fn) { return share_ms_of(report, fn, NULL); }

/* The --threads view's block of thread tid ("Thread TID (NAME, N samples, ...):", the name when
 * known, up to the blank line), its samples in *samples; NULL when the thread is not listed.
 * Points into report. */
static const char *thread_block(const char *report, unsigned long tid, long *samples, size_t *len) {
  char head[64];
  snprintf(head, sizeof head, "\nThread %lu (", tid);
  const char *p = strstr(report, head), *eol = p ? strchr(p + 1, '\n') : NULL, *n = p ? strstr(p, " samples, ") : NULL;
  if (!p || !n || (eol && n > eol)) return NULL;
  while (n > p && n[-1] >= '0' && n[-1] <= '9') n--;
  if (sscanf(n, "%ld samples", samples) != 1) return NULL;
  p++;
  const char *end = strstr(p, "\n\n");
  *len = end ? (size_t)(end - p) : strlen(p);
  return p;
}

static int fd_points_at(pid_t pid, const char *needle) {
  char cmd[256];
  snprintf(cmd, sizeof cmd, "ls -l /proc/%d/fd 2>/dev/null | grep -q '%s'", (int)pid, needle);
  return system(cmd) == 0;
}

/* The fill of the first flame graph frame whose title starts with prefix: 0, or -1 when absent. */
static int fill_of(const char *svg, const char *prefix, int rgb[3]) {
  char needle[256];
  snprintf(needle, sizeof needle, "<title>%s", prefix);
  const char *p = strstr(svg, needle);
  if (!p || !(p = strstr(p, "fill=\"rgb("))) return -1;
  return sscanf(p, "fill=\"rgb(%d,%d,%d)", &rgb[0], &rgb[1], &rgb[2]) == 3 ? 0 : -1;
}

/* Managed frames warm, native green, kernel blue (flamegraph.c). */
static void expect_kinds_coloured_apart(const char *path) {
  FILE *fp = fopen(path, "re");
  cr_assert(fp, "%s written", path);
  static char svg[16 << 20];
  size_t n = fread(svg, 1, sizeof svg - 1, fp);
  fclose(fp);
  svg[n] = '\0';
  int c[3];
  cr_assert_eq(fill_of(svg, "Sample!Sample.CpuWork.CountPrimes", c), 0, "CountPrimes in the flame graph");
  cr_expect(c[0] > c[1] && c[0] > c[2], "managed frames are warm: rgb(%d,%d,%d)", c[0], c[1], c[2]);
  int natives = 0;
  if (fill_of(svg, "libcoreclr.so!", c) == 0) {
    natives++;
    cr_expect(c[1] > c[0] && c[1] > c[2], "native frames are green: rgb(%d,%d,%d)", c[0], c[1], c[2]);
  }
  if (fill_of(svg, "[kernel]!", c) == 0) {
    natives++;
    cr_expect(c[2] > c[0] && c[2] > c[1], "kernel frames are blue: rgb(%d,%d,%d)", c[0], c[1], c[2]);
  }
  cr_expect_gt(natives, 0, "the runtime's or the kernel's frames are in the flame graph too");
}

static void perf_on(dnt_target_mode mode, const char *tag) {
  DNT_REQUIRE_PERF();
  dnt_target t;
  dnt_target_opts o = {.mode = mode, .wait_socket = 1, .timeout_ms = DNT_HANG_MS};
  char err[512];
  cr_assert_eq(dnt_target_start(&t, &o, err, sizeof err), 0, "cannot start the sample target: %s", err);
  char dir[] = "/tmp/dnt-perf-XXXXXX", base[128], pid[16], map[64];
  cr_assert(mkdtemp(dir));
  snprintf(base, sizeof base, "%s/%s", dir, tag);
  snprintf(pid, sizeof pid, "%d", (int)t.pid);
  snprintf(map, sizeof map, "perf-%d.map", (int)t.ns_pid);
  cr_expect_not(fd_points_at(t.pid, map), "the perf map is off before");
  struct dnt_run r;
  /* the flame graph in one run, folded stacks in the other */
  const char *format = mode == DNT_TARGET_PLAIN ? "flamegraph" : "folded";
  unsigned long cpu_tid = dnt_target_thread_named(t.pid, "cpu-work");
  unsigned long blocking_tid = dnt_target_thread_named(t.pid, "blocking-work");
  cr_assert(cpu_tid && blocking_tid, "the sample's threads cpu-work (%lu) and blocking-work (%lu)", cpu_tid,
            blocking_tid);
  double blocking_cpu = dnt_cpu_seconds(t.pid, (pid_t)blocking_tid);
  int rc = dnt_run_dntrace(&r, "perf", "-p", pid, "--duration", "4s", "-o", base, "--top", "400", "--threads",
                           "--format", format, NULL);
  blocking_cpu = dnt_cpu_seconds(t.pid, (pid_t)blocking_tid) - blocking_cpu;
  cr_assert_eq(rc, 0, "dntrace perf: %s%s", r.out, r.err);
  const char *first = strstr(r.out, "Function\n");
  cr_assert(first, "%s", r.out);
  first = strchr(first, '\n') + 1;
  long total = 0, cpu_samples = 0;
  const char *samples_line = strstr(r.out, " samples on ");
  while (samples_line && samples_line > r.out && samples_line[-1] != '\n') samples_line--;
  cr_assert(samples_line && sscanf(samples_line, "%ld samples on", &total) == 1 && total > 0,
            "the report says how many samples:\n%s", r.out);
  /* CountPrimes is the cpu-work thread's loop: named, and on top of that thread's own view;
   * however much of a CPU the machine gave cpu-work, most of what it got went there */
  size_t block_len;
  const char *block = thread_block(r.out, cpu_tid, &cpu_samples, &block_len);
  cr_assert(block && cpu_samples > 0, "cpu-work (thread %lu) is in the --threads view (%s):\n%s", cpu_tid,
            dnt_run_context(t.pid), r.out);
  cr_assert(strncmp(strchr(block, '(') + 1, "cpu-work, ", 10) == 0, "its block is headed by its name: %.80s", block);
  const char *top = strstr(block, "Function\n");
  cr_assert(top && top < block + block_len, "%.*s", (int)block_len, block);
  top += strlen("Function\n");
  double top_ms, top_pct;
  char top_fn[256] = "";
  cr_assert(sscanf(top, " %lf ms %lf%% %*f ms %*f%% %255s", &top_ms, &top_pct, top_fn) == 3, "%.*s", (int)block_len,
            block);
  cr_expect_str_eq(top_fn, "Sample!Sample.CpuWork.CountPrimes", "CountPrimes heads cpu-work's view:\n%.*s",
                   (int)block_len, block);
  cr_expect_gt(top_pct, 50, "CountPrimes has %.1f%% of cpu-work's %ld samples (%s):\n%.*s", top_pct, cpu_samples,
               dnt_run_context(t.pid), (int)block_len, block);
  /* and in the report of all threads, CountPrimes holds what it holds of cpu-work's */
  double count_primes = share_of(r.out, "Sample!Sample.CpuWork.CountPrimes");
  double cpu_share = 100.0 * (double)cpu_samples / (double)total;
  cr_expect_gt(count_primes, cpu_share / 2,
               "CountPrimes has %.1f%% of the CPU samples, cpu-work %.1f%% (%ld of %ld):\n%s", count_primes, cpu_share,
               cpu_samples, total, r.out);
  /* WaitLoop blocks: on a CPU almost never; never longer than the kernel ran blocking-work in
   * the meantime (/proc; a sample is 1 ms, so 2 ms of slack) */
  double wait_loop_ms;
  double wait_loop = share_ms_of(r.out, "Sample.BlockingWork.WaitLoop", &wait_loop_ms);
  cr_expect_leq(wait_loop_ms, 1000 * blocking_cpu + 2,
                "WaitLoop %.0f ms (%.1f%%, -1: absent), while blocking-work ran %.0f ms in all (%s):\n%s", wait_loop_ms,
                wait_loop, 1000 * blocking_cpu, dnt_run_context(t.pid), r.out);
  /* frames no table names: a stray stub at most, not a share worth a line (of all samples, or of
   * those of the threads other than cpu-work, which the machine's load may have starved) */
  double unnamed = 0;
  const char *end = strstr(first, "\n\n");
  for (const char *q = first; (q = strstr(q, "?!0x")) && (!end || q < end); q++) {
    const char *line = q;
    while (line > first && line[-1] != '\n') line--;
    double ms, pct;
    if (sscanf(line, " %lf ms %lf%%", &ms, &pct) == 2) unnamed += pct;
  }
  double others = 100.0 - cpu_share, bound = 2.0 > others * 0.05 ? 2.0 : others * 0.05;
  cr_expect_lt(unnamed, bound, "unnamed frames have %.1f%% of the samples (bound %.1f%%: cpu-work had %.1f%%):\n%s",
               unnamed, bound, cpu_share, r.out);
  dnt_run_free(&r);
  cr_expect_not(fd_points_at(t.pid, map), "the perf map is off again after dntrace perf");
  char out[160], cmd[400];
  snprintf(out, sizeof out, "%s.%s", base, mode == DNT_TARGET_PLAIN ? "svg" : "folded");
  cr_expect_eq(access(out, R_OK), 0, "%s written", out);
  if (mode == DNT_TARGET_PLAIN) expect_kinds_coloured_apart(out);
  dnt_target_stop(&t);
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  cr_assert_eq(system(cmd), 0);
}

Test(perf_runtime, cpu_view_of_the_sample, .timeout = 120) { perf_on(DNT_TARGET_PLAIN, "plain"); }

/* The target has a /tmp of its own: its perf map is read through /proc/PID/root. */
Test(perf_runtime, private_mount_namespace, .timeout = 120) { perf_on(DNT_TARGET_MOUNTNS_PRIVATE_TMP, "mntns"); }

static pid_t perf_record_of(pid_t target);

static double mono_s(void) {
  struct timespec ts;
  /* timing: waits under DNT_HANG_MS */
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Waits (up to DNT_HANG_MS: only a hang) until perf records target (its perf record runs) and the
 * target writes its perf map (an fd of it points at map): perf record's pid, or 0. */
static pid_t wait_recording(pid_t target, const char *map) {
  pid_t perf = 0;
  for (double deadline = mono_s() + DNT_HANG_MS / 1000.0; mono_s() < deadline; usleep(100 * 1000)) {
    if (!perf) perf = perf_record_of(target);
    if (perf && fd_points_at(target, map)) return perf;
  }
  return 0;
}

/* The target dies mid-recording (killed once perf records it and its perf map is on): what perf
 * recorded is reported, and a perf map that could not be copied (the process and its files are
 * gone) is not claimed as written. The duration is 600 s: the target's end ends the run. */
Test(perf_runtime, the_target_dies_mid_recording, .timeout = 180) {
  DNT_REQUIRE_PERF();
  dnt_target t;
  dnt_target_opts o = {.mode = DNT_TARGET_PLAIN, .wait_socket = 1, .timeout_ms = DNT_HANG_MS};
  char err[512];
  cr_assert_eq(dnt_target_start(&t, &o, err, sizeof err), 0, "cannot start the sample target: %s", err);
  char dir[] = "/tmp/dnt-perfd-XXXXXX", base[128], pid[16], map[160];
  cr_assert(mkdtemp(dir));
  snprintf(base, sizeof base, "%s/gone", dir);
  snprintf(map, sizeof map, "%s.perf.map", base);
  snprintf(pid, sizeof pid, "%d", (int)t.pid);
  char target_map[64];
  snprintf(target_map, sizeof target_map, "perf-%d.map", (int)t.ns_pid);
  pid_t killer = fork();
  cr_assert_geq(killer, 0);
  if (killer == 0) { /* the target goes while perf records */
    int recording = wait_recording(t.pid, target_map) != 0;
    kill(t.pid, SIGKILL);
    _exit(recording ? 0 : 1);
  }
  struct dnt_run r;
  int rc = dnt_run_dntrace(&r, "perf", "-p", pid, "--duration", "600s", "-o", base, NULL);
  int killed;
  waitpid(killer, &killed, 0);
  cr_assert(WIFEXITED(killed) && WEXITSTATUS(killed) == 0, "the target was killed while perf recorded it:\n%s%s", r.out,
            r.err);
  cr_expect_neq(rc, -1, "the run ended with its target, not at its 600 s (killed at DNT_HANG_MS):\n%s%s", r.out, r.err);
  const char *wrote = strstr(r.out, "Wrote ");
  if (wrote && strstr(wrote, ".perf.map"))
    cr_expect_eq(access(map, R_OK), 0, "'%s' is claimed written:\n%s", map, r.out);
  else
    cr_expect(rc != 0 || wrote, "a run that worked says what it wrote:\n%s%s", r.out, r.err);
  dnt_run_free(&r);
  dnt_target_stop(&t);
  char cmd[256];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  cr_assert_eq(system(cmd), 0);
}

/* The pid of a `perf record` watching target, or 0. */
static pid_t perf_record_of(pid_t target) {
  char cmd[128], line[64];
  snprintf(cmd, sizeof cmd, "pgrep -f 'perf record .* -p %d '", (int)target);
  FILE *p = popen(cmd, "r");
  pid_t found = 0;
  if (p && fgets(line, sizeof line, p)) found = (pid_t)atoi(line);
  if (p) pclose(p);
  return found;
}

/* dntrace perf on the sample, killed (SIGKILL: no chance to clean up) once perf records and the
 * perf map is on; perf record goes with it. Its notes in dir (XDG_RUNTIME_DIR, made here: no other
 * test's run looks there); map: the perf map's name in /tmp. */
static void kill_a_recording_run(dnt_target *t, char dir[22], char map[64]) {
  dnt_target_opts o = {.mode = DNT_TARGET_PLAIN, .wait_socket = 1, .timeout_ms = DNT_HANG_MS};
  char err[512];
  cr_assert_eq(dnt_target_start(t, &o, err, sizeof err), 0, "cannot start the sample target: %s", err);
  char base[128], pid[16];
  strcpy(dir, "/tmp/dnt-perfk-XXXXXX");
  cr_assert(mkdtemp(dir));
  snprintf(base, sizeof base, "%s/killed", dir);
  snprintf(pid, sizeof pid, "%d", (int)t->pid);
  snprintf(map, 64, "perf-%d.map", (int)t->ns_pid);
  pid_t run = fork();
  cr_assert_geq(run, 0);
  if (run == 0) {
    int null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    dup2(null, 2);
    setenv("XDG_RUNTIME_DIR", dir, 1);
    execl(dnt_bin(), "dntrace", "perf", "-p", pid, "--duration", "600s", "-o", base, (char *)NULL);
    _exit(127);
  }
  /* recording: perf record runs and the target writes its perf map */
  pid_t perf = wait_recording(t->pid, map);
  cr_assert(perf, "perf record started and the perf map is on while recording (%s)", dnt_run_context(t->pid));
  kill(run, SIGKILL);
  waitpid(run, NULL, 0);
  int gone = 0;
  for (double deadline = mono_s() + DNT_HANG_MS / 1000.0; !gone && mono_s() < deadline;) {
    gone = kill(perf, 0) != 0 && errno == ESRCH;
    if (!gone) usleep(100 * 1000);
  }
  cr_expect(gone, "perf record (pid %d) died with dntrace", (int)perf);
}

/* `dntrace perf --cleanup` with the notes of dir. */
static void run_cleanup(const char *dir, struct dnt_run *r) {
  char xdg[128];
  snprintf(xdg, sizeof xdg, "XDG_RUNTIME_DIR=%s", dir);
  const char *const env[] = {xdg, NULL};
  char *const cleanup[] = {(char *)dnt_bin(), "perf", "--cleanup", NULL};
  cr_expect_eq(dnt_run_argv(r, cleanup, env, DNT_HANG_MS), 0, "%s%s", r->out, r->err);
}

/* ... and the next run (here --cleanup) turns the target's perf map off again. */
Test(perf_runtime, a_killed_run_leaves_nothing_running_or_on, .timeout = 240) {
  DNT_REQUIRE_PERF();
  dnt_target t;
  char dir[22], map[64];
  kill_a_recording_run(&t, dir, map);
  cr_expect(fd_points_at(t.pid, map), "the perf map is still on: nobody turned it off yet");
  struct dnt_run r;
  run_cleanup(dir, &r);
  cr_expect(strstr(r.err, "turned the perf map of process"), "says what it did:\n%s%s", r.out, r.err);
  dnt_run_free(&r);
  int off = 0;
  for (double deadline = mono_s() + DNT_HANG_MS / 1000.0; !off && mono_s() < deadline;) {
    off = !fd_points_at(t.pid, map);
    if (!off) usleep(100 * 1000);
  }
  cr_expect(off, "the perf map is off again after --cleanup");
  run_cleanup(dir, &r);
  cr_expect(strstr(r.out, "0 perf maps turned off again"), "nothing left the second time:\n%s", r.out);
  dnt_run_free(&r);
  dnt_target_stop(&t);
  dnt_rm_rf(dir);
}

/* Issue 29 item 6: ... and when the target died meanwhile, the next run removes the perf map file
 * it wrote for the killed run (before, only a live target's was put right). */
Test(perf_runtime, a_killed_runs_map_of_a_dead_target_is_removed, .timeout = 240) {
  DNT_REQUIRE_PERF();
  dnt_target t;
  char dir[22], map[64], path[128];
  kill_a_recording_run(&t, dir, map);
  snprintf(path, sizeof path, "/tmp/%s", map);
  dnt_target_stop(&t);
  struct stat st;
  cr_assert_eq(stat(path, &st), 0, "the dead target's perf map is left in /tmp: %s", path);
  /* A second name for that file, in the test's own directory: once dntrace has removed the /tmp
   * name, this one is the file's only link. A file of that name in /tmp afterwards proves nothing
   * either way: another process of the same pid (the other tests start .NET processes with perf
   * maps too, and pids wrap) writes its own. */
  char witness[64];
  snprintf(witness, sizeof witness, "%s/witness", dir);
  cr_assert_eq(link(path, witness), 0, "a second link to %s: %s", path, strerror(errno));
  struct dnt_run r;
  run_cleanup(dir, &r);
  cr_expect(strstr(r.err, "removed /tmp/perf-"), "says what it did:\n%s%s", r.out, r.err);
  cr_expect_eq(stat(witness, &st), 0);
  cr_expect_eq(st.st_nlink, 1, "%s is removed (the file has %lu links; dntrace said: %s)", path,
               (unsigned long)st.st_nlink, r.err);
  dnt_run_free(&r);
  struct stat now; /* the test's own leftover, on failure; never another process's file */
  if (stat(path, &now) == 0 && now.st_ino == st.st_ino && now.st_dev == st.st_dev) unlink(path);
  dnt_rm_rf(dir);
}

/* The screen of the tmux session into a heap string ("" when it cannot be read). */
static char *capture_screen(const char *capture, const char *screen_path) {
  cr_assert_eq(system(capture), 0);
  FILE *fp = fopen(screen_path, "r");
  char *screen = calloc(1, 1 << 16);
  cr_assert(screen);
  if (fp) {
    screen[fread(screen, 1, (1 << 16) - 1, fp)] = '\0';
    fclose(fp);
  }
  return screen;
}

/* The most elapsed time perf's status line on screen shows ("[HH:MM:SS]"), in seconds; -1 if none. */
static int perf_elapsed_shown(const char *screen) {
  int most = -1;
  for (const char *p = screen; (p = strchr(p, '[')); p++) {
    unsigned h, m, sec;
    char close;
    if (sscanf(p, "[%2u:%2u:%2u%c", &h, &m, &sec, &close) == 4 && close == ']' && (int)(h * 3600 + m * 60 + sec) > most)
      most = (int)(h * 3600 + m * 60 + sec);
  }
  return most;
}

/* On a terminal dntrace perf shows a status line, and Enter (pressed once the line has ticked)
 * stops it as it stops collect. */
Test(perf_runtime, enter_stops_it_on_a_terminal, .timeout = 240) {
  DNT_REQUIRE_PERF();
  if (system("command -v tmux >/dev/null 2>&1") != 0) cr_assert_fail("needs tmux (./bootstrap.sh installs it)");
  dnt_target t;
  dnt_target_opts o = {.mode = DNT_TARGET_PLAIN, .wait_socket = 1, .timeout_ms = DNT_HANG_MS};
  char err[512];
  cr_assert_eq(dnt_target_start(&t, &o, err, sizeof err), 0, "cannot start the sample target: %s", err);
  char dir[] = "/tmp/dnt-perfe-XXXXXX", cmd[1200], session[32], capture[300], screen_path[160];
  cr_assert(mkdtemp(dir));
  snprintf(session, sizeof session, "dntp%d", (int)getpid());
  snprintf(cmd, sizeof cmd,
           "tmux new-session -d -s %s -x 160 -y 40 \"'%s' perf -p %d -o '%s/e'; echo EXITED $?; sleep 600\"", session,
           dnt_bin(), (int)t.pid, dir);
  cr_assert_eq(system(cmd), 0);
  snprintf(capture, sizeof capture, "tmux capture-pane -p -S -100 -t %s > '%s/screen'", session, dir);
  snprintf(screen_path, sizeof screen_path, "%s/screen", dir);
  /* recording: the status line has ticked (a loaded machine may take a while to get there) */
  char *screen = capture_screen(capture, screen_path);
  for (double deadline = mono_s() + DNT_HANG_MS / 1000.0;
       !(strstr(screen, "Recording with perf") && perf_elapsed_shown(screen) >= 1) && mono_s() < deadline;) {
    usleep(100 * 1000);
    free(screen);
    screen = capture_screen(capture, screen_path);
  }
  int ticked = strstr(screen, "Recording with perf") && perf_elapsed_shown(screen) >= 1;
  if (ticked) {
    snprintf(cmd, sizeof cmd, "tmux send-keys -t %s Enter", session);
    cr_assert_eq(system(cmd), 0);
    for (double deadline = mono_s() + DNT_HANG_MS / 1000.0; !strstr(screen, "EXITED") && mono_s() < deadline;) {
      usleep(100 * 1000);
      free(screen);
      screen = capture_screen(capture, screen_path);
    }
  }
  snprintf(cmd, sizeof cmd, "tmux kill-session -t %s", session);
  cr_assert_eq(system(cmd), 0);
  cr_assert(ticked, "a status line while recording, ticked before Enter (%s):\n%s", dnt_run_context(t.pid), screen);
  int lines = 0;
  for (const char *p = screen; (p = strstr(p, "Recording with perf")); p++) lines++;
  cr_expect(strstr(screen, "EXITED 0"), "Enter stopped it and the report followed:\n%s", screen);
  cr_expect(strstr(screen, "Stopping (Enter)"), "%s", screen);
  cr_expect_eq(lines, 1, "the status line once:\n%s", screen);
  free(screen);
  dnt_target_stop(&t);
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  cr_assert_eq(system(cmd), 0);
}

Test(perf_cli, errors) {
  struct dnt_run r;
  cr_expect_eq(dnt_run_dntrace(&r, "perf", NULL), 2, "no target: usage");
  dnt_run_free(&r);
  cr_expect_eq(dnt_run_dntrace(&r, "perf", "-p", "1", "-F", "0", NULL), 2);
  cr_expect(strstr(r.err, "-F"), "%s", r.err);
  dnt_run_free(&r);
  char *const argv[] = {(char *)dnt_bin(), "perf", "-p", "1", NULL};
  const char *const env[] = {"PATH=/nonexistent", NULL};
  cr_expect_eq(dnt_run_argv(&r, argv, env, DNT_HANG_MS), 1, "%s", r.err);
  cr_expect(strstr(r.err, "perf is not installed"), "one clear line: %s", r.err);
  dnt_run_free(&r);
}

/* ---- perf record started without waiting (serve --cpu) ---- */

struct async_run {
  struct dnt_perf_record pr;
  uv_loop_t *loop;
  uv_timer_t stop;
  int in_call, started_in_call, started, rc, closed;
  double t_call_back, t_started;
};

static double mono_ms(void) {
  struct timespec ts;
  /* timing: the order of two moments (started before the call came back), no bound */
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void on_stop_timer(uv_timer_t *h) {
  struct async_run *a = h->data;
  dnt_perf_record_stop(&a->pr);
  uv_close((uv_handle_t *)h, NULL);
}

static void on_async_started(void *ud, int rc) {
  struct async_run *a = ud;
  a->started++;
  a->rc = rc;
  a->started_in_call = a->in_call;
  a->t_started = mono_ms();
  if (rc == 0) { /* 300 ms of recording, then the stop */
    uv_timer_init(a->loop, &a->stop);
    a->stop.data = a;
    uv_timer_start(&a->stop, on_stop_timer, 300, 0);
  }
}

static void on_async_closed(void *ud) { ((struct async_run *)ud)->closed++; }

/* Starts perf on pid and runs the loop until every handle is closed. */
static void async_record(struct async_run *a, int pid, const char *out) {
  memset(a, 0, sizeof *a);
  a->loop = malloc(sizeof *a->loop);
  cr_assert(a->loop);
  cr_assert_eq(uv_loop_init(a->loop), 0);
  a->in_call = 1;
  dnt_perf_record_start_async(&a->pr, a->loop, pid, 99, out, on_async_started, on_async_closed, a);
  a->in_call = 0;
  a->t_call_back = mono_ms();
  uv_run(a->loop, UV_RUN_DEFAULT);
  cr_assert_eq(uv_loop_close(a->loop), 0, "every handle of the recording closed");
  free(a->loop);
}

/* The call returns before perf has acknowledged (the loop is free meanwhile), then the recording
 * works as the blocking start's; a perf that cannot watch its target says why, in its own words,
 * and both callbacks still come once. */
Test(perf_record, async_start_returns_at_once_and_records, .timeout = 60) {
  DNT_REQUIRE_PERF();
  dnt_target t;
  dnt_target_opts o = {.mode = DNT_TARGET_PLAIN, .wait_socket = 1, .timeout_ms = DNT_HANG_MS};
  char err[512];
  cr_assert_eq(dnt_target_start(&t, &o, err, sizeof err), 0, "cannot start the sample target: %s", err);
  char dir[] = "/tmp/dnt-perfa-XXXXXX", out[128];
  cr_assert(mkdtemp(dir));
  snprintf(out, sizeof out, "%s/perf.data", dir);
  struct async_run a;
  async_record(&a, (int)t.pid, out);
  cr_expect_eq(a.started, 1, "on_started once");
  cr_expect_eq(a.rc, 0, "perf records: %s", a.pr.msg);
  cr_expect_eq(a.started_in_call, 0, "never from inside the call");
  cr_expect_lt(a.t_call_back, a.t_started, "the call returned before perf's ack");
  cr_expect_eq(a.closed, 1, "on_closed once");
  cr_expect_eq(dnt_perf_record_ok(&a.pr, out), 1, "%s", a.pr.msg);
  struct stat st;
  cr_expect(stat(out, &st) == 0 && st.st_size > 0, "perf wrote %s", out);

  /* a process that is not there: perf refuses, on_started says so, on_closed follows */
  pid_t gone = fork();
  cr_assert_geq(gone, 0);
  if (gone == 0) _exit(0);
  waitpid(gone, NULL, 0);
  async_record(&a, (int)gone, out);
  cr_expect_eq(a.started, 1, "on_started once");
  cr_expect_eq(a.rc, -1, "perf cannot watch a process that is gone");
  cr_expect_neq(a.pr.msg[0], '\0', "and says why");
  cr_expect_eq(a.closed, 1, "on_closed once");
  cr_expect_eq(dnt_perf_record_ok(&a.pr, out), 0);
  cr_log_info("a gone pid: %s; perf said: %s", a.pr.msg, a.pr.err_text);
  dnt_target_stop(&t);
  char cmd[160];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  cr_assert_eq(system(cmd), 0);
}
