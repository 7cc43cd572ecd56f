/* The one policy for the files the commands write (dntrace(1), OUTPUT FILES): "-" is standard
 * output, the format's extension only when the name has none, never through a symbolic link,
 * an existing regular file overwritten and said so, --no-clobber refuses it. convert runs on a
 * corpus trace with samples; counters collect is refused before it looks for its (bogus) target,
 * so no runtime is needed here. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../lib/run.h"

/* A corpus trace with SampleProfiler samples (7423 of them, per perfview's own test data). */
static const char *samples_trace(void) {
  static char path[4096];
  const char *d = getenv("DNT_CORPUS");
  snprintf(path, sizeof path, "%s/microsoft__perfview/only_managed_samples.nettrace", d ? d : "/work/shared/corpus");
  if (access(path, R_OK) != 0) cr_skip_test("no corpus trace at %s (set DNT_CORPUS)", path);
  return path;
}

static char *slurp(const char *path) {
  FILE *fp = fopen(path, "r");
  if (!fp) return NULL;
  char *buf = NULL;
  size_t cap = 0;
  ssize_t n = getdelim(&buf, &cap, '\0', fp);
  fclose(fp);
  if (n < 0) {
    free(buf);
    return strdup("");
  }
  return buf;
}

static void put(const char *path, const char *text) {
  FILE *fp = fopen(path, "w");
  cr_assert(fp, "create %s", path);
  fputs(text, fp);
  fclose(fp);
}

static int lines(const char *s) {
  int n = 0;
  for (; *s; s++) n += *s == '\n';
  return n;
}

static char dir[] = "/tmp/dnt-output-XXXXXX";

static void in_dir(char *buf, size_t cap, const char *name) { snprintf(buf, cap, "%s/%s", dir, name); }

static void setup(void) { cr_assert(mkdtemp(dir)); }
static void teardown(void) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) {}
}

TestSuite(output, .init = setup, .fini = teardown);

/* One refusal: exit 1, one error line naming the file, nothing on stdout. */
static void refused(struct dnt_run *r, int rc, const char *path, const char *why) {
  cr_expect_eq(rc, 1, "refused with exit 1, not %d: %s", rc, r->err);
  cr_expect_eq(lines(r->err), 1, "one line on stderr:\n%s", r->err);
  cr_expect(strncmp(r->err, "dntrace: error: ", 16) == 0 && strstr(r->err, path) && strstr(r->err, why),
            "the error names '%s' and says '%s':\n%s", path, why, r->err);
  cr_expect_str_eq(r->out, "");
}

Test(output, convert_never_writes_through_a_symlink) {
  const char *trace = samples_trace();
  char target[256], link[256], dangling[256], nowhere[256];
  in_dir(target, sizeof target, "precious");
  in_dir(link, sizeof link, "out.folded");
  in_dir(nowhere, sizeof nowhere, "nowhere.folded");
  in_dir(dangling, sizeof dangling, "dangling.folded");
  put(target, "keep me\n");
  cr_assert_eq(symlink(target, link), 0);
  cr_assert_eq(symlink(nowhere, dangling), 0);
  struct dnt_run r;
  int rc = dnt_run_dntrace(&r, "convert", trace, "--format", "folded", "-o", link, NULL);
  refused(&r, rc, link, "symbolic link");
  dnt_run_free(&r);
  char *text = slurp(target);
  cr_expect_str_eq(text, "keep me\n", "the link's target is unchanged");
  free(text);
  rc = dnt_run_dntrace(&r, "convert", trace, "--format", "folded", "-o", dangling, NULL);
  refused(&r, rc, dangling, "symbolic link");
  dnt_run_free(&r);
  cr_expect_neq(access(nowhere, F_OK), 0, "a dangling link's target is not created");
}

