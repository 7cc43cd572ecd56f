/* Option tables: the parser (getopt_long underneath), the help text, and the options every
 * command shares. See options.h. */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "builtin.h"
#include "options.h"
#include "output.h"
#include "util.h"

/* ---- the shared options ---- */

static const struct {
  enum dnt_format format;
  const char *name, *alias;
} formats[] = {
    {DNT_FORMAT_NETTRACE, "nettrace", NULL},
    {DNT_FORMAT_FOLDED, "folded", NULL},
    {DNT_FORMAT_SPEEDSCOPE, "speedscope", NULL},
    {DNT_FORMAT_CHROMIUM, "chromium", NULL},
    {DNT_FORMAT_FLAMEGRAPH, "flamegraph", "svg"},
    {DNT_FORMAT_PPROF, "pprof", NULL},
    {DNT_FORMAT_CSV, "csv", NULL},
    {DNT_FORMAT_JSON, "json", NULL},
    {DNT_FORMAT_PROMETHEUS, "prometheus", NULL},
    {DNT_FORMAT_TEXT, "text", NULL},
    {DNT_FORMAT_GCDUMP, "gcdump", NULL},
};
#define NFORMATS (sizeof formats / sizeof formats[0])

enum dnt_format dnt_format_find(const char *name, long mask) {
  for (size_t i = 0; i < NFORMATS; i++) {
    if (!(mask & DNT_FORMAT_BIT(formats[i].format))) continue;
    if (strcasecmp(name, formats[i].name) == 0 || (formats[i].alias && strcasecmp(name, formats[i].alias) == 0))
      return formats[i].format;
  }
  return DNT_FORMAT_NONE;
}

const char *dnt_format_name(enum dnt_format f) {
  for (size_t i = 0; i < NFORMATS; i++)
    if (formats[i].format == f) return formats[i].name;
  return NULL;
}

int dnt_format_error(const char *name, long mask) {
  char list[256];
  size_t n = 0, taken = 0, left = 0;
  for (size_t i = 0; i < NFORMATS; i++) left += (mask & DNT_FORMAT_BIT(formats[i].format)) != 0;
  list[0] = '\0';
  for (size_t i = 0; i < NFORMATS; i++) {
    if (!(mask & DNT_FORMAT_BIT(formats[i].format))) continue;
    const char *sep = taken == 0 ? "" : taken + 1 == left ? " or " : ", ";
    n += (size_t)snprintf(list + n, sizeof list - n, "%s%s", sep, formats[i].name);
    if (n >= sizeof list) break;
    taken++;
  }
  return dnt_error("--format: '%s' is not %s", name, list);
}

int dnt_options_parse_weight(void *field, const char *value) {
  if (strcasecmp(value, "time") == 0) *(int *)field = 0;
  else if (strcasecmp(value, "samples") == 0) *(int *)field = 1;
  else return dnt_error("--weight: '%s' is not time or samples", value);
  return 0;
}

const struct dnt_option dnt_options_duration[] = {
    {.kind = DNT_OPT_DURATION, .long_name = "duration", .argh = "TIME",
     .help = "stop after dd:hh:mm:ss, or a number with s, m or h (30s, 5m)"},
    DNT_OPT_END(),
};

#define TARGET(f) offsetof(struct dnt_session_target, f)
#define PID_ROW \
  {.kind = DNT_OPT_PID, .short_name = 'p', .long_name = "process-id", .argh = "PID", \
   .help = "the process, by pid as seen from here", .offset = TARGET(pid)}
#define NAME_ROW \
  DNT_OPT_STRING('n', "name", "NAME", TARGET(name), "the process, by name (an error if several match)")

const struct dnt_option dnt_options_target_pid[] = {PID_ROW, NAME_ROW, DNT_OPT_END()};

const struct dnt_option dnt_options_target_port[] = {
    PID_ROW,
    NAME_ROW,
    DNT_OPT_STRING(0, "diagnostic-port", "PATH", TARGET(port), "a runtime's socket given by path"),
    DNT_OPT_STRING(0, "dport", "PATH", TARGET(port), NULL), /* dotnet-trace's short spelling */
    DNT_OPT_END(),
};

