#include <dirent.h>
#include <errno.h>
#include <grp.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fake-ipc.h"
#include "run.h"
#include "target.h"

const char *dnt_target_exe(void) {
  static char path[4096];
  /* DNT_TARGET_BUILDDIR: a build tree whose sample target to use, for a second tree of the
   * same sources (bootstrap.sh's build-clang/) that need not build it again */
  const char *b = getenv("DNT_TARGET_BUILDDIR");
  if (!b || !*b) b = getenv("DNT_BUILDDIR");
  snprintf(path, sizeof path, "%s/tests/targets/sample/out/Sample", b && *b ? b : ".");
  return path;
}

const char *dnt_target_unavailable(void) {
  if (access(dnt_target_exe(), X_OK) == 0) return NULL;
  if (system("command -v dotnet >/dev/null 2>&1") != 0) return "dotnet (the .NET SDK) is not installed";
  return "the sample target is not built (make sample-target)";
}

static long now_ms(void) {
  struct timespec ts;
  /* timing: start and exit waits, each under dnt_ceiling_ms */
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

/* The single child of the unshare wrapper: the .NET process in its new PID namespace. */
static pid_t child_of(pid_t parent) {
  char path[64], buf[256];
  snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)parent, (int)parent);
  FILE *fp = fopen(path, "r");
  if (!fp) return 0;
  pid_t pid = 0;
  if (fgets(buf, sizeof buf, fp)) pid = (pid_t)atoi(buf);
  fclose(fp);
  return pid;
}

static pid_t last_nspid(pid_t pid) {
  char path[64], line[256];
  snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
  FILE *fp = fopen(path, "r");
  if (!fp) return 0;
  pid_t ns = 0;
  while (fgets(line, sizeof line, fp)) {
    if (strncmp(line, "NSpid:", 6) != 0) continue;
    for (char *p = line + 6, *end;; p = end) {
      long v = strtol(p, &end, 10);
      if (end == p) break;
      ns = (pid_t)v;
    }
  }
  fclose(fp);
  return ns;
}

/* The socket, looked for the simple way (not with dntrace's own discovery, which is under test):
 * through /proc/PID/root so it works in every mode. Its name carries the process's start time:
 * a killed runtime's leftover under a reused pid has another, and is never taken for this one. */
static int find_socket(dnt_target *t) {
  unsigned long long key = fake_ipc_starttime(t->pid);
  if (!key) return 0;
  char p[256];
  snprintf(p, sizeof p, "/proc/%d/root/tmp/dotnet-diagnostic-%d-%llu-socket", (int)t->pid, (int)t->ns_pid, key);
  if (access(p, F_OK) != 0) return 0;
  /* in the host's mount namespace the plain /tmp path is the one users see */
  const char *tmp = strstr(p, "/root/tmp/");
  if ((t->wrapper_pid == 0 || last_nspid(t->pid) == t->pid) && access(tmp + 5, F_OK) == 0)
    snprintf(t->socket_path, sizeof t->socket_path, "%s", tmp + 5);
  else
    snprintf(t->socket_path, sizeof t->socket_path, "%s", p);
  return 1;
}

/* A runtime killed with SIGKILL cannot remove its socket; left in /tmp, it would sit beside the
 * sockets of later targets that reuse its pid. */
static void remove_socket(dnt_target *t) {
  if (t->socket_path[0] == '/' && strncmp(t->socket_path, "/proc/", 6) != 0) unlink(t->socket_path);
}

/* Reads the child's stdout until a line equal to `want`, or the deadline. */
static int wait_line(int fd, const char *want, long deadline, char *first, size_t firstcap) {
  char buf[4096];
  size_t len = 0;
  for (;;) {
    char *nl;
    while ((nl = memchr(buf, '\n', len)) != NULL) {
      *nl = '\0';
      if (first && !first[0]) snprintf(first, firstcap, "%.200s", buf);
      int hit = strcmp(buf, want) == 0;
      len -= (size_t)(nl + 1 - buf);
      memmove(buf, nl + 1, len);
      if (hit) return 0;
    }
    long left = deadline - now_ms();
    if (left <= 0 || len == sizeof buf) return -1;
    struct pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, (int)left) <= 0) continue;
    ssize_t n = read(fd, buf + len, sizeof buf - len);
    if (n <= 0) return -1;
    len += (size_t)n;
  }
}

static void kill_all(dnt_target *t) {
  if (t->pid > 0) kill(t->pid, SIGKILL);
  pid_t w = t->wrapper_pid ? t->wrapper_pid : t->pid;
  if (w > 0) {
    kill(w, SIGKILL);
    waitpid(w, NULL, 0);
  }
  remove_socket(t);
  if (t->stdout_fd >= 0) close(t->stdout_fd);
  t->stdout_fd = -1;
  t->pid = t->wrapper_pid = 0;
}

