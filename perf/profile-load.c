/* `perf script` output into a dnt_profile (dnt-perf.h). */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "dnt-perf.h"
#include "dnt-trace.h"

/* Native names by address: open addressing, names in one pool. */
struct ipname {
  uint64_t ip;
  uint32_t off; /* into pool, + 1; 0 = empty slot */
};

struct dnt_perf_reader {
  struct dnt_profile *prof;
  int pid;
  char event[64];
  double sample_ms;
  struct dnt_symtab *perfmap;
  dnt_perf_script *parser;
  dnt_perf_maps *maps;
  struct ipname *names;
  size_t nnames, names_cap;
  char *pool;
  size_t pool_len, pool_cap;
  uint64_t *ips;
  uint64_t used, first_time;
  int failed;
  dnt_perf_observe_fn observe;
  void *observe_ud;
};

static size_t slot(const struct dnt_perf_reader *r, uint64_t ip) {
  size_t mask = r->names_cap - 1, i = (size_t)((ip * 0x9E3779B97F4A7C15ull) >> 20) & mask;
  while (r->names[i].off && r->names[i].ip != ip) i = (i + 1) & mask;
  return i;
}

static int grow_names(struct dnt_perf_reader *r) {
  size_t cap = r->names_cap ? r->names_cap * 2 : 4096;
  struct ipname *old = r->names;
  size_t old_cap = r->names_cap;
  r->names = calloc(cap, sizeof *r->names);
  if (!r->names) {
    r->names = old;
    return -ENOMEM;
  }
  r->names_cap = cap;
  for (size_t i = 0; i < old_cap; i++)
    if (old[i].off) r->names[slot(r, old[i].ip)] = old[i];
  free(old);
  return 0;
}

static const char *base_name(const char *path) {
  const char *slash = strrchr(path, '/');
  return slash ? slash + 1 : path;
}

/* Remembers what perf said of a native or kernel frame at ip (the first word wins). */
static int note_native(struct dnt_perf_reader *r, uint64_t ip, const dnt_perf_frame *f) {
  if (!f->dso || strstr(f->dso, "doublemapper")) return 0; /* JIT code: the tables name it */
  if ((r->nnames + 1) * 2 > r->names_cap && grow_names(r) != 0) return -ENOMEM;
  size_t i = slot(r, ip);
  if (r->names[i].off) return 0;
  char name[1024];
  int kernel = f->dso[0] == '[' && strstr(f->dso, "kernel");
  const char *lib = kernel ? "[kernel]" : base_name(f->dso);
  if (f->sym)
    snprintf(name, sizeof name, "%s!%s", lib, f->sym);
  else
    snprintf(name, sizeof name, "%s!0x%llx", lib, (unsigned long long)f->addr);
  size_t n = strlen(name) + 1;
  if (r->pool_len + n > r->pool_cap) {
    size_t cap = r->pool_cap ? r->pool_cap * 2 : 1 << 16;
    while (cap < r->pool_len + n) cap *= 2;
    char *grown = realloc(r->pool, cap);
    if (!grown) return -ENOMEM;
    r->pool = grown;
    r->pool_cap = cap;
  }
  memcpy(r->pool + r->pool_len, name, n);
  r->names[i] = (struct ipname){ip, (uint32_t)r->pool_len + 1};
  r->pool_len += n;
  r->nnames++;
  return 0;
}

static int on_mmap(void *ud, const dnt_perf_mmap *m) {
  struct dnt_perf_reader *r = ud;
  if (r->pid && m->pid != r->pid) return 0;
  return dnt_perf_maps_add(r->maps, m);
}

/* A thread's name, not perf's ":TID", which it prints for a thread whose name it has not seen
 * yet (a thread sampled before perf read its COMM record). */
static int is_name(const char *comm) {
  if (!comm || !*comm) return 0;
  if (comm[0] != ':') return 1;
  for (const char *c = comm + 1; *c; c++)
    if (*c < '0' || *c > '9') return 1;
  return 0;
}

/* The sample's frames as addresses into ips (room for DNT_PERF_MAX_FRAMES), their native names
 * noted. n, or -ENOMEM. */
