/* dntrace dump analyze: a core of a .NET process read as dotnet-dump's SOS reads it, with
 * coredump/ (the runtime's data contracts, no debugging library loaded): commands given with -c,
 * or typed at a prompt. The output of each command is shaped as SOS's, column for column, so
 * what users know of dotnet-dump holds; --json gives each as an object. Command-line glue: it
 * prints. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "builtin.h"
#include "dnt-core.h"
#include "dump-analyze.h"
#include "dnt-trace.h"
#include "options.h"
#include "util.h"


#define O(f) offsetof(struct analyze_options, f)
static const struct dnt_option analyze_options[] = {
    DNT_OPT_LIST('c', "command", "COMMAND", O(commands),
                 "run COMMAND (repeatable, in order), then exit; without it, a prompt.\nSOS's commands: clrthreads, "
                 "clrstack [-all], pe, dumpheap, dumpobj,\ngcroot, eeheap -gc, threads, setthread, eeversion (help "
                 "lists them)"),
    DNT_OPT_STRING(0, "runtime-dir", "DIR", O(runtime_dir),
                   "the folder of the core's runtime (its libcoreclr.so), when it is\nnot where the core says"),
    DNT_OPT_FLAG(0, "json", O(json), "each command's answer as a JSON object, a line each"),
    DNT_OPT_END(),
};

const struct dnt_usage usage_dump_analyze = {
    .synopsis = "dntrace dump analyze CORE [-c COMMAND]... [--runtime-dir DIR] [--json]",
    .summary = "Read a .NET process's core: its managed threads, stacks, heap and exceptions, as dotnet-dump's SOS shows them",
    .options = analyze_options,
    .operand = DNT_OPERAND_ONE,
    .operand_offset = O(core),
    .no_operand = "dump analyze: give the core file to read",
    .many_operands = "dump analyze: one core file at a time",
};
#undef O


dnt_clr_heap *dnt_analyze_heap(struct analysis *a, const char *command) {
  char err[512];
  if (!a->heap && dnt_clr_heap_open(&a->heap, a->clr, err, sizeof err) != 0) {
    dnt_error("%s: %s", command, err);
    return NULL;
  }
  return a->heap;
}

/* eeversion: the runtime, as the core names it. */
static int cmd_eeversion(struct analysis *a) {
  char *lib = dnt_safe_text(dnt_clr_library(a->clr)), err[512], mode[64] = "GC mode not read: ";
  /* the GC's mode as SOS says it; a core without the GC's state (a triage dump) says why not */
  int heaps = 0, server = 0;
  if (!a->heap && dnt_clr_heap_open(&a->heap, a->clr, err, sizeof err) != 0) a->heap = NULL;
  if (a->heap) heaps = dnt_clr_heap_count(a->heap), server = dnt_clr_heap_address(a->heap, 0) != 0;
  if (server) snprintf(mode, sizeof mode, "Server mode with %d gc heaps", heaps);
  else if (heaps) snprintf(mode, sizeof mode, "Workstation mode");
  /* SOS's first lines: the library's version stamp, its number alone, then whole */
  char *stamp = dnt_safe_text(dnt_clr_file_version(a->clr)), number[64];
  snprintf(number, sizeof number, "%.*s", (int)strcspn(stamp, " "), stamp);
  if (a->o->json) {
    printf("{\"command\":\"eeversion\",\"version\":\"%s\",\"fileVersion\":\"%s\",\"library\":\"%s\",\"gcHeaps\":%d,"
           "\"server\":%s}\n",
           dnt_clr_version(a->clr), number, lib, heaps, server ? "true" : "false");
  } else {
    char *why = heaps ? NULL : dnt_safe_text(err);
    if (stamp[0]) printf("%s\n%s\n", number, stamp);
    else printf("%s\n", dnt_clr_version(a->clr));
    printf("%s%s\n", mode, why ? why : "");
    if (server && dnt_clr_heap_datas(a->heap) >= 0) printf("DATAS %d \n", dnt_clr_heap_datas(a->heap));
    printf("%s\n", lib);
    free(why);
  }
  free(stamp);
  free(lib);
  return 0;
}

/* threads: the OS threads of the core, as SOS's `threads` lists them (the current one starred). */
static int cmd_threads(struct analysis *a) {
  const struct dnt_core_thread *v;
  size_t n = dnt_core_threads(a->core, &v);
  if (a->o->json) printf("{\"command\":\"threads\",\"threads\":[");
  for (size_t i = 0; i < n; i++) {
    if (a->o->json)
      printf("%s{\"index\":%zu,\"tid\":%u,\"ip\":%llu,\"sp\":%llu}", i ? "," : "", i, v[i].tid,
             (unsigned long long)v[i].rip, (unsigned long long)v[i].rsp);
    else
      printf("%s%zu 0x%04X (%u)\n", (int)i == a->thread ? "*" : " ", i, v[i].tid, v[i].tid);
  }
  if (a->o->json) printf("]}\n");
  return 0;
}