int dnt_target_start(dnt_target *t, const dnt_target_opts *o, char *err, size_t errlen) {
  memset(t, 0, sizeof *t);
  t->stdout_fd = -1;
  const char *exe = o->exe ? o->exe : dnt_target_exe();
  int timeout = dnt_ceiling_ms(o->timeout_ms);
  long deadline = now_ms() + timeout;

  const char *argv[64];
  int n = 0;
  if (o->mode == DNT_TARGET_MOUNTNS_PRIVATE_TMP) {
    /* --kill-child: the target dies with the wrapper, so a crashed test leaves nothing behind */
    argv[n++] = "unshare";
    argv[n++] = "-m";
    argv[n++] = "--propagation";
    argv[n++] = "private";
    argv[n++] = "--fork";
    argv[n++] = "--kill-child";
    argv[n++] = "--";
    argv[n++] = "/bin/sh";
    argv[n++] = "-c";
    /* A fresh tmpfs hides the host's /tmp; when the program itself lives under /tmp (a CI
     * clone there), its directory is bound back in from the old /tmp, held open on fd 3. */
    argv[n++] = "d=$(dirname \"$(realpath \"$0\")\") && exec 3</tmp && "
                "mount -t tmpfs -o mode=1777 tmpfs /tmp || exit 97; "
                "case \"$d\" in /tmp/*) mkdir -p \"$d\" && mount --no-canonicalize --bind \"/proc/self/fd/3/${d#/tmp/}\" \"$d\" || exit 98;; esac; "
                "exec 3<&-; exec \"$0\" \"$@\"";
  } else if (o->mode == DNT_TARGET_PIDNS) {
    argv[n++] = "unshare";
    argv[n++] = "-p";
    argv[n++] = "-f";
    argv[n++] = "--mount-proc";
    argv[n++] = "--kill-child";
    argv[n++] = "--";
  }
  argv[n++] = exe;
  for (const char *const *a = o->args; a && *a && n < 62; a++) argv[n++] = *a;
  argv[n] = NULL;

  int out[2];
  if (pipe2(out, O_CLOEXEC) < 0) {
    snprintf(err, errlen, "pipe: %s", strerror(errno));
    return -1;
  }
  pid_t child = fork();
  if (child < 0) {
    snprintf(err, errlen, "fork: %s", strerror(errno));
    close(out[0]);
    close(out[1]);
    return -1;
  }
  if (child == 0) {
    /* another user's process: its credentials first (a change of them clears the death signal) */
    if (o->uid && (setgroups(0, NULL) != 0 || setgid(o->uid) != 0 || setuid(o->uid) != 0)) {
      fprintf(stderr, "cannot become uid %u: %s\n", o->uid, strerror(errno));
      _exit(126);
    }
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    dup2(out[1], 1);
    int devnull = open("/dev/null", O_RDWR);
    if (devnull >= 0) dup2(devnull, 0);
    for (const char *const *e = o->env; e && *e; e++) putenv((char *)*e);
    if (o->mode == DNT_TARGET_PLAIN)
      execv(argv[0], (char *const *)argv);
    else
      execvp(argv[0], (char *const *)argv);
    fprintf(stderr, "cannot run %s: %s\n", argv[0], strerror(errno));
    _exit(127);
  }
  close(out[1]);
  t->stdout_fd = out[0];
  if (o->mode == DNT_TARGET_PLAIN) {
    t->pid = child;
  } else {
    t->wrapper_pid = child;
    /* mount mode: unshare --fork -> sh which execs the target, so it is the wrapper's child too */
    while (!(t->pid = child_of(child)) && now_ms() < deadline) usleep(10 * 1000);
    if (!t->pid) {
      snprintf(err, errlen, "the target did not start under unshare (is unshare permitted?)");
      kill_all(t);
      return -1;
    }
  }
  t->ns_pid = last_nspid(t->pid);
  if (o->no_wait) return 0;
  if (dnt_target_wait_ready(t, (int)(deadline - now_ms()), err, errlen) != 0) return -1;
  if (o->wait_socket) {
    while (!find_socket(t) && now_ms() < deadline) usleep(10 * 1000);
    if (!t->socket_path[0]) {
      snprintf(err, errlen, "no diagnostic socket for pid %d within %d ms", (int)t->pid, timeout);
      kill_all(t);
      return -1;
    }
  }
  return 0;
}

int dnt_target_wait_ready(dnt_target *t, int timeout_ms, char *err, size_t errlen) {
  char first[256] = "";
  timeout_ms = dnt_ceiling_ms(timeout_ms);
  if (wait_line(t->stdout_fd, "ready", now_ms() + timeout_ms, first, sizeof first) != 0) {
    snprintf(err, errlen, "the target did not print 'ready' within %d ms (first line: '%s')", timeout_ms, first);
    kill_all(t);
    return -1;
  }
  t->ns_pid = last_nspid(t->pid);
  if (strncmp(first, "pid ", 4) != 0 || atoi(first + 4) != t->ns_pid) {
    snprintf(err, errlen, "the target's first line is '%s', expected 'pid %d'", first, (int)t->ns_pid);
    kill_all(t);
    return -1;
  }
  return 0;
}

