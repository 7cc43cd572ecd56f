/* The command line itself: help, version, usage errors, exit codes, and the man pages kept in
 * step with each command's --help (git's t0450 idea). No .NET runtime needed here. */
#include <criterion/criterion.h>
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config.h"
#include "../lib/run.h"

static const char *commands[] = {"ps", "info", "collect", "dump", "report", "convert", "events", "counters", "perf", "compare", "stacks", "gc",
                                  "jit", "threadpool", "allocs", "exceptions", "locks"};

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

/* The dotnet tools' habits: slips get the nearest name, their own spellings are taken. */
Test(cli, did_you_mean_and_the_dotnet_tools_spellings) {
  struct dnt_run r;
  cr_expect_eq(dnt_run_dntrace(&r, "colect", NULL), 2);
  cr_expect(strstr(r.err, "'colect' is not a dntrace command; did you mean 'collect'?"), "%s", r.err);
  dnt_run_free(&r);
  cr_expect_eq(dnt_run_dntrace(&r, "conuters", NULL), 2);
  cr_expect(strstr(r.err, "did you mean 'counters'?"), "a swap of two letters: %s", r.err);
  dnt_run_free(&r);
  cr_expect_eq(dnt_run_dntrace(&r, "--verison", NULL), 2);
  cr_expect(strstr(r.err, "unknown option '--verison'; did you mean '--version'?"), "%s", r.err);
  cr_expect(!strstr(r.err, "not a dntrace command"), "an option is not called a command: %s", r.err);
  dnt_run_free(&r);
  cr_expect_eq(dnt_run_dntrace(&r, "collect", "-p", "1", "--duraton", "5s", NULL), 2);
  cr_expect(strstr(r.err, "unknown option '--duraton'; did you mean '--duration'?"), "%s", r.err);
  dnt_run_free(&r);
  cr_expect_eq(dnt_run_dntrace(&r, "report", "x.nettrace", "--xyzzy", NULL), 2);
  cr_expect(strstr(r.err, "unknown option '--xyzzy'") && !strstr(r.err, "did you mean"), "nothing near: %s", r.err);
  dnt_run_free(&r);
  /* dotnet-trace list-profiles, dotnet-trace collect list-profiles: the same list as --list-profiles */
  struct dnt_run want;
  cr_assert_eq(dnt_run_dntrace(&want, "collect", "--list-profiles", NULL), 0);
  cr_expect(strstr(want.out, "dotnet-common"), "%s", want.out);
  cr_expect_eq(dnt_run_dntrace(&r, "list-profiles", NULL), 0, "%s", r.err);
  cr_expect_str_eq(r.out, want.out);
  dnt_run_free(&r);
  cr_expect_eq(dnt_run_dntrace(&r, "collect", "list-profiles", NULL), 0, "%s", r.err);
  cr_expect_str_eq(r.out, want.out);
  dnt_run_free(&r);
  dnt_run_free(&want);
  /* dotnet-dump collect: the word is taken, the rest is dump's (no such process: exit 3, not 2) */
  cr_expect_eq(dnt_run_dntrace(&r, "dump", "collect", "-p", "999999999", NULL), 3, "%s", r.err);
  cr_expect(!strstr(r.err, "collect"), "'collect' is not taken for an argument: %s", r.err);
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
  /* collect's refusal is its error alone: no providers table, no "No providers were given" first */
  cr_assert_eq(dnt_run_dntrace(&r, "collect", "-p", arg, NULL), 3);
  cr_assert(strstr(r.err, want), "%s", r.err);
  cr_assert_str_eq(r.out, "", "nothing before the error");
  dnt_run_free(&r);
  /* a stopping event of a provider the session does not enable: said at once (issue 28 item 27) */
  cr_assert_eq(dnt_run_dntrace(&r, "collect", "-p", arg, "--stopping-event-provider-name", "Nope", NULL), 3);
  cr_assert(strstr(r.err, "warning: --stopping-event-provider-name: 'Nope' is not among the providers enabled"), "%s",
            r.err);
  dnt_run_free(&r);
  cr_assert_eq(dnt_run_dntrace(&r, "collect", "-p", arg, "--stopping-event-provider-name",
                               "Microsoft-Windows-DotNETRuntime", NULL),
               3);
  cr_assert(!strstr(r.err, "warning"), "an enabled provider (the default profiles'): no warning: %s", r.err);
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

/* A child that has exited but is not reaped yet: it is gone, not "not .NET". */
Test(cli, info_on_a_zombie_says_it_exited) {
  pid_t child = fork();
  cr_assert_geq(child, 0);
  if (child == 0) _exit(0);
  /* waits until it has exited, without reaping it (WNOWAIT): a zombie from then on, however long
   * the machine takes to run it */
  siginfo_t si;
  memset(&si, 0, sizeof si);
  int w;
  while ((w = waitid(P_PID, (id_t)child, &si, WEXITED | WNOWAIT)) != 0 && errno == EINTR) {}
  cr_assert_eq(w, 0, "waitid: %s", strerror(errno));
  cr_assert_eq(si.si_pid, child);
  char path[64], state[256] = "";
  snprintf(path, sizeof path, "/proc/%d/stat", (int)child);
  FILE *fp = fopen(path, "r");
  cr_assert(fp, "%s", path);
  if (!fgets(state, sizeof state, fp)) state[0] = '\0';
  fclose(fp);
  cr_assert(strstr(state, ") Z "), "the kernel says the child is a zombie: %s", state);
  char arg[16];
  snprintf(arg, sizeof arg, "%d", (int)child);
  struct dnt_run r;
  int rc = dnt_run_dntrace(&r, "info", "-p", arg, NULL);
  waitpid(child, NULL, 0);
  cr_assert_eq(rc, 3, "%s", r.err);
  char want[96];
  snprintf(want, sizeof want, "process %d (", (int)child);
  cr_assert(strstr(r.err, want) && strstr(r.err, "has exited") && strstr(r.err, "zombie"), "%s", r.err);
  cr_assert_not(strstr(r.err, "not a .NET process"), "%s", r.err);
  cr_assert_eq(strchr(r.err, '\n'), r.err + strlen(r.err) - 1, "one line: %s", r.err);
  dnt_run_free(&r);
}

/* Root that is refused (here: without capabilities, against another user's process in another
 * mount namespace, as against pid 1 from inside some containers) is not told to run as root. */
Test(cli, root_refused_is_not_told_to_run_as_root) {
  if (geteuid() != 0) {
    const char *ci = getenv("CI");
    if (ci && !strcmp(ci, "true")) cr_assert_fail("needs root, and CI=true");
    cr_skip_test("needs root");
  }
  /* in its own mount namespace, as uid 65534 */
  int child = dnt_spawn_sleeper_as(65534, 1);
  cr_assert_gt(child, 0);
  char cmd[4300];
  snprintf(cmd, sizeof cmd, "exec setpriv --bounding-set=-all --inh-caps=-all \"$DNT_BIN\" info -p %d", (int)child);
  char *argv[] = {"/bin/sh", "-c", cmd, NULL};
  struct dnt_run r;
  int rc = dnt_run_argv(&r, argv, NULL, DNT_HANG_MS);
  kill(child, SIGKILL);
  waitpid(child, NULL, 0);
  cr_assert_eq(rc, 3, "out: %s err: %s", r.out, r.err);
  cr_assert(strstr(r.err, "permission denied"), "%s", r.err);
  cr_assert_not(strstr(r.err, "or as root") || strstr(r.err, "run as the same user"),
                "root is not told to run as root: %s", r.err);
  cr_assert(strstr(r.err, "CAP_SYS_PTRACE"), "%s", r.err);
  cr_assert_eq(strchr(r.err, '\n'), r.err + strlen(r.err) - 1, "one line: %s", r.err);
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
  cr_assert_eq(dnt_run_argv(&r, argv, NULL, DNT_HANG_MS), 1, "stderr: %s", r.err);
  cr_assert(strstr(r.err, "cannot write to standard output"), "%s", r.err);
  dnt_run_free(&r);
}

/* ---- the option tables: help against the man pages, one error text per mistake ---- */

struct optset {
  char names[64][48];
  size_t n;
};

static void optset_add(struct optset *s, const char *name, size_t len) {
  if (len == 0 || len >= sizeof s->names[0]) return;
  for (size_t i = 0; i < s->n; i++)
    if (strlen(s->names[i]) == len && strncmp(s->names[i], name, len) == 0) return;
  cr_assert(s->n < sizeof s->names / sizeof s->names[0]);
  memcpy(s->names[s->n], name, len);
  s->names[s->n++][len] = '\0';
}

static int optset_has(const struct optset *s, const char *name) {
  for (size_t i = 0; i < s->n; i++)
    if (strcmp(s->names[i], name) == 0) return 1;
  return 0;
}

/* The options a man page's OPTIONS section describes: the words starting with '-' on the line
 * after each .TP ("-p", "--process-id", "--" for the command after it), roff escapes removed. */
static void man_options(const char *cmd, struct optset *s) {
  const char *src = getenv("DNT_SRCDIR");
  char path[4096];
  snprintf(path, sizeof path, "%s/man/dntrace-%s.1", src ? src : ".", cmd);
  FILE *fp = fopen(path, "r");
  cr_assert(fp, "cannot open %s", path);
  char line[1024];
  int in_options = 0, after_tp = 0;
  memset(s, 0, sizeof *s);
  while (fgets(line, sizeof line, fp)) {
    if (strncmp(line, ".SH", 3) == 0) in_options = strstr(line, "OPTIONS") != NULL;
    if (!in_options) continue;
    if (strncmp(line, ".TP", 3) == 0) {
      after_tp = 1;
      continue;
    }
    if (!after_tp) continue;
    after_tp = 0;
    char clean[1024];
    size_t n = 0;
    for (const char *p = line; *p && n + 1 < sizeof clean; p++) {
      if (p[0] == '\\' && p[1] == 'f' && p[2]) { /* a font change */
        p += 2;
        continue;
      }
      if (p[0] == '\\' && p[1] == '-') {
        clean[n++] = '-';
        p++;
        continue;
      }
      clean[n++] = *p == '"' || *p == ',' ? ' ' : *p;
    }
    clean[n] = '\0';
    /* skip the macro (.B, .BR, .BI) itself */
    for (char *w = clean + strcspn(clean, " \n"); *w;) {
      w += strspn(w, " \n");
      size_t len = strcspn(w, " \n[");
      if (w[0] == '-') optset_add(s, w, len);
      w += strcspn(w, " \n");
    }
  }
  fclose(fp);
}

/* The options a --help text lists: the words starting with '-' left of an option line's help
 * ("    -p, --process-id PID   the process..."), up to the first run of two spaces. */
static void help_options(const char *help, struct optset *s) {
  memset(s, 0, sizeof *s);
  for (const char *line = help; *line; line += strcspn(line, "\n") + (line[strcspn(line, "\n")] != '\0')) {
    if (strncmp(line, "    -", 5) != 0) continue;
    const char *end = strstr(line + 4, "  "), *eol = line + strcspn(line, "\n");
    if (!end || end > eol) end = eol;
    for (const char *w = line + 4; w < end;) {
      w += strspn(w, " ,");
      size_t len = strcspn(w, " ,\n");
      if (w + len > end) len = (size_t)(end - w);
      if (w[0] == '-') optset_add(s, w, len);
      w += len;
    }
  }
}

Test(cli, help_lists_the_options_of_the_man_page) {
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
    struct dnt_run r;
    cr_assert_eq(dnt_run_dntrace(&r, commands[i], "--help", NULL), 0, "%s --help: %s", commands[i], r.err);
    struct optset man, help;
    man_options(commands[i], &man);
    help_options(r.out, &help);
    cr_assert_gt(man.n, 0, "the man page of %s has options", commands[i]);
    for (size_t k = 0; k < man.n; k++)
      cr_expect(optset_has(&help, man.names[k]), "dntrace-%s(1) has %s, 'dntrace %s --help' does not:\n%s",
                commands[i], man.names[k], commands[i], r.out);
    for (size_t k = 0; k < help.n; k++) {
      int is_help = strcmp(help.names[k], "-h") == 0 || strcmp(help.names[k], "--help") == 0;
      cr_expect(is_help || optset_has(&man, help.names[k]), "'dntrace %s --help' has %s, dntrace-%s(1) does not",
                commands[i], help.names[k], commands[i]);
    }
    cr_expect(optset_has(&help, "--help") && optset_has(&help, "-h"), "%s --help lists -h, --help", commands[i]);
    dnt_run_free(&r);
  }
}

