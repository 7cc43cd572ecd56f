/* The one fake diagnostics server of the tests: it plays a case file (tests/lib/fake-case.h, the
 * format in tests/unit/ipc/cases/README.md) on a socket, and says afterwards whether every request
 * was the one the case expects.
 *
 * Three ways to run it:
 * - a thread of the test listening at a path (the library tests: dsipc_* against the fake);
 * - a thread that dials a path (a runtime connecting to a diagnostic port, ADVR_V1 first);
 * - a forked child whose socket is named as a runtime's, dotnet-diagnostic-PID-KEY-socket in
 *   its /tmp, for the command-line tests (dntrace ps/info/collect/dump -p PID). It can have a
 *   private /tmp in its own mount namespace (a container), its own root whose /tmp is a symlink,
 *   or its socket named for another process (a decoy).
 * Wire format: /work/shared/reference/wire-formats.md (A.2, A.3, A.6, A.8, A.9). */
#ifndef DNT_TEST_FAKE_IPC_H
#define DNT_TEST_FAKE_IPC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "fake-case.h"

/* A case's `call NAME`: given the request the connection last read (header and payload,
 * borrowed), does what the case cannot say in bytes (plant a file at a dump path) and returns 0
 * to go on, or the HRESULT to answer with an error reply before closing. Runs in the fake (the
 * child, for a runtime). */
typedef uint32_t (*fake_ipc_hook)(const char *name, const uint8_t *request, size_t len, void *ud);

typedef struct fake_ipc_opts {
  /* listen here (a thread); NULL: "sock" in a fresh directory under /tmp, removed at the end.
   * With dial: the path to connect to. The caller owns a path it gives (and removes it). */
  const char *socket;
  int dial;          /* connect to socket for each `connection`, instead of listening */
  int runtime;       /* a forked child with a runtime's socket name (the fields below) */
  int private_tmp;   /* runtime: its own mount namespace with a fresh tmpfs on /tmp */
  /* runtime: its own root (a tmpfs, chrooted) whose /tmp is an absolute symlink to this
   * directory, as a container whose /tmp links elsewhere. NULL: no chroot. */
  const char *tmp_link;
  /* runtime, a decoy: the socket goes in sock_dir (as it sees it), named for sock_pid and
   * sock_key instead of its own pid and start time. 0 / NULL: its own, in /tmp. */
  const char *sock_dir;
  pid_t sock_pid;
  unsigned long long sock_key;
  fake_ipc_hook hook;
  void *ud;
} fake_ipc_opts;

typedef struct fake_ipc fake_ipc;

/* Loads the case (a name in fake_case_dir(), or a path) and prepares the fake; nothing runs yet.
 * 0, or -1 with the reason in err. */
int fake_ipc_new(fake_ipc **out, const char *case_name, const fake_ipc_opts *o, char *err, size_t errlen);
/* Binds (or, with dial, starts dialing) and plays the case in the background; for a runtime,
 * returns once its socket listens. 0, or -1 with the reason in err. */
int fake_ipc_run(fake_ipc *f, char *err, size_t errlen);
/* fake_ipc_new, then fake_ipc_run. */
int fake_ipc_start(fake_ipc **out, const char *case_name, const fake_ipc_opts *o, char *err, size_t errlen);
/* Where it listens (as it sees it: for a runtime, under its own /tmp). */
const char *fake_ipc_socket(const fake_ipc *f);
/* The runtime's pid (also its pid in its shared PID namespace); for a thread, the test's. */
pid_t fake_ipc_pid(const fake_ipc *f);
/* Ends it: a thread is told to stop (a connection in progress is cut at its next wait) and
 * joined; a runtime is killed and reaped. Returns 0 when every request matched the case and, for
 * `connection` cases, every connection came; else -1 with the first difference in err. */
int fake_ipc_stop(fake_ipc *f, char *err, size_t errlen);
/* Raises the event NAME (threads only), as a case's `signal NAME` does: a connection waiting at
 * `wait NAME` goes on. For a test that plays in lockstep with the fake (a stream's next piece
 * sent only once the client took the last). Raising a name again changes nothing. 0, or -1 for a
 * runtime, a name of 32 bytes or more, or too many names. */
int fake_ipc_raise(fake_ipc *f, const char *name);
/* The i-th request read (in order, from 0; threads only), borrowed until fake_ipc_free; NULL
 * past the last. */
const uint8_t *fake_ipc_request(const fake_ipc *f, size_t i, size_t *len);
/* Stops it if running and frees it; NULL does nothing. */
void fake_ipc_free(fake_ipc *f);

/* A process's start time in clock ticks (field 22 of /proc/PID/stat): a socket name's key. */
unsigned long long fake_ipc_starttime(pid_t pid);
/* The first string of a payload (u32 count, UTF-16LE units) down to bytes, for ASCII paths. */
void fake_ipc_first_string(const uint8_t *payload, size_t n, char *out, size_t cap);

#endif
