/* Thread names for the profile (profile-int.h): what a sampler says a thread is called (perf's
 * comm), kept per thread id. Open addressing on the id: a lookup a sample costs no search. */
#include <stdlib.h>
#include <string.h>

#include "profile-int.h"

struct dnt__thread_name {
  uint64_t thread;
  char *name;
};

static size_t slot(uint64_t thread, size_t cap) { return (size_t)((thread * 0x9e3779b97f4a7c15u) >> 7) & (cap - 1); }

static int grow(struct dnt__thread_names *t) {
  size_t cap = t->cap ? t->cap * 2 : 64;
  struct dnt__thread_name *v = calloc(cap, sizeof *v);
  if (!v) return -1;
  for (size_t i = 0; i < t->cap; i++) {
    if (!t->v[i].name) continue;
    size_t j = slot(t->v[i].thread, cap);
    while (v[j].name) j = (j + 1) & (cap - 1);
    v[j] = t->v[i];
  }
  free(t->v);
  t->v = v;
  t->cap = cap;
  return 0;
}

int dnt__thread_names_set(struct dnt__thread_names *t, uint64_t thread, const char *name) {
  if ((t->n + 1) * 2 > t->cap && grow(t) != 0) return -1;
  size_t j = slot(thread, t->cap);
  while (t->v[j].name && t->v[j].thread != thread) j = (j + 1) & (t->cap - 1);
  if (t->v[j].name && strcmp(t->v[j].name, name) == 0) return 0; /* the usual case: no change */
  char *copy = strdup(name);
  if (!copy) return -1;
  if (!t->v[j].name) t->n++;
  free(t->v[j].name);
  t->v[j] = (struct dnt__thread_name){thread, copy};
  return 0;
}

const char *dnt__thread_names_get(const struct dnt__thread_names *t, uint64_t thread) {
  if (!t->cap) return NULL;
  for (size_t j = slot(thread, t->cap); t->v[j].name; j = (j + 1) & (t->cap - 1))
    if (t->v[j].thread == thread) return t->v[j].name;
  return NULL;
}

void dnt__thread_names_release(struct dnt__thread_names *t) {
  for (size_t i = 0; i < t->cap; i++) free(t->v[i].name);
  free(t->v);
  *t = (struct dnt__thread_names){0};
}