/* The one line a command prints for a mistake on its command line, which must be a usage error
 * (exit 2, nothing on stdout). Caller frees. */
static char *mistake(const char *const *argv) {
  char *full[16] = {(char *)dnt_bin()};
  size_t n = 1;
  for (; argv[n - 1]; n++) full[n] = (char *)argv[n - 1];
  full[n] = NULL;
  struct dnt_run r;
  int rc = dnt_run_argv(&r, full, NULL, DNT_HANG_MS);
  cr_assert_eq(rc, 2, "'dntrace %s ...' exits 2 for a usage error, not %d: %s", argv[0], rc, r.err);
  cr_assert_str_eq(r.out, "", "nothing on stdout for '%s ...'", argv[0]);
  char *first = strndup(r.err, strcspn(r.err, "\n"));
  dnt_run_free(&r);
  return first;
}

/* Every command line of cases gives the same error line, which holds each of words. */
static void same_error(const char *const cases[][12], size_t ncases, const char *const *words) {
  char *want = mistake(cases[0]);
  for (const char *const *w = words; *w; w++) cr_assert(strstr(want, *w), "'%s' says '%s'", want, *w);
  for (size_t i = 1; i < ncases; i++) {
    char *got = mistake(cases[i]);
    cr_expect_str_eq(got, want, "'dntrace %s %s' says\n%s\nbut 'dntrace %s %s' says\n%s", cases[i][0], cases[i][1], got,
                     cases[0][0], cases[0][1], want);
    free(got);
  }
  free(want);
}

