/* dsipc: a client of the .NET diagnostics IPC protocol (the one dotnet-trace, dotnet-counters and
 * dotnet-dump speak), for Linux.
 *
 * Three layers, usable on their own:
 *   - encoding and decoding of messages, on memory only (protocol.c, process.c, eventpipe.c,
 *     dump.c): every request byte-exact, every reply checked against the bytes it has;
 *   - transport over libuv Unix-domain pipes with one deadline per operation (transport.c), and
 *     the reverse direction, where the runtime connects to us (listener.c);
 *   - discovery of a process's diagnostic socket, across mount and PID namespaces (discover.c).
 *
 * Conventions: 0 is success, negative is an error (-errno, or a DSIPC_E* code below). Calls that
 * talk to a runtime fill a caller-provided dsipc_status with the code, the runtime's HRESULT and a
 * one-line message. Strings in and out are UTF-8; the wire's UTF-16 stays inside the library.
 * Wire facts follow dotnet/runtime src/native/eventpipe/ds-protocol.h and ds-types.h.
 */
#ifndef DSIPC_H
#define DSIPC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Errors ---- */
#define DSIPC_ERRNO_MAP(XX)                                                         \
  XX(NOTFOUND, -3001, "no diagnostic socket")                                       \
  XX(UNSAFE, -3002, "socket not owned by the target's user")                        \
  XX(NOMEM, -3003, "out of memory")                                                 \
  XX(PROTO, -3004, "malformed message")                                             \
  XX(BADMAGIC, -3005, "bad magic")                                                  \
  XX(TOOBIG, -3006, "message too large")                                            \
  XX(SERVER, -3007, "the runtime answered with an error")                           \
  XX(UNKNOWNCMD, -3008, "the runtime does not know this command")                   \
  XX(TIMEDOUT, -3009, "timed out")                                                  \
  XX(CLOSED, -3010, "the connection closed early")                                  \
  XX(INVAL, -3011, "invalid argument")

enum dsipc_err {
#define XX(name, value, msg) DSIPC_E##name = value,
  DSIPC_ERRNO_MAP(XX)
#undef XX
};

/* Both return static strings; they also know -errno values. */
const char *dsipc_strerror(int err);
const char *dsipc_err_name(int err);

/* The outcome of one exchange with a runtime. Caller-owned, no heap inside. */
typedef struct dsipc_status {
  int code;          /* 0 or a negative error */
  uint32_t hresult;  /* the runtime's HRESULT when code == DSIPC_ESERVER/EUNKNOWNCMD, else 0 */
  char msg[512];     /* one line, "" when code == 0 */
} dsipc_status;

/* HRESULTs the runtime sends (ds-types.h), and what they mean to a user. */
#define DSIPC_HR_BAD_ENCODING 0x80131384u
#define DSIPC_HR_UNKNOWN_COMMAND 0x80131385u
#define DSIPC_HR_UNKNOWN_MAGIC 0x80131386u
#define DSIPC_HR_NOTSUPPORTED 0x80131515u
#define DSIPC_HR_FAIL 0x80004005u
#define DSIPC_HR_NOT_YET_AVAILABLE 0x8013135bu
#define DSIPC_HR_RUNTIME_UNINITIALIZED 0x80131371u
#define DSIPC_HR_INVALIDARG 0x80070057u
#define DSIPC_HR_INSUFFICIENT_BUFFER 0x8007007au
#define DSIPC_HR_ENVVAR_NOT_FOUND 0x800000cbu
/* Static text, e.g. "unknown command"; "unknown error" for codes not listed. */
const char *dsipc_hresult_message(uint32_t hr);

/* Library allocations go through these (libuv's uv_replace_allocator idea), so tests can make
 * them fail. All four or none; returns DSIPC_EINVAL if any is NULL. */
int dsipc_replace_allocator(void *(*malloc_fn)(size_t), void *(*realloc_fn)(void *, size_t),
                            void *(*calloc_fn)(size_t, size_t), void (*free_fn)(void *));

