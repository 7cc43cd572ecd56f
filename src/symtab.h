/* Code address ranges and their names: the runtime's perf map (/tmp/perf-PID.map, written with
 * DOTNET_PerfMapEnabled or after the IPC EnablePerfMap command), for the frames perf cannot name. */
#ifndef DNT_SYMTAB_H
#define DNT_SYMTAB_H

#include <stddef.h>
#include <stdint.h>

struct dnt_symbol {
  uint64_t start, end;
  uint32_t seq; /* the order added: of two ranges that start alike, the later wins */
  char *name;
};

/* Caller-provided storage, zeroed (= empty); free with dnt_symtab_release. */
struct dnt_symtab {
  struct dnt_symbol *v;
  size_t n, cap;
  int sorted;
};

/* Adds [start, start + size) (name copied). 0 or -ENOMEM. */
int dnt_symtab_add(struct dnt_symtab *t, uint64_t start, uint64_t size, const char *name);
/* The name of the innermost range holding addr, or NULL. Sorts on first use after adds. */
const char *dnt_symtab_find(struct dnt_symtab *t, uint64_t addr);
void dnt_symtab_release(struct dnt_symtab *t);

/* Reads a perf map (`STARTHEX SIZEHEX NAME` lines) into t, streaming. Lines that are not that are
 * counted in *bad (may be NULL), not fatal. 0, or -errno when the file cannot be read. */
int dnt_perfmap_load(struct dnt_symtab *t, const char *path, size_t *bad);

/* A perf map name as a frame name: `int32 [Sample] Sample.CpuWork::CountPrimes(int32)[OptimizedTier1]`
 * -> `Sample!Sample.CpuWork.CountPrimes`, as the EventPipe view names it; a stub
 * (`stub ReportStubBlock<X>`) -> `[stub] ReportStubBlock<X>`. Writes into out and returns it. */
const char *dnt_perfmap_frame_name(const char *raw, char *out, size_t cap);

#endif