#define NCASES(a) (sizeof a / sizeof a[0])

Test(cli, a_bad_pid_is_one_error_everywhere) {
  static const char *const cases[][12] = {
      {"info", "-p", "12abc", NULL},
      {"collect", "-p", "12abc", NULL},
      {"dump", "-p", "12abc", NULL},
      {"perf", "--process-id", "12abc", NULL},
      {"counters", "collect", "-p", "12abc", NULL},
      {"counters", "monitor", "-p", "12abc", NULL},
      {"counters", "serve", "-p", "12abc", NULL},
  };
  same_error(cases, NCASES(cases), (const char *const[]){"'12abc'", "process id", NULL});
}

Test(cli, no_target_is_one_error_per_set_of_targets) {
  static const char *const pid_only[][12] = {{"perf", "--duration", "1s", NULL}};
  same_error(pid_only, NCASES(pid_only), (const char *const[]){"-p PID", "-n NAME", NULL});
  /* the commands that read a trace or ask a process */
  static const char *const file_or_pid[][12] = {{"info", NULL}};
  same_error(file_or_pid, NCASES(file_or_pid), (const char *const[]){"trace file", "-p PID", "-n NAME", NULL});
  /* the analyses: a trace, or any process (also one they start) */
  static const char *const file_or_any[][12] = {{"gc", NULL},     {"jit", NULL},        {"threadpool", NULL},
                                               {"allocs", NULL}, {"exceptions", NULL}, {"locks", NULL}};
  same_error(file_or_any, NCASES(file_or_any),
             (const char *const[]){"trace file", "-p PID", "-n NAME", "--diagnostic-port PATH", "-- CMD", NULL});
  static const char *const any[][12] = {
      {"collect", NULL},
      {"counters", "collect", NULL},
      {"counters", "monitor", NULL},
      {"counters", "serve", "-p", "1", "-n", "x", NULL},
  };
  same_error(any, NCASES(any), (const char *const[]){"-p PID", "-n NAME", "--diagnostic-port PATH", "-- CMD", NULL});
  static const char *const port[][12] = {
      {"dump", NULL}, {"dump", "-n", "x", "--diagnostic-port", "/nowhere", NULL}, {"stacks", NULL}};
  same_error(port, NCASES(port), (const char *const[]){"-p PID", "-n NAME", "--diagnostic-port PATH", NULL});
}

