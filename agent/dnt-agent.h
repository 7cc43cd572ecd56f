/* agent/: the long-running side of dntrace: rules that watch a process and say when to act
 * (`dntrace watch`, issue 26). A rule is a trigger and its actions, written as one line:
 *
 *   TRIGGER => ACTION[, ACTION]...
 *
 *   TRIGGER  [PROVIDER/]COUNTER[[pNN]] (> | >= | < | <=) NUMBER[UNIT] [for DURATION]
 *                 a counter (System.Runtime when no provider is named) past a value, in each
 *                 of its values over DURATION (none: its first value past it); UNIT, when the
 *                 counter's own is of the same kind, is converted to it (B, KB, MB, GB; ms, s;
 *                 %); a histogram's percentile NN (its values carry Percentile=NN; p50 when
 *                 none is named)
 *            exception [TYPE] COUNT in DURATION
 *                 COUNT exceptions thrown (of TYPE, its full name, when given) within DURATION
 *            gc-pause > NUMBER ms
 *                 a garbage collection that paused the process longer than that
 *            event PROVIDER[/NAME] [FIELD:VALUE[,FIELD:VALUE]...] [COUNT in DURATION]
 *                 an event of that provider (and name, as TraceEvent names it: GC/Start, and
 *                 payload fields' values, as collect's --stopping-event-* options match them);
 *                 COUNT of them within DURATION when given, else each one
 *            process-start
 *                 the process is followed from now: once for each process (with --all, each
 *                 new one), when its session starts
 *   ACTION   save-ring | collect DURATION [PROFILE] | dump [mini|heap|triage|full] | gcdump
 *            | stacks | exec COMMAND... (the rest of the line: the last action)
 *   DURATION a number with ms, s, m or h (30s, 5m)
 *
 * The library parses rules and decides when they fire from the values and events given to it,
 * each with its own time (the events' timestamps, not a clock read here), within limits: each
 * rule fires at most `max_fires` times in any `limit_ms` (default once in 10 minutes) and not
 * within `cooldown_ms` of its last firing; what the limits held back is counted.
 *
 * It also follows processes (`dnt_follow`): a process's EventPipe session started from the caller's
 * libuv loop, its stream decoded into that process's own engine of the rules (its counters, the
 * runtime's exceptions and GC pauses, the events the rules name) and kept in a flight recorder
 * when asked, the save-ring that closes a window and starts the next session; runs what a
 * firing calls for (`dnt_incidents`); and is `serve`'s engine (`dnt_server`). `watch` and `serve`
 * are the command lines around it. It never prints and never exits: its lines go to the caller.
 * One public header. */
#ifndef DNT_AGENT_H
#define DNT_AGENT_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "dnt-counters.h"
#include "dsipc.h"
#include "ntr.h"

enum dnt_trigger_kind {
  DNT_TRIGGER_COUNTER, DNT_TRIGGER_EXCEPTION, DNT_TRIGGER_GC_PAUSE, DNT_TRIGGER_EVENT, DNT_TRIGGER_PROCESS_START
};
enum dnt_action_kind {
  DNT_ACTION_COLLECT, DNT_ACTION_DUMP, DNT_ACTION_GCDUMP, DNT_ACTION_STACKS, DNT_ACTION_EXEC, DNT_ACTION_SAVE_RING
};

#define DNT_RULE_MAX_ACTIONS 8

struct dnt_action {
  enum dnt_action_kind kind;
  uint64_t duration_ms; /* collect */
  char *arg;            /* collect's profile, dump's type, exec's command; NULL when none */
};

struct dnt_rule {
  char *text; /* as written, owned */
  enum dnt_trigger_kind kind;
  /* a counter; an event's provider */
  char *provider, *counter; /* owned */
  double percentile;        /* [pNN]: a histogram's percentile; 0 when none was named */
  int op;                   /* '>', 'G' (>=), '<', 'L' (<=) */
  double threshold;
  char unit[8];             /* the threshold's unit as written ("" when none) */
  uint64_t for_ms;
  /* an exception: type (owned; NULL for any), count, window; an event: count and window too (1
   * and 0 when none was given) */
  char *type;
  uint32_t count;
  uint64_t window_ms;
  /* an event: its name (owned; NULL for any of the provider's) and payload filter (owned,
   * "FIELD:VALUE[,FIELD:VALUE]..."; NULL for none) */
  char *event, *filter;
  /* a GC pause: threshold in ms (threshold) */
  struct dnt_action actions[DNT_RULE_MAX_ACTIONS];
  size_t nactions;
};

/* Parses one rule. 0, or -1 with err (caller's, cap bytes) saying what is wrong and *column its
 * place (1-based, in text). r is the caller's, filled (free with dnt_rule_release, also after a
 * failure). */