static int addresses(struct dnt_perf_reader *r, const dnt_perf_sample *s, uint64_t *ips) {
  size_t n = 0;
  for (size_t i = 0; i < s->nframes; i++) {
    uint64_t ip = dnt_perf_maps_absolute(r->maps, s->pid, &s->frames[i]);
    if (!ip) ip = s->frames[i].addr; /* a file mapped, not at that offset: keep what perf said */
    if (note_native(r, ip, &s->frames[i]) != 0) return -ENOMEM;
    ips[n++] = ip;
  }
  return (int)n;
}

int dnt_perf_reader_addresses(dnt_perf_reader *r, const dnt_perf_sample *s, uint64_t *ips) {
  return addresses(r, s, ips);
}

static int on_sample(void *ud, const dnt_perf_sample *s) {
  struct dnt_perf_reader *r = ud;
  if (r->observe) r->observe(r->observe_ud, s);
  if ((r->pid && s->pid != r->pid) || !dnt_perf_event_is(s->event, r->event)) return 0;
  int got = addresses(r, s, r->ips);
  if (got < 0) return got;
  size_t n = (size_t)got;
  if (!r->used) {
    r->first_time = s->time_ns;
    dnt_profile_set_clock(r->prof, r->sample_ms, 1000000000u, s->time_ns);
  }
  r->used++;
  dnt_profile_add_ips(r->prof, (uint64_t)s->tid, s->time_ns, r->ips, n);
  if (is_name(s->comm) && dnt_profile_name_thread(r->prof, (uint64_t)s->tid, s->comm) != 0) return -ENOMEM;
  return 0;
}

/* The chain's links after the trace's method table: the runtime's perf map (JIT code the method
 * events did not cover), then what perf itself named (native and kernel code). */
static int perfmap_name(void *ud, uint64_t ip, int leaf, char *buf, size_t cap) {
  struct dnt_perf_reader *r = ud;
  const char *raw = r->perfmap ? dnt_symtab_find(r->perfmap, leaf ? ip : ip - 1) : NULL;
  if (!raw) return 0;
  dnt_perfmap_frame_name(raw, buf, cap);
  return 1;
}

static int perf_symbol_name(void *ud, uint64_t ip, int leaf, char *buf, size_t cap) {
  struct dnt_perf_reader *r = ud;
  (void)leaf;
  if (r->names_cap) {
    size_t i = slot(r, ip);
    if (r->names[i].off) {
      snprintf(buf, cap, "%s", r->pool + r->names[i].off - 1);
      return 1;
    }
  }
  return 0;
}

dnt_perf_reader *dnt_perf_reader_new(struct dnt_profile *prof, int pid, const char *event, double sample_ms,
                                     struct dnt_symtab *perfmap) {
  struct dnt_perf_reader *r = calloc(1, sizeof *r);
  if (!r) return NULL;
  r->prof = prof;
  r->pid = pid;
  snprintf(r->event, sizeof r->event, "%s", event);
  r->sample_ms = sample_ms;
  r->perfmap = perfmap;
  static const dnt_perf_script_cb cb = {on_sample, on_mmap};
  r->parser = dnt_perf_script_new(&cb, r);
  r->maps = dnt_perf_maps_new();
  r->ips = malloc(DNT_PERF_MAX_FRAMES * sizeof *r->ips);
  if (!r->parser || !r->maps || !r->ips) {
    dnt_perf_reader_free(r);
    return NULL;
  }
  if (dnt_profile_add_resolver(prof, perfmap_name, r) != 0 || dnt_profile_add_resolver(prof, perf_symbol_name, r) != 0) {
    dnt_perf_reader_free(r);
    return NULL;
  }
  return r;
}

void dnt_perf_reader_free(dnt_perf_reader *r) {
  if (!r) return;
  dnt_perf_script_free(r->parser);
  dnt_perf_maps_free(r->maps);
  free(r->names);
  free(r->pool);
  free(r->ips);
  free(r);
}

int dnt_perf_reader_feed(dnt_perf_reader *r, const char *buf, size_t n) {
  return dnt_perf_script_feed(r->parser, buf, n);
}

