#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "loopback.h"
#include "run.h"
#include "web-load.h"

const char *dnt_web_exe(void) {
  static char path[4096];
  const char *b = getenv("DNT_TARGET_BUILDDIR");
  if (!b || !*b) b = getenv("DNT_BUILDDIR");
  snprintf(path, sizeof path, "%s/tests/targets/web/out/web", b && *b ? b : ".");
  return path;
}

const char *dnt_web_unavailable(void) {
  if (access(dnt_web_exe(), X_OK) == 0) return NULL;
  if (system("command -v dotnet >/dev/null 2>&1") != 0) return "dotnet (the .NET SDK) is not installed";
  return "the web target is not built (make web-target)";
}

int dnt_web_start(dnt_target *t, int *port, char *err, size_t errlen) {
  /* the port in a file the target writes before its "ready" (the lines after it are the
   * starter's to swallow) */
  char path[] = "/tmp/dnt-web-port-XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0) {
    snprintf(err, errlen, "mkstemp: %s", strerror(errno));
    return -1;
  }
  close(fd);
  dnt_target_opts o = {.exe = dnt_web_exe(), .args = (const char *const[]){"--port-file", path, NULL}, .wait_socket = 1};
  int rc = dnt_target_start(t, &o, err, errlen);
  FILE *fp = rc == 0 ? fopen(path, "r") : NULL;
  if (rc == 0 && (!fp || fscanf(fp, "%d", port) != 1 || *port <= 0)) {
    snprintf(err, errlen, "the web target said 'ready' with no port in %s", path);
    dnt_target_stop(t);
    rc = -1;
  }
  if (fp) fclose(fp);
  unlink(path);
  return rc;
}

static void fail(struct dnt_web_load *l, const char *what) {
  pthread_mutex_lock(&l->lock);
  if (!l->error[0]) snprintf(l->error, sizeof l->error, "%s", what);
  pthread_mutex_unlock(&l->lock);
}

/* The next request's number, or -1 when the load is done. */
static long take(struct dnt_web_load *l) {
  long k = -1;
  pthread_mutex_lock(&l->lock);
  if (!l->stop && !l->error[0] && (l->requests == 0 || l->next < l->requests)) k = l->next++;
  pthread_mutex_unlock(&l->lock);
  return k;
}

struct reader {
  int fd;
  char buf[16384];
  size_t len, pos;
};

static int fill(struct reader *r) {
  if (r->pos > 0) {
    memmove(r->buf, r->buf + r->pos, r->len - r->pos);
    r->len -= r->pos, r->pos = 0;
  }
  if (r->len == sizeof r->buf) return -1;
  ssize_t n = recv(r->fd, r->buf + r->len, sizeof r->buf - r->len, 0);
  if (n <= 0) return -1;
  r->len += (size_t)n;
  return 0;
}

/* A line ending in CRLF, NUL-terminated in place (valid until the next read), or NULL. */
static char *line(struct reader *r) {
  for (;;) {
    char *s = r->buf + r->pos, *end = memmem(s, r->len - r->pos, "\r\n", 2);
    if (end) {
      *end = '\0';
      r->pos = (size_t)(end - r->buf) + 2;
      return s;
    }
    if (fill(r) != 0) return NULL;
  }
}

static int skip(struct reader *r, unsigned long n) {
  while (n > 0) {
    if (r->pos == r->len && fill(r) != 0) return -1;
    size_t take_n = r->len - r->pos < n ? r->len - r->pos : n;
    r->pos += take_n, n -= take_n;
  }
  return 0;
}

/* One answer: its status, or -1 when the connection broke before its end. */
static int answer(struct reader *r) {
  char *s = line(r);
  int status;
  if (!s || sscanf(s, "HTTP/1.1 %d", &status) != 1) return -1;
  long length = -1;
  int chunked = 0;
  while ((s = line(r)) && *s) {
    if (strncasecmp(s, "content-length:", 15) == 0) length = atol(s + 15);
    if (strncasecmp(s, "transfer-encoding:", 18) == 0 && strstr(s, "chunked")) chunked = 1;
  }
  if (!s) return -1;
  if (!chunked) return length > 0 && skip(r, (unsigned long)length) != 0 ? -1 : status;
  for (;;) {
    if (!(s = line(r))) return -1;
    unsigned long size = strtoul(s, NULL, 16);
    if (skip(r, size) != 0 || !line(r)) return -1;
    if (size == 0) return status;
  }
}

static void *connection(void *arg) {
  struct dnt_web_load *l = arg;
  struct reader *r = calloc(1, sizeof *r);
  if (!r || (r->fd = dnt_connect_loopback(l->port)) < 0) {
    fail(l, "cannot connect to the web target");
    free(r);
    return NULL;
  }
  struct timeval tv = {DNT_HANG_MS / 1000, 0};
  setsockopt(r->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  size_t npaths = 0;
  while (l->paths[npaths]) npaths++;
  long k;
  while ((k = take(l)) >= 0) {
    size_t which = (size_t)k % npaths;
    char path[256], req[512];
    const char *brace = strstr(l->paths[which], "{n}");
    if (brace)
      snprintf(path, sizeof path, "%.*s%ld%s", (int)(brace - l->paths[which]), l->paths[which], k, brace + 3);
    else
      snprintf(path, sizeof path, "%s", l->paths[which]);
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", path);
    int status = send(r->fd, req, (size_t)n, MSG_NOSIGNAL) == n ? answer(r) : -1;
    if (status < 100 || status > 599) {
      fail(l, "the web target closed a connection or answered what is not HTTP/1.1");
      break;
    }
    pthread_mutex_lock(&l->lock);
    l->answered++, l->by_class[status / 100]++;
    if (which < 16) l->per_path[which]++;
    pthread_mutex_unlock(&l->lock);
  }
  close(r->fd);
  free(r);
  return NULL;
}

int dnt_web_load_start(struct dnt_web_load *l) {
  l->answered = l->next = 0;
  memset(l->by_class, 0, sizeof l->by_class);
  memset(l->per_path, 0, sizeof l->per_path);
  l->error[0] = '\0';
  l->started = 0;
  pthread_mutex_init(&l->lock, NULL);
  int want = l->connections < 1 ? 1 : l->connections > 16 ? 16 : l->connections;
  if (!l->paths || !l->paths[0]) {
    snprintf(l->error, sizeof l->error, "no paths to ask for");
    return -1;
  }
  while (l->started < want && pthread_create(&l->threads[l->started], NULL, connection, l) == 0) l->started++;
  if (l->started == 0) {
    snprintf(l->error, sizeof l->error, "cannot start a thread: %s", strerror(errno));
    return -1;
  }
  return 0;
}

int dnt_web_load_join(struct dnt_web_load *l) {
  for (int i = 0; i < l->started; i++) pthread_join(l->threads[i], NULL);
  l->started = 0;
  pthread_mutex_destroy(&l->lock);
  if (!l->error[0] && l->requests && l->answered != l->requests)
    snprintf(l->error, sizeof l->error, "%ld of %ld requests answered", l->answered, l->requests);
  return l->error[0] ? -1 : 0;
}

int dnt_web_load_run(struct dnt_web_load *l) {
  if (dnt_web_load_start(l) != 0) return -1;
  return dnt_web_load_join(l);
}
