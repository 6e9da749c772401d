/*
 * asrmodule.c -- the Python module `asr`: libasr's public API (asr.h) for
 * programs started by asrrun (asrrun -n 4 /usr/bin/python3 app.py).
 *
 * What it adds to asr.h, and why:
 *
 * - Buffers. isend / irecv take any C-contiguous buffer-protocol object
 *   (numpy arrays, bytearray, memoryview, array.array) or a CPU torch
 *   tensor, with an offset and a length in bytes. Each distinct memory
 *   region (address, length) gets one registration record (reg_t) holding a
 *   strong reference to its exporter, and an asr_tensor_t wrapping it. A
 *   record lives in one process-wide cache, not one per comm, because
 *   asr_forget drops the region's registrations from every comm at once.
 *
 * - Memory libasr may touch is never freed under it. A record is kept (its
 *   exporter referenced) while it is busy: a request on it is in flight or
 *   a prepared list (Xfer) names it; and while the comms' registration
 *   caches may hold it. A record leaves the cache (asr_forget, then the
 *   reference is dropped) only when neither it nor memory inside it is
 *   busy, and when either the program has let go of the exporter (we hold its last reference) or more than
 *   CACHE_IDLE_MAX idle records are kept (least recently used first). So a
 *   program that sends a fresh array each time keeps memory bounded, and
 *   one that sends from the same arrays posts on the fast path (libasr's
 *   registration cache hit) every time.
 *
 * - Requests. A posted request is referenced by its comm until it is
 *   finished (completed, failed, or cancelled by a close), so a Request the
 *   program dropped still keeps its buffer; a post that finds all 128
 *   requests in flight first tests the ones nobody else holds. wait() spins
 *   on asr_test with the GIL released (other threads post meanwhile),
 *   taking the GIL back every ~50 ms to see signals (Ctrl-C) and deadlines.
 *
 * - One-sided transfers. A Memory holds its exporter from asr_mem_register
 *   until asr_mem_deregister returned: peers write into that memory while
 *   the program holds nothing else. Writes and reads are requests of the
 *   SEND comm as sends are (their local side a record of the cache); each
 *   also references its RemoteMemory (an import, belonging to that comm),
 *   and a post of a prepared list references the list, which holds its
 *   records and imports for as long as it lives. An import or a list is
 *   freed only when nothing in flight uses it (free() is refused before).
 *
 * - Lifetimes. Closing a comm or an LNC (or finalizing the job, which may
 *   close its LNC) finishes their requests as cancelled; it is refused while
 *   another thread waits on one of them, since libasr frees the requests.
 *   The imports and lists of a comm are freed with it: libasr's close
 *   frees neither (asr_rmem_free / asr_xfer_free are the application's),
 *   so those that nothing in flight uses are freed before asr_comm_close,
 *   and the rest once the close cancelled the requests that used them.
 *   The Memory registered on an LNC is deregistered before the LNC closes.
 *
 * Everything here runs under the GIL except the waits and closes, which
 * mark what they use first (Request.waiting, Comm.waiters, Comm.state).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h> /* first, as Python asks (it sets the feature macros); no config.h: not part of libasr */
#include <structmember.h>

#include <assert.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "asr.h"

PyMODINIT_FUNC PyInit_asr(void);

/* Idle registration records kept beyond those whose exporter the program
 * still references... see the file header. */
#define CACHE_IDLE_MAX 64

/* --- exceptions ----------------------------------------------------------- */

static PyObject *AsrError, *AsrUnconnected, *AsrQueueFull, *AsrTimeout, *AsrConnError, *AsrPeerFailed;

