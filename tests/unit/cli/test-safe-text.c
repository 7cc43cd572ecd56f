/* dnt_safe_text, the escaping of strings other processes chose (src/util.h), byte by byte:
 * what must be escaped and how, and what must pass untouched (UTF-8 text of any script). */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

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