/* ---- Wire constants ---- */
#define DSIPC_HEADER_SIZE 20
#define DSIPC_MAX_MESSAGE 0xffffu
enum dsipc_command_set {
  DSIPC_SET_DUMP = 0x01,
  DSIPC_SET_EVENTPIPE = 0x02,
  DSIPC_SET_PROFILER = 0x03,
  DSIPC_SET_PROCESS = 0x04,
  DSIPC_SET_SERVER = 0xff,
};
enum dsipc_command_id {
  DSIPC_DUMP_GENERATE = 0x01, DSIPC_DUMP_GENERATE2 = 0x02, DSIPC_DUMP_GENERATE3 = 0x03,
  DSIPC_EP_STOP = 0x01, DSIPC_EP_COLLECT = 0x02, DSIPC_EP_COLLECT2 = 0x03, DSIPC_EP_COLLECT3 = 0x04,
  DSIPC_EP_COLLECT4 = 0x05, DSIPC_EP_COLLECT5 = 0x06, DSIPC_EP_COLLECT6 = 0x07,
  DSIPC_PROC_INFO = 0x00, DSIPC_PROC_RESUME = 0x01, DSIPC_PROC_ENV = 0x02, DSIPC_PROC_SET_ENV = 0x03,
  DSIPC_PROC_INFO2 = 0x04, DSIPC_PROC_ENABLE_PERFMAP = 0x05, DSIPC_PROC_DISABLE_PERFMAP = 0x06,
  DSIPC_PROC_APPLY_STARTUP_HOOK = 0x07, DSIPC_PROC_INFO3 = 0x08,
  DSIPC_SERVER_OK = 0x00, DSIPC_SERVER_ERROR = 0xff,
};

/* ---- Encoding (pure, no I/O) ---- */

/* A growable byte buffer. Caller-owned struct; the bytes are freed by dsipc_buf_release. */
typedef struct dsipc_buf {
  uint8_t *data;
  size_t len, cap;
} dsipc_buf;
void dsipc_buf_init(dsipc_buf *b);
void dsipc_buf_release(dsipc_buf *b);

/* Each encoder replaces b's contents with one whole message (header included). 0, DSIPC_ENOMEM,
 * DSIPC_ETOOBIG (over 65535 bytes: never truncated) or DSIPC_EINVAL (bad UTF-8, bad argument).
 * Strings are caller-owned UTF-8 and are copied. */
int dsipc_encode_command(dsipc_buf *b, uint8_t set, uint8_t id); /* commands with no payload */
int dsipc_encode_set_env(dsipc_buf *b, const char *name, const char *value);
int dsipc_encode_enable_perfmap(dsipc_buf *b, uint32_t perfmap_type);
int dsipc_encode_stop_tracing(dsipc_buf *b, uint64_t session_id);
/* GenerateCoreDump v1 (flags is 0/1 logging), v2 or v3. dump_type: 1 mini, 2 heap, 3 triage, 4 full. */
int dsipc_encode_dump(dsipc_buf *b, int version, const char *path, uint32_t dump_type, uint32_t flags);
enum dsipc_dump_type { DSIPC_DUMP_MINI = 1, DSIPC_DUMP_HEAP = 2, DSIPC_DUMP_TRIAGE = 3, DSIPC_DUMP_FULL = 4 };
enum dsipc_dump_flags { DSIPC_DUMP_LOGGING = 0x1, DSIPC_DUMP_VERBOSE = 0x2, DSIPC_DUMP_CRASHREPORT = 0x4 };
enum dsipc_perfmap_type { DSIPC_PERFMAP_ALL = 1, DSIPC_PERFMAP_JITDUMP = 2, DSIPC_PERFMAP_PERFMAP = 3 };

/* An EventPipe provider and session, as CollectTracing 1..6 carry them. */
typedef struct dsipc_provider {
  const char *name;        /* required, UTF-8 */
  uint64_t keywords;
  uint32_t level;          /* 0 LogAlways .. 5 Verbose */
  const char *args;        /* "k=v;k2=v2" or NULL */
  int filter_enable;       /* v5+: event-id filter: 1 allow-list, 0 deny-list */
  const uint32_t *event_ids; /* v5+: may be NULL with n_event_ids 0 (= no filter) */
  uint32_t n_event_ids;
} dsipc_provider;