/* What SOS's Exception column says of a thread that has none: its special role. */
static const char *role_of(const struct dnt_clr_thread *t) {
  if (t->finalizer) return "(Finalizer) ";
  if (t->gc) return "(GC) ";
  if (t->state & DNT_CLR_TS_THREADPOOL) return "(Threadpool Worker) ";
  return "";
}

/* clrthreads: the managed threads, in SOS's layout. */
static int cmd_clrthreads(struct analysis *a) {
  struct dnt_clr_threads ts;
  char err[512];
  if (dnt_clr_threads_read(a->clr, &ts, err, sizeof err) != 0) {
    dnt_error("clrthreads: %s", err);
    return 1;
  }
  if (a->o->json) {
    printf("{\"command\":\"clrthreads\",\"threadCount\":%u,\"unstarted\":%u,\"background\":%u,\"pending\":%u,"
           "\"dead\":%u,\"threads\":[",
           ts.count, ts.unstarted, ts.background, ts.pending, ts.dead);
    for (size_t i = 0; i < ts.n; i++) {
      const struct dnt_clr_thread *t = &ts.v[i];
      printf("%s{\"dbg\":%d,\"id\":%u,\"osId\":%u,\"thread\":\"0x%llx\",\"state\":\"0x%x\",\"gcMode\":\"%s\","
             "\"allocContext\":[\"0x%llx\",\"0x%llx\"],\"lastThrown\":\"0x%llx\",\"finalizer\":%s,\"threadpool\":%s}",
             i ? "," : "", t->dbg, t->id, t->os_id, (unsigned long long)t->address, t->state,
             t->cooperative ? "Cooperative" : "Preemptive", (unsigned long long)t->alloc_ptr,
             (unsigned long long)t->alloc_limit, (unsigned long long)t->last_thrown, t->finalizer ? "true" : "false",
             t->state & DNT_CLR_TS_THREADPOOL ? "true" : "false");
    }
    printf("]}\n");
  } else {
    printf("ThreadCount:      %u\nUnstartedThread:  %u\nBackgroundThread: %u\nPendingThread:    %u\nDeadThread:       %u\n"
           "Hosted Runtime:   no\n",
           ts.count, ts.unstarted, ts.background, ts.pending, ts.dead);
    printf("%108sLock  \n", "");
    printf(" DBG   ID     OSID ThreadOBJ           State GC Mode     GC Alloc Context                  Domain           "
           "Count Apt Exception\n");
    for (size_t i = 0; i < ts.n; i++) {
      const struct dnt_clr_thread *t = &ts.v[i];
      char dbg[16];
      if (t->dbg >= 0) snprintf(dbg, sizeof dbg, "%4d", t->dbg);
      else snprintf(dbg, sizeof dbg, "XXXX");
      printf("%s %4u %8x %016llX %8x %-11s %016llX:%016llX %016llX -00001 Ukn %s", dbg, t->id, t->os_id,
             (unsigned long long)t->address, t->state, t->cooperative ? "Cooperative" : "Preemptive",
             (unsigned long long)t->alloc_ptr, (unsigned long long)t->alloc_limit, (unsigned long long)ts.domain,
             role_of(t));
      if (t->last_thrown) {
        char type[512];
        uint64_t mt;
        if (dnt_clr_object_mt(a->clr, t->last_thrown, &mt) != 0 || dnt_clr_type_name(a->clr, mt, type, sizeof type) != 0)
          snprintf(type, sizeof type, "<unknown type>");
        char *safe = dnt_safe_text(type);
        printf("%s %016llx", safe, (unsigned long long)t->last_thrown);
        free(safe);
      }
      printf("\n");
    }
  }
  dnt_clr_threads_release(&ts);
  return 0;
}

/* A text the process chose (a message), printed escaped; none: SOS's "<none>". */
static void put_text(const char *label, const char *text) {
  char *safe = text ? dnt_safe_text(text) : NULL;
  printf("%s%s\n", label, safe ? safe : "<none>");
  free(safe);
}

/* The frames the exception's throw recorded, as SOS's pe prints them: SP, IP and
 * "Module!Type.Method(Params)+0xOFFSET" (the offset from the method's code). */
