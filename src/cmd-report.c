/* dntrace report: where the time goes, from the SampleProfiler samples of a trace: the top
 * functions by exclusive or inclusive thread time, overall or per thread. dotnet-trace's grammar
 * (`report FILE topN [-n N] [--inclusive] [-v]`) is taken too, with its table: native time
 * folded into the managed callers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "builtin.h"
#include "ntr.h"
#include "dnt-profile.h"
#include "dnt-trace.h"
#include "options.h"
#include "util.h"

struct report_options {
  const char *trace;
  long top;
  int inclusive, threads, fold_native, verbose, topn;
};

#define O(f) offsetof(struct report_options, f)
static const struct dnt_option report_options[] = {
    DNT_OPT_COUNT('n', "number", "N", O(top), 100000, "how many functions (default 5)"),
    DNT_OPT_FLAG(0, "inclusive", O(inclusive), "rank by inclusive time (default: exclusive)"),
    DNT_OPT_FLAG(0, "threads", O(threads), "one table per thread, besides the overall one"),
    DNT_OPT_FLAG(0, "fold-native", O(fold_native),
                 "charge native time (UNMANAGED_CODE_TIME) to the managed frame\nthat called it: "
                 "a blocked thread shows the method that waits\n(dotnet-trace's report always does)"),
    DNT_OPT_FLAG('v', "verbose", O(verbose), "also the sample counts (names are never shortened)"),
    DNT_OPT_TEXT("topN", "dotnet-trace's subcommand after FILE: its table, with\n--fold-native"),
    DNT_OPT_END(),
};

const struct dnt_usage usage_report = {
    .synopsis = "dntrace report FILE [topN] [-n N] [--inclusive] [--threads] [--fold-native] [-v]",
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

/* -v: the sample counts too */
static int report_verbose;

static void print_table(const struct dnt_profile *prof, size_t thread, int by_inclusive, size_t top, uint64_t total) {
  struct dnt_profile_row *rows = dnt_xmalloc(top * sizeof *rows);
  size_t n = dnt_profile_top(prof, thread, by_inclusive, rows, top);
  if (n == (size_t)-1) dnt_die(DNT_EXIT_FAILURE, "out of memory");
  double ms = dnt_profile_sample_ms(prof);
  if (report_verbose)
    printf("  %18s  %18s  %10s  %10s  %s\n", "Exclusive", "Inclusive", "Excl. smp", "Incl. smp", "Function");
  else
    printf("  %18s  %18s  %s\n", "Exclusive", "Inclusive", "Function");
  for (size_t i = 0; i < n; i++) {
    char ex[32], in[32];
    snprintf(ex, sizeof ex, "%.0f ms %5.1f%%", rows[i].exclusive * ms, total ? 100.0 * rows[i].exclusive / total : 0);
    snprintf(in, sizeof in, "%.0f ms %5.1f%%", rows[i].inclusive * ms, total ? 100.0 * rows[i].inclusive / total : 0);
    if (report_verbose)
      printf("  %18s  %18s  %10llu  %10llu  %s\n", ex, in, (unsigned long long)rows[i].exclusive,
             (unsigned long long)rows[i].inclusive, rows[i].name);
    else
      printf("  %18s  %18s  %s\n", ex, in, rows[i].name);
  }
  if (n == 0) printf("  (no samples)\n");
  free(rows);
}

int dnt_report_load(struct dnt_profile *prof, const char *path) { return dnt_report_loads(&prof, 1, 1, path); }

int dnt_report_loads(struct dnt_profile *const *profs, size_t n, size_t nfinish, const char *path) {
  char msg[1024];
  if (dnt_trace_zip_note(path, msg, sizeof msg) > 0) dnt_warning("%s", msg);
  int rc = dnt_profiles_load(profs, n, nfinish, path, msg, sizeof msg);
  if (rc < 0) dnt_error("%s", msg);
  else if (rc > 0) dnt_warning("%s", msg);
  return rc;
}

void dnt_report_tables(const struct dnt_profile *prof, size_t top, int by_inclusive, int threads) {
  printf("Top %zu functions by %s time, all threads:\n", top, by_inclusive ? "inclusive" : "exclusive");
  print_table(prof, (size_t)-1, by_inclusive, top, dnt_profile_samples(prof));
  if (!threads) return;
  for (size_t t = 0; t < dnt_profile_nthreads(prof); t++) {
    uint64_t n = dnt_profile_thread_samples(prof, t);
    printf("\nThread %llu (%llu samples):\n", (unsigned long long)dnt_profile_thread_id(prof, t),
           (unsigned long long)n);
    print_table(prof, t, by_inclusive, top, n);
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
  if (dnt_report_load(prof, path) < 0) {
    dnt_profile_free(prof);
    return DNT_EXIT_FAILURE;
  }
  int fold = o.fold_native || o.topn;
  dnt_profile_fold_native(prof, fold);
  uint64_t total = dnt_profile_samples(prof);
  if (total == 0) {
    dnt_error("'%s' has no SampleProfiler samples (record with the default profiles, or "
              "--profile dotnet-sampled-thread-time)", path);
    dnt_profile_free(prof);
    return DNT_EXIT_FAILURE;
  }
  printf("%llu samples on %zu threads, %.2f ms each: thread time, whether running or waiting\n",
         (unsigned long long)total, dnt_profile_nthreads(prof), dnt_profile_sample_ms(prof));
  double measured = dnt_profile_measured_ms(prof);
  /* the runtime announces its nominal interval; say so when it really sampled slower or faster */
  if (measured > 0 && (measured > 1.1 * dnt_profile_sample_ms(prof) || measured < 0.9 * dnt_profile_sample_ms(prof)))
    printf("(the samples were in fact %.2f ms apart: times below use the trace's %.2f ms)\n", measured,
           dnt_profile_sample_ms(prof));
  if (fold) printf("(native time, UNMANAGED_CODE_TIME, is charged to the managed frame that called it)\n");
  putchar('\n');
  dnt_report_tables(prof, (size_t)top, by_inclusive, threads);
  dnt_profile_free(prof);
  return 0;
}
