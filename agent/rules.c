/* rules.c: a rule's text read into its trigger and actions (the grammar is in dnt-agent.h). A
 * hand-written reader over the line: words are separated by blanks, a failure says what was
 * expected and where (the column of the word it met). */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dnt-agent.h"

struct reader {
  const char *text, *at;
  char *err;
  size_t cap;
  size_t *column;
};

static int fail(struct reader *r, const char *at, const char *what) {
  snprintf(r->err, r->cap, "%s", what);
  *r->column = (size_t)(at - r->text) + 1;
  return -1;
}

static void blanks(struct reader *r) {
  while (*r->at == ' ' || *r->at == '\t') r->at++;
}

/* The next word: up to a blank, a comma, or "=>" (into buf); its length, 0 at the end. */
static size_t word(struct reader *r, char *buf, size_t cap) {
  blanks(r);
  size_t n = 0;
  const char *p = r->at;
  while (*p && *p != ' ' && *p != '\t' && *p != ',' && !(p[0] == '=' && p[1] == '>')) p++;
  n = (size_t)(p - r->at);
  if (n >= cap) n = cap - 1;
  memcpy(buf, r->at, n);
  buf[n] = '\0';
  r->at = p;
  return n;
}

static char *dup_n(const char *s, size_t n) {
  char *d = malloc(n + 1);
  if (d) memcpy(d, s, n), d[n] = '\0';
  return d;
}

/* A duration: a number and ms, s, m or h. */
static int duration(const char *w, uint64_t *ms) {
  char *end;
  errno = 0;
  double v = strtod(w, &end);
  if (end == w || errno || !(v >= 0) || v > 1e9) return -1;
  double scale = strcmp(end, "ms") == 0 ? 1 : strcmp(end, "s") == 0 ? 1000 : strcmp(end, "m") == 0 ? 60000
               : strcmp(end, "h") == 0 ? 3600000 : 0;
  if (!scale) return -1;
  *ms = (uint64_t)(v * scale + 0.5);
  return 0;
}

static const char *const units[] = {"%", "ms", "s", "B", "KB", "MB", "GB"};

/* A number and its unit (one of units[], or none). */
static int number(const char *w, double *v, char unit[8]) {
  char *end;
  errno = 0;
  *v = strtod(w, &end);
  if (end == w || errno || !isfinite(*v)) return -1;
  unit[0] = '\0';
  if (!*end) return 0;
  for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
    if (strcmp(end, units[i]) == 0) {
      snprintf(unit, 8, "%s", units[i]);
      return 0;
    }
  return -1;
}

static int is_name(const char *w) {
  if (!*w) return 0;
  for (const char *c = w; *c; c++)
    if (!isalnum((unsigned char)*c) && !strchr("._-/+`<>[]", *c)) return 0;
  return 1;
}

/* "COUNT in DURATION" into rule's count and window (what is the trigger's, for the message). */
static int count_in(struct reader *r, struct dnt_rule *rule, const char *what) {
  char w[256], msg[128];
  const char *at = (blanks(r), r->at);
  word(r, w, sizeof w);
  char *end;
  unsigned long n = strtoul(w, &end, 10);
  snprintf(msg, sizeof msg, "a count of %s (1 or more)", what);
  if (*end || !*w || n == 0 || n > 1000000) return fail(r, at, msg);
  rule->count = (uint32_t)n;
  at = (blanks(r), r->at);
  if (!word(r, w, sizeof w) || strcmp(w, "in") != 0) return fail(r, at, "'in' and a time ('5 in 10s')");
  at = (blanks(r), r->at);
  word(r, w, sizeof w);
  if (duration(w, &rule->window_ms) != 0 || !rule->window_ms) return fail(r, at, "a time (a number with ms, s, m or h)");
  return 0;
}

/* event PROVIDER[/NAME] [FIELD:VALUE[,...]] [COUNT in DURATION]: the provider ends at the first
 * '/' (a provider's name has none; an event's, TraceEvent's, may: GC/Start). */
