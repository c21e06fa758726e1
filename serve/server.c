/* server.c: the daemon of `faultline serve` (server.h): the routes, the
 * body limit, the API key, and the run from start to a drained stop. */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "model/kv-cache.h"
#include "serve/http.h"
#include "text/grammar.h"

enum route_id {
    R_CHAT, R_COMPLETIONS, R_MODELS, R_HEALTH, R_METRICS, R_TOKENIZE, R_DETOKENIZE, R_APPLY_TEMPLATE,
    R_NATIVE, R_PROPS, R_INFILL, R_MESSAGES, R_COUNT_TOKENS, R_RESPONSES, R_SLOTS, R_EMBD_OAI,
    R_EMBD, R_SLOT_ACTION
};
_Static_assert(R_SLOT_ACTION + 1 == SRV_N_ROUTES, "a metrics row per route (http.h, endpoints.c)");

struct route {
    const char *path, *method;
    enum route_id id;
    bool needs_model, has_body;
};

/* llama-server's paths, with and without /v1 where it has both */
static const struct route routes[] = {
    { "/v1/chat/completions", "POST", R_CHAT, true, true },
    { "/chat/completions", "POST", R_CHAT, true, true },
    { "/v1/completions", "POST", R_COMPLETIONS, true, true },
    /* llama-server's own API at its paths (/completions is it too there) */
    { "/completion", "POST", R_NATIVE, true, true },
    { "/completions", "POST", R_NATIVE, true, true },
    { "/infill", "POST", R_INFILL, true, true },
    /* Anthropic's Messages API (llama-server's too) */
    { "/v1/messages", "POST", R_MESSAGES, true, true },
    { "/v1/messages/count_tokens", "POST", R_COUNT_TOKENS, true, true },
    /* OpenAI's Responses API */
    { "/v1/responses", "POST", R_RESPONSES, true, true },
    { "/responses", "POST", R_RESPONSES, true, true },
    /* embeddings: OpenAI's answer, and llama-server's own at its two paths */
    { "/v1/embeddings", "POST", R_EMBD_OAI, true, true },
    { "/embeddings", "POST", R_EMBD, true, true },
    { "/embedding", "POST", R_EMBD, true, true },
    { "/props", "GET", R_PROPS, true, false },
    { "/slots", "GET", R_SLOTS, true, false },
    { "/slots/", "POST", R_SLOT_ACTION, true, true }, /* /slots/{id}: a path ending in '/' is a
                                                        * prefix */
    { "/v1/models", "GET", R_MODELS, false, false },
    { "/models", "GET", R_MODELS, false, false },
    { "/health", "GET", R_HEALTH, false, false },
    { "/v1/health", "GET", R_HEALTH, false, false },
    { "/metrics", "GET", R_METRICS, false, false },
    { "/tokenize", "POST", R_TOKENIZE, true, true },
    { "/detokenize", "POST", R_DETOKENIZE, true, true },
    { "/apply-template", "POST", R_APPLY_TEMPLATE, true, true },
};
#define N_ROUTES (sizeof(routes) / sizeof(routes[0]))

static volatile sig_atomic_t g_signal;

static void on_signal(int sig)
{
    if (g_signal) /* the second: at once */
        _exit(130);
    g_signal = sig;
}

/* -1: no such path; -2: the path with another method */
static int find_route(const char *url, const char *method)
{
    int other = -1;
    for (size_t i = 0; i < N_ROUTES; i++) {
        const size_t n = strlen(routes[i].path);
        const bool prefix = routes[i].path[n - 1] == '/';
        if (prefix ? !strncmp(url, routes[i].path, n) && !strchr(url + n, '/')
                   : !strcmp(url, routes[i].path)) {
            if (!strcmp(method, routes[i].method))
                return (int)i;
            other = -2;
        }
    }
    return other;
}

/* Whether k is want[0, n): no early exit, so the time says nothing of
 * how much of a key was right. */
static bool key_is(const char *k, const char *want, size_t n)
{
    unsigned diff = strlen(k) != n;
    for (size_t i = 0; i < n; i++)
        diff |= (unsigned)(k[i] ^ want[i]) & (k[i] ? 0xffu : 0x100u);
    return !diff;
}

