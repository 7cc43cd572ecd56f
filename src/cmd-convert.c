/* dntrace convert: a trace's thread-time samples as folded stacks (flamegraph.pl, inferno), a
 * speedscope profile (one profile per thread), a Chromium timeline, a flame graph SVG or a pprof
 * profile (gzip-compressed profile.proto). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "builtin.h"
#include "config.h"
#include "dnt-profile.h"
#include "options.h"
#include "output.h"
#include "util.h"
#include "view.h"

struct convert_options {
  const char *trace, *output;
  int format; /* enum dnt_format */
  int by_thread;
  int weight; /* 0 time, 1 samples (--weight) */
  int no_async;
  struct dnt_view_opts view;
};

/* convert's own view, for dnt_convert (NULL: every sample) */
static const struct dnt_view_opts *convert_view;

/* --format: a profile format, or nettrace, taken to say why not (dotnet-trace's convert
 * --format NetTrace); any other word is the error every command gives. */
static int parse_format(void *field, const char *value) {
  enum dnt_format f = dnt_format_find(value, DNT_FORMATS_PROFILE | DNT_FORMAT_BIT(DNT_FORMAT_NETTRACE));
  if (f == DNT_FORMAT_NONE) return dnt_format_error(value, DNT_FORMATS_PROFILE);
  *(int *)field = (int)f;
  return 0;
}

#define O(f) offsetof(struct convert_options, f)
static const struct dnt_option convert_options[] = {
    DNT_OPT_PARSE(0, "format", "FORMAT", O(format), parse_format,
                  "flamegraph (an interactive SVG), speedscope, chromium, folded\n"
                  "or pprof"),
    {.kind = DNT_OPT_PARSE, .short_name = 'f', .offset = O(format), .parse = parse_format}, /* -f: --format */
    DNT_OPT_OUTPUT("OUT", O(output),
                   "where to write (- for stdout; the format's extension is added\n"
                   "when OUT has none; default: FILE with .svg, .speedscope.json,\n"
                   ".chromium.json, .folded or .pb.gz; stdout when FILE is -)"),
    DNT_OPT_FLAG(0, "by-thread", O(by_thread), "flamegraph: one tower per thread (default: threads merged)"),
    DNT_OPT_WEIGHT(O(weight), "time (default: each sample the time until its thread's next;\n"
                              "folded in integer microseconds) or samples (plain counts)"),
    DNT_OPT_NO_ASYNC(O(no_async)),
    DNT_OPT_GROUP(dnt_options_view, O(view)),
    DNT_OPT_END(),
};

const struct dnt_usage usage_convert = {
    .synopsis = "dntrace convert FILE --format FORMAT [-o OUT] [--by-thread] [--weight WEIGHT] [--no-async] [--thread TID|NAME] "
                "[--focus FRAME] [--exclude FRAME] [--hide-idle]",
    .summary = "Convert a trace's samples to a flame graph, speedscope, Chromium trace, folded stacks or pprof",
    .options = convert_options,
    .operand = 1,
    .operand_offset = O(trace),
    .no_operand = "name the trace file to convert",
    .many_operands = "one trace file at a time",
};
#undef O

/* Converts trace (a .nettrace path) into output in format ("folded" or "speedscope"); output
 * NULL picks the default name. Prints its own errors. Returns 0, DNT_EXIT_USAGE for an unknown
 * format, or DNT_EXIT_FAILURE. */
static int format_kind(const char *format) {
  switch (dnt_format_find(format, DNT_FORMATS_PROFILE)) { /* the names and aliases of options.c */
  case DNT_FORMAT_FOLDED: return 'f';
  case DNT_FORMAT_SPEEDSCOPE: return 's';
  case DNT_FORMAT_FLAMEGRAPH: return 'g';
  case DNT_FORMAT_CHROMIUM: return 'c';
  case DNT_FORMAT_PPROF: return 'p';
  default: return 0;
  }
}

int dnt_convert_check_format(const char *format) {
  if (format_kind(format)) return 0;
  return dnt_format_error(format, DNT_FORMATS_PROFILE);
}

const char *dnt_convert_extension(const char *format) {
  switch (format_kind(format)) {
  case 's': return ".speedscope.json";
  case 'g': return ".svg";
  case 'c': return ".chromium.json";
  case 'p': return ".pb.gz"; /* pprof's own name for its files */
  default: return ".folded";
  }
}

/* convert --by-thread: the flame graph's towers per thread */
static int flame_by_thread;