const struct dnt_option dnt_options_target_any[] = {
    PID_ROW,
    NAME_ROW,
    DNT_OPT_STRING(0, "diagnostic-port", "PATH", TARGET(port),
                   "a runtime's socket (PATH[,connect]), or PATH,listen to wait for\n"
                   "a runtime started with DOTNET_DiagnosticPorts=PATH"),
    DNT_OPT_STRING(0, "dport", "PATH", TARGET(port), NULL), /* dotnet-trace's short spelling */
    {.kind = DNT_OPT_CHILD, .argh = "-- CMD [ARGS...]", .offset = TARGET(child_argv),
     .help = "start CMD suspended, watch it from its first instruction, and exit\n"
             "with its exit code"},
    DNT_OPT_END(),
};

int dnt_options_check_target(const struct dnt_option *group, const struct dnt_session_target *t) {
  int port = group != dnt_options_target_pid, child = group == dnt_options_target_any;
  if ((t->pid > 0) + (t->name != NULL) + (t->port != NULL) + (t->child_argv != NULL) == 1) return 0;
  return dnt_error("name the process with exactly one of %s", child  ? "-p PID, -n NAME, --diagnostic-port PATH or -- CMD"
                                                              : port ? "-p PID, -n NAME or --diagnostic-port PATH"
                                                                     : "-p PID or -n NAME");
}

/* ---- the table, flattened ---- */

#define MAX_ROWS 64

struct row {
  const struct dnt_option *o;
  size_t offset; /* of its field in the command's struct, groups counted */
};

struct flat {
  struct row rows[MAX_ROWS];
  size_t n;
  const struct dnt_option *target; /* the target group included, if any */
  size_t target_offset;
  int child;                       /* a -- CMD row */
};

static const struct dnt_option help_row = {.kind = DNT_OPT_ACTION, .short_name = 'h', .long_name = "help",
                                           .help = "show this help"};

static void flatten(struct flat *f, const struct dnt_option *o, size_t base) {
  for (; o->kind != DNT_OPT_END; o++) {
    if (o->kind == DNT_OPT_GROUP) {
      if (o->group == dnt_options_target_pid || o->group == dnt_options_target_port ||
          o->group == dnt_options_target_any) {
        f->target = o->group;
        f->target_offset = base + o->offset;
      }
      flatten(f, o->group, base + o->offset);
      continue;
    }
    if (f->n + 1 >= MAX_ROWS) /* one row stays for --help */
      dnt_die(DNT_EXIT_FAILURE, "too many options in a table (MAX_ROWS)");
    if (o->kind == DNT_OPT_CHILD) f->child = 1;
    f->rows[f->n++] = (struct row){o, base + o->offset};
  }
}

static void flatten_usage(struct flat *f, const struct dnt_usage *u) {
  memset(f, 0, sizeof *f);
  flatten(f, u->options, 0);
  f->rows[f->n++] = (struct row){&help_row, 0};
}

static int takes_value(const struct dnt_option *o) {
  return o->kind != DNT_OPT_FLAG && o->kind != DNT_OPT_NO_CLOBBER && o->kind != DNT_OPT_ACTION && o->kind != DNT_OPT_CHILD && o->kind != DNT_OPT_TEXT;
}

/* A word a BOOL row takes as its value; 1 true, 0 false, -1 neither. */
static int bool_word(const char *arg) {
  if (strcasecmp(arg, "true") == 0 || strcmp(arg, "1") == 0 || strcasecmp(arg, "on") == 0) return 1;
  if (strcasecmp(arg, "false") == 0 || strcmp(arg, "0") == 0 || strcasecmp(arg, "off") == 0) return 0;
  return -1;
}

/* Whether the option holds one value, which a second use would silently replace. */
static int single_value(const struct dnt_option *o) {
  switch (o->kind) {
  case DNT_OPT_STRING:
  case DNT_OPT_PID:
  case DNT_OPT_COUNT:
  case DNT_OPT_DURATION:
  case DNT_OPT_FORMAT:
  case DNT_OPT_BOOL: return 1;
  case DNT_OPT_PARSE: return !o->many;
  default: return 0;
  }
}

/* ---- help ---- */