static void print_trace(struct analysis *a, const struct dnt_clr_exception *e) {
  printf("StackTrace (generated):\n");
  if (e->trace == DNT_CLR_TRACE_NONE) return (void)printf("<none>\n");
  if (e->trace == DNT_CLR_TRACE_UNAVAILABLE) return (void)printf("<Not Available>\n");
  if (e->trace == DNT_CLR_TRACE_UNREADABLE) return (void)printf("Unable to decipher generated stack trace\n\n");
  printf("    SP               IP               Function\n");
  for (size_t i = 0; i < e->nframes; i++) {
    const struct dnt_clr_trace_frame *f = &e->frames[i];
    char name[2048], path[4096], *safe;
    uint64_t md, start;
    if (dnt_clr_method_name(a->clr, f->method, name, sizeof name) != 0) continue; /* SOS leaves out what it cannot name */
    const char *module = dnt_clr_method_module(a->clr, f->method, path, sizeof path) == 0 ? path : "UNKNOWN";
    if (strrchr(module, '/')) module = strrchr(module, '/') + 1;
    printf("    %016llX %016llX ", (unsigned long long)f->sp, (unsigned long long)f->ip);
    safe = dnt_safe_text(module);
    printf("%s!", safe);
    free(safe);
    safe = dnt_safe_text(name);
    printf("%s", safe);
    free(safe);
    if (dnt_clr_code_method(a->clr, f->ip, &md, &start) == 0 && md == f->method && f->ip > start)
      printf("+%#llx", (unsigned long long)(f->ip - start));
    printf("\n");
  }
  printf("\n");
}

/* pe [ADDR]: the exception at ADDR, or the current thread's (its last thrown), as SOS prints it. */
static int cmd_pe(struct analysis *a, int argc, char **argv) {
  const char *arg = argc > 1 ? argv[1] : NULL;
  uint64_t obj = 0;
  char err[512];
  if (arg && *arg) {
    char *end;
    obj = strtoull(arg, &end, 16);
    if (*end || !obj) {
      dnt_error("pe: '%s' is not an object's address (hex)", arg);
      return 1;
    }
  } else {
    struct dnt_clr_threads ts;
    if (dnt_clr_threads_read(a->clr, &ts, err, sizeof err) != 0) {
      dnt_error("pe: %s", err);
      return 1;
    }
    for (size_t i = 0; i < ts.n; i++)
      if (ts.v[i].dbg == a->thread) obj = ts.v[i].last_thrown;
    dnt_clr_threads_release(&ts);
    if (!obj) {
      if (a->o->json) printf("{\"command\":\"pe\",\"exception\":null}\n");
      else printf("There is no current managed exception on this thread\n");
      return 0;
    }
  }
  struct dnt_clr_exception e;
  if (dnt_clr_exception_read(a->clr, obj, &e, err, sizeof err) != 0) {
    dnt_error("pe: %s", err);
    return 1;
  }
  if (a->o->json) {
    printf("{\"command\":\"pe\",\"exception\":{\"address\":\"0x%llx\",\"type\":", (unsigned long long)e.address);
    dnt_json_string(stdout, e.type);
    printf(",\"message\":");
    if (e.message) dnt_json_string(stdout, e.message);
    else printf("null");
    printf(",\"inner\":\"0x%llx\",\"innerType\":", (unsigned long long)e.inner);
    dnt_json_string(stdout, e.inner_type);
    printf(",\"hresult\":\"%08x\",\"stackTrace\":[", e.hresult);
    for (size_t i = 0; i < e.nframes; i++) {
      char name[2048] = "";
      if (dnt_clr_method_name(a->clr, e.frames[i].method, name, sizeof name) != 0) name[0] = '\0';
      printf("%s{\"sp\":\"0x%llx\",\"ip\":\"0x%llx\",\"method\":", i ? "," : "", (unsigned long long)e.frames[i].sp,
             (unsigned long long)e.frames[i].ip);
      dnt_json_string(stdout, name);
      printf("}");
    }
    printf("]}}\n");
  } else {
    printf("Exception object: %016llx\n", (unsigned long long)e.address);
    put_text("Exception type:   ", e.type[0] ? e.type : "<unknown type>");
    put_text("Message:          ", e.message);
    if (e.inner) {
      char *safe = dnt_safe_text(e.inner_type[0] ? e.inner_type : "<unknown type>");
      printf("InnerException:   %s, Use !PrintException %016llx to see more.\n", safe, (unsigned long long)e.inner);
      free(safe);
    } else {
      printf("InnerException:   <none>\n");
    }
    print_trace(a, &e);
    put_text("StackTraceString: ", e.stack_trace_string);
    printf("HResult: %08x\n", e.hresult);
  }
  dnt_clr_exception_release(&e);
  return 0;
}

