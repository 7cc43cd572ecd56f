#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "providers.h"
#include "util.h"

/* Keyword names of the runtime provider, as --clrevents takes them (dotnet-trace's table). */
static const struct {
  const char *name;
  uint64_t mask;
} clr_keywords[] = {
    {"gc", 0x1},
    {"gchandle", 0x2},
    {"fusion", 0x4},
    {"assemblyloader", 0x4},
    {"loader", 0x8},
    {"jit", 0x10},
    {"ngen", 0x20},
    {"startenumeration", 0x40},
    {"endenumeration", 0x80},
    {"security", 0x400},
    {"appdomainresourcemanagement", 0x800},
    {"jittracing", 0x1000},
    {"interop", 0x2000},
    {"contention", 0x4000},
    {"exception", 0x8000},
    {"threading", 0x10000},
    {"jittedmethodiltonativemap", 0x20000},
    {"overrideandsuppressngenevents", 0x40000},
    {"type", 0x80000},
    {"gcheapdump", 0x100000},
    {"gcsampledobjectallocationhigh", 0x200000},
    {"gcheapsurvivalandmovement", 0x400000},
    {"gcheapcollect", 0x800000},
    {"managedheapcollect", 0x800000},
    {"gcheapandtypenames", 0x1000000},
    {"gcsampledobjectallocationlow", 0x2000000},
    {"perftrack", 0x20000000},
    {"stack", 0x40000000},
    {"threadtransfer", 0x80000000},
    {"debugger", 0x100000000},
    {"monitoring", 0x200000000},
    {"codesymbols", 0x400000000},
    {"eventsource", 0x800000000},
    {"compilation", 0x1000000000},
    {"compilationdiagnostic", 0x2000000000},
    {"methoddiagnostic", 0x4000000000},
    {"typediagnostic", 0x8000000000},
    {"jitinstrumentationdata", 0x10000000000},
    {"profiler", 0x20000000000},
    {"waithandle", 0x40000000000},
    {"allocationsampling", 0x80000000000},
};

/* The filter dotnet-trace's database profile gives DiagnosticSource: SqlClient and EF Core
 * command start/stop with their command text. */
#define DATABASE_FILTER                                                                                        \
  "FilterAndPayloadSpecs=\""                                                                                   \
  "SqlClientDiagnosticListener/System.Data.SqlClient.WriteCommandBefore@Activity1Start:-Command;"              \
  "Command.CommandText;ConnectionId;Operation;Command.Connection.ServerVersion;Command.CommandTimeout;"         \
  "Command.CommandType;Command.Connection.ConnectionString;Command.Connection.Database;"                        \
  "Command.Connection.DataSource;Command.Connection.PacketSize\r\n"                                             \
  "SqlClientDiagnosticListener/System.Data.SqlClient.WriteCommandAfter@Activity1Stop:\r\n"                      \
  "Microsoft.EntityFrameworkCore/Microsoft.EntityFrameworkCore.Database.Command.CommandExecuting@Activity2Start:" \
  "-Command.CommandText;Command;ConnectionId;IsAsync;Command.Connection.ClientConnectionId;"                    \
  "Command.Connection.ServerVersion;Command.CommandTimeout;Command.CommandType;"                                \
  "Command.Connection.ConnectionString;Command.Connection.Database;Command.Connection.DataSource;"             \
  "Command.Connection.PacketSize\r\n"                                                                          \
  "Microsoft.EntityFrameworkCore/Microsoft.EntityFrameworkCore.Database.Command.CommandExecuted@Activity2Stop:\""

struct profile_provider {
  const char *name;
  uint64_t keywords;
  uint32_t level;
  const char *args;
};