static int event_trigger(struct reader *r, struct dnt_rule *rule) {
  char w[256];
  rule->kind = DNT_TRIGGER_EVENT;
  rule->count = 1;
  const char *at = (blanks(r), r->at);
  word(r, w, sizeof w);
  for (const char *c = w; *c; c++)
    if (!isalnum((unsigned char)*c) && !strchr("._-/", *c)) return fail(r, at + (c - w), "a provider's name, then /EVENT");
  char *slash = strchr(w, '/');
  if (!*w || slash == w) return fail(r, at, "a provider's name ('event PROVIDER[/EVENT]')");
  if (slash && !slash[1]) return fail(r, at + (slash - w) + 1, "an event's name after '/'");
  rule->provider = slash ? dup_n(w, (size_t)(slash - w)) : strdup(w);
  if (!rule->provider || (slash && !(rule->event = strdup(slash + 1)))) return fail(r, at, "out of memory");
  /* a payload filter: one word of FIELD:VALUE pairs, commas inside it */
  at = (blanks(r), r->at);
  const char *p = r->at;
  while (*p && *p != ' ' && *p != '\t' && !(p[0] == '=' && p[1] == '>')) p++;
  if (p > at && memchr(at, ':', (size_t)(p - at))) {
    if (!rule->event) return fail(r, at, "an event's name before a payload filter ('event PROVIDER/EVENT FIELD:VALUE')");
    for (const char *pair = at; pair < p;) {
      const char *comma = memchr(pair, ',', (size_t)(p - pair)), *stop = comma ? comma : p;
      const char *colon = memchr(pair, ':', (size_t)(stop - pair));
      if (!colon || colon == pair) return fail(r, pair, "FIELD:VALUE (payload filters, comma-separated)");
      pair = comma ? comma + 1 : p;
      if (comma && pair == p) return fail(r, comma, "another FIELD:VALUE after ','");
    }
    if (!(rule->filter = dup_n(at, (size_t)(p - at)))) return fail(r, at, "out of memory");
    r->at = p;
    at = (blanks(r), r->at);
  }
  if (*r->at && !(r->at[0] == '=' && r->at[1] == '>')) return count_in(r, rule, "events");
  return 0;
}

static int trigger(struct reader *r, struct dnt_rule *rule) {
  char w[256];
  const char *at = (blanks(r), r->at);
  if (!word(r, w, sizeof w)) return fail(r, at, "a trigger (a counter, exception, gc-pause, event or process-start) before '=>'");
  if (strcmp(w, "exception") == 0) {
    rule->kind = DNT_TRIGGER_EXCEPTION;
    at = (blanks(r), r->at);
    word(r, w, sizeof w);
    char *end;
    strtoul(w, &end, 10);
    if (*end || !*w) { /* a type first */
      if (!is_name(w)) return fail(r, at, "an exception's type or a count ('exception [TYPE] COUNT in TIME')");
      if (!(rule->type = strdup(w))) return fail(r, at, "out of memory");
    } else {
      r->at = at;
    }
    return count_in(r, rule, "exceptions");
  }
  if (strcmp(w, "event") == 0) return event_trigger(r, rule);
  if (strcmp(w, "process-start") == 0) {
    rule->kind = DNT_TRIGGER_PROCESS_START;
    return 0;
  }
  if (strcmp(w, "gc-pause") == 0) {
    rule->kind = DNT_TRIGGER_GC_PAUSE;
    at = (blanks(r), r->at);
    if (!word(r, w, sizeof w) || strcmp(w, ">") != 0) return fail(r, at, "'>' ('gc-pause > 200ms')");
    at = (blanks(r), r->at);
    word(r, w, sizeof w);
    uint64_t ms;
    if (duration(w, &ms) != 0) return fail(r, at, "a time (200ms, 1s)");
    rule->threshold = (double)ms;
    rule->op = '>';
    return 0;
  }
  rule->kind = DNT_TRIGGER_COUNTER;
  char *cmp = strpbrk(w, "<>"); /* "cpu-usage>80": the name ends at the comparison */
  if (cmp && cmp > w) {
    r->at = at + (cmp - w);
    *cmp = '\0';
  }
  char *bracket = strchr(w, '[');
  if (bracket) { /* a histogram's percentile: name[p95] */
    char *end = bracket + 2;
    errno = 0;
    double p = bracket[1] == 'p' ? strtod(bracket + 2, &end) : -1;
    if (bracket[1] != 'p' || errno || end == bracket + 2 || *end != ']' || end[1] || !(p > 0 && p < 100))
      return fail(r, at + (bracket - w), "a percentile after the counter's name ([p50], [p95], [p99])");
    rule->percentile = p;
    *bracket = '\0';
  }
  for (const char *c = w; *c; c++)
    if (!isalnum((unsigned char)*c) && !strchr("._-/", *c))
      return fail(r, at, "a counter ([PROVIDER/]NAME), exception, gc-pause, event or process-start");
  if (!*w) return fail(r, at, "a counter ([PROVIDER/]NAME), exception, gc-pause, event or process-start");
  const char *slash = strrchr(w, '/');
  rule->provider = slash ? dup_n(w, (size_t)(slash - w)) : strdup("System.Runtime");
  rule->counter = strdup(slash ? slash + 1 : w);
  if (!rule->provider || !rule->counter) return fail(r, at, "out of memory");
  if (!*rule->counter || !*rule->provider) return fail(r, at, "a counter's name after its provider's");
  at = (blanks(r), r->at);
  size_t oplen = r->at[0] == '>' || r->at[0] == '<' ? (r->at[1] == '=' ? 2 : 1) : 0;
  rule->op = !oplen ? 0 : r->at[0] == '>' ? (oplen == 2 ? 'G' : '>') : (oplen == 2 ? 'L' : '<');
  if (!rule->op) return fail(r, at, "a comparison: >, >=, < or <=");
  r->at += oplen;
  at = (blanks(r), r->at);
  word(r, w, sizeof w);
  if (number(w, &rule->threshold, rule->unit) != 0)
    return fail(r, at, "a number, with a unit or none (80, 500MB, 200ms, 90%)");
  at = (blanks(r), r->at);
  const char *back = r->at;
  if (word(r, w, sizeof w) && strcmp(w, "for") == 0) {
    at = (blanks(r), r->at);
    word(r, w, sizeof w);
    if (duration(w, &rule->for_ms) != 0) return fail(r, at, "a time after 'for' (30s, 2m)");
  } else {
    r->at = back;
  }
  return 0;
}

