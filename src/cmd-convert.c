/* dntrace convert: a trace's thread-time samples as folded stacks (flamegraph.pl, inferno) or a
 * speedscope profile, one profile per thread. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "builtin.h"
#include "config.h"
#include "flamegraph.h"
#include "profile.h"
#include "util.h"

const char *const usage_convert[] = {
    "dntrace convert FILE --format FORMAT [-o OUT]",
    "Convert a trace's samples to a flame graph, speedscope, Chromium trace or folded stacks",
    "    --format FORMAT   flamegraph (an interactive SVG), speedscope, chromium or folded",
    "    -o, --output OUT  where to write (default: FILE with .svg, .speedscope.json,",
    "                      .chromium.json or .folded; - for stdout)",
    "    -h, --help        show this help",
    NULL,
};

struct writer {
  FILE *fp;
  const struct dnt_profile *prof;
  uint64_t thread; /* speedscope: the thread being written */
  double ms;
  int first;
  int pass;        /* speedscope: 0 samples, 1 weights */
};

/* folded: "thread;root;...;leaf count" per line; the thread keeps threads apart in a flame graph */
static void folded_line(void *ud, uint64_t thread, const uint32_t *frames, size_t n, uint64_t samples) {
  struct writer *w = ud;
  fprintf(w->fp, "Thread %llu", (unsigned long long)thread);
  for (size_t i = 0; i < n; i++) {
    fputc(';', w->fp);
    /* ';' separates frames and ' ' ends them: keep names from breaking the format */
    for (const char *c = dnt_profile_name(w->prof, frames[i]); *c; c++)
      fputc(*c == ';' ? ':' : *c == ' ' ? '_' : *c, w->fp);
  }
  fprintf(w->fp, " %llu\n", (unsigned long long)samples);
}

static void speedscope_item(void *ud, uint64_t thread, const uint32_t *frames, size_t n, uint64_t samples) {
  struct writer *w = ud;
  if (thread != w->thread) return;
  fputs(w->first ? "" : ",", w->fp);
  w->first = 0;
  if (w->pass == 1) {
    fprintf(w->fp, "%.6g", (double)samples * w->ms);
    return;
  }
  fputc('[', w->fp);
  for (size_t i = 0; i < n; i++) fprintf(w->fp, "%s%u", i ? "," : "", frames[i]);
  fputc(']', w->fp);
}

/* Chromium trace events: per thread, a frame opens when it first appears on the sampled stack
 * and closes when a later sample no longer has it at that depth ("X" complete events). */
struct chromium {
  FILE *fp;
  const struct dnt_profile *prof;
  uint64_t thread;
  double last_us, step_us;
  uint32_t *open;    /* the frames open now, root first */
  double *since;     /* when each opened */
  size_t nopen, cap;
  int first;
  uint32_t pid;
};

static void chromium_close(struct chromium *c, size_t keep, double t_us) {
  while (c->nopen > keep) {
    c->nopen--;
    fprintf(c->fp, "%s{\"name\":", c->first ? "" : ",\n");
    c->first = 0;
    dnt_json_string(c->fp, dnt_profile_name(c->prof, c->open[c->nopen]));
    fprintf(c->fp, ",\"cat\":\"sample\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":%u,\"tid\":%llu}",
            c->since[c->nopen], t_us - c->since[c->nopen], c->pid, (unsigned long long)c->thread);
  }
}

static void chromium_sample(void *ud, uint64_t thread, double t_us, const uint32_t *frames, size_t n) {
  struct chromium *c = ud;
  if (thread != c->thread) {
    chromium_close(c, 0, c->last_us + c->step_us);
    c->thread = thread;
  }
  size_t same = 0;
  while (same < n && same < c->nopen && c->open[same] == frames[same]) same++;
  chromium_close(c, same, t_us);
  if (n > c->cap) {
    c->cap = n * 2;
    c->open = realloc(c->open, c->cap * sizeof *c->open);
    c->since = realloc(c->since, c->cap * sizeof *c->since);
    if (!c->open || !c->since) dnt_die(1, "out of memory");
  }
  for (size_t i = same; i < n; i++) {
    c->open[i] = frames[i];
    c->since[i] = t_us;
  }
  c->nopen = n;
  c->last_us = t_us;
}