/* Raises the exception of libasr status st, with asr_strerror's text after what. */
static PyObject *raise_status(int st, const char *what) {
  PyObject *type = st == ASR_UNCONNECTED   ? AsrUnconnected
                   : st == ASR_QUEUE_FULL  ? AsrQueueFull
                   : st == ASR_TIMEOUT     ? AsrTimeout
                   : st == ASR_CONN_ERROR  ? AsrConnError
                   : st == ASR_PEER_FAILED ? AsrPeerFailed
                                           : AsrError;
  PyObject *msg = PyUnicode_FromFormat("%s: %s", what, asr_strerror(st));
  if (!msg) return NULL;
  PyObject *exc = PyObject_CallOneArg(type, msg);
  Py_DECREF(msg);
  if (!exc) return NULL;
  PyObject *code = PyLong_FromLong(st);
  if (code) {
    (void)PyObject_SetAttrString(exc, "status", code);
    Py_DECREF(code);
  }
  PyErr_SetObject(type, exc);
  Py_DECREF(exc);
  return NULL;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* --- registration records (the process-wide cache) ------------------------- */

typedef struct reg {
  struct reg *prev, *next; /* most recently used first */
  Py_buffer view;          /* the exporter's buffer (view.obj), when it has the buffer protocol */
  int has_view;
  PyObject *owner; /* the object whose last reference we may hold: view.obj, or the torch tensor */
  char *va;
  size_t len;
  asr_tensor_t *t;
  long busy; /* requests posted on it and not finished, and prepared lists naming it */
} reg_t;

static reg_t *cache_head, *cache_tail;
static long cache_n;

static void cache_unlink(reg_t *r) {
  if (r->prev)
    r->prev->next = r->next;
  else
    cache_head = r->next;
  if (r->next)
    r->next->prev = r->prev;
  else
    cache_tail = r->prev;
  r->prev = r->next = NULL;
  cache_n--;
}

static void cache_push_front(reg_t *r) {
  r->prev = NULL;
  r->next = cache_head;
  if (cache_head) cache_head->prev = r;
  cache_head = r;
  if (!cache_tail) cache_tail = r;
  cache_n++;
}

/* Whether a request is in flight, or a prepared list lives, on r's memory
 * or memory inside it: then asr_forget of r's region would drop a
 * registration a post uses. */
static int region_busy(const reg_t *r) {
  for (const reg_t *o = cache_head; o; o = o->next)
    if (o->busy > 0 && o->va >= r->va && o->va + o->len <= r->va + r->len) return 1;
  return 0;
}

/* Drops r: every comm forgets its registrations, then we let go of the
 * memory (the exporter's reference last: it may free the memory). */
static void reg_drop(reg_t *r) {
  cache_unlink(r);
  (void)asr_forget(r->va, r->len);
  asr_tensor_free(r->t); /* a wrapping tensor: frees the record only */
  if (r->has_view)
    PyBuffer_Release(&r->view);
  else
    Py_XDECREF(r->owner);
  PyMem_Free(r);
}

static int reg_released(const reg_t *r) { return r->owner && Py_REFCNT(r->owner) == 1; }

/* Keeps the cache bounded (see the file header): drops idle records whose
 * exporter only we reference, then the least recently used idle ones over
 * CACHE_IDLE_MAX. Called when a record is added, and by asr.forget(). */
static void cache_trim(void) {
  long idle = 0;
  for (reg_t *r = cache_head, *n; r; r = n) {
    n = r->next;
    if (r->busy > 0) continue;
    if (reg_released(r) && !region_busy(r))
      reg_drop(r);
    else
      idle++;
  }
  for (reg_t *r = cache_tail, *p; r && idle > CACHE_IDLE_MAX; r = p) {
    p = r->prev;
    if (r->busy == 0 && !region_busy(r)) {
      reg_drop(r);
      idle--;
    }
  }
}

/* A buffer a post names: its memory, and what keeps it (view or owner). */
typedef struct {
  Py_buffer view;
  int has_view;
  PyObject *owner; /* a new reference for a torch tensor, else view.obj (borrowed) */
  char *va;
  size_t len;
} buf_t;

static void buf_release(buf_t *b) {
  if (b->has_view)
    PyBuffer_Release(&b->view);
  else
    Py_XDECREF(b->owner);
  b->has_view = 0;
  b->owner = NULL;
}

static int is_torch_tensor(PyObject *o) {
  PyTypeObject *tp = Py_TYPE(o);
  for (; tp; tp = tp->tp_base)
    if (strcmp(tp->tp_name, "Tensor") == 0 || strcmp(tp->tp_name, "torch._C._TensorBase") == 0 ||
        strcmp(tp->tp_name, "torch._C.TensorBase") == 0)
      return 1;
  return 0;
}

static int call_long(PyObject *o, const char *meth, long long *out) {
  PyObject *v = PyObject_CallMethod(o, meth, NULL);
  if (!v) return -1;
  *out = PyLong_AsLongLong(v);
  Py_DECREF(v);
  return *out == -1 && PyErr_Occurred() ? -1 : 0;
}

/* A torch tensor's memory: CPU and contiguous, or a clear error. */
static int get_torch(PyObject *o, buf_t *b) {
  PyObject *dev = PyObject_GetAttrString(o, "device");
  if (!dev) return -1;
  PyObject *dtype = PyObject_GetAttrString(dev, "type");
  Py_DECREF(dev);
  if (!dtype) return -1;
  int cpu = PyUnicode_Check(dtype) && PyUnicode_CompareWithASCIIString(dtype, "cpu") == 0;
  Py_DECREF(dtype);
  if (!cpu) {
    PyErr_SetString(PyExc_ValueError, "asr moves host memory: the tensor is not on the CPU (use .cpu())");
    return -1;
  }
  PyObject *c = PyObject_CallMethod(o, "is_contiguous", NULL);
  if (!c) return -1;
  int contig = PyObject_IsTrue(c);
  Py_DECREF(c);
  if (contig < 0) return -1;
  if (!contig) {
    PyErr_SetString(PyExc_ValueError, "the tensor is not contiguous (use .contiguous())");
    return -1;
  }
  long long ptr, numel, esize;
  if (call_long(o, "data_ptr", &ptr) || call_long(o, "numel", &numel) || call_long(o, "element_size", &esize))
    return -1;
  b->va = (char *)(uintptr_t)ptr;
  b->len = (size_t)numel * (size_t)esize;
  b->owner = Py_NewRef(o);
  b->has_view = 0;
  return 0;
}

/* Takes obj's memory for a post or a registration: contiguous, and
 * writable when writer (what writes into it: "irecv", ...) is not NULL. */
static int get_buf(PyObject *obj, const char *writer, buf_t *b) {
  memset(b, 0, sizeof *b);
  if (!PyObject_CheckBuffer(obj)) {
    if (is_torch_tensor(obj)) return get_torch(obj, b);
    PyErr_Format(PyExc_TypeError,
                 "a buffer (numpy array, bytearray, memoryview, torch CPU tensor) is needed, not %.100s",
                 Py_TYPE(obj)->tp_name);
    return -1;
  }
  if (PyObject_GetBuffer(obj, &b->view, PyBUF_RECORDS_RO) != 0) return -1;
  b->has_view = 1;
  if (!PyBuffer_IsContiguous(&b->view, 'C')) {
    buf_release(b);
    PyErr_SetString(PyExc_ValueError,
                    "the buffer is not C-contiguous (numpy.ascontiguousarray(a), or tensor.contiguous())");
    return -1;
  }
  if (writer && b->view.readonly) {
    buf_release(b);
    PyErr_Format(PyExc_ValueError, "%s needs a writable buffer; this one is read-only", writer);
    return -1;
  }
  b->va = b->view.buf;
  b->len = (size_t)b->view.len;
  b->owner = b->view.obj;
  return 0;
}

/* The record of b's region, moving b's hold into a new one on a miss.
 * Returns NULL with an exception set. b is released either way. */
static reg_t *cache_get(buf_t *b) {
  for (reg_t *r = cache_head; r; r = r->next)
    if (r->va == b->va && r->len == b->len) {
      /* r's exporter keeps this memory alive: it is the same memory */
      buf_release(b);
      if (r != cache_head) {
        cache_unlink(r);
        cache_push_front(r);
      }
      return r;
    }
  reg_t *r = PyMem_Calloc(1, sizeof *r);
  if (!r) {
    buf_release(b);
    PyErr_NoMemory();
    return NULL;
  }
  int st = asr_tensor_wrap(b->va, b->len, &r->t);
  if (st) {
    PyMem_Free(r);
    buf_release(b);
    raise_status(st, "asr_tensor_wrap");
    return NULL;
  }
  r->va = b->va;
  r->len = b->len;
  r->has_view = b->has_view;
  if (b->has_view) r->view = b->view; /* the hold moves: view.obj's reference is ours now */
  r->owner = b->owner;                /* view.obj (the view's reference), or our own reference */
  b->has_view = 0;
  b->owner = NULL;
  cache_trim(); /* before r is in: r is in use */
  cache_push_front(r);
  return r;
}

/* --- LNCs and comms ---------------------------------------------------------- */

static unsigned lnc_gen[ASR_MAX_LNC]; /* bumped when the LNC closes: its comms are gone */
static int lnc_user[ASR_MAX_LNC];     /* asr.init brought it up (else asr_job_* may have) */
static int job_active = -1;           /* the job's LNC once job_init returned, else -1 */

typedef struct RequestObject RequestObject;
typedef struct RemoteMemoryObject RemoteMemoryObject;
typedef struct XferObject XferObject;

enum { COMM_OPEN, COMM_CLOSING, COMM_CLOSED };

typedef struct CommObject {
  PyObject_HEAD asr_comm_t *comm; /* NULL once closed */
  int send;                       /* a SEND comm (isend), else RECV (irecv) */
  int lnc, peer_lnc, peer_rank;   /* peer_rank -1 when made by address */
  char peer_ip[64];
  unsigned gen;
  int state;
  int waiters;             /* threads in wait() / wait_connected() / notifications() on it, GIL released */
  RequestObject *inflight; /* posted and not finished; each holds a reference here */
  long ninflight;
  RemoteMemoryObject *imports;      /* not freed yet; each holds a reference to the comm */
  XferObject *xfers;                /* not freed yet; each holds a reference to the comm */
  struct CommObject *lprev, *lnext; /* every live comm (comms) */
} CommObject;

static CommObject *comms;

/* An import (Comm.import_memory) of a peer's descriptor on a SEND comm. */
struct RemoteMemoryObject {
  PyObject_HEAD CommObject *comm;  /* a reference */
  asr_rmem_t *rmem;                /* NULL once freed */
  long users;                      /* requests in flight and prepared lists using it */
  RemoteMemoryObject *prev, *next; /* in comm->imports while rmem is set */
};

/* A prepared list (Comm.prepare). While x is set it holds each entry's
 * record (busy) and import (a reference and a use), since libasr's list
 * names their tensors and imports until asr_xfer_free. */
struct XferObject {
  PyObject_HEAD CommObject *comm; /* a reference */
  asr_xfer_t *x;                  /* NULL once freed */
  int op;                         /* ASR_XFER_WRITE or ASR_XFER_READ */
  int posted;                     /* a post of it is in flight */
  Py_ssize_t n;
  size_t nbytes;
  reg_t **regs;               /* n records */
  RemoteMemoryObject **rmems; /* n references */
  PyObject *entries;          /* the tuple prepare was given */
  XferObject *prev, *next;    /* in comm->xfers while x is set */
};

/* A registration (asr.Memory): hold keeps the exporter's memory valid from
 * asr_mem_register until asr_mem_deregister returned. */
typedef struct MemoryObject {
  PyObject_HEAD asr_mem_t *mem; /* NULL once deregistered */
  buf_t hold;
  PyObject *buffer; /* the object registered, until deregistration */
  int lnc;
  unsigned access;
  size_t len;
  struct MemoryObject *lprev, *lnext; /* in mems while registered */
} MemoryObject;

static MemoryObject *mems;

/* libasr's imports and lists that asr_mem_import / asr_xfer_prep made and
 * asr_rmem_free / asr_xfer_free did not free yet (asr._cache_info: tests
 * check that closing comms and LNCs leaves none). */
static long live_imports, live_lists;

enum { REQ_POSTED, REQ_DONE, REQ_FAILED, REQ_CANCELLED };

/* What a request does; names for repr and errors. */
enum { OP_SEND, OP_RECV, OP_WRITE, OP_READ, OP_XFER };
static const char *const op_names[] = {"isend", "irecv", "write", "read", "list"};

struct RequestObject {
  PyObject_HEAD CommObject *comm; /* a reference */
  asr_request_t *req;             /* libasr's, while POSTED */
  reg_t *reg;                     /* the local memory's record; NULL for a list (it holds its own) */
  RemoteMemoryObject *rmem;       /* write / read: the import, a reference holding a use */
  XferObject *xfer;               /* a list's post: the list, a reference */
  PyObject *buffer;               /* what was posted, for Request.buffer */
  size_t offset, length, nbytes;
  int op, state, status, waiting;
  RequestObject *prev, *next; /* in comm->inflight */
};

static PyTypeObject CommType, RequestType, JobInfoType, MemoryType, RemoteMemoryType, XferType;

/* Ends r's flight: out of its comm's list (dropping the list's reference:
 * the caller holds its own), its record, import or list no longer busy. */
static void req_finish(RequestObject *r, int state, int status, size_t nbytes) {
  CommObject *c = r->comm;
  r->state = state;
  r->status = status;
  r->nbytes = nbytes;
  r->req = NULL;
  if (r->reg) r->reg->busy--;
  if (r->rmem) r->rmem->users--;
  if (r->xfer) r->xfer->posted = 0;
  if (r->prev)
    r->prev->next = r->next;
  else
    c->inflight = r->next;
  if (r->next) r->next->prev = r->prev;
  r->prev = r->next = NULL;
  c->ninflight--;
  Py_DECREF(r);
}

/* Frees import m (asr_rmem_free) and takes it out of its comm's list.
 * Called when no request in flight uses it: nothing in flight was posted
 * with it, or libasr closed its comm, which finished those requests. */
static void rmem_release(RemoteMemoryObject *m) {
  asr_rmem_free(m->rmem);
  live_imports--;
  m->rmem = NULL;
  if (m->prev)
    m->prev->next = m->next;
  else
    m->comm->imports = m->next;
  if (m->next) m->next->prev = m->prev;
  m->prev = m->next = NULL;
}

/* Frees list x (asr_xfer_free) and takes it out of its comm's list; its
 * records and imports are no longer held by it. Called when no post of it
 * is in flight, or once libasr closed its comm (asr_xfer_free then frees a
 * list whose post the close cancelled). */
static void xfer_release(XferObject *x) {
  asr_xfer_free(x->x);
  live_lists--;
  x->x = NULL;
  if (x->prev)
    x->prev->next = x->next;
  else
    x->comm->xfers = x->next;
  if (x->next) x->next->prev = x->prev;
  x->prev = x->next = NULL;
  for (Py_ssize_t i = 0; i < x->n; i++) {
    x->regs[i]->busy--;
    x->rmems[i]->users--;
    Py_DECREF(x->rmems[i]); /* (may free that import: it is in no list walked now) */
  }
  PyMem_Free(x->regs);
  PyMem_Free(x->rmems);
  x->regs = NULL;
  x->rmems = NULL;
  x->n = 0;
}

/* Before libasr closes c (asr_comm_close, or asr_close of its LNC): frees
 * the lists and imports that nothing in flight uses, while the comm they
 * were made on still exists, as asr.h asks. comm_closed frees the rest.
 * (It drops no reference to a comm: each list keeps its own.) */
static void comm_release_one_sided(CommObject *c) {
  for (XferObject *x = c->xfers, *n; x; x = n) {
    n = x->next;
    if (!x->posted) xfer_release(x);
  }
  for (RemoteMemoryObject *m = c->imports, *n; m; m = n) {
    n = m->next;
    if (m->users == 0) rmem_release(m);
  }
}

/* c was closed (by libasr: asr_comm_close, asr_close or finalize): its
 * requests are gone with it, cancelled or failed, so the lists and imports
 * they used are no longer in flight and are freed now. libasr's close
 * frees neither (asr_comm_close leaves them to the application), so
 * without this they would leak. The lists first, then the imports they
 * name (asr.h: the imports must outlive the list). The caller holds a
 * reference to c: the requests, lists and imports dropped here may hold
 * its last others. */
static void comm_closed(CommObject *c) {
  while (c->inflight) {
    RequestObject *r = c->inflight;
    Py_INCREF(r);
    req_finish(r, REQ_CANCELLED, ASR_UNCONNECTED, 0);
    Py_DECREF(r);
  }
  while (c->xfers) xfer_release(c->xfers);
  while (c->imports) rmem_release(c->imports);
  c->comm = NULL;
  c->state = COMM_CLOSED;
}

/* Deregisters m and lets go of its memory (the exporter last: it may free
 * the memory). Runs under the GIL: no other thread sees m in between. */
static int mem_deregister(MemoryObject *m) {
  asr_mem_t *mem = m->mem;
  m->mem = NULL;
  if (m->lprev)
    m->lprev->lnext = m->lnext;
  else
    mems = m->lnext;
  if (m->lnext) m->lnext->lprev = m->lprev;
  m->lprev = m->lnext = NULL;
  int st = asr_mem_deregister(mem);
  buf_release(&m->hold);
  Py_CLEAR(m->buffer);
  return st;
}

static int comm_alive(CommObject *c) { return c->state == COMM_OPEN && c->gen == lnc_gen[c->lnc]; }

static int check_open(CommObject *c) {
  if (c->state == COMM_OPEN && c->gen != lnc_gen[c->lnc]) comm_closed(c); /* its LNC was closed */
  if (c->state != COMM_OPEN) {
    PyErr_SetString(AsrUnconnected,
                    c->state == COMM_CLOSING ? "the comm is being closed" : "the comm is closed");
    return -1;
  }
  return 0;
}

/* Before libasr closes LNC lnc (asr_close, or asr_job_finalize): refuses
 * while a thread waits on one of its comms, else marks them CLOSING, lets
 * go of their imports and lists, and deregisters the LNC's memory. */
static int lnc_close_begin(int lnc) {
  for (CommObject *c = comms; c; c = c->lnext)
    if (c->lnc == lnc && comm_alive(c) && c->waiters > 0) {
      PyErr_Format(PyExc_RuntimeError,
                   "LNC %d: another thread waits on a request, connect or notifications of one of its comms",
                   lnc);
      return -1;
    }
  for (CommObject *c = comms; c; c = c->lnext)
    if (c->lnc == lnc && c->gen == lnc_gen[lnc] && c->state != COMM_CLOSED) {
      if (c->state == COMM_OPEN) comm_release_one_sided(c);
      c->state = COMM_CLOSING;
    }
  for (MemoryObject *m = mems, *n; m; m = n) {
    n = m->lnext;
    if (m->lnc == lnc) (void)mem_deregister(m);
  }
  return 0;
}

static void lnc_close_end(int lnc) {
  /* A comm the program dropped lives on while its requests, lists or
   * imports reference it, and comm_closed drops those: hold it (and the
   * next one) so that the walk never reads a freed comm. */
  CommObject *c = comms;
  Py_XINCREF(c);
  while (c) {
    if (c->lnc == lnc && c->gen == lnc_gen[lnc] && c->state != COMM_CLOSED) comm_closed(c);
    CommObject *n = c->lnext;
    Py_XINCREF(n);
    Py_DECREF(c);
    c = n;
  }
  lnc_gen[lnc]++;
  lnc_user[lnc] = 0;
}

/* --- Request ------------------------------------------------------------------ */

static void Request_dealloc(RequestObject *r) {
  /* (never POSTED here: its comm's list holds a reference while it is) */
  Py_XDECREF(r->comm);
  Py_XDECREF(r->buffer);
  Py_XDECREF(r->rmem);
  Py_XDECREF(r->xfer);
  Py_TYPE(r)->tp_free((PyObject *)r);
}

/* The result of a finished request: its byte count, or its exception. */
static PyObject *req_result(RequestObject *r) {
  switch (r->state) {
    case REQ_DONE: return PyLong_FromSize_t(r->nbytes);
    case REQ_FAILED: return raise_status(r->status, "the request failed");
    default:
      PyErr_SetString(AsrUnconnected, "the request was cancelled: its comm or LNC was closed");
      return NULL;
  }
}

/* One asr_test of posted r; 1 when it finished (its state says how). */
static int req_poll(RequestObject *r) {
  int done = 0;
  size_t sz = 0;
  int st = asr_test(r->req, &done, &sz);
  if (st) {
    req_finish(r, REQ_FAILED, st, 0);
    return 1;
  }
  if (done) req_finish(r, REQ_DONE, 0, sz);
  return done;
}

static PyObject *Request_test(RequestObject *r, PyObject *unused) {
  if (r->state == REQ_POSTED) {
    if (r->waiting) Py_RETURN_FALSE; /* another thread polls it (wait) */
    if (check_open(r->comm)) {
      if (r->state == REQ_POSTED) return NULL; /* its comm is being closed */
      PyErr_Clear();                           /* cancelled: its LNC was closed */
    } else if (!req_poll(r)) {
      Py_RETURN_FALSE;
    }
  }
  if (r->state == REQ_DONE) Py_RETURN_TRUE;
  return req_result(r);
}

static PyObject *Request_wait(RequestObject *r, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"timeout", NULL};
  PyObject *tmo = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "|O:wait", kwlist, &tmo)) return NULL;
  double limit = -1;
  if (tmo != Py_None) {
    limit = PyFloat_AsDouble(tmo);
    if (limit == -1 && PyErr_Occurred()) return NULL;
    if (limit < 0) limit = 0;
  }
  if (r->state != REQ_POSTED) return req_result(r);
  if (r->waiting) {
    PyErr_SetString(PyExc_RuntimeError, "another thread waits on this request");
    return NULL;
  }
  CommObject *c = r->comm;
  if (check_open(c)) return NULL;
  double until = limit >= 0 ? now_s() + limit : 0;
  asr_request_t *q = r->req;
  r->waiting = 1;
  c->waiters++;
  int st = 0, done = 0;
  size_t sz = 0;
  for (;;) {
    /* spin without the GIL for up to ~50 ms, then look at signals and the clock */
    Py_BEGIN_ALLOW_THREADS;
    double slice_end = now_s() + 0.05;
    for (unsigned i = 1;; i++) {
      st = asr_test(q, &done, &sz);
      if (st || done) break;
      if ((i & 255) == 0) {
        double t = now_s();
        if (t >= slice_end || (limit >= 0 && t >= until)) break;
      }
    }
    Py_END_ALLOW_THREADS;
    if (st || done) break;
    if (limit >= 0 && now_s() >= until) break;
    if (PyErr_CheckSignals()) {
      r->waiting = 0;
      c->waiters--;
      return NULL; /* still in flight: wait() may be called again */
    }
  }
  r->waiting = 0;
  c->waiters--;
  if (st)
    req_finish(r, REQ_FAILED, st, 0);
  else if (done)
    req_finish(r, REQ_DONE, 0, sz);
  else {
    char msg[96];
    snprintf(msg, sizeof msg, "the request did not complete within %g s", limit);
    PyErr_SetString(AsrTimeout, msg);
    return NULL;
  }
  return req_result(r);
}

