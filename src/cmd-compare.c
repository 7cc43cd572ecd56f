/* dntrace compare: EventPipe's thread-time view beside perf's on-CPU view of one recording
 * (`collect --native`), and every EventPipe sample classified on-CPU or off-CPU.
 *
 * The SampleProfiler samples each managed thread every millisecond whether it runs or waits;
 * perf's cpu-clock samples a thread only while it is on a CPU. Both clocks are CLOCK_MONOTONIC,
 * so an EventPipe sample of thread T at time t is judged by what perf saw T do around t: its
 * cpu-clock samples, and where tracefs could be read its switches and wake-ups
 * (cpu-states.c). The verdicts split the trace into a true CPU and an off-CPU profile.
 * docs/native-stacks.md explains the method and its error bound. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "builtin.h"
#include "collect-native.h"
#include "dnt-perf.h"
#include "dnt-profile.h"
#include "dnt-trace.h"
#include "options.h"
#include "util.h"

struct compare_options {
  const char *trace;
  long top;
  double window_ms;
  int format; /* enum dnt_format */
};

static int parse_window(void *field, const char *arg) {
  char *end;
  double *window_ms = field;
  *window_ms = strtod(arg, &end);
  if (*end || !(*window_ms > 0) || *window_ms > 1000) return dnt_error("--window: '%s' is not a number of milliseconds", arg);
  return 0;
}

#define O(f) offsetof(struct compare_options, f)
static const struct dnt_option compare_options[] = {
    DNT_OPT_TEXT("TRACE", "the .nettrace of 'dntrace collect --native' (its .perf.data beside it)"),
    DNT_OPT_TOP(O(top), 100000, "functions in each table (default 10)"),
    DNT_OPT_PARSE(0, "window", "MS", O(window_ms), parse_window,
                  "off-CPU spells this short count as the state before them (and\n"
                  "without switches: how near perf's samples must be; default 1.5\n"
                  "perf periods)"),
    DNT_OPT_FORMAT("FORMAT", O(format), DNT_FORMATS_PROFILE,
                   "also write the on-CPU and off-CPU profiles as folded, speedscope,\n"
                   "chromium, flamegraph or pprof"),
    DNT_OPT_NO_CLOBBER(), /* for the --format files, as with every -o */
    DNT_OPT_END(),
};

const struct dnt_usage usage_compare = {
    .synopsis = "dntrace compare TRACE [--top N] [--window MS] [--format FORMAT]",
    .summary = "Compare a trace's EventPipe thread time with perf's on-CPU time (recorded by 'collect --native')",
    .options = compare_options,
    .operand = 1,
    .operand_offset = O(trace),
    .no_operand = "name the trace of 'dntrace collect --native'",
    .many_operands = "one trace at a time",
};
#undef O

/* ---- classifying the EventPipe samples ---- */

struct classifier {
  const dnt_cpu_states *states;
  struct per_thread {
    uint64_t tid, counts[4]; /* by enum dnt_cpu_state */
  } *threads;
  size_t nthreads, capthreads, last;
  uint64_t totals[4];
};

static struct per_thread *count_row(struct classifier *c, uint64_t tid) {
  /* samples come in runs of rounds over the same few threads: look where the last one was first */
  if (c->last < c->nthreads && c->threads[c->last].tid == tid) return &c->threads[c->last];
  for (size_t i = 0; i < c->nthreads; i++)
    if (c->threads[i].tid == tid) return &c->threads[c->last = i];
  if (c->nthreads == c->capthreads) {
    c->capthreads = c->capthreads ? 2 * c->capthreads : 64;
    c->threads = dnt_xrealloc(c->threads, c->capthreads * sizeof *c->threads);
  }
  c->threads[c->nthreads] = (struct per_thread){.tid = tid};
  c->last = c->nthreads;
  return &c->threads[c->nthreads++];
}

