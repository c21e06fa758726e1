/* slots.c: POST /slots/{id}?action=save|restore|erase, llama-server's slot
 * files (with --slot-save-path DIR): a slot's prompt cache written to
 * DIR/filename, read back, or dropped (app/scheduler.h's eng_sched_slot_*;
 * the file is app/prompt-file.h's, so a restored prompt answers with the
 * same bits as one computed). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/native.h"
#include "serve/http.h"

static unsigned status_of(int rc)
{
    switch (rc) {
    case -EINVAL: case -ENOENT: return MHD_HTTP_BAD_REQUEST;
    case -ENOSPC: case -ESHUTDOWN: return MHD_HTTP_SERVICE_UNAVAILABLE;
    case -ENOTSUP: return MHD_HTTP_NOT_IMPLEMENTED;
    default: return MHD_HTTP_INTERNAL_SERVER_ERROR;
    }
}

static const char *type_of(unsigned status)
{
    return status == MHD_HTTP_BAD_REQUEST       ? "invalid_request_error"
           : status == MHD_HTTP_NOT_IMPLEMENTED ? "not_supported_error"
           : status == MHD_HTTP_SERVICE_UNAVAILABLE ? "unavailable_error" : "server_error";
}

/* The request's body, whose "filename" (name, which lives as long as the
 * body) is DIR/filename in path; NULL when it was answered with an error
 * (reply), as srv_body_object does. */
static json_t *file_of(struct srv_conn *k, char *path, size_t cap, const char **name,
                       enum MHD_Result *reply)
{
    json_t *body = srv_body_object(k, reply);
    if (body && !api_slot_filename(body, name) &&
        (size_t)snprintf(path, cap, "%s/%s", k->s->o->slot_save_path, *name) < cap)
        return body;
    if (body) {
        json_decref(body);
        *reply = srv_reply_error(k, MHD_HTTP_BAD_REQUEST, "invalid_request_error",
                                 "invalid_request", "Invalid filename");
    }
    return NULL;
}

static json_t *answer(const struct srv_slot_action *a, const char *name)
{
    switch (a->op) {
    case SRV_SLOT_SAVE:
        return json_pack("{s:i, s:s, s:i, s:I, s:{s:f}}", "id_slot", a->slot, "filename", name,
                         "n_saved", a->n, "n_written", (json_int_t)a->bytes, "timings",
                         "save_ms", a->ms);
    case SRV_SLOT_RESTORE:
        return json_pack("{s:i, s:s, s:i, s:I, s:{s:f}}", "id_slot", a->slot, "filename", name,
                         "n_restored", a->n, "n_read", (json_int_t)a->bytes, "timings",
                         "restore_ms", a->ms);
    case SRV_SLOT_ERASE:
        return json_pack("{s:i, s:i}", "id_slot", a->slot, "n_erased", a->n);
    }
    return NULL;
}

enum MHD_Result srv_slot_action(struct srv_conn *k)
{
    if (!k->s->o->slot_save_path)
        return srv_reply_error(k, MHD_HTTP_NOT_IMPLEMENTED, "not_supported_error",
                               "not_supported", "This server does not support slots action. "
                               "Start it with `--slot-save-path`");
    char *end = NULL;
    const long id = strtol(k->path_arg, &end, 10);
    if (!k->path_arg[0] || *end || id < 0 || id > INT_MAX)
        return srv_reply_error(k, MHD_HTTP_BAD_REQUEST, "invalid_request_error",
                               "invalid_request", "Invalid slot ID");
    const char *act = MHD_lookup_connection_value(k->c, MHD_GET_ARGUMENT_KIND, "action");
    struct srv_slot_action a = { .slot = (int)id };
    if (act && !strcmp(act, "save"))
        a.op = SRV_SLOT_SAVE;
    else if (act && !strcmp(act, "restore"))
        a.op = SRV_SLOT_RESTORE;
    else if (act && !strcmp(act, "erase"))
        a.op = SRV_SLOT_ERASE;
    else
        return srv_reply_error(k, MHD_HTTP_BAD_REQUEST, "invalid_request_error",
                               "invalid_request", "Invalid action");
    char path[PATH_MAX];
    const char *name = NULL;
    json_t *body = NULL;
    if (a.op != SRV_SLOT_ERASE) {
        enum MHD_Result reply;
        if (!(body = file_of(k, path, sizeof(path), &name, &reply)))
            return reply;
        a.path = path;
    }
    srv_loop_slot_action(k->s->loop, &a);
    json_t *v = a.rc ? NULL : answer(&a, name);
    if (a.rc) { /* the client named the file; the server's folder stays its own */
        const unsigned st = status_of(a.rc);
        const char *msg = a.err.msg;
        const size_t dir = a.path ? strlen(a.path) - strlen(name) : 0;
        if (dir && !strncmp(msg, a.path, dir))
            msg += dir;
        const enum MHD_Result r = srv_reply_error(k, st, type_of(st), "slot_action", "%s", msg);
        json_decref(body);
        return r;
    }
    json_decref(body);
    return v ? srv_reply_json(k, MHD_HTTP_OK, v)
             : srv_reply_error(k, MHD_HTTP_INTERNAL_SERVER_ERROR, "server_error", "oom",
                               "out of memory");
}