/* setthread N: the current thread, by its index among the core's (SOS's DBG column). */
static int cmd_setthread(struct analysis *a, int argc, char **argv) {
  const char *arg = argc > 1 ? argv[1] : NULL;
  const struct dnt_core_thread *v;
  size_t n = dnt_core_threads(a->core, &v);
  char *end;
  long i = arg ? strtol(arg, &end, 10) : -1;
  if (!arg || *end || i < 0 || (size_t)i >= n) {
    dnt_error("setthread: give a thread's index, 0 to %zu (threads lists them)", n ? n - 1 : 0);
    return 1;
  }
  a->thread = (int)i;
  return 0;
}

static int cmd_clrthreads_(struct analysis *a, int argc, char **argv) { return (void)argc, (void)argv, cmd_clrthreads(a); }
static int cmd_threads_(struct analysis *a, int argc, char **argv) { return (void)argc, (void)argv, cmd_threads(a); }
static int cmd_eeversion_(struct analysis *a, int argc, char **argv) { return (void)argc, (void)argv, cmd_eeversion(a); }

static const struct {
  const char *name;
  int (*fn)(struct analysis *a, int argc, char **argv);
  const char *help;
} commands[] = {
    {"clrthreads", cmd_clrthreads_, "the managed threads (SOS's clrthreads)"},
    {"clrstack", dnt_analyze_clrstack, "[-all] the managed stack of the current thread (or every one's)"},
    {"dumpheap", dnt_analyze_dumpheap, "[-stat] [-type T] [-mt MT] the heap's objects (SOS's dumpheap)"},
    {"dumpobj", dnt_analyze_dumpobj, "ADDR the object at ADDR and its fields (SOS's dumpobj)"},
    {"do", dnt_analyze_dumpobj, "ADDR the same (SOS's short name)"},
    {"gcroot", dnt_analyze_gcroot, "[-nostacks] [-limit N] ADDR  what keeps the object at ADDR alive: roots and paths"},
    {"eeheap", dnt_analyze_eeheap, "-gc  the GC's heaps: their regions, by generation (SOS's eeheap -gc)"},
    {"pe", cmd_pe, "[ADDR] the exception at ADDR, or the current thread's"},
    {"setthread", cmd_setthread, "N  the current thread, by index (threads lists them)"},
    {"threads", cmd_threads_, "the core's OS threads"},
    {"eeversion", cmd_eeversion_, "the runtime's version and library"},
};

static void help(void) {
  printf("Commands:\n");
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) printf("  %-12s %s\n", commands[i].name, commands[i].help);
  printf("  %-12s %s\n  %-12s %s\n", "help", "this list", "exit, quit", "leave the prompt");
}

#define MAX_WORDS 32

/* The assemblies met so far whose file is not the one the process loaded: said once each. */
static void say_stale(struct analysis *a) {
  const char *const *files;
  size_t n = dnt_clr_stale_files(a->clr, &files);
  fflush(stdout);
  for (; a->stale_said < n; a->stale_said++) {
    char *safe = dnt_safe_text(files[a->stale_said]);
    dnt_warning("%s is not the file the process loaded (its PE headers differ from the dump's: replaced since?): "
                "its types and methods are left unnamed", safe);
    free(safe);
  }
}

/* One command line: 0 done, 1 failed, -1 exit asked. Its words, split at blanks. */
static int run(struct analysis *a, const char *line) {
  char buf[4096], *argv[MAX_WORDS + 1];
  int argc = 0;
  snprintf(buf, sizeof buf, "%s", line);
  for (char *p = strtok(buf, " \t\r\n"); p; p = strtok(NULL, " \t\r\n")) {
    if (argc == MAX_WORDS) {
      dnt_error("%.32s: too many words (at most %d)", argv[0], MAX_WORDS);
      return 1;
    }
    argv[argc++] = p;
  }
  argv[argc] = NULL;
  if (!argc) return 0;
  const char *word = argv[0];
  if (strcmp(word, "exit") == 0 || strcmp(word, "quit") == 0 || strcmp(word, "q") == 0) return -1;
  if (strcmp(word, "help") == 0 || strcmp(word, "?") == 0) return help(), 0;
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    if (strcasecmp(word, commands[i].name) == 0) {
      int rc = commands[i].fn(a, argc, argv);
      say_stale(a);
      return rc;
    }
  char *safe = dnt_safe_text(word);
  dnt_error("unknown command '%s' (help lists them)", safe);
  free(safe);
  return 1;
}

