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
 *   exporter referenced) while any request on it is in flight, and while
 *   the comms' registration caches may hold it. A record leaves the cache
 *   (asr_forget, then the reference is dropped) only when no request on it,
 *   nor on memory inside it, is in flight, and when either the program has
 *   let go of the exporter (we hold its last reference) or more than
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
 * - Lifetimes. Closing a comm or an LNC (or finalizing the job, which may
 *   close its LNC) finishes their requests as cancelled; it is refused while
 *   another thread waits on one of them, since libasr frees the requests.
 *
 * Everything here runs under the GIL except the waits and closes, which
 * mark what they use first (Request.waiting, Comm.waiters, Comm.state).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h> /* first, as Python asks (it sets the feature macros); no config.h: not part of libasr */
#include <structmember.h>

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
  long inflight; /* requests posted on it and not finished */
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

/* Whether a request is in flight on r's memory or memory inside it: then
 * asr_forget of r's region would drop a registration a post uses. */
static int region_busy(const reg_t *r) {
  for (const reg_t *o = cache_head; o; o = o->next)
    if (o->inflight > 0 && o->va >= r->va && o->va + o->len <= r->va + r->len) return 1;
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
    if (r->inflight > 0) continue;
    if (reg_released(r) && !region_busy(r))
      reg_drop(r);
    else
      idle++;
  }
  for (reg_t *r = cache_tail, *p; r && idle > CACHE_IDLE_MAX; r = p) {
    p = r->prev;
    if (r->inflight == 0 && !region_busy(r)) {
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

/* Takes obj's memory for a post: writable for a receive; contiguous. */
static int get_buf(PyObject *obj, int writable, buf_t *b) {
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
  if (writable && b->view.readonly) {
    buf_release(b);
    PyErr_SetString(PyExc_ValueError, "irecv needs a writable buffer; this one is read-only");
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

enum { COMM_OPEN, COMM_CLOSING, COMM_CLOSED };

typedef struct CommObject {
  PyObject_HEAD asr_comm_t *comm; /* NULL once closed */
  int send;                       /* a SEND comm (isend), else RECV (irecv) */
  int lnc, peer_lnc, peer_rank;   /* peer_rank -1 when made by address */
  char peer_ip[64];
  unsigned gen;
  int state;
  int waiters;             /* threads in wait() / wait_connected() on it, GIL released */
  RequestObject *inflight; /* posted and not finished; each holds a reference here */
  long ninflight;
  struct CommObject *lprev, *lnext; /* every live comm (comms) */
} CommObject;

static CommObject *comms;

enum { REQ_POSTED, REQ_DONE, REQ_FAILED, REQ_CANCELLED };

struct RequestObject {
  PyObject_HEAD CommObject *comm; /* a reference */
  asr_request_t *req;             /* libasr's, while POSTED */
  reg_t *reg;
  PyObject *buffer; /* what was posted, for Request.buffer */
  size_t offset, length, nbytes;
  int state, status, waiting;
  RequestObject *prev, *next; /* in comm->inflight */
};

static PyTypeObject CommType, RequestType, JobInfoType;

/* Ends r's flight: out of its comm's list (dropping the list's reference:
 * the caller holds its own), its record no longer busy. */
static void req_finish(RequestObject *r, int state, int status, size_t nbytes) {
  CommObject *c = r->comm;
  r->state = state;
  r->status = status;
  r->nbytes = nbytes;
  r->req = NULL;
  r->reg->inflight--;
  if (r->prev)
    r->prev->next = r->next;
  else
    c->inflight = r->next;
  if (r->next) r->next->prev = r->prev;
  r->prev = r->next = NULL;
  c->ninflight--;
  Py_DECREF(r);
}

/* c was closed (by libasr: asr_comm_close, asr_close or finalize): its
 * requests are gone with it. */
static void comm_closed(CommObject *c) {
  while (c->inflight) {
    RequestObject *r = c->inflight;
    Py_INCREF(r);
    req_finish(r, REQ_CANCELLED, ASR_UNCONNECTED, 0);
    Py_DECREF(r);
  }
  c->comm = NULL;
  c->state = COMM_CLOSED;
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
 * while a thread waits on one of its comms, else marks them CLOSING. */
static int lnc_close_begin(int lnc) {
  for (CommObject *c = comms; c; c = c->lnext)
    if (c->lnc == lnc && comm_alive(c) && c->waiters > 0) {
      PyErr_Format(PyExc_RuntimeError,
                   "LNC %d: another thread waits on a request or connect of one of its comms", lnc);
      return -1;
    }
  for (CommObject *c = comms; c; c = c->lnext)
    if (c->lnc == lnc && c->gen == lnc_gen[lnc] && c->state != COMM_CLOSED) c->state = COMM_CLOSING;
  return 0;
}

static void lnc_close_end(int lnc) {
  for (CommObject *c = comms; c; c = c->lnext)
    if (c->lnc == lnc && c->gen == lnc_gen[lnc] && c->state != COMM_CLOSED) comm_closed(c);
  lnc_gen[lnc]++;
  lnc_user[lnc] = 0;
}

/* --- Request ------------------------------------------------------------------ */

static void Request_dealloc(RequestObject *r) {
  /* (never POSTED here: its comm's list holds a reference while it is) */
  Py_XDECREF(r->comm);
  Py_XDECREF(r->buffer);
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
  return PyUnicode_FromFormat("<asr.Request %s %zu bytes at offset %zu, %s>",
                              r->comm->send ? "isend" : "irecv", r->length, r->offset, names[r->state]);
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
        "A posted isend or irecv (made by Comm.isend / Comm.irecv). Until it finishes it keeps its "
        "buffer alive, even when the program dropped every other reference to both.",
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
  c->lprev = NULL;
  c->lnext = comms;
  if (comms) comms->lprev = c;
  comms = c;
  return c;
}

static void Comm_dealloc(CommObject *c) {
  /* (no request in flight: each holds a reference to us) */
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
  buf_t b;
  if (get_buf(obj, !send, &b)) return NULL;
  Py_ssize_t len = -1;
  if (lenobj != Py_None) {
    len = PyLong_AsSsize_t(lenobj);
    if (len == -1 && PyErr_Occurred()) {
      buf_release(&b);
      return NULL;
    }
    if (len < 0) {
      buf_release(&b);
      PyErr_Format(PyExc_ValueError, "length %zd is negative", len);
      return NULL;
    }
  }
  if (off < 0 || (size_t)off > b.len) {
    PyErr_Format(PyExc_ValueError, "offset %zd is outside the %zu-byte buffer", off, b.len);
    buf_release(&b);
    return NULL;
  }
  if (len < 0) len = (Py_ssize_t)(b.len - (size_t)off);
  if ((size_t)len > b.len - (size_t)off) {
    PyErr_Format(PyExc_ValueError, "%zd bytes at offset %zd run past the end of the %zu-byte buffer", len,
                 off, b.len);
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
  RequestObject *r = PyObject_New(RequestObject, &RequestType);
  if (!r) {
    buf_release(&b);
    return NULL;
  }
  r->comm = NULL;
  r->buffer = NULL;
  reg_t *reg = cache_get(&b);
  if (!reg) {
    Py_DECREF(r);
    return NULL;
  }
  asr_request_t *q = NULL;
  if (c->ninflight >= ASR_MAX_REQUESTS) comm_reap(c); /* before libasr says it is full */
  int st = send ? asr_isend(c->comm, reg->t, (size_t)off, (size_t)len, &q)
                : asr_irecv(c->comm, reg->t, (size_t)off, (size_t)len, &q);
  if (st == ASR_QUEUE_FULL && c->ninflight > 0) {
    comm_reap(c);
    st = send ? asr_isend(c->comm, reg->t, (size_t)off, (size_t)len, &q)
              : asr_irecv(c->comm, reg->t, (size_t)off, (size_t)len, &q);
  }
  if (st) {
    Py_DECREF(r);
    return raise_status(st, send ? "asr_isend" : "asr_irecv");
  }
  r->comm = (CommObject *)Py_NewRef(c);
  r->req = q;
  r->reg = reg;
  reg->inflight++;
  r->buffer = Py_NewRef(obj);
  r->offset = (size_t)off;
  r->length = (size_t)len;
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

static PyObject *Comm_isend(CommObject *c, PyObject *args, PyObject *kw) { return comm_post(c, args, kw, 1); }
static PyObject *Comm_irecv(CommObject *c, PyObject *args, PyObject *kw) { return comm_post(c, args, kw, 0); }

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
    PyErr_SetString(PyExc_RuntimeError, c->state == COMM_CLOSING
                                            ? "another thread is closing this comm"
                                            : "another thread waits on a request or connect of this comm");
    return NULL;
  }
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
        "A one-way channel to or from a peer: a SEND comm (asr.connect) posts isend, a RECV comm "
        "(asr.accept) irecv. A context manager: leaving the with block closes it.",
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
  if (get_buf(obj, 0, &b)) return NULL;
  for (reg_t *r = cache_head, *n; r; r = n) {
    n = r->next;
    if (r->va >= b.va && r->va + r->len <= b.va + b.len) {
      if (r->inflight > 0 || region_busy(r)) {
        buf_release(&b);
        PyErr_SetString(PyExc_RuntimeError, "a request on this memory is in flight");
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
  for (reg_t *r = cache_head; r; r = r->next) busy += r->inflight > 0;
  return Py_BuildValue("{s:l,s:l,s:i}", "records", cache_n, "busy", busy, "idle_max", CACHE_IDLE_MAX);
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
     "_cache_info() -> dict (tests): the registration records kept"},
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
        "raised before anything is posted.\n\nasrrun also sets torchrun's RANK, WORLD_SIZE, MASTER_ADDR, "
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
  if (PyType_Ready(&RequestType) < 0 || PyType_Ready(&CommType) < 0 || PyType_Ready(&JobInfoType) < 0)
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
      PyModule_AddObjectRef(m, "JobInfo", (PyObject *)&JobInfoType) < 0)
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
  };
  for (size_t i = 0; i < sizeof consts / sizeof consts[0]; i++)
    if (PyModule_AddIntConstant(m, consts[i].name, consts[i].value) < 0) goto fail;
  return m;
fail:
  Py_DECREF(m);
  return NULL;
}