typedef struct dsipc_session_config {
  uint32_t buffer_mb;      /* > 0 */
  uint32_t format;         /* 1 = NetTrace (0 = NetPerf, legacy) */
  int request_rundown;     /* v1..v3: rundown on/off */
  uint64_t rundown_keyword;/* v4+: replaces request_rundown */
  int request_stackwalk;   /* v3+ */
  uint32_t buffering_mode; /* v6: 0 drop, 1 block */
  const dsipc_provider *providers;
  size_t n_providers;      /* 1..1000 */
} dsipc_session_config;
#define DSIPC_DEFAULT_RUNDOWN_KEYWORD 0x80020139ull

/* version is 1..6 (CollectTracing .. CollectTracing6); streaming sessions only. */
int dsipc_encode_collect_tracing(dsipc_buf *b, int version, const dsipc_session_config *cfg);

/* ---- Decoding (pure, no I/O); every length is checked against the bytes given ---- */

typedef struct dsipc_header {
  uint16_t size; /* whole message, header included: >= 20 */
  uint8_t set, id;
} dsipc_header;
/* Needs DSIPC_HEADER_SIZE bytes. DSIPC_EBADMAGIC, DSIPC_EPROTO (size < 20) or 0. */
int dsipc_decode_header(const uint8_t *p, size_t n, dsipc_header *h);

/* Classifies a reply: 0 for OK; DSIPC_ESERVER / DSIPC_EUNKNOWNCMD for an error reply, with the
 * HRESULT (and, for GenerateCoreDump3, the runtime's message) in st; DSIPC_EPROTO otherwise.
 * st is always filled. payload points into the caller's bytes. */
int dsipc_decode_reply(const dsipc_header *h, const uint8_t *payload, size_t n, dsipc_status *st);

/* ProcessInfo / ProcessInfo2 / ProcessInfo3. Strings are heap copies owned by the struct:
 * release with dsipc_process_info_release (safe on a zeroed struct). Missing fields are NULL. */
typedef struct dsipc_process_info {
  int info_version;        /* which command answered: 1, 2 or 3 */
  uint64_t process_id;     /* in the target's own PID namespace */
  uint8_t runtime_cookie[16];
  char *command_line, *os, *arch;
  char *managed_entrypoint_assembly_name, *clr_product_version; /* v2+ */
  char *runtime_identifier;                                      /* v3 (inner version >= 1) */
} dsipc_process_info;
int dsipc_decode_process_info(const uint8_t *payload, size_t n, int info_version, dsipc_process_info *out);
void dsipc_process_info_release(dsipc_process_info *pi);

/* ProcessEnvironment: the reply's payload gives the size of the continuation that follows. */
int dsipc_decode_env_reply(const uint8_t *payload, size_t n, uint32_t *continuation_len);
/* The continuation: u32 count, then count strings "NAME=value". *env is a heap array of heap
 * strings owned by the caller: free with dsipc_env_free. */
int dsipc_decode_env_block(const uint8_t *p, size_t n, char ***env, size_t *count);
void dsipc_env_free(char **env, size_t count);
#define DSIPC_MAX_ENV_BLOCK (64u << 20)

/* OK payload of CollectTracing* and StopTracing: the u64 session id. */
int dsipc_decode_session_id(const uint8_t *payload, size_t n, uint64_t *session_id);

/* The advertise a runtime sends when it connects to us (ADVR_V1, 34 bytes). */
#define DSIPC_ADVERTISE_SIZE 34
typedef struct dsipc_advertise {
  uint8_t cookie[16];
  uint64_t pid;
} dsipc_advertise;
int dsipc_decode_advertise(const uint8_t *p, size_t n, dsipc_advertise *out);

/* Formats a runtime cookie (Windows GUID byte order) as 8-4-4-4-12 hex into out[37]. */
void dsipc_format_guid(const uint8_t guid[16], char out[37]);

