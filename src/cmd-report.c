/* dntrace report: where the time goes, from the SampleProfiler samples of a trace: the top
 * functions by exclusive or inclusive thread time, overall or per thread. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "builtin.h"
#include "ntr.h"
#include "profile.h"
#include "util.h"

const char *const usage_report[] = {
    "dntrace report FILE [-n N] [--inclusive] [--threads]",
    "Show the functions that take the most thread time in a trace",
    "    -n, --number N   how many functions (default 5)",
    "    --inclusive      rank by inclusive time (default: exclusive)",
    "    --threads        one table per thread, besides the overall one",
    "    -h, --help       show this help",
    NULL,
};

static void print_table(const struct dnt_profile *prof, size_t thread, int by_inclusive, size_t top, uint64_t total) {
  struct dnt_profile_row *rows = dnt_xmalloc(top * sizeof *rows);
  size_t n = dnt_profile_top(prof, thread, by_inclusive, rows, top);
  double ms = dnt_profile_sample_ms(prof);
  printf("  %18s  %18s  %s\n", "Exclusive", "Inclusive", "Function");
  for (size_t i = 0; i < n; i++) {
    char ex[32], in[32];
    snprintf(ex, sizeof ex, "%.0f ms %5.1f%%", rows[i].exclusive * ms, total ? 100.0 * rows[i].exclusive / total : 0);
    snprintf(in, sizeof in, "%.0f ms %5.1f%%", rows[i].inclusive * ms, total ? 100.0 * rows[i].inclusive / total : 0);
    printf("  %18s  %18s  %s\n", ex, in, rows[i].name);
  }
  if (n == 0) printf("  (no samples)\n");
  free(rows);
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
  enum { OPT_INCLUSIVE = 1000, OPT_THREADS };
  static const struct option opts[] = {
      {"number", required_argument, NULL, 'n'},
      {"inclusive", no_argument, NULL, OPT_INCLUSIVE},
      {"threads", no_argument, NULL, OPT_THREADS},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  char shortopts[32];
  dnt_shortopts(opts, shortopts, sizeof shortopts);
  int c, by_inclusive = 0, threads = 0;
  long top = 5;
  optind = 1;
  while ((c = getopt_long(argc, argv, shortopts, opts, NULL)) != -1) {
    switch (c) {
    case 'n':
      if (dnt_parse_count("-n", optarg, 100000, &top) != 0) return DNT_EXIT_USAGE;
      break;
    case OPT_INCLUSIVE: by_inclusive = 1; break;
    case OPT_THREADS: threads = 1; break;
    case 'h': dnt_print_usage(stdout, usage_report); return 0;
    default: return dnt_usage_error("report", c, optopt, argv);
    }
  }
  if (optind + 1 != argc) {
    dnt_error(optind == argc ? "name the trace file to report on" : "one trace file at a time");
    return DNT_EXIT_USAGE;
  }
  const char *path = argv[optind];
  struct dnt_profile *prof = dnt_profile_new();
  if (!prof) dnt_die(DNT_EXIT_FAILURE, "out of memory");
  if (dnt_profile_load(prof, path) < 0) {
    dnt_profile_free(prof);
    return DNT_EXIT_FAILURE;
  }
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
  putchar('\n');
  dnt_report_tables(prof, (size_t)top, by_inclusive, threads);
  dnt_profile_free(prof);
  return 0;
}