int dnt_rule_parse(const char *text, struct dnt_rule *r, char *err, size_t cap, size_t *column);
void dnt_rule_release(struct dnt_rule *r);

/* The trigger as a phrase ("System.Runtime/cpu-usage > 80 for 30 s"), into buf. */
const char *dnt_rule_trigger_text(const struct dnt_rule *r, char *buf, size_t cap);
/* An action as a word or two ("dump mini", "collect 30 s"), into buf. */
const char *dnt_action_text(const struct dnt_action *a, char *buf, size_t cap);

/* ---- the engine ---- */

struct dnt_rules;

/* What a rule's firing was: the rule (borrowed from the engine), its index, when (the event's ms),
 * what held ("cpu-usage = 93.2 % > 80 for 30 s"), and how many firings the limits held back
 * since its last one. */
struct dnt_firing {
  const struct dnt_rule *rule;
  size_t index;
  uint64_t time_ms;
  char why[256];
  uint64_t held_back;
};
typedef void (*dnt_rule_fired_fn)(void *ud, const struct dnt_firing *f);

/* A new engine (NULL when out of memory) calling fired (ud: the caller's) when a rule fires.
 * Free with dnt_rules_free. */
struct dnt_rules *dnt_rules_new(dnt_rule_fired_fn fired, void *ud);
void dnt_rules_free(struct dnt_rules *e);
/* Adds a parsed rule, taken (r is zeroed). 0, or -1 when out of memory (r released). */
int dnt_rules_add(struct dnt_rules *e, struct dnt_rule *r);
size_t dnt_rules_count(const struct dnt_rules *e);
const struct dnt_rule *dnt_rules_get(const struct dnt_rules *e, size_t i);
/* The limits, for every rule: at most max_fires firings in any limit_ms, none within cooldown_ms
 * of the last. Defaults 1, 600000, 0. */
void dnt_rules_set_limits(struct dnt_rules *e, uint32_t max_fires, uint64_t limit_ms, uint64_t cooldown_ms);

/* A counter's value at time_ms (unit: the counter's, "MB", "%", "ms", "By"...). */
void dnt_rules_counter(struct dnt_rules *e, const char *provider, const char *name, const char *unit, double value,
                       uint64_t time_ms);
/* The same with the value's tags ("route=/a,Percentile=95", NULL for none): a histogram's
 * percentile goes to the rules that name it ([p95]; p50 to those that name none). */
void dnt_rules_counter_tagged(struct dnt_rules *e, const char *provider, const char *name, const char *tags,
                              const char *unit, double value, uint64_t time_ms);
/* An exception thrown (type: its full name) at time_ms. */
void dnt_rules_exception(struct dnt_rules *e, const char *type, uint64_t time_ms);
/* A garbage collection that paused the process pause_ms, ending at time_ms. */
void dnt_rules_gc_pause(struct dnt_rules *e, double pause_ms, uint64_t time_ms);
/* The process began to be followed at time_ms: the process-start rules fire. */
void dnt_rules_process_start(struct dnt_rules *e, uint64_t time_ms);
/* An event that rule i (an event rule) matches arrived at time_ms (name: the event's, for the
 * log; the caller matches: the library reads no payloads). */
void dnt_rules_event(struct dnt_rules *e, size_t i, const char *name, uint64_t time_ms);
/* Whether rule i, a counter's, has had a value of its counter (to say which never report). */
int dnt_rules_counter_seen(const struct dnt_rules *e, size_t i);
/* How many times rule i has fired, and how many firings the limits held back, in all. */
void dnt_rules_totals(const struct dnt_rules *e, size_t i, uint64_t *fired, uint64_t *held_back);
/* Whether any rule wants exceptions, GC pauses (the session's runtime events). */
int dnt_rules_want(const struct dnt_rules *e, enum dnt_trigger_kind kind);

/* ---- following a process ---- */

struct dnt_follow;

/* What a followed process tells its caller (ud: the one given to dnt_follow_start). Called from
 * the loop; none may close f (dnt_follow_close) from inside. */
struct dnt_follow_cb {
  /* The runtime answered the session's start: rc 0, the process is followed from now (its
   * process-start rules fire); else it refused (msg: its words) and nothing more is called. */
  void (*on_started)(void *ud, struct dnt_follow *f, int rc, const char *msg);
  /* Each counter value decoded, after the rules have seen it. May be NULL. */
  void (*on_value)(void *ud, struct dnt_follow *f, const dnt_counter_value *v);
  /* A rule of this process fired (firing borrowed for the call). */
  void (*on_fired)(void *ud, struct dnt_follow *f, const struct dnt_firing *firing);
  /* A save-ring's window is closed (its session's rundown included): ring, borrowed for the
   * call, is the caller's to write; the next session starts after the call. */
  void (*on_window)(void *ud, struct dnt_follow *f, const ntr_ring *ring);
  /* The process is followed no more, after a start: its session ended (the process exited, or
   * dnt_follow_stop), msg NULL; or the session after a save-ring could not start (msg says). */
  void (*on_ended)(void *ud, struct dnt_follow *f, const char *msg);
  /* A warning worth a line: a counter rule's counter has not reported, the stream does not
   * parse, an older runtime's fallback. May be NULL. */
  void (*on_notice)(void *ud, struct dnt_follow *f, const char *msg);
};

