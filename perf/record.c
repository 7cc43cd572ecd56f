/* Linux perf beside an EventPipe session (dnt-perf.h). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "perf-int.h"
#include <stdarg.h>

/* printf into a caller's buffer, returning -1 for `return fail(...)`. */
static int fail(char *msg, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *msg, size_t cap, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, cap, fmt, ap);
  va_end(ap);
  return -1;
}

int dnt_perf_check_access(int paranoid, unsigned euid, int pid, unsigned target_uid, char *msg, size_t cap) {
  if (euid == 0 || paranoid <= 1) return 0;
  if (paranoid >= 3)
    return fail(msg, cap, "kernel.perf_event_paranoid is %d: perf is for root only on this system; run as root or "
                     "'sysctl kernel.perf_event_paranoid=2'", paranoid);
  /* 2: a user may still profile the user space of its own processes */
  if (target_uid != euid)
    return fail(msg, cap, "process %d belongs to uid %u: perf may watch only your own processes "
                     "(kernel.perf_event_paranoid is %d); run as that user or as root", pid, target_uid, paranoid);
  snprintf(msg, cap, "kernel.perf_event_paranoid is %d: perf records user space only, no kernel frames (as root, "
           "or with 'sysctl kernel.perf_event_paranoid=1', it records them too)", paranoid);
  return 1;
}

int dnt_perf_check(int pid, char *msg, size_t cap) {
  const char *path = getenv("PATH");
  char buf[4096];
  int found = 0;
  for (const char *p = path ? path : "/usr/bin:/bin"; *p && !found;) {
    size_t n = strcspn(p, ":");
    snprintf(buf, sizeof buf, "%.*s/perf", (int)n, p);
    found = access(buf, X_OK) == 0;
    p += n + (p[n] == ':');
  }
  if (!found)
    return fail(msg, cap, "perf is not installed (Debian: apt-get install linux-perf); 'dntrace collect' still gives "
                     "the managed view");
  if (geteuid() == 0) return 0;
  FILE *fp = fopen("/proc/sys/kernel/perf_event_paranoid", "re");
  int level = 2;
  if (fp) {
    if (fscanf(fp, "%d", &level) != 1) level = 2;
    fclose(fp);
  }
  if (pid <= 0) /* no target yet: refuse only what no target could change */
    return level >= 3 ? dnt_perf_check_access(level, (unsigned)geteuid(), 0, (unsigned)geteuid(), msg, cap) : 0;
  /* /proc/PID belongs to the process's effective uid */
  struct stat st;
  snprintf(buf, sizeof buf, "/proc/%d", pid);
  unsigned target_uid = stat(buf, &st) == 0 ? (unsigned)st.st_uid : 0;
  return dnt_perf_check_access(level, (unsigned)geteuid(), pid, target_uid, msg, cap);
}

/* A quiet `perf record -e sched:sched_switch -- true`: tracepoints need a readable tracefs. */
int dnt_perf_can_trace_sched(void) {
  fflush(NULL); /* the child's freopen would write our buffered output a second time */
  pid_t pid = fork();
  if (pid < 0) return 0;
  if (pid == 0) {
    freopen("/dev/null", "w", stdout);
    freopen("/dev/null", "w", stderr);
    char *const argv[] = {"perf", "record", "-q", "-e", "sched:sched_switch", "-o", "/dev/null", "--", "true", NULL};
    execvp("perf", argv);
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

static void remove_control(struct dnt_perf_record *pr);

/* Each of pr's handles closed: once none is left, on_closed (the async start's) may free pr. */
void dnt__perf_record_closed(uv_handle_t *h) {
  struct dnt_perf_record *pr = h->data;
  if (--pr->open_handles == 0 && !pr->running && pr->on_closed) pr->on_closed(pr->ud);
}

static void on_exit_cb(uv_process_t *p, int64_t status, int sig) {
  struct dnt_perf_record *pr = p->data;
  pr->running = 0;
  if (pr->waiting) dnt__perf_record_unwait(pr, "perf exited before it recorded");
  remove_control(pr);
  pr->status = (int)status;
  pr->signal = sig;
  uv_close((uv_handle_t *)p, dnt__perf_record_closed);
  if (pr->on_exit) pr->on_exit(pr->ud);
}

static void on_err_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  static char chunk[4096];
  (void)h, (void)suggested;
  *buf = uv_buf_init(chunk, sizeof chunk);
}

static void on_err_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
  struct dnt_perf_record *pr = s->data;
  if (n < 0) {
    uv_close((uv_handle_t *)s, dnt__perf_record_closed);
    return;
  }
  size_t room = sizeof pr->err_text - 1 - pr->err_len, take = (size_t)n < room ? (size_t)n : room;
  memcpy(pr->err_text + pr->err_len, buf->base, take);
  pr->err_len += take;
  pr->err_text[pr->err_len] = '\0';
}

