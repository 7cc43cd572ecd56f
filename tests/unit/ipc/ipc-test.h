/* What the files of tests/unit/ipc share: the fake server (tests/lib/fake-ipc.h) started from a
 * case file and its verdict asserted, and hand-written message headers. */
#ifndef DNT_TEST_UNIT_IPC_H
#define DNT_TEST_UNIT_IPC_H

#include <criterion/criterion.h>
#include <errno.h>
#include <time.h>

#include "lib/fake-ipc.h"
#include "lib/run.h"

/* The deadline given to the client where the deadline is not what the test is about: only a hang
 * reaches it (a busy machine may take seconds to answer a case that pauses 155 times). */
#define IPC_HANG_MS DNT_HANG_MS

/* libuv's loop clock counts whole milliseconds and may read CLOCK_MONOTONIC_COARSE (1 ms ticks):
 * a deadline of D ms can fire up to 2 ms short of D by CLOCK_MONOTONIC. What a lower bound on a
 * deadline forgives, and no more. */
#define LOOP_CLOCK_SLACK_MS 3

/* How much a deadline's loop clock may be behind when it is armed, in the deadline tests: the
 * caller's loop did other work since its last turn (loop time is cached per turn). A deadline
 * counted from that cached time would end this much early. */
#define STALE_LOOP_MS 100

#define MAGIC 'D', 'O', 'T', 'N', 'E', 'T', '_', 'I', 'P', 'C', '_', 'V', '1', 0
#define HDR(size, set, id) MAGIC, (size) & 0xff, (size) >> 8, set, id, 0, 0

/* The fake playing `case_name` (tests/unit/ipc/cases/) with the options o (NULL: a thread
 * listening on a fresh socket), running. */
static inline fake_ipc *fake_play(const char *case_name, const fake_ipc_opts *o) {
  static const fake_ipc_opts plain;
  fake_ipc *f;
  char err[800];
  cr_assert_eq(fake_ipc_start(&f, case_name, o ? o : &plain, err, sizeof err), 0, "%s", err);
  return f;
}

/* Stops the fake and asserts that the conversation went as its case says: every request the
 * one expected, every connection made. The caller frees the fake (its requests stay readable). */
static inline void fake_check(fake_ipc *f) {
  char err[800];
  cr_assert_eq(fake_ipc_stop(f, err, sizeof err), 0, "the conversation differs from its case: %s", err);
}

/* fake_check, then fake_ipc_free. */
static inline void fake_done(fake_ipc *f) {
  fake_check(f);
  fake_ipc_free(f);
}

/* Lets ms pass without turning any loop (a plain sleep of the test's own thread). */
static inline void let_time_pass(long ms) {
  struct timespec left = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&left, &left) != 0 && errno == EINTR) {}
}

/* timing: the lower bounds of the deadline tests and printed figures */
static inline double ms_since(const struct timespec *t0) {
  struct timespec t1;
  /* timing: as above */
  clock_gettime(CLOCK_MONOTONIC, &t1);
  return (double)(t1.tv_sec - t0->tv_sec) * 1000 + (double)(t1.tv_nsec - t0->tv_nsec) / 1e6;
}

#endif
