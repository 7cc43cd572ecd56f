/* dntrace ps: the .NET processes that publish a diagnostic socket. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "builtin.h"
#include "dnt-trace.h"
#include "dsipc.h"
#include "session.h"
#include "options.h"
#include "target.h"
#include "util.h"

struct ps_options {
  int json;
};

static const struct dnt_option ps_options[] = {
    DNT_OPT_FLAG(0, "json", offsetof(struct ps_options, json), "print a JSON array instead of a table"),
    DNT_OPT_END(),
};

const struct dnt_usage usage_ps = {
    .synopsis = "dntrace ps [--json]",
    .summary = "List the .NET processes that publish a diagnostic socket",
    .options = ps_options,
};

/* A runtime that does not answer within this is shown without a version rather than holding up
 * the whole list (one deadline for all: they are asked at once). DNT_PS_TIMEOUT_MS overrides it
 * (the tests: what a runtime answers must not depend on how busy the machine is). */
#define PS_TIMEOUT_MS 1000
static uint64_t ps_timeout_ms(void) {
  const char *e = getenv("DNT_PS_TIMEOUT_MS");
  long v = e ? strtol(e, NULL, 10) : 0;
  return v > 0 ? (uint64_t)v : PS_TIMEOUT_MS;
}

struct ps_row {
  int pid, ns_pid;
  char name[256];
  char version[64];
  char *cmdline;
  char *socket;
  int stopped; /* stopped by a signal: not asked (it cannot answer) */
};

struct ps_list {
  struct ps_row *rows;
  size_t count, cap;
  size_t others; /* other users' .NET processes, not listed */
};

/* Is CAP_SYS_PTRACE (capability 19) in our effective set? Root without it (a container's root by
 * default) is refused every other user's process, which ps says rather than listing nothing. */
static int has_sys_ptrace(void) {
  FILE *fp = fopen("/proc/self/status", "re");
  if (!fp) return 1;
  char line[256];
  unsigned long long caps = ~0ull;
  while (fgets(line, sizeof line, fp))
    if (sscanf(line, "CapEff: %llx", &caps) == 1) break;
  fclose(fp);
  return (caps >> 19) & 1;
}

/* Whether /tmp holds the diagnostic socket of ep's process (its pid and start time make the
 * name): another user's .NET process, whose files and TMPDIR are not ours to read (most runtimes
 * use /tmp, whose names anyone may look up). */
static int others_socket(const dsipc_endpoint *ep) {
  char path[128];
  struct stat st;
  snprintf(path, sizeof path, "/tmp/dotnet-diagnostic-%d-%llu-socket", ep->ns_pid, (unsigned long long)ep->key);
  return ep->key && lstat(path, &st) == 0 && S_ISSOCK(st.st_mode);
}

static int collect_row(const dsipc_endpoint *ep, void *ud) {
  struct ps_list *l = ud;
  if (!ep->path[0]) { /* not ours to look into: not listed (it may not even be .NET) */
    if (geteuid() != 0) { /* another user's: counted when /tmp shows its runtime's socket */
      l->others += others_socket(ep);
      return 0;
    }
    if (has_sys_ptrace()) return 0; /* an outer namespace's: no news */
    char *safe = dnt_safe_text(ep->errmsg); /* the process's name is its own words */
    dnt_warning("%s", safe); /* root refused: a capability is missing, which ps would hide */
    free(safe);
    return 0;
  }
  if (l->count == l->cap) {
    l->cap = l->cap ? l->cap * 2 : 16;
    struct ps_row *grown = realloc(l->rows, l->cap * sizeof *grown);
    if (!grown) dnt_die(DNT_EXIT_FAILURE, "out of memory");
    l->rows = grown;
  }
  struct ps_row *r = &l->rows[l->count++];
  memset(r, 0, sizeof *r);
  r->pid = ep->host_pid;
  r->ns_pid = ep->ns_pid;
  r->socket = dnt_xstrdup(ep->path);
  dnt_process_name(ep->host_pid, r->name, sizeof r->name);
  return 0;
}

static void on_info(void *ud, const dsipc_status *st, const dsipc_process_info *pi) {
  struct ps_row *r = ud;
  if (st->code) return; /* silent or refusing: /proc's command line, no version */
  snprintf(r->version, sizeof r->version, "%s", pi->clr_product_version ? pi->clr_product_version : "");
  r->cmdline = dnt_xstrdup(pi->command_line ? pi->command_line : "");
}

/* Every process is asked at once, on one loop: a runtime that does not answer costs the whole
 * list PS_TIMEOUT_MS once, not once per process. */
