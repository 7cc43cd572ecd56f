/* The web target (tests/targets/web, issue 30) for a test: started on a port of the kernel's
 * choice, and a bounded load of HTTP/1.1 keep-alive requests on the loopback from threads of the
 * test, whose counts say what the service was asked to do. */
#ifndef DNT_TEST_WEB_LOAD_H
#define DNT_TEST_WEB_LOAD_H

#include <pthread.h>
#include <stddef.h>

#include "target.h"

/* Path of the built apphost: $DNT_BUILDDIR/tests/targets/web/out/web. */
const char *dnt_web_exe(void);
/* NULL when the web target can be started, else why not. */
const char *dnt_web_unavailable(void);
/* Starts it and reads the port it listens on: 0, or -1 with a reason in err and nothing left
 * running. Stop it with dnt_target_stop. */
int dnt_web_start(dnt_target *t, int *port, char *err, size_t errlen);

struct dnt_web_load {
  /* asked */
  int port;
  const char *const *paths; /* NULL-terminated, taken in turn ("/order/{n}": n is the request's number) */
  int connections;          /* keep-alive connections, one thread each (at most 16) */
  long requests;            /* how many in all; 0: until stop is set */
  volatile int stop;
  /* done (read after dnt_web_load_join) */
  long answered;            /* requests with a whole answer */
  long by_class[6];         /* answers by status class: [2] 2xx, [4] 4xx, ... */
  long per_path[16];        /* answers by index in paths */
  char error[256];          /* the first failure ("" when none) */
  /* private */
  long next;
  pthread_mutex_t lock;
  pthread_t threads[16];
  int started;
};

/* Starts the load's threads: 0, or -1 (error says why). */
int dnt_web_load_start(struct dnt_web_load *l);
/* Waits for them (set stop first for a load without a count): 0 when every request was answered. */
int dnt_web_load_join(struct dnt_web_load *l);
/* Both: a load of l->requests (not 0), its threads waited for. */
int dnt_web_load_run(struct dnt_web_load *l);

#endif