int dnt_target_wait(dnt_target *t, int timeout_ms) {
  pid_t w = t->wrapper_pid ? t->wrapper_pid : t->pid;
  long deadline = now_ms() + timeout_ms;
  int st;
  while (now_ms() < deadline) {
    pid_t r = waitpid(w, &st, WNOHANG);
    if (r == w) {
      remove_socket(t);
      if (t->stdout_fd >= 0) close(t->stdout_fd);
      t->stdout_fd = -1;
      t->pid = t->wrapper_pid = 0;
      return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    }
    usleep(10 * 1000);
  }
  return -1;
}

int dnt_target_stop(dnt_target *t) {
  if (!t->pid && !t->wrapper_pid) return -1;
  kill(t->pid, SIGTERM);
  int rc = dnt_target_wait(t, 5000);
  if (rc < 0) {
    kill_all(t);
    return -1;
  }
  return rc;
}

unsigned long dnt_target_thread_named(pid_t pid, const char *name) {
  char dir[64];
  snprintf(dir, sizeof dir, "/proc/%d/task", (int)pid);
  DIR *d = opendir(dir);
  if (!d) return 0;
  unsigned long tid = 0;
  struct dirent *de;
  while (!tid && (de = readdir(d))) {
    char path[600], comm[64] = "";
    snprintf(path, sizeof path, "%s/%s/comm", dir, de->d_name);
    FILE *fp = fopen(path, "r");
    if (!fp) continue;
    if (fgets(comm, sizeof comm, fp)) comm[strcspn(comm, "\n")] = '\0';
    fclose(fp);
    if (strcmp(comm, name) == 0) tid = strtoul(de->d_name, NULL, 10);
  }
  closedir(d);
  return tid;
}

void dnt_target_read_lines(int fd, char *carry, size_t cap, void (*fn)(void *ud, const char *line), void *ud) {
  char buf[4096];
  struct pollfd p = {fd, POLLIN, 0};
  while (poll(&p, 1, 0) > 0 && (p.revents & POLLIN)) {
    ssize_t n = read(fd, buf, sizeof buf - 1);
    if (n <= 0) break;
    buf[n] = '\0';
    size_t have = strlen(carry);
    snprintf(carry + have, cap - have, "%s", buf);
    char *line = carry, *nl;
    while ((nl = strchr(line, '\n'))) {
      *nl = '\0';
      fn(ud, line);
      line = nl + 1;
    }
    memmove(carry, line, strlen(line) + 1);
  }
}

long dnt_proc_status_kb(pid_t pid, const char *field) {
  char path[64], line[256];
  if (pid) snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
  else snprintf(path, sizeof path, "/proc/self/status");
  FILE *fp = fopen(path, "r");
  size_t n = strlen(field);
  long kb = -1;
  while (fp && fgets(line, sizeof line, fp))
    if (strncmp(line, field, n) == 0 && line[n] == ':') {
      kb = strtol(line + n + 1, NULL, 10);
      break;
    }
  if (fp) fclose(fp);
  return kb;
}

double dnt_cpu_seconds(pid_t pid, pid_t tid) {
  char path[96], buf[1024];
  if (tid) snprintf(path, sizeof path, "/proc/%d/task/%d/stat", (int)pid, (int)tid);
  else snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  FILE *fp = fopen(path, "r");
  if (!fp) return -1;
  size_t n = fread(buf, 1, sizeof buf - 1, fp);
  fclose(fp);
  buf[n] = '\0';
  /* the name in parentheses may hold spaces and parentheses: the fields start after the last ')' */
  char *p = strrchr(buf, ')');
  if (!p) return -1;
  unsigned long long utime = 0, stime = 0;
  /* after ')': state (3), then fields 4..13, utime (14), stime (15) */
  if (sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime, &stime) != 2) return -1;
  long hz = sysconf(_SC_CLK_TCK);
  return (double)(utime + stime) / (double)(hz > 0 ? hz : 100);
}

const char *dnt_run_context(pid_t pid) {
  static char text[256];
  char load[64] = "?";
  FILE *fp = fopen("/proc/loadavg", "r");
  if (fp) {
    double a = 0, b = 0, c = 0;
    if (fscanf(fp, "%lf %lf %lf", &a, &b, &c) == 3) snprintf(load, sizeof load, "%.2f %.2f %.2f", a, b, c);
    fclose(fp);
  }
  int n = snprintf(text, sizeof text, "load %s, %ld CPUs", load, sysconf(_SC_NPROCESSORS_ONLN));
  if (pid > 0 && n > 0 && (size_t)n < sizeof text)
    snprintf(text + n, sizeof text - (size_t)n, "; pid %d used %.2f s CPU", (int)pid, dnt_cpu_seconds(pid, 0));
  return text;
}
