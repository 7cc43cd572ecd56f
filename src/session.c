/* An EventPipe session on one .NET process: target, start with fallbacks, stop (session.h). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "builtin.h"
#include "session.h"
#include "util.h"

/* a session start enables EventSources inside the target, which may JIT a good deal of code
 * first: on a loaded machine that takes seconds */
#define REPLY_TIMEOUT_MS 30000
#define DIAL_TIMEOUT_MS 30000

static volatile sig_atomic_t interrupted;
static void on_interrupt(int sig) {
  (void)sig;
  interrupted = 1;
}

int dnt_session_interrupted(void) { return interrupted != 0; }

static void on_child_exit(uv_process_t *p, int64_t status, int signal) {
  dnt_session *s = p->data;
  s->child_exited = 1;
  s->child_status = status;
  s->child_signal = signal;
  uv_close((uv_handle_t *)p, NULL);
}

/* A fresh connection for the next command: in launch and listen modes the runtime dials our
 * listener again after every command; otherwise we connect to its socket (fd -1, path set). */
static int next_connection(dnt_session *s, int *fd, const char **path, dsipc_status *st) {
  *fd = -1;
  *path = s->target.ep.path;
  if (!s->listener) return 0;
  *path = NULL;
  /* the first dial of a runtime the user starts by hand may take as long as the user does */
  int forever = s->listen_mode && !s->session_id;
  uint64_t deadline = uv_hrtime() / 1000000u + DIAL_TIMEOUT_MS;
  for (;;) {
    dsipc_advertise adv;
    int rc = dsipc_listener_accept(s->listener, 100, &adv, fd, st);
    if (rc == 0 && s->listen_mode && !s->target.pid) s->target.pid = (int)adv.pid;
    if (rc != DSIPC_ETIMEDOUT) return rc;
    dnt_loop_run(s->loop, UV_RUN_NOWAIT, __func__); /* notice a child that died before its runtime dialled */
    if (interrupted) {
      snprintf(st->msg, sizeof st->msg, "interrupted while waiting for a runtime to connect");
      return DSIPC_ETIMEDOUT;
    }
    if (forever) continue;
    if (s->child_exited) s->child_never_dialled = 1;
    if (s->child_exited || uv_hrtime() / 1000000u >= deadline) {
      snprintf(st->msg, sizeof st->msg, "%s", s->child_exited ? "the command exited before its runtime connected"
                                                               : "the runtime did not connect within 30 s");
      return DSIPC_ETIMEDOUT;
    }
  }
}

extern char **environ;

/* `-- CMD`: a private listening socket, CMD started with its runtime told to dial it and wait
 * (suspend) until the session runs, so the session sees the process from its first instruction. */
static int launch_child(dnt_session *s, char **argv, int show_io) {
  dsipc_status st;
  char sock[64];
  snprintf(sock, sizeof sock, "dntrace-%d.sock", (int)getpid());
  if (dsipc_listener_open(&s->listener, NULL, sock, &st) != 0) return dnt_error("%s", st.msg), DNT_EXIT_FAILURE;
  size_t n = 0;
  while (environ[n]) n++;
  char **env = dnt_xmalloc((n + 2) * sizeof *env);
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    if (strncmp(environ[i], "DOTNET_DiagnosticPorts=", 23) != 0) env[k++] = environ[i];
  char port[4200];
  snprintf(port, sizeof port, "DOTNET_DiagnosticPorts=%s,suspend,connect", dsipc_listener_path(s->listener));
  env[k++] = port;
  env[k] = NULL;
  uv_stdio_container_t stdio[3];
  for (int i = 0; i < 3; i++) {
    stdio[i].flags = show_io ? UV_INHERIT_FD : UV_IGNORE;
    stdio[i].data.fd = i;
  }
  uv_process_options_t o = {.exit_cb = on_child_exit, .file = argv[0], .args = argv, .env = env,
                            .stdio_count = 3, .stdio = stdio};
  s->child.data = s;
  int rc = uv_spawn(s->loop, &s->child, &o);
  free(env);
  if (rc) return dnt_error("cannot start '%s': %s", argv[0], uv_strerror(rc)), DNT_EXIT_FAILURE;
  s->child_started = 1;
  s->target.pid = s->child.pid;
  const char *slash = strrchr(argv[0], '/');
  snprintf(s->target.name, sizeof s->target.name, "%s", slash ? slash + 1 : argv[0]);
  snprintf(s->target.ep.path, sizeof s->target.ep.path, "%s", dsipc_listener_path(s->listener));
  return 0;
}

