/* The wait's kind, and the views of a profile of waits: blocked time by (thread, blocked stack,
 * waker stack) as a table or JSON (dnt-perf.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perf-int.h"
#include "dnt-trace.h"

/* Whether a kernel frame (`[kernel]!SYM`) is one of syms (a trailing * matches a prefix). */
static int any_frame(const char *const *names, size_t n, const char *const *syms) {
  for (size_t i = 0; i < n; i++) {
    if (strncmp(names[i], "[kernel]!", 9) != 0) continue;
    const char *sym = names[i] + 9;
    for (const char *const *s = syms; *s; s++) {
      size_t len = strlen(*s);
      int prefix = (*s)[len - 1] == '*';
      if (prefix ? strncmp(sym, *s, len - 1) == 0 : strcmp(sym, *s) == 0) return 1;
    }
  }
  return 0;
}

/* .NET's Thread.Sleep is a timed wait on a condition variable (a futex), not a nanosleep: its
 * managed frame (from EventPipe's samples) says what the kernel's frames cannot, but only for a
 * wait its timer ended. Inside Thread.Sleep a thread also waits for the runtime to resume after
 * a suspension (the SampleProfiler's, every millisecond, or a GC's) and for the runtime's locks:
 * those end by a thread of the process, and are what the kernel's frames say. */
static int managed_sleep(const char *const *names, size_t n) {
  for (size_t i = 0; i < n; i++) {
    const char *bang = strchr(names[i], '!');
    if (bang && strcmp(bang + 1, "System.Threading.Thread.Sleep") == 0) return 1;
  }
  return 0;
}

const char *dnt_waits_kind(const char *const *names, size_t n, int woken_by_a_thread) {
  /* a fault first (a fault may read a file: its I/O is the fault's), then what the thread asked */
  static const char *const fault[] = {"do_page_fault", "handle_mm_fault", "exc_page_fault", "asm_exc_page_fault",
                                      NULL};
  static const char *const sleep[] = {"hrtimer_nanosleep", "do_nanosleep", "common_nsleep", "__x64_sys_clock_nanosleep",
                                      "__x64_sys_nanosleep", NULL};
  static const char *const futex[] = {"futex_wait*", "futex_do_wait", "__futex_wait", NULL};
  static const char *const poll[] = {"ep_poll", "do_epoll_wait", "sock_*", "tcp_*", "unix_stream_*", "do_sys_poll",
                                     "do_select", NULL};
  static const char *const io[] = {"vfs_read", "vfs_write", "ext4_*", "io_schedule*", "xfs_*", "btrfs_*", NULL};
  if (any_frame(names, n, fault)) return "page fault";
  if (any_frame(names, n, sleep) || (!woken_by_a_thread && managed_sleep(names, n))) return "sleep";
  if (any_frame(names, n, futex)) return "futex/monitor";
  if (any_frame(names, n, poll)) return "epoll/socket";
  if (any_frame(names, n, io)) return "file I/O";
  return "other";
}

/* One row of the views: blocked time of a thread by (blocked stack, waker stack), by names. */
struct row {
  uint64_t tid;
  uint32_t *frames; /* root first: the blocked stack, the separator, the waker's */
  size_t n, sep;
  uint64_t count;
  double ms;
  uint32_t hash;
};

struct rows {
  const struct dnt_profile *prof;
  struct row *v;
  size_t n, cap;
  uint32_t *table; /* index + 1 */
  size_t table_cap;
  int oom;
};

static int is_separator(const char *name) {
  return strncmp(name, "[woken by ", 10) == 0 || strcmp(name, "[no waker in the process]") == 0;
}