static PyObject *Request_get_done(RequestObject *r, void *unused) {
  return PyBool_FromLong(r->state != REQ_POSTED);
}

static PyObject *Request_get_nbytes(RequestObject *r, void *unused) {
  if (r->state != REQ_DONE) Py_RETURN_NONE;
  return PyLong_FromSize_t(r->nbytes);
}

static PyObject *Request_repr(RequestObject *r) {
  static const char *const names[] = {"posted", "done", "failed", "cancelled"};
  return PyUnicode_FromFormat("<asr.Request %s %zu bytes at offset %zu, %s>", op_names[r->op], r->length,
                              r->offset, names[r->state]);
}

static PyMethodDef Request_methods[] = {
    {"test", (PyCFunction)Request_test, METH_NOARGS,
     "test() -> bool\n\nPolls the request once: True when it completed (False while it is in flight, or "
     "while another thread waits on it). Raises asr.Error if it failed, asr.Unconnected if its comm was "
     "closed first."},
    {"wait", (PyCFunction)(void (*)(void))Request_wait, METH_VARARGS | METH_KEYWORDS,
     "wait(timeout=None) -> int\n\nWaits until the request completes and returns the bytes it moved (for "
     "a receive, what arrived). Spins in C with the GIL released, so other threads run and post meanwhile. "
     "Raises asr.Timeout (a TimeoutError) when timeout seconds pass first (the request stays in flight: "
     "wait again), asr.Error when it failed (for one, when the peer process exited)."},
    {0},
};

static PyMemberDef Request_members[] = {
    {"buffer", T_OBJECT, offsetof(RequestObject, buffer), READONLY,
     "the object posted (kept until it finishes)"},
    {"offset", T_PYSSIZET, offsetof(RequestObject, offset), READONLY, "the offset in bytes into buffer"},
    {"length", T_PYSSIZET, offsetof(RequestObject, length), READONLY, "the length in bytes posted"},
    {0},
};

static PyGetSetDef Request_getset[] = {
    {"done", (getter)Request_get_done, NULL, "whether it finished (completed, failed or cancelled)", NULL},
    {"nbytes", (getter)Request_get_nbytes, NULL, "bytes moved once completed, else None", NULL},
    {0},
};

static PyTypeObject RequestType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "asr.Request",
    .tp_basicsize = sizeof(RequestObject),
    .tp_dealloc = (destructor)Request_dealloc,
    .tp_repr = (reprfunc)Request_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc =
        "A posted isend, irecv, write, read or prepared list (made by Comm.isend, irecv, write, read, "
        "Xfer.post). Until it finishes it keeps its buffer (and import, or list) alive, even when the "
        "program dropped every other reference to both.",
    .tp_methods = Request_methods,
    .tp_members = Request_members,
    .tp_getset = Request_getset,
};

/* --- Comm ---------------------------------------------------------------------- */

static CommObject *comm_new(asr_comm_t *ac, int send, int lnc, const char *ip, int peer_lnc, int peer_rank) {
  CommObject *c = PyObject_New(CommObject, &CommType);
  if (!c) {
    (void)asr_comm_close(ac);
    return NULL;
  }
  c->comm = ac;
  c->send = send;
  c->lnc = lnc;
  c->peer_lnc = peer_lnc;
  c->peer_rank = peer_rank;
  snprintf(c->peer_ip, sizeof c->peer_ip, "%s", ip ? ip : "");
  c->gen = lnc_gen[lnc];
  c->state = COMM_OPEN;
  c->waiters = 0;
  c->inflight = NULL;
  c->ninflight = 0;
  c->imports = NULL;
  c->xfers = NULL;
  c->lprev = NULL;
  c->lnext = comms;
  if (comms) comms->lprev = c;
  comms = c;
  return c;
}

static void Comm_dealloc(CommObject *c) {
  /* (no request in flight, import or list: each holds a reference to us) */
  if (comm_alive(c) && c->comm) {
    Py_BEGIN_ALLOW_THREADS;
    (void)asr_comm_close(c->comm);
    Py_END_ALLOW_THREADS;
  }
  if (c->lprev)
    c->lprev->lnext = c->lnext;
  else
    comms = c->lnext;
  if (c->lnext) c->lnext->lprev = c->lprev;
  PyObject_Free(c);
}

/* Tests the in-flight requests nobody but the comm references (the program
 * dropped them unwaited), finishing those that completed. */
static void comm_reap(CommObject *c) {
  for (RequestObject *r = c->inflight, *n; r; r = n) {
    n = r->next;
    if (Py_REFCNT(r) == 1 && !r->waiting) (void)req_poll(r);
  }
}

/* The local side of a post: [off, off + len) of obj (lenobj None: to its
 * end), writable when writer is not NULL. Returns its record in the cache
 * and the length in *len, or NULL with an exception set. */
static reg_t *local_range(PyObject *obj, const char *writer, Py_ssize_t off, PyObject *lenobj, size_t *len) {
  buf_t b;
  if (get_buf(obj, writer, &b)) return NULL;
  Py_ssize_t n = -1;
  if (lenobj != Py_None) {
    n = PyLong_AsSsize_t(lenobj);
    if (n == -1 && PyErr_Occurred()) {
      buf_release(&b);
      return NULL;
    }
    if (n < 0) {
      buf_release(&b);
      PyErr_Format(PyExc_ValueError, "length %zd is negative", n);
      return NULL;
    }
  }
  if (off < 0 || (size_t)off > b.len) {
    PyErr_Format(PyExc_ValueError, "offset %zd is outside the %zu-byte buffer", off, b.len);
    buf_release(&b);
    return NULL;
  }
  if (n < 0) n = (Py_ssize_t)(b.len - (size_t)off);
  if ((size_t)n > b.len - (size_t)off) {
    PyErr_Format(PyExc_ValueError, "%zd bytes at offset %zd run past the end of the %zu-byte buffer", n, off,
                 b.len);
    buf_release(&b);
    return NULL;
  }
  if (b.len == 0) {
    /* libasr wraps no empty memory, and a 0-byte transfer touches none:
     * it is posted on a region of our own */
    static char empty_region[8];
    buf_release(&b);
    b.va = empty_region;
    b.len = sizeof empty_region;
  }
  *len = (size_t)n;
  return cache_get(&b);
}

/* One post, as the Comm method that makes it checked it. */
typedef struct {
  int op;                   /* OP_* */
  reg_t *reg;               /* the local side (not for OP_XFER) */
  size_t off, len;          /* in reg's memory */
  RemoteMemoryObject *rmem; /* OP_WRITE, OP_READ */
  size_t roff;              /* in rmem's region */
  uint64_t notif;
  unsigned flags; /* ASR_WRITE_NOTIFY or 0 (OP_WRITE, OP_XFER) */
  XferObject *xfer;
} post_t;

static int post_call(CommObject *c, const post_t *p, asr_request_t **q) {
  switch (p->op) {
    case OP_SEND: return asr_isend(c->comm, p->reg->t, p->off, p->len, q);
    case OP_RECV: return asr_irecv(c->comm, p->reg->t, p->off, p->len, q);
    case OP_WRITE:
      return asr_write(c->comm, p->reg->t, p->off, p->len, p->rmem->rmem, p->roff, p->notif, p->flags, q);
    case OP_READ: return asr_read(c->comm, p->reg->t, p->off, p->len, p->rmem->rmem, p->roff, q);
    case OP_XFER: return asr_xfer_post_flags(p->xfer->x, p->notif, p->flags, q);
    default: assert(!"an op post_call knows"); return ASR_INVALID;
  }
}

/* Posts p on c and returns its Request, which references buffer (what the
 * program posted), and p's import or list. A post that finds 128 requests
 * in flight first tests the ones nobody else references. */
static PyObject *post(CommObject *c, const post_t *p, PyObject *buffer) {
  static const char *const fn[] = {"asr_isend", "asr_irecv", "asr_write", "asr_read", "asr_xfer_post"};
  RequestObject *r = PyObject_New(RequestObject, &RequestType);
  if (!r) return NULL;
  r->comm = NULL;
  r->buffer = NULL;
  r->rmem = NULL;
  r->xfer = NULL;
  asr_request_t *q = NULL;
  if (c->ninflight >= ASR_MAX_REQUESTS) comm_reap(c); /* before libasr says it is full */
  int st = post_call(c, p, &q);
  if (st == ASR_QUEUE_FULL && c->ninflight > 0) {
    comm_reap(c);
    st = post_call(c, p, &q);
  }
  if (st) {
    Py_DECREF(r);
    return raise_status(st, fn[p->op]);
  }
  r->comm = (CommObject *)Py_NewRef(c);
  r->req = q;
  r->op = p->op;
  r->reg = p->reg;
  if (p->reg) p->reg->busy++;
  if (p->rmem) {
    r->rmem = (RemoteMemoryObject *)Py_NewRef(p->rmem);
    p->rmem->users++;
  }
  if (p->xfer) {
    r->xfer = (XferObject *)Py_NewRef(p->xfer);
    p->xfer->posted = 1;
  }
  r->buffer = Py_NewRef(buffer);
  r->offset = p->off;
  r->length = p->len;
  r->nbytes = 0;
  r->state = REQ_POSTED;
  r->status = 0;
  r->waiting = 0;
  /* the comm's reference: a dropped Request still holds its buffer */
  Py_INCREF(r);
  r->prev = NULL;
  r->next = c->inflight;
  if (c->inflight) c->inflight->prev = r;
  c->inflight = r;
  c->ninflight++;
  return (PyObject *)r;
}

static PyObject *comm_post(CommObject *c, PyObject *args, PyObject *kw, int send) {
  static char *kwlist[] = {"buffer", "offset", "length", NULL};
  PyObject *obj, *lenobj = Py_None;
  Py_ssize_t off = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kw, send ? "O|nO:isend" : "O|nO:irecv", kwlist, &obj, &off, &lenobj))
    return NULL;
  if (send != c->send) {
    PyErr_Format(PyExc_ValueError, "%s on a %s comm (made by %s)", send ? "isend" : "irecv",
                 c->send ? "SEND" : "RECV", c->send ? "connect" : "accept");
    return NULL;
  }
  if (check_open(c)) return NULL;
  post_t p = {.op = send ? OP_SEND : OP_RECV, .off = (size_t)off};
  p.reg = local_range(obj, send ? NULL : "irecv", off, lenobj, &p.len);
  if (!p.reg) return NULL;
  return post(c, &p, obj);
}