/* A reply framer fed any split of the bytes (git's packet_reader idea): it collects one whole
 * message. Caller-owned struct; dsipc_framer_release frees its buffer. */
typedef struct dsipc_framer {
  uint8_t *buf;
  size_t have;
  dsipc_header header;
  int complete;
  int err; /* sticky: once a feed fails, every later feed returns the same error (zlib's BAD) */
} dsipc_framer;
void dsipc_framer_init(dsipc_framer *f);
void dsipc_framer_release(dsipc_framer *f);
/* Consumes what it needs of p and returns how many bytes that was (bytes after a complete
 * message are not consumed: they belong to a continuation), or a negative error.
 * f->complete is set once the message is whole; f->buf + 20 is then its payload. */
long dsipc_framer_feed(dsipc_framer *f, const uint8_t *p, size_t n);

/* ---- Transport: one request on a fresh connection, one deadline for all of it ---- */

/* Sends req (a whole message) to the socket at path and waits for the reply; if the reply says a
 * continuation of known length follows (ProcessEnvironment), that is read too. On 0, reply holds
 * the reply message and cont the continuation (both caller-owned buffers, replaced). */
int dsipc_transact(const char *path, const dsipc_buf *req, uint64_t timeout_ms, dsipc_buf *reply,
                   dsipc_buf *cont, dsipc_status *st);

/* ProcessInfo3, falling back to 2 then 1 when the runtime answers UNKNOWN_COMMAND. out: as
 * dsipc_decode_process_info. */
int dsipc_process_info_get(const char *path, uint64_t timeout_ms, dsipc_process_info *out, dsipc_status *st);
/* The environment; *env as dsipc_decode_env_block. */
int dsipc_process_env_get(const char *path, uint64_t timeout_ms, char ***env, size_t *count, dsipc_status *st);
int dsipc_resume_runtime(const char *path, uint64_t timeout_ms, dsipc_status *st);
int dsipc_set_env(const char *path, const char *name, const char *value, uint64_t timeout_ms, dsipc_status *st);
/* perfmap_type: 1 all, 2 jitdump, 3 perfmap. */
int dsipc_perfmap_enable(const char *path, uint32_t perfmap_type, uint64_t timeout_ms, dsipc_status *st);
int dsipc_perfmap_disable(const char *path, uint64_t timeout_ms, dsipc_status *st);
/* GenerateCoreDump3, falling back to 2 then 1 on UNKNOWN_COMMAND (v1 keeps only the logging bit).
 * dump_path (caller-owned UTF-8) is where the target's createdump writes, as the target sees the
 * filesystem. The runtime answers only once the dump is written, so give timeout_ms minutes, not
 * seconds. A v3 failure brings the runtime's own explanation, appended to st->msg. */
int dsipc_dump_generate(const char *path, const char *dump_path, uint32_t dump_type, uint32_t flags,
                        uint64_t timeout_ms, dsipc_status *st);

/* ---- Calls: one request, one reply, on the caller's loop (call.c) ---- */

/* The async twins of dsipc_process_info_get and dsipc_dump_generate, for a command that goes on
 * with other work meanwhile (ps asking every process at once, dump drawing its progress, an
 * agent answering HTTP). Each tries the newest command first and falls back on UNKNOWN_COMMAND,
 * exactly as the sync calls do. The callback is called exactly once, from the loop, unless the
 * call is cancelled first; the call is freed after it returns. timeout_ms covers connecting and
 * the reply (for a dump: minutes, the runtime answers once the file is written). */
struct uv_loop_s;
typedef struct dsipc_call dsipc_call;
/* st->code 0 with pi (valid during the call only; copy what you keep), or the error, pi NULL. */
typedef void (*dsipc_process_info_cb)(void *ud, const dsipc_status *st, const dsipc_process_info *pi);
typedef void (*dsipc_dump_cb)(void *ud, const dsipc_status *st);
/* path: the runtime's socket (copied). *out (may be NULL) is the call, for dsipc_call_cancel.
 * 0, or an error (st filled) and the callback will not be called. */
int dsipc_process_info_start(struct uv_loop_s *loop, const char *path, uint64_t timeout_ms, dsipc_process_info_cb cb,
                             void *ud, dsipc_call **out, dsipc_status *st);
