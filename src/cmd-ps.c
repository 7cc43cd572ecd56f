/* dntrace ps: the .NET processes that publish a diagnostic socket. */
#include <stdlib.h>
#include <string.h>

#include "builtin.h"
#include "dsipc.h"
#include "target.h"
#include "util.h"

const char *const usage_ps[] = {
    "dntrace ps [--json]",
    "List the .NET processes that publish a diagnostic socket",
    "    --json        print a JSON array instead of a table",
    "    -h, --help    show this help",
    NULL,
};

/* A runtime that does not answer within this is shown without a version rather than holding up
 * the whole list. */
#define PS_TIMEOUT_MS 1000

struct ps_row {
  int pid, ns_pid;
  char name[256];
  char version[64];
  char *cmdline;
  char *socket;
};

struct ps_list {
  struct ps_row *rows;
  size_t count, cap;
};

static int collect_row(const dsipc_endpoint *ep, void *ud) {
  struct ps_list *l = ud;
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

  dsipc_process_info pi;
  dsipc_status st;
  if (dsipc_process_info_get(ep->path, PS_TIMEOUT_MS, &pi, &st) == 0) {
    snprintf(r->version, sizeof r->version, "%s", pi.clr_product_version ? pi.clr_product_version : "");
    r->cmdline = dnt_xstrdup(pi.command_line ? pi.command_line : "");
    dsipc_process_info_release(&pi);
  }
  if (!r->cmdline) {
    char buf[4096];
    r->cmdline = dnt_xstrdup(dnt_process_cmdline(ep->host_pid, buf, sizeof buf));
  }
  return 0;
}

static int by_pid(const void *a, const void *b) {
  return ((const struct ps_row *)a)->pid - ((const struct ps_row *)b)->pid;
}

static void print_table(const struct ps_list *l) {
  int wname = 4, wver = 7;
  for (size_t i = 0; i < l->count; i++) {
    int n = (int)strlen(l->rows[i].name), v = (int)strlen(l->rows[i].version);
    if (n > wname) wname = n;
    if (v > wver) wver = v;
  }
  printf("%7s  %-*s  %-*s  %s\n", "PID", wname, "NAME", wver, "RUNTIME", "COMMAND LINE");
  for (size_t i = 0; i < l->count; i++) {
    const struct ps_row *r = &l->rows[i];
    printf("%7d  %-*s  %-*s  %s\n", r->pid, wname, r->name, wver, r->version[0] ? r->version : "?",
           r->cmdline);
  }
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
    fputs("}", stdout);
  }
  fputs(l->count ? "\n]\n" : "]\n", stdout);
}

int cmd_ps(int argc, char **argv) {
  enum { OPT_JSON = 1000 };
  static const struct option opts[] = {
      {"json", no_argument, NULL, OPT_JSON},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  char shortopts[32];
  dnt_shortopts(opts, shortopts, sizeof shortopts);
  int json = 0, c;
  optind = 1;
  while ((c = getopt_long(argc, argv, shortopts, opts, NULL)) != -1) {
    switch (c) {
    case OPT_JSON: json = 1; break;
    case 'h': dnt_print_usage(stdout, usage_ps); return 0;
    default: return dnt_usage_error("ps", c, optopt, argv);
    }
  }
  if (optind < argc) {
    dnt_error("unexpected argument '%s'", argv[optind]);
    return DNT_EXIT_USAGE;
  }

  struct ps_list l = {0};
  int rc = dsipc_endpoint_list(collect_row, &l);
  if (rc < 0) {
    dnt_error("cannot list processes: %s", dsipc_strerror(rc));
    return DNT_EXIT_FAILURE;
  }
  if (l.count) qsort(l.rows, l.count, sizeof *l.rows, by_pid);
  if (json)
    print_json(&l);
  else
    print_table(&l);
  for (size_t i = 0; i < l.count; i++) {
    free(l.rows[i].cmdline);
    free(l.rows[i].socket);
  }
  free(l.rows);
  return 0;
}
