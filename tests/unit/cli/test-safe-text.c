/* dnt_safe_text (src/util.h) and what it is made with (trace/'s dnt_text_escape, dnt_text_put):
 * the escaping of strings other processes chose, byte by byte: what must be escaped and how,
 * and what must pass untouched (UTF-8 text of any script). */
#include <criterion/criterion.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dnt-trace.h"
#include "target.h"
#include "util.h"

static void expect(const char *in, const char *want) {
  char *got = dnt_safe_text(in);
  cr_assert_str_eq(got, want, "escaping '%s'", in);
  free(got);
}

Test(safe_text, plain_text_is_untouched) {
  expect("", "");
  expect("dotnet /app/App.dll --port 80", "dotnet /app/App.dll --port 80");
  expect("caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x94\xa5", "caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x94\xa5");
  expect("C:\\path", "C:\\path"); /* a backslash is no control: left as it is */
  cr_assert_null(dnt_safe_text(NULL));
}

Test(safe_text, c0_controls_and_del) {
  expect("a\nb\rc\td", "a\\nb\\rc\\td");
  expect("\x1b[2J\x07\b\x01\x1f\x7f", "\\x1b[2J\\x07\\x08\\x01\\x1f\\x7f");
}

Test(safe_text, c1_controls) {
  expect("\xc2\x9b" "31m", "\\u009b31m"); /* CSI */
  expect("\xc2\x80\xc2\x9f\xc2\xa0", "\\u0080\\u009f\xc2\xa0"); /* U+00A0 is printable */
}

Test(safe_text, bytes_that_are_not_utf8) {
  expect("\x9b" "31m", "\\x9b31m");             /* a lone 8-bit CSI */
  expect("\xc3", "\\xc3");                     /* a sequence cut at the end */
  expect("\xe6\x97" "x", "\\xe6\\x97x");        /* cut in the middle */
  expect("\xc0\xaf", "\\xc0\\xaf");             /* an overlong '/' */
  expect("\xe0\x82\x9b", "\\xe0\\x82\\x9b");    /* an overlong CSI */
  expect("\xed\xa0\x80", "\\xed\\xa0\\x80");    /* a UTF-16 surrogate */
  expect("\xf4\x90\x80\x80", "\\xf4\\x90\\x80\\x80"); /* past U+10FFFF */
  expect("\xf8\x88\x80\x80\x80", "\\xf8\\x88\\x80\\x80\\x80");
}

/* The library's form (trace/dnt-trace.h), which the views write with: into a buffer that may be
 * too small, never splitting an escape or a character, the length needed returned as snprintf. */
Test(safe_text, into_a_buffer_cut_at_whole_pieces) {
  char b[8];
  cr_assert_eq(dnt_text_escape(b, sizeof b, "ab\x1b" "cd"), 8); /* ab \x1b cd */
  cr_assert_str_eq(b, "ab\\x1bc");
  cr_assert_eq(dnt_text_escape(b, 5, "ab\x1b" "cd"), 8);
  cr_assert_str_eq(b, "ab", "the escape does not fit whole: it is left out");
  cr_assert_eq(dnt_text_escape(b, 4, "\xe6\x97\xa5\xe6\x9c\xac"), 6);
  cr_assert_str_eq(b, "\xe6\x97\xa5");
  cr_assert_eq(dnt_text_escape(NULL, 0, "\n"), 2);
  cr_assert_eq(dnt_text_escape(b, sizeof b, NULL), 0);
  cr_assert_str_eq(b, "");
}

Test(safe_text, streamed_as_escaped) {
  char *buf = NULL;
  size_t len = 0;
  FILE *fp = open_memstream(&buf, &len);
  cr_assert(fp);
  dnt_text_put(fp, "Evil\x1b]0;owned\x07\r\xc2\x9b");
  dnt_text_put(fp, NULL);
  cr_assert_eq(fclose(fp), 0);
  cr_assert_str_eq(buf, "Evil\\x1b]0;owned\\x07\\r\\u009b");
  free(buf);
}

/* A process names itself (argv[0] is its own to write): the name every message shows is escaped
 * at the source. The child execs sleep under an evil argv[0]; the test waits until its cmdline
 * is the new one (the exec happened), not for a time. */
Test(safe_text, a_process_name_is_escaped_at_the_source, .timeout = 120) {
  static const char evil[] = "evil\x1b]0;owned\x07\r\xc2\x9b" "2J";
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    char *const argv[] = {(char *)evil, "120", NULL};
    execv("/bin/sleep", argv);
    _exit(127);
  }
  char path[64], cmd[64] = "";
  snprintf(path, sizeof path, "/proc/%d/cmdline", (int)pid);
  while (strncmp(cmd, evil, sizeof evil - 1) != 0) { /* the exec done */
    FILE *fp = fopen(path, "re");
    cr_assert(fp, "the child is gone before its exec");
    size_t n = fread(cmd, 1, sizeof cmd - 1, fp);
    cmd[n] = '\0';
    fclose(fp);
    if (strncmp(cmd, evil, sizeof evil - 1) != 0) sched_yield();
  }
  char name[256];
  dnt_process_name((int)pid, name, sizeof name);
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
  cr_assert_str_eq(name, "evil\\x1b]0;owned\\x07\\r\\u009b2J");
}
