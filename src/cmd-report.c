/* dntrace report: where the time goes, from the SampleProfiler samples of a trace: the top
 * functions by exclusive or inclusive thread time, overall or per thread. By default native time
 * is folded into the managed callers, as dotnet-trace's `report FILE topN` folds it (its grammar is
 * taken too); --no-fold-native shows PerfView's exclusive view, UNMANAGED_CODE_TIME a row. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <errno.h>

#include "builtin.h"
#include "collect-native.h"
#include "dnt-perf.h"
#include "ntr.h"
#include "dnt-profile.h"
#include "dnt-trace.h"
#include "options.h"
#include "util.h"
#include "view.h"

struct report_options {
  const char *trace;
  long top;
  int inclusive, threads, fold_native, no_fold_native, verbose, topn;
  int weight; /* 0 time, 1 samples (--weight) */
  int no_async;
  struct dnt_view_opts view;
};

#define O(f) offsetof(struct report_options, f)
static const struct dnt_option report_options[] = {
    DNT_OPT_COUNT('n', "number", "N", O(top), 100000, "how many functions (default 5)"),
    DNT_OPT_FLAG(0, "inclusive", O(inclusive), "rank by inclusive time (default: exclusive)"),
    DNT_OPT_FLAG(0, "threads", O(threads), "one table per thread, besides the overall one"),
    DNT_OPT_FLAG(0, "no-fold-native", O(no_fold_native),
                 "keep native time (UNMANAGED_CODE_TIME) a row of its own, as\nPerfView's exclusive view "
                 "does (by default it is charged to the\nmanaged frame that called it, as dotnet-trace's "
                 "report does:\na blocked thread shows the method that waits)"),
    DNT_OPT_FLAG(0, "fold-native", O(fold_native), NULL), /* the default now; kept for scripts */
    DNT_OPT_FLAG('v', "verbose", O(verbose), "also the sample counts (names are never shortened)"),
    DNT_OPT_TEXT("topN", "dotnet-trace's subcommand after FILE: the same table"),
    DNT_OPT_WEIGHT(O(weight), "time (default: each sample the time until its thread's next)\n"
                              "or samples (plain counts)"),
    DNT_OPT_NO_ASYNC(O(no_async)),
    DNT_OPT_GROUP(dnt_options_view, O(view)),
    DNT_OPT_END(),
};

const struct dnt_usage usage_report = {
    .synopsis = "dntrace report FILE [topN] [-n N] [--inclusive] [--threads] [--no-fold-native] [-v] [--weight WEIGHT] "
                "[--no-async] [--thread TID|NAME] [--focus FRAME] [--exclude FRAME] [--hide-idle]",
    .summary = "Show the functions that take the most thread time in a trace",
    .options = report_options,
    .operand = 1,
    .operand_offset = O(trace),
    .verb = "topN",
    .verb_offset = O(topn),
    .no_operand = "name the trace file to report on",
    .many_operands = "one trace file at a time",
};
#undef O

/* a row on fewer samples than this says how many */
#define SPARSE_SAMPLES 10

/* -v: the sample counts too */
static int report_verbose;

/* One cell: a time (ms) or a sample count, with its share of total. */
static void cell(char *buf, size_t cap, int by_time, double ms, uint64_t samples, double total) {
  double v = by_time ? ms : (double)samples;
  snprintf(buf, cap, by_time ? "%.0f ms %5.1f%%" : "%.0f %5.1f%%", v, total > 0 ? 100.0 * v / total : 0);
}

/* total: the thread's (or all threads') time in ms, or samples, as the profile weighs */
static void print_table(const struct dnt_profile *prof, size_t thread, int by_inclusive, size_t top, double total) {
  struct dnt_profile_row *rows = dnt_xmalloc(top * sizeof *rows);
  size_t n = dnt_profile_top(prof, thread, by_inclusive, rows, top);
  if (n == (size_t)-1) dnt_die(DNT_EXIT_FAILURE, "out of memory");
  int by_time = dnt_profile_weight(prof) == DNT_WEIGHT_TIME;
  if (report_verbose)
    printf("  %18s  %18s  %10s  %10s  %s\n", "Exclusive", "Inclusive", "Excl. smp", "Incl. smp", "Function");
  else
    printf("  %18s  %18s  %s\n", "Exclusive", "Inclusive", "Function");
  for (size_t i = 0; i < n; i++) {
    char ex[40], in[40];
    cell(ex, sizeof ex, by_time, rows[i].exclusive_ms, rows[i].exclusive, total);
    cell(in, sizeof in, by_time, rows[i].inclusive_ms, rows[i].inclusive, total);
    if (report_verbose)
      printf("  %18s  %18s  %10llu  %10llu  ", ex, in, (unsigned long long)rows[i].exclusive,
             (unsigned long long)rows[i].inclusive);
    else
      printf("  %18s  %18s  ", ex, in);
    dnt_text_put(stdout, rows[i].name); /* the trace's words */
    /* a time that rests on a few samples is a guess, however large: a finalizer's 2 samples
     * weigh 4 s of thread time (each sample weighs the time to its thread's next) */
    if (by_time && !report_verbose && rows[i].inclusive < SPARSE_SAMPLES)
      printf("  (%llu sample%s)", (unsigned long long)rows[i].inclusive, rows[i].inclusive == 1 ? "" : "s");
    putchar('\n');
  }
  if (n == 0) printf("  (no samples)\n");
  free(rows);
}

int dnt_report_load(struct dnt_profile *prof, const char *path) { return dnt_report_loads(&prof, 1, 1, path); }

static int name_profile_thread(void *ud, uint64_t tid, const char *name) {
  return dnt_profile_name_thread(ud, tid, name) == 0 ? 0 : -ENOMEM;
}