Test(cli, a_bad_duration_is_one_error_everywhere) {
  static const char *const cases[][12] = {
      {"collect", "--duration", "5x", NULL},
      {"perf", "-p", "1", "--duration", "5x", NULL},
      {"counters", "collect", "--duration", "5x", NULL},
      {"counters", "monitor", "--duration", "5x", NULL},
      {"counters", "serve", "--duration", "5x", NULL},
  };
  same_error(cases, NCASES(cases), (const char *const[]){"--duration", "'5x'", NULL});
  /* no time at all (issue 28 item 11): said so, with what to do instead */
  static const char *const zero[][12] = {
      {"collect", "--duration", "0s", NULL},
      {"counters", "monitor", "--duration", "0s", NULL},
      {"gc", "-p", "1", "--duration", "0s", NULL},
  };
  same_error(zero, NCASES(zero), (const char *const[]){"--duration: '0s' is no time; leave --duration out", NULL});
  char *z = mistake((const char *const[]){"collect", "--duration", "00:00:00", NULL});
  cr_expect(strstr(z, "'00:00:00' is no time"), "%s", z);
  free(z);
}

Test(cli, a_bad_format_is_one_error_everywhere) {
  static const char *const profile[][12] = {
      {"convert", "t.nettrace", "--format", "gif", NULL},
      {"perf", "-p", "1", "--format", "gif", NULL},
      {"compare", "t.nettrace", "--format", "gif", NULL},
  };
  same_error(profile, NCASES(profile),
             (const char *const[]){"--format", "'gif'", "folded", "speedscope", "chromium", "flamegraph", NULL});
  /* collect takes the same conversions, and nettrace */
  char *c = mistake((const char *const[]){"collect", "-p", "1", "--format", "gif", NULL});
  for (const char *const *w = (const char *const[]){"'gif'", "nettrace", "folded", "speedscope", "chromium", "flamegraph", NULL};
       *w; w++)
    cr_expect(strstr(c, *w), "'%s' names %s", c, *w);
  free(c);
  static const char *const counters[][12] = {
      {"counters", "collect", "-p", "1", "--format", "gif", NULL},
      {"counters", "collect", "--format", "gif", NULL},
  };
  same_error(counters, NCASES(counters), (const char *const[]){"'gif'", "csv", "json", "prometheus", NULL});
  /* monitor has its own options (issue 28 item 17): a file's format is not one of them */
  c = mistake((const char *const[]){"counters", "monitor", "--format", "gif", NULL});
  cr_expect_str_eq(c, "dntrace: error: unknown option '--format'");
  free(c);
}