Test(output, counters_collect_never_writes_through_a_symlink) {
  char target[256], link[256];
  in_dir(target, sizeof target, "precious");
  in_dir(link, sizeof link, "out.csv");
  put(target, "keep me\n");
  cr_assert_eq(symlink(target, link), 0);
  struct dnt_run r;
  int rc = dnt_run_dntrace(&r, "counters", "collect", "-p", "999999", "-o", link, NULL);
  refused(&r, rc, link, "symbolic link");
  dnt_run_free(&r);
  char *text = slurp(target);
  cr_expect_str_eq(text, "keep me\n", "the link's target is unchanged");
  free(text);
  /* /dev/stdout is a link too: refused as such, and no /dev/stdout.json beside it */
  rc = dnt_run_dntrace(&r, "counters", "collect", "-p", "999999", "--format", "json", "-o", "/dev/stdout", NULL);
  refused(&r, rc, "/dev/stdout", "symbolic link");
  dnt_run_free(&r);
  cr_expect_neq(access("/dev/stdout.json", F_OK), 0);
}

/* (A directory is a destination for collect and convert, which write their own name inside it:
 * convert::from_stdin_to_stdout; for the others it is refused like the rest.) */
Test(output, anything_but_a_regular_file_is_refused) {
  char sub[256];
  in_dir(sub, sizeof sub, "d.folded");
  cr_assert_eq(mkfifo(sub, 0600), 0);
  struct dnt_run r;
  int rc = dnt_run_dntrace(&r, "convert", samples_trace(), "--format", "folded", "-o", sub, NULL);
  refused(&r, rc, sub, "not a regular file");
  dnt_run_free(&r);
  char d[256];
  in_dir(d, sizeof d, "d.csv");
  cr_assert_eq(mkdir(d, 0700), 0);
  rc = dnt_run_dntrace(&r, "counters", "collect", "-p", "999999", "-o", d, NULL);
  refused(&r, rc, d, "not a regular file");
  dnt_run_free(&r);
  rc = dnt_run_dntrace(&r, "counters", "collect", "-p", "999999", "-o", "/dev/null", NULL);
  refused(&r, rc, "/dev/null", "not a regular file");
  dnt_run_free(&r);
}

/* Only the user's own files are replaced: root is not tricked into overwriting another user's. */
Test(output, another_users_file_is_refused) {
  if (geteuid() != 0) cr_skip_test("needs root to give a file to another user");
  char out[256];
  in_dir(out, sizeof out, "theirs.folded");
  put(out, "theirs\n");
  cr_assert_eq(chown(out, 65534, 65534), 0);
  struct dnt_run r;
  int rc = dnt_run_dntrace(&r, "convert", samples_trace(), "--format", "folded", "-o", out, NULL);
  refused(&r, rc, out, "another user");
  dnt_run_free(&r);
  char *text = slurp(out);
  cr_expect_str_eq(text, "theirs\n");
  free(text);
}

Test(output, overwriting_a_regular_file_says_so) {
  char out[256];
  in_dir(out, sizeof out, "out.folded");
  put(out, "old\n");
  struct dnt_run r;
  int rc = dnt_run_dntrace(&r, "convert", samples_trace(), "--format", "folded", "-o", out, NULL);
  cr_assert_eq(rc, 0, "%s", r.err);
  char want[300];
  snprintf(want, sizeof want, "overwriting '%s'\n", out);
  cr_expect(strstr(r.err, want), "stderr says '%s':\n%s", want, r.err);
  dnt_run_free(&r);
  char *text = slurp(out);
  cr_expect(strncmp(text, "Thread ", 7) == 0, "the file holds folded stacks now:\n%.200s", text);
  free(text);
  /* a new file is not "overwritten" */
  char fresh[256];
  in_dir(fresh, sizeof fresh, "fresh.folded");
  rc = dnt_run_dntrace(&r, "convert", samples_trace(), "--format", "folded", "-o", fresh, NULL);
  cr_assert_eq(rc, 0, "%s", r.err);
  cr_expect(!strstr(r.err, "overwriting"), "%s", r.err);
  dnt_run_free(&r);
}