static size_t left_text(const struct dnt_option *o, char *buf, size_t cap) {
  if (o->kind == DNT_OPT_TEXT || o->kind == DNT_OPT_CHILD) return (size_t)snprintf(buf, cap, "%s", o->argh);
  size_t n = 0;
  if (o->short_name) n += (size_t)snprintf(buf + n, cap - n, "-%c%s", o->short_name, o->long_name ? ", " : "");
  if (o->long_name && n < cap) n += (size_t)snprintf(buf + n, cap - n, "--%s", o->long_name);
  if (o->argh && n < cap) n += (size_t)snprintf(buf + n, cap - n, " %s", o->argh);
  return n < cap ? n : cap - 1;
}

void dnt_options_usage(FILE *fp, const struct dnt_usage *u) {
  struct flat f;
  flatten_usage(&f, u);
  fprintf(fp, "usage: %s\n\n%s\n\n", u->synopsis, u->summary);
  char left[128];
  size_t width = 0;
  for (size_t i = 0; i < f.n; i++) {
    size_t n = f.rows[i].o->help ? left_text(f.rows[i].o, left, sizeof left) : 0;
    if (n > width) width = n;
  }
  for (size_t i = 0; i < f.n; i++) {
    const struct dnt_option *o = f.rows[i].o;
    if (!o->help) continue; /* an alias */
    left_text(o, left, sizeof left);
    const char *line = o->help;
    fprintf(fp, "    %-*s   ", (int)width, left);
    for (;;) {
      size_t len = strcspn(line, "\n");
      fprintf(fp, "%.*s\n", (int)len, line);
      if (!line[len]) break;
      line += len + 1;
      fprintf(fp, "    %-*s   ", (int)width, "");
    }
  }
}

/* ---- parsing ---- */

/* A getopt error for the command cmd: DNT_EXIT_USAGE. An unknown long option that is a slip
 * of one of the table's gets a "did you mean". */
static int usage_error(const char *cmd, const struct flat *f, int opt, char **argv) {
  const char *arg = argv[optind - 1];
  if (opt == ':') {
    dnt_error("option '%s' needs a value", arg);
  } else if (optopt && optopt < 128 && optopt > ' ') {
    dnt_error("unknown option '-%c'", optopt);
  } else {
    const char *names[MAX_ROWS];
    char word[128];
    snprintf(word, sizeof word, "%s", arg[0] == '-' && arg[1] == '-' ? arg + 2 : arg);
    word[strcspn(word, "=")] = '\0';
    for (size_t i = 0; i < f->n; i++) names[i] = f->rows[i].o->help ? f->rows[i].o->long_name : NULL;
    const char *near = dnt_nearest(word, names, f->n);
    if (near)
      dnt_error("unknown option '%s'; did you mean '--%s'?", arg, near);
    else
      dnt_error("unknown option '%s'", arg);
  }
  fprintf(stderr, "see 'dntrace %s --help'\n", cmd);
  return DNT_EXIT_USAGE;
}

/* The option as its errors name it: its short name when it has one ("-n"), else "--long". */
static const char *spelled(const struct dnt_option *o, char *buf, size_t cap) {
  if (o->short_name)
    snprintf(buf, cap, "-%c", o->short_name);
  else
    snprintf(buf, cap, "--%s", o->long_name);
  return buf;
}