static int count_sample(void *ud, uint64_t tid, uint64_t ns) {
  struct classifier *c = ud;
  enum dnt_cpu_state k = dnt_cpu_state_at(c->states, tid, ns);
  count_row(c, tid)->counts[k]++;
  c->totals[k]++;
  return 1; /* every sample counts in the EventPipe view */
}

static int keep_on(void *ud, uint64_t tid, uint64_t ns) {
  const struct classifier *c = ud;
  return dnt_cpu_state_at(c->states, tid, ns) == DNT_ON_CPU;
}

static int keep_off(void *ud, uint64_t tid, uint64_t ns) {
  const struct classifier *c = ud;
  enum dnt_cpu_state k = dnt_cpu_state_at(c->states, tid, ns);
  return k == DNT_OFF_BLOCKED || k == DNT_OFF_RUNNABLE;
}

/* A profile counting the samples that keep accepts, as the trace streams. */
static struct dnt_profile *view(dnt_profile_keep_fn keep, struct classifier *cls) {
  struct dnt_profile *p = dnt_profile_new();
  if (!p) dnt_die(DNT_EXIT_FAILURE, "out of memory");
  dnt_profile_set_filter(p, keep, cls);
  return p;
}

/* ---- output ---- */

static double pct(uint64_t part, uint64_t whole) { return whole ? 100.0 * (double)part / (double)whole : 0; }

/* a function's exclusive time (ms; a perf sample weighs its period) */
static double exclusive_of(const struct dnt_profile_row *rows, size_t n, const char *name) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(rows[i].name, name) == 0) return rows[i].exclusive_ms;
  return 0;
}

static double pct_ms(double part, double whole) { return whole > 0 ? 100.0 * part / whole : 0; }

static void method_table(const struct dnt_profile *ep, const struct dnt_profile *perf, size_t top) {
  size_t ne = dnt_profile_nnames(ep) + 1, np = dnt_profile_nnames(perf) + 1;
  struct dnt_profile_row *er = dnt_xmalloc(ne * sizeof *er), *pr = dnt_xmalloc(np * sizeof *pr);
  ne = dnt_profile_top(ep, (size_t)-1, 0, er, ne);
  np = dnt_profile_top(perf, (size_t)-1, 0, pr, np);
  double et = dnt_profile_total_ms(ep), pt = dnt_profile_total_ms(perf);
  printf("Per function, exclusive: EventPipe thread time (running or waiting) beside perf time on a CPU\n");
  printf("  %10s  %10s  %s\n", "EventPipe", "perf", "Function");
  /* the top of the EventPipe view, then what perf adds to it */
  size_t etop = ne < top ? ne : top, ptop = np < top ? np : top;
  for (size_t i = 0; i < etop + ptop; i++) {
    const char *name = i < etop ? er[i].name : pr[i - etop].name;
    if (i >= etop && exclusive_of(er, etop, name)) continue; /* shown already */
    printf("  %9.1f%%  %9.1f%%  ", pct_ms(exclusive_of(er, ne, name), et), pct_ms(exclusive_of(pr, np, name), pt));
    dnt_text_put(stdout, name); /* the trace's words */
    putchar('\n');
  }
  free(er);
  free(pr);
}