static const char *const *child_wrapper;

/* perf starts with its events off (-D -1) and a control fifo: once it acknowledges "enable", it
 * records, and the caller may start what it wants recorded from the first moment. */
static int make_control(struct dnt_perf_record *pr) {
  const char *tmp = getenv("TMPDIR");
  /* our pid in the name: a later run removes the directory of a dntrace that was killed */
  snprintf(pr->ctl_dir, sizeof pr->ctl_dir, "%s/dntrace-perf-%d-XXXXXX", tmp && *tmp ? tmp : "/tmp", (int)getpid());
  if (!mkdtemp(pr->ctl_dir)) {
    pr->ctl_dir[0] = '\0';
    return -1;
  }
  snprintf(pr->ctl_arg, sizeof pr->ctl_arg, "fifo:%s/ctl,%s/ack", pr->ctl_dir, pr->ctl_dir);
  char ctl[sizeof pr->ctl_dir + 8], ack[sizeof pr->ctl_dir + 8];
  snprintf(ctl, sizeof ctl, "%s/ctl", pr->ctl_dir);
  snprintf(ack, sizeof ack, "%s/ack", pr->ctl_dir);
  if (mkfifo(ctl, 0600) != 0 || mkfifo(ack, 0600) != 0) return -1;
  /* read-write opens of a fifo never block on the other side */
  pr->ctl_fd = open(ctl, O_RDWR | O_CLOEXEC);
  pr->ack_fd = open(ack, O_RDWR | O_CLOEXEC | O_NONBLOCK);
  return pr->ctl_fd >= 0 && pr->ack_fd >= 0 ? 0 : -1;
}

static void remove_control(struct dnt_perf_record *pr) {
  if (pr->ctl_fd >= 0) close(pr->ctl_fd);
  if (pr->ack_fd >= 0) close(pr->ack_fd);
  pr->ctl_fd = pr->ack_fd = -1;
  if (!pr->ctl_dir[0]) return;
  char path[sizeof pr->ctl_dir + 8];
  snprintf(path, sizeof path, "%s/ctl", pr->ctl_dir);
  unlink(path);
  snprintf(path, sizeof path, "%s/ack", pr->ctl_dir);
  unlink(path);
  rmdir(pr->ctl_dir);
  pr->ctl_dir[0] = '\0';
}

/* Whether a child has exited (a zombie not yet reaped: the loop is not running here). */
static int child_gone(int pid) {
  char state;
  return dsipc_proc_stat(pid, &state, NULL) != 0 || state == 'Z' || state == 'X';
}

/* Sends "enable" and waits for perf's "ack" (perf may take a while to set up on a busy
 * machine), giving up when perf has exited or after 20 s. */
static int wait_recording(struct dnt_perf_record *pr) {
  static const char enable[] = "enable\n";
  if (write(pr->ctl_fd, enable, sizeof enable - 1) != (ssize_t)(sizeof enable - 1)) return -1;
  char got[16];
  size_t have = 0;
  for (int waited = 0; waited < 20000; waited += 50) {
    struct pollfd p = {.fd = pr->ack_fd, .events = POLLIN};
    if (poll(&p, 1, 50) > 0) {
      ssize_t n = read(pr->ack_fd, got + have, sizeof got - 1 - have);
      if (n > 0) have += (size_t)n;
      got[have] = '\0';
      if (strstr(got, "ack")) return 0;
    }
    if (child_gone(pr->proc.pid)) return -1;
  }
  return -1;
}

void dnt_perf_set_child_wrapper(const char *const *argv_prefix) { child_wrapper = argv_prefix; }

/* Makes the control fifos and spawns `perf record` (events off) on loop, its stderr read into
 * pr->err_text. 0 or -1 (pr->msg). */