/* "Authorization: Bearer KEY", or Anthropic's clients' "x-api-key: KEY"
 * (llama-server takes both). */
static bool key_ok(struct srv *s, struct MHD_Connection *c)
{
    if (!s->o->api_key)
        return true;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    const char *x = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "x-api-key");
    const char *given = h && !strncasecmp(h, "Bearer ", 7) ? h + 7 : x;
    if (!given)
        return false;
    bool ok = false;
    for (const char *want = s->o->api_key; *want;) { /* each key of the list */
        const size_t n = strcspn(want, ",");
        ok |= n > 0 && key_is(given, want, n);
        want += n + (want[n] == ',');
    }
    return ok;
}

/* The first call of a request (headers read): route, key, declared length. */
static enum MHD_Result begin(struct srv *s, struct srv_conn *k, const char *url,
                             const char *method)
{
    k->route = find_route(url, method);
    if (k->route == -1)
        return srv_reply_error(k, MHD_HTTP_NOT_FOUND, "invalid_request_error", "not_found",
                               "%s: no such endpoint", url);
    if (k->route == -2)
        return srv_reply_error(k, MHD_HTTP_METHOD_NOT_ALLOWED, "invalid_request_error",
                               "method_not_allowed", "%s does not take %s", url, method);
    const struct route *r = &routes[k->route];
    if (r->id == R_SLOT_ACTION)
        snprintf(k->path_arg, sizeof(k->path_arg), "%s", url + strlen(r->path));
    k->anthropic = r->id == R_MESSAGES || r->id == R_COUNT_TOKENS; /* its errors' shape too */
    if (r->id != R_HEALTH && !key_ok(s, k->c))
        return srv_reply_error(k, MHD_HTTP_UNAUTHORIZED, "authentication_error",
                               "invalid_api_key", "a missing or wrong API key (Authorization: "
                               "Bearer KEY, or x-api-key: KEY)");
    const char *cl = MHD_lookup_connection_value(k->c, MHD_HEADER_KIND, "Content-Length");
    if (cl && strtoull(cl, NULL, 10) > s->o->max_body)
        return srv_reply_error(k, MHD_HTTP_CONTENT_TOO_LARGE, "invalid_request_error",
                               "body_too_large", "the body has %s bytes; at most %zu are read",
                               cl, s->o->max_body);
    if (r->needs_model && !srv_loop_session(s->loop))
        return srv_reply_error(k, MHD_HTTP_SERVICE_UNAVAILABLE, "unavailable_error", "loading",
                               "Loading model");
    return MHD_YES;
}

static enum MHD_Result dispatch(struct srv_conn *k)
{
    if (k->too_big)
        return srv_reply_error(k, MHD_HTTP_CONTENT_TOO_LARGE, "invalid_request_error",
                               "body_too_large", "the body is over %zu bytes", k->s->o->max_body);
    switch (routes[k->route].id) {
    case R_CHAT: return srv_completion(k, API_CHAT, SRV_OPENAI);
    case R_COMPLETIONS: return srv_completion(k, API_COMPLETION, SRV_OPENAI);
    case R_NATIVE: return srv_completion(k, API_COMPLETION, SRV_NATIVE);
    case R_INFILL: return srv_completion(k, API_COMPLETION, SRV_INFILL);
    case R_MESSAGES: return srv_completion(k, API_CHAT, SRV_ANTHROPIC);
    case R_COUNT_TOKENS: return srv_count_tokens(k);
    case R_RESPONSES: return srv_completion(k, API_CHAT, SRV_RESPONSES);
    case R_PROPS: return srv_props(k);
    case R_SLOTS: return srv_slots(k);
    case R_MODELS: return srv_models(k);
    case R_HEALTH: return srv_health(k);
    case R_METRICS: return srv_metrics(k);
    case R_TOKENIZE: return srv_tokenize(k);
    case R_DETOKENIZE: return srv_detokenize(k);
    case R_APPLY_TEMPLATE: return srv_apply_template(k);
    case R_EMBD_OAI: return srv_embeddings(k, true);
    case R_EMBD: return srv_embeddings(k, false);
    case R_SLOT_ACTION: return srv_slot_action(k);
    }
    return MHD_NO;
}

