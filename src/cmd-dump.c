/* dntrace dump: a core dump written by the runtime's own createdump (IPC GenerateCoreDump3,
 * falling back to 2 and 1), delivered to the path the user asked for even when the target lives
 * in another mount namespace, and checked afterwards.
 *
 * The runtime writes the dump itself, in its own filesystem view. From a sidecar or the host a
 * path of ours means nothing there, so the runtime is told to write into its own TMPDIR, which we
 * reach through /proc/PID/root; the file is then moved (or compressed) to where the user wants
 * it and the temporary removed.
 *
 * The target may be hostile (a compromised container), and whatever it leaves at the dump path
 * is read by us, often as root: the path is resolved inside the target's root only
 * (dsipc_open_in_root), opened without following a last symlink and without blocking, and must
 * be a regular file of the target's user, with one link, no larger than the target's peak memory,
 * and an ELF core of that very process (its pid in the first thread note). Anything else is
 * refused with one line and removed; only the bytes counted at the check are copied. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>
#include <zlib.h>

#include "builtin.h"
#include "dsipc.h"
#include "elfcore.h"
#include "session.h"
#include "options.h"
#include "target.h"
#include "util.h"

struct dump_options {
  struct dnt_session_target target;
  uint32_t type; /* createdump's: 4 full, 2 heap, 1 mini, 3 triage */
  const char *output;
  int diag, crashreport, compress, keep_on_error;
};

static int parse_type(void *field, const char *arg) {
  uint32_t *type = field;
  if (strcasecmp(arg, "full") == 0) *type = 4;
  else if (strcasecmp(arg, "heap") == 0) *type = 2;
  else if (strcasecmp(arg, "mini") == 0) *type = 1;
  else if (strcasecmp(arg, "triage") == 0) *type = 3;
  else return dnt_error("--type: '%s' is not full, heap, mini or triage", arg);
  return 0;
}

#define O(f) offsetof(struct dump_options, f)
static const struct dnt_option dump_options[] = {
    DNT_OPT_GROUP(dnt_options_target_port, O(target)),
    DNT_OPT_PARSE(0, "type", "TYPE", O(type), parse_type, "full (default), heap, mini or triage"),
    DNT_OPT_OUTPUT("PATH", O(output), "where the dump goes (default ./core_<yyyyMMdd>_<HHmmss>)"),
    DNT_OPT_FLAG(0, "diag", O(diag), "createdump's diagnostic logging (on the target's console)"),
    DNT_OPT_FLAG(0, "crashreport", O(crashreport), "also write a crash report (<dump>.crashreport.json)"),
    DNT_OPT_FLAG(0, "compress", O(compress), "gzip the dump (PATH.gz)"),
    DNT_OPT_FLAG(0, "keep-on-error", O(keep_on_error),
                 "when the dump cannot be delivered, keep the runtime's own file in the\n"
                 "target's TMPDIR (by default it is removed: that may be memory)"),
    DNT_OPT_END(),
};

const struct dnt_usage usage_dump = {
    .synopsis = "dntrace dump (-p PID | -n NAME | --diagnostic-port PATH) [--type TYPE] [-o PATH] [--diag] [--crashreport] [--compress] [--keep-on-error]",
    .summary = "Write a core dump of a .NET process through its runtime's createdump ('dump analyze CORE' reads one)",
    .options = dump_options,
};
#undef O

#define DUMP_TIMEOUT_MS (30ull * 60 * 1000) /* a full dump of a large heap takes minutes */
#define STOPPED_GIVE_UP_MS 5000             /* a target stopped this long will not dump */
#define PROGRESS_EVERY_MS 30000             /* off a terminal, a progress line this often */

#define NOTES_SLACK (64ull << 20) /* a core's headers and notes on top of its memory */
#define REPORT_MAX (64ull << 20)  /* a crash report is JSON of a few hundred KB */

/* What the dump is checked against, learnt from /proc before the request. */
struct dump_target {
  int root_fd;       /* /proc/PID/root (O_PATH): the target's filesystem, pinned for the whole dump */
  unsigned uid;      /* its effective uid: createdump writes as that user */
  int ns_pid;        /* its pid in its own namespace, as createdump records it */
  uint64_t peak;     /* VmPeak in bytes: no core of it holds more memory than that */
};

