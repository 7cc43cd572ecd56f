/* An EventPipe session on one .NET process, as `collect`, `counters` and `perf` need it: the
 * target named by -p, -n, --diagnostic-port PATH[,listen] or `-- CMD`, a session started with the
 * newest CollectTracing the runtime takes, its stream handed to the caller as it arrives, and
 * StopTracing sent on a second connection when the caller wants to stop.
 *
 * Launch (`-- CMD`) and listen modes hold a listener the runtime dials: every command after the
 * first needs a fresh dial, which dnt_session_command waits for. Runs on the caller's libuv
 * loop; this is CLI code, so it prints its errors (git style) and returns exit codes. */
#ifndef DNT_SESSION_H
#define DNT_SESSION_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "dsipc.h"
#include "target.h"

/* What the user named; exactly one of pid, name, port, child_argv is set (the caller checks). */
struct dnt_session_target {
  int pid;
  const char *name;
  const char *port;  /* PATH[,connect] or PATH,listen */
  char **child_argv; /* NULL-terminated */
  int show_child_io; /* the command keeps this terminal (else its stdio goes to /dev/null) */
};

typedef struct dnt_session_cb {
  /* Bytes of the stream, in order; valid only during the call. */
  void (*on_data)(void *ud, const uint8_t *p, size_t n);
  /* The stream is over (the runtime closed it, the session was abandoned or StopTracing could
   * not be sent): close your own handles here so the loop can end. */
  void (*on_end)(void *ud);
} dnt_session_cb;

typedef struct dnt_session {
  uv_loop_t *loop;
  struct dnt_target target;
  /* launch and listen modes */
  dsipc_listener *listener;
  int listen_mode;
  uv_process_t child;
  int child_started, child_exited, child_signal;
  int child_never_dialled; /* it exited before its runtime connected: not a .NET program? */
  int64_t child_status;
  /* the session */
  dsipc_stream *stream, *stopper;
  uint64_t session_id;
  int replied, reply_code;
  char reply_msg[512];
  int running, stopping, ended, abandoned, end_code, ended_early;
  int stop_wanted; /* dnt_session_stop came before the start had returned: done once it has */
  uv_timer_t deferred_end;
  char end_msg[512];
  dnt_session_cb cb;
  void *ud;
  dsipc_buf stop_req; /* StopTracing, while the runtime has still to dial (launch, listen) */
  /* a start from the loop: ipc/'s session carries it (then stream and stopper stay NULL) */
  int starting;
  dsipc_session *async;
  void (*on_started)(void *ud, int rc);
} dnt_session;

/* uv_run for the command's loop. libuv forbids running a loop from inside one of its callbacks;
 * with DNT_STRICT_LOOP set in the environment (the tests set it) such a nested run aborts with a
 * message naming where, so that the rule is checked by every test that runs a command. */
int dnt_loop_run(uv_loop_t *loop, uv_run_mode mode, const char *where);

/* Enter on the terminal (stdin a tty) calls on_enter(ud) once a line ends; a closed or unreadable
 * stdin just stops the watch (Ctrl+C still works). Caller-provided storage, zeroed. */
struct dnt_enter_watch {
  uv_poll_t poll;
  int active; /* the poll handle is open: dnt_enter_watch_close closes it */
  void (*on_enter)(void *ud);
  void *ud;
};
/* 1 when watching, 0 when stdin is no terminal (or cannot be watched). */
int dnt_enter_watch_start(struct dnt_enter_watch *w, uv_loop_t *loop, void (*on_enter)(void *ud), void *ud);
void dnt_enter_watch_close(struct dnt_enter_watch *w);

/* Finds or starts the target on loop (borrowed). s: caller-owned, zeroed here; release with
 * dnt_session_close even on failure. Returns 0 or an exit code (the error is printed). */
int dnt_session_open(dnt_session *s, uv_loop_t *loop, const struct dnt_session_target *t);

/* Starts a session with CollectTracing `version`, falling back to 2 then 1 on an older runtime
 * (a warning says what a fallback loses). cfg is borrowed for the call. Returns 0 or a dsipc
 * error with the runtime's words in s->reply_msg. cb/ud are kept for the stream's life. */
int dnt_session_start(dnt_session *s, int version, const dsipc_session_config *cfg, const dnt_session_cb *cb,
                      void *ud);

/* After a failed dnt_session_start: prints why, in one line, and returns the exit code: 3 when
 * the command of `-- CMD` exited before its runtime connected (no usable target: not .NET, or
 * diagnostics disabled), else 1 (interrupted, or the runtime refused). */
int dnt_session_start_failed(const dnt_session *s);
/* The same for a start from the loop that process pid answered with code (a dsipc error) and
 * msg: one line, and the exit code (3 when its socket is not ours to use, else 1). */
int dnt_session_refused(int pid, int code, const char *msg);

/* The same without waiting, for a session started from inside a callback of the loop (serve
 * following a restarted process): on_started(ud, rc) is called from the loop once the runtime
 * has answered (rc 0: running, with cb/ud as above; else the dsipc error, the runtime's words in
 * s->reply_msg). A target reached through a listener (-- CMD, listen mode) cannot be started
 * this way: -EINVAL. Returns 0, or an error at once (no call of on_started then). */
int dnt_session_start_async(dnt_session *s, int version, const dsipc_session_config *cfg, const dnt_session_cb *cb,
                            void *ud, void (*on_started)(void *ud, int rc));

/* Sends one more command (ResumeRuntime, EnablePerfMap...) on a fresh connection and reads its
 * reply into reply (caller-owned, may be NULL). 0 or a dsipc error, st filled. */
int dnt_session_command(dnt_session *s, const dsipc_buf *req, dsipc_buf *reply, dsipc_status *st);

/* Launch and listen modes: lets the suspended runtime go on (a warning if it cannot). */
void dnt_session_resume(dnt_session *s);

/* Asks the runtime to end the session (it writes its rundown, then closes the stream). Called
 * twice, or while the stream is already over: nothing. */
void dnt_session_stop(dnt_session *s);

/* Stops reading now: what arrived is kept, the rest (rundown) is lost. */
void dnt_session_abandon(dnt_session *s);

/* Launch mode: runs the loop until the command exits; its exit code (128 + signal when killed). */
int dnt_session_wait_child(dnt_session *s);

/* Set by SIGINT/SIGTERM while no libuv signal handler is installed (waiting for a runtime to dial). */
int dnt_session_interrupted(void);

/* Kills a command still running, closes streams and the listener (removing its socket). */
void dnt_session_close(dnt_session *s);

#endif
