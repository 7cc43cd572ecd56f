/* The incidents of watch and serve (dnt-agent.h "Incidents"): a firing's actions run one after
 * the other on the caller's loop as the program's own commands (dump, gcdump, stacks, collect:
 * children watched by the loop), a shell command, or the caller's save-ring; a line (or a JSON
 * object) per incident once its actions are done, kept for a listing too; the output directory
 * held under a budget. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent-int.h"

extern char **environ;

#define KEEP_DONE 1000 /* incidents listed */

struct incident {
  struct incident *next;
  size_t rule; /* 1-based, as the log says it */
  const struct dnt_rule *r; /* &own */
  struct dnt_rule own;      /* the rule, read again from its text: its engine may go first */
  char why[256];
  uint64_t held_back;
  int64_t when_unix_ms;
  int pid;
  char process[256];
  size_t next_action;
  char files[DNT_RULE_MAX_ACTIONS][4096];
  int status[DNT_RULE_MAX_ACTIONS];
};

struct dnt_incidents {
  uv_loop_t *loop;
  struct dnt_incident_opts o;
  char dir[4096];
  dnt_save_ring_fn save;
  void *ud;
  char self[4096];
  uv_process_t child;
  int busy; /* an action runs: a child spawned and not yet closed, or a save-ring */
  struct incident *queue, *last;
  char **done;
  size_t ndone;
};

struct dnt_incidents *dnt_incidents_new(uv_loop_t *loop, const struct dnt_incident_opts *o, dnt_save_ring_fn save,
                                        void *ud) {
  struct dnt_incidents *r = calloc(1, sizeof *r);
  if (!r) return NULL;
  ssize_t len = readlink("/proc/self/exe", r->self, sizeof r->self - 1);
  if (len <= 0) {
    free(r);
    return NULL;
  }
  r->self[len] = '\0';
  r->loop = loop, r->o = *o, r->save = save, r->ud = ud;
  snprintf(r->dir, sizeof r->dir, "%s", o->dir ? o->dir : ".");
  r->o.dir = r->dir;
  if (!(r->done = calloc(KEEP_DONE, sizeof *r->done))) {
    free(r);
    return NULL;
  }
  return r;
}

void dnt_incidents_free(struct dnt_incidents *r) {
  if (!r) return;
  while (r->queue) {
    struct incident *in = r->queue;
    r->queue = in->next;
    dnt_rule_release(&in->own);
    free(in);
  }
  for (size_t i = 0; i < r->ndone; i++) free(r->done[i]);
  free(r->done);
  free(r);
}

int dnt_incidents_idle(const struct dnt_incidents *r) { return !r->queue && !r->busy; }
size_t dnt_incidents_done(const struct dnt_incidents *r) { return r->ndone; }
const char *dnt_incidents_json(const struct dnt_incidents *r, size_t i) { return i < r->ndone ? r->done[i] : NULL; }
const char *dnt_incidents_dir(const struct dnt_incidents *r) { return r->o.dir; }

int dnt_incidents_wrote(const struct dnt_incidents *r, const char *name) {
  if (strchr(name, '/') || !*name || name[0] == '.') return 0;
  char path[4200];
  snprintf(path, sizeof path, "%s/%s", r->o.dir, name);
  for (size_t i = 0; i < r->ndone; i++) { /* the file's path in quotes, as the JSON has it */
    const char *at = strstr(r->done[i], path);
    if (at && at > r->done[i] && at[-1] == '"' && at[strlen(path)] == '"') return 1;
  }
  return 0;
}

void dnt__say(void (*say_fn)(void *ud, enum dnt_say_kind kind, const char *line), void *ud, enum dnt_say_kind kind,
              const char *fmt, ...) {
  char line[1200];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  say_fn(ud, kind, line);
}

/* A line for the caller (the log's, a note, a warning). */
#define say_line(r, kind, ...) dnt__say((r)->o.say, (r)->o.say_ud, kind, __VA_ARGS__)

/* A time as the log says it (iso: 2026-11-28T01:30:00) or as a file name has it (20261128-013000). */
static void stamp(int64_t unix_ms, int iso, char *buf, size_t cap) {
  time_t t = (time_t)(unix_ms / 1000);
  struct tm tm;
  localtime_r(&t, &tm);
  if (iso) strftime(buf, cap, "%Y-%m-%dT%H:%M:%S", &tm);
  else strftime(buf, cap, "%Y%m%d-%H%M%S", &tm);
}

static void run_next(struct dnt_incidents *r);

/* ---- the disk budget ---- */

struct kept_file {
  char *path;
  off_t size;
  struct timespec mtime;
};