static const struct profile {
  const char *name;
  const char *description;
  struct profile_provider providers[3];
  int has_rundown_keyword;
  uint64_t rundown_keyword;
} profiles[] = {
    {"dotnet-common",
     "lightweight .NET runtime diagnostics (GC, loader, JIT, exceptions, threading, compilation)",
     {{DNT_RUNTIME_PROVIDER, 0x100003801D, 4, NULL}},
     0,
     0},
    {"dotnet-sampled-thread-time",
     "samples .NET thread stacks to estimate how much wall clock time code is using",
     {{DNT_SAMPLE_PROVIDER, 0xF00000000000, 4, NULL}},
     0,
     0},
    {"gc-verbose",
     "tracks GC collections and samples object allocations",
     {{DNT_RUNTIME_PROVIDER, 0x8003, 5, NULL}},
     0,
     0},
    {"gc-collect",
     "tracks GC collections only, at very low overhead",
     {{DNT_RUNTIME_PROVIDER, 0x1, 4, NULL}, {"Microsoft-Windows-DotNETRuntimePrivate", 0x1, 4, NULL}},
     1,
     0x1},
    {"database",
     "captures ADO.NET and Entity Framework database commands",
     {{"System.Threading.Tasks.TplEventSource", 0x80, 4, NULL},
      {"Microsoft-Diagnostics-DiagnosticSource", 0x3, 5, DATABASE_FILTER}},
     0,
     0},
    /* what TraceEvent's activity computer stitches async stacks with: task scheduling, start and
     * completion, waits and await continuations (TaskTransfer|Tasks|TaskStops), with activity
     * ids flowing from task to task (TasksFlowActivityIds); Verbose for TaskWaitEnd */
    {"async-tasks",
     "records the task library's events that join async code's stacks across awaits",
     {{"System.Threading.Tasks.TplEventSource", 0xC3, 5, NULL}},
     0,
     0},
    /* the runtime's heap walk (dotnet-gcdump's session): its start forces a blocking gen-2 GC
     * that logs every object, reference, root and type (GC | Type | GCHeapDump | GCHeapCollect |
     * GCHeapAndTypeNames, Verbose); the rundown's modules (Loader | End: not every method) name
     * where the types come from */
    {"gc-heap-snapshot",
     "walks the managed heap once: every object, reference, root and type (dntrace gcdump's)",
     {{DNT_RUNTIME_PROVIDER, 0x1980001, 5, NULL}},
     1,
     0x108},
    {"cpu-sampling",
     "dotnet-sampled-thread-time + dotnet-common (the default of dotnet-trace 9 and earlier)",
     {{DNT_SAMPLE_PROVIDER, 0xF00000000000, 4, NULL}, {DNT_RUNTIME_PROVIDER, 0x100003801D, 4, NULL}},
     0,
     0},
};

static const char *level_names[] = {"LogAlways", "Critical", "Error", "Warning", "Informational", "Verbose"};

int dnt_parse_level(const char *s) {
  if (!s || !*s) return -1;
  if (isdigit((unsigned char)*s)) {
    char *end;
    long v = strtol(s, &end, 10);
    return *end || v < 0 || v > 5 ? -1 : (int)v;
  }
  for (int i = 0; i <= 5; i++)
    if (strcasecmp(s, level_names[i]) == 0) return i;
  return -1;
}

const char *dnt_level_text(uint32_t level) {
  static char buf[32];
  snprintf(buf, sizeof buf, "%s(%u)", level <= 5 ? level_names[level] : "Level", level);
  return buf;
}

void dnt_providers_release(struct dnt_providers *l) {
  for (size_t i = 0; i < l->n; i++) {
    free(l->v[i].name);
    free(l->v[i].args);
  }
  free(l->v);
  memset(l, 0, sizeof *l);
}

static struct dnt_provider *find(struct dnt_providers *l, const char *name) {
  for (size_t i = 0; i < l->n; i++)
    if (strcmp(l->v[i].name, name) == 0) return &l->v[i];
  return NULL;
}

static void append(struct dnt_providers *l, const char *name, size_t name_len, uint64_t keywords, uint32_t level,
                   const char *args, const char *enabled_by) {
  if (l->n == l->cap) {
    l->cap = l->cap ? l->cap * 2 : 8;
    struct dnt_provider *v = realloc(l->v, l->cap * sizeof *v);
    if (!v) dnt_die(1, "out of memory");
    l->v = v;
  }
  struct dnt_provider *p = &l->v[l->n++];
  p->name = strndup(name, name_len);
  p->keywords = keywords;
  p->level = level;
  p->args = args && *args ? dnt_xstrdup(args) : NULL;
  p->enabled_by = enabled_by;
  if (!p->name) dnt_die(1, "out of memory");
}

