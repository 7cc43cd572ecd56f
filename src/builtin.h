/* The subcommands of dntrace and what they share.
 *
 * Adding a subcommand:
 *   1. write src/cmd-<name>.c exporting `int cmd_<name>(int argc, char **argv)`, with its option
 *      table and a `usage_<name>[]` array (the first line is the SYNOPSIS of its man page);
 *   2. add one row to `commands[]` in src/dntrace.c and declare both symbols below;
 *   3. list the file in src/Makemodule.am;
 *   4. write man/dntrace-<name>.1 (add it to dist_man1_MANS) and a README section;
 *   5. add tests: the SYNOPSIS check in tests/test-cli.c covers the usage text automatically.
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

struct dnt_cmd {
  const char *name;
  int (*fn)(int argc, char **argv);
  const char *const *usage; /* NULL-terminated; usage[0] is the synopsis, usage[1] the summary */
};

int cmd_ps(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_collect(int argc, char **argv);
int cmd_dump(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_convert(int argc, char **argv);
int cmd_events(int argc, char **argv);
int cmd_counters(int argc, char **argv);
int cmd_perf(int argc, char **argv);
int cmd_compare(int argc, char **argv);

extern const char *const usage_ps[];
extern const char *const usage_info[];
extern const char *const usage_collect[];
extern const char *const usage_dump[];
extern const char *const usage_report[];
extern const char *const usage_convert[];
extern const char *const usage_events[];
extern const char *const usage_counters[];
extern const char *const usage_perf[];
extern const char *const usage_compare[];

/* Converts a trace's samples (see cmd-convert.c); collect --format uses it after the session. */
int dnt_convert(const char *trace, const char *format, const char *output);

/* A loaded profile as folded stacks, speedscope, chromium or a flame graph SVG to output ("-":
 * stdout), titled title (cmd-convert.c); and the extension a format's file gets. */
struct dnt_profile;
int dnt_convert_profile(const struct dnt_profile *prof, const char *format, const char *title, const char *output);
const char *dnt_convert_extension(const char *format);
/* Whether --format names a conversion (folded, speedscope, chromium, flamegraph): 0, or -1 with
 * the error printed. */
int dnt_convert_check_format(const char *format);

/* The top-N tables of `report` (cmd-report.c): all threads, then each thread if asked. */
void dnt_report_tables(const struct dnt_profile *prof, size_t top, int by_inclusive, int threads);

/* `counters list` (counters-known.c). */
int dnt_counters_list(void);

/* Looks a subcommand up by name; NULL if there is none. */
const struct dnt_cmd *dnt_find_cmd(const char *name);

#endif