static void add_row(void *ud, uint64_t tid, const uint32_t *frames, size_t n, uint64_t samples, double ms) {
  struct rows *r = ud;
  if (r->oom || !samples) return;
  uint64_t key[DNT_PERF_MAX_FRAMES * 3 + 1];
  size_t k = 0, sep = n;
  key[k++] = tid;
  /* names, not addresses: two places in one function are one row */
  for (size_t i = 0; i < n && k < sizeof key / sizeof *key; i++) {
    const char *name = dnt_profile_name(r->prof, frames[i]);
    key[k++] = dnt__waits_hash_str(name);
    if (sep == n && is_separator(name)) sep = i;
  }
  uint32_t h = dnt__waits_hash_u64s(key, k);
  if ((r->n + 1) * 2 > r->table_cap) {
    size_t cap = r->table_cap ? 2 * r->table_cap : 256;
    uint32_t *t = calloc(cap, sizeof *t);
    if (!t) {
      r->oom = 1;
      return;
    }
    for (size_t i = 0; i < r->n; i++) {
      size_t j = r->v[i].hash & (cap - 1);
      while (t[j]) j = (j + 1) & (cap - 1);
      t[j] = (uint32_t)i + 1;
    }
    free(r->table);
    r->table = t;
    r->table_cap = cap;
  }
  size_t j = h & (r->table_cap - 1);
  for (; r->table[j]; j = (j + 1) & (r->table_cap - 1)) {
    struct row *o = &r->v[r->table[j] - 1];
    if (o->hash != h || o->tid != tid || o->n != n) continue;
    size_t i = 0;
    while (i < n && strcmp(dnt_profile_name(r->prof, o->frames[i]), dnt_profile_name(r->prof, frames[i])) == 0) i++;
    if (i == n) {
      o->count += samples;
      o->ms += ms;
      return;
    }
  }
  if (dnt__waits_grow((void **)&r->v, &r->cap, r->n, sizeof *r->v)) {
    r->oom = 1;
    return;
  }
  uint32_t *copy = malloc((n ? n : 1) * sizeof *copy);
  if (!copy) {
    r->oom = 1;
    return;
  }
  if (n) memcpy(copy, frames, n * sizeof *copy);
  r->v[r->n] = (struct row){tid, copy, n, sep, samples, ms, h};
  r->table[j] = (uint32_t)++r->n;
}

static int by_ms(const void *a, const void *b) {
  const struct row *x = a, *y = b;
  return (x->ms < y->ms) - (x->ms > y->ms);
}

static void rows_release(struct rows *r) {
  for (size_t i = 0; i < r->n; i++) free(r->v[i].frames);
  free(r->v);
  free(r->table);
}

static int rows_of(const struct dnt_profile *prof, struct rows *r) {
  memset(r, 0, sizeof *r);
  r->prof = prof;
  if (dnt_profile_each_stack(prof, add_row, r) != 0 || r->oom) {
    rows_release(r);
    return -ENOMEM;
  }
  if (r->n) qsort(r->v, r->n, sizeof *r->v, by_ms);
  return 0;
}

/* The frame that says where in the program a stack is: the innermost managed frame outside the
 * framework (System.*, Microsoft.*), else the innermost managed frame; "" when none. A frame
 * left as an address is no answer. */
static const char *where(const struct dnt_profile *prof, const uint32_t *frames, size_t n) {
  const char *framework = NULL;
  for (size_t i = n; i > 0; i--) {
    const char *name = dnt_profile_name(prof, frames[i - 1]);
    if (dnt_frame_kind(name) != 'M' || is_separator(name) || strstr(name, "!0x")) continue;
    if (strncmp(name, "System.", 7) == 0 || strncmp(name, "Microsoft.", 10) == 0) {
      if (!framework) framework = name;
      continue;
    }
    return name;
  }
  return framework ? framework : "";
}

static const char *row_kind(const struct dnt_profile *prof, const struct row *row) {
  const char *names[DNT_PERF_MAX_FRAMES * 2];
  size_t n = 0;
  for (size_t i = 0; i < row->sep && n < sizeof names / sizeof *names; i++) names[n++] = dnt_profile_name(prof, row->frames[i]);
  const char *sep = row->sep < row->n ? dnt_profile_name(prof, row->frames[row->sep]) : "";
  return dnt_waits_kind(names, n, strncmp(sep, "[woken by ", 10) == 0);
}

/* The waker's name as the separator says it: "setter" of "[woken by setter]"; "" for none. */
static void waker_of(const struct dnt_profile *prof, const struct row *row, char *buf, size_t cap) {
  const char *sep = row->sep < row->n ? dnt_profile_name(prof, row->frames[row->sep]) : "";
  if (strncmp(sep, "[woken by ", 10) == 0)
    snprintf(buf, cap, "%.*s", (int)(strlen(sep) - 11), sep + 10);
  else
    buf[0] = '\0';
}

#define BLOCKED_COLS 40

/* s cut to its last cols-1 characters after an ellipsis when longer than cols: a frame's name
 * says most at its end, the method ("...Threading.Monitor.Wait"). UTF-8 aware. */
static void keep_end(char *s, size_t cols) {
  size_t chars = 0;
  for (const char *p = s; *p; p++) chars += ((unsigned char)*p & 0xC0) != 0x80;
  if (chars <= cols) return;
  const char *from = s;
  for (size_t skip = chars - (cols - 1); skip;) /* past the first chars - (cols - 1) characters */
    if (((unsigned char)*++from & 0xC0) != 0x80) skip--;
  size_t len = strlen(from);
  memmove(s + 3, from, len + 1);
  memcpy(s, "\xe2\x80\xa6", 3); /* U+2026 */
}