struct dumping {
  uv_loop_t *loop;
  uv_timer_t ticker;
  dsipc_call *call;
  int pid;              /* the target, as seen from here */
  uint64_t stopped_ms;  /* since when it is seen stopped (0: running) */
  uint64_t said_ms;     /* the last progress line off a terminal */
  const struct dump_target *dt;
  const char *watch;  /* the file the runtime writes, as the target sees it */
  uint64_t start_ms;
  int tty, done, code;
  dsipc_status st;
};

static uint64_t now_ms(void) { return uv_hrtime() / 1000000u; }

static void progress(struct dumping *d, int final) {
  if (!d->tty) return;
  struct stat st;
  double mb = 0;
  int fd = dsipc_open_in_root(d->dt->root_fd, d->watch, O_PATH, 0); /* O_PATH: never blocks */
  if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) mb = (double)st.st_size / (1024.0 * 1024.0);
  if (fd >= 0) close(fd);
  uint64_t s = (now_ms() - d->start_ms) / 1000;
  printf("\r[%02llu:%02llu:%02llu] Writing dump %.1f MB   %s", (unsigned long long)(s / 3600),
         (unsigned long long)(s / 60 % 60), (unsigned long long)(s % 60), mb, final ? "\n" : "");
  fflush(stdout);
}

/* createdump's text as one line: its lines joined with "; ", the trailing newline gone (escaped,
 * they printed as a literal \n). msg: cap bytes, rewritten in place (cut if the joins lengthen it). */
static void one_line(char *msg, size_t cap) {
  char in[sizeof ((dsipc_status *)0)->msg];
  snprintf(in, sizeof in, "%s", msg);
  size_t n = strlen(in), o = 0;
  while (n && (in[n - 1] == '\n' || in[n - 1] == '\r' || in[n - 1] == ' ')) in[--n] = '\0';
  for (const char *p = in; *p && o + 3 < cap; p++) {
    if (*p == '\r') continue;
    if (*p != '\n') {
      msg[o++] = *p;
      continue;
    }
    msg[o++] = ';';
    msg[o++] = ' ';
    while (p[1] == '\n' || p[1] == '\r' || p[1] == ' ') p++;
  }
  msg[o] = '\0';
}

static void on_dumped(void *ud, const dsipc_status *st);

static void on_tick(uv_timer_t *t) {
  struct dumping *d = t->data;
  uint64_t now = now_ms();
  progress(d, 0);
  if (!d->tty && now - d->said_ms >= PROGRESS_EVERY_MS) { /* a log, not a terminal: a line now and then */
    d->said_ms = now;
    printf("Still waiting for the runtime's dump (%llu s)\n", (unsigned long long)((now - d->start_ms) / 1000));
    fflush(stdout);
  }
  if (!dnt_process_stopped(d->pid)) {
    d->stopped_ms = 0;
    return;
  }
  if (!d->stopped_ms) d->stopped_ms = now;
  if (now - d->stopped_ms < STOPPED_GIVE_UP_MS) return;
  dsipc_call_cancel(d->call); /* its reply will not come while the process is stopped */
  d->call = NULL;
  dsipc_status st = {.code = DSIPC_ETIMEDOUT};
  snprintf(st.msg, sizeof st.msg, "the process is stopped (SIGSTOP): its runtime cannot write a dump "
                                  "until it runs again");
  on_dumped(d, &st);
}

static void on_dumped(void *ud, const dsipc_status *st) {
  struct dumping *d = ud;
  d->call = NULL; /* answered: the call is gone */
  d->done = 1;
  d->code = st->code;
  d->st = *st;
  uv_timer_stop(&d->ticker);
}

/* Asks for the dump (ipc/call.c: GenerateCoreDump3, falling back to 2 and 1); runs the loop, the
 * progress line ticking, until the runtime has answered. */
static int request_dump(struct dumping *d, const char *socket, const char *runtime_path, uint32_t type, uint32_t flags) {
  d->done = 0;
  int rc = dsipc_dump_start(d->loop, socket, runtime_path, type, flags, DUMP_TIMEOUT_MS, on_dumped, d, &d->call,
                            &d->st);
  if (rc) return rc;
  uv_timer_start(&d->ticker, on_tick, 1000, 1000);
  while (!d->done && dnt_loop_run(d->loop, UV_RUN_ONCE, __func__)) {}
  return d->code;
}

