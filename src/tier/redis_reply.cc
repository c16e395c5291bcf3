#include "tier/redis_reply.h"

#include <hiredis/hiredis.h>

#include <cstdlib>
#include <cstring>

namespace pc {

namespace {

// The budget of the reply a task belongs to: hiredis copies the reader's privdata into
// each task it starts (the root one included).
ReplyBudget* budget_of(const redisReadTask* task) {
  for (const redisReadTask* t = task; t; t = t->parent)
    if (t->privdata) return static_cast<ReplyBudget*>(t->privdata);
  return nullptr;
}

// Arrays above the task: 0 for a top-level value.
int depth_of(const redisReadTask* task) {
  int d = 0;
  for (const redisReadTask* t = task->parent; t; t = t->parent) ++d;
  return d;
}

// Charges `bytes` to the task's reply; false (and the violation noted) past max_total.
bool charge(const redisReadTask* task, size_t bytes) {
  ReplyBudget* b = budget_of(task);
  if (!b) return false;
  if (!b->violation.empty()) return false;
  if (bytes > b->limits.max_total || b->used > b->limits.max_total - bytes) {
    b->violation = "reply larger than " + std::to_string(b->limits.max_total) + " bytes";
    return false;
  }
  b->used += bytes;
  return true;
}

bool refuse(const redisReadTask* task, std::string why) {
  if (ReplyBudget* b = budget_of(task); b && b->violation.empty()) b->violation = std::move(why);
  return false;
}

// Allocated as hiredis's own objects are (calloc/malloc), so that freeReplyObject
// frees them; linked into the parent array the way hiredis's default functions do.
redisReply* new_reply(const redisReadTask* task, int type) {
  auto* r = static_cast<redisReply*>(std::calloc(1, sizeof(redisReply)));
  if (!r) return nullptr;
  r->type = type;
  if (task->parent) {
    auto* parent = static_cast<redisReply*>(task->parent->obj);
    parent->element[task->idx] = r;
  }
  return r;
}

void* create_string(const redisReadTask* task, char* str, size_t len) {
  const ReplyBudget* b = budget_of(task);
  if (b && len > b->limits.max_bulk) {
    refuse(task, "bulk string of " + std::to_string(len) + " bytes (at most " + std::to_string(b->limits.max_bulk) +
                     ")");
    return nullptr;
  }
  if (!charge(task, sizeof(redisReply) + len + 1)) return nullptr;
  char* buf = static_cast<char*>(std::malloc(len + 1));
  if (!buf) return nullptr;
  std::memcpy(buf, str, len);
  buf[len] = '\0';
  redisReply* r = new_reply(task, task->type);
  if (!r) {
    std::free(buf);
    return nullptr;
  }
  r->str = buf;
  r->len = len;
  return r;
}

void* create_array(const redisReadTask* task, int elements) {
  const ReplyBudget* b = budget_of(task);
  if (!b) return nullptr;
  if (elements < 0 || elements > b->limits.max_elements) {
    refuse(task, "array of " + std::to_string(elements) + " elements (at most " +
                     std::to_string(b->limits.max_elements) + ")");
    return nullptr;
  }
  if (depth_of(task) > b->limits.max_depth) {
    refuse(task, "arrays nested deeper than " + std::to_string(b->limits.max_depth));
    return nullptr;
  }
  if (!charge(task, sizeof(redisReply) + size_t(elements) * sizeof(redisReply*))) return nullptr;
  redisReply* r = new_reply(task, REDIS_REPLY_ARRAY);
  if (!r) return nullptr;
  if (elements > 0) {
    r->element = static_cast<redisReply**>(std::calloc(size_t(elements), sizeof(redisReply*)));
    if (!r->element) {
      if (task->parent) static_cast<redisReply*>(task->parent->obj)->element[task->idx] = nullptr;
      std::free(r);
      return nullptr;
    }
  }
  r->elements = size_t(elements);
  return r;
}

void* create_integer(const redisReadTask* task, long long value) {
  if (!charge(task, sizeof(redisReply))) return nullptr;
  redisReply* r = new_reply(task, REDIS_REPLY_INTEGER);
  if (r) r->integer = value;
  return r;
}

void* create_nil(const redisReadTask* task) {
  if (!charge(task, sizeof(redisReply))) return nullptr;
  return new_reply(task, REDIS_REPLY_NIL);
}

void free_object(void* reply) { freeReplyObject(reply); }

redisReplyObjectFunctions kBounded = {create_string, create_array, create_integer, create_nil, free_object};

void set_context_error(redisContext* c, int type, const std::string& what) {
  c->err = type;
  std::snprintf(c->errstr, sizeof c->errstr, "%s", what.c_str());
}

}  // namespace

void bound_reader(redisReader* reader, ReplyBudget* budget) {
  reader->fn = &kBounded;
  reader->privdata = budget;
}

size_t unparsed_bytes(const redisReader* reader) { return reader->len - reader->pos; }

ReplyRead read_reply(redisContext* c, ReplyBudget* budget, const ReplyLimits& limits,
                     std::chrono::steady_clock::time_point deadline, void** reply) {
  *reply = nullptr;
  budget->limits = limits;
  budget->used = 0;
  budget->violation.clear();
  const auto parse = [&]() -> ReplyRead {
    if (redisReaderGetReply(c->reader, reply) == REDIS_OK) return ReplyRead::kOk;
    if (!budget->violation.empty()) {
      set_context_error(c, REDIS_ERR_PROTOCOL, budget->violation);
      return ReplyRead::kTooLarge;
    }
    set_context_error(c, c->reader->err, c->reader->errstr);
    return ReplyRead::kIo;
  };
  if (ReplyRead r = parse(); r != ReplyRead::kOk || *reply) return r;  // a reply already buffered
  int done = 0;
  while (!done)
    if (redisBufferWrite(c, &done) != REDIS_OK) return ReplyRead::kIo;
  const size_t max_buffered = limits.max_bulk + kLineSlack;
  while (!*reply) {
    if (std::chrono::steady_clock::now() >= deadline) {
      set_context_error(c, REDIS_ERR_IO, "reply not complete by its deadline");
      return ReplyRead::kTimeout;
    }
    if (redisBufferRead(c) != REDIS_OK) return ReplyRead::kIo;
    if (unparsed_bytes(c->reader) > max_buffered) {
      budget->violation = "more than " + std::to_string(max_buffered) + " bytes of one reply";
      set_context_error(c, REDIS_ERR_PROTOCOL, budget->violation);
      return ReplyRead::kTooLarge;
    }
    if (ReplyRead r = parse(); r != ReplyRead::kOk) return r;
  }
  return ReplyRead::kOk;
}

}  // namespace pc