/* svg, flamegraph's other name, is taken wherever a flame graph is: the error that follows is
 * about something else (no target, no file). */
Test(cli, svg_is_taken_wherever_flamegraph_is) {
  static const char *const cases[][12] = {
      {"collect", "--format", "svg", NULL},
      {"perf", "--format", "SVG", NULL},
      {"compare", "--format", "svg", NULL},
  };
  for (size_t i = 0; i < NCASES(cases); i++) {
    char *e = mistake(cases[i]);
    cr_expect(!strstr(e, "--format"), "'dntrace %s --format svg' takes svg: %s", cases[i][0], e);
    free(e);
  }
  struct dnt_run r;
  dnt_run_dntrace(&r, "convert", "/no/such/trace.nettrace", "--format", "svg", NULL);
  cr_expect_eq(r.status, 1, "convert takes svg and fails on the file: %s", r.err);
  cr_expect(!strstr(r.err, "--format"), "%s", r.err);
  dnt_run_free(&r);
}

Test(cli, a_missing_output_is_one_error_everywhere) {
  static const char *const cases[][12] = {
      {"collect", "-o", NULL},
      {"dump", "-o", NULL},
      {"convert", "t.nettrace", "-o", NULL},
      {"perf", "-o", NULL},
      {"counters", "collect", "-o", NULL},
  };
  same_error(cases, NCASES(cases), (const char *const[]){"'-o'", "needs a value", NULL});
}

Test(cli, a_bad_count_is_one_error_everywhere) {
  static const char *const top[][12] = {
      {"perf", "-p", "1", "--top", "0", NULL},
      {"compare", "t.nettrace", "--top", "0", NULL},
  };
  same_error(top, NCASES(top), (const char *const[]){"--top", "'0'", NULL});
  static const char *const n[][12] = {
      {"report", "t.nettrace", "-n", "-3", NULL},
      {"events", "t.nettrace", "-n", "-3", NULL},
      {"report", "t.nettrace", "--number", "-3", NULL},
      {"events", "t.nettrace", "--count", "-3", NULL},
  };
  same_error(n, NCASES(n), (const char *const[]){"-n", "'-3'", NULL});
}

