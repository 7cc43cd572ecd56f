/* dntrace dump: a core dump written by the runtime's own createdump (IPC GenerateCoreDump3,
 * falling back to 2 and 1), delivered to the path the user asked for even when the target lives
 * in another mount namespace, and checked afterwards.
 *
 * The runtime writes the dump itself, in its own filesystem view. From a sidecar or the host a
 * path of ours means nothing there, so the runtime is told to write into its own TMPDIR, which we
 * reach through /proc/PID/root; the file is then moved (or compressed) to where the user wants
 * it and the temporary removed. */
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
#include "target.h"
#include "util.h"

const char *const usage_dump[] = {
    "dntrace dump (-p PID | -n NAME | --diagnostic-port PATH) [--type TYPE] [-o PATH] [--diag] [--crashreport] [--compress]",
    "Write a core dump of a .NET process through its runtime's createdump",
    "    -p, --process-id PID     the process, by pid as seen from here",
    "    -n, --name NAME          the process, by name (an error if several match)",
    "    --diagnostic-port PATH   a runtime's socket given by path",
    "    --type TYPE              full (default), heap, mini or triage",
    "    -o, --output PATH        where the dump goes (default ./core_<yyyyMMdd>_<HHmmss>)",
    "    --diag                   createdump's diagnostic logging (on the target's console)",
    "    --crashreport            also write a crash report (<dump>.crashreport.json)",
    "    --compress               gzip the dump (PATH.gz)",
    "    -h, --help               show this help",
    NULL,
};

#define DUMP_TIMEOUT_MS (30ull * 60 * 1000) /* a full dump of a large heap takes minutes */

struct dumping {
  uv_loop_t *loop;
  dsipc_stream *stream;
  uv_timer_t ticker;
  const char *watch;  /* the file the runtime writes, as reachable from here */
  uint64_t start_ms;
  int tty, done, code;
  dsipc_status st;
};

static uint64_t now_ms(void) { return uv_hrtime() / 1000000u; }

static void progress(struct dumping *d, int final) {
  if (!d->tty) return;
  struct stat st;
  double mb = stat(d->watch, &st) == 0 ? (double)st.st_size / (1024.0 * 1024.0) : 0;
  uint64_t s = (now_ms() - d->start_ms) / 1000;
  printf("\r[%02llu:%02llu:%02llu] Writing dump %.1f MB   %s", (unsigned long long)(s / 3600),
         (unsigned long long)(s / 60 % 60), (unsigned long long)(s % 60), mb, final ? "\n" : "");
  fflush(stdout);
}

static void on_tick(uv_timer_t *t) { progress(t->data, 0); }

static void on_reply(void *ud, const dsipc_status *st, const uint8_t *payload, size_t n) {
  struct dumping *d = ud;
  (void)payload, (void)n;
  d->done = 1;
  d->code = st->code;
  d->st = *st;
  uv_timer_stop(&d->ticker);
}

static void on_end(void *ud, const dsipc_status *st) {
  struct dumping *d = ud;
  if (!d->done) {
    d->done = 1;
    d->code = st->code;
    d->st = *st;
  }
  uv_timer_stop(&d->ticker);
}

/* Asks for the dump, newest command first; runs the loop until the runtime has answered. */
static int request_dump(struct dumping *d, const char *socket, const char *runtime_path, uint32_t type, uint32_t flags) {
  static const dsipc_stream_cb cb = {on_reply, NULL, on_end};
  for (int version = 3; version >= 1; version--) {
    dsipc_buf req;
    dsipc_buf_init(&req);
    /* v1 only knows diagnostics on/off; the crash report needs v2 */
    uint32_t f = version == 1 ? (flags & 1) : flags;
    int rc = dsipc_encode_dump(&req, version, runtime_path, type, f);
    if (rc) {
      dsipc_buf_release(&req);
      snprintf(d->st.msg, sizeof d->st.msg, "cannot encode the dump request for '%.200s': %s", runtime_path,
               dsipc_strerror(rc));
      return rc;
    }
    d->done = 0;
    rc = dsipc_stream_open(d->loop, socket, -1, &req, DUMP_TIMEOUT_MS, &cb, d, &d->stream, &d->st);
    dsipc_buf_release(&req);
    if (rc) return rc;
    uv_timer_start(&d->ticker, on_tick, 1000, 1000);
    while (!d->done && uv_run(d->loop, UV_RUN_ONCE)) {}
    dsipc_stream_close(d->stream);
    d->stream = NULL;
    while (uv_run(d->loop, UV_RUN_NOWAIT)) {}
    if (d->code != DSIPC_EUNKNOWNCMD) return d->code;
  }
  return d->code;
}

