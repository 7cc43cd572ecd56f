#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fake-runtime.h"

#define HR_FAIL 0x80004005u
#define HR_UNKNOWN_COMMAND 0x80131385u

/* A reply under construction: header first, size patched when sent. */
struct msg {
  uint8_t b[65536];
  size_t n;
};

static void put(struct msg *m, const void *p, size_t n) {
  if (m->n + n > sizeof m->b) _exit(90);
  memcpy(m->b + m->n, p, n);
  m->n += n;
}
static void put_u32(struct msg *m, uint32_t v) {
  uint8_t le[4] = {v, v >> 8, v >> 16, v >> 24};
  put(m, le, 4);
}
static void put_u64(struct msg *m, uint64_t v) {
  put_u32(m, (uint32_t)v);
  put_u32(m, (uint32_t)(v >> 32));
}
/* count of UTF-16 units with the NUL, then the units; each byte of s is one unit */
static void put_string(struct msg *m, const char *s) {
  s = s ? s : "";
  size_t n = strlen(s);
  put_u32(m, (uint32_t)n + 1);
  for (size_t i = 0; i <= n; i++) {
    uint8_t u[2] = {(uint8_t)s[i], 0};
    put(m, u, 2);
  }
}
static void begin(struct msg *m, uint8_t set, uint8_t id) {
  static const char magic[14] = "DOTNET_IPC_V1";
  m->n = 0;
  put(m, magic, 14);
  uint8_t rest[6] = {0, 0, set, id, 0, 0};
  put(m, rest, 6);
}
static void send_msg(int fd, struct msg *m) {
  m->b[14] = (uint8_t)m->n;
  m->b[15] = (uint8_t)(m->n >> 8);
  for (size_t done = 0; done < m->n;) {
    ssize_t w = write(fd, m->b + done, m->n - done);
    if (w <= 0) return;
    done += (size_t)w;
  }
}
static void send_error(int fd, uint32_t hr) {
  struct msg m;
  begin(&m, 0xff, 0xff);
  put_u32(&m, hr);
  send_msg(fd, &m);
}

static int read_full(int fd, uint8_t *p, size_t n) {
  for (size_t done = 0; done < n;) {
    ssize_t r = read(fd, p + done, n - done);
    if (r <= 0) return -1;
    done += (size_t)r;
  }
  return 0;
}

/* The dump path: the first string of the payload, UTF-16LE down to bytes (ASCII paths). */
static void dump_path(const uint8_t *p, size_t n, char *out, size_t cap) {
  out[0] = '\0';
  if (n < 4) return;
  uint32_t units = p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24;
  size_t i;
  for (i = 0; i < units && i + 1 < cap && 4 + 2 * i + 1 < n; i++) out[i] = (char)p[4 + 2 * i];
  out[i] = '\0';
}