Test(output, no_clobber_refuses_an_existing_file) {
  char out[256], csv[256];
  in_dir(out, sizeof out, "out.svg");
  in_dir(csv, sizeof csv, "c.csv");
  put(out, "old\n");
  put(csv, "old\n");
  struct dnt_run r;
  int rc = dnt_run_dntrace(&r, "convert", samples_trace(), "--format", "flamegraph", "-o", out, "--no-clobber", NULL);
  refused(&r, rc, out, "exists");
  dnt_run_free(&r);
  char *text = slurp(out);
  cr_expect_str_eq(text, "old\n");
  free(text);
  /* counters collect: the name with its extension added is the one refused */
  char base[256];
  in_dir(base, sizeof base, "c");
  rc = dnt_run_dntrace(&r, "counters", "collect", "-p", "999999", "--no-clobber", "-o", base, NULL);
  refused(&r, rc, csv, "exists");
  dnt_run_free(&r);
  text = slurp(csv);
  cr_expect_str_eq(text, "old\n");
  free(text);
  /* and a new file is written as usual */
  char fresh[256];
  in_dir(fresh, sizeof fresh, "fresh.svg");
  rc = dnt_run_dntrace(&r, "convert", samples_trace(), "--format", "flamegraph", "-o", fresh, "--no-clobber", NULL);
  cr_expect_eq(rc, 0, "%s", r.err);
  dnt_run_free(&r);
  cr_expect_eq(access(fresh, F_OK), 0);
}

Test(output, the_extension_is_added_only_when_the_name_has_none) {
  static const struct {
    const char *format, *given, *written;
  } cases[] = {
      {"folded", "plain", "plain.folded"},
      {"speedscope", "plain", "plain.speedscope.json"},
      {"flamegraph", "plain", "plain.svg"},
      {"folded", "stacks.txt", "stacks.txt"},
      {"speedscope", "p.json", "p.json"},
      {"folded", ".hidden", ".hidden.folded"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char given[256], written[256];
    in_dir(given, sizeof given, cases[i].given);
    in_dir(written, sizeof written, cases[i].written);
    struct dnt_run r;
    int rc = dnt_run_dntrace(&r, "convert", samples_trace(), "--format", cases[i].format, "-o", given, NULL);
    cr_expect_eq(rc, 0, "%s", r.err);
    dnt_run_free(&r);
    struct stat st;
    cr_expect(stat(written, &st) == 0 && st.st_size > 0, "-o %s --format %s writes %s", cases[i].given,
              cases[i].format, cases[i].written);
    if (strcmp(given, written) != 0) cr_expect_neq(access(given, F_OK), 0, "and not %s", cases[i].given);
    unlink(written);
  }
  /* counters collect alike: the name that is refused shows which one it would have written */
  char txt[256];
  in_dir(txt, sizeof txt, "c.txt");
  put(txt, "old\n");
  struct dnt_run r;
  int rc = dnt_run_dntrace(&r, "counters", "collect", "-p", "999999", "--no-clobber", "-o", txt, NULL);
  char quoted[300];
  snprintf(quoted, sizeof quoted, "'%s'", txt);
  refused(&r, rc, quoted, "exists");
  dnt_run_free(&r);
}

Test(output, dash_is_standard_output) {
  cr_assert_eq(chdir(dir), 0);
  struct dnt_run r;
  int rc = dnt_run_dntrace(&r, "convert", samples_trace(), "--format", "folded", "-o", "-", NULL);
  cr_assert_eq(rc, 0, "%s", r.err);
  cr_expect(strncmp(r.out, "Thread ", 7) == 0, "folded stacks on stdout:\n%.200s", r.out);
  dnt_run_free(&r);
  cr_expect_neq(access("-", F_OK), 0);
  cr_expect_neq(access("-.folded", F_OK), 0);
}