int dnt_perf_reader_finish(dnt_perf_reader *r) { return dnt_perf_script_finish(r->parser); }

void dnt_perf_reader_stats(const dnt_perf_reader *r, struct dnt_perf_script_stats *st, uint64_t *samples_used) {
  dnt_perf_script_stats(r->parser, st);
  *samples_used = r->used;
}

void dnt_perf_reader_observe(dnt_perf_reader *r, dnt_perf_observe_fn fn, void *ud) {
  r->observe = fn;
  r->observe_ud = ud;
}

/* Appends one line to the warnings (cut when the room is full: the first ones matter most). */
static void warn(struct dnt_perf_load_info *info, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void warn(struct dnt_perf_load_info *info, const char *fmt, ...) {
  size_t len = strlen(info->warnings);
  if (len + 2 >= sizeof info->warnings) return;
  if (len) info->warnings[len++] = '\n';
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(info->warnings + len, sizeof info->warnings - len, fmt, ap);
  va_end(ap);
}

/* What perf script is asked to print of the tracepoints. */
enum trace_fields {
  TRACE_ABSENT, /* the file has none: perf script refuses to be asked for them */
  TRACE_NONE,   /* nothing: nobody reads them, or they were read from the file */
  TRACE_FIELDS, /* their fields without their chains: the switches' chains are most of the text
                 * (and of perf's time writing it) and only waits reads them */
  TRACE_CHAINS, /* their fields and their call chains (waits) */
};

/* The last line perf wrote to fd (its stderr, from the start), trimmed and escaped for a terminal
 * (it quotes the file); "" when there is none. */
static void last_line(int fd, char *out, size_t cap) {
  out[0] = '\0';
  char tail[1024];
  off_t end = fd >= 0 ? lseek(fd, 0, SEEK_END) : -1;
  if (end <= 0) return;
  off_t from = end > (off_t)sizeof tail - 1 ? end - (off_t)sizeof tail + 1 : 0;
  ssize_t n = pread(fd, tail, (size_t)(end - from), from);
  if (n <= 0) return;
  tail[n] = '\0';
  while (n > 0 && (tail[n - 1] == '\n' || tail[n - 1] == '\r' || tail[n - 1] == ' ')) tail[--n] = '\0';
  char *line = strrchr(tail, '\n');
  dnt_text_escape(out, cap, line ? line + 1 : tail);
}

/* `perf script` on data, its output fed to the reader as it comes; once perf runs, the sched
 * tracepoints of the file open at `sched` (one dnt_perfdata_sched_fd checked, or -1) go to the reader's observer
 * meanwhile. 0, or -1 with info->error. */
static int run_perf_script(const char *data, dnt_perf_reader *reader, enum trace_fields trace,
                           int sched, struct dnt_perf_load_info *info) {
  int fds[2];
  if (pipe(fds) != 0) {
    snprintf(info->error, sizeof info->error, "cannot create a pipe: %s", strerror(errno));
    return -1;
  }
  /* perf's own words on failure: its stderr in a file of memory, read after it exited (a second
   * pipe could fill while the first is read) */
  int err_fd = memfd_create("perf-script-stderr", MFD_CLOEXEC);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0); /* timing: the figure info->script_seconds reports */
  fflush(NULL); /* a child must not inherit unwritten output */
  pid_t pid = fork();
  if (pid < 0) {
    snprintf(info->error, sizeof info->error, "cannot start perf script: %s", strerror(errno));
    close(fds[0]);
    close(fds[1]);
    if (err_fd >= 0) close(err_fd);
    return -1;
  }
  if (pid == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    close(fds[1]);
    int err = err_fd >= 0 ? err_fd : open("/dev/null", O_WRONLY);
    if (err >= 0) dup2(err, 2);
    static char *const trace_arg[] = {NULL, "trace:", "trace:comm,pid,tid,time,event,trace",
                                      "trace:comm,pid,tid,time,event,trace,ip,sym,dso"};
    /* waits reads the cpu-clock samples only as "this thread ran then": their chains, a fifth of
     * the text, are left out */
    /* the period: each cpu-clock sample's share of CPU time, which perf adjusts to keep its
     * frequency (a count times the nominal period misses it on a loaded machine) */
    const char *sw_arg = trace == TRACE_CHAINS ? "sw:comm,pid,tid,time,period,event"
                                               : "sw:comm,pid,tid,time,period,event,ip,sym,dso";
    char *const argv[] = {"perf", "script", "-i", (char *)data, "--ns", "--show-mmap-events",
                          "-F", (char *)sw_arg, trace_arg[trace] ? "-F" : NULL,
                          trace_arg[trace], NULL};
    execvp("perf", argv);
    _exit(127);
  }
  close(fds[1]);
  /* perf writes ahead (up to a MiB, where the system allows) while the file's tracepoints are read */
  int oom = 0;
  char cut[256] = "";
  if (sched >= 0) {
    (void)fcntl(fds[0], F_SETPIPE_SZ, 1 << 20);
    char msg[256];
    struct dnt_perfdata_stats st;
    /* checked whole before it was chosen: only memory, or the file cut meanwhile, can fail it now */
    int rc = dnt_perfdata_sched_fd(sched, reader->observe, reader->observe_ud, &st, msg, sizeof msg);
    if (rc == -ENOMEM) oom = 1;
    else if (rc) snprintf(cut, sizeof cut, "%s", msg);
    info->sched_read = st.switches + st.wakings;
  }
  /* the heap, not a static buffer: dntrace serve runs several of these at once on its thread pool */
  char *buf = malloc(256 * 1024);
  ssize_t n;
  uint64_t bytes = 0;
  if (!buf) oom = 1;
  while (buf && (n = read(fds[0], buf, 256 * 1024)) > 0) {
    bytes += (uint64_t)n;
    if (!oom && dnt_perf_reader_feed(reader, buf, (size_t)n) != 0) oom = 1;
  }
  if (!buf) kill(pid, SIGTERM); /* nothing reads its output: it would wait on the pipe for ever */
  free(buf);
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!oom && dnt_perf_reader_finish(reader) != 0) oom = 1;
  clock_gettime(CLOCK_MONOTONIC, &t1);
  info->script_bytes = bytes;
  info->script_seconds = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
  if (oom) {
    snprintf(info->error, sizeof info->error, "out of memory reading perf script");
    return -1;
  }
  if (cut[0]) {
    snprintf(info->error, sizeof info->error, "cannot read '%s': %s", data, cut);
    return -1;
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    char said[512], how[64];
    last_line(err_fd, said, sizeof said);
    if (WIFSIGNALED(status))
      snprintf(how, sizeof how, "killed by signal %d, %s", WTERMSIG(status), strsignal(WTERMSIG(status)));
    else
      snprintf(how, sizeof how, "exit %d", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    snprintf(info->error, sizeof info->error, "perf script failed on '%s' (%s)%s%s", data, how, said[0] ? ": " : "",
             said);
    if (err_fd >= 0) close(err_fd);
    return -1;
  }
  if (err_fd >= 0) close(err_fd);
  return 0;
}

