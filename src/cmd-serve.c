/* dntrace serve: one long-running agent for one process, a list, or every .NET process it can
 * see, with the endpoints a Go program has (net/http/pprof) and Prometheus' /metrics, so that
 * Grafana Alloy, Pyroscope, Parca and Prometheus scrape it as they scrape Go services. The engine
 * is agent/'s server (dnt-agent.h): its targets followed, its HTTP answers, its profile requests
 * and --push windows. This file reads the command line (the targets named, the labels, the
 * counters, the rules and what their sessions need), starts the server and prints what it says.
 *
 *   targets   -p PID[,PID..] (kept, 503 once gone), -n NAME (the next process of that name after
 *             a restart), --all (every process with a diagnostic socket; a rescan every
 *             --rescan adds new ones, exited ones are dropped)
 *   labels    pid, process and each --label k=v, on every series and every profile's samples
 *   bounds    one profile, one allocs, one threads and one heap request per target at a time (429),
 *             8 in all (429), seconds <= 300 (400), the HTTP server's own request-size and
 *             connection caps */
#include <errno.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <uv.h>

#include "agent-cli.h"
#include "builtin.h"
#include "collect-native.h"
#include "dnt-agent.h"
#include "dnt-http.h"
#include "dnt-trace.h"
#include "target.h"
#include "util.h"

#define DEFAULT_LISTEN "127.0.0.1:6060" /* Go's usual pprof port */

struct serve_options {
  const char *pids, *name, *listen, *push;
  uint64_t push_interval_ms;
  int all, cpu;
  struct dnt_strlist labels;
  uint64_t rescan_ms;
  double refresh;
  struct dnt_counter_specs specs;
  struct dnt_strlist rules; /* --rule: watch's rules, on every target */
  const char *rules_file, *output_dir;
  long max_disk_mb, max_fires;
  uint64_t ring_ms; /* --ring: each target's last TIME kept for save-ring */
  long ring_mb;
  const char *ring_profile;
};

/* What the command line made, for the server's config. */
struct serve_cmd {
  const struct serve_options *o;
  const char **label_kv; /* the --label pairs, split: key, value, ... (keys and values heap) */
  size_t nlabels;
  char **rule_texts; /* --rule, --rules: their texts (each target parses its own engine) */
  size_t nrules;
  char push_host[256], push_path[1024]; /* --push URL, split */
  int push_port;
  struct dnt_server *server;
  uv_signal_t sigint, sigterm;
};

/* ---- options ---- */

static int parse_counters(void *field, const char *arg) {
  char err[512];
  if (dnt_counter_specs_parse(field, arg, err, sizeof err) < 0) return dnt_error("--counters: %s", err);
  return 0;
}

static int parse_refresh(void *field, const char *arg) {
  char *end;
  double *refresh = field;
  *refresh = strtod(arg, &end);
  if (*end || end == arg || !(*refresh >= 0.1) || *refresh > 86400)
    return dnt_error("--refresh-interval: '%s' is not a number of seconds (0.1 or more)", arg);
  return 0;
}