static int by_age(const void *x, const void *y) {
  const struct kept_file *a = x, *b = y;
  if (a->mtime.tv_sec != b->mtime.tv_sec) return a->mtime.tv_sec < b->mtime.tv_sec ? -1 : 1;
  if (a->mtime.tv_nsec != b->mtime.tv_nsec) return a->mtime.tv_nsec < b->mtime.tv_nsec ? -1 : 1;
  return strcmp(a->path, b->path);
}

/* max_disk_mb: the actions' files in the output directory (PROCESS-PID-ruleN-... of any process)
 * over the budget: the oldest go first, each said; those of the incident just written (newest)
 * stay whatever their size. */
static void keep_budget(struct dnt_incidents *r, const struct incident *newest) {
  if (!r->o.max_disk_mb) return;
  DIR *d = opendir(r->o.dir);
  if (!d) return;
  struct kept_file *v = NULL;
  size_t n = 0, cap = 0;
  uint64_t total = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (!strstr(e->d_name, "-rule") || e->d_name[0] == '.') continue;
    char path[4200];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", r->o.dir, e->d_name);
    if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode)) continue;
    if (n == cap) {
      struct kept_file *more = realloc(v, (cap = cap ? 2 * cap : 32) * sizeof *v);
      if (!more) break; /* out of memory: the budget is kept with what was listed */
      v = more;
    }
    if (!(v[n].path = strdup(path))) break;
    v[n].size = st.st_size, v[n].mtime = st.st_mtim;
    n++;
    total += (uint64_t)st.st_size;
  }
  closedir(d);
  if (n) qsort(v, n, sizeof *v, by_age);
  uint64_t budget = (uint64_t)r->o.max_disk_mb << 20;
  for (size_t i = 0; i < n && total > budget; i++) {
    int ours_now = 0;
    for (size_t k = 0; k < newest->r->nactions; k++) ours_now |= strcmp(newest->files[k], v[i].path) == 0;
    if (ours_now) continue;
    if (unlink(v[i].path) == 0) {
      total -= (uint64_t)v[i].size;
      say_line(r, DNT_SAY_NOTE, "Removed %s (%.1f MB): the output directory is over --max-disk %ld MB", v[i].path,
          (double)v[i].size / 1e6, r->o.max_disk_mb);
    }
  }
  for (size_t i = 0; i < n; i++) free(v[i].path);
  free(v);
}

/* ---- the log ---- */

static char *incident_json(const struct incident *in) {
  char when[40], *text = NULL;
  size_t len = 0;
  stamp(in->when_unix_ms, 1, when, sizeof when);
  FILE *fp = open_memstream(&text, &len);
  if (!fp) return NULL;
  fprintf(fp, "{\"time\":\"%s\",\"rule\":%zu,\"text\":", when, in->rule);
  dnt_json_string(fp, in->r->text);
  fprintf(fp, ",\"pid\":%d,\"process\":", in->pid);
  dnt_json_string(fp, in->process);
  fprintf(fp, ",\"why\":");
  dnt_json_string(fp, in->why);
  fprintf(fp, ",\"heldBack\":%llu,\"actions\":[", (unsigned long long)in->held_back);
  for (size_t i = 0; i < in->r->nactions; i++) {
    char a[300];
    fprintf(fp, "%s{\"action\":", i ? "," : "");
    dnt_json_string(fp, dnt_action_text(&in->r->actions[i], a, sizeof a));
    fprintf(fp, ",\"file\":");
    if (in->files[i][0]) dnt_json_string(fp, in->files[i]);
    else fputs("null", fp);
    fprintf(fp, ",\"status\":%d}", in->status[i]);
  }
  fprintf(fp, "]}");
  if (fclose(fp) != 0) {
    free(text);
    return NULL;
  }
  return text;
}

/* The incident's line: JSON (as listed), or text. NULL when out of memory. */
static char *incident_text(const struct incident *in) {
  char when[40], *text = NULL, name[600];
  size_t len = 0;
  stamp(in->when_unix_ms, 1, when, sizeof when);
  FILE *fp = open_memstream(&text, &len);
  if (!fp) return NULL;
  dnt_text_escape(name, sizeof name, in->process); /* a process writes its own name */
  fprintf(fp, "%s rule %zu fired on process %d (%s): %s", when, in->rule, in->pid, name, in->why);
  if (in->held_back) fprintf(fp, "; %llu firings held back by the limits before it", (unsigned long long)in->held_back);
  for (size_t i = 0; i < in->r->nactions; i++) {
    char a[300];
    fprintf(fp, "%s%s", i ? ", " : "; ", dnt_action_text(&in->r->actions[i], a, sizeof a));
    if (in->files[i][0] && in->status[i] == 0) fprintf(fp, ": wrote %s", in->files[i]);
    else if (in->status[i]) fprintf(fp, ": failed (exit %d)", in->status[i]);
  }
  if (fclose(fp) != 0) {
    free(text);
    return NULL;
  }
  return text;
}