static PyObject *Comm_isend(CommObject *c, PyObject *args, PyObject *kw) { return comm_post(c, args, kw, 1); }
static PyObject *Comm_irecv(CommObject *c, PyObject *args, PyObject *kw) { return comm_post(c, args, kw, 0); }

/* --- Comm: one-sided transfers ----------------------------------------------------- */

/* One-sided transfers go on the SEND comm to the memory's owner. */
static int check_send(CommObject *c, const char *what) {
  if (c->send) return 0;
  PyErr_Format(PyExc_ValueError,
               "%s on a RECV comm (made by accept): one-sided transfers go on the SEND comm to the memory's "
               "owner (asr.connect)",
               what);
  return -1;
}

/* o as an import of c that is not freed, or NULL with an exception set. */
static RemoteMemoryObject *as_rmem(CommObject *c, PyObject *o) {
  if (!PyObject_TypeCheck(o, &RemoteMemoryType)) {
    PyErr_Format(PyExc_TypeError, "an asr.RemoteMemory (Comm.import_memory) is needed, not %.100s",
                 Py_TYPE(o)->tp_name);
    return NULL;
  }
  RemoteMemoryObject *m = (RemoteMemoryObject *)o;
  if (m->comm != c) {
    PyErr_SetString(PyExc_ValueError, "the RemoteMemory was imported on another comm");
    return NULL;
  }
  if (!m->rmem) {
    PyErr_SetString(PyExc_ValueError, "the RemoteMemory was freed");
    return NULL;
  }
  return m;
}

/* notify=: None (no notification), or an int 0..2**64-1 sent with the data. */
static int as_notify(PyObject *o, uint64_t *notif, unsigned *flags) {
  *notif = 0;
  *flags = 0;
  if (o == Py_None) return 0;
  if (!PyIndex_Check(o)) {
    PyErr_Format(PyExc_TypeError, "notify is None or an int 0..2**64-1, not %.100s", Py_TYPE(o)->tp_name);
    return -1;
  }
  PyObject *i = PyNumber_Index(o);
  if (!i) return -1;
  unsigned long long v = PyLong_AsUnsignedLongLong(i);
  Py_DECREF(i);
  if (v == (unsigned long long)-1 && PyErr_Occurred()) {
    if (!PyErr_ExceptionMatches(PyExc_OverflowError)) return -1;
    PyErr_Clear();
    PyErr_SetString(PyExc_ValueError, "notify is out of range 0..2**64-1");
    return -1;
  }
  *notif = (uint64_t)v;
  *flags = ASR_WRITE_NOTIFY;
  return 0;
}

/* write(src, rmem, ...) / read(dst, rmem, ...). */
static PyObject *comm_rma(CommObject *c, PyObject *args, PyObject *kw, int write) {
  static char *wkw[] = {"src", "rmem", "offset", "length", "remote_offset", "notify", NULL};
  static char *rkw[] = {"dst", "rmem", "offset", "length", "remote_offset", NULL};
  PyObject *obj, *rmo, *lenobj = Py_None, *notify = Py_None;
  Py_ssize_t off = 0, roff = 0;
  int ok = write
               ? PyArg_ParseTupleAndKeywords(args, kw, "OO|nOnO:write", wkw, &obj, &rmo, &off, &lenobj, &roff,
                                             &notify)
               : PyArg_ParseTupleAndKeywords(args, kw, "OO|nOn:read", rkw, &obj, &rmo, &off, &lenobj, &roff);
  if (!ok || check_send(c, write ? "write" : "read")) return NULL;
  post_t p = {.op = write ? OP_WRITE : OP_READ, .off = (size_t)off, .roff = (size_t)roff};
  if (as_notify(notify, &p.notif, &p.flags)) return NULL;
  if (roff < 0) {
    PyErr_Format(PyExc_ValueError, "remote_offset %zd is negative", roff);
    return NULL;
  }
  if (check_open(c) || !(p.rmem = as_rmem(c, rmo))) return NULL;
  p.reg = local_range(obj, write ? NULL : "read", off, lenobj, &p.len);
  if (!p.reg) return NULL;
  return post(c, &p, obj);
}

static PyObject *Comm_write(CommObject *c, PyObject *args, PyObject *kw) { return comm_rma(c, args, kw, 1); }
static PyObject *Comm_read(CommObject *c, PyObject *args, PyObject *kw) { return comm_rma(c, args, kw, 0); }

static PyObject *Comm_import_memory(CommObject *c, PyObject *desc) {
  if (check_send(c, "import_memory")) return NULL;
  if (!PyObject_CheckBuffer(desc)) {
    PyErr_Format(PyExc_TypeError, "a descriptor (bytes, from Memory.export()) is needed, not %.100s",
                 Py_TYPE(desc)->tp_name);
    return NULL;
  }
  Py_buffer v;
  if (PyObject_GetBuffer(desc, &v, PyBUF_SIMPLE) != 0) return NULL;
  if (v.len == 0 || v.len > ASR_MEM_DESC_MAX) {
    PyErr_Format(PyExc_ValueError, "a descriptor has 1..%d bytes, not %zd (Memory.export() makes one)",
                 ASR_MEM_DESC_MAX, v.len);
    PyBuffer_Release(&v);
    return NULL;
  }
  if (check_open(c)) {
    PyBuffer_Release(&v);
    return NULL;
  }
  RemoteMemoryObject *m = PyObject_New(RemoteMemoryObject, &RemoteMemoryType);
  if (!m) {
    PyBuffer_Release(&v);
    return NULL;
  }
  m->comm = NULL;
  m->rmem = NULL;
  m->prev = m->next = NULL;
  m->users = 0;
  int st = asr_mem_import(c->comm, v.buf, (size_t)v.len, &m->rmem);
  PyBuffer_Release(&v);
  if (st) {
    Py_DECREF(m);
    return raise_status(st,
                        "asr_mem_import (a descriptor damaged, of another job, or of another owner than "
                        "the comm's peer)");
  }
  live_imports++;
  m->comm = (CommObject *)Py_NewRef(c);
  m->next = c->imports;
  if (c->imports) c->imports->prev = m;
  c->imports = m;
  return (PyObject *)m;
}

/* notifications(max=256, timeout=0): up to max notifications, oldest first;
 * with a timeout, waits (GIL released) until one arrives. */
static PyObject *Comm_notifications(CommObject *c, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"max", "timeout", NULL};
  Py_ssize_t max = ASR_NOTIF_DEPTH;
  PyObject *tmo = NULL;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "|nO:notifications", kwlist, &max, &tmo)) return NULL;
  if (c->send) {
    PyErr_SetString(PyExc_ValueError,
                    "notifications on a SEND comm: they come to the owner's RECV comm from the writer "
                    "(asr.accept)");
    return NULL;
  }
  if (max < 1) {
    PyErr_Format(PyExc_ValueError, "max %zd is not positive", max);
    return NULL;
  }
  double limit = 0; /* seconds; < 0: no limit */
  if (tmo == Py_None)
    limit = -1;
  else if (tmo) {
    limit = PyFloat_AsDouble(tmo);
    if (limit == -1 && PyErr_Occurred()) return NULL;
    if (limit < 0) limit = 0;
  }
  if (check_open(c)) return NULL;
  uint64_t v[ASR_NOTIF_DEPTH];
  int chunk = max < ASR_NOTIF_DEPTH ? (int)max : ASR_NOTIF_DEPTH, n = 0;
  int st = asr_notif_poll(c->comm, v, chunk, &n);
  if (!st && n == 0 && limit != 0) {
    /* as Request.wait: spin without the GIL for up to ~50 ms, then look at
     * signals and the clock */
    double until = limit > 0 ? now_s() + limit : 0;
    asr_comm_t *ac = c->comm;
    c->waiters++;
    for (;;) {
      Py_BEGIN_ALLOW_THREADS;
      double slice_end = now_s() + 0.05;
      for (unsigned i = 1;; i++) {
        st = asr_notif_poll(ac, v, chunk, &n);
        if (st || n > 0) break;
        if ((i & 255) == 0) {
          double t = now_s();
          if (t >= slice_end || (limit > 0 && t >= until)) break;
        }
      }
      Py_END_ALLOW_THREADS;
      if (st || n > 0 || (limit > 0 && now_s() >= until)) break;
      if (PyErr_CheckSignals()) {
        c->waiters--;
        return NULL; /* nothing was taken */
      }
    }
    c->waiters--;
  }
  if (st) return raise_status(st, "asr_notif_poll");
  PyObject *list = PyList_New(0);
  if (!list) return NULL; /* (the n taken are lost with the memory) */
  for (Py_ssize_t total = 0;;) {
    for (int i = 0; i < n; i++) {
      PyObject *x = PyLong_FromUnsignedLongLong(v[i]);
      if (!x || PyList_Append(list, x) < 0) {
        Py_XDECREF(x);
        Py_DECREF(list);
        return NULL;
      }
      Py_DECREF(x);
    }
    total += n;
    if (n < chunk || total >= max) break;
    chunk = max - total < ASR_NOTIF_DEPTH ? (int)(max - total) : ASR_NOTIF_DEPTH;
    /* a failure here is the next call's to report: these were taken */
    if (asr_notif_poll(c->comm, v, chunk, &n)) break;
  }
  return list;
}

/* prepare(op, entries): a list of (local, offset, length, rmem, remote_offset). */
static PyObject *Comm_prepare(CommObject *c, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"op", "entries", NULL};
  int op;
  PyObject *entries;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "iO:prepare", kwlist, &op, &entries) || check_send(c, "prepare"))
    return NULL;
  if (op != ASR_XFER_WRITE && op != ASR_XFER_READ) {
    PyErr_Format(PyExc_ValueError, "op is asr.XFER_WRITE or asr.XFER_READ, not %d", op);
    return NULL;
  }
  PyObject *t = PySequence_Tuple(entries);
  if (!t) return NULL;
  Py_ssize_t n = PyTuple_GET_SIZE(t);
  if (n < 1 || n > INT_MAX) {
    PyErr_Format(PyExc_ValueError, "a list has 1..%d entries, not %zd", INT_MAX, n);
    Py_DECREF(t);
    return NULL;
  }
  if (check_open(c)) {
    Py_DECREF(t);
    return NULL;
  }
  XferObject *x = PyObject_New(XferObject, &XferType);
  asr_iov_t *local = PyMem_Calloc((size_t)n, sizeof *local);
  asr_riov_t *remote = PyMem_Calloc((size_t)n, sizeof *remote);
  reg_t **regs = PyMem_Calloc((size_t)n, sizeof *regs);
  RemoteMemoryObject **rmems = PyMem_Calloc((size_t)n, sizeof *rmems);
  if (x) {
    x->comm = NULL;
    x->x = NULL;
    x->n = 0;
    x->regs = NULL;
    x->rmems = NULL;
    x->entries = NULL;
    x->prev = x->next = NULL;
  }
  Py_ssize_t i = 0;
  if (!x || !local || !remote || !regs || !rmems) {
    PyErr_NoMemory();
    goto fail;
  }
  size_t total = 0;
  for (; i < n; i++) {
    PyObject *e = PyTuple_GET_ITEM(t, i), *obj, *rmo, *lenobj;
    Py_ssize_t off, roff;
    if (!PyTuple_Check(e) || PyTuple_GET_SIZE(e) != 5) {
      PyErr_SetString(PyExc_TypeError, "it is not a tuple (local, offset, length, rmem, remote_offset)");
      goto bad_entry;
    }
    if (!PyArg_ParseTuple(e, "OnOOn", &obj, &off, &lenobj, &rmo, &roff)) goto bad_entry;
    if (roff < 0) {
      PyErr_Format(PyExc_ValueError, "remote_offset %zd is negative", roff);
      goto bad_entry;
    }
    RemoteMemoryObject *m = as_rmem(c, rmo);
    size_t len = 0;
    reg_t *reg = m ? local_range(obj, op == ASR_XFER_READ ? "read" : NULL, off, lenobj, &len) : NULL;
    if (!reg) goto bad_entry;
    regs[i] = reg;
    reg->busy++;
    rmems[i] = (RemoteMemoryObject *)Py_NewRef(m);
    m->users++;
    local[i] = (asr_iov_t){.tensor = reg->t, .off = (size_t)off, .len = len};
    remote[i] = (asr_riov_t){.rmem = m->rmem, .off = (size_t)roff};
    total += len;
  }
  int st = asr_xfer_prep(c->comm, op, (int)n, local, remote, &x->x);
  if (st) {
    raise_status(st, "asr_xfer_prep");
    goto fail;
  }
  live_lists++;
  PyMem_Free(local);
  PyMem_Free(remote);
  x->comm = (CommObject *)Py_NewRef(c);
  x->op = op;
  x->posted = 0;
  x->n = n;
  x->nbytes = total;
  x->regs = regs;
  x->rmems = rmems;
  x->entries = t;
  x->next = c->xfers;
  if (c->xfers) c->xfers->prev = x;
  c->xfers = x;
  return (PyObject *)x;