static void serve_one(int c, const fake_runtime_opts *o) {
  uint8_t h[20], payload[65536];
  if (read_full(c, h, 20) < 0) return;
  size_t size = h[14] | h[15] << 8;
  if (size < 20 || read_full(c, payload, size - 20) < 0) return;
  uint8_t set = h[16], id = h[17];
  struct msg m;
  if (set == 0x04 && id == 0x08 && o->silent_info) {
    pause(); /* never answers; killed by fake_runtime_stop */
  } else if (set == 0x04 && id == 0x08) { /* ProcessInfo3 */
    begin(&m, 0xff, 0x00);
    put_u32(&m, 1);
    put_u64(&m, (uint64_t)getpid());
    uint8_t cookie[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
    put(&m, cookie, 16);
    put_string(&m, o->cmdline);
    put_string(&m, o->os);
    put_string(&m, o->arch);
    put_string(&m, o->entry);
    put_string(&m, o->version);
    put_string(&m, o->rid);
    send_msg(c, &m);
  } else if (set == 0x01) { /* GenerateCoreDump 1/2/3 */
    char path[4096];
    dump_path(payload, size - 20, path, sizeof path);
    uint32_t hr = o->on_dump ? o->on_dump(path, o->ud) : HR_FAIL;
    if (hr) {
      send_error(c, hr);
      return;
    }
    begin(&m, 0xff, 0x00);
    put_u32(&m, 0);
    send_msg(c, &m);
  } else if (set == 0x02 && id != 0x01) { /* CollectTracing* */
    if (o->collect == FAKE_COLLECT_REFUSE) {
      send_error(c, HR_FAIL);
    } else if (o->collect == FAKE_COLLECT_DROP) {
      begin(&m, 0xff, 0x00);
      put_u64(&m, 42);
      send_msg(c, &m);
    } else if (o->collect == FAKE_COLLECT_GARBAGE) {
      begin(&m, 0xff, 0x00);
      put_u64(&m, 42);
      send_msg(c, &m);
      static const char junk[] = "HTTP/1.1 200 OK\r\n\r\nthis is not a nettrace stream at all, just words";
      for (int i = 0; i < 64; i++)
        if (write(c, junk, sizeof junk - 1) < 0) break;
    } else {
      pause(); /* never answers; killed by fake_runtime_stop */
    }
  } else {
    send_error(c, HR_UNKNOWN_COMMAND);
  }
}

unsigned long long fake_runtime_starttime(pid_t pid) {
  char path[64], stat[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  int fd = open(path, O_RDONLY);
  ssize_t n = fd < 0 ? -1 : read(fd, stat, sizeof stat - 1);
  if (fd >= 0) close(fd);
  if (n <= 0) return 0;
  stat[n] = '\0';
  char *p = strrchr(stat, ')') + 2; /* field 3 */
  for (int field = 3; field < 22; field++) p = strchr(p, ' ') + 1;
  return strtoull(p, NULL, 10);
}

/* Its own root: a tmpfs on /mnt (private to its mount namespace) holding link_to as a directory
 * and /tmp as an absolute symlink to it; then chroot there. */
static int chroot_with_tmp_link(const char *link_to) {
  char dir[4200];
  if (mount("tmpfs", "/mnt", "tmpfs", 0, "mode=755") != 0) return -1;
  for (const char *p = link_to + 1;; p++) { /* mkdir -p /mnt<link_to> */
    if (*p != '/' && *p) continue;
    snprintf(dir, sizeof dir, "/mnt%.*s", (int)(p - link_to), link_to);
    if (mkdir(dir, 01777) != 0 && errno != EEXIST) return -1;
    if (!*p) break;
  }
  chmod(dir, 01777);
  if (symlink(link_to, "/mnt/tmp") != 0 || chroot("/mnt") != 0 || chdir("/") != 0) return -1;
  return 0;
}

static void run_fake(const fake_runtime_opts *o, int ready) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  unsigned long long key = o->sock_pid ? o->sock_key : fake_runtime_starttime(getpid());
  if (o->private_tmp || o->tmp_link) {
    if (unshare(CLONE_NEWNS) != 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
      _exit(92);
    if (o->tmp_link ? chroot_with_tmp_link(o->tmp_link) != 0 : mount("tmpfs", "/tmp", "tmpfs", 0, "mode=1777") != 0)
      _exit(92);
  }
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  snprintf(sa.sun_path, sizeof sa.sun_path, "%s/dotnet-diagnostic-%d-%llu-socket", o->sock_dir ? o->sock_dir : "/tmp",
           o->sock_pid ? (int)o->sock_pid : (int)getpid(), key);
  int s = socket(AF_UNIX, SOCK_STREAM, 0);
  if (s < 0 || bind(s, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(s, 8) != 0) _exit(93);
  if (write(ready, sa.sun_path, strlen(sa.sun_path) + 1) < 0) _exit(94);
  close(ready);
  for (;;) {
    int c = accept(s, NULL, NULL);
    if (c < 0) continue;
    serve_one(c, o);
    close(c);
  }
}

int fake_runtime_start(fake_runtime *f, const fake_runtime_opts *o, char *err, size_t errlen) {
  memset(f, 0, sizeof *f);
  int p[2];
  if (pipe(p) < 0) {
    snprintf(err, errlen, "pipe: %s", strerror(errno));
    return -1;
  }
  f->pid = fork();
  if (f->pid < 0) {
    snprintf(err, errlen, "fork: %s", strerror(errno));
    return -1;
  }
  if (f->pid == 0) {
    close(p[0]);
    run_fake(o, p[1]);
  }
  close(p[1]);
  ssize_t n = read(p[0], f->socket, sizeof f->socket - 1);
  close(p[0]);
  if (n <= 0) {
    int st = 0;
    waitpid(f->pid, &st, 0);
    snprintf(err, errlen, "the fake runtime did not start (exit %d: 92 mount namespace, 93 socket)",
             WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    f->pid = 0;
    return -1;
  }
  f->socket[n] = '\0';
  f->shared_tmp = !o->private_tmp && !o->tmp_link;
  return 0;
}

void fake_runtime_stop(fake_runtime *f) {
  if (f->pid <= 0) return;
  kill(f->pid, SIGKILL);
  waitpid(f->pid, NULL, 0);
  if (f->shared_tmp) unlink(f->socket);
  f->pid = 0;
}
