/* --providers, --profile and --clrevents: dotnet-trace's grammar and merge rules, table-driven.
 * Expected masks are the ones dotnet-trace documents (anchors.md §1.3-1.4), typed in by hand. */
#include <criterion/criterion.h>
#include <string.h>

#include "providers.h"

static struct dnt_providers parse_ok(const char *spec) {
  struct dnt_providers l = {0};
  char err[256];
  cr_assert_eq(dnt_providers_parse(&l, spec, err, sizeof err), 0, "'%s': %s", spec, err);
  return l;
}

struct grammar_case {
  const char *spec;
  const char *name;
  uint64_t keywords;
  uint32_t level;
  const char *args;
};

Test(providers, grammar) {
  static const struct grammar_case cases[] = {
      {"Foo", "Foo", 0, 4, NULL},
      {"Foo:", "Foo", 0, 4, NULL},
      {"Foo:0x10", "Foo", 0x10, 4, NULL},
      {"Foo:10", "Foo", 0x10, 4, NULL}, /* keywords are hex even without 0x */
      {"Foo:FFFFFFFFFFFFFFFF:5", "Foo", 0xFFFFFFFFFFFFFFFFull, 5, NULL},
      {"Foo::5", "Foo", 0, 5, NULL},
      {"Foo::verbose", "Foo", 0, 5, NULL},
      {"Foo::LogAlways", "Foo", 0, 0, NULL},
      {"Foo::critical", "Foo", 0, 1, NULL},
      {"Foo:1:2:EventCounterIntervalSec=1", "Foo", 1, 2, "EventCounterIntervalSec=1"},
      {"Foo:::k=v;k2=v2", "Foo", 0, 4, "k=v;k2=v2"},
      {"Foo:::Spec=\"a:b,c;d\"", "Foo", 0, 4, "Spec=\"a:b,c;d\""}, /* quotes keep , : ; */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    struct dnt_providers l = parse_ok(cases[i].spec);
    cr_assert_eq(l.n, 1, "'%s' gives one provider", cases[i].spec);
    cr_assert_str_eq(l.v[0].name, cases[i].name);
    cr_assert_eq(l.v[0].keywords, cases[i].keywords, "'%s' keywords 0x%llx", cases[i].spec, (unsigned long long)l.v[0].keywords);
    cr_assert_eq(l.v[0].level, cases[i].level, "'%s' level %u", cases[i].spec, l.v[0].level);
    if (cases[i].args)
      cr_assert_str_eq(l.v[0].args, cases[i].args);
    else
      cr_assert_null(l.v[0].args);
    cr_assert_str_eq(l.v[0].enabled_by, "--providers");
    dnt_providers_release(&l);
  }
}

Test(providers, several_and_merging) {
  struct dnt_providers l = parse_ok("A:1:2,B,A:4:5");
  cr_assert_eq(l.n, 2);
  cr_assert_str_eq(l.v[0].name, "A");
  cr_assert_eq(l.v[0].keywords, 0x5, "keywords OR'ed");
  cr_assert_eq(l.v[0].level, 5, "the more verbose level");
  dnt_providers_release(&l);
  l = parse_ok("A::5,A::0");
  cr_assert_eq(l.v[0].level, 0, "LogAlways wins");
  dnt_providers_release(&l);
  l = parse_ok("A:::x=1,A:2");
  cr_assert_str_eq(l.v[0].args, "x=1");
  cr_assert_eq(l.v[0].keywords, 2);
  dnt_providers_release(&l);
}

