/* What to trace: --providers, --profile, --clrevents and --clreventlevel, with dotnet-trace's
 * grammar and merge rules, turned into one list of EventPipe providers. */
#ifndef DNT_PROVIDERS_H
#define DNT_PROVIDERS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define DNT_RUNTIME_PROVIDER "Microsoft-Windows-DotNETRuntime"
#define DNT_SAMPLE_PROVIDER "Microsoft-DotNETCore-SampleProfiler"

struct dnt_provider {
  char *name;
  uint64_t keywords;
  uint32_t level;         /* 0 LogAlways .. 5 Verbose */
  char *args;             /* "k=v;k2=v2" or NULL */
  const char *enabled_by; /* "--providers", "--profile", "--clrevents" (static) */
};

/* A list owned by the caller's struct: free with dnt_providers_release. */
struct dnt_providers {
  struct dnt_provider *v;
  size_t n, cap;
  int has_rundown_keyword; /* a profile asked for its own rundown keyword */
  uint64_t rundown_keyword;
};

void dnt_providers_release(struct dnt_providers *l);

/* Adds a --providers value: `Name[:[Keywords][:[Level][:[Args]]]]`, comma-separated; the same
 * name twice merges (keywords OR'ed, the more verbose level, an error if both carry args).
 * On error returns -1 with a message pointing at the bad token in err. */
int dnt_providers_parse(struct dnt_providers *l, const char *spec, char *err, size_t errlen);

/* Adds each provider of from (borrowed; none with args) to l, merged by the same rules. 0 or -1
 * with err. */
int dnt_providers_merge(struct dnt_providers *l, const struct dnt_providers *from, char *err, size_t errlen);

/* Adds the providers of the comma-separated profiles, except those already named by
 * --providers. -1 with a message on an unknown profile. */
int dnt_providers_add_profiles(struct dnt_providers *l, const char *names, char *err, size_t errlen);

/* --clrevents: `+`-separated keyword names for the runtime provider at `level`. If the runtime
 * provider is already in the list, nothing is added and *ignored is set (warn the user). */
int dnt_providers_add_clrevents(struct dnt_providers *l, const char *aliases, uint32_t level, int *ignored,
                                char *err, size_t errlen);

/* Parses a level: a number 0..5 or a name (critical, error, warning, informational, verbose,
 * logalways), case-insensitive. -1 if it is neither. */
int dnt_parse_level(const char *s);
/* "Informational(4)" and the like; static storage. */
const char *dnt_level_text(uint32_t level);

/* Prints dotnet-trace's provider table (name, 0x%016X keywords, level, enabled by). */
void dnt_providers_print(FILE *fp, const struct dnt_providers *l);

/* Prints the profiles with their providers (collect --list-profiles). */
void dnt_profiles_print(FILE *fp);

#endif