/* --diagnostic-port PATH[,connect|listen]: a runtime's socket named directly, or (listen) one we
 * create for a runtime started with DOTNET_DiagnosticPorts=PATH. */
static int use_diagnostic_port(dnt_session *s, const char *spec) {
  char path[sizeof s->target.ep.path];
  snprintf(path, sizeof path, "%s", spec);
  char *comma = strrchr(path, ',');
  if (!comma || strcmp(comma + 1, "listen") != 0) return dnt_target_from_port(spec, &s->target);
  *comma = '\0';
  dsipc_status st;
  if (dsipc_listener_open_at(&s->listener, path, &st) != 0) return dnt_error("%s", st.msg), DNT_EXIT_FAILURE;
  s->listen_mode = 1;
  const char *slash = strrchr(path, '/');
  snprintf(s->target.name, sizeof s->target.name, "%.200s", slash ? slash + 1 : path);
  snprintf(s->target.ep.path, sizeof s->target.ep.path, "%s", path);
  /* a plain handler until the command's own: Ctrl+C while waiting still removes the socket */
  signal(SIGINT, on_interrupt);
  signal(SIGTERM, on_interrupt);
  /* on stderr: an analysis's report (JSON, say) may be standard output */
  fprintf(stderr, "Waiting for a runtime to connect. Start the application with:\n"
                  "  DOTNET_DiagnosticPorts=%s\n", path);
  return 0;
}

int dnt_session_open(dnt_session *s, uv_loop_t *loop, const struct dnt_session_target *t) {
  memset(s, 0, sizeof *s);
  s->loop = loop;
  if (t->child_argv) return launch_child(s, t->child_argv, t->show_child_io);
  if (t->port) return use_diagnostic_port(s, t->port);
  return dnt_target_resolve(t->pid, t->name, &s->target);
}

int dnt_loop_run(uv_loop_t *loop, uv_run_mode mode, const char *where) {
  static int depth;
  if (depth > 0 && getenv("DNT_STRICT_LOOP")) {
    fprintf(stderr, "dntrace: internal error: the loop run from inside one of its callbacks (%s)\n", where);
    abort();
  }
  depth++;
  int rc = uv_run(loop, mode);
  depth--;
  return rc;
}

static void on_stdin(uv_poll_t *p, int status, int events) {
  struct dnt_enter_watch *w = p->data;
  (void)events;
  char buf[256];
  ssize_t n = status < 0 ? 0 : read(0, buf, sizeof buf);
  if (n <= 0) { /* closed or unreadable: stop watching, Ctrl+C still works */
    uv_poll_stop(p);
    return;
  }
  if (memchr(buf, '\n', (size_t)n)) w->on_enter(w->ud);
}

int dnt_enter_watch_start(struct dnt_enter_watch *w, uv_loop_t *loop, void (*on_enter)(void *ud), void *ud) {
  w->active = 0;
  if (!isatty(0) || uv_poll_init(loop, &w->poll, 0) != 0) return 0;
  w->on_enter = on_enter;
  w->ud = ud;
  w->poll.data = w;
  w->active = 1;
  uv_poll_start(&w->poll, UV_READABLE, on_stdin);
  return 1;
}

void dnt_enter_watch_close(struct dnt_enter_watch *w) {
  if (!w->active) return;
  w->active = 0;
  uv_close((uv_handle_t *)&w->poll, NULL);
}

/* ---- the session stream ---- */

static void on_reply(void *ud, const dsipc_status *st, const uint8_t *payload, size_t n) {
  dnt_session *s = ud;
  s->replied = 1;
  s->reply_code = st->code;
  snprintf(s->reply_msg, sizeof s->reply_msg, "%s", st->msg);
  if (st->code == 0 && dsipc_decode_session_id(payload, n, &s->session_id) != 0) {
    s->reply_code = DSIPC_EPROTO;
    snprintf(s->reply_msg, sizeof s->reply_msg, "the runtime's reply has no session id");
  }
}

static void on_data(void *ud, const uint8_t *p, size_t n) {
  dnt_session *s = ud;
  if (s->cb.on_data && !s->ended) s->cb.on_data(s->ud, p, n);
}