#define O(f) offsetof(struct serve_options, f)
static const struct dnt_option serve_options[] = {
    DNT_OPT_STRING('p', "process-id", "PID[,PID..]", O(pids), "the processes to serve"),
    DNT_OPT_STRING('n', "name", "NAME", O(name), "the process of that name, and the next one after a restart"),
    DNT_OPT_FLAG(0, "all", O(all), "every .NET process this user can see; new ones are added, ended\n"
                                   "ones dropped"),
    {.kind = DNT_OPT_DURATION, .long_name = "rescan", .argh = "TIME", .offset = O(rescan_ms),
     .help = "--all: how often to look for new processes (default 5s)"},
    DNT_OPT_LIST(0, "label", "KEY=VALUE", O(labels), "a label on every series and profile (repeatable)"),
    DNT_OPT_STRING(0, "listen", "ADDR", O(listen), "HOST:PORT to listen on (default 127.0.0.1:6060)"),
    DNT_OPT_PARSE_MANY(0, "counters", "LIST", O(specs), parse_counters,
                  "the counters of /metrics, as 'counters' takes them (default\nSystem.Runtime)"),
    DNT_OPT_PARSE(0, "refresh-interval", "SEC", O(refresh), parse_refresh, "seconds between counter values (default 1)"),
    DNT_OPT_FLAG(0, "cpu", O(cpu), "/debug/pprof/profile is perf's on-CPU profile (perf cpu-clock,\n"
                                   "JIT frames named), not thread time"),
    DNT_OPT_STRING(0, "push", "URL", O(push), "send thread-time windows to Pyroscope at URL (http://HOST:PORT)"),
    {.kind = DNT_OPT_DURATION, .long_name = "push-interval", .argh = "TIME", .offset = O(push_interval_ms),
     .help = "--push: the length of a window (default 10s)"},
    DNT_OPT_LIST(0, "rule", "RULE", O(rules), "a rule of 'dntrace watch' on every target (repeatable); what\n"
                                             "fired is at /debug/dntrace/incidents"),
    DNT_OPT_STRING(0, "rules", "FILE", O(rules_file), "rules from FILE, one a line"),
    DNT_OPT_STRING('o', "output", "DIR", O(output_dir), "where the rules' actions write (default: the current directory)"),
    DNT_OPT_COUNT(0, "max-actions", "N", O(max_fires), 1000, "a rule fires at most N times in 10 minutes per target (default 1)"),
    DNT_OPT_COUNT(0, "max-disk", "MB", O(max_disk_mb), 16777216, "keep the actions' files under MB in all (see dntrace-watch(1))"),
    {.kind = DNT_OPT_DURATION, .long_name = "ring", .argh = "TIME", .offset = O(ring_ms),
     .help = "keep each target's last TIME of a recording, for the save-ring action"},
    DNT_OPT_COUNT(0, "ring-size", "MB", O(ring_mb), 1048576, "with --ring: at most MB of it per target (default 256)"),
    DNT_OPT_STRING(0, "ring-profile", "LIST", O(ring_profile),
                   "with --ring: what it records (default dotnet-common,\ndotnet-sampled-thread-time, as collect's)"),
    DNT_OPT_END(),
};
#undef O

const struct dnt_usage usage_serve = {
    .synopsis = "dntrace serve (-p PID[,PID..] | -n NAME | --all) [--label KEY=VALUE]... [--listen ADDR] [--counters LIST] [--refresh-interval SEC] [--rescan TIME] [--cpu] [--push URL [--push-interval TIME]] [--rule RULE... | --rules FILE [-o DIR] [--max-actions N] [--max-disk MB] [--ring TIME [--ring-size MB] [--ring-profile LIST]]]",
    .summary = "Serve /metrics and Go's /debug/pprof endpoints for .NET processes (an agent)",
    .options = serve_options,
};

/* Splits the --label pairs into sv->label_kv. 0, or DNT_EXIT_USAGE with the error printed. */
static int check_labels(struct serve_cmd *sv, const struct dnt_strlist *l) {
  if (l->n > DNT_SERVER_MAX_LABELS) return dnt_error("--label: at most %d labels", DNT_SERVER_MAX_LABELS), DNT_EXIT_USAGE;
  sv->label_kv = dnt_xmalloc((2 * l->n + 1) * sizeof *sv->label_kv);
  for (size_t i = 0; i < l->n; i++) {
    const char *eq = strchr(l->v[i], '=');
    size_t klen = eq ? (size_t)(eq - l->v[i]) : 0;
    int ok = klen > 0 && !(l->v[i][0] >= '0' && l->v[i][0] <= '9') && strncmp(l->v[i], "__", 2) != 0;
    for (size_t k = 0; ok && k < klen; k++) {
      char ch = l->v[i][k];
      ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_';
    }
    char *key = dnt_xstrdup(l->v[i]);
    key[klen] = '\0';
    if (ok && (strcmp(key, "pid") == 0 || strcmp(key, "process") == 0 || strcmp(key, "provider") == 0 ||
               strcmp(key, "quantile") == 0 || strcmp(key, "thread_id") == 0 || strcmp(key, "thread_name") == 0)) {
      dnt_error("--label: '%s' is a label serve sets itself", key);
      free(key);
      sv->nlabels = i;
      return DNT_EXIT_USAGE;
    }
    if (!ok) {
      dnt_error("--label: '%s' is not KEY=VALUE (KEY: letters, digits and _, not starting with a digit or __)",
                l->v[i]);
      free(key);
      sv->nlabels = i;
      return DNT_EXIT_USAGE;
    }
    if (sv->o->push && strpbrk(eq + 1, ",{}=")) { /* Pyroscope's name=APP{k=v,...} could not hold it */
      dnt_error("--label: with --push, a value has no ',', '{', '}' or '=' ('%s')", l->v[i]);
      free(key);
      sv->nlabels = i;
      return DNT_EXIT_USAGE;
    }
    sv->label_kv[2 * i] = key;
    sv->label_kv[2 * i + 1] = dnt_xstrdup(eq + 1);
    sv->nlabels = i + 1;
  }
  return 0;
}