/* LogAlways (0) asks for every level, so it beats any number. */
static uint32_t more_verbose(uint32_t a, uint32_t b) {
  if (a == 0 || b == 0) return 0;
  return a > b ? a : b;
}

/* Splits s at the first unquoted `sep` at or after s; returns the end of the token. */
static const char *token_end(const char *s, char sep) {
  int quoted = 0;
  for (; *s; s++) {
    if (*s == '"') quoted = !quoted;
    if (*s == sep && !quoted) break;
  }
  return s;
}

static int parse_one(struct dnt_providers *l, const char *spec, size_t len, char *err, size_t errlen) {
  char *tok = strndup(spec, len);
  if (!tok) dnt_die(1, "out of memory");
  int rc = -1;
  /* at most four fields; the last (args) keeps any further colons */
  char *field[4] = {tok, NULL, NULL, NULL};
  for (int i = 1; i < 4; i++) {
    char *colon = (char *)token_end(field[i - 1], ':');
    if (!*colon) break;
    *colon = '\0';
    field[i] = colon + 1;
  }
  const char *name = field[0];
  while (*name == ' ') name++;
  if (!*name) {
    snprintf(err, errlen, "empty provider name in '%.*s'", (int)len, spec);
    goto out;
  }
  uint64_t keywords = 0;
  if (field[1] && *field[1]) {
    const char *k = field[1];
    if (k[0] == '0' && (k[1] == 'x' || k[1] == 'X')) k += 2;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(k, &end, 16);
    if (!*k || *end || errno || strlen(k) > 16) {
      snprintf(err, errlen, "keywords '%s' of provider '%s' are not a hex number", field[1], name);
      goto out;
    }
    keywords = v;
  }
  uint32_t level = 4;
  if (field[2] && *field[2]) {
    int lv = dnt_parse_level(field[2]);
    if (lv < 0) {
      snprintf(err, errlen, "level '%s' of provider '%s' is not 0-5 or a level name", field[2], name);
      goto out;
    }
    level = (uint32_t)lv;
  }
  const char *args = field[3];
  if (args) {
    int quotes = 0;
    for (const char *c = args; *c; c++) quotes += *c == '"';
    if (quotes % 2) {
      snprintf(err, errlen, "unbalanced quote in the arguments of provider '%s': '%s'", name, args);
      goto out;
    }
  }
  struct dnt_provider *old = find(l, name);
  if (old) {
    if (old->args && args && *args) {
      snprintf(err, errlen, "provider '%s' is given twice with arguments; give its arguments once", name);
      goto out;
    }
    old->keywords |= keywords;
    old->level = more_verbose(old->level, level);
    if (!old->args && args && *args) old->args = dnt_xstrdup(args);
  } else {
    append(l, name, strlen(name), keywords, level, args, "--providers");
  }
  rc = 0;
out:
  free(tok);
  return rc;
}

int dnt_providers_parse(struct dnt_providers *l, const char *spec, char *err, size_t errlen) {
  if (!*spec) {
    snprintf(err, errlen, "--providers needs at least one provider");
    return -1;
  }
  for (const char *s = spec; *s;) {
    const char *end = token_end(s, ',');
    if (end == s) {
      snprintf(err, errlen, "empty provider in '%s'", spec);
      return -1;
    }
    if (parse_one(l, s, (size_t)(end - s), err, errlen) < 0) return -1;
    s = *end ? end + 1 : end;
    if (*s == '\0' && end[0] == ',') {
      snprintf(err, errlen, "empty provider at the end of '%s'", spec);
      return -1;
    }
  }
  return 0;
}

int dnt_providers_merge(struct dnt_providers *l, const struct dnt_providers *from, char *err, size_t errlen) {
  for (size_t i = 0; i < from->n; i++) {
    char spec[600];
    snprintf(spec, sizeof spec, "%s:0x%llx:%u", from->v[i].name, (unsigned long long)from->v[i].keywords,
             from->v[i].level);
    if (dnt_providers_parse(l, spec, err, errlen) != 0) return -1;
  }
  return 0;
}