/* A gzipped core (`dump --compress`) inflated into an unnamed temporary file (under $TMPDIR, gone
 * when closed), read in place like any core through /proc/self/fd: its descriptor, or -1 with
 * err; *gz 0 when path is not gzipped (read as it is). */
static int inflate_core(const char *path, int *gz, char *named, size_t cap, char *err, size_t errcap) {
  *gz = 0;
  unsigned char magic[2] = {0};
  FILE *fp = fopen(path, "rbe");
  if (!fp) return 0; /* the core's reader says why */
  size_t got = fread(magic, 1, 2, fp);
  fclose(fp);
  if (got != 2 || magic[0] != 0x1f || magic[1] != 0x8b) return 0;
  *gz = 1;
  const char *tmp = getenv("TMPDIR");
  int fd = open(tmp && *tmp ? tmp : "/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  gzFile in = gzopen(path, "rb");
  if (fd < 0 || !in) {
    snprintf(err, errcap, "cannot inflate it: %s", fd < 0 ? strerror(errno) : "gzopen failed");
    if (fd >= 0) close(fd);
    if (in) gzclose(in);
    return -1;
  }
  static char buf[1 << 16];
  int n, rc = 0, tty = isatty(2);
  uint64_t total = 0;
  while ((n = gzread(in, buf, sizeof buf)) > 0) {
    if (write(fd, buf, (size_t)n) != n) {
      snprintf(err, errcap, "cannot inflate it into %s: %s", tmp && *tmp ? tmp : "/tmp", strerror(errno));
      rc = -1;
      break;
    }
    total += (uint64_t)n;
    if (tty && total % (256u << 20) < (uint64_t)n) /* a large core takes a while: a line that says so */
      fprintf(stderr, "\rInflating the core: %llu MB", (unsigned long long)(total >> 20));
  }
  if (tty && total >= (256u << 20)) fputc('\n', stderr);
  int zerr = Z_OK;
  const char *why = gzerror(in, &zerr);
  if (!rc && (n < 0 || (zerr != Z_OK && zerr != Z_STREAM_END))) {
    snprintf(err, errcap, "its gzip stream is damaged or cut short (%s)", why);
    rc = -1;
  }
  gzclose(in);
  if (rc) {
    close(fd);
    return -1;
  }
  snprintf(named, cap, "/proc/self/fd/%d", fd);
  return fd;
}

int cmd_dump_analyze(int argc, char **argv) {
  struct analyze_options o = {0};
  int rc = dnt_options_parse(&usage_dump_analyze, "dump analyze", argc, argv, &o);
  if (rc) {
    free(o.commands.v); /* what was taken before the error */
    return rc == DNT_OPTIONS_DONE ? 0 : rc;
  }
  struct analysis a = {.o = &o};
  char err[1024], inflated[64];
  int gz, fd = inflate_core(o.core, &gz, inflated, sizeof inflated, err, sizeof err);
  if ((gz && fd < 0) || dnt_core_open(&a.core, gz ? inflated : o.core, err, sizeof err) != 0) {
    char *safe = dnt_safe_text(o.core);
    dnt_error("%s: %s", safe, err);
    free(safe);
    if (fd > 0) close(fd);
    free(o.commands.v);
    return DNT_EXIT_FAILURE;
  }
  if (fd > 0) close(fd); /* the core keeps its own mapping of it */
  if (dnt_clr_open(&a.clr, a.core, o.runtime_dir, err, sizeof err) != 0) {
    char *safe = dnt_safe_text(o.core);
    dnt_error("%s: %s", safe, err);
    free(safe);
    dnt_core_close(a.core);
    free(o.commands.v);
    return DNT_EXIT_FAILURE;
  }
  int failed = 0;
  if (o.commands.n) {
    for (size_t i = 0; i < o.commands.n; i++) {
      int r = run(&a, o.commands.v[i]);
      if (r < 0) break;
      failed |= r;
    }
  } else {
    int tty = isatty(0);
    if (tty) fprintf(stderr, "Runtime %s. Type 'help' for the commands, 'exit' to leave.\n", dnt_clr_version(a.clr));
    char line[4096];
    for (;;) {
      if (tty) fputs("> ", stderr);
      if (!fgets(line, sizeof line, stdin)) break;
      int r = run(&a, line);
      if (r < 0) break;
      failed |= r;
      fflush(stdout);
    }
  }
  dnt_clr_heap_close(a.heap);
  dnt_clr_close(a.clr);
  dnt_core_close(a.core);
  free(o.commands.v);
  return failed ? DNT_EXIT_FAILURE : 0;
}