/* ---- the rules ---- */

/* A rule that parsed: its text kept for every target's engine (save-ring refused without --ring). */
static int take_rule(void *ud, struct dnt_rule *r, const char *text, const char *where) {
  struct serve_cmd *sv = ud;
  int rc = 0;
  for (size_t i = 0; !rc && i < r->nactions; i++)
    if (r->actions[i].kind == DNT_ACTION_SAVE_RING && !sv->o->ring_ms) {
      dnt_error("%s: save-ring needs a ring: give --ring TIME (each process's last TIME kept)", where);
      rc = DNT_EXIT_USAGE;
    }
  dnt_rule_release(r);
  if (rc) return rc;
  sv->rule_texts = dnt_xrealloc(sv->rule_texts, (sv->nrules + 1) * sizeof *sv->rule_texts);
  sv->rule_texts[sv->nrules++] = dnt_xstrdup(text);
  return 0;
}

/* The rules, and the events they want into wanted. */
static int read_rules(struct serve_cmd *sv, struct serve_options *o, struct dnt_providers *wanted) {
  int rc = dnt_rules_read(&o->rules, o->rules_file, &o->specs, wanted, take_rule, sv);
  if (rc) return rc;
  if (!sv->nrules && (o->output_dir || o->max_disk_mb || o->max_fires || o->ring_ms || o->ring_mb || o->ring_profile)) {
    dnt_error("-o, --max-actions, --max-disk and --ring go with --rule or --rules");
    return DNT_EXIT_USAGE;
  }
  return 0;
}

/* ---- the command ---- */

static void on_signal(uv_signal_t *h, int signum) {
  (void)signum;
  struct serve_cmd *sv = h->data;
  uv_close((uv_handle_t *)&sv->sigint, NULL);
  uv_close((uv_handle_t *)&sv->sigterm, NULL);
  dnt_server_stop(sv->server);
}

/* pid's socket appended to eps (n of them, the caller's). 0 or an exit code, said. */
static int add_target(int pid, dsipc_endpoint **eps, size_t *n) {
  struct dnt_target t;
  int rc = dnt_target_resolve(pid, NULL, &t);
  if (rc) return rc;
  *eps = dnt_xrealloc(*eps, (*n + 1) * sizeof **eps);
  (*eps)[(*n)++] = t.ep;
  return 0;
}

/* -p PID[,PID..]: each one's socket into eps. 0 or an exit code, said. */
static int named_pids(const char *pids, dsipc_endpoint **eps, size_t *n) {
  for (const char *p = pids; *p;) {
    char *end;
    long pid = strtol(p, &end, 10);
    if (end == p || pid <= 0 || pid > 0x3fffffff || (*end && *end != ',')) {
      dnt_error("-p: '%s' is not a list of process ids", pids);
      return DNT_EXIT_USAGE;
    }
    int rc = add_target((int)pid, eps, n);
    if (rc) return rc;
    p = *end ? end + 1 : end;
  }
  return 0;
}