static int action(struct reader *r, struct dnt_action *a) {
  char w[256];
  const char *at = (blanks(r), r->at);
  if (!word(r, w, sizeof w)) return fail(r, at, "an action: save-ring, collect, dump, gcdump, stacks or exec");
  if (strcmp(w, "exec") == 0) { /* the rest of the line */
    a->kind = DNT_ACTION_EXEC;
    blanks(r);
    size_t n = strlen(r->at);
    while (n && (r->at[n - 1] == ' ' || r->at[n - 1] == '\t')) n--;
    if (!n) return fail(r, r->at, "a command after 'exec'");
    if (!(a->arg = dup_n(r->at, n))) return fail(r, at, "out of memory");
    r->at += strlen(r->at);
    return 0;
  }
  const char *back;
  if (strcmp(w, "collect") == 0) {
    a->kind = DNT_ACTION_COLLECT;
    at = (blanks(r), r->at);
    word(r, w, sizeof w);
    if (duration(w, &a->duration_ms) != 0 || !a->duration_ms)
      return fail(r, at, "how long to collect (30s, 2m)");
    back = (blanks(r), r->at);
    if (word(r, w, sizeof w)) {
      if (!is_name(w)) return fail(r, back, "a profile's name (cpu-sampling, gc-verbose...)");
      if (!(a->arg = strdup(w))) return fail(r, back, "out of memory");
    }
    return 0;
  }
  if (strcmp(w, "dump") == 0) {
    a->kind = DNT_ACTION_DUMP;
    back = (blanks(r), r->at);
    if (word(r, w, sizeof w)) {
      if (strcmp(w, "mini") && strcmp(w, "heap") && strcmp(w, "triage") && strcmp(w, "full"))
        return fail(r, back, "a dump's type: mini, heap, triage or full");
      if (!(a->arg = strdup(w))) return fail(r, back, "out of memory");
    }
    return 0;
  }
  if (strcmp(w, "gcdump") == 0) a->kind = DNT_ACTION_GCDUMP;
  else if (strcmp(w, "stacks") == 0) a->kind = DNT_ACTION_STACKS;
  else if (strcmp(w, "save-ring") == 0) a->kind = DNT_ACTION_SAVE_RING;
  else return fail(r, at, "an action: save-ring, collect, dump, gcdump, stacks or exec");
  return 0;
}