int dnt__perf_record_spawn(struct dnt_perf_record *pr, uv_loop_t *loop, int pid, int hz, int sched, int no_cache,
                           const char *out) {
  if (make_control(pr) != 0) {
    int e = errno;
    remove_control(pr);
    return fail(pr->msg, sizeof pr->msg, "cannot make perf's control fifos: %s", strerror(e));
  }
  char clock_event[48], target[16];
  /* The frequency goes on cpu-clock alone: a global -F would sample the tracepoints at that rate
   * too and drop most switches, where every one of them is wanted (period 1, perf's default). */
  snprintf(clock_event, sizeof clock_event, "cpu-clock/freq=%d/", hz);
  snprintf(target, sizeof target, "%d", pid);
  char *argv[32];
  int n = 0;
  for (const char *const *w = child_wrapper; w && *w && n < 4; w++) argv[n++] = (char *)*w;
  argv[n++] = "perf", argv[n++] = "record", argv[n++] = "--quiet", argv[n++] = "-e", argv[n++] = clock_event;
  if (sched) {
    argv[n++] = "-e", argv[n++] = "sched:sched_switch";
    /* wake-ups by the target's own threads (a lock released, the sampler resuming the runtime):
     * where a thread became runnable again, and with its call chain, the waker's stack at the
     * wake-up (the record is made in the waker's context: `dntrace waits`). sched_waking, not
     * sched_wakeup: the latter often fires on the wakee's CPU in whatever task runs there,
     * outside the target. */
    argv[n++] = "-e", argv[n++] = "sched:sched_waking";
  }
  /* -N: perf's build-id cache (~/.debug) gets no copy of the files sampled: an agent recording
   * every few seconds (serve --cpu) reads its recording at once and must not fill a home */
  if (no_cache) argv[n++] = "-N";
  argv[n++] = "-g", argv[n++] = "-k", argv[n++] = "CLOCK_MONOTONIC";
  argv[n++] = "-D", argv[n++] = "-1", argv[n++] = "--control", argv[n++] = pr->ctl_arg;
  argv[n++] = "-p", argv[n++] = target, argv[n++] = "-o", argv[n++] = (char *)out, argv[n] = NULL;
  uv_pipe_init(loop, &pr->err, 0);
  pr->err.data = pr;
  pr->open_handles++;
  uv_stdio_container_t stdio[3] = {{.flags = UV_IGNORE}, {.flags = UV_IGNORE},
                                   {.flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE, .data.stream = (uv_stream_t *)&pr->err}};
  uv_process_options_t po = {.exit_cb = on_exit_cb, .file = argv[0], .args = argv, .stdio_count = 3, .stdio = stdio};
  pr->proc.data = pr;
  int e = uv_spawn(loop, &pr->proc, &po);
  if (e) {
    uv_close((uv_handle_t *)&pr->err, dnt__perf_record_closed);
    remove_control(pr);
    return fail(pr->msg, sizeof pr->msg, "cannot start perf: %s", uv_strerror(e));
  }
  pr->open_handles++;
  pr->running = pr->started = 1;
  uv_read_start((uv_stream_t *)&pr->err, on_err_alloc, on_err_read);
  return 0;
}

int dnt_perf_record_start(struct dnt_perf_record *pr, uv_loop_t *loop, int pid, int hz, int sched, const char *out,
                          void (*on_exit)(void *ud), void *ud) {
  memset(pr, 0, sizeof *pr);
  pr->ctl_fd = pr->ack_fd = -1;
  pr->on_exit = on_exit;
  pr->ud = ud;
  if (dnt__perf_record_spawn(pr, loop, pid, hz, sched, 0, out) != 0) return -1;
  if (wait_recording(pr) != 0) {
    dnt_perf_record_stop(pr);
    return fail(pr->msg, sizeof pr->msg, "perf did not start recording process %d", pid);
  }
  return 0;
}

void dnt_perf_record_stop(struct dnt_perf_record *pr) {
  if (pr->running) uv_process_kill(&pr->proc, SIGINT);
}

int dnt_perf_record_ok(struct dnt_perf_record *pr, const char *out) {
  /* stopped by our SIGINT, perf exits 0 (or dies of it before installing its handler) */
  int ok = pr->started && (pr->status == 0 || pr->signal == SIGINT) && access(out, R_OK) == 0;
  if (ok) return 1;
  while (pr->err_len && pr->err_text[pr->err_len - 1] == '\n') pr->err_text[--pr->err_len] = '\0';
  fail(pr->msg, sizeof pr->msg, "perf record failed (exit %d%s%s)%s%s", pr->status, pr->signal ? ", signal " : "",
            pr->signal ? strsignal(pr->signal) : "", pr->err_len ? ":\n" : "", pr->err_text);
  return 0;
}

