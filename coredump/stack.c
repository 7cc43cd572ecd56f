/* stack.c: a managed thread's stack (dnt-core.h), as SOS's clrstack walks it. From the thread's
 * registers: while the instruction pointer is in a managed method, that method is a frame, and
 * its caller is found through the frame pointer chain (the JIT and crossgen keep RBP frames on
 * Unix: the return address at [rbp+8], the caller's rbp at [rbp], the caller's stack pointer
 * rbp+16). When it is in native code, the thread's explicit Frames (Thread.Frame, a list ending
 * at -1, each beginning with its kind's identifier) say where managed code was left: an
 * InlinedCallFrame (a P/Invoke in progress) holds the call's return address, stack pointer and
 * the caller's rbp; a transition Frame (the prestub, a call-counting or dispatch stub) its
 * TransitionBlock's return address and saved rbp; an exception's Frame a whole CONTEXT. Each
 * Frame met is a row of its own, as SOS prints it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core-int.h"

#define FRAME_TOP (~0ull)
#define MAX_FRAMES 4096
#define CONTEXT_RSP 0x98 /* the AMD64 CONTEXT's Rsp, Rbp and Rip */
#define CONTEXT_RBP 0xa0
#define CONTEXT_RIP 0xf8
#define CONTEXT_RAX 0x78 /* then rcx ... r15, a register each, in the processor's numbering */

/* The Frame kinds, by the identifier each begins with (the descriptor's globals NAMEIdentifier). */
static const char *const kinds[] = {
    "InlinedCallFrame",      "ResumableFrame",         "RedirectedThreadFrame",
    "FaultingExceptionFrame", "SoftwareExceptionFrame", "FuncEvalFrame",
    "PInvokeCalliFrame",     "HijackFrame",            "PrestubMethodFrame",
    "CallCountingHelperFrame", "StubDispatchFrame",    "ExternalMethodFrame",
    "DynamicHelperFrame",    "ProtectValueClassFrame", "DebuggerClassInitMarkFrame",
    "DebuggerExitFrame",     "DebuggerU2MCatchHandlerFrame", "ExceptionFilterFrame",
};

struct walk {
  const dnt_clr *r;
  struct dnt_clr_frame *v;
  size_t n, cap;
  int oom;
};

static int add(void *ud, const struct dnt_clr_frame *f, const struct dnt__frame_regs *regs) {
  struct walk *w = ud;
  (void)regs;
  if (w->n == w->cap) {
    size_t cap = w->cap ? w->cap * 2 : 32;
    struct dnt_clr_frame *v = realloc(w->v, cap * sizeof *v);
    if (!v) return w->oom = 1;
    w->v = v, w->cap = cap;
  }
  w->v[w->n++] = *f;
  return 0;
}

/* The kind of the Frame at frame: its name, NULL when its identifier is none the descriptor
 * names. */
static const char *kind_of(const dnt_clr *r, uint64_t frame) {
  uint64_t id;
  if (clr_u64(r, frame, &id) != 0) return NULL;
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
    char global[64];
    uint64_t v;
    snprintf(global, sizeof global, "%sIdentifier", kinds[i]);
    if (dnt_clr_global(r, global, &v) == 0 && v == id) return kinds[i];
  }
  return NULL;
}


enum { UWOP_PUSH_NONVOL, UWOP_ALLOC_LARGE, UWOP_ALLOC_SMALL, UWOP_SET_FPREG, UWOP_SAVE_NONVOL, UWOP_SAVE_NONVOL_FAR,
       UWOP_EPILOG, UWOP_SPARE, UWOP_SAVE_XMM128, UWOP_SAVE_XMM128_FAR, UWOP_PUSH_MACHFRAME };
#define REG_RBP 5
#define UNW_FLAG_CHAININFO 0x4
#define MAX_CHAIN 8

/* Undoes the prolog of the function u names, as far as ip has run it: ctx becomes the caller's
 * (its ip the return address). 0, or -1 when the data does not read or is not of a kind known
 * here. */