/* What to tell a user whose dump failed, on top of the runtime's own words. */
static const char *hint_for(const char *msg) {
  if (strcasestr(msg, "space")) return "the target's filesystem is full";
  /* createdump's "Could not create output file '...': Permission denied" is no ptrace matter */
  if (strcasestr(msg, "output file") || strcasestr(msg, "could not create"))
    return "createdump writes the file as the process's own user, which cannot write there: choose a directory "
           "that user can write";
  if (strcasestr(msg, "ptrace") || strcasestr(msg, "not permitted") || strcasestr(msg, "permission"))
    return "createdump could not attach to the process: it needs ptrace permission (as root or the same user; in a "
           "container run with --cap-add=SYS_PTRACE and a shared PID namespace; check "
           "/proc/sys/kernel/yama/ptrace_scope and any seccomp profile)";
  return NULL;
}

static const char *type_name(uint32_t t) {
  static const char *names[] = {"?", "mini", "heap", "triage", "full"};
  return t <= 4 ? names[t] : "?";
}

/* Reads the target's euid and VmPeak from /proc/PID/status into dt. 0, or -1 with errno. */
static int read_status(int pid, struct dump_target *dt) {
  char path[64], line[256];
  snprintf(path, sizeof path, "/proc/%d/status", pid);
  FILE *fp = fopen(path, "re");
  if (!fp) return -1;
  int have_uid = 0;
  unsigned long long kb;
  while (fgets(line, sizeof line, fp)) {
    unsigned r, e;
    if (sscanf(line, "Uid: %u %u", &r, &e) == 2) dt->uid = e, have_uid = 1;
    if (sscanf(line, "VmPeak: %llu kB", &kb) == 1 && kb * 1024 > dt->peak) dt->peak = kb * 1024;
  }
  fclose(fp);
  if (!have_uid) errno = ESRCH;
  return have_uid ? 0 : -1;
}

/* Opens what the runtime left at path (as the target sees it) for reading, if it is what a
 * createdump of this target writes: a regular file, of the target's user, one link, at most max
 * bytes. It is looked at through an O_PATH descriptor first, so a FIFO or a device is never
 * opened at all, then reopened for reading through /proc/self/fd: the same inode. On success
 * *size is the size checked, the only bytes to copy. Returns the fd, or -1 with why filled. */
