/* The command line itself: help, version, usage errors, exit codes, and the man pages kept in
 * step with each command's --help (git's t0450 idea). No .NET runtime needed here. */
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "lib/run.h"

static const char *commands[] = {"ps", "info", "collect", "dump", "report", "convert", "events", "counters", "perf", "compare"};

/* The SYNOPSIS of a man page, with the roff escapes taken out. */
static char *man_synopsis(const char *cmd) {
  const char *src = getenv("DNT_SRCDIR");
  char path[4096];
  snprintf(path, sizeof path, "%s/man/dntrace-%s.1", src ? src : ".", cmd);
  FILE *fp = fopen(path, "r");
  cr_assert(fp, "cannot open %s", path);
  char line[1024];
  int in_synopsis = 0;
  char *result = NULL;
  while (fgets(line, sizeof line, fp)) {
    if (strncmp(line, ".SH", 3) == 0) in_synopsis = strstr(line, "SYNOPSIS") != NULL;
    if (!in_synopsis || line[0] == '.') continue;
    line[strcspn(line, "\n")] = '\0';
    char clean[1024];
    size_t n = 0;
    for (const char *p = line; *p && n + 1 < sizeof clean; p++) {
      if (p[0] == '\\' && p[1] == 'f' && p[2]) {
        p += 2;
        continue;
      }
      if (p[0] == '\\' && p[1] == '-') {
        clean[n++] = '-';
        p++;
        continue;
      }
      clean[n++] = *p;
    }
    clean[n] = '\0';
    result = strdup(clean);
    break;
  }
  fclose(fp);
  cr_assert(result, "%s has no SYNOPSIS line", path);
  return result;
}

Test(cli, synopsis_matches_man_page) {
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
    struct dnt_run r;
    cr_assert_eq(dnt_run_dntrace(&r, commands[i], "--help", NULL), 0, "%s --help: %s", commands[i], r.err);
    char *syn = man_synopsis(commands[i]);
    char first[1024];
    snprintf(first, sizeof first, "usage: %s\n", syn);
    cr_assert(strncmp(r.out, first, strlen(first)) == 0, "'dntrace %s --help' starts with\n%s\nbut the man page says\n%s",
              commands[i], r.out, first);
    free(syn);
    dnt_run_free(&r);
  }
}

Test(cli, help_command_equals_dash_h) {
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
    struct dnt_run a, b;
    cr_assert_eq(dnt_run_dntrace(&a, "help", commands[i], NULL), 0);
    cr_assert_eq(dnt_run_dntrace(&b, commands[i], "-h", NULL), 0);
    cr_assert_str_eq(a.out, b.out);
    cr_assert(strstr(a.out, "--help"), "the option list of %s mentions --help", commands[i]);
    dnt_run_free(&a);
    dnt_run_free(&b);
  }
}

Test(cli, main_help_lists_every_command) {
  struct dnt_run r;
  cr_assert_eq(dnt_run_dntrace(&r, "--help", NULL), 0);
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
    char needle[64];
    snprintf(needle, sizeof needle, "  %s ", commands[i]);
    cr_assert(strstr(r.out, needle), "--help lists '%s':\n%s", commands[i], r.out);
  }
  dnt_run_free(&r);
}

Test(cli, version) {
  struct dnt_run r;
  cr_assert_eq(dnt_run_dntrace(&r, "--version", NULL), 0);
  cr_assert_str_eq(r.out, "dntrace " PACKAGE_VERSION "\n");
  dnt_run_free(&r);
}

Test(cli, no_arguments_is_a_usage_error) {
  struct dnt_run r;
  cr_assert_eq(dnt_run_dntrace(&r, NULL), 2);
  cr_assert(strstr(r.err, "usage: dntrace"));
  dnt_run_free(&r);
}

Test(cli, unknown_command) {
  struct dnt_run r;
  cr_assert_eq(dnt_run_dntrace(&r, "frobnicate", NULL), 2);
  cr_assert(strstr(r.err, "'frobnicate' is not a dntrace command"), "%s", r.err);
  cr_assert_str_eq(r.out, "");
  dnt_run_free(&r);
  cr_assert_eq(dnt_run_dntrace(&r, "help", "frobnicate", NULL), 2);
  dnt_run_free(&r);
}

Test(cli, unknown_option_and_missing_value) {
  struct dnt_run r;
  cr_assert_eq(dnt_run_dntrace(&r, "ps", "--bogus", NULL), 2);
  cr_assert(strstr(r.err, "unknown option '--bogus'"), "%s", r.err);
  dnt_run_free(&r);
  cr_assert_eq(dnt_run_dntrace(&r, "info", "-p", NULL), 2);
  cr_assert(strstr(r.err, "needs a value"), "%s", r.err);
  dnt_run_free(&r);
}

Test(cli, info_needs_exactly_one_target) {
  struct dnt_run r;
  cr_assert_eq(dnt_run_dntrace(&r, "info", NULL), 2);
  cr_assert(strstr(r.err, "-p") && strstr(r.err, "-n"), "%s", r.err);
  dnt_run_free(&r);
  cr_assert_eq(dnt_run_dntrace(&r, "info", "-p", "1", "-n", "x", NULL), 2);
  dnt_run_free(&r);
  cr_assert_eq(dnt_run_dntrace(&r, "info", "-p", "12abc", NULL), 2);
  cr_assert(strstr(r.err, "'12abc'"), "%s", r.err);
  dnt_run_free(&r);
}

Test(cli, info_on_a_missing_pid) {
  /* the highest pids are rarely in use; find one that is not */
  int pid = 4194000;
  while (kill(pid, 0) == 0 || errno != ESRCH) pid--;
  char arg[16];
  snprintf(arg, sizeof arg, "%d", pid);
  struct dnt_run r;
  cr_assert_eq(dnt_run_dntrace(&r, "info", "-p", arg, NULL), 3);
  char want[64];
  snprintf(want, sizeof want, "no such process: %d", pid);
  cr_assert(strstr(r.err, want), "%s", r.err);
  cr_assert_eq(strchr(r.err, '\n'), r.err + strlen(r.err) - 1, "one line: %s", r.err);
  dnt_run_free(&r);
}

Test(cli, info_on_a_process_that_is_not_dotnet) {
  char arg[16];
  snprintf(arg, sizeof arg, "%d", (int)getpid());
  struct dnt_run r;
  cr_assert_eq(dnt_run_dntrace(&r, "info", "-p", arg, NULL), 3);
  cr_assert(strstr(r.err, "is not a .NET process"), "%s", r.err);
  dnt_run_free(&r);
}

Test(cli, info_by_unknown_name) {
  struct dnt_run r;
  cr_assert_eq(dnt_run_dntrace(&r, "info", "-n", "no-such-dotnet-app-xyz", NULL), 3);
  cr_assert(strstr(r.err, "no .NET process named 'no-such-dotnet-app-xyz'"), "%s", r.err);
  dnt_run_free(&r);
}

Test(cli, ps_output_to_a_full_disk_fails_loudly) {
  char *argv[] = {"/bin/sh", "-c", "exec \"$DNT_BIN\" ps > /dev/full", NULL};
  struct dnt_run r;
  cr_assert_eq(dnt_run_argv(&r, argv, NULL, 20000), 1, "stderr: %s", r.err);
  cr_assert(strstr(r.err, "cannot write to standard output"), "%s", r.err);
  dnt_run_free(&r);
}