int cmd_serve(int argc, char **argv) {
  struct serve_options o = {.refresh = 1.0};
  struct serve_cmd sv;
  memset(&sv, 0, sizeof sv);
  sv.o = &o;
  char err[512];
  struct dnt_counters_wire wire = {0};
  struct dnt_providers wanted = {0}, extra = {0};
  dsipc_provider *providers = NULL;
  size_t nproviders = 0;
  dsipc_endpoint *eps = NULL;
  size_t neps = 0;
  uv_loop_t *loop = NULL;
  int rc = dnt_options_parse(&usage_serve, "serve", argc, argv, &o);
  if (rc) {
    rc = rc == DNT_OPTIONS_DONE ? 0 : rc;
    goto out;
  }
  rc = DNT_EXIT_USAGE;
  if (!!o.pids + !!o.name + !!o.all != 1) {
    dnt_error("say which processes to serve: -p PID[,PID..], -n NAME or --all (one of them)");
    goto out;
  }
  if (o.rescan_ms && !o.all) {
    dnt_error("--rescan goes with --all");
    goto out;
  }
  if (o.push_interval_ms && !o.push) {
    dnt_error("--push-interval goes with --push");
    goto out;
  }
  if (o.push_interval_ms && o.push_interval_ms < 1000) {
    dnt_error("--push-interval: a window of 1s at least");
    goto out;
  }
  if (o.push && dnt_http_url_parse(o.push, sv.push_host, sizeof sv.push_host, &sv.push_port, sv.push_path,
                                   sizeof sv.push_path) != 0) {
    dnt_error("--push: '%s' is not http://HOST[:PORT][/PATH]", o.push);
    goto out;
  }
  if ((rc = check_labels(&sv, &o.labels)) != 0) goto out;
  /* --cpu where perf cannot run: said once, now, rather than on every request */
  if (o.cpu && dnt_perf_usable(0) < 0) {
    rc = DNT_EXIT_USAGE;
    goto out;
  }
  rc = DNT_EXIT_FAILURE;
  if (o.specs.n == 0 && dnt_counter_specs_parse(&o.specs, DNT_COUNTERS_DEFAULT, err, sizeof err) < 0) goto out;
  if ((rc = read_rules(&sv, &o, &wanted)) != 0) goto out;
  rc = DNT_EXIT_FAILURE;
  if (dnt_counters_wire_build(&wire, &o.specs, o.refresh, 1000, 10) != 0) dnt_die(DNT_EXIT_FAILURE, "out of memory");
  if (o.ring_ms && dnt_providers_add_profiles(&extra, o.ring_profile ? o.ring_profile
                                                                      : "dotnet-common,dotnet-sampled-thread-time",
                                              err, sizeof err) != 0) {
    dnt_error("--ring-profile: %s", err);
    rc = DNT_EXIT_USAGE;
    goto out;
  }
  /* the targets' session: the counters, the events the rules want and, with --ring, what it
   * records (its rundown then names the window's stacks) */
  if (dnt_providers_merge(&extra, &wanted, err, sizeof err) != 0) dnt_die(DNT_EXIT_FAILURE, "%s", err);
  providers = dnt_xmalloc((wire.n + extra.n + 1) * sizeof *providers);
  for (size_t i = 0; i < wire.n; i++) providers[nproviders++] = wire.v[i];
  for (size_t i = 0; i < extra.n; i++)
    providers[nproviders++] = (dsipc_provider){.name = extra.v[i].name, .keywords = extra.v[i].keywords,
                                               .level = extra.v[i].level, .args = extra.v[i].args};
  if (sv.nrules && o.output_dir && mkdir(o.output_dir, 0755) != 0 && errno != EEXIST) {
    dnt_error("cannot make '%s': %s", o.output_dir, strerror(errno));
    goto out;
  }
#if defined(__GLIBC__)
  /* the thread pool's workers would each get a malloc arena of their own, and an agent's RSS
   * would creep up for minutes (10.2 MB after 2 min of 1 s push windows, 8.4 MB with one arena) */
  mallopt(M_ARENA_MAX, 1);
#endif
  /* the command line first (a bad --listen is a usage error), then the targets named, before
   * anything listens: a wrong pid is an error at once */
  const char *listen = o.listen ? o.listen : DEFAULT_LISTEN;
  if (dnt_http_addr_check(listen, err, sizeof err) != 0) {
    dnt_error("--listen: %s", err);
    rc = DNT_EXIT_USAGE;
    goto out;
  }
  if (o.pids && (rc = named_pids(o.pids, &eps, &neps)) != 0) {
    rc = rc == DNT_EXIT_USAGE ? rc : DNT_EXIT_NOTARGET;
    goto out;
  }
  int named = o.name ? dnt_target_find_by_name(o.name) : 0; /* -n: the one running now, followed at once */
  if (named && add_target(named, &eps, &neps) != 0) {
    rc = DNT_EXIT_NOTARGET;
    goto out;
  } else if (!named && o.name) {
    printf("No process named '%s' yet; waiting for one\n", o.name);
  }
  rc = DNT_EXIT_FAILURE;
  loop = uv_default_loop();
  struct dnt_server_config c = {
      .loop = loop,
      .listen = listen,
      .name = o.name,
      .all = o.all,
      .rescan_ms = o.rescan_ms,
      .label_kv = sv.label_kv,
      .nlabels = sv.nlabels,
      .specs = &o.specs,
      .counters_session_id = wire.session_id[0] ? wire.session_id : NULL,
      .providers = providers,
      .nproviders = nproviders,
      .cpu = o.cpu,
      .push_host = o.push ? sv.push_host : NULL,
      .push_path = sv.push_path,
      .push_port = sv.push_port,
      .push_interval_ms = o.push_interval_ms,
      .rules = sv.rule_texts,
      .nrules = sv.nrules,
      .max_fires = (uint32_t)o.max_fires,
      .incidents = {.dir = o.output_dir, .max_disk_mb = o.max_disk_mb},
      .ring_ms = o.ring_ms,
      .ring_bytes = (uint64_t)(o.ring_mb ? o.ring_mb : 256) << 20,
      .process_name = dnt_process_name,
      .find_by_name = dnt_target_find_by_name,
      .say = dnt_agent_print};
  if (dnt_server_start(&c, eps, neps, &sv.server, err, sizeof err) != 0) {
    dnt_error("%s", err);
    goto out;
  }
  uv_signal_init(loop, &sv.sigint);
  uv_signal_init(loop, &sv.sigterm);
  sv.sigint.data = sv.sigterm.data = &sv;
  uv_signal_start(&sv.sigint, on_signal, SIGINT);
  uv_signal_start(&sv.sigterm, on_signal, SIGTERM);
  const char *colon = strrchr(listen, ':');
  printf("Serving at http://%.*s:%d/ (/metrics, /debug/pprof/)\nPress Ctrl+C to stop.\n", (int)(colon - listen),
         colon == listen ? "127.0.0.1" : listen, dnt_server_port(sv.server));
  fflush(stdout);
  dnt_loop_run(loop, UV_RUN_DEFAULT, __func__);
  rc = 0;

out:
  if (loop) {
    dnt_server_free(sv.server);
    while (dnt_loop_run(loop, UV_RUN_NOWAIT, __func__)) {}
    uv_loop_close(loop);
  }
  free(eps);
  for (size_t i = 0; i < 2 * sv.nlabels; i++) free((char *)sv.label_kv[i]);
  free(sv.label_kv);
  free(o.labels.v);
  dnt_counters_wire_release(&wire);
  dnt_counter_specs_release(&o.specs);
  free(providers);
  dnt_providers_release(&wanted);
  dnt_providers_release(&extra);
  for (size_t i = 0; i < sv.nrules; i++) free(sv.rule_texts[i]);
  free(sv.rule_texts);
  free(o.rules.v);
  int out = dnt_finish_stdout();
  return rc ? rc : out;
}
