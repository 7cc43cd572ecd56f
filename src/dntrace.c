/* dntrace: the command table and the top-level options. Each subcommand lives in its own
 * src/cmd-<name>.c; see builtin.h for the checklist to add one. */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "builtin.h"
#include "util.h"

static const struct dnt_cmd commands[] = {
    {"ps", cmd_ps, usage_ps},
    {"info", cmd_info, usage_info},
    {"collect", cmd_collect, usage_collect},
    {"dump", cmd_dump, usage_dump},
    {"report", cmd_report, usage_report},
    {"convert", cmd_convert, usage_convert},
    {"events", cmd_events, usage_events},
    {"counters", cmd_counters, usage_counters},
    {"perf", cmd_perf, usage_perf},
    {"compare", cmd_compare, usage_compare},
};

#define NCOMMANDS (sizeof commands / sizeof commands[0])

const struct dnt_cmd *dnt_find_cmd(const char *name) {
  for (size_t i = 0; i < NCOMMANDS; i++)
    if (strcmp(commands[i].name, name) == 0) return &commands[i];
  return NULL;
}

static void print_main_usage(FILE *fp) {
  fprintf(fp, "usage: dntrace [--version] [--help] <command> [<args>]\n"
              "\n"
              "A native diagnostics client for .NET processes on Linux.\n"
              "\n"
              "Commands:\n");
  for (size_t i = 0; i < NCOMMANDS; i++) fprintf(fp, "  %-10s %s\n", commands[i].name, commands[i].usage[1]);
  fprintf(fp, "\n'dntrace help <command>' or 'dntrace <command> --help' shows a command's options;\n"
              "'man dntrace-<command>' has the details.\n");
}

static int help(int argc, char **argv) {
  if (argc < 2) {
    print_main_usage(stdout);
    return dnt_finish_stdout();
  }
  const struct dnt_cmd *cmd = dnt_find_cmd(argv[1]);
  if (!cmd) {
    dnt_error("'%s' is not a dntrace command; see 'dntrace --help'", argv[1]);
    return DNT_EXIT_USAGE;
  }
  dnt_print_usage(stdout, cmd->usage);
  return dnt_finish_stdout();
}

int main(int argc, char **argv) {
  /* A closed pipe must surface as a write error we can report, not kill us mid-trace. */
  signal(SIGPIPE, SIG_IGN);

  if (argc < 2) {
    print_main_usage(stderr);
    return DNT_EXIT_USAGE;
  }
  const char *name = argv[1];
  if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0) return help(1, argv);
  if (strcmp(name, "--version") == 0 || strcmp(name, "-V") == 0) {
    printf("dntrace %s\n", PACKAGE_VERSION);
    return dnt_finish_stdout();
  }
  if (strcmp(name, "help") == 0) return help(argc - 1, argv + 1);

  const struct dnt_cmd *cmd = dnt_find_cmd(name);
  if (!cmd) {
    dnt_error("'%s' is not a dntrace command; see 'dntrace --help'", name);
    return DNT_EXIT_USAGE;
  }
  int rc = cmd->fn(argc - 1, argv + 1);
  int out = dnt_finish_stdout();
  return rc ? rc : out;
}