/* Collects the body up to the limit (the rest is read and dropped). */
static void take_body(struct srv_conn *k, const char *data, size_t n)
{
    if (k->too_big || k->body_len + n > k->s->o->max_body) {
        k->too_big = true;
        return;
    }
    char *b = realloc(k->body, k->body_len + n + 1);
    if (!b) {
        k->too_big = true;
        return;
    }
    memcpy(b + k->body_len, data, n);
    k->body = b;
    k->body_len += n;
    b[k->body_len] = 0;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_size, void **con_cls)
{
    (void)version;
    struct srv *s = cls;
    struct srv_conn *k = *con_cls;
    if (!k) { /* headers are in */
        if (!(k = calloc(1, sizeof(*k))))
            return MHD_NO;
        *k = (struct srv_conn){ .s = s, .c = c, .route = -1 };
        *con_cls = k;
        const enum MHD_Result rc = begin(s, k, url, method);
        k->answered = k->status != 0;
        return rc;
    }
    if (k->answered) { /* refused at the headers: drop what the client still sends */
        *upload_size = 0;
        return MHD_YES;
    }
    if (*upload_size) {
        take_body(k, upload_data, *upload_size);
        *upload_size = 0;
        return MHD_YES;
    }
    k->answered = true;
    return dispatch(k);
}

/* The request is over (answered or the connection lost): its state goes. */
static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)c;
    (void)toe;
    struct srv *s = cls;
    struct srv_conn *k = *con_cls;
    if (!k)
        return;
    if (k->route >= 0 && k->status) {
        const unsigned st = k->status;
        const int cls_i = st == 401 ? 3 : st == 413 ? 4 : st == 503 ? 5 : st >= 500 ? 2
                          : st >= 400 ? 1 : 0;
        pthread_mutex_lock(&s->mu);
        s->responses[routes[k->route].id][cls_i]++;
        pthread_mutex_unlock(&s->mu);
    }
    srv_conn_release_jobs(k); /* none when a stream's response took them */
    json_decref(k->fields);
    free(k->body);
    free(k);
    *con_cls = NULL;
}

/* --- the run ------------------------------------------------------------------------ */

static int bind_addr(const char *host, int port, struct sockaddr_storage *ss, struct fl_err *err)
{
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                              .ai_flags = AI_NUMERICSERV | AI_PASSIVE };
    struct addrinfo *ai = NULL;
    char ps[16];
    snprintf(ps, sizeof(ps), "%d", port);
    const int rc = getaddrinfo(host, ps, &hints, &ai);
    if (rc || !ai)
        return fl_err_set(err, -EINVAL, "--host %s: %s", host, gai_strerror(rc));
    memcpy(ss, ai->ai_addr, ai->ai_addrlen);
    freeaddrinfo(ai);
    return 0;
}

static bool loopback(const struct sockaddr_storage *ss)
{
    if (ss->ss_family == AF_INET)
        return (ntohl(((const struct sockaddr_in *)ss)->sin_addr.s_addr) >> 24) == 127;
    return ss->ss_family == AF_INET6 &&
           IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)ss)->sin6_addr);
}

static int start_daemon(struct srv *s, const struct srv_opts *o, struct fl_err *err)
{
    struct sockaddr_storage ss;
    int rc = bind_addr(o->host, o->port, &ss, err);
    if (rc)
        return rc;
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
                     MHD_USE_POLL | MHD_USE_ITC;
    if (ss.ss_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    s->d = MHD_start_daemon(flags, (uint16_t)o->port, NULL, NULL, on_request, s,
                            MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
                            MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
                            MHD_OPTION_CONNECTION_LIMIT, (unsigned)o->max_conn,
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)o->timeout_s,
                            MHD_OPTION_THREAD_STACK_SIZE, (size_t)(512u << 10),
                            MHD_OPTION_END);
    if (!s->d)
        return fl_err_set(err, -EADDRINUSE, "cannot listen on %s:%d (in use, or not an address "
                          "of this machine)", o->host, o->port);
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
    const int port = di ? di->port : o->port;
    char where[300];
    snprintf(where, sizeof(where), ss.ss_family == AF_INET6 ? "http://[%s]:%d" : "http://%s:%d",
             o->host, port);
    if (loopback(&ss))
        fprintf(stderr, "faultline serve: listening on %s\n", where);
    else
        fprintf(stderr, "faultline serve: listening on %s — reachable from other machines "
                        "(--host %s)%s\n", where, o->host,
                o->api_key ? "" : "; no --api-key asked");
    return 0;
}

