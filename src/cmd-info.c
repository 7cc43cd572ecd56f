/* dntrace info: everything a runtime says about its process, and its environment. */
#include <stdlib.h>
#include <string.h>

#include "builtin.h"
#include "dsipc.h"
#include "target.h"
#include "util.h"

const char *const usage_info[] = {
    "dntrace info (-p PID | -n NAME) [--env] [--json]",
    "Show what a .NET process's runtime says about itself",
    "    -p, --process-id PID   the process, by pid as seen from here",
    "    -n, --name NAME        the process, by name (an error if several match)",
    "    --env                  also print the process's environment",
    "    --json                 print one JSON object",
    "    -h, --help             show this help",
    NULL,
};

#define INFO_TIMEOUT_MS 5000

static const char *or_unknown(const char *s) { return s && *s ? s : "(not reported)"; }

static void print_text(const struct dnt_target *t, const dsipc_process_info *pi, char **env, size_t nenv) {
  char cookie[37];
  dsipc_format_guid(pi->runtime_cookie, cookie);
  printf("Process ID          : %d\n", t->pid);
  if ((uint64_t)t->pid != pi->process_id) printf("PID in namespace    : %llu\n", (unsigned long long)pi->process_id);
  printf("Name                : %s\n", t->name);
  printf("Command line        : %s\n", or_unknown(pi->command_line));
  printf("OS                  : %s\n", or_unknown(pi->os));
  printf("Architecture        : %s\n", or_unknown(pi->arch));
  printf("Entry assembly      : %s\n", or_unknown(pi->managed_entrypoint_assembly_name));
  printf("Runtime version     : %s\n", or_unknown(pi->clr_product_version));
  printf("Runtime identifier  : %s\n", or_unknown(pi->runtime_identifier));
  printf("Runtime cookie      : %s\n", cookie);
  printf("Diagnostic socket   : %s\n", t->ep.path);
  printf("ProcessInfo version : %d\n", pi->info_version);
  if (env) {
    printf("Environment         :\n");
    for (size_t i = 0; i < nenv; i++) printf("  %s\n", env[i]);
  }
}

static void json_field(const char *key, const char *value, int last) {
  printf("  \"%s\": ", key);
  if (value)
    dnt_json_string(stdout, value);
  else
    fputs("null", stdout);
  fputs(last ? "\n" : ",\n", stdout);
}

static void print_json(const struct dnt_target *t, const dsipc_process_info *pi, char **env, size_t nenv) {
  char cookie[37];
  dsipc_format_guid(pi->runtime_cookie, cookie);
  printf("{\n  \"pid\": %d,\n  \"nsPid\": %llu,\n", t->pid, (unsigned long long)pi->process_id);
  json_field("name", t->name, 0);
  json_field("commandLine", pi->command_line, 0);
  json_field("os", pi->os, 0);
  json_field("arch", pi->arch, 0);
  json_field("entryAssembly", pi->managed_entrypoint_assembly_name, 0);
  json_field("runtimeVersion", pi->clr_product_version, 0);
  json_field("runtimeIdentifier", pi->runtime_identifier, 0);
  json_field("runtimeCookie", cookie, 0);
  json_field("socket", t->ep.path, 0);
  printf("  \"processInfoVersion\": %d%s\n", pi->info_version, env ? "," : "");
  if (env) {
    fputs("  \"environment\": {", stdout);
    for (size_t i = 0; i < nenv; i++) {
      const char *eq = strchr(env[i], '=');
      size_t klen = eq ? (size_t)(eq - env[i]) : strlen(env[i]);
      char *key = dnt_xmalloc(klen + 1);
      memcpy(key, env[i], klen);
      key[klen] = '\0';
      fputs(i ? ",\n    " : "\n    ", stdout);
      dnt_json_string(stdout, key);
      fputs(": ", stdout);
      dnt_json_string(stdout, eq ? eq + 1 : "");
      free(key);
    }
    fputs(nenv ? "\n  }\n" : "}\n", stdout);
  }
  fputs("}\n", stdout);
}

int cmd_info(int argc, char **argv) {
  enum { OPT_ENV = 1000, OPT_JSON };
  static const struct option opts[] = {
      {"process-id", required_argument, NULL, 'p'},
      {"name", required_argument, NULL, 'n'},
      {"env", no_argument, NULL, OPT_ENV},
      {"json", no_argument, NULL, OPT_JSON},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  char shortopts[32];
  dnt_shortopts(opts, shortopts, sizeof shortopts);
  int pid = 0, want_env = 0, json = 0, c;
  const char *name = NULL;
  optind = 1;
  while ((c = getopt_long(argc, argv, shortopts, opts, NULL)) != -1) {
    switch (c) {
    case 'p':
      if ((pid = dnt_opt_pid(optarg)) < 0) return DNT_EXIT_USAGE;
      break;
    case 'n': name = optarg; break;
    case OPT_ENV: want_env = 1; break;
    case OPT_JSON: json = 1; break;
    case 'h': dnt_print_usage(stdout, usage_info); return 0;
    default: return dnt_usage_error("info", c, optopt, argv);
    }
  }
  if (optind < argc) {
    dnt_error("unexpected argument '%s'", argv[optind]);
    return DNT_EXIT_USAGE;
  }
  if ((pid > 0) == (name != NULL)) {
    dnt_error("name the process with exactly one of -p PID or -n NAME");
    return DNT_EXIT_USAGE;
  }

  struct dnt_target t;
  int rc = dnt_target_resolve(pid, name, &t);
  if (rc) return rc;

  dsipc_process_info pi;
  dsipc_status st;
  if (dsipc_process_info_get(t.ep.path, INFO_TIMEOUT_MS, &pi, &st) < 0) {
    dnt_error("process %d: %s", t.pid, st.msg);
    return DNT_EXIT_FAILURE;
  }
  char **env = NULL;
  size_t nenv = 0;
  rc = 0;
  if (want_env && dsipc_process_env_get(t.ep.path, INFO_TIMEOUT_MS, &env, &nenv, &st) < 0) {
    dnt_error("process %d: cannot read its environment: %s", t.pid, st.msg);
    rc = DNT_EXIT_FAILURE;
    goto out;
  }
  if (json)
    print_json(&t, &pi, env, nenv);
  else
    print_text(&t, &pi, env, nenv);
out:
  dsipc_env_free(env, nenv);
  dsipc_process_info_release(&pi);
  return rc;
}