int cmd_compare(int argc, char **argv) {
  struct compare_options o = {.top = 10};
  int rc = dnt_options_parse(&usage_compare, "compare", argc, argv, &o);
  if (rc) return rc == DNT_OPTIONS_DONE ? 0 : rc;
  long top = o.top;
  double window_ms = o.window_ms;
  const char *format = dnt_format_name(o.format);
  dnt_cpu_states *states = NULL;
  struct classifier cls = {0};
  struct dnt_symtab perfmap = {0};
  struct dnt_profile *ep = NULL, *perf = NULL, *on = NULL, *off = NULL;
  dnt_perf_reader *reader = NULL;
  char *data = NULL, *map = NULL, *threads = NULL, *trace = NULL;
  rc = DNT_EXIT_FAILURE;
  trace = dnt_native_sibling(o.trace, ".nettrace");
  data = dnt_native_sibling(trace, ".perf.data");
  map = dnt_native_sibling(trace, ".perf.map");
  threads = dnt_native_sibling(trace, ".threads");
  if (access(data, R_OK) != 0) {
    dnt_error("no '%s' beside the trace: record with 'dntrace collect --native'", data);
    goto out;
  }
  /* perf's record first, so that the trace's samples are classified as it streams: one pass
   * over the trace feeds every view (all samples, the on-CPU ones, the off-CPU ones) and the
   * method table that names perf's managed frames */
  if (!(perf = dnt_profile_new()) || !(states = dnt_cpu_states_new())) dnt_die(DNT_EXIT_FAILURE, "out of memory");
  if (!(reader = dnt_perf_read(perf, data, NULL, map, 1.0, &perfmap, dnt_cpu_states_observe, states))) goto out;
  /* thread names from TRACE.threads: /proc's names beat perf's comm (a missing file: perf's) */
  if (dnt_cpu_states_load_names(states, threads) == -ENOMEM) dnt_die(DNT_EXIT_FAILURE, "out of memory");
  if (dnt_cpu_states_finish(states, window_ms) != 0) dnt_die(DNT_EXIT_FAILURE, "out of memory");
  struct dnt_cpu_states_info info;
  dnt_cpu_states_info(states, &info);
  if (!info.cpu_samples) {
    dnt_error("'%s' has no cpu-clock samples of the target", data);
    goto out;
  }
  cls.states = states;
  ep = view(count_sample, &cls);
  on = view(keep_on, &cls);
  off = view(keep_off, &cls);
  dnt_profile_methods_only(perf, 1);
  struct dnt_profile *const all[] = {ep, on, off, perf};
  if (dnt_report_loads(all, 4, 3, trace) < 0) goto out;
  dnt_profile_methods_only(perf, 0);
  if (dnt_profile_finish(perf) != 0) dnt_die(DNT_EXIT_FAILURE, "out of memory");
  if (dnt_profile_samples(ep) == 0) {
    dnt_error("'%s' has no SampleProfiler samples to compare", trace);
    goto out;
  }

  uint64_t total = dnt_profile_samples(ep), covered = total - cls.totals[DNT_UNCOVERED];
  printf("EventPipe: %llu samples, %.0f ms of thread time (each sample the time until its thread's next); "
         "perf: %llu cpu-clock samples (%.2f ms apart)%s\n",
         (unsigned long long)total, dnt_profile_total_ms(ep), (unsigned long long)info.cpu_samples, info.period_ms,
         info.has_switches ? " and the scheduler's switches" : "");
  if (cls.totals[DNT_UNCOVERED])
    printf("%llu EventPipe samples fell outside perf's recording and are left out below.\n",
           (unsigned long long)cls.totals[DNT_UNCOVERED]);
  if (info.has_switches)
    printf("Each sample is classified by what perf saw its thread do: on a CPU, blocked (asleep) or runnable\n"
           "(preempted or woken, waiting for a CPU). Off-CPU spells under %.2f ms count as the state before them,\n"
           "but for sleeps no thread of the process ended.\n\n",
           info.window_ms);
  else
    printf("A sample is on-CPU when perf sampled its thread within %.2f ms of it (no scheduler switches: tracefs\n"
           "was not readable, so off-CPU is not split into blocked and runnable).\n\n",
           info.window_ms);
  /* perf's own measure of each thread's CPU, to set the classification beside */
  double span_ms = info.last_ns > info.first_ns ? (double)(info.last_ns - info.first_ns) / 1e6 : 0;
  printf("Per thread (perf CPU: its cpu-clock samples' periods added up, over the %.1f s perf recorded):\n",
         span_ms / 1000);
  printf("  %8s  %-16s %9s %9s %9s %9s %9s\n", "tid", "name", "samples", "on-CPU",
         info.has_switches ? "blocked" : "off-CPU", info.has_switches ? "runnable" : "(unsplit)", "perf CPU");
  for (size_t i = 0; i < cls.nthreads; i++) {
    const struct per_thread *t = &cls.threads[i];
    uint64_t n = t->counts[DNT_ON_CPU] + t->counts[DNT_OFF_BLOCKED] + t->counts[DNT_OFF_RUNNABLE];
    if (!n) continue;
    uint64_t cpu_samples;
    const char *name = dnt_cpu_states_thread(states, t->tid, &cpu_samples);
    /* the periods perf recorded, else (a perf script without them) the count times the period */
    uint64_t cpu_ns = dnt_cpu_states_thread_cpu_ns(states, t->tid);
    double cpu_ms = cpu_ns ? (double)cpu_ns / 1e6 : (double)cpu_samples * info.period_ms;
    double cpu = span_ms > 0 ? 100.0 * cpu_ms / span_ms : 0;
    char safe[17]; /* the thread's name is its own words: escaped, then cut to its column */
    dnt_text_escape(safe, sizeof safe, *name ? name : "?");
    printf("  %8llu  %-16s %9llu %8.1f%% %8.1f%% %8.1f%% %8.1f%%\n", (unsigned long long)t->tid, safe,
           (unsigned long long)n, pct(t->counts[DNT_ON_CPU], n),
           pct(t->counts[DNT_OFF_BLOCKED], n), pct(t->counts[DNT_OFF_RUNNABLE], n), cpu > 100 ? 100 : cpu);
  }
  printf("  %8s  %-16s %9llu %8.1f%% %8.1f%% %8.1f%%\n\n", "all", "", (unsigned long long)covered,
         pct(cls.totals[DNT_ON_CPU], covered), pct(cls.totals[DNT_OFF_BLOCKED], covered),
         pct(cls.totals[DNT_OFF_RUNNABLE], covered));
  method_table(ep, perf, (size_t)top);

  printf("\nThe true CPU profile: EventPipe's managed stacks while on a CPU (%llu samples)\n",
         (unsigned long long)dnt_profile_samples(on));
  dnt_report_tables(on, (size_t)top, 0, 0);
  printf("\nThe off-CPU profile: EventPipe's managed stacks while blocked or waiting (%llu samples)\n",
         (unsigned long long)dnt_profile_samples(off));
  dnt_report_tables(off, (size_t)top, 1, 0);
  rc = 0;
  if (format) {
    const char *ext = dnt_convert_extension(format);
    char on_ext[64], off_ext[64];
    snprintf(on_ext, sizeof on_ext, ".oncpu%s", ext);
    snprintf(off_ext, sizeof off_ext, ".offcpu%s", ext);
    char *on_out = dnt_native_sibling(trace, on_ext), *off_out = dnt_native_sibling(trace, off_ext);
    for (size_t i = 0; i < cls.nthreads; i++) { /* the names above, for the formats that carry them */
      uint64_t cpu_samples;
      const char *name = dnt_cpu_states_thread(states, cls.threads[i].tid, &cpu_samples);
      if (*name && (dnt_profile_name_thread(on, cls.threads[i].tid, name) != 0 ||
                    dnt_profile_name_thread(off, cls.threads[i].tid, name) != 0))
        dnt_die(DNT_EXIT_FAILURE, "out of memory");
    }
    fflush(stdout);
    rc = dnt_convert_profile(on, format, "on-CPU", "on-CPU thread time (EventPipe samples perf saw running)", on_out);
    if (!rc) rc = dnt_convert_profile(off, format, "off-CPU", "off-CPU thread time (blocked or waiting)", off_out);
    free(on_out);
    free(off_out);
  }
out:
  dnt_cpu_states_free(states);
  free(cls.threads);
  dnt_perf_reader_free(reader);
  dnt_profile_free(ep);
  dnt_profile_free(perf);
  dnt_profile_free(on);
  dnt_profile_free(off);
  dnt_symtab_release(&perfmap);
  free(trace);
  free(data);
  free(map);
  free(threads);
  return rc;
}