/* dump_path as for dsipc_dump_generate (copied). */
int dsipc_dump_start(struct uv_loop_s *loop, const char *path, const char *dump_path, uint32_t dump_type,
                     uint32_t flags, uint64_t timeout_ms, dsipc_dump_cb cb, void *ud, dsipc_call **out,
                     dsipc_status *st);
/* Drops a call whose callback has not run yet: no callback, the connection closed. Not after the
 * callback (the call is gone then). NULL is fine. */
void dsipc_call_cancel(dsipc_call *c);

/* ---- Streaming: a reply followed by a continuation of unknown length (EventPipe) ---- */

struct uv_loop_s;
typedef struct dsipc_stream dsipc_stream;
typedef struct dsipc_stream_cb {
  /* The reply arrived. st->code is 0 for OK (payload holds its payload, e.g. the session id),
   * else an error and on_end follows. payload is valid only during the call. */
  void (*on_reply)(void *ud, const dsipc_status *st, const uint8_t *payload, size_t n);
  /* Continuation bytes, as they arrive; valid only during the call (copy or write them). */
  void (*on_data)(void *ud, const uint8_t *p, size_t n);
  /* The stream is over: code 0 when the peer closed it after the reply, else the error. The
   * stream must still be freed with dsipc_stream_close. */
  void (*on_end)(void *ud, const dsipc_status *st);
} dsipc_stream_cb;

/* Connects to path (or, when fd >= 0, uses that connection, taking ownership of it) on the
 * caller's loop, sends req (copied) and delivers the reply and the continuation through cb.
 * reply_timeout_ms covers connecting and the reply, not the continuation. On 0, *out is the
 * stream (free with dsipc_stream_close); on error no callback will be called. */
int dsipc_stream_open(struct uv_loop_s *loop, const char *path, int fd, const dsipc_buf *req,
                      uint64_t reply_timeout_ms, const dsipc_stream_cb *cb, void *ud, dsipc_stream **out,
                      dsipc_status *st);
/* Stops reading and releases the stream once libuv has closed its handles; no callback is called
 * after this. Safe from inside a callback and on NULL. */
void dsipc_stream_close(dsipc_stream *s);

/* ---- Sessions started from the loop: CollectTracing, its stream, StopTracing ---- */

/* For a program that follows processes while it does other work (an agent): nothing waits. The
 * newest request is asked first, then CollectTracing2 and 1 when the runtime does not know it. */
typedef struct dsipc_session dsipc_session;
typedef struct dsipc_session_cb {
  /* The runtime answered: st->code 0, the session runs (on_data, then on_end, follow); else it
   * did not start (the runtime's words in st->msg) and nothing follows. Called once. */
  void (*on_started)(void *ud, const dsipc_status *st);
  /* The stream's bytes, in order; valid only during the call. */
  void (*on_data)(void *ud, const uint8_t *p, size_t n);
  /* The stream is over: the runtime closed it (after its rundown, when stopped), it was abandoned,
   * or StopTracing could not be sent (st says). Called once, only after a start. */
  void (*on_end)(void *ud, const dsipc_status *st);
  /* A warning the caller may pass on (a fallback to an older request loses a custom rundown; the
   * runtime refused StopTracing). May be NULL. */
  void (*on_notice)(void *ud, const char *msg);
} dsipc_session_cb;

/* Starts a session on the runtime at path (copied) with CollectTracing `version` (1..6); cfg is
 * read during the call only. reply_timeout_ms covers connecting and each reply. On 0, *out is
 * the session (free with dsipc_session_close) and cb (copied) will be called from the loop; on
 * an error, st says why and no callback will be called. */
int dsipc_session_start(struct uv_loop_s *loop, const char *path, int version, const dsipc_session_config *cfg,
                        uint64_t reply_timeout_ms, const dsipc_session_cb *cb, void *ud, dsipc_session **out,
                        dsipc_status *st);
/* Asks the runtime to end the session (StopTracing on a second connection): its rundown comes,
 * then on_end. Before the runtime has answered the start: done once it has. Twice, or after the
 * end: nothing. */
