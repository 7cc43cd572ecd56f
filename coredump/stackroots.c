/* stackroots.c: the references on a thread's stack (dnt-core.h), as the runtime's stack walk
 * reports them to the GC and to debuggers: for each managed frame, the GC info of its method
 * (after a JIT'ed method's code header; right after the unwind data in a ReadyToRun image) read
 * at the frame's code offset (gcinfo.c); an exception handler's frame (a funclet) reports for its
 * method, whose own frame further up then does not. A frame that is not the thread's running one
 * reports no scratch register and no slot of the outgoing argument area; a register is read where
 * the frame's callee saved it (stack.c); a stack slot is relative to the frame's SP, its caller's
 * SP or its frame register. */
#include <stdlib.h>
#include <string.h>

#include "core-int.h"

#define UNW_FLAG_CHAININFO 0x4
/* the registers a call preserves on Unix x64: rbx, rbp, r12-r15 */
#define PRESERVED ((1u << 3) | (1u << 5) | (1u << 12) | (1u << 13) | (1u << 14) | (1u << 15))

static const char *const reg_names[16] = {"rax", "rcx", "rdx", "rbx", "rsp", "rbp", "rsi", "rdi",
                                          "r8",  "r9",  "r10", "r11", "r12", "r13", "r14", "r15"};

struct roots {
  const dnt_clr *r;
  struct dnt__gcinfo *g;
  uint64_t funclet_of; /* the start of the method whose funclet (an exception handler) was last met */
  struct dnt_clr_stack_root *v;
  size_t n, cap;
  int oom;
};

/* A register's value at a frame: 0, or -1 unknown. *at: where it lies (0: the thread's own). */
static int reg_value(const dnt_clr *r, const struct dnt__regs *ctx, uint32_t reg, uint64_t *v, uint64_t *at) {
  if (reg >= 16) return -1;
  *at = ctx->loc[reg];
  if (*at) return clr_u64(r, *at, v);
  if (reg == 5 && !(ctx->have & (1u << 5))) return *v = ctx->fp, 0; /* rbp is always known */
  if (ctx->have & (1u << reg)) return *v = ctx->val[reg], 0;
  return -1;
}

/* Where the method's GC info is: 0 when it cannot be found. */
static uint64_t gcinfo_of(const dnt_clr *r, const struct dnt__code_unwind *u) {
  uint64_t off, at;
  if (u->header) /* JIT'ed code: its RealCodeHeader points at it */
    return dnt_clr_field(r, "RealCodeHeader", "GCInfo", &off) == 0 && clr_u64(r, u->header + off, &at) == 0 ? at : 0;
  uint8_t h[4]; /* precompiled: after the method's unwind data (header, codes, personality routine; 4-aligned) */
  if (!u->method_info || dnt_core_read(dnt__clr_core(r), u->method_info, h, sizeof h) != 0 || (h[0] >> 3) & UNW_FLAG_CHAININFO)
    return 0;
  return u->method_info + ((8u + 2u * h[2] + 3u) & ~3u);
}

static int add(struct roots *w, struct dnt_clr_stack_root root) {
  if (w->n == w->cap) {
    size_t cap = w->cap ? w->cap * 2 : 32;
    struct dnt_clr_stack_root *v = realloc(w->v, cap * sizeof *v);
    if (!v) return w->oom = 1, -1;
    w->v = v, w->cap = cap;
  }
  w->v[w->n++] = root;
  return 0;
}

static int frame_roots(void *ud, const struct dnt_clr_frame *f, const struct dnt__frame_regs *regs) {
  struct roots *w = ud;
  if (!regs) return 0; /* a runtime Frame: its own references are not read */
  const struct dnt__regs *ctx = regs->ctx;
  uint64_t info = gcinfo_of(w->r, regs->code);
  if (!info || ctx->ip < regs->start || ctx->ip - regs->start > UINT32_MAX) return 0;
  struct dnt__gcinfo *g = w->g;
  /* a funclet reports its method's slots; the method's own frame, further up (the funclet's
   * parent), then reports nothing when its info says only leaves report, else no untracked slot */
  int funclet = regs->code->begin && regs->code->begin != regs->start, parent = !funclet && regs->start == w->funclet_of, flags = 0;
  if (funclet) w->funclet_of = regs->start;
  else if (parent) w->funclet_of = 0, flags = DNT__GC_NO_UNTRACKED;
  if (dnt__gcinfo_read(dnt__clr_core(w->r), info, (uint32_t)(ctx->ip - regs->start), flags, g) != 0) return 0;
  if (parent && g->report_only_leaf) return 0;
  for (uint32_t i = 0; i < g->nslots; i++) {
    const struct dnt__gc_slot *s = &g->slots[i];
    if (!s->live) continue;
    struct dnt_clr_stack_root root = {.sp = f->sp, .ip = f->ip, .interior = (s->flags & DNT__GC_INTERIOR) != 0,
                                      .pinned = (s->flags & DNT__GC_PINNED) != 0, .active = regs->active};
    uint64_t value;
    if (s->is_register) {
      if (s->reg >= 16 || s->reg == 4 || (!regs->active && !(PRESERVED & (1u << s->reg)))) continue;
      uint64_t saved_at; /* a register's root has no address of its own, wherever its value was saved */
      if (reg_value(w->r, ctx, s->reg, &value, &saved_at) != 0) continue;
      memcpy(root.reg, reg_names[s->reg], strlen(reg_names[s->reg]) + 1);
    } else {
      uint64_t base, where;
      if (s->base == DNT__GC_SP_REL) {
        base = ctx->sp;
        memcpy(root.reg, "rsp", 4);
      } else if (s->base == DNT__GC_CALLER_SP_REL) {
        if (!regs->caller) continue;
        base = regs->caller->sp;
        memcpy(root.reg, "caller.rsp", 11);
      } else {
        if (g->stack_base_register >= 16 || reg_value(w->r, ctx, g->stack_base_register, &base, &where) != 0) continue;
        memcpy(root.reg, reg_names[g->stack_base_register], strlen(reg_names[g->stack_base_register]) + 1);
      }
      root.address = base + (uint64_t)(int64_t)s->offset;
      root.offset = s->offset;
      /* the outgoing arguments belong to the callee now */
      if (!regs->active && !s->untracked && root.address >= ctx->sp && root.address < ctx->sp + g->outgoing_area) continue;
      if (clr_u64(w->r, root.address, &value) != 0) continue;
    }
    if (!value) continue;
    root.object = value;
    if (add(w, root) != 0) return -1;
  }
  return 0;
}

int dnt_clr_stack_roots(const dnt_clr *r, const struct dnt_clr_thread *t, struct dnt_clr_stack_root **v, size_t *n) {
  struct roots w = {.r = r};
  *v = NULL, *n = 0;
  if (!(w.g = malloc(sizeof *w.g))) return -1;
  int rc = dnt__stack_walk(r, t, frame_roots, &w);
  free(w.g);
  if (rc != 0 || w.oom) {
    free(w.v);
    return -1;
  }
  *v = w.v, *n = w.n;
  return 0;
}
