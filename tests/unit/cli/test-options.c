/* The option tables of src/options.c: a table of each kind of row parsed into a struct, groups
 * at an offset, operands and the command after "--", the one list of formats with its alias,
 * and the help text laid out from the table. Expected values are typed in from the rows. */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "builtin.h"
#include "options.h"

struct toy {
  int flag, format, on;
  const char *out;
  struct dnt_strlist items;
  long top;
  uint64_t duration_ms;
  struct dnt_session_target target;
  const char *file;
};

static int parse_even(void *field, const char *arg) {
  int v = atoi(arg);
  if (v % 2) return -1;
  *(int *)field = v;
  return 0;
}

#define O(f) offsetof(struct toy, f)
static const struct dnt_option toy_options[] = {
    DNT_OPT_GROUP(dnt_options_target_any, O(target)),
    DNT_OPT_FLAG('f', "flag", O(flag), "a flag"),
    DNT_OPT_OUTPUT("FILE", O(out), "where\nand more"),
    DNT_OPT_LIST(0, "item", "X", O(items), "repeatable"),
    DNT_OPT_TOP(O(top), 50, "how many"),
    DNT_OPT_GROUP(dnt_options_duration, O(duration_ms)),
    DNT_OPT_FORMAT("FMT", O(format), DNT_FORMATS_PROFILE, "a conversion"),
    DNT_OPT_BOOL("on", "BOOL", O(on), "true or false"),
    DNT_OPT_PARSE(0, "even", "N", O(flag), parse_even, NULL), /* hidden */
    DNT_OPT_END(),
};
static const struct dnt_usage toy_usage = {.synopsis = "toy", .summary = "A toy", .options = toy_options};

static const struct dnt_option file_options[] = {DNT_OPT_FLAG(0, "flag", O(flag), "a flag"), DNT_OPT_END()};
static const struct dnt_usage file_usage = {.synopsis = "toy FILE", .summary = "A toy with a file",
                                            .options = file_options, .operand = 1, .operand_offset = O(file),
                                            .no_operand = "name a file", .many_operands = "one file"};
/* a trace FILE, or a process (the analyses' shape) */
static const struct dnt_option file_or_any_options[] = {DNT_OPT_GROUP(dnt_options_target_any, O(target)),
                                                        DNT_OPT_FLAG('f', "flag", O(flag), "a flag"), DNT_OPT_END()};
static const struct dnt_usage file_or_any_usage = {
    .synopsis = "toy (FILE | -p PID | -- CMD)", .summary = "A toy with a file or a process", .options = file_or_any_options,
    .operand = DNT_OPERAND_OR_TARGET, .operand_offset = O(file), .no_operand = "name a file or a process",
    .many_operands = "one file, or one process"};
#undef O

static int parse(const struct dnt_usage *u, struct toy *t, char **argv) {
  int argc = 0;
  while (argv[argc]) argc++;
  memset(t, 0, sizeof *t);
  t->on = 1;
  return dnt_options_parse(u, "toy", argc, argv, t);
}

Test(options, every_kind_of_row) {
  struct toy t;
  char *argv[] = {"toy", "-p", "42", "-f", "--output", "x.out", "--item", "a", "--item", "b", "--top", "7",
                  "--duration", "00:01:30", "--format", "SVG", "--on", "off", NULL};
  cr_assert_eq(parse(&toy_usage, &t, argv), 0);
  cr_expect_eq(t.target.pid, 42);
  cr_expect_null(t.target.name);
  cr_expect_eq(t.flag, 1);
  cr_expect_str_eq(t.out, "x.out");
  cr_assert_eq(t.items.n, 2);
  cr_expect_str_eq(t.items.v[0], "a");
  cr_expect_str_eq(t.items.v[1], "b");
  cr_expect_eq(t.top, 7);
  cr_expect_eq(t.duration_ms, 90000u, "00:01:30 is a minute and a half: %llu", (unsigned long long)t.duration_ms);
  cr_expect_eq(t.format, DNT_FORMAT_FLAMEGRAPH, "svg is flamegraph's alias, in any case");
  cr_expect_eq(t.on, 0);
  free(t.items.v);
}

/* A value given twice is a usage error naming both (issue 28 item 6: `collect -p 337 -p 3899`
 * traced 3899), as dotnet-trace refuses it; a list and a flag may come again. */