static void log_incident(struct dnt_incidents *r, const struct incident *in) {
  char *json = incident_json(in);
  char *text = r->o.json ? NULL : incident_text(in);
  if (r->o.json ? !json : !text) say_line(r, DNT_SAY_WARNING, "rule %zu fired on process %d: out of memory", in->rule, in->pid);
  else r->o.say(r->o.say_ud, DNT_SAY_LOG, r->o.json ? json : text);
  free(text);
  if (!json) return;
  if (r->ndone == KEEP_DONE) { /* the oldest listed goes */
    free(r->done[0]);
    memmove(r->done, r->done + 1, (KEEP_DONE - 1) * sizeof *r->done);
    r->ndone--;
  }
  r->done[r->ndone++] = json;
}

/* The file an action writes: DIR/PROCESS-PID-ruleN-YYYYMMDD-HHMMSS[-k].EXT, one not there yet. */
static void file_for(struct dnt_incidents *r, struct incident *in, size_t k, const char *ext) {
  char when[32], proc[128];
  stamp(in->when_unix_ms, 0, when, sizeof when);
  snprintf(proc, sizeof proc, "%.100s", in->process);
  for (char *c = proc; *c; c++)
    if (*c == '/' || *c == ' ' || (unsigned char)*c < 0x20) *c = '_';
  snprintf(in->files[k], sizeof in->files[k], "%s/%s-%d-rule%zu-%s.%s", r->o.dir, proc, in->pid, in->rule, when, ext);
  for (int n = 2; access(in->files[k], F_OK) == 0 && n < 1000; n++)
    snprintf(in->files[k], sizeof in->files[k], "%s/%s-%d-rule%zu-%s-%d.%s", r->o.dir, proc, in->pid, in->rule, when,
             n, ext);
}

/* ---- the actions ---- */

/* After the child's handle is closed: the next action, or the incident said and the next one. */
static void on_child_closed(uv_handle_t *h) {
  struct dnt_incidents *r = h->data;
  r->busy = 0;
  run_next(r);
}

static void on_child_exit(uv_process_t *p, int64_t status, int signal) {
  struct dnt_incidents *r = p->data;
  struct incident *in = r->queue;
  in->status[in->next_action] = signal ? 128 + signal : (int)status;
  in->next_action++;
  uv_close((uv_handle_t *)p, on_child_closed);
}

void dnt_incidents_saved(struct dnt_incidents *r, int ok) {
  struct incident *in = r->queue;
  if (!in || !r->busy) return;
  in->status[in->next_action] = ok ? 0 : 1;
  in->next_action++;
  r->busy = 0;
  run_next(r);
}

