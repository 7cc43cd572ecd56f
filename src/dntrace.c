/* dntrace: the command table and the top-level options. Each subcommand lives in its own
 * src/cmd-<name>.c; see builtin.h for the checklist to add one. */
#include <errno.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "builtin.h"
#include "dnt-profile.h"
#include "options.h"
#include "util.h"
#include "dnt-trace.h"

static const struct dnt_cmd commands[] = {
    {"ps", cmd_ps, &usage_ps},
    {"info", cmd_info, &usage_info},
    {"collect", cmd_collect, &usage_collect},
    {"dump", cmd_dump, &usage_dump},
    {"report", cmd_report, &usage_report},
    {"convert", cmd_convert, &usage_convert},
    {"events", cmd_events, &usage_events},
    {"counters", cmd_counters, &usage_counters},
    {"perf", cmd_perf, &usage_perf},
    {"compare", cmd_compare, &usage_compare},
    {"stacks", cmd_stacks, &usage_stacks},
    {"gc", cmd_gc, &usage_gc},
    {"jit", cmd_jit, &usage_jit},
    {"threadpool", cmd_threadpool, &usage_threadpool},
    {"gcdump", cmd_gcdump, &usage_gcdump},
    {"allocs", cmd_allocs, &usage_allocs},
    {"exceptions", cmd_exceptions, &usage_exceptions},
    {"locks", cmd_locks, &usage_locks},
    {"waits", cmd_waits, &usage_waits},
    {"serve", cmd_serve, &usage_serve},
    {"watch", cmd_watch, &usage_watch},
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
  for (size_t i = 0; i < NCOMMANDS; i++)
    fprintf(fp, "  %-10s %s\n", commands[i].name, commands[i].usage->summary);
  fprintf(fp, "\n'dntrace <command> --help' shows a command's options; 'dntrace help <command>' its\n"
              "manual page on a terminal (also before the pages are installed).\n");
}

/* The manual page of command name, shown with man(1): from $DNT_MANDIR, else the installed one,
 * else the one in the source tree this binary was built from (so that 'dntrace help collect'
 * works right after ./bootstrap.sh, before any 'make install'). Returns only when no page or no
 * man could be found, for the caller to print the usage instead. */
static void show_man_page(const char *name) {
  const char *env = getenv("DNT_MANDIR");
  const char *dirs[] = {env && *env ? env : NULL, DNT_INSTALLED_MANDIR, DNT_SOURCE_MANDIR};
  for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
    char path[4096];
    if (!dirs[i]) continue;
    int n = snprintf(path, sizeof path, "%s/dntrace-%s.1", dirs[i], name);
    if (n < 0 || (size_t)n >= sizeof path || access(path, R_OK) != 0) continue;
    fflush(stdout);
    execlp("man", "man", "-l", path, (char *)NULL);
    return; /* no man(1) here: the usage text will do */
  }
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
  if (isatty(STDOUT_FILENO)) show_man_page(cmd->name); /* returns only when there is none to show */
  dnt_options_usage(stdout, cmd->usage);
  return dnt_finish_stdout();
}

/* DNT_TRACE_OPENS=FILE: how many times the command opened a trace, written to FILE. The tests
 * check with it that compare reads its trace once and that collect --format never reads back
 * the trace it wrote (docs/internals/architecture.md). */
static void note_trace_opens(void) {
  const char *path = getenv("DNT_TRACE_OPENS");
  if (!path || !*path) return;
  FILE *fp = fopen(path, "w");
  if (!fp) return;
  fprintf(fp, "%u\n", dnt_trace_opens());
  fclose(fp);
}

/* `dntrace __child PARENT PROGRAM ARGS...`: how dntrace starts perf record. The child gets
 * SIGINT when dntrace dies however it dies (SIGKILL included): perf then writes its file and
 * exits instead of recording forever under pid 1. PARENT closes the race where dntrace died
 * before the prctl. Not a command for users: not in the table. */
static int run_child(int argc, char **argv) {
  if (argc < 4) return DNT_EXIT_USAGE;
  if (prctl(PR_SET_PDEATHSIG, SIGINT) != 0 || getppid() != (pid_t)strtol(argv[2], NULL, 10)) return 1;
  execvp(argv[3], argv + 3);
  dnt_error("cannot start '%s': %s", argv[3], strerror(errno));
  return 127;
}

/* An unknown first word: an option that is not --help or --version, or a command that is not
 * one, with the nearest if it is a slip ("did you mean 'collect'?"). */
static int not_a_command(const char *name) {
  if (name[0] == '-') {
    static const char *const options[] = {"help", "version"};
    const char *near = dnt_nearest(name + (name[1] == '-' ? 2 : 1), options, 2);
    if (near)
      dnt_error("unknown option '%s'; did you mean '--%s'?", name, near);
    else
      dnt_error("unknown option '%s'; see 'dntrace --help'", name);
    return DNT_EXIT_USAGE;
  }
  const char *names[NCOMMANDS + 1];
  for (size_t i = 0; i < NCOMMANDS; i++) names[i] = commands[i].name;
  names[NCOMMANDS] = "list-profiles";
  const char *near = dnt_nearest(name, names, NCOMMANDS + 1);
  if (near)
    dnt_error("'%s' is not a dntrace command; did you mean '%s'?", name, near);
  else
    dnt_error("'%s' is not a dntrace command; see 'dntrace --help'", name);
  return DNT_EXIT_USAGE;
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
  if (strcmp(name, "list-profiles") == 0) { /* dotnet-trace's: `dotnet-trace list-profiles` */
    char *list[] = {"collect", "--list-profiles", NULL};
    int rc = cmd_collect(2, list);
    int out = dnt_finish_stdout();
    return rc ? rc : out;
  }
  if (strcmp(name, "__child") == 0) return run_child(argc, argv);

  const struct dnt_cmd *cmd = dnt_find_cmd(name);
  if (!cmd) return not_a_command(name);
  const char *images = getenv("DNT_IMAGE_NAMES"); /* 0: name frames from the trace alone, as TraceEvent */
  if (images && strcmp(images, "0") == 0) dnt_profile_image_names(0);
  /* the dotnet tools' own spellings: `dotnet-dump collect`, `dotnet-stack report`,
   * `dotnet-trace collect list-profiles` */
  if ((strcmp(name, "dump") == 0 && argc > 2 && strcmp(argv[2], "collect") == 0) ||
      (strcmp(name, "stacks") == 0 && argc > 2 && strcmp(argv[2], "report") == 0)) {
    argv[2] = argv[1];
    argc--;
    argv++;
  } else if (strcmp(name, "collect") == 0 && argc > 2 && strcmp(argv[2], "list-profiles") == 0) {
    argv[2] = "--list-profiles";
  }
  int rc = cmd->fn(argc - 1, argv + 1);
  note_trace_opens();
  int out = dnt_finish_stdout();
  return rc ? rc : out;
}