/* One option's value into its field: 0, DNT_OPTIONS_DONE, or DNT_EXIT_USAGE (error printed). */
static int take(const struct dnt_usage *u, const struct row *r, const char *arg, void *opts) {
  const struct dnt_option *o = r->o;
  char *field = (char *)opts + r->offset, name[64];
  switch (o->kind) {
  case DNT_OPT_FLAG: *(int *)field = 1; return 0;
  case DNT_OPT_NO_CLOBBER: dnt_output_set_no_clobber(1); return 0;
  case DNT_OPT_STRING: *(const char **)field = arg; return 0;
  case DNT_OPT_LIST: {
    struct dnt_strlist *l = (struct dnt_strlist *)field;
    l->v = dnt_xrealloc(l->v, (l->n + 1) * sizeof *l->v);
    l->v[l->n++] = arg;
    return 0;
  }
  case DNT_OPT_PID: return (*(int *)field = dnt_opt_pid(arg)) < 0 ? DNT_EXIT_USAGE : 0;
  case DNT_OPT_COUNT:
    return dnt_parse_count(spelled(o, name, sizeof name), arg, o->max, (long *)field) < 0 ? DNT_EXIT_USAGE : 0;
  case DNT_OPT_DURATION:
    if ((*(uint64_t *)field = dnt_parse_duration(arg)) != 0) return 0;
    if (*arg && strspn(arg, "0:.smh") == strlen(arg) && strchr(arg, '0')) /* 0s, 00:00:00: no time at all */
      dnt_error("--%s: '%s' is no time; leave --%s out to go on until Ctrl+C", o->long_name, arg, o->long_name);
    else
      dnt_error("--%s: '%s' is not dd:hh:mm:ss or a number with s, m or h", o->long_name, arg);
    return DNT_EXIT_USAGE;
  case DNT_OPT_FORMAT:
    if ((*(int *)field = (int)dnt_format_find(arg, o->max)) != DNT_FORMAT_NONE) return 0;
    dnt_format_error(arg, o->max);
    return DNT_EXIT_USAGE;
  case DNT_OPT_BOOL: /* a bare --rundown is true, as dotnet-trace reads it */
    if ((*(int *)field = arg ? bool_word(arg) : 1) >= 0) return 0;
    return dnt_error("--%s: '%s' is not true or false", o->long_name, arg), DNT_EXIT_USAGE;
  case DNT_OPT_PARSE: return o->parse(field, arg) < 0 ? DNT_EXIT_USAGE : 0;
  case DNT_OPT_ACTION:
    if (o == &help_row)
      dnt_options_usage(stdout, u);
    else
      o->action();
    return DNT_OPTIONS_DONE;
  default: return 0;
  }
}