int dnt_providers_add_profiles(struct dnt_providers *l, const char *names, char *err, size_t errlen) {
  for (const char *s = names; *s;) {
    const char *end = strchr(s, ',');
    size_t len = end ? (size_t)(end - s) : strlen(s);
    const struct profile *p = NULL;
    for (size_t i = 0; i < sizeof profiles / sizeof profiles[0]; i++)
      if (strlen(profiles[i].name) == len && strncasecmp(profiles[i].name, s, len) == 0) p = &profiles[i];
    if (!p) {
      snprintf(err, errlen, "unknown profile '%.*s' (see 'dntrace collect --list-profiles')", (int)len, s);
      return -1;
    }
    for (const struct profile_provider *pp = p->providers; pp < p->providers + 3 && pp->name; pp++) {
      struct dnt_provider *old = find(l, pp->name);
      if (old && strcmp(old->enabled_by, "--providers") == 0) continue; /* the user's own wins */
      if (old) { /* two profiles: merge */
        old->keywords |= pp->keywords;
        old->level = more_verbose(old->level, pp->level);
        continue;
      }
      append(l, pp->name, strlen(pp->name), pp->keywords, pp->level, pp->args, "--profile");
    }
    if (p->has_rundown_keyword) {
      l->has_rundown_keyword = 1;
      l->rundown_keyword = p->rundown_keyword;
    }
    s = end ? end + 1 : s + len;
  }
  return 0;
}

int dnt_providers_add_clrevents(struct dnt_providers *l, const char *aliases, uint32_t level, int *ignored,
                                char *err, size_t errlen) {
  uint64_t mask = 0;
  for (const char *s = aliases; *s;) {
    const char *end = strchr(s, '+');
    size_t len = end ? (size_t)(end - s) : strlen(s);
    size_t i;
    for (i = 0; i < sizeof clr_keywords / sizeof clr_keywords[0]; i++)
      if (strlen(clr_keywords[i].name) == len && strncasecmp(clr_keywords[i].name, s, len) == 0) break;
    if (i == sizeof clr_keywords / sizeof clr_keywords[0]) {
      snprintf(err, errlen, "unknown --clrevents keyword '%.*s'", (int)len, s);
      return -1;
    }
    mask |= clr_keywords[i].mask;
    s = end ? end + 1 : s + len;
  }
  *ignored = find(l, DNT_RUNTIME_PROVIDER) != NULL;
  if (!*ignored) append(l, DNT_RUNTIME_PROVIDER, strlen(DNT_RUNTIME_PROVIDER), mask, level, NULL, "--clrevents");
  return 0;
}

void dnt_providers_print(FILE *fp, const struct dnt_providers *l) {
  fprintf(fp, "%-40s %-20s %-18s %s\n", "Provider Name", "Keywords", "Level", "Enabled By");
  for (size_t i = 0; i < l->n; i++) {
    const struct dnt_provider *p = &l->v[i];
    char kw[24];
    snprintf(kw, sizeof kw, "0x%016llX", (unsigned long long)p->keywords);
    fprintf(fp, "%-40s %-20s %-18s %s\n", p->name, kw, dnt_level_text(p->level), p->enabled_by);
  }
  fputc('\n', fp);
}

void dnt_profiles_print(FILE *fp) {
  for (size_t i = 0; i < sizeof profiles / sizeof profiles[0]; i++) {
    const struct profile *p = &profiles[i];
    fprintf(fp, "%-28s %s\n", p->name, p->description);
    for (const struct profile_provider *pp = p->providers; pp < p->providers + 3 && pp->name; pp++)
      fprintf(fp, "    %-40s 0x%016llX  %s\n", pp->name, (unsigned long long)pp->keywords, dnt_level_text(pp->level));
    if (p->has_rundown_keyword) fprintf(fp, "    rundown keyword 0x%llX\n", (unsigned long long)p->rundown_keyword);
  }
}