/* The stream is over, however it ended: close both streams, then tell the caller once. */
static void end_session(dnt_session *s) {
  int was_ended = s->ended;
  s->ended = 1;
  dsipc_stream_close(s->stream);
  dsipc_stream_close(s->stopper);
  s->stream = s->stopper = NULL;
  if (!was_ended && s->running && s->cb.on_end) s->cb.on_end(s->ud);
}

static void on_end(void *ud, const dsipc_status *st) {
  dnt_session *s = ud;
  s->end_code = st->code;
  snprintf(s->end_msg, sizeof s->end_msg, "%s", st->msg);
  if (!s->running) { /* during the start: a refusal, or an accepted session over at once */
    s->ended_early = 1;
    return;
  }
  end_session(s);
}

/* A session that ended before dnt_session_start returned is reported from the loop, once the
 * caller has set up what its on_end closes. */
static void on_deferred_end(uv_timer_t *t) {
  dnt_session *s = t->data;
  uv_close((uv_handle_t *)t, NULL);
  end_session(s);
}

static int start_once(dnt_session *s, int version, const dsipc_session_config *cfg) {
  dsipc_buf req;
  dsipc_buf_init(&req);
  dsipc_status st = {0};
  static const dsipc_stream_cb cb = {on_reply, on_data, on_end};
  int rc = dsipc_encode_collect_tracing(&req, version, cfg);
  if (rc) {
    snprintf(s->reply_msg, sizeof s->reply_msg, "cannot encode the session request: %s", dsipc_strerror(rc));
    goto out;
  }
  s->replied = s->ended_early = 0;
  int fd;
  const char *path;
  rc = next_connection(s, &fd, &path, &st);
  if (!rc) rc = dsipc_stream_open(s->loop, path, fd, &req, REPLY_TIMEOUT_MS, &cb, s, &s->stream, &st);
  if (rc) {
    s->reply_code = rc; /* -EACCES tells dnt_session_start_failed the runtime was never asked */
    snprintf(s->reply_msg, sizeof s->reply_msg, "%s", st.msg);
    goto out;
  }
  while (!s->replied && dnt_loop_run(s->loop, UV_RUN_ONCE, __func__)) {}
  if (!s->replied) {
    s->reply_code = DSIPC_ECLOSED;
    snprintf(s->reply_msg, sizeof s->reply_msg, "the runtime closed the connection without a reply");
  }
  rc = s->reply_code;
  if (rc) {
    dsipc_stream_close(s->stream);
    s->stream = NULL;
    while (dnt_loop_run(s->loop, UV_RUN_NOWAIT, __func__)) {}
  }
out:
  dsipc_buf_release(&req);
  return rc;
}

int dnt_session_start(dnt_session *s, int version, const dsipc_session_config *cfg, const dnt_session_cb *cb,
                      void *ud) {
  s->cb = *cb;
  s->ud = ud;
  s->stop_wanted = 0;
  int rc = start_once(s, version, cfg);
  if (rc == DSIPC_EUNKNOWNCMD && version == 6) return rc; /* Block buffering: the caller says what it does */
  if (rc == DSIPC_EUNKNOWNCMD && version > 2) {
    /* an older runtime: what only the newer request can say (a custom rundown keyword) is lost */
    dnt_warning("this runtime takes no CollectTracing%d; asking with CollectTracing2 (default rundown)", version);
    rc = start_once(s, 2, cfg);
  }
  if (rc == DSIPC_EUNKNOWNCMD && version > 1) rc = start_once(s, 1, cfg);
  s->running = rc == 0;
  if (s->running && s->stop_wanted && !s->ended_early) dnt_session_stop(s);
  if (s->running && s->ended_early) {
    uv_timer_init(s->loop, &s->deferred_end);
    s->deferred_end.data = s;
    uv_timer_start(&s->deferred_end, on_deferred_end, 0, 0);
  }
  return rc;
}

/* ---- starting from the loop: ipc/'s session, its events told as the synchronous start tells them ---- */

static void async_started(void *ud, const dsipc_status *st) {
  dnt_session *s = ud;
  s->starting = 0;
  s->replied = 1;
  s->reply_code = st->code;
  snprintf(s->reply_msg, sizeof s->reply_msg, "%s", st->msg);
  s->running = st->code == 0;
  if (s->running) s->session_id = dsipc_session_id(s->async);
  s->on_started(s->ud, st->code);
}