int dnt_waits_write_table(const struct dnt_profile *prof, size_t top, FILE *fp) {
  struct rows r;
  if (rows_of(prof, &r) != 0) return -ENOMEM;
  double total = dnt_profile_total_ms(prof);
  fprintf(fp, "Blocked time by blocked stack and waker (%.1f ms in %llu waits)\n", total,
          (unsigned long long)dnt_profile_samples(prof));
  fprintf(fp, "  %10s %6s %8s  %-13s  %-16s %-40s  %-22s %s\n", "ms", "%", "count", "kind", "thread", "blocked in",
          "woken by", "waker in");
  for (size_t i = 0; i < r.n && (!top || i < top); i++) {
    const struct row *row = &r.v[i];
    const char *thread = dnt_profile_thread_name(prof, row->tid);
    char tid[32], waker[80];
    if (!thread) snprintf(tid, sizeof tid, "%llu", (unsigned long long)row->tid), thread = tid;
    waker_of(prof, row, waker, sizeof waker);
    const char *blocked_in = where(prof, row->frames, row->sep);
    const char *waker_in = row->sep < row->n ? where(prof, row->frames + row->sep + 1, row->n - row->sep - 1) : "";
    /* names of threads and frames are the target's words: escaped, then cut to their column */
    char safe_thread[17], safe_blocked[4 * 1200], safe_waker[23];
    dnt_text_escape(safe_thread, sizeof safe_thread, thread);
    dnt_text_escape(safe_blocked, sizeof safe_blocked, *blocked_in ? blocked_in : "-");
    keep_end(safe_blocked, BLOCKED_COLS); /* the columns after it stay in place */
    dnt_text_escape(safe_waker, sizeof safe_waker, *waker ? waker : "(none in the process)");
    fprintf(fp, "  %10.1f %5.1f%% %8llu  %-13s  %-16s %-40s  %-22s ", row->ms, total > 0 ? 100 * row->ms / total : 0,
            (unsigned long long)row->count, row_kind(prof, row), safe_thread, safe_blocked, safe_waker);
    dnt_text_put(fp, *waker_in ? waker_in : "-");
    fputc('\n', fp);
  }
  rows_release(&r);
  return 0;
}

static void json_frames(FILE *fp, const struct dnt_profile *prof, const uint32_t *frames, size_t n) {
  fputc('[', fp);
  for (size_t i = 0; i < n; i++) {
    if (i) fputc(',', fp);
    dnt_json_string(fp, dnt_profile_name(prof, frames[i]));
  }
  fputc(']', fp);
}

int dnt_waits_write_json(const struct dnt_profile *prof, size_t top, FILE *fp) {
  struct rows r;
  if (rows_of(prof, &r) != 0) return -ENOMEM;
  fprintf(fp, "{\"blocked_ms\":%.3f,\"waits\":%llu,\"rows\":[", dnt_profile_total_ms(prof),
          (unsigned long long)dnt_profile_samples(prof));
  for (size_t i = 0; i < r.n && (!top || i < top); i++) {
    const struct row *row = &r.v[i];
    const char *thread = dnt_profile_thread_name(prof, row->tid);
    char waker[80];
    waker_of(prof, row, waker, sizeof waker);
    size_t nwaker = row->sep < row->n ? row->n - row->sep - 1 : 0;
    const uint32_t *wf = row->frames + row->n - nwaker;
    fprintf(fp, "%s\n{\"kind\":", i ? "," : "");
    dnt_json_string(fp, row_kind(prof, row));
    fprintf(fp, ",\"tid\":%llu,\"thread\":", (unsigned long long)row->tid);
    dnt_json_string(fp, thread ? thread : "");
    fprintf(fp, ",\"ms\":%.3f,\"count\":%llu,\"blocked_in\":", row->ms, (unsigned long long)row->count);
    dnt_json_string(fp, where(prof, row->frames, row->sep));
    fputs(",\"waker\":", fp);
    if (*waker) dnt_json_string(fp, waker);
    else fputs("null", fp);
    fputs(",\"waker_in\":", fp);
    dnt_json_string(fp, where(prof, wf, nwaker));
    fputs(",\"blocked_stack\":", fp);
    json_frames(fp, prof, row->frames, row->sep);
    fputs(",\"waker_stack\":", fp);
    json_frames(fp, prof, wf, nwaker);
    fputc('}', fp);
  }
  fputs("\n]}\n", fp);
  rows_release(&r);
  return 0;
}