bad_entry : {
  /* the same exception, saying which entry before why */
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  PyErr_NormalizeException(&type, &value, &tb);
  PyErr_Format(type, "prepare: entry %zd: %S", i, value);
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(tb);
}
fail:
  while (i-- > 0) {
    regs[i]->busy--;
    rmems[i]->users--;
    Py_DECREF(rmems[i]);
  }
  PyMem_Free(local);
  PyMem_Free(remote);
  PyMem_Free(regs);
  PyMem_Free(rmems);
  Py_XDECREF(x);
  Py_DECREF(t);
  return NULL;
}

static PyObject *Comm_flush(CommObject *c, PyObject *unused) {
  if (check_open(c)) return NULL;
  int st = asr_flush(c->comm);
  if (st) return raise_status(st, "asr_flush");
  Py_RETURN_NONE;
}

static PyObject *Comm_get_status(CommObject *c, void *unused) {
  if (check_open(c)) return NULL;
  int s = 0;
  int st = asr_comm_status(c->comm, &s);
  if (st) return raise_status(st, "asr_comm_status");
  return PyLong_FromLong(s);
}

static PyObject *Comm_get_status_name(CommObject *c, void *unused) {
  if (check_open(c)) return NULL;
  int s = 0;
  int st = asr_comm_status(c->comm, &s);
  if (st) return raise_status(st, "asr_comm_status");
  return PyUnicode_FromString(asr_comm_status_name(s));
}

static PyObject *Comm_get_provider(CommObject *c, void *unused) {
  if (check_open(c)) return NULL;
  const char *p = asr_comm_provider(c->comm);
  if (!p) Py_RETURN_NONE;
  return PyUnicode_FromString(p);
}

static PyObject *Comm_get_error(CommObject *c, void *unused) {
  if (check_open(c)) return NULL;
  const char *e = asr_comm_error(c->comm);
  if (!e) Py_RETURN_NONE;
  return PyUnicode_FromString(e);
}

static PyObject *Comm_get_closed(CommObject *c, void *unused) { return PyBool_FromLong(!comm_alive(c)); }
static PyObject *Comm_get_pending(CommObject *c, void *unused) { return PyLong_FromLong(c->ninflight); }

static PyObject *Comm_wait_connected(CommObject *c, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"timeout", NULL};
  PyObject *tmo = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "|O:wait_connected", kwlist, &tmo)) return NULL;
  double limit = -1;
  if (tmo != Py_None) {
    limit = PyFloat_AsDouble(tmo);
    if (limit == -1 && PyErr_Occurred()) return NULL;
    if (limit < 0) limit = 0;
  }
  if (check_open(c)) return NULL;
  double until = limit >= 0 ? now_s() + limit : 0;
  int st;
  c->waiters++;
  for (;;) {
    /* in slices of 100 ms, to see signals */
    int ms = 100;
    if (limit >= 0) {
      double left = until - now_s();
      ms = left <= 0 ? 0 : left < 0.1 ? (int)(left * 1000) + 1 : 100;
    }
    Py_BEGIN_ALLOW_THREADS;
    st = asr_comm_wait_connected(c->comm, ms);
    Py_END_ALLOW_THREADS;
    if (st != ASR_TIMEOUT) break;
    if (limit >= 0 && now_s() >= until) break;
    if (PyErr_CheckSignals()) {
      c->waiters--;
      return NULL;
    }
  }
  c->waiters--;
  if (st) return raise_status(st, "asr_comm_wait_connected");
  Py_RETURN_NONE;
}

static PyObject *Comm_close(CommObject *c, PyObject *unused) {
  if (c->state == COMM_OPEN && c->gen != lnc_gen[c->lnc]) comm_closed(c);
  if (c->state == COMM_CLOSED) Py_RETURN_NONE;
  if (c->state == COMM_CLOSING || c->waiters > 0) {
    PyErr_SetString(PyExc_RuntimeError,
                    c->state == COMM_CLOSING
                        ? "another thread is closing this comm"
                        : "another thread waits on a request, connect or notifications of this comm");
    return NULL;
  }
  /* one-sided requests that completed no longer hold their imports or
   * lists, which are then freed before the comm they were made on */
  for (RequestObject *r = c->inflight, *n; r; r = n) {
    n = r->next;
    if (r->rmem || r->xfer) (void)req_poll(r);
  }
  comm_release_one_sided(c);
  c->state = COMM_CLOSING;
  asr_comm_t *ac = c->comm;
  int st;
  Py_BEGIN_ALLOW_THREADS;
  st = asr_comm_close(ac);
  Py_END_ALLOW_THREADS;
  comm_closed(c);
  if (st) return raise_status(st, "asr_comm_close");
  Py_RETURN_NONE;
}

static PyObject *Comm_enter(CommObject *c, PyObject *unused) { return Py_NewRef(c); }
static PyObject *Comm_exit(CommObject *c, PyObject *args) { return Comm_close(c, NULL); }

static PyObject *Comm_repr(CommObject *c) {
  if (c->peer_rank >= 0)
    return PyUnicode_FromFormat("<asr.Comm %s rank %d (%s lnc %d)%s>", c->send ? "to" : "from", c->peer_rank,
                                c->peer_ip, c->peer_lnc, comm_alive(c) ? "" : " closed");
  return PyUnicode_FromFormat("<asr.Comm lnc %d %s %s lnc %d%s>", c->lnc, c->send ? "to" : "from", c->peer_ip,
                              c->peer_lnc, comm_alive(c) ? "" : " closed");
}

static PyMethodDef Comm_methods[] = {
    {"isend", (PyCFunction)(void (*)(void))Comm_isend, METH_VARARGS | METH_KEYWORDS,
     "isend(buffer, offset=0, length=None) -> Request\n\nPosts a send of length bytes (default: to the end) "
     "at offset bytes into buffer: any C-contiguous buffer-protocol object (numpy array, bytearray, "
     "memoryview, bytes) or CPU torch tensor. The n-th send of a comm matches the n-th receive of its peer. "
     "Do not change the bytes until the request completed. Raises ValueError or TypeError for a buffer that "
     "cannot be posted (before anything is posted), asr.Unconnected before the comm is connected, "
     "asr.QueueFull with 128 requests in flight."},
    {"irecv", (PyCFunction)(void (*)(void))Comm_irecv, METH_VARARGS | METH_KEYWORDS,
     "irecv(buffer, offset=0, length=None) -> Request\n\nPosts a receive into length bytes at offset bytes "
     "into buffer, which must be writable (a read-only buffer is a ValueError). wait() returns the bytes "
     "that "
     "arrived. Otherwise as isend."},
    {"import_memory", (PyCFunction)Comm_import_memory, METH_O,
     "import_memory(desc) -> RemoteMemory\n\nImports a peer's descriptor (Memory.export() there) on "
     "this SEND comm, whose peer must be the memory's owner, for write, read and prepare. asr.Error (status "
     "asr.INVALID) for a descriptor that is damaged, of another job, or of another owner."},
    {"write", (PyCFunction)(void (*)(void))Comm_write, METH_VARARGS | METH_KEYWORDS,
     "write(src, rmem, offset=0, length=None, remote_offset=0, notify=None) -> Request\n\nWrites "
     "length bytes (default: to the end) at offset bytes into src (as isend's buffer) to remote_offset bytes "
     "into the "
     "peer's memory rmem (imported on this comm), without the peer posting anything. With notify (an int "
     "0..2**64-1) the peer's RECV comm from this rank delivers it (Comm.notifications) after the data, and "
     "after every earlier write's. A completed request's data is in the peer's memory. A write outside the "
     "region, or that its access does not grant, is asr.Error (status asr.INVALID; nothing is sent). "
     "Otherwise as isend: src stays referenced until the request finishes."},
    {"read", (PyCFunction)(void (*)(void))Comm_read, METH_VARARGS | METH_KEYWORDS,
     "read(dst, rmem, offset=0, length=None, remote_offset=0) -> Request\n\nReads length bytes at "
     "remote_offset bytes into the peer's memory rmem into offset bytes into dst (writable); it sees every "
     "write posted before it on this comm. Otherwise as write."},
    {"prepare", (PyCFunction)(void (*)(void))Comm_prepare, METH_VARARGS | METH_KEYWORDS,
     "prepare(op, entries) -> Xfer\n\nPrepares a list of writes (op asr.XFER_WRITE: local to remote) "
     "or reads (asr.XFER_READ: remote into local) on this SEND comm, each entry a tuple (local, offset, "
     "length, rmem, "
     "remote_offset) as write's arguments (length None: to the end of local), checked once here; "
     "Xfer.post() then moves them all as one request."},
    {"notifications", (PyCFunction)(void (*)(void))Comm_notifications, METH_VARARGS | METH_KEYWORDS,
     "notifications(max=256, timeout=0) -> list of int\n\nTakes up to max of the notifications that writes "
     "from this RECV comm's peer delivered, oldest first (in the order the writes were posted, each after "
     "its data landed here). timeout=0 looks once and may return []; a number of seconds, or None (no "
     "limit), waits (GIL released) until at least one arrived, returning [] when the time passed first. A "
     "comm holds asr.NOTIF_DEPTH not yet taken; beyond that the writer's notifying writes wait."},
    {"flush", (PyCFunction)Comm_flush, METH_NOARGS,
     "flush()\n\nThe read-after-receive fence of a RECV comm: returns once the data of every completed "
     "receive is visible to the host."},
    {"wait_connected", (PyCFunction)(void (*)(void))Comm_wait_connected, METH_VARARGS | METH_KEYWORDS,
     "wait_connected(timeout=None)\n\nWaits (GIL released) until the comm is CONNECTED. Raises asr.Timeout "
     "when timeout seconds pass first, asr.ConnError when it failed."},
    {"close", (PyCFunction)Comm_close, METH_NOARGS,
     "close()\n\nCloses the comm (asr_comm_close: a SEND comm first waits, bounded, until its peer took "
     "what it sent). Requests still in flight are cancelled. Closing twice does nothing."},
    {"__enter__", (PyCFunction)Comm_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)Comm_exit, METH_VARARGS, NULL},
    {0},
};

static PyMemberDef Comm_members[] = {
    {"lnc", T_INT, offsetof(CommObject, lnc), READONLY, "this side's LNC"},
    {"peer_lnc", T_INT, offsetof(CommObject, peer_lnc), READONLY, "the peer's LNC"},
    {"peer_rank", T_INT, offsetof(CommObject, peer_rank), READONLY,
     "the peer's rank, or -1 (made by address)"},
    {"is_send", T_INT, offsetof(CommObject, send), READONLY,
     "1 for a SEND comm (connect), 0 for RECV (accept)"},
    {0},
};

static PyObject *Comm_get_peer_ip(CommObject *c, void *unused) { return PyUnicode_FromString(c->peer_ip); }

static PyGetSetDef Comm_getset[] = {
    {"status", (getter)Comm_get_status, NULL, "the connect state, one of asr.COMM_* (6: COMM_CONNECTED)",
     NULL},
    {"status_name", (getter)Comm_get_status_name, NULL, "the connect state's name, e.g. 'CONNECTED'", NULL},
    {"provider", (getter)Comm_get_provider, NULL,
     "what carries its data (asr_comm_provider): 'sm', asr's own path, to a peer on this host, "
     "'tcp;ofi_rxm' across hosts, or the libfabric provider ASR_PROVIDER forces ('shm' is libfabric's); "
     "None until its path is chosen",
     NULL},
    {"error", (getter)Comm_get_error, NULL,
     "why it is CONNECTION_ERROR, in one line (asr_comm_error); None while it is not", NULL},
    {"closed", (getter)Comm_get_closed, NULL, "whether it is closed (or its LNC is)", NULL},
    {"pending", (getter)Comm_get_pending, NULL, "requests posted on it and not finished", NULL},
    {"peer_ip", (getter)Comm_get_peer_ip, NULL, "the peer's address", NULL},
    {0},
};

