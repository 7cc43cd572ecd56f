/* fuzz-ipc.h: the kinds of reply fuzz-ipc reads (its input's second byte), shared with
 * record-ipc.c, which writes real replies in that form. */
#ifndef DNT_FUZZ_IPC_H
#define DNT_FUZZ_IPC_H

enum fuzz_ipc_kind {
  FUZZ_IPC_INFO1,     /* ProcessInfo reply */
  FUZZ_IPC_INFO2,     /* ProcessInfo2 reply */
  FUZZ_IPC_INFO3,     /* ProcessInfo3 reply */
  FUZZ_IPC_ENV,       /* ProcessEnvironment reply, then its continuation */
  FUZZ_IPC_SESSION,   /* CollectTracing reply, then the session's nettrace stream */
  FUZZ_IPC_ADVERTISE, /* the advertise of a runtime connecting to a reverse port */
  FUZZ_IPC_STATUS,    /* any other reply: OK or error (ResumeRuntime, StopTracing, an unknown command) */
  FUZZ_IPC_KINDS
};

#endif