Test(options, a_single_value_given_twice_is_refused, .init = cr_redirect_stderr) {
  struct toy t;
  char *cases[][8] = {
      {"toy", "-p", "337", "-p", "3899", NULL},
      {"toy", "-p", "1", "--format", "pprof", "--format", "folded"},
      {"toy", "-p", "1", "-o", "a", "--output", "b"}, /* one option, two spellings */
      {"toy", "-p", "1", "--top", "3", "--top", "3"}, /* even the same value: said once */
      {"toy", "-p", "1", "--on", "true", "--on", "false"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    cr_expect_eq(parse(&toy_usage, &t, cases[i]), DNT_EXIT_USAGE, "case %zu", i);
  char *again[] = {"toy", "-p", "1", "-f", "--flag", "--item", "a", "--item", "b", NULL};
  cr_assert_eq(parse(&toy_usage, &t, again), 0);
  cr_expect_eq(t.items.n, 2);
  free(t.items.v);
  fflush(stderr);
  cr_expect_stderr_eq_str("dntrace: error: -p given twice ('337', then '3899'): give it once\n"
                          "see 'dntrace toy --help'\n"
                          "dntrace: error: --format given twice ('pprof', then 'folded'): give it once\n"
                          "see 'dntrace toy --help'\n"
                          "dntrace: error: -o given twice ('a', then 'b'): give it once\n"
                          "see 'dntrace toy --help'\n"
                          "dntrace: error: --top given twice ('3', then '3'): give it once\n"
                          "see 'dntrace toy --help'\n"
                          "dntrace: error: --on given twice ('true', then 'false'): give it once\n"
                          "see 'dntrace toy --help'\n");
}

/* dotnet-trace's grammar, as users paste its commands (issue 28 item 11): `--name:value`, a bare
 * boolean (true) or one with its value as the next word, `--duration hh:mm` (.NET's TimeSpan),
 * `--dport`, and `-?` for help. */
Test(options, dotnet_trace_spellings, .init = cr_redirect_stdout) {
  struct toy t;
  char a0[] = "toy", a1[] = "-p", a2[] = "1", a3[] = "--format:SVG", a4[] = "--duration:1:30", a5[] = "--on", a6[] = "-f";
  char *colon[] = {a0, a1, a2, a3, a4, a5, a6, NULL};
  cr_assert_eq(parse(&toy_usage, &t, colon), 0);
  cr_expect_eq(t.format, DNT_FORMAT_FLAMEGRAPH);
  cr_expect_eq(t.duration_ms, 5400000u, "1:30 is an hour and a half: %llu", (unsigned long long)t.duration_ms);
  cr_expect_eq(t.on, 1, "a bare boolean is true");
  cr_expect_eq(t.flag, 1);
  char *next_word[] = {"toy", "-p", "1", "--on", "false", NULL};
  cr_assert_eq(parse(&toy_usage, &t, next_word), 0);
  cr_expect_eq(t.on, 0, "its value as the next word");
  char *not_a_bool[] = {"toy", "-p", "1", "--on", "stray", NULL}; /* true, and an operand this toy refuses */
  cr_expect_eq(parse(&toy_usage, &t, not_a_bool), DNT_EXIT_USAGE);
  char *dport[] = {"toy", "--dport", "/tmp/sock", NULL};
  cr_assert_eq(parse(&toy_usage, &t, dport), 0);
  cr_expect_str_eq(t.target.port, "/tmp/sock");
  char *help[] = {"toy", "-p", "1", "-?", NULL};
  cr_expect_eq(parse(&toy_usage, &t, help), DNT_OPTIONS_DONE);
  fflush(stdout);
  cr_expect_stdout_eq_str(
      "usage: toy\n\nA toy\n\n"
      "    -p, --process-id PID     the process, by pid as seen from here\n"
      "    -n, --name NAME          the process, by name (an error if several match)\n"
      "    --diagnostic-port PATH   a runtime's socket (PATH[,connect]), or PATH,listen to wait for\n"
      "                             a runtime started with DOTNET_DiagnosticPorts=PATH\n"
      "    -- CMD [ARGS...]         start CMD suspended, watch it from its first instruction, and exit\n"
      "                             with its exit code\n"
      "    -f, --flag               a flag\n"
      "    -o, --output FILE        where\n"
      "                             and more\n"
      "    --no-clobber             refuse to overwrite an existing file (by default it is overwritten,\n"
      "                             and said so)\n"
      "    --item X                 repeatable\n"
      "    --top N                  how many\n"
      "    --duration TIME          stop after dd:hh:mm:ss, or a number with s, m or h (30s, 5m)\n"
      "    --format FMT             a conversion\n"
      "    --on BOOL                true or false\n"
      "    -h, --help               show this help\n");
}

Test(options, a_hidden_row_parses_and_a_parse_row_can_refuse) {
  struct toy t;
  char *ok[] = {"toy", "-n", "app", "--even", "8", NULL};
  cr_assert_eq(parse(&toy_usage, &t, ok), 0);
  cr_expect_eq(t.flag, 8);
  cr_expect_str_eq(t.target.name, "app");
  char *odd[] = {"toy", "-n", "app", "--even", "7", NULL};
  cr_expect_eq(parse(&toy_usage, &t, odd), DNT_EXIT_USAGE);
}

Test(options, bad_values_are_usage_errors) {
  struct toy t;
  char *cases[][6] = {
      {"toy", "-p", "x42", NULL},
      {"toy", "-p", "1", "--top", "51", NULL}, /* more than the row's max */
      {"toy", "-p", "1", "--top", "0", NULL},
      {"toy", "-p", "1", "--duration", "soon", NULL},
      {"toy", "-p", "1", "--format", "csv", NULL}, /* a format, but not one this row takes */
      {"toy", "-p", "1", "--on", "maybe", NULL},
      {"toy", "-p", "1", "--bogus", NULL},
      {"toy", "-p", "1", "-o", NULL},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    cr_expect_eq(parse(&toy_usage, &t, cases[i]), DNT_EXIT_USAGE, "case %zu (%s %s)", i, cases[i][3], cases[i][4]);
}

Test(options, exactly_one_target) {
  struct toy t;
  char *none[] = {"toy", "-f", NULL};
  cr_expect_eq(parse(&toy_usage, &t, none), DNT_EXIT_USAGE);
  char *two[] = {"toy", "-p", "1", "--diagnostic-port", "/s", NULL};
  cr_expect_eq(parse(&toy_usage, &t, two), DNT_EXIT_USAGE);
  char *alias[] = {"toy", "--dport", "/s", NULL};
  cr_assert_eq(parse(&toy_usage, &t, alias), 0);
  cr_expect_str_eq(t.target.port, "/s");
}

Test(options, the_command_after_double_dash) {
  struct toy t;
  char *argv[] = {"toy", "-f", "--", "prog", "--flag", "-p", NULL};
  cr_assert_eq(parse(&toy_usage, &t, argv), 0);
  cr_assert_not_null(t.target.child_argv);
  cr_expect_str_eq(t.target.child_argv[0], "prog");
  cr_expect_str_eq(t.target.child_argv[1], "--flag", "what follows -- is the command's own");
  cr_expect_str_eq(t.target.child_argv[2], "-p");
  cr_expect_null(t.target.child_argv[3]);
  cr_expect_eq(t.target.pid, 0);
  char *stray[] = {"toy", "-p", "1", "prog", NULL};
  cr_expect_eq(parse(&toy_usage, &t, stray), DNT_EXIT_USAGE, "a command to start goes after --");
  /* getopt moves "stray" behind "--": it must not become the command */
  char *before[] = {"toy", "stray", "-f", "--", "prog", NULL};
  cr_expect_eq(parse(&toy_usage, &t, before), DNT_EXIT_USAGE, "an operand before --");
  char dd1[] = "--", dd2[] = "--"; /* two strings, as in a real argv (a compiler may merge literals) */
  char *inner[] = {"toy", dd1, "dotnet", "run", dd2, "x", NULL};
  cr_assert_eq(parse(&toy_usage, &t, inner), 0);
  cr_assert_not_null(t.target.child_argv);
  cr_expect_str_eq(t.target.child_argv[0], "dotnet");
  cr_expect_str_eq(t.target.child_argv[2], "--", "a -- inside the command is the command's");
  cr_expect_str_eq(t.target.child_argv[3], "x");
  cr_expect_null(t.target.child_argv[4]);
}

Test(options, a_file_or_a_command) {
  struct toy t;
  char *file[] = {"toy", "t.nettrace", "-f", NULL};
  cr_assert_eq(parse(&file_or_any_usage, &t, file), 0);
  cr_expect_str_eq(t.file, "t.nettrace");
  cr_expect_null(t.target.child_argv);
  char *cmd[] = {"toy", "-f", "--", "prog", "a", NULL};
  cr_assert_eq(parse(&file_or_any_usage, &t, cmd), 0);
  cr_expect_null(t.file);
  cr_assert_not_null(t.target.child_argv);
  cr_expect_str_eq(t.target.child_argv[0], "prog");
  cr_expect_str_eq(t.target.child_argv[1], "a");
  cr_expect_null(t.target.child_argv[2]);
  char *both[] = {"toy", "t.nettrace", "--", "prog", NULL};
  cr_expect_eq(parse(&file_or_any_usage, &t, both), DNT_EXIT_USAGE, "a file and a command");
  char *neither[] = {"toy", "-f", "--", NULL};
  cr_expect_eq(parse(&file_or_any_usage, &t, neither), DNT_EXIT_USAGE, "nothing after --");
}

Test(options, one_operand) {
  struct toy t;
  char *one[] = {"toy", "--flag", "trace.nettrace", NULL};
  cr_assert_eq(parse(&file_usage, &t, one), 0);
  cr_expect_str_eq(t.file, "trace.nettrace");
  cr_expect_eq(t.flag, 1);
  char *none[] = {"toy", "--flag", NULL};
  cr_expect_eq(parse(&file_usage, &t, none), DNT_EXIT_USAGE);
  char *two[] = {"toy", "a", "b", NULL};
  cr_expect_eq(parse(&file_usage, &t, two), DNT_EXIT_USAGE);
}

Test(options, help_is_done, .init = cr_redirect_stdout) {
  struct toy t;
  char *argv[] = {"toy", "-p", "1", "--help", "--bogus", NULL};
  cr_expect_eq(parse(&toy_usage, &t, argv), DNT_OPTIONS_DONE, "--help stops the parse, exit 0");
}

Test(options, formats_and_aliases) {
  cr_expect_eq(dnt_format_find("flamegraph", DNT_FORMATS_PROFILE), DNT_FORMAT_FLAMEGRAPH);
  cr_expect_eq(dnt_format_find("svg", DNT_FORMATS_PROFILE), DNT_FORMAT_FLAMEGRAPH);
  cr_expect_eq(dnt_format_find("Speedscope", DNT_FORMATS_PROFILE), DNT_FORMAT_SPEEDSCOPE);
  cr_expect_eq(dnt_format_find("nettrace", DNT_FORMATS_PROFILE), DNT_FORMAT_NONE);
  cr_expect_eq(dnt_format_find("nettrace", DNT_FORMAT_BIT(DNT_FORMAT_NETTRACE) | DNT_FORMATS_PROFILE),
               DNT_FORMAT_NETTRACE);
  cr_expect_eq(dnt_format_find("json", DNT_FORMATS_PROFILE), DNT_FORMAT_NONE);
  cr_expect_eq(dnt_format_find("json", DNT_FORMATS_COUNTERS), DNT_FORMAT_JSON);
  cr_expect_eq(dnt_format_find("svgz", DNT_FORMATS_PROFILE), DNT_FORMAT_NONE);
  cr_expect_str_eq(dnt_format_name(DNT_FORMAT_FLAMEGRAPH), "flamegraph");
  cr_expect_null(dnt_format_name(DNT_FORMAT_NONE));
}

Test(options, help_laid_out_from_the_table) {
  char *text = NULL;
  size_t len = 0;
  FILE *fp = open_memstream(&text, &len);
  cr_assert_not_null(fp);
  dnt_options_usage(fp, &file_usage);
  fclose(fp);
  cr_expect_str_eq(text, "usage: toy FILE\n"
                         "\n"
                         "A toy with a file\n"
                         "\n"
                         "    --flag       a flag\n"
                         "    -h, --help   show this help\n");
  free(text);
  fp = open_memstream(&text, &len);
  dnt_options_usage(fp, &toy_usage);
  fclose(fp);
  /* continuation lines start under the help column; hidden rows are not shown */
  cr_expect(strstr(text, "\n    -o, --output FILE        where\n                             and more\n"), "%s", text);
  cr_expect(!strstr(text, "--even") && !strstr(text, "--dport"), "%s", text);
  free(text);
}