static PyTypeObject CommType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "asr.Comm",
    .tp_basicsize = sizeof(CommObject),
    .tp_dealloc = (destructor)Comm_dealloc,
    .tp_repr = (reprfunc)Comm_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc =
        "A one-way channel to or from a peer: a SEND comm (asr.connect) posts isend, and one-sided writes "
        "and reads of the peer's registered memory (import_memory, write, read, prepare); a RECV comm "
        "(asr.accept) irecv, and takes the notifications of the peer's writes (notifications). A context "
        "manager: leaving the with block closes it.",
    .tp_methods = Comm_methods,
    .tp_members = Comm_members,
    .tp_getset = Comm_getset,
};

/* --- module functions: LNCs, comms ------------------------------------------------ */

/* An int argument; -1 with an exception when it is not one (or too big). */
static int as_int(PyObject *o) {
  long v = PyLong_AsLong(o);
  if (v == -1 && PyErr_Occurred()) return -1;
  if (v < INT_MIN || v > INT_MAX) {
    PyErr_SetString(PyExc_OverflowError, "the number is out of range");
    return -1;
  }
  return (int)v;
}

static int check_lnc(int lnc) {
  if (lnc < 0 || lnc >= ASR_MAX_LNC) {
    PyErr_Format(PyExc_ValueError, "LNC %d is out of range 0..%d", lnc, ASR_MAX_LNC - 1);
    return -1;
  }
  return 0;
}

/* --- one-sided objects: Memory, RemoteMemory, Xfer ------------------------------ */

static PyObject *Memory_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"lnc", "buffer", "access", NULL};
  int lnc, access;
  PyObject *obj;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "iOi:Memory", kwlist, &lnc, &obj, &access) || check_lnc(lnc))
    return NULL;
  if (access == 0 || (access & ~(int)(ASR_MEM_REMOTE_READ | ASR_MEM_REMOTE_WRITE))) {
    PyErr_Format(PyExc_ValueError, "access is asr.MEM_REMOTE_READ, asr.MEM_REMOTE_WRITE or both (|), not %d",
                 access);
    return NULL;
  }
  buf_t b;
  if (get_buf(obj, access & ASR_MEM_REMOTE_WRITE ? "MEM_REMOTE_WRITE" : NULL, &b)) return NULL;
  if (b.len == 0) {
    buf_release(&b);
    PyErr_SetString(PyExc_ValueError, "the buffer is empty: there is nothing to register");
    return NULL;
  }
  MemoryObject *m = (MemoryObject *)type->tp_alloc(type, 0);
  if (!m) {
    buf_release(&b);
    return NULL;
  }
  int st = asr_mem_register(lnc, b.va, b.len, (unsigned)access, &m->mem);
  if (st) {
    buf_release(&b);
    Py_DECREF(m);
    return raise_status(st, "asr_mem_register (is the LNC up? asr.init(lnc), or a connect/accept by rank)");
  }
  /* the hold moves into m: its exporter is referenced until deregistration */
  m->hold = b;
  m->buffer = Py_NewRef(obj);
  m->lnc = lnc;
  m->access = (unsigned)access;
  m->len = b.len;
  m->lprev = NULL;
  m->lnext = mems;
  if (mems) mems->lprev = m;
  mems = m;
  return (PyObject *)m;
}

static void Memory_dealloc(MemoryObject *m) {
  if (m->mem) (void)mem_deregister(m);
  Py_TYPE(m)->tp_free((PyObject *)m);
}

static PyObject *Memory_deregister(MemoryObject *m, PyObject *unused) {
  if (!m->mem) Py_RETURN_NONE;
  int st = mem_deregister(m);
  if (st) return raise_status(st, "asr_mem_deregister");
  Py_RETURN_NONE;
}

static PyObject *Memory_export(MemoryObject *m, PyObject *unused) {
  if (!m->mem) {
    PyErr_SetString(PyExc_ValueError, "the memory was deregistered");
    return NULL;
  }
  unsigned char desc[ASR_MEM_DESC_MAX];
  size_t n = sizeof desc;
  int st = asr_mem_export(m->mem, desc, &n);
  if (st) return raise_status(st, "asr_mem_export");
  return PyBytes_FromStringAndSize((const char *)desc, (Py_ssize_t)n);
}

static PyObject *Memory_enter(MemoryObject *m, PyObject *unused) { return Py_NewRef(m); }
static PyObject *Memory_exit(MemoryObject *m, PyObject *args) { return Memory_deregister(m, NULL); }

static PyObject *Memory_get_registered(MemoryObject *m, void *unused) {
  return PyBool_FromLong(m->mem != NULL);
}
static PyObject *Memory_get_buffer(MemoryObject *m, void *unused) {
  return Py_NewRef(m->buffer ? m->buffer : Py_None);
}

static PyObject *Memory_repr(MemoryObject *m) {
  return PyUnicode_FromFormat("<asr.Memory lnc %d, %zu bytes, %s%s>", m->lnc, m->len,
                              m->access == ASR_MEM_REMOTE_READ    ? "read"
                              : m->access == ASR_MEM_REMOTE_WRITE ? "write"
                                                                  : "read|write",
                              m->mem ? "" : ", deregistered");
}

static PyMethodDef Memory_methods[] = {
    {"export", (PyCFunction)Memory_export, METH_NOARGS,
     "export() -> bytes\n\nThe descriptor of the registration (at most asr.MEM_DESC_MAX bytes), for the peer "
     "to pass to Comm.import_memory on its SEND comm to this process (send it any way: isend, a file, "
     "...). It grants exactly this memory and this access, to ranks of this job only."},
    {"deregister", (PyCFunction)Memory_deregister, METH_NOARGS,
     "deregister()\n\nRevokes the registration: once it returns no peer's later write or read reaches the "
     "memory (it fails at the peer), and the buffer is no longer referenced. Twice does nothing."},
    {"close", (PyCFunction)Memory_deregister, METH_NOARGS, "close()\n\nThe same as deregister()."},
    {"__enter__", (PyCFunction)Memory_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)Memory_exit, METH_VARARGS, NULL},
    {0},
};

static PyMemberDef Memory_members[] = {
    {"lnc", T_INT, offsetof(MemoryObject, lnc), READONLY, "the LNC it is registered on"},
    {"access", T_UINT, offsetof(MemoryObject, access), READONLY,
     "what peers may do: asr.MEM_REMOTE_READ, asr.MEM_REMOTE_WRITE, or both"},
    {"nbytes", T_PYSSIZET, offsetof(MemoryObject, len), READONLY, "the size of the region in bytes"},
    {0},
};

static PyGetSetDef Memory_getset[] = {
    {"registered", (getter)Memory_get_registered, NULL, "whether it is registered still", NULL},
    {"buffer", (getter)Memory_get_buffer, NULL, "the object registered (None once deregistered)", NULL},
    {0},
};

static PyTypeObject MemoryType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "asr.Memory",
    .tp_basicsize = sizeof(MemoryObject),
    .tp_dealloc = (destructor)Memory_dealloc,
    .tp_repr = (reprfunc)Memory_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc =
        "Memory(lnc, buffer, access) -> Memory\n\nRegisters buffer (a C-contiguous buffer-protocol object "
        "or a CPU torch tensor; writable for asr.MEM_REMOTE_WRITE) on LNC lnc, which must be up (asr.init, "
        "or a "
        "connect/accept by rank), for one-sided access by peers: access is asr.MEM_REMOTE_READ, "
        "asr.MEM_REMOTE_WRITE or both. The buffer stays referenced, and its memory must keep its place (no "
        "numpy resize, no torch resize_), until deregister(); a context manager: leaving the with block "
        "deregisters it, as closing its LNC (asr.close, asr.finalize) does.",
    .tp_methods = Memory_methods,
    .tp_members = Memory_members,
    .tp_getset = Memory_getset,
    .tp_new = Memory_new,
};

static void RemoteMemory_dealloc(RemoteMemoryObject *m) {
  /* (no request in flight or list uses it: each holds a reference) */
  if (m->rmem) rmem_release(m);
  Py_XDECREF(m->comm);
  Py_TYPE(m)->tp_free((PyObject *)m);
}

static PyObject *RemoteMemory_free(RemoteMemoryObject *m, PyObject *unused) {
  if (!m->rmem) Py_RETURN_NONE;
  if (m->users > 0 && comm_alive(m->comm))
    comm_reap(m->comm); /* requests the program dropped may have completed */
  if (m->users > 0) {
    PyErr_SetString(PyExc_RuntimeError,
                    "a write or read on this import is in flight, or a prepared list (Xfer) uses it");
    return NULL;
  }
  rmem_release(m);
  Py_RETURN_NONE;
}

static PyObject *RemoteMemory_enter(RemoteMemoryObject *m, PyObject *unused) { return Py_NewRef(m); }
static PyObject *RemoteMemory_exit(RemoteMemoryObject *m, PyObject *args) {
  return RemoteMemory_free(m, NULL);
}

static PyObject *RemoteMemory_get_freed(RemoteMemoryObject *m, void *unused) {
  return PyBool_FromLong(m->rmem == NULL);
}
static PyObject *RemoteMemory_get_comm(RemoteMemoryObject *m, void *unused) { return Py_NewRef(m->comm); }

static PyObject *RemoteMemory_repr(RemoteMemoryObject *m) {
  return PyUnicode_FromFormat("<asr.RemoteMemory on %R%s>", m->comm, m->rmem ? "" : ", freed");
}

static PyMethodDef RemoteMemory_methods[] = {
    {"free", (PyCFunction)RemoteMemory_free, METH_NOARGS,
     "free()\n\nFrees the import (never the owner's registration). RuntimeError while a write or read on it "
     "is in flight or a prepared list uses it. Twice does nothing; closing its comm frees it."},
    {"__enter__", (PyCFunction)RemoteMemory_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)RemoteMemory_exit, METH_VARARGS, NULL},
    {0},
};

static PyGetSetDef RemoteMemory_getset[] = {
    {"freed", (getter)RemoteMemory_get_freed, NULL, "whether it was freed (or its comm closed)", NULL},
    {"comm", (getter)RemoteMemory_get_comm, NULL, "the SEND comm it was imported on", NULL},
    {0},
};

static PyTypeObject RemoteMemoryType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "asr.RemoteMemory",
    .tp_basicsize = sizeof(RemoteMemoryObject),
    .tp_dealloc = (destructor)RemoteMemory_dealloc,
    .tp_repr = (reprfunc)RemoteMemory_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc =
        "A peer's memory, imported on a SEND comm to it (made by Comm.import_memory), for Comm.write, "
        "Comm.read and Comm.prepare on that comm. A context manager: leaving the with block frees it.",
    .tp_methods = RemoteMemory_methods,
    .tp_getset = RemoteMemory_getset,
};

static void Xfer_dealloc(XferObject *x) {
  /* (no post in flight: its request holds a reference) */
  if (x->x) xfer_release(x);
  Py_XDECREF(x->entries);
  Py_XDECREF(x->comm);
  PyObject_Free(x);
}

static PyObject *Xfer_post(XferObject *x, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"notify", NULL};
  PyObject *notify = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "|O:post", kwlist, &notify)) return NULL;
  post_t p = {.op = OP_XFER, .xfer = x, .len = x->nbytes};
  if (as_notify(notify, &p.notif, &p.flags)) return NULL;
  if (x->op == ASR_XFER_READ && p.flags) {
    PyErr_SetString(PyExc_ValueError, "a read list delivers no notification (notify=None)");
    return NULL;
  }
  if (check_open(x->comm)) return NULL;
  if (!x->x) {
    PyErr_SetString(PyExc_ValueError, "the list was freed");
    return NULL;
  }
  if (x->posted) comm_reap(x->comm); /* (open: checked above) */
  if (x->posted) {
    PyErr_SetString(PyExc_RuntimeError, "a post of this list is in flight: wait for its request first");
    return NULL;
  }
  return post(x->comm, &p, (PyObject *)x);
}

static PyObject *Xfer_free(XferObject *x, PyObject *unused) {
  if (!x->x) Py_RETURN_NONE;
  if (x->posted && comm_alive(x->comm))
    comm_reap(x->comm); /* its post's request may be dropped, and complete */
  if (x->posted) {
    PyErr_SetString(PyExc_RuntimeError, "a post of this list is in flight");
    return NULL;
  }
  xfer_release(x);
  Py_RETURN_NONE;
}