Test(providers, errors_point_at_the_bad_token) {
  static const struct {
    const char *spec, *want;
  } cases[] = {
      {"", "at least one"},
      {"A,,B", "empty provider"},
      {"A,", "empty provider"},
      {":1", "empty provider name"},
      {"A:xyz", "keywords 'xyz'"},
      {"A:0x", "keywords '0x'"},
      {"A:11111111111111111", "keywords '11111111111111111'"},
      {"A::6", "level '6'"},
      {"A::loud", "level 'loud'"},
      {"A:::k=\"v", "unbalanced quote"},
      {"A:::x=1,A:::y=2", "given twice with arguments"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    struct dnt_providers l = {0};
    char err[256] = "";
    cr_assert_eq(dnt_providers_parse(&l, cases[i].spec, err, sizeof err), -1, "'%s' is refused", cases[i].spec);
    cr_assert(strstr(err, cases[i].want), "'%s': '%s' should mention '%s'", cases[i].spec, err, cases[i].want);
    dnt_providers_release(&l);
  }
}

struct want_provider {
  const char *name;
  uint64_t keywords;
  uint32_t level;
};

static void expect_profile(const char *profile, const struct want_provider *want, size_t n) {
  struct dnt_providers l = {0};
  char err[256];
  cr_assert_eq(dnt_providers_add_profiles(&l, profile, err, sizeof err), 0, "%s", err);
  cr_assert_eq(l.n, n, "%s has %zu providers", profile, n);
  for (size_t i = 0; i < n; i++) {
    cr_assert_str_eq(l.v[i].name, want[i].name);
    cr_assert_eq(l.v[i].keywords, want[i].keywords, "%s: %s 0x%llx", profile, want[i].name,
                 (unsigned long long)l.v[i].keywords);
    cr_assert_eq(l.v[i].level, want[i].level);
    cr_assert_str_eq(l.v[i].enabled_by, "--profile");
  }
  dnt_providers_release(&l);
}

Test(providers, profiles_have_dotnet_trace_masks) {
  const struct want_provider common[] = {{"Microsoft-Windows-DotNETRuntime", 0x100003801D, 4}};
  const struct want_provider sampled[] = {{"Microsoft-DotNETCore-SampleProfiler", 0xF00000000000, 4}};
  const struct want_provider gcv[] = {{"Microsoft-Windows-DotNETRuntime", 0x8003, 5}};
  const struct want_provider gcc[] = {{"Microsoft-Windows-DotNETRuntime", 0x1, 4},
                                      {"Microsoft-Windows-DotNETRuntimePrivate", 0x1, 4}};
  const struct want_provider db[] = {{"System.Threading.Tasks.TplEventSource", 0x80, 4},
                                     {"Microsoft-Diagnostics-DiagnosticSource", 0x3, 5}};
  const struct want_provider cpu[] = {{"Microsoft-DotNETCore-SampleProfiler", 0xF00000000000, 4},
                                      {"Microsoft-Windows-DotNETRuntime", 0x100003801D, 4}};
  expect_profile("dotnet-common", common, 1);
  expect_profile("dotnet-sampled-thread-time", sampled, 1);
  expect_profile("gc-verbose", gcv, 1);
  expect_profile("gc-collect", gcc, 2);
  expect_profile("database", db, 2);
  expect_profile("cpu-sampling", cpu, 2);
}

Test(providers, gc_collect_brings_its_rundown_keyword) {
  struct dnt_providers l = {0};
  char err[256];
  cr_assert_eq(dnt_providers_add_profiles(&l, "gc-collect", err, sizeof err), 0);
  cr_assert(l.has_rundown_keyword);
  cr_assert_eq(l.rundown_keyword, 0x1);
  dnt_providers_release(&l);
}

Test(providers, user_providers_win_over_profiles) {
  struct dnt_providers l = parse_ok("Microsoft-Windows-DotNETRuntime:0x1:5");
  char err[256];
  cr_assert_eq(dnt_providers_add_profiles(&l, "dotnet-common,dotnet-sampled-thread-time", err, sizeof err), 0);
  cr_assert_eq(l.n, 2);
  cr_assert_eq(l.v[0].keywords, 0x1);
  cr_assert_str_eq(l.v[0].enabled_by, "--providers");
  cr_assert_str_eq(l.v[1].name, "Microsoft-DotNETCore-SampleProfiler");
  cr_assert_eq(dnt_providers_add_profiles(&l, "no-such-profile", err, sizeof err), -1);
  cr_assert(strstr(err, "unknown profile 'no-such-profile'"), "%s", err);
  dnt_providers_release(&l);
}

Test(providers, clrevents) {
  struct dnt_providers l = {0};
  char err[256];
  int ignored;
  cr_assert_eq(dnt_providers_add_clrevents(&l, "gc+jit+Loader+waithandle", 5, &ignored, err, sizeof err), 0, "%s", err);
  cr_assert_not(ignored);
  cr_assert_eq(l.n, 1);
  cr_assert_eq(l.v[0].keywords, 0x1 | 0x10 | 0x8 | 0x40000000000);
  cr_assert_eq(l.v[0].level, 5);
  cr_assert_str_eq(l.v[0].enabled_by, "--clrevents");
  cr_assert_eq(dnt_providers_add_clrevents(&l, "gc", 4, &ignored, err, sizeof err), 0);
  cr_assert(ignored, "a second source of the runtime provider is ignored");
  cr_assert_eq(dnt_providers_add_clrevents(&l, "gc+bogus", 4, &ignored, err, sizeof err), -1);
  cr_assert(strstr(err, "'bogus'"), "%s", err);
  dnt_providers_release(&l);
}

Test(providers, levels) {
  cr_assert_eq(dnt_parse_level("0"), 0);
  cr_assert_eq(dnt_parse_level("5"), 5);
  cr_assert_eq(dnt_parse_level("Informational"), 4);
  cr_assert_eq(dnt_parse_level("WARNING"), 3);
  cr_assert_eq(dnt_parse_level("error"), 2);
  cr_assert_eq(dnt_parse_level("6"), -1);
  cr_assert_eq(dnt_parse_level("4x"), -1);
  cr_assert_eq(dnt_parse_level(""), -1);
  cr_assert_str_eq(dnt_level_text(4), "Informational(4)");
}

Test(providers, table_format) {
  struct dnt_providers l = parse_ok("Microsoft-Windows-DotNETRuntime:0x100003801D:4");
  char *buf = NULL;
  size_t len = 0;
  FILE *fp = open_memstream(&buf, &len);
  dnt_providers_print(fp, &l);
  fclose(fp);
  cr_assert(strstr(buf, "Microsoft-Windows-DotNETRuntime          0x000000100003801D   Informational(4)   --providers\n"),
            "%s", buf);
  free(buf);
  dnt_providers_release(&l);
}
