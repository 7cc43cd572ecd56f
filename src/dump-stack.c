/* dump analyze's clrstack: a managed thread's stack as SOS's clrstack prints it (the current
 * thread's, or -all every managed thread's): a row per frame, its stack pointer, instruction
 * pointer, method and source line (from the PDB beside the module), and the runtime's explicit
 * Frames as SOS shows them ("[InlinedCallFrame: ADDR]"). Command-line glue: it prints. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dnt-core.h"
#include "dnt-trace.h"
#include "dump-analyze.h"
#include "util.h"

static void put_name(struct analysis *a, uint64_t md) {
  char name[2048];
  if (md && dnt_clr_method_name(a->clr, md, name, sizeof name) == 0) {
    char *safe = dnt_safe_text(name);
    printf("%s", safe);
    free(safe);
  }
}

/* One thread's rows (its header printed by the caller). 0, or 1 after printing why. */
static int print_stack(struct analysis *a, const struct dnt_clr_thread *t, int first) {
  struct dnt_clr_frame *v;
  size_t n;
  if (dnt_clr_stack_walk(a->clr, t, &v, &n) != 0) {
    dnt_error("clrstack: the stack of thread 0x%x cannot be walked", t->os_id);
    return 1;
  }
  if (a->o->json) {
    printf("%s{\"osId\":%u,\"id\":%u,\"frames\":[", first ? "" : ",", t->os_id, t->id);
    for (size_t i = 0; i < n; i++) {
      char name[2048] = "";
      if (v[i].method && dnt_clr_method_name(a->clr, v[i].method, name, sizeof name) != 0) name[0] = '\0';
      printf("%s{\"sp\":\"0x%" PRIx64 "\",\"ip\":\"0x%" PRIx64 "\",", i ? "," : "", v[i].sp, v[i].ip);
      if (v[i].frame) printf("\"frame\":\"%s\",", v[i].kind);
      printf("\"method\":");
      dnt_json_string(stdout, name);
      char file[4096];
      uint32_t line;
      if (!v[i].frame && dnt_clr_source_line(a->clr, v[i].ip, i > 0, file, sizeof file, &line) == 0) {
        printf(",\"file\":");
        dnt_json_string(stdout, file);
        printf(",\"line\":%u", line);
      }
      printf("}");
    }
    printf("]}");
  } else {
    printf("        Child SP               IP Call Site\n");
    int caller = 0; /* past the innermost frame, or a Frame: ips are return addresses */
    for (size_t i = 0; i < n; i++) {
      if (v[i].frame) {
        printf("%016" PRIX64 " %016" PRIx64 " [%s: %016" PRIx64 "] ", v[i].sp, v[i].ip, v[i].kind, v[i].frame);
        put_name(a, v[i].method);
      } else {
        printf("%016" PRIX64 " %016" PRIX64 " ", v[i].sp, v[i].ip);
        put_name(a, v[i].method);
        char file[4096];
        uint32_t line;
        if (dnt_clr_source_line(a->clr, v[i].ip, caller, file, sizeof file, &line) == 0) {
          char *safe = dnt_safe_text(file);
          printf(" [%s @ %u]", safe, line);
          free(safe);
        }
      }
      caller = 1;
      printf("\n");
    }
  }
  free(v);
  return 0;
}

int dnt_analyze_clrstack(struct analysis *a, int argc, char **argv) {
  int all = 0;
  for (int i = 1; i < argc; i++) {
    if (strcasecmp(argv[i], "-all") == 0) {
      all = 1;
    } else {
      char *safe = dnt_safe_text(argv[i]);
      dnt_error("clrstack: '%s' is not an option this clrstack knows (-all)", safe);
      free(safe);
      return 1;
    }
  }
  struct dnt_clr_threads ts;
  char err[512];
  if (dnt_clr_threads_read(a->clr, &ts, err, sizeof err) != 0) {
    dnt_error("clrstack: %s", err);
    return 1;
  }
  int rc = 0, shown = 0;
  if (a->o->json) printf("{\"command\":\"clrstack\",\"threads\":[");
  for (size_t i = 0; i < ts.n && !rc; i++) {
    const struct dnt_clr_thread *t = &ts.v[i];
    if (!all && t->dbg != a->thread) continue;
    if (!a->o->json) {
      if (all) printf("OS Thread Id: 0x%x\n", t->os_id);
      else printf("OS Thread Id: 0x%x (%d)\n", t->os_id, t->dbg);
    }
    rc = print_stack(a, t, !shown);
    shown++;
  }
  if (a->o->json) printf("]}\n");
  else if (!all && !shown) printf("The current thread is unmanaged\n");
  dnt_clr_threads_release(&ts);
  return rc;
}
