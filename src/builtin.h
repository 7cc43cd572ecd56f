/* The subcommands of dntrace and what they share.
 *
 * Adding a subcommand:
 *   1. write src/cmd-<name>.c exporting `int cmd_<name>(int argc, char **argv)`, with its option
 *      table (src/options.h: the shared target, --duration, --format, -o and --top rows are
 *      included, not written again) and a `struct dnt_usage usage_<name>` whose synopsis is the
 *      SYNOPSIS of its man page; cmd_<name> calls dnt_options_parse(&usage_<name>, ...); an
 *      analysis of a trace or a live process (gc, jit, locks, ...) describes itself in a struct
 *      dnt_analysis_cmd and lets dnt_analysis_run do the rest (src/analysis-cmd.h);
 *   2. add one row to `commands[]` in src/dntrace.c and declare both symbols below;
 *   3. list the file in src/Makemodule.am (engine code goes into a library folder, not src/:
 *      docs/internals/architecture.md);
 *   4. write man/dntrace-<name>.1 (add it to dist_man1_MANS) and a README section;
 *   5. add tests: tests/cli/test-cli.c checks the usage's SYNOPSIS and options against the man page.
 */
#ifndef DNT_BUILTIN_H
#define DNT_BUILTIN_H

/* Exit codes that mean something to scripts (documented in dntrace(1)). */
enum dnt_exit {
  DNT_EXIT_OK = 0,
  DNT_EXIT_FAILURE = 1, /* the operation failed (target refused, I/O error, ...) */
  DNT_EXIT_USAGE = 2,   /* bad command line */
  DNT_EXIT_NOTARGET = 3 /* no such process, not .NET, no permission, diagnostics disabled */
};

struct dnt_usage; /* options.h */
struct dnt_cmd {
  const char *name;
  int (*fn)(int argc, char **argv);
  const struct dnt_usage *usage; /* its synopsis, summary and option table (the help comes from it) */
};

int cmd_ps(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_collect(int argc, char **argv);
int cmd_dump(int argc, char **argv);
int cmd_dump_analyze(int argc, char **argv); /* dump-analyze.c: `dump analyze CORE` */
int cmd_report(int argc, char **argv);
int cmd_convert(int argc, char **argv);
int cmd_events(int argc, char **argv);
int cmd_counters(int argc, char **argv);
int cmd_perf(int argc, char **argv);
int cmd_compare(int argc, char **argv);
int cmd_stacks(int argc, char **argv);
int cmd_gc(int argc, char **argv);
int cmd_jit(int argc, char **argv);
int cmd_threadpool(int argc, char **argv);
int cmd_gcdump(int argc, char **argv);
int cmd_allocs(int argc, char **argv);
int cmd_waits(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_watch(int argc, char **argv);

extern const struct dnt_usage usage_ps;
extern const struct dnt_usage usage_info;
extern const struct dnt_usage usage_collect;
extern const struct dnt_usage usage_dump;
extern const struct dnt_usage usage_dump_analyze;
extern const struct dnt_usage usage_report;
extern const struct dnt_usage usage_convert;
extern const struct dnt_usage usage_events;
extern const struct dnt_usage usage_counters;
extern const struct dnt_usage usage_perf;
extern const struct dnt_usage usage_compare;
extern const struct dnt_usage usage_stacks;
extern const struct dnt_usage usage_gc;
extern const struct dnt_usage usage_jit;
extern const struct dnt_usage usage_threadpool;
extern const struct dnt_usage usage_gcdump;
extern const struct dnt_usage usage_allocs;
int cmd_exceptions(int argc, char **argv);
int cmd_locks(int argc, char **argv);
extern const struct dnt_usage usage_exceptions;
extern const struct dnt_usage usage_locks;
extern const struct dnt_usage usage_waits;
extern const struct dnt_usage usage_serve;
extern const struct dnt_usage usage_watch;

/* Converts a trace's samples (see cmd-convert.c), weighed as weight says (enum
 * dnt_profile_weight: 0 time, 1 samples). */
int dnt_convert(const char *trace, const char *format, const char *output, int weight, int no_async);
/* The same for a profile already loaded from trace (collect --format builds it from the stream);
 * output NULL: trace's name with the format's extension. 0 or an exit code (errors printed). */
struct dnt_profile;
int dnt_convert_loaded(const struct dnt_profile *prof, const char *trace, const char *format, const char *output);
/* Whether format is a conversion's name or alias (svg for flamegraph), and whether it needs each
 * sample's time (chromium, speedscope). */
int dnt_convert_known_format(const char *format);
int dnt_convert_needs_timeline(const char *format);

/* A loaded profile as folded stacks, speedscope, chromium or a flame graph SVG to output ("-":
 * stdout), titled title, the flame graph saying what its width measures (cmd-convert.c); and the
 * extension a format's file gets. */
int dnt_convert_profile(const struct dnt_profile *prof, const char *format, const char *title, const char *measure,
                        const char *output);
const char *dnt_convert_extension(const char *format);
/* Whether --format names a conversion (folded, speedscope, chromium, flamegraph): 0, or -1 with
 * the error printed. */
int dnt_convert_check_format(const char *format);

/* The top-N tables of `report` (cmd-report.c): all threads, then each thread if asked. */
void dnt_report_tables(const struct dnt_profile *prof, size_t top, int by_inclusive, int threads);
/* dnt_profile_load with its error or warning printed (cmd-report.c): its return value. */
int dnt_report_load(struct dnt_profile *prof, const char *path);
/* dnt_profiles_load, the same way. */
int dnt_report_loads(struct dnt_profile *const *profs, size_t n, size_t nfinish, const char *path);

/* `info TRACE` (info-trace.c): what the trace at path holds, as text or JSON (-v: every thread
 * and the events by kind). 0 or an exit code (errors printed). */
int dnt_info_trace(const char *path, int json, int verbose);

/* `counters list` (counters-known.c). */
int dnt_counters_list(void);

/* Looks a subcommand up by name; NULL if there is none. */
const struct dnt_cmd *dnt_find_cmd(const char *name);

#endif