static int open_checked(const struct dump_target *dt, const char *path, uint64_t max, uint64_t *size, char *why,
                        size_t whylen) {
  int pfd = dsipc_open_in_root(dt->root_fd, path, O_PATH, 0);
  if (pfd < 0) {
    snprintf(why, whylen, "cannot open it: %s", strerror(-pfd));
    return -1;
  }
  struct stat st;
  int fd = -1;
  if (fstat(pfd, &st) < 0) {
    snprintf(why, whylen, "cannot stat it: %s", strerror(errno));
  } else if (S_ISLNK(st.st_mode)) {
    snprintf(why, whylen, "it is a symbolic link, not the file createdump writes");
  } else if (!S_ISREG(st.st_mode)) {
    snprintf(why, whylen, "it is not a regular file (%s)", S_ISFIFO(st.st_mode) ? "a FIFO"
             : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device" : S_ISDIR(st.st_mode) ? "a directory" : "a socket");
  } else if (st.st_uid != dt->uid) {
    snprintf(why, whylen, "it belongs to uid %u, not to the target's uid %u", (unsigned)st.st_uid, dt->uid);
  } else if (st.st_nlink != 1) {
    snprintf(why, whylen, "it has %lu hard links (another file's?)", (unsigned long)st.st_nlink);
  } else if ((uint64_t)st.st_size > max) {
    snprintf(why, whylen, "it is %llu bytes, more than the process could hold", (unsigned long long)st.st_size);
  } else {
    char self[64];
    snprintf(self, sizeof self, "/proc/self/fd/%d", pfd);
    fd = open(self, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) snprintf(why, whylen, "cannot read it: %s", strerror(errno));
    *size = (uint64_t)st.st_size;
  }
  close(pfd);
  return fd;
}

/* Removes the entry at path inside the target's root (a planted link goes, not what it points
 * to); silent, as there is nothing more to tell when it fails. */
static void remove_in_root(const struct dump_target *dt, const char *path) {
  char dir[PATH_MAX];
  const char *slash = strrchr(path, '/');
  if (!slash || (size_t)(slash - path) >= sizeof dir) return;
  snprintf(dir, sizeof dir, "%.*s", slash == path ? 1 : (int)(slash - path), path);
  int dfd = dsipc_open_in_root(dt->root_fd, dir, O_PATH | O_DIRECTORY, 0);
  if (dfd < 0) return;
  unlinkat(dfd, slash + 1, 0);
  close(dfd);
}

/* Copies (or gzips) exactly size bytes of in to dst, then fsyncs. -1 with a message in why;
 * dst is then removed. A source that grows is not followed; one that shrinks is an error. */
static int deliver(int in, uint64_t size, const char *src_name, const char *dst, int compress, char *why,
                   size_t whylen) {
  int out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (out < 0) {
    snprintf(why, whylen, "cannot write '%s': %s", dst, strerror(errno));
    return -1;
  }
  gzFile gz = NULL;
  if (compress && !(gz = gzdopen(dup(out), "wb6"))) {
    snprintf(why, whylen, "cannot start compressing into '%s'", dst);
    goto fail;
  }
  static char buf[1 << 20];
  for (uint64_t left = size; left > 0;) {
    ssize_t n = read(in, buf, left < sizeof buf ? (size_t)left : sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      snprintf(why, whylen, "cannot read the runtime's dump '%s': %s", src_name,
               n < 0 ? strerror(errno) : "it shrank while being copied");
      goto fail;
    }
    if (gz ? gzwrite(gz, buf, (unsigned)n) != (int)n : write(out, buf, (size_t)n) != n) {
      snprintf(why, whylen, "cannot write '%s': %s", dst, strerror(errno ? errno : EIO));
      goto fail;
    }
    left -= (uint64_t)n;
  }
  if (gz && gzclose(gz) != Z_OK) {
    gz = NULL;
    snprintf(why, whylen, "cannot finish '%s': %s", dst, strerror(errno ? errno : EIO));
    goto fail;
  }
  gz = NULL;
  if (fsync(out) < 0 || close(out) < 0) {
    out = -1;
    snprintf(why, whylen, "cannot write '%s': %s", dst, strerror(errno));
    goto fail;
  }
  return 0;
fail:
  if (gz) gzclose(gz);
  if (out >= 0) close(out);
  unlink(dst);
  return -1;
}

/* The runtime's dump at path, checked (open_checked, then an ELF core whose first thread is the
 * target): its fd, size and core facts (info, caller's), or -1 with the error printed and the
 * file removed. */
static int take_core(const struct dump_target *dt, const char *path, const char *shown, uint64_t *size,
                     struct dnt_core_info *info) {
  char why[512];
  int fd = open_checked(dt, path, dt->peak + NOTES_SLACK, size, why, sizeof why);
  if (fd >= 0) {
    if (dnt_core_check(fd, info, why, sizeof why) == 0) {
      if (info->first_pid == (uint32_t)dt->ns_pid) return fd;
      snprintf(why, sizeof why, "it is a core of pid %u, not of the target (pid %d in its namespace)",
               info->first_pid, dt->ns_pid);
    }
    close(fd);
  }
  dnt_error("refusing the runtime's dump '%s': %s (removed)", shown, why);
  remove_in_root(dt, path);
  return -1;
}

static int same_mount_namespace(int pid) {
  char a[64], b[64], path[64];
  ssize_t n1 = readlink("/proc/self/ns/mnt", a, sizeof a);
  snprintf(path, sizeof path, "/proc/%d/ns/mnt", pid);
  ssize_t n2 = readlink(path, b, sizeof b);
  return n1 > 0 && n1 == n2 && memcmp(a, b, (size_t)n1) == 0;
}

/* Whether root_fd (the target's root) is our "/": a chrooted target in our mount namespace
 * would read an absolute path of ours in its own tree. */
static int same_root(int root_fd) {
  struct stat a, b;
  return stat("/", &a) == 0 && fstat(root_fd, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/* --crashreport: <dump>.crashreport.json beside the dump, checked as the dump is (but no ELF). */
static void deliver_report(const struct dump_target *dt, const char *runtime_path, const char *want, uint32_t flags) {
  if (!(flags & 4)) return;
  char report[PATH_MAX + 96], report_want[PATH_MAX + 96], why[512];
  snprintf(report, sizeof report, "%s.crashreport.json", runtime_path);
  snprintf(report_want, sizeof report_want, "%s.crashreport.json", want);
  int probe = dsipc_open_in_root(dt->root_fd, report, O_PATH, 0);
  if (probe == -ENOENT) return; /* the runtime wrote none */
  if (probe >= 0) close(probe);
  uint64_t size;
  int fd = open_checked(dt, report, REPORT_MAX, &size, why, sizeof why);
  if (fd < 0) {
    dnt_warning("refusing the crash report '%s': %s (removed)", report, why);
    remove_in_root(dt, report);
    return;
  }
  if (deliver(fd, size, report, report_want, 0, why, sizeof why) == 0)
    remove_in_root(dt, report);
  else
    dnt_warning("%s (the report stays in the target's '%s')", why, report);
  close(fd);
}

/* The target's TMPDIR as it sees it (the runtime's socket lives there too). */
static void target_tmpdir(const struct dnt_target *t, char *out, size_t cap) {
  const char *sock = t->ep.path;
  const char *inside = sock;
  char prefix[64];
  snprintf(prefix, sizeof prefix, "/proc/%d/root/", t->pid);
  if (strncmp(sock, prefix, strlen(prefix)) == 0) inside = sock + strlen(prefix) - 1;
  const char *slash = strrchr(inside, '/');
  snprintf(out, cap, "%.*s", slash && slash != inside ? (int)(slash - inside) : 4, slash && slash != inside ? inside : "/tmp");
}

int cmd_dump(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "analyze") == 0) return cmd_dump_analyze(argc - 1, argv + 1);
  struct dump_options o = {.type = 4};
  int rc = dnt_options_parse(&usage_dump, "dump", argc, argv, &o);
  if (rc) return rc == DNT_OPTIONS_DONE ? 0 : rc;
  int pid = o.target.pid, compress = o.compress;
  uint32_t type = o.type, flags = (o.diag ? 0x1 : 0) | (o.crashreport ? 0x4 : 0);
  const char *name = o.target.name, *output = o.output, *diag_port = o.target.port;

  struct dnt_target t;
  memset(&t, 0, sizeof t);
  rc = diag_port ? dnt_target_from_port(diag_port, &t) : dnt_target_resolve(pid, name, &t);
  if (rc) return rc;

  /* where the user wants it, absolute */
  char want[PATH_MAX + 64], cwd[PATH_MAX / 2];
  if (!output) {
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    char stamp[32];
    strftime(stamp, sizeof stamp, "core_%Y%m%d_%H%M%S", &tm);
    output = stamp;
    snprintf(want, sizeof want, "%s/%s%s", getcwd(cwd, sizeof cwd) ? cwd : ".", stamp, compress ? ".gz" : "");
  } else if (output[0] == '/') {
    snprintf(want, sizeof want, "%s%s", output, compress ? ".gz" : "");
  } else {
    snprintf(want, sizeof want, "%s/%s%s", getcwd(cwd, sizeof cwd) ? cwd : ".", output, compress ? ".gz" : "");
  }
  if (strlen(want) >= PATH_MAX) {
    dnt_error("the output path is too long");
    return DNT_EXIT_USAGE;
  }
  /* fail before the target is paused, not after: is the destination writable? */
  int probe = open(want, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (probe < 0) {
    dnt_error(errno == EEXIST ? "cannot write '%s': it exists (dump never overwrites a file)" : "cannot write '%s': %s",
              want, strerror(errno));
    return DNT_EXIT_FAILURE;
  }
  close(probe);
  unlink(want);

  struct dump_target dt = {.root_fd = -1, .ns_pid = t.ep.ns_pid > 0 ? t.ep.ns_pid : t.pid};
  char proc_root[64];
  snprintf(proc_root, sizeof proc_root, "/proc/%d/root", t.pid);
  dt.root_fd = open(proc_root, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (dt.root_fd < 0 || read_status(t.pid, &dt) < 0) {
    dnt_error("cannot reach the files of process %d ('%s'): %s", t.pid, proc_root, strerror(errno));
    if (dt.root_fd >= 0) close(dt.root_fd);
    return DNT_EXIT_FAILURE;
  }

  /* Direct when the runtime sees our filesystem (same mount namespace and root), runs as our user
   * and no compression is wanted; otherwise a temporary in the target's own TMPDIR, reached from
   * here through its root, then delivered by us. createdump writes as the target's user: root's
   * dump of another user's process would fail in a directory that user cannot write, and
   * elsewhere leave a core that user owns and may rewrite. Either way the file is looked at as
   * the target sees it. */
  int direct = !compress && !diag_port && dt.uid == (unsigned)geteuid() && same_mount_namespace(t.pid) &&
               same_root(dt.root_fd);
  char runtime_path[PATH_MAX + 64], shown[PATH_MAX + 128];
  if (direct) {
    snprintf(runtime_path, sizeof runtime_path, "%s", want);
    snprintf(shown, sizeof shown, "%s", want);
  } else {
    char tmpdir[PATH_MAX / 2];
    target_tmpdir(&t, tmpdir, sizeof tmpdir);
    snprintf(runtime_path, sizeof runtime_path, "%s/dntrace-dump-%d-%ld", tmpdir, t.pid, (long)time(NULL));
    snprintf(shown, sizeof shown, "%s%s", proc_root, runtime_path);
  }

  char *safe_name = dnt_safe_text(t.name[0] ? t.name : "?"); /* its command line's words */
  printf("Writing a %s dump of process %d (%s) to %s\n", type_name(type), t.pid, safe_name, want);
  free(safe_name);
  fflush(stdout);
  struct dumping d;
  memset(&d, 0, sizeof d);
  d.loop = uv_default_loop();
  d.dt = &dt;
  d.watch = runtime_path;
  d.tty = isatty(1);
  d.start_ms = d.said_ms = now_ms();
  d.pid = t.pid;
  uv_timer_init(d.loop, &d.ticker);
  d.ticker.data = &d;
  rc = request_dump(&d, t.ep.path, runtime_path, type, flags);
  progress(&d, 1);
  uv_close((uv_handle_t *)&d.ticker, NULL);
  while (dnt_loop_run(d.loop, UV_RUN_NOWAIT, __func__)) {}
  uv_loop_close(d.loop);
  int exit_code = DNT_EXIT_FAILURE, in = -1;
  char why[512];
  if (rc) {
    one_line(d.st.msg, sizeof d.st.msg);
    char *msg = dnt_safe_text(d.st.msg); /* v3 errors carry the runtime's own words */
    const char *hint = hint_for(msg);
    if (rc == -EACCES) { /* never asked: its socket is not ours to use (the message says why), no ptrace hint */
      dnt_error("process %d: %s", t.pid, msg);
      exit_code = DNT_EXIT_NOTARGET;
    } else if (rc == DSIPC_ECLOSED || rc == -ECONNRESET)
      dnt_error("process %d went away during the dump (%s)", t.pid, msg);
    else
      dnt_error("process %d could not write the dump: %s%s%s", t.pid, msg, hint ? "\n  hint: " : "", hint ? hint : "");
    free(msg);
    remove_in_root(&dt, runtime_path);
    goto out;
  }
  read_status(t.pid, &dt); /* the peak as it is now, if the process is still there */
  uint64_t size;
  struct dnt_core_info info;
  if ((in = take_core(&dt, runtime_path, shown, &size, &info)) < 0) goto out;
  if (!direct) {
    if (deliver(in, size, shown, want, compress, why, sizeof why) < 0) {
      if (o.keep_on_error) {
        dnt_error("%s (the runtime's dump stays at '%s': --keep-on-error)", why, shown);
      } else { /* a whole core in the target's TMPDIR, which in a container may be its memory */
        remove_in_root(&dt, runtime_path);
        dnt_error("%s; the runtime's dump (%.1f MB in the target's TMPDIR) is removed (--keep-on-error keeps it)",
                  why, (double)size / (1024.0 * 1024.0));
      }
      goto out;
    }
    remove_in_root(&dt, runtime_path);
    deliver_report(&dt, runtime_path, want, flags);
  }

  /* check what the user gets: an ELF core of the target, with its threads (written directly,
   * it is the file take_core checked, read through the same descriptor) */
  if (compress) { /* the core checked before it was compressed (take_core): the same report */
    printf("Dump written: %s (gzip), %.1f MB uncompressed, %u threads, type %s, %u memory segments\n", want,
           (double)info.size / (1024.0 * 1024.0), info.threads, type_name(type), info.segments);
    exit_code = 0;
  } else {
    int fd = direct ? dup(in) : open(want, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 || dnt_core_check(fd, &info, why, sizeof why) < 0) {
      dnt_error("'%s' is not a usable core: %s", want, fd < 0 ? strerror(errno) : why);
    } else {
      printf("Dump written: %s, %.1f MB, %u threads, type %s, %u memory segments\n", want,
             (double)info.size / (1024.0 * 1024.0), info.threads, type_name(type), info.segments);
      exit_code = 0;
    }
    if (fd >= 0) close(fd);
  }
out:
  if (in >= 0) close(in);
  close(dt.root_fd);
  return exit_code;
}