/* When data is cut short, its whole records mended into a temporary (dnt_perfdata_mend), whose
 * path goes to tmp (cap bytes; the caller unlinks it) and replaces *data; a warning says how much
 * was read. 0 (mended or whole), or -1 with info->error. */
static int mend_if_cut(const char **data, char *tmp, size_t cap, struct dnt_perf_load_info *info) {
  tmp[0] = '\0';
  int fd = open(*data, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0; /* perf script says why */
  const char *dir = getenv("TMPDIR");
  snprintf(tmp, cap, "%s/dntrace-mended-XXXXXX", dir && *dir ? dir : "/tmp");
  int out = mkostemp(tmp, O_CLOEXEC);
  uint64_t kept, claimed;
  char msg[256];
  int rc = out >= 0 ? dnt_perfdata_mend(fd, out, &kept, &claimed, msg, sizeof msg) : -errno;
  if (out < 0) snprintf(msg, sizeof msg, "cannot make a mended copy in '%s': %s", tmp, strerror(errno));
  close(fd);
  if (out >= 0 && close(out) != 0 && rc == 0) rc = -EIO, snprintf(msg, sizeof msg, "cannot write its mended copy");
  if (rc != 0) {
    if (out >= 0) unlink(tmp);
    tmp[0] = '\0';
  }
  if (rc == 1) return 0;
  if (rc < 0) {
    snprintf(info->error, sizeof info->error, "'%s' is cut short, and %s", *data, msg);
    return -1;
  }
  warn(info, "'%s' is cut short: read its whole records, %llu of the %llu bytes it should hold (%.0f%%)", *data,
       (unsigned long long)kept, (unsigned long long)claimed, claimed ? 100.0 * (double)kept / (double)claimed : 0);
  *data = tmp;
  return 0;
}

dnt_perf_reader *dnt_perf_load(struct dnt_profile *prof, const char *data, const char *map, double sample_ms,
                               struct dnt_symtab *perfmap, dnt_perf_observe_fn fn, void *ud,
                               struct dnt_perf_load_info *info) {
  memset(info, 0, sizeof *info);
  if (map && access(map, R_OK) == 0) {
    size_t bad = 0;
    int rc = dnt_perfmap_load(perfmap, map, &bad);
    if (rc < 0) warn(info, "cannot read the perf map '%s': %s", map, strerror(-rc));
  }
  dnt_perf_reader *r = dnt_perf_reader_new(prof, 0, "cpu-clock", sample_ms, perfmap);
  if (!r) {
    snprintf(info->error, sizeof info->error, "out of memory");
    return NULL;
  }
  char mended[4200];
  if (mend_if_cut(&data, mended, sizeof mended, info) != 0) {
    dnt_perf_reader_free(r);
    return NULL;
  }
  /* the tracepoints matter to an observer alone: read from the file when it can be, else printed */
  if (fn) dnt_perf_reader_observe(r, fn, ud);
  enum trace_fields trace = TRACE_FIELDS;
  struct dnt_perfdata_stats st;
  char msg[256];
  int fd = open(data, O_RDONLY | O_CLOEXEC);
  if (fd >= 0 && dnt_perfdata_sched_fd(fd, NULL, NULL, &st, msg, sizeof msg) == 0 && (!fn || !st.other_tracepoint_events))
    trace = st.tracepoint_events ? TRACE_NONE : TRACE_ABSENT;
  int rc = run_perf_script(data, r, trace, trace != TRACE_FIELDS && fn ? fd : -1, info);
  if (fd >= 0) close(fd);
  if (mended[0]) unlink(mended);
  if (rc < 0) {
    dnt_perf_reader_free(r);
    return NULL;
  }
  return r;
}

int dnt_perf_reader_run(dnt_perf_reader *r, const char *data, const char *map, struct dnt_perf_load_info *info) {
  memset(info, 0, sizeof *info);
  if (map && r->perfmap && access(map, R_OK) == 0) {
    size_t bad = 0;
    int rc = dnt_perfmap_load(r->perfmap, map, &bad);
    if (rc < 0) warn(info, "cannot read the perf map '%s': %s", map, strerror(-rc));
  }
  char mended[4200];
  if (mend_if_cut(&data, mended, sizeof mended, info) != 0) return -1;
  int rc = run_perf_script(data, r, TRACE_CHAINS, -1, info);
  if (mended[0]) unlink(mended);
  return rc;
}

/* A thread perf never learnt the name of (it prints ":TID" for one sampled before its COMM
 * record) is named as the kernel names it now, when it is still there (perf's ids are host ids). */
int dnt_perf_name_threads(struct dnt_profile *prof, int pid) {
  for (size_t t = 0; t < dnt_profile_nthreads(prof); t++) {
    uint64_t tid = dnt_profile_thread_id(prof, t);
    if (dnt_profile_thread_name(prof, tid)) continue;
    char name[64];
    if (dsipc_thread_comm(pid, (unsigned long long)tid, name, sizeof name)[0] && dnt_profile_name_thread(prof, tid, name) != 0)
      return -1;
  }
  return 0;
}