/* Starts the current incident's next action, or ends the incident. */
static void run_next(struct dnt_incidents *r) {
  while (r->queue && !r->busy) {
    struct incident *in = r->queue;
    if (in->next_action == in->r->nactions) {
      log_incident(r, in);
      keep_budget(r, in);
      r->queue = in->next;
      if (!r->queue) r->last = NULL;
      dnt_rule_release(&in->own);
      free(in);
      continue;
    }
    const struct dnt_action *a = &in->r->actions[in->next_action];
    size_t k = in->next_action;
    char pid[24], dur[32];
    snprintf(pid, sizeof pid, "%d", in->pid);
    char *argv[16];
    int n = 0, out_fd = -1;
    char *env[8], e_file[4200], e_pid[40], e_rule[40], e_proc[300];
    int nenv = 0;
    argv[n++] = r->self;
    switch (a->kind) {
    case DNT_ACTION_DUMP:
      file_for(r, in, k, "dmp");
      argv[n++] = "dump", argv[n++] = "-p", argv[n++] = pid, argv[n++] = "--type";
      argv[n++] = a->arg ? a->arg : "full";
      argv[n++] = "-o", argv[n++] = in->files[k];
      break;
    case DNT_ACTION_GCDUMP:
      file_for(r, in, k, "gcdump");
      argv[n++] = "gcdump", argv[n++] = "collect", argv[n++] = "-p", argv[n++] = pid, argv[n++] = "-o";
      argv[n++] = in->files[k];
      break;
    case DNT_ACTION_COLLECT:
      file_for(r, in, k, "nettrace");
      snprintf(dur, sizeof dur, "%llums", (unsigned long long)a->duration_ms);
      argv[n++] = "collect", argv[n++] = "-p", argv[n++] = pid, argv[n++] = "--duration", argv[n++] = dur;
      if (a->arg) argv[n++] = "--profile", argv[n++] = a->arg;
      argv[n++] = "-o", argv[n++] = in->files[k];
      break;
    case DNT_ACTION_STACKS:
      file_for(r, in, k, "txt");
      argv[n++] = "stacks", argv[n++] = "-p", argv[n++] = pid;
      out_fd = open(in->files[k], O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
      if (out_fd < 0) {
        in->status[k] = 1, in->next_action++;
        continue;
      }
      break;
    case DNT_ACTION_SAVE_RING: /* the caller's: it calls dnt_incidents_saved once done */
      file_for(r, in, k, "nettrace");
      r->busy = 1;
      if (!r->save || r->save(r->ud, in->pid, in->files[k]) != 0) {
        if (!r->save) say_line(r, DNT_SAY_WARNING, "rule %zu: save-ring without --ring: nothing kept to save", in->rule);
        r->busy = 0;
        in->status[k] = 1, in->next_action++;
        continue;
      }
      return;
    case DNT_ACTION_EXEC: { /* the shell, with the files written before it */
      argv[0] = "/bin/sh", argv[n++] = "-c", argv[n++] = a->arg;
      const char *prev = "";
      for (size_t i = k; i-- > 0;)
        if (in->files[i][0] && in->status[i] == 0) {
          prev = in->files[i];
          break;
        }
      snprintf(e_file, sizeof e_file, "DNTRACE_FILE=%s", prev);
      snprintf(e_pid, sizeof e_pid, "DNTRACE_PID=%d", in->pid);
      snprintf(e_rule, sizeof e_rule, "DNTRACE_RULE=%zu", in->rule);
      snprintf(e_proc, sizeof e_proc, "DNTRACE_PROCESS=%s", in->process);
      env[nenv++] = e_file, env[nenv++] = e_pid, env[nenv++] = e_rule, env[nenv++] = e_proc;
      break;
    }
    }
    argv[n] = NULL;
    /* the child's environment: ours, and for exec the DNTRACE_ variables */
    size_t nours = 0;
    while (environ[nours]) nours++;
    char **envp = malloc((nours + (size_t)nenv + 1) * sizeof *envp);
    if (!envp) {
      if (out_fd >= 0) close(out_fd);
      say_line(r, DNT_SAY_WARNING, "rule %zu: cannot start %s: out of memory", in->rule, argv[0]);
      in->status[k] = 127, in->next_action++;
      continue;
    }
    size_t m = 0;
    for (int i = 0; i < nenv; i++) envp[m++] = env[i];
    for (size_t i = 0; i < nours; i++)
      if (strncmp(environ[i], "DNTRACE_", 8) != 0) envp[m++] = environ[i];
    envp[m] = NULL;
    /* stdout: the stacks' file, or for a command ours for errors (ours is the log's) */
    int child_out = out_fd >= 0 ? out_fd : a->kind == DNT_ACTION_EXEC ? STDERR_FILENO : -1;
    uv_stdio_container_t stdio[3] = {{.flags = UV_IGNORE},
                                     child_out >= 0 ? (uv_stdio_container_t){.flags = UV_INHERIT_FD, .data.fd = child_out}
                                                    : (uv_stdio_container_t){.flags = UV_IGNORE},
                                     {.flags = UV_INHERIT_FD, .data.fd = STDERR_FILENO}};
    uv_process_options_t po = {.exit_cb = on_child_exit, .file = argv[0], .args = argv, .env = envp,
                               .stdio_count = 3, .stdio = stdio};
    r->child.data = r;
    int rc = uv_spawn(r->loop, &r->child, &po);
    free(envp);
    if (out_fd >= 0) close(out_fd);
    r->busy = 1; /* until its handle is closed, even when it did not start */
    if (rc != 0) {
      say_line(r, DNT_SAY_WARNING, "rule %zu: cannot start %s: %s", in->rule, argv[0], uv_strerror(rc));
      in->status[k] = 127, in->next_action++;
      uv_close((uv_handle_t *)&r->child, on_child_closed);
    }
  }
}

void dnt_incidents_fire(struct dnt_incidents *r, const struct dnt_firing *f, int pid, const char *process) {
  struct incident *in = calloc(1, sizeof *in);
  char err[200];
  size_t col;
  if (!in || dnt_rule_parse(f->rule->text, &in->own, err, sizeof err, &col) != 0) {
    if (in) dnt_rule_release(&in->own);
    free(in);
    say_line(r, DNT_SAY_WARNING, "rule %zu fired on process %d: out of memory, its actions do not run", f->index + 1, pid);
    return;
  }
  in->rule = f->index + 1;
  in->r = &in->own;
  snprintf(in->why, sizeof in->why, "%s", f->why);
  in->held_back = f->held_back;
  in->when_unix_ms = (int64_t)f->time_ms;
  in->pid = pid;
  snprintf(in->process, sizeof in->process, "%s", process ? process : "?");
  if (r->last) r->last->next = in;
  else r->queue = in;
  r->last = in;
  run_next(r);
}