/* ---- the manual pages: examples, and 'dntrace help CMD' ---- */

static const char *pages[] = {"", "-ps", "-info", "-collect", "-dump", "-report", "-convert", "-events", "-counters",
                              "-perf", "-compare"};

/* A roff line as the reader sees it: "\-" as "-", font changes dropped. */
static void unroff(const char *in, char *out, size_t cap) {
  size_t n = 0;
  for (const char *p = in; *p && *p != '\n' && n + 1 < cap; p++) {
    if (p[0] == '\\' && p[1] == 'f' && p[2]) {
      p += 2;
      continue;
    }
    if (p[0] == '\\' && p[1] == '-') p++;
    out[n++] = *p;
  }
  out[n] = '\0';
}

/* The command lines of a page's EXAMPLES section that run dntrace ("$ " prompts taken off, a
 * pipe's right side cut), one per line into lines (caller frees each). Returns how many, or -1
 * when the page has no EXAMPLES section. */
static int man_examples(const char *page, char **lines, int cap) {
  const char *src = getenv("DNT_SRCDIR");
  char path[4096], line[1024], clean[1024];
  snprintf(path, sizeof path, "%s/man/dntrace%s.1", src ? src : ".", page);
  FILE *fp = fopen(path, "r");
  cr_assert(fp, "cannot open %s", path);
  int in = 0, seen = 0, n = 0;
  while (fgets(line, sizeof line, fp)) {
    if (strncmp(line, ".SH", 3) == 0) {
      in = strcmp(line, ".SH EXAMPLES\n") == 0;
      seen |= in;
      continue;
    }
    if (!in || line[0] == '.') continue;
    unroff(line, clean, sizeof clean);
    const char *cmd = strncmp(clean, "$ ", 2) == 0 ? clean + 2 : clean;
    if (strncmp(cmd, "dntrace ", 8) != 0) continue;
    char *pipe = strstr(cmd, " | ");
    if (pipe) *pipe = '\0';
    if (n < cap) lines[n++] = strdup(cmd);
  }
  fclose(fp);
  return seen ? n : -1;
}

/* The next word of a command line at *at, as a shell splits it: at blanks, but a "double-quoted"
 * text is one word (its quotes removed). NULL at the end. The line is cut in place. */
static char *shell_word(char **at) {
  char *p = *at;
  while (*p == ' ') p++;
  if (!*p) return NULL;
  char *word = p, *out = p;
  for (int quoted = 0; *p && (quoted || *p != ' '); p++) {
    if (*p == '"') quoted = !quoted;
    else *out++ = *p;
  }
  if (*p) p++;
  *out = '\0';
  *at = p;
  return word;
}

/* Every page has examples, and each example's command line parses: run with its target made
 * bogus (a pid no process has, a name no process has) in an empty directory, it may fail for
 * want of a target or a file, never as a usage error (exit 2). */
/* .timeout: each example under DNT_HANG_MS (only a hang reaches it; a failing example's cr_expect
 * lets the others run, so the ceiling is one hang's and a loaded healthy run's) */
