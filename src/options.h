/* Command-line options as tables, in the spirit of git's parse-options: one row per option
 * holds its names, the name of its value, its help text and where its value goes, so the
 * parser and the --help text cannot disagree. Options that several commands share (the target,
 * --duration, --format, -o, -n/--top) are written once here, as tables a command includes with
 * DNT_OPT_GROUP (the target, --duration) or as row macros whose help the command words
 * (DNT_OPT_FORMAT, DNT_OPT_OUTPUT with --no-clobber, DNT_OPT_TOP, DNT_OPT_RESUME); the command checks none of
 * their values itself, so a mistake in one has one error text in every command.
 *
 * A command's table fills the command's own option struct: each row names a field by its
 * offset (offsetof), a group's rows are relative to the group row's offset. The struct is the
 * caller's, initialised with its defaults before dnt_options_parse; the strings stored in it
 * are argv's own. */
#ifndef DNT_OPTIONS_H
#define DNT_OPTIONS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "session.h"

enum dnt_opt_kind {
  DNT_OPT_END = 0,
  DNT_OPT_FLAG,     /* no value: int field set to 1 */
  DNT_OPT_STRING,   /* const char * field (given once: a second is a usage error) */
  DNT_OPT_LIST,     /* struct dnt_strlist field, one more per use (free .v) */
  DNT_OPT_PID,      /* int field, a positive pid */
  DNT_OPT_COUNT,    /* long field, 1 .. max */
  DNT_OPT_DURATION, /* uint64_t field, milliseconds (dnt_parse_duration) */
  DNT_OPT_FORMAT,   /* int field, an enum dnt_format taken from those in the mask max */
  DNT_OPT_BOOL,     /* int field, true/false/1/0/on/off */
  DNT_OPT_PARSE,    /* parse(field, value): 0, or -1 with the error printed */
  DNT_OPT_ACTION,   /* no value: action() runs and the command exits 0 (--list-profiles) */
  DNT_OPT_CHILD,    /* the "-- CMD [ARGS...]" row: char ** field, the command after "--" */
  DNT_OPT_TEXT,     /* a help line only: argh on the left (a subcommand, an operand) */
  DNT_OPT_GROUP,    /* the rows of group, their offsets counted from this row's */
  DNT_OPT_NO_CLOBBER /* no value: dnt_output_set_no_clobber(1) (output.h), for every -o */
};

struct dnt_option {
  enum dnt_opt_kind kind;
  int short_name;          /* 0: none */
  const char *long_name;   /* NULL: none */
  const char *argh;        /* the value's name in the help; NULL: no value */
  const char *help;        /* lines separated by '\n'; NULL: hidden (an alias) */
  size_t offset;           /* of the field in the command's option struct */
  long max;                /* COUNT: the largest count; FORMAT: the formats taken (bit per format) */
  int (*parse)(void *field, const char *value);
  void (*action)(void);
  const struct dnt_option *group;
  int many; /* PARSE: each use adds to the field (--providers); other single values may come once */
};

/* A repeatable option's values, in order; v is the caller's to free (the strings are argv's). */
struct dnt_strlist {
  const char **v;
  size_t n;
};

#define DNT_OPT_FLAG(s, l, off, h) {.kind = DNT_OPT_FLAG, .short_name = (s), .long_name = (l), .help = (h), .offset = (off)}
#define DNT_OPT_STRING(s, l, arg, off, h) \
  {.kind = DNT_OPT_STRING, .short_name = (s), .long_name = (l), .argh = (arg), .help = (h), .offset = (off)}
#define DNT_OPT_LIST(s, l, arg, off, h) \
  {.kind = DNT_OPT_LIST, .short_name = (s), .long_name = (l), .argh = (arg), .help = (h), .offset = (off)}
#define DNT_OPT_COUNT(s, l, arg, off, most, h) \
  {.kind = DNT_OPT_COUNT, .short_name = (s), .long_name = (l), .argh = (arg), .help = (h), .offset = (off), .max = (most)}