static PyObject *Xfer_enter(XferObject *x, PyObject *unused) { return Py_NewRef(x); }
static PyObject *Xfer_exit(XferObject *x, PyObject *args) { return Xfer_free(x, NULL); }

static PyObject *Xfer_get_freed(XferObject *x, void *unused) { return PyBool_FromLong(x->x == NULL); }
static PyObject *Xfer_get_entries(XferObject *x, void *unused) {
  return Py_NewRef(x->entries ? x->entries : Py_None);
}

static PyObject *Xfer_repr(XferObject *x) {
  return PyUnicode_FromFormat("<asr.Xfer %s, %zu bytes%s>", x->op == ASR_XFER_WRITE ? "write" : "read",
                              x->nbytes, x->x ? "" : ", freed");
}

static PyMethodDef Xfer_methods[] = {
    {"post", (PyCFunction)(void (*)(void))Xfer_post, METH_VARARGS | METH_KEYWORDS,
     "post(notify=None) -> Request\n\nPosts every entry as one request. A write list with notify (an int "
     "0..2**64-1) delivers it once, after all of its data. RuntimeError while the previous post is in flight "
     "(wait for its request)."},
    {"free", (PyCFunction)Xfer_free, METH_NOARGS,
     "free()\n\nFrees the list, and lets go of its buffers and imports. RuntimeError while a post is in "
     "flight. Twice does nothing; closing its comm frees it."},
    {"__enter__", (PyCFunction)Xfer_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)Xfer_exit, METH_VARARGS, NULL},
    {0},
};

static PyMemberDef Xfer_members[] = {
    {"op", T_INT, offsetof(XferObject, op), READONLY, "asr.XFER_WRITE or asr.XFER_READ"},
    {"nbytes", T_PYSSIZET, offsetof(XferObject, nbytes), READONLY, "the bytes one post moves"},
    {0},
};

static PyGetSetDef Xfer_getset[] = {
    {"freed", (getter)Xfer_get_freed, NULL, "whether it was freed (or its comm closed)", NULL},
    {"entries", (getter)Xfer_get_entries, NULL, "the entries it was prepared with (a tuple)", NULL},
    {0},
};

static PyTypeObject XferType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "asr.Xfer",
    .tp_basicsize = sizeof(XferObject),
    .tp_dealloc = (destructor)Xfer_dealloc,
    .tp_repr = (reprfunc)Xfer_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc =
        "A prepared list of writes or reads on one SEND comm (made by Comm.prepare), each entry checked "
        "once; "
        "post() moves them all as one request, as often as needed. It holds its buffers and imports until "
        "freed. A context manager: leaving the with block frees it.",
    .tp_methods = Xfer_methods,
    .tp_members = Xfer_members,
    .tp_getset = Xfer_getset,
};

static PyObject *mod_init(PyObject *m, PyObject *args) {
  int lnc;
  if (!PyArg_ParseTuple(args, "i:init", &lnc) || check_lnc(lnc)) return NULL;
  int st;
  Py_BEGIN_ALLOW_THREADS;
  st = asr_init(lnc);
  Py_END_ALLOW_THREADS;
  if (st) return raise_status(st, "asr_init");
  lnc_user[lnc] = 1;
  Py_RETURN_NONE;
}

static PyObject *mod_close(PyObject *m, PyObject *args) {
  int lnc;
  if (!PyArg_ParseTuple(args, "i:close", &lnc) || check_lnc(lnc) || lnc_close_begin(lnc)) return NULL;
  int st;
  Py_BEGIN_ALLOW_THREADS;
  st = asr_close(lnc);
  Py_END_ALLOW_THREADS;
  lnc_close_end(lnc);
  if (st) return raise_status(st, "asr_close");
  Py_RETURN_NONE;
}

/* connect / accept: (rank) through the job view, or (peer_ip, peer_lnc, lnc=). */
static PyObject *make_comm(PyObject *args, PyObject *kw, int send) {
  static char *kwlist[] = {"peer", "peer_lnc", "lnc", NULL};
  PyObject *peer, *peer_lnc_o = Py_None, *lnc_o = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kw, send ? "O|OO:connect" : "O|OO:accept", kwlist, &peer,
                                   &peer_lnc_o, &lnc_o))
    return NULL;
  const char *fn = send ? "asr_connect" : "asr_accept";
  asr_comm_t *ac = NULL;
  int st;
  if (PyLong_Check(peer)) {
    if (peer_lnc_o != Py_None || lnc_o != Py_None) {
      PyErr_SetString(PyExc_TypeError, "by rank: connect(rank) / accept(rank) take no LNCs");
      return NULL;
    }
    if (job_active < 0) {
      PyErr_SetString(AsrError, "connect/accept by rank needs asr.job_init() first (run under asrrun)");
      return NULL;
    }
    int rank = as_int(peer);
    if (rank == -1 && PyErr_Occurred()) return NULL;
    char addr[64];
    int plnc;
    st = asr_job_peer(rank, addr, sizeof addr, &plnc);
    if (st) return raise_status(st, "asr_job_peer");
    st = send ? asr_job_connect(rank, &ac) : asr_job_accept(rank, &ac);
    if (st) return raise_status(st, send ? "asr_job_connect" : "asr_job_accept");
    return (PyObject *)comm_new(ac, send, job_active, addr, plnc, rank);
  }
  if (!PyUnicode_Check(peer)) {
    PyErr_SetString(PyExc_TypeError, "peer is a rank (int) or an address (str)");
    return NULL;
  }
  if (peer_lnc_o == Py_None || lnc_o == Py_None) {
    PyErr_SetString(PyExc_TypeError, "by address: connect(peer_ip, peer_lnc, lnc=LNC)");
    return NULL;
  }
  const char *ip = PyUnicode_AsUTF8(peer);
  int plnc = as_int(peer_lnc_o), lnc = as_int(lnc_o);
  if (!ip || PyErr_Occurred() || check_lnc(lnc) || check_lnc(plnc)) return NULL;
  st = send ? asr_connect(lnc, ip, plnc, &ac) : asr_accept(lnc, ip, plnc, &ac);
  if (st) return raise_status(st, fn);
  return (PyObject *)comm_new(ac, send, lnc, ip, plnc, -1);
}

static PyObject *mod_connect(PyObject *m, PyObject *args, PyObject *kw) { return make_comm(args, kw, 1); }
static PyObject *mod_accept(PyObject *m, PyObject *args, PyObject *kw) { return make_comm(args, kw, 0); }

static PyObject *mod_strerror(PyObject *m, PyObject *args) {
  int st;
  if (!PyArg_ParseTuple(args, "i:strerror", &st)) return NULL;
  return PyUnicode_FromString(asr_strerror(st));
}

static PyObject *mod_comm_status_name(PyObject *m, PyObject *args) {
  int st;
  if (!PyArg_ParseTuple(args, "i:comm_status_name", &st)) return NULL;
  return PyUnicode_FromString(asr_comm_status_name(st));
}

static PyObject *mod_forget(PyObject *m, PyObject *obj) {
  buf_t b;
  if (get_buf(obj, NULL, &b)) return NULL;
  for (reg_t *r = cache_head, *n; r; r = n) {
    n = r->next;
    if (r->va >= b.va && r->va + r->len <= b.va + b.len) {
      if (r->busy > 0 || region_busy(r)) {
        buf_release(&b);
        PyErr_SetString(PyExc_RuntimeError,
                        "a request on this memory is in flight, or a prepared list (Xfer) holds it");
        return NULL;
      }
      reg_drop(r);
    }
  }
  buf_release(&b);
  Py_RETURN_NONE;
}

static PyObject *mod_cache_info(PyObject *m, PyObject *unused) {
  long busy = 0;
  for (reg_t *r = cache_head; r; r = r->next) busy += r->busy > 0;
  long nmems = 0;
  for (MemoryObject *o = mems; o; o = o->lnext) nmems++;
  return Py_BuildValue("{s:l,s:l,s:i,s:l,s:l,s:l}", "records", cache_n, "busy", busy, "idle_max",
                       CACHE_IDLE_MAX, "imports", live_imports, "lists", live_lists, "memories", nmems);
}

/* --- the job view ------------------------------------------------------------------ */

typedef struct {
  PyObject_HEAD asr_job_info_t info;
} JobInfoObject;

static PyObject *mod_finalize(PyObject *m, PyObject *unused);

static PyObject *JobInfo_repr(JobInfoObject *j) {
  return PyUnicode_FromFormat(
      "asr.JobInfo(rank=%d, size=%d, lnc=%d, local_rank=%d, local_size=%d, "
      "hostname='%s', addr='%s', bootstrap_port=%d)",
      j->info.rank, j->info.size, j->info.lnc, j->info.local_rank, j->info.local_size, j->info.hostname,
      j->info.addr, j->info.bootstrap_port);
}

static PyObject *JobInfo_enter(JobInfoObject *j, PyObject *unused) { return Py_NewRef(j); }
static PyObject *JobInfo_exit(JobInfoObject *j, PyObject *args) {
  if (job_active < 0) Py_RETURN_NONE; /* finalized in the block */
  return mod_finalize(NULL, NULL);
}

static PyObject *JobInfo_get_hostname(JobInfoObject *j, void *u) {
  return PyUnicode_FromString(j->info.hostname);
}
static PyObject *JobInfo_get_addr(JobInfoObject *j, void *u) { return PyUnicode_FromString(j->info.addr); }

static PyMemberDef JobInfo_members[] = {
    {"rank", T_INT, offsetof(JobInfoObject, info.rank), READONLY, "this rank"},
    {"size", T_INT, offsetof(JobInfoObject, info.size), READONLY, "the job's rank count"},
    {"lnc", T_INT, offsetof(JobInfoObject, info.lnc), READONLY, "this rank's LNC on its host"},
    {"local_rank", T_INT, offsetof(JobInfoObject, info.local_rank), READONLY, "this rank among its host's"},
    {"local_size", T_INT, offsetof(JobInfoObject, info.local_size), READONLY, "the ranks on this host"},
    {"bootstrap_port", T_INT, offsetof(JobInfoObject, info.bootstrap_port), READONLY, "the KV servers' port"},
    {0},
};

static PyGetSetDef JobInfo_getset[] = {
    {"hostname", (getter)JobInfo_get_hostname, NULL, "this host's name", NULL},
    {"addr", (getter)JobInfo_get_addr, NULL, "the address peers reach this rank at", NULL},
    {0},
};

static PyMethodDef JobInfo_methods[] = {
    {"__enter__", (PyCFunction)JobInfo_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)JobInfo_exit, METH_VARARGS, "leaving the with block finalizes the job"},
    {0},
};

static PyTypeObject JobInfoType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "asr.JobInfo",
    .tp_basicsize = sizeof(JobInfoObject),
    .tp_repr = (reprfunc)JobInfo_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc =
        "What a rank knows about itself (asr.job_init()). A context manager: leaving the with block "
        "calls asr.finalize().",
    .tp_members = JobInfo_members,
    .tp_getset = JobInfo_getset,
    .tp_methods = JobInfo_methods,
};

static PyObject *mod_job_init(PyObject *m, PyObject *unused) {
  JobInfoObject *j = PyObject_New(JobInfoObject, &JobInfoType);
  if (!j) return NULL;
  int st;
  Py_BEGIN_ALLOW_THREADS;
  st = asr_job_init(&j->info);
  Py_END_ALLOW_THREADS;
  if (st) {
    Py_DECREF(j);
    return raise_status(st, "asr_job_init (is the program started by asrrun?)");
  }
  job_active = j->info.lnc;
  return (PyObject *)j;
}

static int check_job(void) {
  if (job_active < 0) {
    PyErr_SetString(AsrError, "call asr.job_init() first (and run under asrrun)");
    return -1;
  }
  return 0;
}

static PyObject *mod_job_peer(PyObject *m, PyObject *args) {
  int rank, lnc;
  char addr[64];
  if (!PyArg_ParseTuple(args, "i:peer", &rank) || check_job()) return NULL;
  int st = asr_job_peer(rank, addr, sizeof addr, &lnc);
  if (st) return raise_status(st, "asr_job_peer");
  return Py_BuildValue("(si)", addr, lnc);
}

static PyObject *mod_barrier(PyObject *m, PyObject *unused) {
  if (check_job()) return NULL;
  int st;
  Py_BEGIN_ALLOW_THREADS;
  st = asr_job_barrier();
  Py_END_ALLOW_THREADS;
  if (st) return raise_status(st, "asr_job_barrier");
  Py_RETURN_NONE;
}