int dnt_convert_profile(const struct dnt_profile *prof, const char *format, const char *title, const char *measure,
                        const char *output) {
  int kind = format_kind(format);
  if (!kind) {
    dnt_format_error(format, DNT_FORMATS_PROFILE);
    return DNT_EXIT_USAGE;
  }
  struct dnt_output out;
  char *name = dnt_output_name(output, dnt_convert_extension(format));
  int rc = DNT_EXIT_FAILURE;
  if (kind == 'p' && strcmp(name, "-") == 0 && isatty(STDOUT_FILENO)) { /* as gzip does */
    dnt_error("pprof is compressed binary data: not written to a terminal (redirect it, or name a file with -o)");
    rc = DNT_EXIT_USAGE;
    goto done;
  }
  if (dnt_output_open(&out, name, 0) < 0) goto done;
  if (kind == 'g') { /* libxml2 writes the SVG by name: the temporary's, or "-" for stdout */
    char msg[1024];
    if (out.fp != stdout) fclose(out.fp), out.fp = NULL;
    fflush(stdout);
    struct dnt_flamegraph_opts fg = {.title = title, .measure = measure, .by_thread = flame_by_thread};
    int piped = !out.tmp;
    if (dnt_flamegraph_write(prof, &fg, out.tmp ? out.tmp : "-", msg, sizeof msg) < 0) {
      dnt_output_abort(&out);
      if (piped && dnt_stdout_closed()) { /* `... -o - | head`: the rest was not wanted */
        rc = 0;
        goto done;
      }
      /* the writer names the temporary: the user's file, and the writer's reason */
      const char *why = strstr(msg, "': ");
      dnt_error("cannot write '%s'%s", name, why ? why + 1 : "");
      goto done;
    }
  } else {
    enum dnt_profile_format f = kind == 's'   ? DNT_PROFILE_SPEEDSCOPE
                               : kind == 'c' ? DNT_PROFILE_CHROMIUM
                               : kind == 'p' ? DNT_PROFILE_PPROF
                                             : DNT_PROFILE_FOLDED;
    if (dnt_profile_write(prof, f, title, out.fp) != 0) dnt_die(DNT_EXIT_FAILURE, "out of memory writing '%s'", name);
  }
  int to_stdout = out.fp == stdout || strcmp(name, "-") == 0;
  if (dnt_output_commit(&out) < 0) goto done;
  if (!to_stdout)
    fprintf(stderr, "Wrote %s (%llu samples)\n", name, (unsigned long long)dnt_profile_samples(prof));
  rc = 0;
done:
  free(name);
  return rc;
}

int dnt_convert_known_format(const char *format) { return format_kind(format) != 0; }

/* chromium draws each sample where it was; speedscope keeps its samples in time order */
int dnt_convert_needs_timeline(const char *format) { return format_kind(format) == 'c' || format_kind(format) == 's'; }

int dnt_convert_loaded(const struct dnt_profile *prof, const char *path, const char *format, const char *output) {
  char *default_out = NULL;
  if (!output && strcmp(path, "-") == 0) output = "-"; /* a filter: read from stdin, written to stdout (not '-.folded') */
  size_t n = strlen(path);
  const char *ext = dnt_convert_extension(format);
  size_t stem = n > 9 && strcmp(path + n - 9, ".nettrace") == 0 ? n - 9 : n;
  char *chosen = dnt_xmalloc(stem + strlen(ext) + 1); /* FILE without .nettrace, plus the extension */
  memcpy(chosen, path, stem);
  strcpy(chosen + stem, ext);
  char *inside = output ? dnt_output_in_dir(output, chosen) : NULL;
  if (!output)
    output = default_out = chosen, chosen = NULL;
  else if (inside)
    output = default_out = inside; /* -o DIR: the chosen name inside it */
  free(chosen);
  int rc = DNT_EXIT_FAILURE;
  if (dnt_profile_samples(prof) == 0)
    dnt_error("'%s' has no SampleProfiler samples to convert", path);
  else
    rc = dnt_convert_profile(prof, format, path, "thread time", output);
  free(default_out);
  return rc;
}

int dnt_convert(const char *path, const char *format, const char *output, int weight, int no_async) {
  int kind = format_kind(format);
  if (!kind) {
    dnt_format_error(format, DNT_FORMATS_PROFILE);
    return DNT_EXIT_USAGE;
  }
  int rc = DNT_EXIT_FAILURE;
  struct dnt_profile *prof = dnt_profile_new();
  if (!prof) dnt_die(DNT_EXIT_FAILURE, "out of memory");
  if (dnt_convert_needs_timeline(format)) dnt_profile_keep_timeline(prof);
  if (weight) dnt_profile_set_weight(prof, DNT_WEIGHT_SAMPLES);
  dnt_profile_set_tasks(prof, no_async ? DNT_TASKS_SAMPLES : DNT_TASKS_STITCHED);
  if (dnt_report_load(prof, path) >= 0) {
    uint64_t all = dnt_profile_samples(prof);
    if (convert_view) dnt_view_apply(prof, convert_view);
    if (all && !dnt_profile_samples(prof))
      dnt_error("no sample of '%s' is in the view --thread, --focus, --exclude and --hide-idle asked for", path);
    else
      rc = dnt_convert_loaded(prof, path, format, output);
  }
  dnt_profile_free(prof);
  return rc;
}

int cmd_convert(int argc, char **argv) {
  struct convert_options o = {0};
  int rc = dnt_options_parse(&usage_convert, "convert", argc, argv, &o);
  if (rc) return rc == DNT_OPTIONS_DONE ? 0 : rc;
  if (!o.format) {
    dnt_error("--format is required: flamegraph, speedscope, chromium, folded or pprof");
    return DNT_EXIT_USAGE;
  }
  if (o.format == DNT_FORMAT_NETTRACE) {
    dnt_error("--format nettrace: '%s' is a trace already, and convert writes profiles of one (flamegraph, "
              "speedscope, chromium, folded or pprof); every command reads a .nettrace, .gz or .zip as it is",
              o.trace);
    dnt_view_release(&o.view);
    return DNT_EXIT_USAGE;
  }
  flame_by_thread = o.by_thread;
  convert_view = &o.view;
  rc = dnt_convert(o.trace, dnt_format_name(o.format), o.output, o.weight, o.no_async);
  convert_view = NULL;
  dnt_view_release(&o.view);
  return rc;
}
