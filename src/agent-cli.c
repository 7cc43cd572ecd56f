/* What watch and serve share on the command line (agent-cli.h): the rules read from --rule and
 * --rules with what their sessions must ask for, and the agent's lines printed. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "agent-cli.h"
#include "builtin.h"
#include "dnt-trace.h"
#include "util.h"

#define RUNTIME "Microsoft-Windows-DotNETRuntime"

/* ---- the rules of a command line ---- */

/* What a session enables for rule r's events (nothing for a counter rule, whose counter goes to
 * the specs): 0, or -1 with err. schema: loaded here at the first runtime event named. */
static int rule_providers(const struct dnt_rule *r, struct dnt_providers *l, struct dnt_schema **schema, char *err,
                          size_t cap) {
  char spec[600];
  if (r->kind == DNT_TRIGGER_EXCEPTION || r->kind == DNT_TRIGGER_GC_PAUSE) {
    snprintf(spec, sizeof spec, "%s:0x%x:4", RUNTIME, r->kind == DNT_TRIGGER_EXCEPTION ? 0x8000 : 0x1);
  } else if (r->kind == DNT_TRIGGER_EVENT && strcasecmp(r->provider, RUNTIME) != 0) {
    snprintf(spec, sizeof spec, "%s:0xffffffffffffffff:5", r->provider); /* every event of it */
  } else if (r->kind == DNT_TRIGGER_EVENT) { /* the runtime's: only what its event needs */
    if (!r->event) {
      snprintf(err, cap, "name the runtime's event (%s/GC/Start): its keywords are asked for, not all of them", RUNTIME);
      return -1;
    }
    if (!*schema && (!(*schema = dnt_schema_new()) || dnt_schema_load_default(*schema, err, cap) != 0)) return -1;
    uint64_t kw;
    uint32_t level;
    if (!dnt_schema_enabling(*schema, RUNTIME, r->event, &kw, &level)) {
      snprintf(err, cap, "the runtime has no event '%s' (TraceEvent's names: GC/Start, Exception/Start...)", r->event);
      return -1;
    }
    snprintf(spec, sizeof spec, "%s:0x%llx:%u", RUNTIME, (unsigned long long)kw, level);
  } else {
    return 0;
  }
  return dnt_providers_parse(l, spec, err, cap);
}

static int read_one_rule(const char *text, const char *where, struct dnt_counter_specs *specs,
                         struct dnt_providers *providers, struct dnt_schema **schema, dnt_rule_take_fn take, void *ud) {
  struct dnt_rule r;
  char err[200];
  size_t col;
  if (dnt_rule_parse(text, &r, err, sizeof err, &col) != 0) {
    dnt_rule_release(&r);
    dnt_error("%s, column %zu: expected %s", where, col, err);
    return DNT_EXIT_USAGE;
  }
  if (r.filter) { /* its payload filter, as the feed will read it */
    struct dnt_event_match m;
    if (dnt_event_match_init(&m, r.provider, r.event, r.filter, NULL, err, sizeof err) != 0) {
      dnt_rule_release(&r);
      dnt_error("%s: %s", where, err);
      return DNT_EXIT_USAGE;
    }
    dnt_event_match_release(&m);
  }
  if (rule_providers(&r, providers, schema, err, sizeof err) != 0) {
    dnt_rule_release(&r);
    dnt_error("%s: %s", where, err);
    return DNT_EXIT_USAGE;
  }
  if (r.kind == DNT_TRIGGER_COUNTER) { /* the session asks for the rule's counter */
    char spec[600];
    snprintf(spec, sizeof spec, "%s[%s]", r.provider, r.counter);
    if (dnt_counter_specs_parse(specs, spec, err, sizeof err) != 0) {
      dnt_rule_release(&r);
      dnt_error("%s: %s", where, err);
      return DNT_EXIT_USAGE;
    }
  }
  return take(ud, &r, text, where);
}

int dnt_rules_read(const struct dnt_strlist *texts, const char *file, struct dnt_counter_specs *specs,
                   struct dnt_providers *providers, dnt_rule_take_fn take, void *ud) {
  char where[4200];
  struct dnt_schema *schema = NULL;
  int rc = 0;
  for (size_t i = 0; !rc && i < texts->n; i++) {
    snprintf(where, sizeof where, "--rule '%s'", texts->v[i]);
    rc = read_one_rule(texts->v[i], where, specs, providers, &schema, take, ud);
  }
  FILE *fp = NULL;
  if (!rc && file && !(fp = fopen(file, "r"))) {
    dnt_error("cannot read '%s': %s", file, strerror(errno));
    rc = DNT_EXIT_USAGE;
  }
  char line[4096];
  for (int n = 1; !rc && fp && fgets(line, sizeof line, fp); n++) {
    line[strcspn(line, "\r\n")] = '\0';
    const char *p = line + strspn(line, " \t");
    if (!*p || *p == '#') continue;
    snprintf(where, sizeof where, "%s:%d", file, n);
    rc = read_one_rule(line, where, specs, providers, &schema, take, ud);
  }
  if (fp) fclose(fp);
  dnt_schema_free(schema);
  return rc;
}

void dnt_agent_print(void *ud, enum dnt_say_kind kind, const char *line) {
  (void)ud;
  if (kind == DNT_SAY_LOG) {
    printf("%s\n", line);
    fflush(stdout);
  } else if (kind == DNT_SAY_NOTE) {
    fprintf(stderr, "%s\n", line);
  } else {
    dnt_warning("%s", line);
  }
}