static int unwind(const dnt_clr *r, const struct dnt__code_unwind *u, struct dnt__regs *ctx) {
  const dnt_core *c = dnt__clr_core(r);
  uint64_t sp = ctx->sp, fp = ctx->fp, offset = ctx->ip - u->begin, info = u->info;
  struct dnt__regs out = *ctx; /* the registers the function saved are the caller's, where it saved them */
  int chained = 0;
  for (int depth = 0; depth < MAX_CHAIN; depth++) {
    uint8_t h[4], codes[512];
    if (dnt_core_read(c, info, h, sizeof h) != 0) return -1;
    int version = h[0] & 7, flags = h[0] >> 3, prolog = h[1], count = h[2], frame_reg = h[3] & 0xf,
        frame_off = h[3] >> 4;
    if ((version != 1 && version != 2) || dnt_core_read(c, info + 4, codes, (size_t)count * 2) != 0) return -1;
    /* in a chained function, or past the prolog, every code applies; inside the prolog only
     * those its instructions so far have done */
    int in_prolog = !chained && offset < (uint64_t)prolog;
    for (int i = 0; i < count;) {
      int at = codes[2 * i], op = codes[2 * i + 1] & 0xf, opinfo = codes[2 * i + 1] >> 4, slots = 1;
      uint32_t arg = 0;
      if (op == UWOP_ALLOC_LARGE) slots = opinfo ? 3 : 2;
      else if (op == UWOP_SAVE_NONVOL || op == UWOP_SAVE_XMM128 || op == UWOP_EPILOG) slots = 2;
      else if (op == UWOP_SAVE_NONVOL_FAR || op == UWOP_SAVE_XMM128_FAR) slots = 3;
      if (i + slots > count) return -1;
      if (slots >= 2) arg = (uint32_t)codes[2 * i + 2] | (uint32_t)codes[2 * i + 3] << 8;
      if (slots == 3) arg |= ((uint32_t)codes[2 * i + 4] | (uint32_t)codes[2 * i + 5] << 8) << 16;
      int applies = op != UWOP_EPILOG && (!in_prolog || (uint64_t)at <= offset);
      if (applies) {
        uint64_t v;
        switch (op) {
        case UWOP_PUSH_NONVOL:
          if (opinfo == REG_RBP && dnt_core_read_u64(c, sp, &fp) != 0) return -1;
          out.loc[opinfo] = sp, out.have &= (uint16_t)~(1u << opinfo);
          sp += 8;
          break;
        case UWOP_ALLOC_LARGE: sp += opinfo ? arg : (uint64_t)arg * 8; break;
        case UWOP_ALLOC_SMALL: sp += (uint64_t)opinfo * 8 + 8; break;
        case UWOP_SET_FPREG:
          if (frame_reg != REG_RBP) return -1;
          sp = fp - (uint64_t)frame_off * 16;
          break;
        case UWOP_SAVE_NONVOL:
        case UWOP_SAVE_NONVOL_FAR: {
          uint64_t saved_at = sp + (op == UWOP_SAVE_NONVOL ? (uint64_t)arg * 8 : arg);
          if (opinfo == REG_RBP) {
            if (dnt_core_read_u64(c, saved_at, &v) != 0) return -1;
            fp = v;
          }
          out.loc[opinfo] = saved_at, out.have &= (uint16_t)~(1u << opinfo);
          break;
        }
        case UWOP_SAVE_XMM128:
        case UWOP_SAVE_XMM128_FAR: break;
        case UWOP_PUSH_MACHFRAME: { /* an interrupt's frame: ip and sp as the CPU pushed them */
          uint64_t base = sp + (opinfo ? 8 : 0), ip, rsp;
          if (dnt_core_read_u64(c, base, &ip) != 0 || dnt_core_read_u64(c, base + 24, &rsp) != 0) return -1;
          out.ip = ip, out.sp = rsp, out.fp = fp;
          *ctx = out;
          return 0;
        }
        default: return -1;
        }
      }
      i += slots;
    }
    if (!(flags & UNW_FLAG_CHAININFO)) break;
    /* the function this one continues (a cold part, a funclet's parent): its RUNTIME_FUNCTION
     * after the codes, kept to an even count */
    uint32_t fn[3];
    if (dnt_core_read(c, info + 4 + 2 * (uint64_t)((count + 1) & ~1), fn, sizeof fn) != 0) return -1;
    info = u->base + fn[2], chained = 1;
  }
  uint64_t ip;
  if (dnt_core_read_u64(c, sp, &ip) != 0) return -1;
  out.ip = ip, out.sp = sp + 8, out.fp = fp;
  *ctx = out;
  return 0;
}