int dnt_options_parse(const struct dnt_usage *u, const char *cmd, int argc, char **argv, void *opts) {
  struct flat f;
  flatten_usage(&f, u);
  struct option longopts[MAX_ROWS + 1];
  char shortopts[3 * MAX_ROWS + 2];
  size_t nl = 0, ns = 0;
  shortopts[ns++] = ':'; /* a missing value is told apart from an unknown option */
  for (size_t i = 0; i < f.n; i++) {
    const struct dnt_option *o = f.rows[i].o;
    if (o->long_name) /* a BOOL's value may be left out (bare: true), or come as the next word */
      longopts[nl++] = (struct option){o->long_name, o->kind == DNT_OPT_BOOL ? optional_argument
                                                     : takes_value(o)     ? required_argument
                                                                          : no_argument,
                                       NULL, 1000 + (int)i};
    if (o->short_name) {
      shortopts[ns++] = (char)o->short_name;
      if (takes_value(o)) shortopts[ns++] = ':';
    }
  }
  longopts[nl] = (struct option){NULL, 0, NULL, 0};
  shortopts[ns] = '\0';

  /* dotnet-trace's grammar (System.CommandLine's): `-?` for help, and `--name:value` for
   * `--name=value` (the colon made an equals sign in place, for a long option of the table that
   * takes a value); nothing after "--" is ours to read */
  for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
    if (strcmp(argv[i], "-?") == 0) {
      dnt_options_usage(stdout, u);
      return DNT_OPTIONS_DONE;
    }
    char *colon = argv[i][0] == '-' && argv[i][1] == '-' ? strchr(argv[i], ':') : NULL;
    if (!colon || memchr(argv[i], '=', (size_t)(colon - argv[i]))) continue;
    for (size_t k = 0; k < nl; k++)
      if (longopts[k].has_arg != no_argument && strlen(longopts[k].name) == (size_t)(colon - argv[i] - 2) &&
          strncmp(longopts[k].name, argv[i] + 2, (size_t)(colon - argv[i] - 2)) == 0) {
        *colon = '=';
        break;
      }
  }

  /* getopt moves operands met before "--" to just after it, and leaves what followed "--" at
   * the end: the "--" it stopped at, found again by its pointer in the order given, says how many
   * of the last arguments are the command's (-- CMD) */
  char **given = malloc(((size_t)argc + 1) * sizeof *given);
  if (!given) dnt_die(DNT_EXIT_FAILURE, "out of memory");
  memcpy(given, argv, ((size_t)argc + 1) * sizeof *given);
  int c;
  optind = 0; /* glibc: start afresh, also after an earlier parse in this process */
  dnt_output_set_no_clobber(0);
  const char *first[MAX_ROWS] = {0}; /* a single value's first use, for a second one's error */
  while ((c = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1) {
    const struct row *r = NULL;
    if (c >= 1000 && (size_t)(c - 1000) < f.n) {
      r = &f.rows[c - 1000];
    } else if (c != '?' && c != ':') {
      for (size_t i = 0; i < f.n && !r; i++)
        if (f.rows[i].o->short_name == c) r = &f.rows[i];
    }
    if (!r) {
      free(given);
      return usage_error(cmd, &f, c, argv);
    }
    if (r->o->kind == DNT_OPT_BOOL && !optarg && optind < argc && bool_word(argv[optind]) >= 0)
      optarg = argv[optind++]; /* `--rundown false`: the next word is its value */
    if (single_value(r->o)) { /* dotnet-trace refuses a repeated option: the last one silently winning misleads */
      size_t k = (size_t)(r - f.rows);
      for (size_t i = 0; i < f.n; i++) /* an alias writes the same field */
        if (f.rows[i].offset == r->offset && single_value(f.rows[i].o) && first[i]) k = i;
      if (first[k]) {
        char name[64];
        dnt_error("%s given twice ('%s', then '%s'): give it once", spelled(r->o, name, sizeof name), first[k],
                  optarg);
        fprintf(stderr, "see 'dntrace %s --help'\n", cmd);
        free(given);
        return DNT_EXIT_USAGE;
      }
      first[k] = optarg ? optarg : "true";
    }
    int rc = take(u, r, optarg, opts);
    if (rc) {
      free(given);
      return rc;
    }
  }
  int command_args = 0;
  if (f.child && optind > 0 && optind <= argc && strcmp(argv[optind - 1], "--") == 0)
    for (int i = 1; i < argc && !command_args; i++)
      if (given[i] == argv[optind - 1]) command_args = argc - i - 1;
  free(given);
  if (command_args > 0) { /* -- CMD: the last arguments; what is left before them is the operands' */
    for (size_t i = 0; i < f.n; i++)
      if (f.rows[i].o->kind == DNT_OPT_CHILD) *(char ***)((char *)opts + f.rows[i].offset) = argv + argc - command_args;
    argc -= command_args;
  }

  int operand_given = 0;
  if (u->operand == DNT_OPERAND_OR_TARGET && optind + 1 == argc) {
    *(const char **)((char *)opts + u->operand_offset) = argv[optind];
    operand_given = 1;
  } else if (u->operand == DNT_OPERAND_OR_TARGET && optind < argc) {
    dnt_error("%s", u->many_operands);
    return DNT_EXIT_USAGE;
  } else if (u->operand == DNT_OPERAND_ONE) {
    if (u->verb && optind + 2 == argc && strcasecmp(argv[optind + 1], u->verb) == 0) {
      *(int *)((char *)opts + u->verb_offset) = 1;
      argc--;
    }
    if (optind + 1 != argc) {
      dnt_error("%s", optind == argc ? u->no_operand : u->many_operands);
      return DNT_EXIT_USAGE;
    }
    *(const char **)((char *)opts + u->operand_offset) = argv[optind];
  } else if (optind < argc) {
    dnt_error(f.child ? "unexpected argument '%s' (a command to start goes after '--')" : "unexpected argument '%s'",
              argv[optind]);
    return DNT_EXIT_USAGE;
  }
  if (operand_given) { /* a FILE: then no process */
    const struct dnt_session_target *t = (const struct dnt_session_target *)((char *)opts + f.target_offset);
    if (f.target && (t->pid > 0 || t->name || t->port || t->child_argv)) {
      dnt_error("%s", u->many_operands);
      return DNT_EXIT_USAGE;
    }
    return 0;
  }
  if (u->operand == DNT_OPERAND_OR_TARGET && f.target) {
    const struct dnt_session_target *t = (const struct dnt_session_target *)((char *)opts + f.target_offset);
    if (!(t->pid > 0 || t->name || t->port || t->child_argv)) {
      dnt_error("%s", u->no_operand);
      return DNT_EXIT_USAGE;
    }
  }
  if (f.target &&
      dnt_options_check_target(f.target, (const struct dnt_session_target *)((char *)opts + f.target_offset)) < 0)
    return DNT_EXIT_USAGE;
  return 0;
}