static void write_chromium(FILE *fp, const struct dnt_profile *prof, uint32_t pid) {
  struct chromium c = {fp, prof, 0, 0, dnt_profile_sample_ms(prof) * 1000, NULL, NULL, 0, 0, 1, pid};
  fputs("{\"traceEvents\":[\n", fp);
  dnt_profile_each_sample(prof, chromium_sample, &c);
  chromium_close(&c, 0, c.last_us + c.step_us);
  fputs("\n],\"displayTimeUnit\":\"ms\",\"otherData\":{\"exporter\":\"dntrace " PACKAGE_VERSION "\"}}\n", fp);
  free(c.open);
  free(c.since);
}

static void write_speedscope(FILE *fp, const struct dnt_profile *prof, const char *name) {
  struct writer w = {fp, prof, 0, dnt_profile_sample_ms(prof), 1, 0};
  fputs("{\"$schema\":\"https://www.speedscope.app/file-format-schema.json\",\"shared\":{\"frames\":[", fp);
  for (size_t i = 0; i < dnt_profile_nnames(prof); i++) {
    fputs(i ? ",{\"name\":" : "{\"name\":", fp);
    dnt_json_string(fp, dnt_profile_name(prof, (uint32_t)i));
    fputc('}', fp);
  }
  fputs("]},\"profiles\":[", fp);
  for (size_t t = 0; t < dnt_profile_nthreads(prof); t++) {
    w.thread = dnt_profile_thread_id(prof, t);
    double total = (double)dnt_profile_thread_samples(prof, t) * w.ms;
    fprintf(fp, "%s{\"type\":\"sampled\",\"name\":\"Thread %llu\",\"unit\":\"milliseconds\",\"startValue\":0,"
                "\"endValue\":%.6g,\"samples\":[",
            t ? "," : "", (unsigned long long)w.thread, total);
    w.first = 1;
    w.pass = 0;
    dnt_profile_each_stack(prof, speedscope_item, &w);
    fputs("],\"weights\":[", fp);
    w.first = 1;
    w.pass = 1;
    dnt_profile_each_stack(prof, speedscope_item, &w);
    fputs("]}", fp);
  }
  fputs("],\"name\":", fp);
  dnt_json_string(fp, name);
  fputs(",\"activeProfileIndex\":0,\"exporter\":\"dntrace " PACKAGE_VERSION "\"}\n", fp);
}

/* Converts trace (a .nettrace path) into output in format ("folded" or "speedscope"); output
 * NULL picks the default name. Prints its own errors. Returns 0, DNT_EXIT_USAGE for an unknown
 * format, or DNT_EXIT_FAILURE. */
static int format_kind(const char *format) {
  if (strcasecmp(format, "folded") == 0) return 'f';
  if (strcasecmp(format, "speedscope") == 0) return 's';
  if (strcasecmp(format, "flamegraph") == 0 || strcasecmp(format, "svg") == 0) return 'g';
  if (strcasecmp(format, "chromium") == 0) return 'c';
  return 0;
}

int dnt_convert_check_format(const char *format) {
  if (format_kind(format)) return 0;
  return dnt_error("--format: '%s' is not folded, speedscope, chromium or flamegraph", format);
}

const char *dnt_convert_extension(const char *format) {
  switch (format_kind(format)) {
  case 's': return ".speedscope.json";
  case 'g': return ".svg";
  case 'c': return ".chromium.json";
  default: return ".folded";
  }
}