#define DNT_OPT_BOOL(l, arg, off, h) {.kind = DNT_OPT_BOOL, .long_name = (l), .argh = (arg), .help = (h), .offset = (off)}
#define DNT_OPT_PARSE(s, l, arg, off, fn, h) \
  {.kind = DNT_OPT_PARSE, .short_name = (s), .long_name = (l), .argh = (arg), .help = (h), .offset = (off), .parse = (fn)}
/* The same for an option whose every use adds to its field (a list of providers). */
#define DNT_OPT_PARSE_MANY(s, l, arg, off, fn, h) \
  {.kind = DNT_OPT_PARSE, .short_name = (s), .long_name = (l), .argh = (arg), .help = (h), .offset = (off), \
   .parse = (fn), .many = 1}
#define DNT_OPT_ACTION(l, fn, h) {.kind = DNT_OPT_ACTION, .long_name = (l), .help = (h), .action = (fn)}
#define DNT_OPT_TEXT(left, h) {.kind = DNT_OPT_TEXT, .argh = (left), .help = (h)}
#define DNT_OPT_GROUP(g, off) {.kind = DNT_OPT_GROUP, .group = (g), .offset = (off)}
#define DNT_OPT_END() {.kind = DNT_OPT_END}

/* ---- the shared options ---- */

/* Every format a command can be asked for, in one list (with their aliases in options.c). */
enum dnt_format {
  DNT_FORMAT_NONE = 0, /* --format not given */
  DNT_FORMAT_NETTRACE,
  DNT_FORMAT_SPEEDSCOPE,
  DNT_FORMAT_CHROMIUM,
  DNT_FORMAT_FOLDED,
  DNT_FORMAT_FLAMEGRAPH, /* alias svg */
  DNT_FORMAT_CSV,
  DNT_FORMAT_JSON,
  DNT_FORMAT_PROMETHEUS,
  DNT_FORMAT_PPROF,
  DNT_FORMAT_TEXT, /* a table for people (gc) */
  DNT_FORMAT_GCDUMP /* a heap snapshot, as dotnet-gcdump writes it */
};
#define DNT_FORMAT_BIT(f) (1L << (f))
/* The conversions of a profile (convert, perf, compare, and collect beside its .nettrace). */
#define DNT_FORMATS_PROFILE \
  (DNT_FORMAT_BIT(DNT_FORMAT_FOLDED) | DNT_FORMAT_BIT(DNT_FORMAT_SPEEDSCOPE) | DNT_FORMAT_BIT(DNT_FORMAT_CHROMIUM) | \
   DNT_FORMAT_BIT(DNT_FORMAT_FLAMEGRAPH) | DNT_FORMAT_BIT(DNT_FORMAT_PPROF))
#define DNT_FORMATS_COUNTERS \
  (DNT_FORMAT_BIT(DNT_FORMAT_CSV) | DNT_FORMAT_BIT(DNT_FORMAT_JSON) | DNT_FORMAT_BIT(DNT_FORMAT_PROMETHEUS))

/* A format by name or alias, any case, among those in mask: the format, or DNT_FORMAT_NONE. */
enum dnt_format dnt_format_find(const char *name, long mask);
/* Its canonical name ("flamegraph" for svg); NULL for DNT_FORMAT_NONE. */
const char *dnt_format_name(enum dnt_format f);
/* Prints "--format: 'NAME' is not A, B or C" (the formats of mask); returns -1. */
int dnt_format_error(const char *name, long mask);

#define DNT_OPT_FORMAT(arg, off, mask, h) \
  {.kind = DNT_OPT_FORMAT, .long_name = "format", .argh = (arg), .help = (h), .offset = (off), .max = (mask)}