/* The runtime's perf map was already on (DOTNET_PerfMapEnabled set and not 0)? Also finds where
 * it writes the map: its TMPDIR, else /tmp, as it sees its own file system. */
static int read_env(const char *ep_path, char *tmpdir, size_t cap) {
  char **env = NULL;
  size_t n = 0;
  dsipc_status st;
  int on = 0;
  snprintf(tmpdir, cap, "/tmp");
  if (dsipc_process_env_get(ep_path, 10000, &env, &n, &st) != 0) return 0;
  for (size_t i = 0; i < n; i++) {
    const char *e = env[i];
    if (strncmp(e, "DOTNET_PerfMapEnabled=", 22) == 0 || strncmp(e, "COMPlus_PerfMapEnabled=", 23) == 0) {
      const char *v = strchr(e, '=') + 1;
      on = v[0] && strcmp(v, "0") != 0;
    } else if (strncmp(e, "TMPDIR=", 7) == 0 && e[7]) {
      snprintf(tmpdir, cap, "%s", e + 7);
    }
  }
  dsipc_env_free(env, n);
  return on;
}

void dnt_perfmap_begin(struct dnt_perfmap_run *m, int pid, int ns_pid, const char *ep_path) {
  char tmpdir[1024];
  memset(m, 0, sizeof *m);
  m->was_on = read_env(ep_path, tmpdir, sizeof tmpdir);
  snprintf(m->path, sizeof m->path, "/proc/%d/root%s/perf-%d.map", pid, tmpdir, ns_pid ? ns_pid : pid);
  m->existed = access(m->path, F_OK) == 0;
  if (m->was_on) return;
  dsipc_status st = {0};
  int e = dsipc_perfmap_enable(ep_path, DSIPC_PERFMAP_PERFMAP, 10000, &st);
  if (e == 0) {
    m->we_enabled = 1;
    m->pid = pid;
    dnt__perfmap_note(m, pid, ep_path); /* for the next run, should this one be killed */
  }
  else if (e == DSIPC_EUNKNOWNCMD)
    snprintf(m->warning, sizeof m->warning, "this runtime (before .NET 8) cannot turn its perf map on; JIT frames are named from the "
                "method events only (or start the app with DOTNET_PerfMapEnabled=1)");
  else
    snprintf(m->warning, sizeof m->warning, "cannot turn the perf map on: %s", st.msg);
}

/* A byte copy; 0 or -errno. */
static int copy_file(const char *from, const char *to) {
  FILE *in = fopen(from, "rbe");
  if (!in) return -errno;
  FILE *out = fopen(to, "wbe");
  if (!out) {
    int e = -errno;
    fclose(in);
    return e;
  }
  char buf[65536];
  size_t n;
  int rc = 0;
  while ((n = fread(buf, 1, sizeof buf, in)) > 0)
    if (fwrite(buf, 1, n, out) != n) rc = -EIO;
  if (ferror(in)) rc = -EIO;
  fclose(in);
  if (fclose(out) != 0 && !rc) rc = -EIO;
  return rc;
}

void dnt_perfmap_end(struct dnt_perfmap_run *m, const char *ep_path, int target_ended, const char *save_to) {
  m->warning[0] = '\0';
  if (save_to && (m->was_on || m->we_enabled)) {
    int rc = copy_file(m->path, save_to);
    m->saved = rc == 0;
    if (rc) {
      snprintf(m->warning, sizeof m->warning, "cannot copy the perf map '%s': %s", m->path, strerror(-rc));
      unlink(save_to); /* a half copy names frames wrongly */
    }
  }
  if (!m->we_enabled) return;
  m->we_enabled = 0;
  dsipc_status st = {0};
  if (dsipc_perfmap_disable(ep_path, 10000, &st) != 0 && !target_ended && !m->warning[0])
    snprintf(m->warning, sizeof m->warning, "cannot turn the perf map off again: %s", st.msg);
  if (!m->existed) unlink(m->path); /* the file this run made the runtime write */
  dnt__perfmap_unnote(m->pid);
}