static void model_name(struct srv *s, const struct srv_opts *o)
{
    const char *p = o->alias ? o->alias : o->sp.model_path;
    const char *slash = o->alias ? NULL : strrchr(p, '/');
    snprintf(s->model_name, sizeof(s->model_name), "%s", slash ? slash + 1 : p);
}

/* The ready line's words on speculative decoding. */
static const char *spec_words(const struct srv_opts *o, const struct srv_stats *st)
{
    if (!eng_spec_on(&o->spec))
        return "";
    if (!st->spec_on)
        return ", no speculative decoding (the model's recurrent state is in VRAM, where a draft "
               "cannot be taken back)";
    if (!o->spec.draft.model)
        return ", speculative decoding ngram-simple";
    return o->spec.type == ENG_SPEC_NONE ? ", speculative decoding draft-simple"
                                         : ", speculative decoding ngram-simple, draft-simple";
}

int srv_run(const struct srv_opts *o, struct fl_err *err)
{
    struct srv s = { .o = o, .started = (int64_t)time(NULL) };
    pthread_mutex_init(&s.mu, NULL);
    s.seed_state = (uint64_t)s.started ^ ((uint64_t)getpid() << 32);
    model_name(&s, o);
    struct sigaction sa = { .sa_handler = on_signal };
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN); /* a client gone mid-write is an error return */
    /* listen first: /health says 503 while the model loads; a file that
     * cannot be read is said before that */
    int rc = access(o->sp.model_path, R_OK) ? fl_err_set(err, -errno, "%s: %s", o->sp.model_path,
                                                         strerror(errno))
                                            : 0;
    if (!rc)
        rc = start_daemon(&s, o, err);
    if (!rc)
        rc = srv_loop_start(&o->sp, &o->spec, &s.loop, err);
    if (!rc && (rc = srv_loop_wait_loaded(s.loop, err)) == 0) {
        struct eng_session *ses = srv_loop_session(s.loop);
        s.chat = o->chat != FL_CHAT_UNKNOWN ? o->chat : fl_chat_detect_file(eng_session_gguf(ses));
        if (o->constraint.grammar) /* --grammar: its tokens are the model's */
            rc = fl_grammar_check(o->constraint.grammar, o->constraint.grammar_len,
                                  eng_session_tokenizer(ses), err);
        const struct eng_kv *kv = eng_session_kv(ses);
        struct srv_stats st;
        srv_loop_stats(s.loop, &st);
        if (!rc)
            fprintf(stderr, "faultline serve: %s ready: %d sequences, %d KV cells (K %s, V %s), "
                    "chat format %s%s\n", s.model_name, eng_session_n_seq(ses),
                    eng_session_cells_free(ses), eng_kv_type_name(eng_kv_type_k(kv)), eng_kv_type_name(eng_kv_type_v(kv)),
                    fl_chat_format_name(s.chat), spec_words(o, &st));
    }
    while (!rc && !g_signal) {
        struct timespec ts = { 0, 100 * 1000000L };
        nanosleep(&ts, NULL);
    }
    if (!rc)
        fprintf(stderr, "faultline serve: %s: no new requests; in-flight ones get %.0f s\n",
                strsignal(g_signal), o->drain_s);
    if (s.d) {
        const MHD_socket lfd = MHD_quiesce_daemon(s.d);
        if (lfd != MHD_INVALID_SOCKET)
            close(lfd);
    }
    srv_loop_stop(s.loop, o->drain_s);
    if (s.d)
        MHD_stop_daemon(s.d);
    srv_loop_free(s.loop);
    pthread_mutex_destroy(&s.mu);
    return rc;
}