/* -o, and --no-clobber with it: two rows (output.h has the policy both follow). */
#define DNT_OPT_NO_CLOBBER() \
  {.kind = DNT_OPT_NO_CLOBBER, .long_name = "no-clobber", \
   .help = "refuse to overwrite an existing file (by default it is overwritten,\nand said so)"}
#define DNT_OPT_OUTPUT(arg, off, h) DNT_OPT_STRING('o', "output", arg, off, h), DNT_OPT_NO_CLOBBER()
#define DNT_OPT_TOP(off, most, h) DNT_OPT_COUNT(0, "top", "N", off, most, h)

/* --weight time|samples, in an int field: what a profile's outputs weigh, 0 for time (the
 * default: each sample the time until its thread's next, dnt-profile.h), 1 for plain sample
 * counts (enum dnt_profile_weight). help: the command's words. */
int dnt_options_parse_weight(void *field, const char *value);
#define DNT_OPT_WEIGHT(off, h) DNT_OPT_PARSE(0, "weight", "WEIGHT", off, dnt_options_parse_weight, h)

/* --duration, in a uint64_t field of milliseconds (0: not given). */
extern const struct dnt_option dnt_options_duration[];

/* The target groups fill a struct dnt_session_target (session.h); exactly one of the group's
 * options must be given, which the parser checks (dnt_options_check_target).
 *   dnt_options_target_pid: -p, -n
 *   dnt_options_target_port: -p, -n, --diagnostic-port PATH[,connect]
 *   dnt_options_target_any: -p, -n, --diagnostic-port PATH[,connect|,listen], -- CMD */
extern const struct dnt_option dnt_options_target_pid[];
extern const struct dnt_option dnt_options_target_port[];
extern const struct dnt_option dnt_options_target_any[];
/* --resume-runtime BOOL, which goes with dnt_options_target_any (int field; default 1 is the
 * caller's). */
#define DNT_OPT_RESUME(off) \
  DNT_OPT_BOOL("resume-runtime", "BOOL", off, "with -- or listen: resume the runtime once the session runs")

/* ---- a command ---- */

enum { DNT_OPERAND_NONE = 0, DNT_OPERAND_ONE = 1, DNT_OPERAND_OR_TARGET = 2 };

struct dnt_usage {
  const char *synopsis; /* the SYNOPSIS of the man page, word for word */
  const char *summary;  /* one line, for 'dntrace --help' */
  const struct dnt_option *options;
  int operand;          /* DNT_OPERAND_ONE: exactly one operand (a FILE), at operand_offset (const char *);
                           DNT_OPERAND_OR_TARGET: a FILE or the target group's options, not both
                           (info, gc: a trace or a process) */
  size_t operand_offset;
  const char *verb;     /* DNT_OPERAND_ONE: a word that may follow the operand (any case), as
                           another tool's grammar has it (report FILE topN); sets the int at
                           verb_offset to 1 */
  size_t verb_offset;
  const char *no_operand, *many_operands; /* the errors when it is missing, when there are more
                                            (DNT_OPERAND_OR_TARGET: when neither a FILE nor a
                                            target is given; when both are, or two FILEs) */
};

/* Prints the usage: "usage: SYNOPSIS", the summary, then one line per option (and -h, --help). */
void dnt_options_usage(FILE *fp, const struct dnt_usage *u);

#define DNT_OPTIONS_DONE (-1)
/* Parses argv (argv[0] the command's name) into opts as u says; cmd names the command in
 * errors ("counters collect"). Returns 0 when the command should run, DNT_OPTIONS_DONE when
 * --help or an action ran (exit 0), or DNT_EXIT_USAGE with one error line printed. */
int dnt_options_parse(const struct dnt_usage *u, const char *cmd, int argc, char **argv, void *opts);

/* Exactly one of the options of the target group (one of the three above) is in t: 0, or -1
 * with the error printed. dnt_options_parse calls it for a table that includes the group. */
int dnt_options_check_target(const struct dnt_option *group, const struct dnt_session_target *t);

#endif