int dnt_report_loads(struct dnt_profile *const *profs, size_t n, size_t nfinish, const char *path) {
  char msg[1024];
  if (dnt_trace_zip_note(path, msg, sizeof msg) > 0) dnt_warning("%s", msg);
  int rc = dnt_profiles_load(profs, n, nfinish, path, msg, sizeof msg);
  if (rc < 0) dnt_error("%s", msg);
  else if (rc > 0) dnt_warning("%s", msg);
  /* a `collect --native` recording's thread names, beside the trace (its target's /proc) */
  char *names = rc >= 0 && strcmp(path, "-") != 0 ? dnt_native_sibling(path, ".threads") : NULL;
  for (size_t i = 0; names && i < n; i++)
    if (dnt_threads_file_each(names, name_profile_thread, profs[i]) == -ENOMEM) dnt_die(DNT_EXIT_FAILURE, "out of memory");
  free(names);
  return rc;
}

void dnt_report_tables(const struct dnt_profile *prof, size_t top, int by_inclusive, int threads) {
  int by_time = dnt_profile_weight(prof) == DNT_WEIGHT_TIME;
  printf("Top %zu functions by %s %s, all threads:\n", top, by_inclusive ? "inclusive" : "exclusive",
         by_time ? "time" : "samples");
  print_table(prof, (size_t)-1, by_inclusive, top,
              by_time ? dnt_profile_total_ms(prof) : (double)dnt_profile_samples(prof));
  if (!threads) return;
  for (size_t t = 0; t < dnt_profile_nthreads(prof); t++) {
    uint64_t n = dnt_profile_thread_samples(prof, t);
    double ms = dnt_profile_thread_ms(prof, t);
    uint64_t tid = dnt_profile_thread_id(prof, t);
    const char *name = dnt_profile_thread_name(prof, tid);
    printf("\nThread %llu (", (unsigned long long)tid);
    if (name && *name) {
      dnt_text_put(stdout, name); /* the target's words */
      fputs(", ", stdout);
    }
    printf("%llu samples, %.0f ms):\n", (unsigned long long)n, ms);
    print_table(prof, t, by_inclusive, top, by_time ? ms : (double)n);
  }
}

int cmd_report(int argc, char **argv) {
  struct report_options o = {.top = 5};
  int rc = dnt_options_parse(&usage_report, "report", argc, argv, &o);
  if (rc) return rc == DNT_OPTIONS_DONE ? 0 : rc;
  int by_inclusive = o.inclusive, threads = o.threads;
  report_verbose = o.verbose;
  long top = o.top;
  const char *path = o.trace;
  struct dnt_profile *prof = dnt_profile_new();
  if (!prof) dnt_die(DNT_EXIT_FAILURE, "out of memory");
  dnt_profile_set_tasks(prof, o.no_async ? DNT_TASKS_SAMPLES : DNT_TASKS_STITCHED);
  if (dnt_report_load(prof, path) < 0) {
    dnt_profile_free(prof);
    return DNT_EXIT_FAILURE;
  }
  if (o.no_fold_native && (o.fold_native || o.topn)) {
    dnt_error("--no-fold-native goes without --fold-native and topN (dotnet-trace's table folds native time)");
    dnt_profile_free(prof);
    return DNT_EXIT_USAGE;
  }
  int fold = !o.no_fold_native;
  dnt_profile_fold_native(prof, fold);
  if (dnt_profile_samples(prof) == 0) {
    dnt_error("'%s' has no SampleProfiler samples (record with the default profiles, or "
              "--profile dotnet-sampled-thread-time)", path);
    dnt_profile_free(prof);
    dnt_view_release(&o.view);
    return DNT_EXIT_FAILURE;
  }
  dnt_view_apply(prof, &o.view);
  uint64_t total = dnt_profile_samples(prof);
  if (total == 0) {
    dnt_error("no sample of '%s' is in the view --thread, --focus, --exclude and --hide-idle asked for", path);
    dnt_profile_free(prof);
    dnt_view_release(&o.view);
    return DNT_EXIT_FAILURE;
  }
  if (o.weight) dnt_profile_set_weight(prof, DNT_WEIGHT_SAMPLES);
  printf("%llu samples on %zu threads, %.0f ms of thread time, whether running or waiting\n",
         (unsigned long long)total, dnt_profile_nthreads(prof), dnt_profile_total_ms(prof));
  /* the runtime announces its nominal interval; the samples' real pace is often slower */
  double measured = dnt_profile_measured_ms(prof);
  printf("Sampling interval: %.2f ms (the trace's)", dnt_profile_sample_ms(prof));
  if (measured > 0) printf(", %.2f ms measured", measured);
  printf("; %s\n", o.weight ? "counted in samples (--weight samples)"
                             : "a sample weighs the time until its thread's next");
  if (fold) printf("(native time, UNMANAGED_CODE_TIME, is charged to the managed frame that called it)\n");
  /* a busy service's thread time is mostly threads that wait: say so, and where the work is */
  double all_ms = dnt_profile_total_ms(prof), native_ms = dnt_profile_external_ms(prof);
  if (!o.weight && all_ms > 0 && native_ms > all_ms / 2)
    printf("%.0f%% of this time is in native code or waiting; for where the CPU goes, 'dntrace perf -p PID' "
           "samples it%s\n",
           100.0 * native_ms / all_ms, o.view.hide_idle ? "" : " ('--hide-idle' leaves out the threads that only wait)");
  putchar('\n');
  dnt_report_tables(prof, (size_t)top, by_inclusive, threads);
  dnt_profile_free(prof);
  dnt_view_release(&o.view);
  return 0;
}