static void async_data(void *ud, const uint8_t *p, size_t n) { on_data(ud, p, n); }

static void async_end(void *ud, const dsipc_status *st) {
  dnt_session *s = ud;
  s->end_code = st->code;
  snprintf(s->end_msg, sizeof s->end_msg, "%s", st->msg);
  int was_ended = s->ended;
  s->ended = 1;
  if (!was_ended && s->cb.on_end) s->cb.on_end(s->ud);
}

static void async_notice(void *ud, const char *msg) {
  (void)ud;
  dnt_warning("%s", msg);
}

int dnt_session_start_async(dnt_session *s, int version, const dsipc_session_config *cfg, const dnt_session_cb *cb,
                            void *ud, void (*on_started)(void *ud, int rc)) {
  if (s->listener || s->starting || s->running || s->async) return -EINVAL;
  static const dsipc_session_cb acb = {async_started, async_data, async_end, async_notice};
  s->cb = *cb;
  s->ud = ud;
  s->on_started = on_started;
  dsipc_status st = {0};
  int rc = dsipc_session_start(s->loop, s->target.ep.path, version, cfg, REPLY_TIMEOUT_MS, &acb, s, &s->async, &st);
  if (rc) {
    s->reply_code = rc;
    snprintf(s->reply_msg, sizeof s->reply_msg, "%s", st.msg);
    return rc;
  }
  s->starting = 1;
  return 0;
}

int dnt_session_command(dnt_session *s, const dsipc_buf *req, dsipc_buf *reply, dsipc_status *st) {
  dsipc_buf ignored;
  dsipc_buf_init(&ignored);
  int fd;
  const char *path;
  int rc = next_connection(s, &fd, &path, st);
  if (!rc && fd >= 0) rc = dsipc_transact_fd(fd, req, REPLY_TIMEOUT_MS, reply ? reply : &ignored, NULL, st);
  else if (!rc) rc = dsipc_transact(path, req, REPLY_TIMEOUT_MS, reply ? reply : &ignored, NULL, st);
  dsipc_buf_release(&ignored);
  return rc;
}

void dnt_session_resume(dnt_session *s) {
  if (!s->listener) return;
  dsipc_buf req;
  dsipc_buf_init(&req);
  dsipc_status st = {0};
  int rc = dsipc_encode_command(&req, DSIPC_SET_PROCESS, DSIPC_PROC_RESUME);
  if (!rc) rc = dnt_session_command(s, &req, NULL, &st);
  if (rc) dnt_warning("cannot resume the runtime: %s", st.msg);
  dsipc_buf_release(&req);
}

/* ---- stopping ---- */

static void on_stop_reply(void *ud, const dsipc_status *st, const uint8_t *payload, size_t n) {
  (void)ud, (void)payload, (void)n;
  if (st->code) dnt_warning("StopTracing: %s", st->msg);
}

static void on_stop_end(void *ud, const dsipc_status *st) {
  (void)ud, (void)st; /* the session stream's end is what counts */
}

static const dsipc_stream_cb stop_cb = {on_stop_reply, NULL, on_stop_end};

static void stop_failed(dnt_session *s, const char *why) {
  dnt_warning("cannot send StopTracing: %s; closing the session", why);
  s->abandoned = 1;
  end_session(s);
}

/* Launch and listen modes: the runtime has dialled again; StopTracing goes on that connection. */
static void on_stop_connection(void *ud, const dsipc_status *st, const dsipc_advertise *adv, int fd) {
  dnt_session *s = ud;
  (void)adv;
  dsipc_status ost = {0};
  if (st->code) {
    dsipc_buf_release(&s->stop_req);
    stop_failed(s, st->msg);
    return;
  }
  int rc = dsipc_stream_open(s->loop, NULL, fd, &s->stop_req, REPLY_TIMEOUT_MS, &stop_cb, s, &s->stopper, &ost);
  dsipc_buf_release(&s->stop_req);
  if (rc) stop_failed(s, ost.msg);
}

