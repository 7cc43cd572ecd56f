/* dntrace info: everything a runtime says about its process, and its environment. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "builtin.h"
#include "dnt-trace.h"
#include "dsipc.h"
#include "options.h"
#include "target.h"
#include "util.h"

struct info_options {
  struct dnt_session_target target;
  const char *trace;
  int env, json, verbose;
};

#define O(f) offsetof(struct info_options, f)
static const struct dnt_option info_options[] = {
    DNT_OPT_TEXT("TRACE", "a trace file (.nettrace, .gz, .zip; - for stdin) to describe\ninstead of a process"),
    DNT_OPT_GROUP(dnt_options_target_pid, O(target)),
    DNT_OPT_FLAG(0, "env", O(env), "also print the process's environment"),
    DNT_OPT_FLAG(0, "json", O(json), "print one JSON object"),
    DNT_OPT_FLAG('v', "verbose", O(verbose), "TRACE: every thread, and the events by id and name"),
    DNT_OPT_END(),
};

const struct dnt_usage usage_info = {
    .synopsis = "dntrace info (-p PID | -n NAME | TRACE) [--env] [--json] [-v]",
    .summary = "Show what a .NET process's runtime says about itself, or what a trace holds",
    .options = info_options,
    .operand = DNT_OPERAND_OR_TARGET,
    .operand_offset = O(trace),
    .no_operand = "name a trace file, or a process with -p PID or -n NAME",
    .many_operands = "a trace file or a process (-p, -n), not both; one trace file at a time",
};
#undef O

/* How long the runtime may take to answer: as long as for any other request (a session's, in
 * src/session.c). A runtime on a busy machine may take seconds; only a hung one takes this. */
#define INFO_TIMEOUT_MS 30000

/* One "Label : value" line. The value is the process's own word (its runtime's answer, its
 * command line, its environment): escaped, so it cannot write control sequences to our terminal. */
static void text_field(const char *label, const char *value) {
  char *safe = dnt_safe_text(value && *value ? value : "(not reported)");
  printf("%-20s: %s\n", label, safe);
  free(safe);
}

static void print_text(const struct dnt_target *t, const dsipc_process_info *pi, char **env, size_t nenv) {
  char cookie[37];
  dsipc_format_guid(pi->runtime_cookie, cookie);
  printf("Process ID          : %d\n", t->pid);
  if ((uint64_t)t->pid != pi->process_id) printf("PID in namespace    : %llu\n", (unsigned long long)pi->process_id);
  text_field("Name", t->name);
  text_field("Command line", pi->command_line);
  text_field("OS", pi->os);
  text_field("Architecture", pi->arch);
  text_field("Entry assembly", pi->managed_entrypoint_assembly_name);
  text_field("Runtime version", pi->clr_product_version);
  text_field("Runtime identifier", pi->runtime_identifier);
  printf("Runtime cookie      : %s\n", cookie);
  text_field("Diagnostic socket", t->ep.path);
  printf("ProcessInfo version : %d\n", pi->info_version);
  if (env) {
    printf("Environment         :\n");
    for (size_t i = 0; i < nenv; i++) {
      char *safe = dnt_safe_text(env[i]);
      printf("  %s\n", safe);
      free(safe);
    }
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
  struct info_options o = {0};
  int rc = dnt_options_parse(&usage_info, "info", argc, argv, &o);
  if (rc) return rc == DNT_OPTIONS_DONE ? 0 : rc;
  if (o.trace) {
    if (o.env) {
      dnt_error("--env is for a process; a trace has no environment");
      return DNT_EXIT_USAGE;
    }
    return dnt_info_trace(o.trace, o.json, o.verbose);
  }
  if (o.verbose) {
    dnt_error("-v is for a trace; a process's information is printed whole");
    return DNT_EXIT_USAGE;
  }
  int want_env = o.env, json = o.json;

  struct dnt_target t;
  rc = dnt_target_resolve(o.target.pid, o.target.name, &t);
  if (rc) return rc;

  dsipc_process_info pi;
  dsipc_status st;
  if (dsipc_process_info_get(t.ep.path, INFO_TIMEOUT_MS, &pi, &st) < 0) {
    dnt_error("process %d: %s", t.pid, st.msg);
    return st.code == -EACCES ? DNT_EXIT_NOTARGET : DNT_EXIT_FAILURE; /* its socket is not ours to use */
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
