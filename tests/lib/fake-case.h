/* A fake diagnostics server's script: one case file per conversation, as curl's tests/data files
 * are. The format is described in tests/unit/ipc/cases/README.md; this header is its parsed form,
 * played by tests/lib/fake-ipc.c. The parser checks every line and every length: a malformed case
 * file is refused with "FILE:LINE: what is wrong", never half-played. */
#ifndef DNT_TEST_FAKE_CASE_H
#define DNT_TEST_FAKE_CASE_H

#include <stddef.h>
#include <stdint.h>

enum fake_op {
  FAKE_EXPECT = 1,    /* read one request; check its header (and payload) */
  FAKE_EXPECT_CLOSE,  /* read until the peer hangs up; any byte is a mismatch */
  FAKE_SEND,          /* bytes to write (reply, stream, send, garbage) */
  FAKE_PAUSE,         /* flush, then wait num ms */
  FAKE_PIECES,        /* from here on, writes of at most num bytes, num2 ms apart (num 0: whole) */
  FAKE_HANG,          /* flush, then wait for the peer to hang up (or the fake to be stopped) */
  FAKE_CLOSE,         /* flush and close the connection */
  FAKE_CALL,          /* the test's C hook `name`: 0 goes on, else an error reply with it and close */
  FAKE_SIGNAL,        /* raise the event `name` for the fake's other connections */
  FAKE_WAIT,          /* flush, then wait until another connection raised `name` */
};

#define FAKE_ANY (-1) /* a set or id of `*` */
#define FAKE_MAX_PATCHES 4

/* Where a send carries the fake's pid (`u32 pid`, `u64 pid`): written when it is played. */
struct fake_patch {
  size_t at;
  int width; /* 4 or 8 */
};

#define FAKE_MAX_FILES 32 /* a case and the files it includes */

struct fake_action {
  enum fake_op op;
  int file, line;       /* where it was written: fake_case.files[file], line */
  int set, id;          /* FAKE_EXPECT: wanted header (FAKE_ANY: any) */
  uint8_t *bytes;       /* FAKE_EXPECT: payload wanted; FAKE_SEND: what to write (owned) */
  size_t n;
  int prefix;           /* FAKE_EXPECT: `...`: the payload only begins with bytes */
  int read_already;     /* FAKE_EXPECT: checks the `on` section's request, reads nothing */
  int size_from_body;   /* FAKE_SEND from `reply header` without a size: bytes 14-15 patched */
  struct fake_patch patch[FAKE_MAX_PATCHES];
  int npatch;
  long num, num2;       /* FAKE_PAUSE ms; FAKE_PIECES bytes and ms */
  char name[32];        /* FAKE_CALL, FAKE_SIGNAL, FAKE_WAIT */
};

/* One connection of the conversation: `connection` (played in order) or `on SET ID` (played for
 * each connection whose first request has that header, the request read already). */
struct fake_section {
  int file, line;
  int on;               /* 1: an `on` section */
  int set, id;          /* `on`: the first request's header (FAKE_ANY: any) */
  struct fake_action *acts;
  size_t nacts, cap;
};

typedef struct fake_case {
  char name[256];       /* the file, for messages */
  char files[FAKE_MAX_FILES][64]; /* it and its includes, by name, for messages */
  int nfiles;
  int on;               /* its sections are `on` sections (dispatched), else `connection`s */
  struct fake_section *secs;
  size_t nsecs, cap;
} fake_case;

/* The directory of the case files: $DNT_SRCDIR/tests/unit/ipc/cases, else the source tree this
 * was built from. */
const char *fake_case_dir(void);
/* Reads and parses a case file; `name` without a '/' is looked up in fake_case_dir(). 0 and a
 * case to free with fake_case_free, or -1 with "FILE:LINE: reason" in err (nothing to free). */
int fake_case_load(fake_case **out, const char *name, char *err, size_t errlen);
/* The same from text in memory (NUL-terminated); `name` names it in messages and `dir` is where
 * `include` and `file` look (NULL: fake_case_dir()). The caller keeps text. */
int fake_case_parse(fake_case **out, const char *text, const char *name, const char *dir, char *err, size_t errlen);
/* NULL does nothing. */
void fake_case_free(fake_case *c);

#endif