/* The Frames that are FramedMethodFrames: a transition block, a method. */
static int framed(const char *kind) {
  static const char *const framed_kinds[] = {"PrestubMethodFrame", "CallCountingHelperFrame", "StubDispatchFrame",
                                            "ExternalMethodFrame", "DynamicHelperFrame", "PInvokeCalliFrame"};
  for (size_t i = 0; i < sizeof framed_kinds / sizeof framed_kinds[0]; i++)
    if (strcmp(kind, framed_kinds[i]) == 0) return 1;
  return 0;
}

/* Where managed code resumes after the Frame at frame (of kind): 1 with ctx set, 0 when the
 * Frame does not say (it marks a boundary only), -1 when the core lacks it. */
static int resume_at(const dnt_clr *r, uint64_t frame, const char *kind, struct dnt__regs *ctx) {
  uint64_t a, b, c, off;
  if (strcmp(kind, "InlinedCallFrame") == 0) {
    uint64_t sp_off, ret_off, fp_off;
    if (dnt_clr_field(r, "InlinedCallFrame", "CallSiteSP", &sp_off) ||
        dnt_clr_field(r, "InlinedCallFrame", "CallerReturnAddress", &ret_off) ||
        dnt_clr_field(r, "InlinedCallFrame", "CalleeSavedFP", &fp_off) || clr_u64(r, frame + ret_off, &a) ||
        clr_u64(r, frame + sp_off, &b) || clr_u64(r, frame + fp_off, &c))
      return -1;
    if (!a) return 0; /* not in a call now */
    *ctx = (struct dnt__regs){.ip = a, .sp = b, .fp = c}; /* of the callee-saved registers, the frame keeps rbp only */
    ctx->loc[REG_RBP] = frame + fp_off;
    return 1;
  }
  if (strcmp(kind, "SoftwareExceptionFrame") == 0 || strcmp(kind, "FaultingExceptionFrame") == 0 ||
      strcmp(kind, "ResumableFrame") == 0 || strcmp(kind, "RedirectedThreadFrame") == 0) {
    uint64_t context;
    if (strcmp(kind, "SoftwareExceptionFrame") == 0 || strcmp(kind, "FaultingExceptionFrame") == 0) {
      if (dnt_clr_field(r, kind, "TargetContext", &off)) return -1;
      context = frame + off;
    } else if (dnt_clr_field(r, "ResumableFrame", "TargetContextPtr", &off) || clr_u64(r, frame + off, &context)) {
      return -1;
    }
    if (clr_u64(r, context + CONTEXT_RIP, &a) || clr_u64(r, context + CONTEXT_RSP, &b) ||
        clr_u64(r, context + CONTEXT_RBP, &c))
      return -1;
    *ctx = (struct dnt__regs){.ip = a, .sp = b, .fp = c};
    for (int i = 0; i < 16; i++) ctx->loc[i] = context + CONTEXT_RAX + 8ull * (unsigned)i;
    return a ? 1 : 0;
  }
  if (framed(kind)) {
    static const struct {
      const char *name;
      int reg;
    } saved[] = {{"Rbx", 3}, {"Rbp", REG_RBP}, {"R12", 12}, {"R13", 13}, {"R14", 14}, {"R15", 15}};
    uint64_t tb_off, ret_off, saved_off, tb, rbp_off;
    if (dnt_clr_field(r, "FramedMethodFrame", "TransitionBlockPtr", &tb_off) ||
        dnt_clr_field(r, "TransitionBlock", "ReturnAddress", &ret_off) ||
        dnt_clr_field(r, "TransitionBlock", "CalleeSavedRegisters", &saved_off) ||
        dnt_clr_field(r, "CalleeSavedRegisters", "Rbp", &rbp_off) || clr_u64(r, frame + tb_off, &tb) ||
        clr_u64(r, tb + ret_off, &a) || clr_u64(r, tb + saved_off + rbp_off, &c))
      return -1;
    *ctx = (struct dnt__regs){.ip = a, .sp = tb + ret_off + 8, .fp = c};
    for (size_t i = 0; i < sizeof saved / sizeof saved[0]; i++)
      if (dnt_clr_field(r, "CalleeSavedRegisters", saved[i].name, &off) == 0) ctx->loc[saved[i].reg] = tb + saved_off + off;
    return a ? 1 : 0;
  }
  return 0;
}