void dsipc_session_stop(dsipc_session *s);
/* Stops reading now: on_end comes at once (or, still starting, on_started with an error). */
void dsipc_session_abandon(dsipc_session *s);
/* The session's id (0 until started) and whether its stream runs. */
uint64_t dsipc_session_id(const dsipc_session *s);
int dsipc_session_running(const dsipc_session *s);
/* Closes both connections and frees s: no callback is called after this. Safe from inside the
 * session's own callbacks and on NULL. */
void dsipc_session_close(dsipc_session *s);

/* ---- Reverse direction: the runtime connects to us (DOTNET_DiagnosticPorts=<path>,connect) ---- */

/* A listening socket in a fresh private directory (0700) with the socket itself 0600.
 * Create with dsipc_listener_open, free with dsipc_listener_close (removes socket and directory). */
typedef struct dsipc_listener dsipc_listener;
/* dir_template: a mkdtemp template such as "/tmp/dntrace-XXXXXX" (copied), or NULL for that one.
 * name: the socket's file name in that directory. */
int dsipc_listener_open(dsipc_listener **out, const char *dir_template, const char *name, dsipc_status *st);
/* A listening socket at exactly path (0600; it must not exist), for --diagnostic-port PATH,listen.
 * dsipc_listener_close removes the socket. */
int dsipc_listener_open_at(dsipc_listener **out, const char *path, dsipc_status *st);
/* The socket path to give the runtime; owned by the listener. */
const char *dsipc_listener_path(const dsipc_listener *l);
/* Waits for a runtime to connect and advertise itself. On 0, *fd is the accepted connection
 * (caller-owned: pass it to dsipc_transact_fd, or close it). */
int dsipc_listener_accept(dsipc_listener *l, uint64_t timeout_ms, dsipc_advertise *adv, int *fd, dsipc_status *st);
/* Closes the socket, removes it and its directory, and cancels a pending async accept (whose
 * callback is then never called; its handles are released on the loop's next turn). NULL is fine. */
void dsipc_listener_close(dsipc_listener *l);

/* The async accept's result: st->code 0 with adv (valid during the call) and fd, a non-blocking
 * connection now owned by the callee (pass it to dsipc_stream_open / dsipc_transact_fd, or close
 * it); otherwise the error, with adv NULL and fd -1. */
typedef void (*dsipc_accept_cb)(void *ud, const dsipc_status *st, const dsipc_advertise *adv, int fd);
/* As dsipc_listener_accept, on the caller's loop: cb is called exactly once, unless the accept is
 * cancelled first. One accept at a time per listener (-EBUSY otherwise, also for the sync call).
 * timeout_ms covers the connection and its advertise; 0 means no deadline. cb may start the next
 * accept. Returns 0, or an error (st filled) and cb will not be called. */
int dsipc_listener_accept_start(dsipc_listener *l, struct uv_loop_s *loop, uint64_t timeout_ms, dsipc_accept_cb cb,
                                void *ud, dsipc_status *st);
/* Cancels a pending async accept: no callback; a half-read connection is closed. No-op if none. */
void dsipc_listener_accept_cancel(dsipc_listener *l);
/* As dsipc_transact, on a connection the runtime opened; takes ownership of fd and closes it. */
int dsipc_transact_fd(int fd, const dsipc_buf *req, uint64_t timeout_ms, dsipc_buf *reply, dsipc_buf *cont,
                      dsipc_status *st);

/* ---- Discovery: finding a runtime's diagnostic socket (discover.c) ---- */
typedef struct dsipc_endpoint {
  int host_pid;             /* pid as seen from this process (/proc/<host_pid>) */
  int ns_pid;               /* pid inside the target's own PID namespace (last NSpid entry) */
  unsigned long long key;   /* disambiguation key from the socket name (process start time) */
  char path[4096];          /* socket path usable from here; may go through /proc/<pid>/root */
  char errmsg[512];         /* why the last call on this endpoint failed, "" if it did not */
} dsipc_endpoint;
/* Finds the socket of host_pid: 0, or a negative error with out->errmsg set. out: caller-owned.
 * -ESRCH no such process; -EACCES not permitted; DSIPC_EUNSAFE a socket of the wrong owner;
 * DSIPC_ENOTFOUND none (errmsg says whether the process is .NET and has diagnostics disabled). */