int dnt_rule_parse(const char *text, struct dnt_rule *rule, char *err, size_t cap, size_t *column) {
  memset(rule, 0, sizeof *rule);
  struct reader r = {text, text, err, cap, column};
  *column = 0;
  if (!(rule->text = strdup(text))) return fail(&r, text, "out of memory");
  if (trigger(&r, rule) != 0) return -1;
  blanks(&r);
  if (!(r.at[0] == '=' && r.at[1] == '>')) return fail(&r, r.at, "'=>' and the actions after the trigger");
  r.at += 2;
  for (;;) {
    if (rule->nactions == DNT_RULE_MAX_ACTIONS) return fail(&r, r.at, "at most 8 actions");
    if (action(&r, &rule->actions[rule->nactions++]) != 0) return -1;
    blanks(&r);
    if (!*r.at) return 0;
    if (*r.at != ',') return fail(&r, r.at, "',' and another action, or the end of the rule");
    r.at++;
  }
}

void dnt_rule_release(struct dnt_rule *r) {
  free(r->text), free(r->provider), free(r->counter), free(r->type), free(r->event), free(r->filter);
  for (size_t i = 0; i < r->nactions; i++) free(r->actions[i].arg);
  memset(r, 0, sizeof *r);
}

static const char *op_text(int op) { return op == 'G' ? ">=" : op == 'L' ? "<=" : op == '<' ? "<" : ">"; }

static void put_ms(char *buf, size_t cap, uint64_t ms) {
  if (ms % 1000) snprintf(buf, cap, "%llu ms", (unsigned long long)ms);
  else snprintf(buf, cap, "%llu s", (unsigned long long)(ms / 1000));
}

const char *dnt_rule_trigger_text(const struct dnt_rule *r, char *buf, size_t cap) {
  char t[32];
  switch (r->kind) {
  case DNT_TRIGGER_EXCEPTION:
    put_ms(t, sizeof t, r->window_ms);
    snprintf(buf, cap, "exception%s%s %u in %s", r->type ? " " : "", r->type ? r->type : "", r->count, t);
    break;
  case DNT_TRIGGER_GC_PAUSE: snprintf(buf, cap, "gc-pause > %g ms", r->threshold); break;
  case DNT_TRIGGER_PROCESS_START: snprintf(buf, cap, "process-start"); break;
  case DNT_TRIGGER_EVENT: {
    char n[64] = "";
    put_ms(t, sizeof t, r->window_ms);
    if (r->window_ms) snprintf(n, sizeof n, " %u in %s", r->count, t);
    snprintf(buf, cap, "event %s%s%s%s%s%s", r->provider, r->event ? "/" : "", r->event ? r->event : "",
             r->filter ? " " : "", r->filter ? r->filter : "", n);
    break;
  }
  default:
    put_ms(t, sizeof t, r->for_ms);
    char pct[32] = "";
    if (r->percentile > 0) snprintf(pct, sizeof pct, "[p%g]", r->percentile);
    snprintf(buf, cap, "%s/%s%s %s %g%s%s%s", r->provider, r->counter, pct, op_text(r->op), r->threshold, r->unit,
             r->for_ms ? " for " : "", r->for_ms ? t : "");
    break;
  }
  return buf;
}

const char *dnt_action_text(const struct dnt_action *a, char *buf, size_t cap) {
  char t[32];
  switch (a->kind) {
  case DNT_ACTION_COLLECT:
    put_ms(t, sizeof t, a->duration_ms);
    snprintf(buf, cap, "collect %s%s%s", t, a->arg ? " " : "", a->arg ? a->arg : "");
    break;
  case DNT_ACTION_DUMP: snprintf(buf, cap, "dump %s", a->arg ? a->arg : "full"); break;
  case DNT_ACTION_GCDUMP: snprintf(buf, cap, "gcdump"); break;
  case DNT_ACTION_STACKS: snprintf(buf, cap, "stacks"); break;
  case DNT_ACTION_SAVE_RING: snprintf(buf, cap, "save-ring"); break;
  default: snprintf(buf, cap, "exec %s", a->arg); break;
  }
  return buf;
}