void dnt_session_stop(dnt_session *s) {
  if (s->stopping || s->ended) return;
  if (s->async) {
    s->stopping = s->running;
    dsipc_session_stop(s->async);
    return;
  }
  if (!s->running) { /* the stream's first bytes, read with the answer, asked for it: stop once started */
    s->stop_wanted = 1;
    return;
  }
  s->stopping = 1;
  dsipc_buf_init(&s->stop_req);
  dsipc_status st = {0};
  if (dsipc_encode_stop_tracing(&s->stop_req, s->session_id) != 0) {
    dsipc_buf_release(&s->stop_req);
    stop_failed(s, "out of memory");
    return;
  }
  int rc;
  if (s->listener) /* the connection comes when the runtime dials: wait for it on the loop */
    rc = dsipc_listener_accept_start(s->listener, s->loop, DIAL_TIMEOUT_MS, on_stop_connection, s, &st);
  else
    rc = dsipc_stream_open(s->loop, s->target.ep.path, -1, &s->stop_req, REPLY_TIMEOUT_MS, &stop_cb, s, &s->stopper,
                           &st);
  if (rc == 0 && s->listener) return; /* stop_req is sent, then released, by on_stop_connection */
  dsipc_buf_release(&s->stop_req);
  if (rc) stop_failed(s, st.msg);
}

void dnt_session_abandon(dnt_session *s) {
  if (s->ended) return;
  s->abandoned = 1;
  if (s->async && s->starting) { /* no answer yet: the start is dropped, as the caller asked */
    s->starting = 0, s->ended = 1;
    dsipc_session_close(s->async);
    s->async = NULL;
    return;
  }
  if (s->async) {
    dsipc_session_abandon(s->async);
    return;
  }
  end_session(s);
}

int dnt_session_start_failed(const dnt_session *s) {
  if (dnt_session_interrupted()) return dnt_error("interrupted before a runtime connected"), DNT_EXIT_FAILURE;
  if (s->child_never_dialled) {
    char how[64];
    if (s->child_signal)
      snprintf(how, sizeof how, "killed by signal %d", s->child_signal);
    else
      snprintf(how, sizeof how, "exit code %lld", (long long)s->child_status);
    dnt_error("'%s' exited (%s) before its runtime connected: not a .NET program, or its diagnostics are disabled",
              s->target.name, how);
    return DNT_EXIT_NOTARGET;
  }
  return dnt_session_refused(s->target.pid, s->reply_code, s->reply_msg);
}

int dnt_session_refused(int pid, int code, const char *msg) {
  if (code == -EACCES) { /* never asked: its socket is not ours to use (the message says why) */
    dnt_error("process %d: %s", pid, msg);
    return DNT_EXIT_NOTARGET;
  }
  if (code == DSIPC_ETIMEDOUT && dnt_process_stopped(pid)) {
    dnt_error("process %d did not answer the session request: it is stopped (SIGSTOP, a debugger), and its "
              "runtime answers nothing until it runs again (kill -CONT %d)",
              pid, pid);
    return DNT_EXIT_FAILURE;
  }
  if (code == DSIPC_ETIMEDOUT) {
    /* not a refusal: the runtime's diagnostic server never got to answering (a runtime can deadlock
     * there while it enables the session's providers: dotnet/runtime#119014) */
    dnt_error("process %d did not answer the session request: %s; its diagnostic server is blocked "
              "(dntrace info -p %d tells whether it answers anything)",
              pid, msg, pid);
    return DNT_EXIT_FAILURE;
  }
  dnt_error("process %d refused the session: %s", pid, msg);
  return DNT_EXIT_FAILURE;
}

int dnt_session_wait_child(dnt_session *s) {
  if (!s->child_started) return 0;
  while (!s->child_exited && dnt_loop_run(s->loop, UV_RUN_ONCE, __func__)) {}
  return s->child_signal ? 128 + s->child_signal : (int)s->child_status;
}

void dnt_session_close(dnt_session *s) {
  s->starting = 0; /* a start still waiting for its reply is dropped with its session */
  dsipc_session_close(s->async);
  s->async = NULL;
  if (s->child_started && !s->child_exited) {
    uv_process_kill(&s->child, SIGTERM);
    while (!s->child_exited && dnt_loop_run(s->loop, UV_RUN_ONCE, __func__)) {}
  }
  if (s->running && s->ended_early && !uv_is_closing((uv_handle_t *)&s->deferred_end))
    uv_close((uv_handle_t *)&s->deferred_end, NULL);
  s->ended = 1;
  dsipc_stream_close(s->stream);
  dsipc_stream_close(s->stopper);
  s->stream = s->stopper = NULL;
  dsipc_listener_close(s->listener); /* a pending accept for StopTracing is cancelled with it */
  s->listener = NULL;
  dsipc_buf_release(&s->stop_req);
}