int dsipc_endpoint_find(int host_pid, dsipc_endpoint *out);
/* The name the kernel keeps for thread tid (a host id) of process pid, /proc/PID/task/TID/comm:
 * what the runtime named the OS thread, cut to 15 bytes. Into buf (caller-owned); "" when the
 * thread is gone or unreadable. Returns buf. */
const char *dsipc_thread_comm(int pid, unsigned long long tid, char *buf, size_t cap);

/* Calls fn(ud, tid, name) for each thread of pid: tid as the process's own PID namespace numbers
 * it (the last NSpid value of /proc/PID/task/TID/status: the ids its runtime's events carry),
 * name its /proc comm (what the runtime named the OS thread, cut to 15 bytes by the kernel; ""
 * when unreadable), valid during the call. 0, or -1 when /proc/PID/task cannot be read. */
int dsipc_process_threads(int pid, void (*fn)(void *ud, unsigned long long tid, const char *name), void *ud);

/* A process's state letter (R, S, T for stopped by a signal, t for a tracing stop, Z...) and its
 * start time in clock ticks since boot (with the pid, it names one process, never a later one
 * that got the same pid), from /proc/PID/stat. Either may be NULL. 0, or -ESRCH / -errno. */
int dsipc_proc_stat(int host_pid, char *state, unsigned long long *starttime);
/* The runtime version a process has mapped, from the directory of its libcoreclr.so in
 * /proc/PID/maps (".../Microsoft.NETCore.App/10.0.12/libcoreclr.so" gives "10.0.12"): what ps
 * shows when the runtime cannot be asked (its socket is another user's). out: caller-owned, cap
 * bytes. 0, -ENOENT when no shared framework's runtime is mapped (a self-contained app), or
 * -errno (-EACCES: its maps are not ours to read). */
int dsipc_mapped_runtime_version(int host_pid, char *out, size_t cap);
/* Calls cb once per process that publishes a usable socket; cb returns non-zero to stop.
 * The endpoint passed to cb is valid only during the call. Returns 0 or a negative error. */
int dsipc_endpoint_list(int (*cb)(const dsipc_endpoint *ep, void *ud), void *ud);
/* The same, and cb is also called for each process whose files are not ours to look into
 * (/proc/PID/root refused: another user's process, or root without CAP_SYS_PTRACE), with
 * ep->path "" and ep->errmsg saying why and what would let us in: whether it is .NET cannot be
 * told from here, so ps can say what it could not see instead of listing nothing. */
int dsipc_endpoint_list_all(int (*cb)(const dsipc_endpoint *ep, void *ud), void *ud);

/* ---- A target's files, reached through /proc/PID/root (inroot.c) ---- */
/* Opens path as the process whose root directory is root_fd sees it (root_fd: a directory fd,
 * e.g. open("/proc/PID/root", O_PATH | O_DIRECTORY); borrowed). Every symlink and ".." is resolved
 * inside that root, never against ours (openat2 RESOLVE_IN_ROOT, or the same walk done here on
 * kernels without it); the last component is never followed (O_NOFOLLOW is added: a symlink
 * there is -ELOOP, or with O_PATH an fd of the link itself). O_CLOEXEC is added. mode is used
 * with O_CREAT. Returns an fd (caller-owned: close it) or -errno. */
int dsipc_open_in_root(int root_fd, const char *path, int flags, unsigned mode);
/* The directory path names as that process sees it, spelt from its root with every symlink, "."
 * and ".." resolved inside the root (a symlink at the end is followed too): "/proc/PID/root"
 * followed by it leaves the root through no symlink, at least as long as the process changes
 * none. out: caller's buffer of cap bytes. 0, or -errno (-ENOTDIR when it is no directory). */
int dsipc_resolve_in_root(int root_fd, const char *path, char *out, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