/* What to tell a user whose dump failed, on top of the runtime's own words. */
static const char *hint_for(const char *msg) {
  if (strcasestr(msg, "ptrace") || strcasestr(msg, "not permitted") || strcasestr(msg, "permission"))
    return "createdump could not attach to the process: it needs ptrace permission (as root or the same user; in a "
           "container run with --cap-add=SYS_PTRACE and a shared PID namespace; check "
           "/proc/sys/kernel/yama/ptrace_scope and any seccomp profile)";
  if (strcasestr(msg, "space")) return "the target's filesystem is full";
  return NULL;
}

static const char *type_name(uint32_t t) {
  static const char *names[] = {"?", "mini", "heap", "triage", "full"};
  return t <= 4 ? names[t] : "?";
}

/* Copies (or gzips) src to dst through a buffer, then fsyncs. -1 with errno-based message. */
static int deliver(const char *src, const char *dst, int compress, char *why, size_t whylen) {
  int in = open(src, O_RDONLY | O_CLOEXEC);
  if (in < 0) {
    snprintf(why, whylen, "cannot read the runtime's dump '%s': %s", src, strerror(errno));
    return -1;
  }
  int out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (out < 0) {
    snprintf(why, whylen, "cannot write '%s': %s", dst, strerror(errno));
    close(in);
    return -1;
  }
  gzFile gz = NULL;
  if (compress && !(gz = gzdopen(dup(out), "wb6"))) {
    snprintf(why, whylen, "cannot start compressing into '%s'", dst);
    goto fail;
  }
  static char buf[1 << 20];
  ssize_t n;
  while ((n = read(in, buf, sizeof buf)) > 0) {
    if (gz ? gzwrite(gz, buf, (unsigned)n) != (int)n : write(out, buf, (size_t)n) != n) {
      snprintf(why, whylen, "cannot write '%s': %s", dst, strerror(errno ? errno : EIO));
      goto fail;
    }
  }
  if (n < 0) {
    snprintf(why, whylen, "cannot read the runtime's dump '%s': %s", src, strerror(errno));
    goto fail;
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
  close(in);
  return 0;
fail:
  if (gz) gzclose(gz);
  if (out >= 0) close(out);
  close(in);
  unlink(dst);
  return -1;
}

static int same_mount_namespace(int pid) {
  char a[64], b[64], path[64];
  ssize_t n1 = readlink("/proc/self/ns/mnt", a, sizeof a);
  snprintf(path, sizeof path, "/proc/%d/ns/mnt", pid);
  ssize_t n2 = readlink(path, b, sizeof b);
  return n1 > 0 && n1 == n2 && memcmp(a, b, (size_t)n1) == 0;
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
  enum { OPT_TYPE = 1000, OPT_DIAG, OPT_CRASHREPORT, OPT_COMPRESS, OPT_DIAG_PORT };
  static const struct option opts[] = {
      {"process-id", required_argument, NULL, 'p'},
      {"name", required_argument, NULL, 'n'},
      {"output", required_argument, NULL, 'o'},
      {"type", required_argument, NULL, OPT_TYPE},
      {"diag", no_argument, NULL, OPT_DIAG},
      {"crashreport", no_argument, NULL, OPT_CRASHREPORT},
      {"compress", no_argument, NULL, OPT_COMPRESS},
      {"diagnostic-port", required_argument, NULL, OPT_DIAG_PORT},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  char shortopts[32];
  dnt_shortopts(opts, shortopts, sizeof shortopts);
  int pid = 0, c_opt, compress = 0;
  uint32_t type = 4, flags = 0;
  const char *name = NULL, *output = NULL, *diag_port = NULL;
  optind = 1;
  while ((c_opt = getopt_long(argc, argv, shortopts, opts, NULL)) != -1) {
    switch (c_opt) {
    case 'p':
      if ((pid = dnt_opt_pid(optarg)) < 0) return DNT_EXIT_USAGE;
      break;
    case 'n': name = optarg; break;
    case 'o': output = optarg; break;
    case OPT_TYPE:
      if (strcasecmp(optarg, "full") == 0) type = 4;
      else if (strcasecmp(optarg, "heap") == 0) type = 2;
      else if (strcasecmp(optarg, "mini") == 0) type = 1;
      else if (strcasecmp(optarg, "triage") == 0) type = 3;
      else {
        dnt_error("--type: '%s' is not full, heap, mini or triage", optarg);
        return DNT_EXIT_USAGE;
      }
      break;
    case OPT_DIAG: flags |= 0x1; break;
    case OPT_CRASHREPORT: flags |= 0x4; break;
    case OPT_COMPRESS: compress = 1; break;
    case OPT_DIAG_PORT: diag_port = optarg; break;
    case 'h': dnt_print_usage(stdout, usage_dump); return 0;
    default: return dnt_usage_error("dump", c_opt, optopt, argv);
    }
  }
  if (optind < argc) {
    dnt_error("unexpected argument '%s'", argv[optind]);
    return DNT_EXIT_USAGE;
  }
  if ((pid > 0) + (name != NULL) + (diag_port != NULL) != 1) {
    dnt_error("name the process with exactly one of -p PID, -n NAME or --diagnostic-port PATH");
    return DNT_EXIT_USAGE;
  }

  struct dnt_target t;
  memset(&t, 0, sizeof t);
  int rc = diag_port ? dnt_target_from_port(diag_port, &t) : dnt_target_resolve(pid, name, &t);
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
    dnt_error(errno == EEXIST ? "cannot write '%s': it exists" : "cannot write '%s': %s", want, strerror(errno));
    return DNT_EXIT_FAILURE;
  }
  close(probe);
  unlink(want);

  /* Direct when the runtime sees our filesystem and no compression is wanted; otherwise a
   * temporary in the target's own TMPDIR, reached from here through /proc/PID/root. */
  int direct = !compress && !diag_port && same_mount_namespace(t.pid);
  char runtime_path[PATH_MAX + 64], here_path[PATH_MAX + 128];
  if (direct) {
    snprintf(runtime_path, sizeof runtime_path, "%s", want);
    snprintf(here_path, sizeof here_path, "%s", want);
  } else {
    char tmpdir[PATH_MAX / 2];
    target_tmpdir(&t, tmpdir, sizeof tmpdir);
    snprintf(runtime_path, sizeof runtime_path, "%s/dntrace-dump-%d-%ld", tmpdir, t.pid, (long)time(NULL));
    if (same_mount_namespace(t.pid))
      snprintf(here_path, sizeof here_path, "%s", runtime_path);
    else
      snprintf(here_path, sizeof here_path, "/proc/%d/root%s", t.pid, runtime_path);
  }

  printf("Writing a %s dump of process %d (%s) to %s\n", type_name(type), t.pid, t.name[0] ? t.name : "?", want);
  fflush(stdout);
  struct dumping d;
  memset(&d, 0, sizeof d);
  d.loop = uv_default_loop();
  d.watch = here_path;
  d.tty = isatty(1);
  d.start_ms = now_ms();
  uv_timer_init(d.loop, &d.ticker);
  d.ticker.data = &d;
  rc = request_dump(&d, t.ep.path, runtime_path, type, flags);
  progress(&d, 1);
  uv_close((uv_handle_t *)&d.ticker, NULL);
  while (uv_run(d.loop, UV_RUN_NOWAIT)) {}
  uv_loop_close(d.loop);
  int exit_code = DNT_EXIT_FAILURE;
  char why[512];
  if (rc) {
    const char *hint = hint_for(d.st.msg);
    if (rc == DSIPC_ECLOSED || rc == -ECONNRESET)
      dnt_error("process %d went away during the dump (%s)", t.pid, d.st.msg);
    else
      dnt_error("process %d could not write the dump: %s%s%s", t.pid, d.st.msg, hint ? "\n  hint: " : "", hint ? hint : "");
    if (!direct) unlink(here_path);
    return DNT_EXIT_FAILURE;
  }
  if (!direct) {
    if (deliver(here_path, want, compress, why, sizeof why) < 0) {
      dnt_error("%s (the runtime's dump stays at '%s')", why, here_path);
      return DNT_EXIT_FAILURE;
    }
    unlink(here_path);
    char report_here[PATH_MAX + 160], report_want[PATH_MAX + 96];
    snprintf(report_here, sizeof report_here, "%s.crashreport.json", here_path);
    snprintf(report_want, sizeof report_want, "%s.crashreport.json", want);
    if ((flags & 4) && access(report_here, F_OK) == 0) {
      if (deliver(report_here, report_want, 0, why, sizeof why) == 0) unlink(report_here);
    }
  }

  /* check it: an ELF core of the target, with its threads */
  struct dnt_core_info info;
  if (compress) {
    printf("Dump written: %s (gzip)\n", want);
    exit_code = 0;
  } else {
    int fd = open(want, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || dnt_core_check(fd, &info, why, sizeof why) < 0) {
      dnt_error("'%s' is not a usable core: %s", want, fd < 0 ? strerror(errno) : why);
    } else {
      printf("Dump written: %s, %.1f MB, %u threads, type %s, %u memory segments\n", want,
             (double)info.size / (1024.0 * 1024.0), info.threads, type_name(type), info.segments);
      exit_code = 0;
    }
    if (fd >= 0) close(fd);
  }
  return exit_code;
}