static void ask_all(struct ps_list *l) {
  uv_loop_t loop;
  if (uv_loop_init(&loop) != 0) return;
  uint64_t timeout_ms = ps_timeout_ms();
  for (size_t i = 0; i < l->count; i++) {
    dsipc_status st;
    /* a stopped process (SIGSTOP, a debugger) answers nothing until it runs again: not waited for */
    if ((l->rows[i].stopped = dnt_process_stopped(l->rows[i].pid))) continue;
    dsipc_process_info_start(&loop, l->rows[i].socket, timeout_ms, on_info, &l->rows[i], NULL, &st);
  }
  dnt_loop_run(&loop, UV_RUN_DEFAULT, __func__);
  uv_loop_close(&loop);
  for (size_t i = 0; i < l->count; i++) {
    struct ps_row *r = &l->rows[i];
    if (r->cmdline) continue;
    /* not answered (its socket may be another user's): the version its mapped runtime says */
    if (!r->version[0]) dsipc_mapped_runtime_version(r->pid, r->version, sizeof r->version);
    char buf[4096];
    r->cmdline = dnt_xstrdup(dnt_process_cmdline(r->pid, buf, sizeof buf));
  }
}

static int by_pid(const void *a, const void *b) {
  return ((const struct ps_row *)a)->pid - ((const struct ps_row *)b)->pid;
}

/* Names, versions and command lines are the processes' own words: escaped, so that a process
 * of any user cannot write control sequences to the terminal of whoever runs ps (root). */
static void print_table(const struct ps_list *l) {
  char **safe = dnt_xmalloc((3 * l->count + 1) * sizeof *safe);
  int wname = 4, wver = 7;
  for (size_t i = 0; i < l->count; i++) {
    const struct ps_row *r = &l->rows[i];
    safe[3 * i] = dnt_safe_text(r->name);
    safe[3 * i + 1] = dnt_safe_text(r->version[0] ? r->version : "?");
    safe[3 * i + 2] = dnt_safe_text(r->cmdline);
    int n = (int)strlen(safe[3 * i]), v = (int)strlen(safe[3 * i + 1]);
    if (n > wname) wname = n;
    if (v > wver) wver = v;
  }
  printf("%7s  %-*s  %-*s  %s\n", "PID", wname, "NAME", wver, "RUNTIME", "COMMAND LINE");
  for (size_t i = 0; i < l->count; i++)
    printf("%7d  %-*s  %-*s  %s%s\n", l->rows[i].pid, wname, safe[3 * i], wver, safe[3 * i + 1],
           l->rows[i].stopped ? "[stopped] " : "", safe[3 * i + 2]);
  for (size_t i = 0; i < 3 * l->count; i++) free(safe[i]);
  free(safe);
}

static void print_json(const struct ps_list *l) {
  fputs("[", stdout);
  for (size_t i = 0; i < l->count; i++) {
    const struct ps_row *r = &l->rows[i];
    printf("%s\n  {\"pid\": %d, \"nsPid\": %d, \"name\": ", i ? "," : "", r->pid, r->ns_pid);
    dnt_json_string(stdout, r->name);
    fputs(", \"runtimeVersion\": ", stdout);
    if (r->version[0])
      dnt_json_string(stdout, r->version);
    else
      fputs("null", stdout);
    fputs(", \"commandLine\": ", stdout);
    dnt_json_string(stdout, r->cmdline);
    fputs(", \"socket\": ", stdout);
    dnt_json_string(stdout, r->socket);
    printf(", \"stopped\": %s", r->stopped ? "true" : "false");
    fputs("}", stdout);
  }
  fputs(l->count ? "\n]\n" : "]\n", stdout);
}

int cmd_ps(int argc, char **argv) {
  struct ps_options o = {0};
  int rc = dnt_options_parse(&usage_ps, "ps", argc, argv, &o);
  if (rc) return rc == DNT_OPTIONS_DONE ? 0 : rc;
  int json = o.json;

  struct ps_list l = {0};
  rc = dsipc_endpoint_list_all(collect_row, &l);
  if (rc < 0) {
    dnt_error("cannot list processes: %s", dsipc_strerror(rc));
    return DNT_EXIT_FAILURE;
  }
  ask_all(&l);
  if (l.count) qsort(l.rows, l.count, sizeof *l.rows, by_pid);
  if (json)
    print_json(&l);
  else
    print_table(&l);
  if (l.others) /* said, not listed: an empty list would read as "no .NET here" */
    dnt_warning("%zu .NET process%s of other users %s not listed: their files are theirs (run as their user, or as "
                "root)",
                l.others, l.others == 1 ? "" : "es", l.others == 1 ? "is" : "are");
  for (size_t i = 0; i < l.count; i++) {
    free(l.rows[i].cmdline);
    free(l.rows[i].socket);
  }
  free(l.rows);
  return 0;
}