static PyObject *mod_job_rank_state(PyObject *m, PyObject *args) {
  int rank, state, inc;
  if (!PyArg_ParseTuple(args, "i:rank_state", &rank) || check_job()) return NULL;
  int st = asr_job_rank_state(rank, &state, &inc);
  if (st) return raise_status(st, "asr_job_rank_state");
  return Py_BuildValue("(ii)", state, inc);
}

static PyObject *mod_abort(PyObject *m, PyObject *args) {
  int status = 1;
  const char *msg = "asr.abort";
  if (!PyArg_ParseTuple(args, "|is:abort", &status, &msg) || check_job()) return NULL;
  int st;
  Py_BEGIN_ALLOW_THREADS;
  st = asr_job_abort(status, msg);
  Py_END_ALLOW_THREADS;
  if (st) return raise_status(st, "asr_job_abort");
  Py_RETURN_NONE;
}

static PyObject *mod_finalize(PyObject *m, PyObject *unused) {
  if (check_job()) return NULL;
  int lnc = job_active;
  /* finalize closes the job's LNC when asr_job_* brought it up */
  int closes = !lnc_user[lnc];
  if (closes && lnc_close_begin(lnc)) return NULL;
  int st;
  Py_BEGIN_ALLOW_THREADS;
  st = asr_job_finalize();
  Py_END_ALLOW_THREADS;
  if (closes) lnc_close_end(lnc);
  job_active = -1;
  if (st) return raise_status(st, "asr_job_finalize");
  Py_RETURN_NONE;
}

static PyMethodDef mod_methods[] = {
    {"job_init", mod_job_init, METH_NOARGS,
     "job_init() -> JobInfo\n\nJoins the job (the program runs under asrrun, or srun --mpi=pmix): learns "
     "rank, "
     "size, LNC and host, and publishes this rank's address. Use as `with asr.job_init() as job:` to "
     "finalize on leaving the block."},
    {"peer", mod_job_peer, METH_VARARGS, "peer(rank) -> (addr, lnc)\n\nThe address and LNC rank published."},
    {"barrier", mod_barrier, METH_NOARGS,
     "barrier()\n\nWaits until every rank of the job that is alive reached it; asr.PeerFailed when some rank "
     "did not take part (it failed, or is being restarted: asrrun --on-failure)."},
    {"rank_state", mod_job_rank_state, METH_VARARGS,
     "rank_state(rank) -> (state, incarnation)\n\nA rank's state as the launcher reported it "
     "(asr.RANK_ALIVE, RANK_FAILED, RANK_RESTARTING, RANK_FINISHED) and its incarnation (how many times it "
     "was restarted)."},
    {"abort", mod_abort, METH_VARARGS,
     "abort(status=1, msg='asr.abort')\n\nEnds the job: every rank is killed, asrrun exits with status."},
    {"finalize", mod_finalize, METH_NOARGS,
     "finalize()\n\nLeaves the job. Closes this rank's LNC if connect/accept by rank brought it up (asr.init "
     "did not), after every completed send was taken by its peer (bounded); their comms are closed then."},
    {"init", mod_init, METH_VARARGS,
     "init(lnc)\n\nBrings up LNC lnc (0..127) and its service thread; needs ASR_BOOTSTRAP_PORT (asrrun sets "
     "it). connect/accept by rank do it for the job's LNC."},
    {"close", mod_close, METH_VARARGS,
     "close(lnc)\n\nShuts LNC lnc down, closing every comm of it (their requests are cancelled)."},
    {"connect", (PyCFunction)(void (*)(void))mod_connect, METH_VARARGS | METH_KEYWORDS,
     "connect(rank) -> Comm\nconnect(peer_ip, peer_lnc, lnc=LNC) -> Comm\n\nA SEND comm to a rank of the "
     "job, "
     "or from this process's LNC lnc to (peer_ip, peer_lnc). Returns at once; posts need it connected "
     "(Comm.wait_connected())."},
    {"accept", (PyCFunction)(void (*)(void))mod_accept, METH_VARARGS | METH_KEYWORDS,
     "accept(rank) -> Comm\naccept(peer_ip, peer_lnc, lnc=LNC) -> Comm\n\nA RECV comm from a rank of the "
     "job, "
     "or on LNC lnc from (peer_ip, peer_lnc). Returns at once."},
    {"strerror", mod_strerror, METH_VARARGS,
     "strerror(status) -> str\n\nlibasr's message for a status code."},
    {"comm_status_name", mod_comm_status_name, METH_VARARGS,
     "comm_status_name(status) -> str\n\nThe name of a connect state (asr.COMM_*)."},
    {"forget", mod_forget, METH_O,
     "forget(buffer)\n\nDrops the registrations of buffer's memory (and of memory inside it) from every comm "
     "now, and lets go of the references asr kept to it. Not needed for bounded memory (asr drops a buffer "
     "the program let go of at the next new buffer posted); useful before changing a buffer's memory in "
     "place "
     "(numpy resize, torch resize_). RuntimeError while a request on it is in flight."},
    {"_cache_info", mod_cache_info, METH_NOARGS,
     "_cache_info() -> dict (tests): the registration records kept; the imports and lists not freed "
     "in libasr, and the Memory registered"},
    {0},
};

static struct PyModuleDef asr_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "asr",
    .m_doc =
        "asr -- asynchronous point-to-point transfers between ranks started by asrrun, over libasr.\n\n"
        "    import asr, numpy as np\n"
        "    with asr.job_init() as job:            # rank, size, lnc, ...\n"
        "        peer = 1 - job.rank\n"
        "        with asr.connect(peer) as tx, asr.accept(peer) as rx:\n"
        "            tx.wait_connected(); rx.wait_connected()\n"
        "            a = np.arange(1 << 20, dtype=np.uint8); b = np.empty_like(a)\n"
        "            r = rx.irecv(b); s = tx.isend(a)\n"
        "            s.wait(); n = r.wait()             # bytes received\n\n"
        "Buffers are any C-contiguous buffer-protocol objects or CPU torch tensors; offsets and lengths are "
        "in bytes. A buffer stays referenced while a request on it is in flight. libasr status codes "
        "become exceptions (asr.Error and subclasses) carrying asr_strerror's text; misuse (a read-only "
        "buffer for irecv, a non-contiguous array, an offset past the end) is a ValueError or TypeError "
        "raised before anything is posted.\n\nOne-sided transfers: asr.Memory(lnc, buffer, access) registers "
        "memory and export()s its descriptor; a peer imports it on its SEND comm (Comm.import_memory) and "
        "writes into it or reads from it (Comm.write, Comm.read, Comm.prepare) while the owner posts "
        "nothing; "
        "a write's notify= value reaches the owner's RECV comm from that peer (Comm.notifications) after "
        "the data.\n\nasrrun also sets torchrun's RANK, WORLD_SIZE, MASTER_ADDR, "
        "MASTER_PORT, so torch.distributed.init_process_group('gloo') works beside this module.",
    .m_size = -1,
    .m_methods = mod_methods,
};

static PyObject *new_exc(PyObject *m, const char *name, PyObject *bases, const char *doc) {
  PyObject *e = PyErr_NewExceptionWithDoc(name, doc, bases, NULL);
  if (!e || PyModule_AddObjectRef(m, strchr(name, '.') + 1, e) < 0) {
    Py_XDECREF(e);
    return NULL;
  }
  return e;
}

PyMODINIT_FUNC PyInit_asr(void) {
  if (PyType_Ready(&RequestType) < 0 || PyType_Ready(&CommType) < 0 || PyType_Ready(&JobInfoType) < 0 ||
      PyType_Ready(&MemoryType) < 0 || PyType_Ready(&RemoteMemoryType) < 0 || PyType_Ready(&XferType) < 0)
    return NULL;
  PyObject *m = PyModule_Create(&asr_module);
  if (!m) return NULL;
  AsrError =
      new_exc(m, "asr.Error", NULL,
              "A libasr call failed; .status is its code (asr.INVALID, ...), the message asr_strerror's "
              "text.");
  if (!AsrError) goto fail;
  AsrUnconnected = new_exc(m, "asr.Unconnected", AsrError,
                           "The comm is not connected, or it (or the request) "
                           "is closed (ASR_UNCONNECTED).");
  AsrQueueFull =
      new_exc(m, "asr.QueueFull", AsrError, "128 requests of the comm are in flight (ASR_QUEUE_FULL).");
  PyObject *tb = Py_BuildValue("(OO)", AsrError, PyExc_TimeoutError);
  AsrTimeout =
      tb ? new_exc(m, "asr.Timeout", tb, "A wait ran out of time (ASR_TIMEOUT); a TimeoutError.") : NULL;
  Py_XDECREF(tb);
  PyObject *cb = Py_BuildValue("(OO)", AsrError, PyExc_ConnectionError);
  AsrConnError =
      cb ? new_exc(m, "asr.ConnError", cb, "The comm failed to connect (ASR_CONN_ERROR); a ConnectionError.")
         : NULL;
  Py_XDECREF(cb);
  AsrPeerFailed = new_exc(m, "asr.PeerFailed", AsrError,
                          "A rank of the job failed (ASR_PEER_FAILED): asr.rank_state says which.");
  if (!AsrUnconnected || !AsrQueueFull || !AsrTimeout || !AsrConnError || !AsrPeerFailed) goto fail;
  if (PyModule_AddObjectRef(m, "Comm", (PyObject *)&CommType) < 0 ||
      PyModule_AddObjectRef(m, "Request", (PyObject *)&RequestType) < 0 ||
      PyModule_AddObjectRef(m, "JobInfo", (PyObject *)&JobInfoType) < 0 ||
      PyModule_AddObjectRef(m, "Memory", (PyObject *)&MemoryType) < 0 ||
      PyModule_AddObjectRef(m, "RemoteMemory", (PyObject *)&RemoteMemoryType) < 0 ||
      PyModule_AddObjectRef(m, "Xfer", (PyObject *)&XferType) < 0)
    goto fail;
  static const struct {
    const char *name;
    int value;
  } consts[] = {
      {"SUCCESS", ASR_SUCCESS},
      {"INVALID", ASR_INVALID},
      {"UNCONNECTED", ASR_UNCONNECTED},
      {"QUEUE_FULL", ASR_QUEUE_FULL},
      {"TIMEOUT", ASR_TIMEOUT},
      {"CONN_ERROR", ASR_CONN_ERROR},
      {"PEER_FAILED", ASR_PEER_FAILED},
      {"RANK_ALIVE", ASR_RANK_ALIVE},
      {"RANK_FAILED", ASR_RANK_FAILED},
      {"RANK_RESTARTING", ASR_RANK_RESTARTING},
      {"RANK_FINISHED", ASR_RANK_FINISHED},
      {"MAX_LNC", ASR_MAX_LNC},
      {"MAX_REQUESTS", ASR_MAX_REQUESTS},
      {"COMM_START_INIT", ASR_COMM_START_INIT},
      {"COMM_WAIT_FOR_HOSTNAME", ASR_COMM_WAIT_FOR_HOSTNAME},
      {"COMM_WAIT_FOR_NET_HANDLE_GET", ASR_COMM_WAIT_FOR_NET_HANDLE_GET},
      {"COMM_WAIT_FOR_NET_HANDLE_SET", ASR_COMM_WAIT_FOR_NET_HANDLE_SET},
      {"COMM_NET_CONNECT", ASR_COMM_NET_CONNECT},
      {"COMM_LISTEN", ASR_COMM_LISTEN},
      {"COMM_CONNECTED", ASR_COMM_CONNECTED},
      {"COMM_CONNECTION_ERROR", ASR_COMM_CONNECTION_ERROR},
      {"MEM_REMOTE_READ", ASR_MEM_REMOTE_READ},
      {"MEM_REMOTE_WRITE", ASR_MEM_REMOTE_WRITE},
      {"MEM_DESC_MAX", ASR_MEM_DESC_MAX},
      {"NOTIF_DEPTH", ASR_NOTIF_DEPTH},
      {"XFER_WRITE", ASR_XFER_WRITE},
      {"XFER_READ", ASR_XFER_READ},
  };
  for (size_t i = 0; i < sizeof consts / sizeof consts[0]; i++)
    if (PyModule_AddIntConstant(m, consts[i].name, consts[i].value) < 0) goto fail;
  return m;
fail:
  Py_DECREF(m);
  return NULL;
}