/* What every process an agent follows shares: the caller's, borrowed, outliving them. */
struct dnt_follow_config {
  uv_loop_t *loop;
  dsipc_session_config session;          /* each session's request (its providers borrowed) */
  const struct dnt_counter_specs *specs; /* the counters decoded (the rules' and the caller's) */
  const char *counters_session_id;       /* the Meter session's id the specs were asked with (NULL: any) */
  char *const *rules;                    /* the rules' texts (they parsed): each process's own engine */
  size_t nrules;
  uint32_t max_fires;                    /* the limits (dnt_rules_set_limits; 0: its defaults) */
  uint64_t limit_ms, cooldown_ms;
  uint64_t ring_ms, ring_bytes;          /* the flight recorder's window and bound (ring_ms 0: none) */
  uint64_t unseen_ms;                    /* a counter rule's counter silent this long is said (0: never) */
  const struct dnt_follow_cb *cb;
};

/* Starts following the process at its diagnostic socket (path copied): its session is asked
 * for now, on_started comes when the runtime answers. 0 with *out (close with
 * dnt_follow_close), or a dsipc error (-EACCES: its socket is not ours to use) with err (the
 * caller's, cap bytes) and nothing to close. */
int dnt_follow_start(const struct dnt_follow_config *c, const char *socket_path, void *ud, struct dnt_follow **out,
                     char *err, size_t cap);
/* save-ring: the session stops; its end hands the window to on_window, then the next session
 * starts. 0, or -1 when there is no ring, the process is not followed now or a save is under way. */
int dnt_follow_save_ring(struct dnt_follow *f);
/* Ends the following: StopTracing (on_ended once the rundown is in; a save under way still hands
 * its window over first). A second call gives the session up at once. */
void dnt_follow_stop(struct dnt_follow *f);
/* The process's engine (its rules' totals, which counters reported). */
const struct dnt_rules *dnt_follow_rules(const struct dnt_follow *f);
/* Followed now (its session runs, or is between a save-ring's two sessions). */
int dnt_follow_live(const struct dnt_follow *f);
/* Frees f (its session closed, nothing more called); its memory goes once the loop has closed its
 * timers. NULL is fine. */
void dnt_follow_close(struct dnt_follow *f);

/* Writes the window ring holds to path, atomically (a file there is replaced only once this one is
 * whole). 0, or -1 with err (the caller's, cap bytes). */
int dnt_ring_write_file(const ntr_ring *ring, const char *path, char *err, size_t cap);

/* ---- incidents: a firing's actions ---- */

/* A firing's actions run one after the other on the caller's libuv loop as this program's own
 * commands (dump, gcdump, stacks, collect: children watched by the loop; their files named after
 * the process, the rule and the time), a shell command (exec, with the file written before it in
 * $DNTRACE_FILE), or the caller's save-ring; a line (or a JSON object) per incident once its
 * actions are done, kept for a listing too; the output directory held under a budget. */
struct dnt_incidents;

/* What the runner says: the log's line of an incident (text or JSON, as asked), a note (a file the
 * budget removed), a warning (an action that could not start). */
enum dnt_say_kind { DNT_SAY_LOG, DNT_SAY_NOTE, DNT_SAY_WARNING };

struct dnt_incident_opts {
  const char *dir;  /* where the files go ("." when NULL; copied) */
  int json;         /* the log as JSON objects, a line each */
  long max_disk_mb; /* the files of the directory kept under this (0: no bound) */
  /* each line, without its newline, valid during the call; say_ud is its first argument */
  void (*say)(void *say_ud, enum dnt_say_kind kind, const char *line);
  void *say_ud;
};

/* save-ring, the caller's: starts writing the ring of process pid to path and calls
 * dnt_incidents_saved once done; 0, or -1 when it cannot (no ring, no session): the action fails
 * at once. */
typedef int (*dnt_save_ring_fn)(void *ud, int pid, const char *path);

/* A runner on loop (borrowed), with o (copied). Its actions run this program's own file
 * (/proc/self/exe) with a command: dump, gcdump collect, collect, stacks. save may be NULL. NULL
 * when that file cannot be found or out of memory. */
struct dnt_incidents *dnt_incidents_new(uv_loop_t *loop, const struct dnt_incident_opts *o, dnt_save_ring_fn save,
                                        void *ud);