Test(cli, every_man_page_has_examples_that_parse, .timeout = 300) {
  char dir[] = "/tmp/dnt-examples-XXXXXX", old[4096];
  cr_assert(mkdtemp(dir));
  cr_assert(getcwd(old, sizeof old));
  char bin[8200];
  snprintf(bin, sizeof bin, "%s%s%s", dnt_bin()[0] == '/' ? "" : old, dnt_bin()[0] == '/' ? "" : "/", dnt_bin());
  cr_assert_eq(chdir(dir), 0);
  int total = 0;
  for (size_t i = 0; i < sizeof pages / sizeof pages[0]; i++) {
    char *ex[32];
    int n = man_examples(pages[i], ex, 32);
    cr_expect_geq(n, 0, "dntrace%s(1) has an EXAMPLES section", pages[i]);
    cr_expect_neq(n, 0, "dntrace%s(1)'s EXAMPLES run dntrace", pages[i]);
    for (int k = 0; k < n; k++) {
      char *argv[40] = {bin}, *copy = strdup(ex[k]), *at = copy;
      int argc = 1;
      shell_word(&at); /* "dntrace" */
      for (char *w; (w = shell_word(&at)) && argc < 39;) {
        int target = strcmp(argv[argc - 1], "-p") == 0 || strcmp(argv[argc - 1], "-n") == 0 ||
                     strcmp(argv[argc - 1], "--name") == 0 || strcmp(argv[argc - 1], "--process-id") == 0;
        /* events' -n is a count and --name an event name: only a target's value is made bogus */
        int events = argc > 1 && strcmp(argv[1], "events") == 0, report = argc > 1 && strcmp(argv[1], "report") == 0;
        if (target && !events && !report)
          w = strcmp(argv[argc - 1], "-p") == 0 || strcmp(argv[argc - 1], "--process-id") == 0 ? "999999999"
                                                                                               : "dnt-no-such-process";
        argv[argc++] = w;
      }
      argv[argc] = NULL;
      struct dnt_run r;
      int rc = dnt_run_argv(&r, argv, NULL, DNT_HANG_MS);
      cr_expect(rc != 2 && rc >= 0 && rc < 128, "'%s' (dntrace%s(1)) parses: exit %d\n%s", ex[k], pages[i], rc, r.err);
      dnt_run_free(&r);
      free(copy);
      free(ex[k]);
      total++;
    }
  }
  cr_expect_gt(total, 20, "the pages have examples (%d)", total);
  cr_assert_eq(chdir(old), 0);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) {}
}

/* On a terminal 'dntrace help CMD' shows the manual page: the one in $DNT_MANDIR (a page of our
 * own making here, so the test sees which one was shown), else the installed or the source
 * tree's. script(1) gives it the terminal; col -b undoes man's overstrikes. */
/* .timeout: three runs under DNT_HANG_MS each (cr_expect lets a hung one end and the next run): two
 * hangs at most fit, with a healthy run's few seconds */
Test(cli, help_shows_the_man_page_on_a_terminal, .timeout = 300) {
  if (system("command -v script >/dev/null 2>&1 && command -v man >/dev/null 2>&1 && command -v col >/dev/null 2>&1"))
    cr_skip_test("needs script(1), man(1) and col(1)");
  char dir[] = "/tmp/dnt-manpages-XXXXXX", page[128], cmd[8192], sh[8300];
  cr_assert(mkdtemp(dir));
  snprintf(page, sizeof page, "%s/dntrace-convert.1", dir);
  FILE *fp = fopen(page, "w");
  cr_assert(fp);
  fputs(".TH DNTRACE-CONVERT 1\n.SH NAME\nplanted page\n.SH DESCRIPTION\nzebra-planted-by-the-test\n", fp);
  fclose(fp);
  struct dnt_run r;
  char *const argv[] = {"/bin/sh", "-c", sh, NULL};
  snprintf(cmd, sizeof cmd, "env MANPAGER='col -bx' DNT_MANDIR='%s' '%s' help convert", dir, dnt_bin());
  snprintf(sh, sizeof sh, "script -qec \"%s\" /dev/null", cmd);
  dnt_run_argv(&r, argv, NULL, DNT_HANG_MS);
  cr_expect(strstr(r.out, "zebra-planted-by-the-test"), "the page from DNT_MANDIR:\n%s%s", r.out, r.err);
  dnt_run_free(&r);
  /* without DNT_MANDIR: the real page (installed or in the tree), whose sections the usage lacks */
  snprintf(cmd, sizeof cmd, "env MANPAGER='col -bx' DNT_MANDIR= '%s' help convert", dnt_bin());
  snprintf(sh, sizeof sh, "script -qec \"%s\" /dev/null", cmd);
  dnt_run_argv(&r, argv, NULL, DNT_HANG_MS);
  cr_expect(strstr(r.out, "EXIT STATUS") && strstr(r.out, "EXAMPLES"), "the manual page:\n%s%s", r.out, r.err);
  dnt_run_free(&r);
  /* not on a terminal: the usage, as before */
  cr_assert_eq(dnt_run_dntrace(&r, "help", "convert", NULL), 0);
  cr_expect(strncmp(r.out, "usage: dntrace convert", 22) == 0, "%s", r.out);
  dnt_run_free(&r);
  unlink(page);
  rmdir(dir);
}
