/* A fake .NET runtime for tests: a child process that publishes a diagnostic socket named as a
 * runtime's (dotnet-diagnostic-PID-KEY-socket in its /tmp, optionally a private /tmp in its own
 * mount namespace, as in a container) and answers what a hostile or broken runtime would:
 * ProcessInfo with chosen strings, a dump request by planting something at the dump path,
 * a session request refused, accepted and dropped, or never answered. Wire format:
 * /work/shared/reference/wire-formats.md (A.3, A.6, A.8). */
#ifndef DNT_TEST_FAKE_RUNTIME_H
#define DNT_TEST_FAKE_RUNTIME_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* A session request: refused, accepted and closed at once, never answered, or accepted and
 * followed by bytes that are no nettrace. */
enum fake_collect { FAKE_COLLECT_REFUSE, FAKE_COLLECT_DROP, FAKE_COLLECT_SILENT, FAKE_COLLECT_GARBAGE };

typedef struct fake_runtime_opts {
  int private_tmp;  /* its own mount namespace with a fresh tmpfs on /tmp */
  /* ProcessInfo3 strings, each byte one UTF-16 unit (Latin-1), so "\x9b" is U+009B; NULL: "" */
  const char *cmdline, *os, *arch, *entry, *version, *rid;
  enum fake_collect collect;
  int silent_info;  /* ProcessInfo is read and never answered (a hung runtime) */
  /* A dump request: called in the fake with the path it was given (as it sees its filesystem);
   * plants whatever it likes there and returns the HRESULT to answer (0: OK). NULL: E_FAIL. */
  uint32_t (*on_dump)(const char *path, void *ud);
  void *ud;
  /* A root of its own (a tmpfs, chrooted) whose /tmp is an absolute symlink to this directory,
   * as a container whose /tmp links elsewhere: through /proc/PID/root, a careless reader follows
   * the link in its own tree. NULL: no chroot. */
  const char *tmp_link;
  /* A decoy: the socket goes in sock_dir (as it sees it), named for sock_pid and sock_key
   * instead of its own pid and start time. 0 / NULL: its own, in /tmp. */
  const char *sock_dir;
  pid_t sock_pid;
  unsigned long long sock_key;
} fake_runtime_opts;

typedef struct fake_runtime {
  pid_t pid;         /* the fake, also its pid in its (shared) PID namespace */
  char socket[4200]; /* its socket as it sees it (under its /tmp) */
  int shared_tmp;    /* its socket is in our /tmp: removed by fake_runtime_stop */
} fake_runtime;

/* Starts the fake and waits until its socket listens. 0, or -1 with a reason in err. */
int fake_runtime_start(fake_runtime *f, const fake_runtime_opts *o, char *err, size_t errlen);
/* A process's start time in clock ticks (field 22 of /proc/PID/stat), the socket name's key. */
unsigned long long fake_runtime_starttime(pid_t pid);
/* Kills and reaps it; removes its socket (a private /tmp goes with its mount namespace). */
void fake_runtime_stop(fake_runtime *f);

#endif