/* Frees it; call once the loop has run its children out (dnt_incidents_idle). */
void dnt_incidents_free(struct dnt_incidents *r);

/* A firing of process pid (process: its name), queued; its actions start when those of the ones
 * before it are done. f is borrowed for the call (the incident reads its rule again from the
 * rule's text: the engine may be gone before the actions are done). */
void dnt_incidents_fire(struct dnt_incidents *r, const struct dnt_firing *f, int pid, const char *process);
/* The caller's save-ring is over: ok, the file written. */
void dnt_incidents_saved(struct dnt_incidents *r, int ok);
/* 1 when nothing is queued or running. */
int dnt_incidents_idle(const struct dnt_incidents *r);

/* The incidents done so far (the newest last, at most the last 1000), each as its JSON object,
 * borrowed until the next call into the runner. */
size_t dnt_incidents_done(const struct dnt_incidents *r);
const char *dnt_incidents_json(const struct dnt_incidents *r, size_t i);
/* Whether path (a name inside the output directory, no '/') is a file an incident wrote: 1 or 0. */
int dnt_incidents_wrote(const struct dnt_incidents *r, const char *name);
const char *dnt_incidents_dir(const struct dnt_incidents *r);

/* ---- the server: `serve`'s engine ---- */

/* One long-running agent for one process, a list, or every .NET process it can see, with the
 * endpoints a Go program has (net/http/pprof) and Prometheus' /metrics: each target followed
 * (its counters decoded into a table /metrics answers from memory, its rules and their flight
 * recorder), a profile request an EventPipe session of its own parsed on the thread pool and
 * answered when the runtime has sent its rundown (--cpu: perf's on-CPU profile), --push windows
 * of thread time sent to Pyroscope, the incidents listed and their files served. All on the
 * caller's libuv loop, never run from inside a callback. */
struct dnt_server;

#define DNT_SERVER_MAX_LABELS 32

struct dnt_server_config {
  uv_loop_t *loop;
  const char *listen;                    /* HOST:PORT (dnt_http_addr_check'ed by the caller) */
  const char *name;                      /* -n: the process of that name, and the next one after a restart */
  int all;                               /* --all: every process with a diagnostic socket, new ones too */
  uint64_t rescan_ms;                    /* --all: how often (0: 5 s) */
  const char *const *label_kv;           /* --label pairs: key, value, ... (at most DNT_SERVER_MAX_LABELS) */
  size_t nlabels;
  const struct dnt_counter_specs *specs; /* /metrics' counters */
  const char *counters_session_id;       /* the Meter session's id they were asked with (NULL: any) */
  const dsipc_provider *providers;       /* each target's session: the counters', the rules', the ring's */
  size_t nproviders;
  int cpu;                               /* /debug/pprof/profile is perf's on-CPU profile */
  const char *push_host, *push_path;     /* --push: Pyroscope's /ingest there (push_host NULL: none) */
  int push_port;
  uint64_t push_interval_ms;             /* a window's length (0: 10 s) */
  char *const *rules;                    /* --rule: their texts (they parsed), an engine each target */
  size_t nrules;
  uint32_t max_fires;
  struct dnt_incident_opts incidents;    /* with rules: where their actions write, the budget */
  uint64_t ring_ms, ring_bytes;          /* --ring: each target's flight recorder (ring_ms 0: none) */
  /* the name shown for a process (ps's, escaped), into buf; the pid of the one process named
   * name, 0 when there is none or several (-n) */
  const char *(*process_name)(int pid, char *buf, size_t cap);
  int (*find_by_name)(const char *name);
  /* each line the server has for a person: a process followed or ended, a --push outage, an
   * incident (DNT_SAY_LOG), a warning (DNT_SAY_WARNING) */
  void (*say)(void *say_ud, enum dnt_say_kind kind, const char *line);
  void *say_ud;
};

/* Starts serving on c->loop: the HTTP server listening, the targets given (their sockets, as
 * the caller found them: -p) followed, the timers of -n, --all and --push started. c and what
 * it points to are borrowed until dnt_server_free. 0 with *out, or -1 with err (nothing to free). */
int dnt_server_start(const struct dnt_server_config *c, const dsipc_endpoint *targets, size_t ntargets,
                     struct dnt_server **out, char *err, size_t cap);
/* The port it listens on (the one the system chose for :0). */
int dnt_server_port(const struct dnt_server *s);
/* Stops: the HTTP server closed (every request waiting abandoned), each target's session closed
 * without its rundown, the timers closed; the loop then runs out. Twice: nothing. */
void dnt_server_stop(struct dnt_server *s);
/* Frees it: only after dnt_server_stop, once the loop has run out (its timers' memory is its own).
 * NULL is fine. */
void dnt_server_free(struct dnt_server *s);

#endif