int dnt_convert_profile(const struct dnt_profile *prof, const char *format, const char *title, const char *output) {
  int kind = format_kind(format);
  if (!kind) {
    dnt_error("--format: '%s' is not folded, speedscope, chromium or flamegraph", format);
    return DNT_EXIT_USAGE;
  }
  if (kind == 'g') {
    if (dnt_flamegraph_write(prof, title, output) < 0) return DNT_EXIT_FAILURE;
    if (strcmp(output, "-") != 0)
      fprintf(stderr, "Wrote %s (%llu samples)\n", output, (unsigned long long)dnt_profile_samples(prof));
    return 0;
  }
  FILE *fp = strcmp(output, "-") == 0 ? stdout : fopen(output, "w");
  if (!fp) return dnt_error("cannot write '%s': %s", output, strerror(errno)), DNT_EXIT_FAILURE;
  if (kind == 's') {
    write_speedscope(fp, prof, title);
  } else if (kind == 'c') {
    write_chromium(fp, prof, 1);
  } else {
    struct writer w = {fp, prof, 0, 0, 1, 0};
    dnt_profile_each_stack(prof, folded_line, &w);
  }
  if (fp == stdout) return 0;
  int bad = ferror(fp);
  if (fclose(fp) != 0 || bad) {
    dnt_error("cannot write '%s': %s", output, strerror(errno ? errno : EIO));
    unlink(output);
    return DNT_EXIT_FAILURE;
  }
  fprintf(stderr, "Wrote %s (%llu samples)\n", output, (unsigned long long)dnt_profile_samples(prof));
  return 0;
}

int dnt_convert(const char *path, const char *format, const char *output) {
  int kind = format_kind(format);
  if (!kind) {
    dnt_error("--format: '%s' is not folded, speedscope, chromium or flamegraph", format);
    return DNT_EXIT_USAGE;
  }
  char *default_out = NULL;
  if (!output) {
    size_t n = strlen(path);
    const char *ext = dnt_convert_extension(format);
    size_t stem = n > 9 && strcmp(path + n - 9, ".nettrace") == 0 ? n - 9 : n;
    default_out = dnt_xmalloc(stem + strlen(ext) + 1);
    memcpy(default_out, path, stem);
    strcpy(default_out + stem, ext);
    output = default_out;
  }
  int rc = DNT_EXIT_FAILURE;
  struct dnt_profile *prof = dnt_profile_new();
  if (!prof) dnt_die(DNT_EXIT_FAILURE, "out of memory");
  if (kind == 'c') dnt_profile_keep_timeline(prof);
  if (dnt_profile_load(prof, path) < 0) goto out;
  if (dnt_profile_samples(prof) == 0) {
    dnt_error("'%s' has no SampleProfiler samples to convert", path);
    goto out;
  }
  rc = dnt_convert_profile(prof, format, path, output);
out:
  dnt_profile_free(prof);
  free(default_out);
  return rc;
}

int cmd_convert(int argc, char **argv) {
  static const struct option opts[] = {
      {"format", required_argument, NULL, 'f'},
      {"output", required_argument, NULL, 'o'},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  char shortopts[32];
  dnt_shortopts(opts, shortopts, sizeof shortopts);
  const char *format = NULL, *output = NULL;
  int c;
  optind = 1;
  while ((c = getopt_long(argc, argv, shortopts, opts, NULL)) != -1) {
    switch (c) {
    case 'f': format = optarg; break;
    case 'o': output = optarg; break;
    case 'h': dnt_print_usage(stdout, usage_convert); return 0;
    default: return dnt_usage_error("convert", c, optopt, argv);
    }
  }
  if (optind + 1 != argc) {
    dnt_error(optind == argc ? "name the trace file to convert" : "one trace file at a time");
    return DNT_EXIT_USAGE;
  }
  if (!format) {
    dnt_error("--format is required: flamegraph, speedscope, chromium or folded");
    return DNT_EXIT_USAGE;
  }
  return dnt_convert(argv[optind], format, output);
}