/* The MethodDesc a FramedMethodFrame stands for (the method being prepared, called or counted),
 * its last field, after the transition block's pointer (the descriptor names the one, not the
 * other): 0 when none or unreadable. */
static uint64_t framed_method(const dnt_clr *r, uint64_t frame) {
  uint64_t tb_off, size, md;
  if (dnt_clr_field(r, "FramedMethodFrame", "TransitionBlockPtr", &tb_off) ||
      dnt_clr_field(r, "FramedMethodFrame", "!", &size) || tb_off + 16 != size || clr_u64(r, frame + tb_off + 8, &md))
    return 0;
  return md & 7 ? 0 : md;
}

int dnt__stack_walk(const dnt_clr *r, const struct dnt_clr_thread *t, dnt__frame_fn fn, void *ud) {
  const struct dnt_core_thread *os;
  size_t nos = dnt_core_threads(dnt__clr_core(r), &os), n = 0;
  if (t->dbg < 0 || (size_t)t->dbg >= nos) return 0; /* no registers: nothing to walk */
  struct dnt__regs ctx = {.ip = os[t->dbg].rip, .sp = os[t->dbg].rsp, .fp = os[t->dbg].rbp, .have = 0xffff};
  memcpy(ctx.val, os[t->dbg].gpr, sizeof ctx.val);
  uint64_t frame = t->frame, next_off;
  int active = 1; /* the thread's own registers: its innermost frame is running, not calling */
  if (dnt_clr_field(r, "Frame", "Next", &next_off) != 0) return -1;
  for (; n < MAX_FRAMES; n++) {
    uint64_t md, start;
    struct dnt__code_unwind u;
    if (ctx.ip && dnt__clr_code(r, ctx.ip, &md, &start, &u) == 0) {
      struct dnt__regs caller = ctx;
      int unwound = u.info && unwind(r, &u, &caller) == 0;
      if (!unwound) { /* no unwind data: the caller through the frame pointer */
        uint64_t fp = ctx.fp, ip, caller_fp;
        if (fp < ctx.sp || clr_u64(r, fp + 8, &ip) || clr_u64(r, fp, &caller_fp)) caller.sp = 0;
        else caller.ip = ip, caller.sp = fp + 16, caller.fp = caller_fp, caller.loc[REG_RBP] = fp;
      }
      struct dnt__frame_regs regs = {&ctx, caller.sp ? &caller : NULL, &u, start, active};
      struct dnt_clr_frame f = {.sp = ctx.sp, .ip = ctx.ip, .method = md};
      if (fn(ud, &f, &regs)) return -1;
      if (caller.sp <= ctx.sp) break; /* a stack only grows: anything else is damage */
      ctx = caller, active = 0;
      continue;
    }
    /* native code: the next explicit Frame says where managed code was left */
    if (!frame || frame == FRAME_TOP) break;
    const char *kind = kind_of(r, frame);
    struct dnt_clr_frame f = {.sp = frame, .ip = ctx.ip, .frame = frame, .kind = kind ? kind : "Frame"};
    if (kind && strcmp(kind, "InlinedCallFrame") == 0) {
      uint64_t datum;
      if (clr_u64(r, frame + 16, &datum) == 0 && datum && !(datum & 7)) f.method = datum; /* the target's MethodDesc */
    } else if (kind && framed(kind)) {
      f.method = framed_method(r, frame);
    }
    if (fn(ud, &f, NULL)) return -1;
    struct dnt__regs next = ctx;
    int how = kind ? resume_at(r, frame, kind, &next) : 0;
    if (how < 0) break;
    if (how > 0) {
      if (strcmp(kind, "InlinedCallFrame") == 0) { /* SOS shows it again, at the call's return */
        f.ip = next.ip;
        if (fn(ud, &f, NULL)) return -1;
      }
      ctx = next, active = 0;
    }
    uint64_t following;
    if (clr_u64(r, frame + next_off, &following) != 0 || following == frame) break;
    frame = following;
  }
  return 0;
}

int dnt_clr_stack_walk(const dnt_clr *r, const struct dnt_clr_thread *t, struct dnt_clr_frame **out, size_t *nout) {
  struct walk w = {.r = r};
  *out = NULL, *nout = 0;
  if (dnt__stack_walk(r, t, add, &w) != 0) {
    free(w.v);
    return -1;
  }
  *out = w.v, *nout = w.n;
  return 0;
}
