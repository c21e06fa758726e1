/* tokenizer-bpe.c: byte-level BPE ("gpt2" vocabularies).
 *
 * A fragment is first split into words by the pre-tokenizer regexes of its
 * tokenizer.ggml.pre (each regex splits every piece the previous one left,
 * keeping the unmatched gaps as pieces), each word is mapped to GPT-2's
 * byte-level alphabet, and adjacent symbols are merged lowest rank first.
 *
 * llama.cpp runs its regexes either through hand-written splitters (gpt-2,
 * llama3, qwen2) or std::regex over text in which every non-ASCII code point
 * is collapsed to its Unicode category. PCRE2 with UCP over the real text
 * gives the same splits for the same regex strings, with two exceptions that
 * are handled here: U+0085 (NEL) is whitespace for llama.cpp but not for
 * PCRE2's \s, and PCRE2 needs valid UTF-8 while llama.cpp re-encodes
 * whatever it decoded (surrogates included). The subject PCRE2 sees is
 * therefore a same-length copy with NEL written as U+00A0 (also whitespace,
 * also two bytes) and surrogates as U+E000 (three bytes, also of no letter,
 * number, mark, punctuation or symbol category). Where llama.cpp's
 * collapsing changes what a regex means, the regex below is adjusted. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/merge-heap.h"
#include "text/tokenizer-impl.h"
#include "text/unicode.h"

/* ---- pre-tokenizer regexes (llama.cpp's llm_tokenizer_bpe table) ---------- */

#define RX_CONTRACTIONS "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
#define RX_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
#define RX_LLAMA3 RX_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}" \
    "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RX_QWEN2 RX_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}" \
    "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RX_QWEN35 RX_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}" \
    "| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
/* gpt-4o / o200k (gpt-oss): llama.cpp's adaptation, where a cased letter is
 * "any letter but a-z" / "any letter but A-Z" (so non-ASCII letters count as
 * both, and marks are not letters). */
#define RX_UPPER "((?=[\\p{L}])([^a-z]))"
#define RX_LOWER "((?=[\\p{L}])([^A-Z]))"
#define RX_GPT4O "[^\\r\\n\\p{L}\\p{N}]?" RX_UPPER "*" RX_LOWER "+" RX_CONTRACTIONS "?" \
    "|[^\\r\\n\\p{L}\\p{N}]?" RX_UPPER "+" RX_LOWER "*" RX_CONTRACTIONS "?" \
    "|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RX_TEKKEN "[^\\r\\n\\p{L}\\p{N}]?" RX_UPPER "*" RX_LOWER "+" \
    "|[^\\r\\n\\p{L}\\p{N}]?" RX_UPPER "+" RX_LOWER "*" \
    "|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

/* llama.cpp matches regexes without \p{..} on text in which non-ASCII
 * whitespace has become U+000B, so a class range that spans such a space
 * (U+3000 lies in U+0800-U+4E00) never matches it there: hence (?!\s). */
#define RX_CJK "(?:(?!\\s)[\\x{4E00}-\\x{9FA5}\\x{800}-\\x{4E00}\\x{AC00}-\\x{D7FF}])+"
static const char *const rx_default[] = {
    "[\\p{P}\\$\\+<=>\\^~\\|]+", RX_GPT2, "\\p{N}+", "[0-9][0-9][0-9]", NULL };
static const char *const rx_gpt2[] = { RX_GPT2, NULL };
static const char *const rx_llama3[] = { RX_LLAMA3, NULL };
static const char *const rx_qwen2[] = { RX_QWEN2, NULL };
static const char *const rx_qwen35[] = { RX_QWEN35, NULL };
static const char *const rx_gpt4o[] = { RX_GPT4O, NULL };
static const char *const rx_tekken[] = { RX_TEKKEN, NULL };
static const char *const rx_starcoder[] = { "\\p{N}", RX_GPT2, NULL };
static const char *const rx_falcon[] = {
    "[\\p{P}\\$\\+<=>\\^~\\|`]+", RX_GPT2, "[0-9][0-9][0-9]", NULL };
static const char *const rx_deepseek_llm[] = {
    "[\r\n]",
    "\\s?[A-Za-z\\x{B5}\\x{C0}-\\x{D6}\\x{D8}-\\x{F6}\\x{F8}-\\x{1BA}\\x{1BC}-\\x{1BF}\\x{1C4}-\\x{293}\\x{295}-\\x{2AF}\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37B}-\\x{37D}\\x{37F}\\x{386}\\x{388}-\\x{38A}\\x{38C}\\x{38E}-\\x{3A1}\\x{3A3}-\\x{3F5}\\x{3F7}-\\x{481}\\x{48A}-\\x{52F}\\x{531}-\\x{556}\\x{10A0}-\\x{10C5}\\x{13A0}-\\x{13F5}\\x{13F8}-\\x{13FD}\\x{1C90}-\\x{1CBA}\\x{1CBD}-\\x{1CBF}\\x{1D00}-\\x{1D2B}\\x{1D6B}-\\x{1D77}\\x{1D79}-\\x{1D9A}\\x{1E00}-\\x{1F15}\\x{1F18}-\\x{1F1D}\\x{1F20}-\\x{1F45}\\x{1F48}-\\x{1F4D}\\x{1F50}-\\x{1F57}\\x{1F59}\\x{1F5B}\\x{1F5D}\\x{1F5F}-\\x{1F7D}\\x{1F80}-\\x{1FB4}\\x{1FB6}-\\x{1FBC}\\x{1FBE}\\x{1FC2}-\\x{1FC4}\\x{1FC6}-\\x{1FCC}\\x{1FD0}-\\x{1FD3}\\x{1FD6}-\\x{1FDB}\\x{1FE0}-\\x{1FEC}\\x{1FF2}-\\x{1FF4}\\x{1FF6}-\\x{1FFC}\\x{2102}\\x{2107}\\x{210A}-\\x{2113}\\x{2115}\\x{2119}-\\x{211D}\\x{2124}\\x{2126}\\x{2128}\\x{212A}-\\x{212D}\\x{212F}-\\x{2134}\\x{2139}\\x{213C}-\\x{213F}\\x{2145}-\\x{2149}\\x{214E}\\x{2183}\\x{2184}\\x{2C00}-\\x{2C7B}\\x{2C7E}-\\x{2CE4}\\x{2CEB}-\\x{2CEE}\\x{2CF2}\\x{2CF3}\\x{A640}-\\x{A66D}\\x{A680}-\\x{A69B}\\x{A722}-\\x{A76F}\\x{A771}-\\x{A787}\\x{A78B}-\\x{A78E}\\x{AB70}-\\x{ABBF}\\x{FB00}-\\x{FB06}\\x{FB13}-\\x{FB17}\\x{FF21}-\\x{FF3A}\\x{FF41}-\\x{FF5A}\\x{10400}-\\x{1044F}\\x{104B0}-\\x{104D3}\\x{104D8}-\\x{104FB}\\x{10C80}-\\x{10CB2}\\x{10CC0}-\\x{10CF2}\\x{118A0}-\\x{118DF}\\x{1E900}-\\x{1E943}]+",
    "\\s?(?:(?!\\s)[!-/:-~\\x{FF01}-\\x{FF0F}\\x{FF1A}-\\x{FF5E}\\x{2018}-\\x{201F}\\x{3000}-\\x{3002}])+",
    "\\s+$",
    RX_CJK,
    "\\p{N}+",
    NULL };
static const char *const rx_deepseek_coder[] = {
    "[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", RX_CJK, "\\p{N}", NULL };
/* In llama.cpp's category matching '~' is in neither \p{P} nor \p{S} (its
 * ASCII table for symbols leaves it out), so it may lead a word and never
 * joins a punctuation run. */
static const char *const rx_deepseek3[] = {
    "\\p{N}{1,3}",
    "[\\x{4E00}-\\x{9FA5}\\x{3040}-\\x{309F}\\x{30A0}-\\x{30FF}]+",
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|(?:~|[^\r\n\\p{L}\\p{P}\\p{S}])?[\\p{L}\\p{M}]+"
    "| ?(?:(?!~)[\\p{P}\\p{S}])+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
    NULL };
/* Kimi K2: llama.cpp's hand-written splitter for its regex, whose "Han" is
 * a fixed list of CJK ideograph blocks and whose words are letters of any
 * case (no marks) that are not Han. */
#define RX_HAN "[\\x{4E00}-\\x{9FFF}\\x{3400}-\\x{4DBF}\\x{20000}-\\x{2A6DF}\\x{2A700}-\\x{2B73F}" \
    "\\x{2B740}-\\x{2B81F}\\x{2B820}-\\x{2CEAF}\\x{2CEB0}-\\x{2EBEF}\\x{F900}-\\x{FAFF}\\x{2F800}-\\x{2FA1F}]"
static const char *const rx_kimi_k2[] = {
    RX_HAN "+|[^\\r\\n\\p{L}\\p{N}]?(?:(?!" RX_HAN ")\\p{L})+"
    "(?:'[sStTmMdD]|'[rR][eE]|'[vV][eE]|'[lL][lL])?"
    "|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL };
static const char *const rx_poro[] = { " ?[^(\\s|.,!?\\x{2026}\\x{3002}\\x{FF0C}\\x{3001}\\x{964}\\x{6D4}\\x{60C})]+", NULL };
static const char *const rx_viking[] = { " ?[^(\\s|.,!?\\x{2026}\\x{3002}\\x{FF0C}\\x{3001}\\x{964}\\x{6D4}\\x{60C})]+", "\\p{N}", NULL };

enum { PRE_CLEAN = 1, PRE_IGNORE_MERGES = 2, PRE_ADD_BOS = 4, PRE_NO_BOS = 8 };

struct pre_entry {
    const char *names; /* '|'-separated, as tokenizer.ggml.pre spells them */
    const char *const *rx;
    unsigned flags;
};

static const struct pre_entry pre_table[] = {
    { "default", rx_default, PRE_CLEAN },
    { "llama3|llama-v3|llama-bpe|falcon3|falcon-h1|pixtral|midm-2.0|lfm2|jina-v5-nano",
      rx_llama3, PRE_CLEAN | PRE_IGNORE_MERGES | PRE_ADD_BOS },
    { "dbrx|smaug-bpe", rx_llama3, PRE_CLEAN },
    { "glm4|chatglm-bpe", rx_llama3, PRE_CLEAN | PRE_NO_BOS },
    { "deepseek-llm", rx_deepseek_llm, 0 },
    { "deepseek-coder", rx_deepseek_coder, 0 },
    { "deepseek-v3|hunyuan-dense|joyai-llm", rx_deepseek3, 0 },
    { "falcon", rx_falcon, PRE_CLEAN },
    { "starcoder|refact|codeshell|exaone|minerva-7b|mellum2", rx_starcoder, PRE_CLEAN },
    { "command-r|smollm", rx_starcoder, 0 },
    { "gpt-2|phi-2|jina-es|jina-de|gigachat|jina-v2-es|jina-v2-de|a.x-4.0|mellum|modern-bert"
      "|mpt|olmo|jais|exaone4|jina-v1-en|jina-v2-code|roberta-bpe", rx_gpt2, PRE_CLEAN },
    { "trillion|granite-docling", rx_gpt2, 0 },
    { "qwen2|deepseek-r1-qwen|kormo|f2llmv2|hunyuan|solar-open", rx_qwen2, 0 },
    { "stablelm2|megrez", rx_qwen2, PRE_CLEAN },
    { "qwen35", rx_qwen35, 0 },
    { "gpt-4o|llama4|kanana2|talkie|minimax-m2", rx_gpt4o, 0 },
    { "tekken", rx_tekken, PRE_IGNORE_MERGES | PRE_ADD_BOS },
    { "kimi-k2", rx_kimi_k2, 0 },
    { "poro-chat", rx_poro, 0 },
    { "bloom|gpt3-finnish", rx_poro, PRE_CLEAN },
    { "viking", rx_viking, 0 },
};

static bool name_in(const char *names, const char *pre)
{
    size_t n = strlen(pre);
    for (const char *p = names; *p;) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == n && memcmp(p, pre, n) == 0)
            return true;
        p += len + (bar ? 1 : 0);
    }
    return false;
}

static int compile_all(struct fl_tokenizer *tok, const char *const *rx, struct fl_err *err)
{
    for (int i = 0; rx[i]; i++) {
        int ec;
        PCRE2_SIZE eo;
        pcre2_code *re = pcre2_compile((PCRE2_SPTR)rx[i], PCRE2_ZERO_TERMINATED,
                                       PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY |
                                           PCRE2_NO_UTF_CHECK,
                                       &ec, &eo, NULL);
        if (!re) {
            PCRE2_UCHAR msg[128];
            pcre2_get_error_message(ec, msg, sizeof(msg));
            return fl_err_set(err, -EINVAL, "pre-tokenizer '%s': regex %d: %s at %zu",
                              tok->pre, i, (const char *)msg, (size_t)eo);
        }
        /* JIT is an optimisation only: without it matching is still right. */
        (void)pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);
        tok->regex[tok->n_regex++] = re;
    }
    return 0;
}

int fl_bpe_setup_pre(struct fl_tokenizer *tok, const char *pre, struct fl_err *err)
{
    const struct pre_entry *e = NULL;
    tok->clean_spaces = true;
    if (!pre || !*pre) {
        snprintf(tok->warning, sizeof(tok->warning),
                 "missing pre-tokenizer type, using 'default' (quality will be degraded)");
        pre = "default";
    }
    for (size_t i = 0; i < sizeof(pre_table) / sizeof(pre_table[0]); i++) {
        if (name_in(pre_table[i].names, pre)) {
            e = &pre_table[i];
            break;
        }
    }
    if (!e) {
        snprintf(tok->warning, sizeof(tok->warning),
                 "unknown pre-tokenizer type '%.64s', using 'default'", pre);
        e = &pre_table[0];
    }
    snprintf(tok->pre, sizeof(tok->pre), "%s", e == &pre_table[0] ? "default" : pre);
    tok->clean_spaces = (e->flags & PRE_CLEAN) != 0;
    tok->ignore_merges = (e->flags & PRE_IGNORE_MERGES) != 0;
    if (e->flags & PRE_ADD_BOS)
        tok->add_bos = true;
    if (e->flags & PRE_NO_BOS)
        tok->bos = FL_TOKEN_NULL;
    return compile_all(tok, e->rx, err);
}

void fl_bpe_free_regex(struct fl_tokenizer *tok)
{
    for (int i = 0; i < tok->n_regex; i++)
        pcre2_code_free((pcre2_code *)tok->regex[i]);
    tok->n_regex = 0;
}

/* ---- splitting ---------------------------------------------------------- */

struct span {
    size_t b, e;
};

struct spans {
    struct span *v;
    size_t n, cap;
};

static int spans_push(struct spans *s, size_t b, size_t e)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 64;
        struct span *v = realloc(s->v, cap * sizeof(*v));
        if (!v)
            return -ENOMEM;
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = (struct span){ b, e };
    return 0;
}

/* One regex over every piece of in: matches and the gaps between them both
 * become pieces of out (llama.cpp's unicode_regex_split_stl). Each piece is
 * matched as a subject of its own, so ^, $ and lookarounds stop at its
 * edges as they do for std::regex_iterator over a sub-range. */
static int split_one(const pcre2_code *re, const char *work, const struct spans *in,
                     struct spans *out, pcre2_match_data *md, pcre2_match_context *mc)
{
    for (size_t k = 0; k < in->n; k++) {
        const char *subj = work + in->v[k].b;
        size_t len = in->v[k].e - in->v[k].b, pos = 0, last = 0;
        int rc = 0;
        while (pos < len) {
            int m = pcre2_match(re, (PCRE2_SPTR)subj, len, pos, PCRE2_NO_UTF_CHECK, md, mc);
            if (m == PCRE2_ERROR_NOMATCH)
                break;
            if (m < 0)
                return -EINVAL; /* match limit: pathological input */
            const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
            size_t ms = ov[0], me = ov[1];
            if (ms > last)
                rc = spans_push(out, in->v[k].b + last, in->v[k].b + ms);
            if (!rc && me > ms)
                rc = spans_push(out, in->v[k].b + ms, in->v[k].b + me);
            if (rc)
                return rc;
            last = me;
            /* An empty match moves on by one code point, as the iterator does. */
            pos = me > ms ? me : me + fl_utf8_len((uint8_t)subj[me]);
        }
        if (last < len && (rc = spans_push(out, in->v[k].b + last, in->v[k].b + len)))
            return rc;
    }
    return 0;
}

/* norm: the text re-encoded from the code points llama.cpp decodes (bad
 * bytes become U+FFFD); work: the same bytes made acceptable to PCRE2. */
static int normalize(const char *text, size_t len, char **norm, char **work, size_t *n_out)
{
    char *a = malloc(len * 3 + 1), *b = malloc(len * 3 + 1);
    size_t n = 0;
    if (!a || !b) {
        free(a);
        free(b);
        return -ENOMEM;
    }
    for (size_t off = 0; off < len;) {
        uint32_t cp = fl_utf8_decode(text, len, &off);
        size_t k = fl_utf8_encode(cp, a + n);
        uint32_t wcp = cp == 0x85 ? 0xA0 : (cp >= 0xD800 && cp <= 0xDFFF) ? 0xE000 : cp;
        fl_utf8_encode(wcp, b + n);
        n += k;
    }
    *norm = a;
    *work = b;
    *n_out = n;
    return 0;
}

/* Repeated groups such as gpt-4o's ((?=\p{L})[^a-z])* keep one backtrack
 * frame per character, so a long word (a base64 blob) needs a deep stack:
 * JIT matching gets a stack that may grow to 256 MiB of address space (only
 * touched pages cost memory), the interpreter a heap limit as large. */
#define MATCH_STACK_MAX (256u << 20)

static int pre_split(const struct fl_tokenizer *tok, const char *work, size_t n,
                     struct spans *result)
{
    struct spans cur = { 0 }, next = { 0 };
    pcre2_match_data *md = pcre2_match_data_create(1, NULL);
    pcre2_match_context *mc = pcre2_match_context_create(NULL);
    pcre2_jit_stack *js = pcre2_jit_stack_create(32u << 10, MATCH_STACK_MAX, NULL);
    int rc = md && mc ? spans_push(&cur, 0, n) : -ENOMEM;
    if (mc) {
        pcre2_set_heap_limit(mc, MATCH_STACK_MAX >> 10); /* in KiB */
        if (js)
            pcre2_jit_stack_assign(mc, NULL, js);
    }
    for (int i = 0; !rc && i < tok->n_regex; i++) {
        next.n = 0;
        rc = split_one((const pcre2_code *)tok->regex[i], work, &cur, &next, md, mc);
        struct spans t = cur;
        cur = next;
        next = t;
    }
    pcre2_jit_stack_free(js);
    pcre2_match_context_free(mc);
    pcre2_match_data_free(md);
    free(next.v);
    if (rc) {
        free(cur.v);
        return rc;
    }
    *result = cur;
    return 0;
}

/* ---- merging ------------------------------------------------------------ */

struct sym {
    uint32_t off, n;
    int32_t prev, next, id;
};

struct bigram {
    int32_t left, right, rank;
    uint32_t lsz, rsz;
};

struct merge_state {
    const struct fl_tokenizer *tok;
    const char *enc;
    struct sym *sym;
    struct fl_merge_heap heap; /* of struct bigram */
};

/* Lowest merge rank first; ties: the leftmost. */
static bool bigram_before(const void *pa, const void *pb)
{
    const struct bigram *a = pa, *b = pb;
    return a->rank < b->rank || (a->rank == b->rank && a->left < b->left);
}

static int add_bigram(struct merge_state *st, int32_t l, int32_t r)
{
    if (l < 0 || r < 0 || st->sym[l].id < 0 || st->sym[r].id < 0)
        return 0;
    int32_t rank = fl_tok_merge_rank(st->tok, st->sym[l].id, st->sym[r].id);
    if (rank < 0)
        return 0;
    struct bigram g = { l, r, rank, st->sym[l].n, st->sym[r].n };
    return fl_merge_heap_push(&st->heap, &g);
}

static int merge_word(struct merge_state *st, size_t n_sym)
{
    int rc = 0;
    fl_merge_heap_clear(&st->heap);
    for (size_t i = 1; i < n_sym && !rc; i++)
        rc = add_bigram(st, (int32_t)i - 1, (int32_t)i);
    while (!rc && st->heap.n > 0) {
        struct bigram g;
        fl_merge_heap_pop(&st->heap, &g);
        struct sym *l = &st->sym[g.left], *r = &st->sym[g.right];
        /* Stale: one side has merged since this pair was queued. */
        if (l->n != g.lsz || r->n != g.rsz || r->n == 0)
            continue;
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0)
            st->sym[r->next].prev = g.left;
        l->id = fl_tok_find(st->tok, st->enc + l->off, l->n);
        rc = add_bigram(st, l->prev, g.left);
        if (!rc)
            rc = add_bigram(st, g.left, l->next);
    }
    return rc;
}

/* Symbols that end up as no token fall back to the tokens of their single
 * bytes, when there are any (llama.cpp drops the rest silently). */
static int emit_word(struct merge_state *st, struct fl_tokvec *out)
{
    int rc = 0;
    for (int32_t i = 0; i != -1 && !rc; i = st->sym[i].next) {
        const struct sym *s = &st->sym[i];
        if (s->id >= 0) {
            rc = fl_tokvec_push(out, s->id);
            continue;
        }
        for (uint32_t j = 0; j < s->n && !rc; j++) {
            int32_t t = fl_tok_find(st->tok, st->enc + s->off + j, 1);
            if (t >= 0)
                rc = fl_tokvec_push(out, t);
        }
    }
    return rc;
}

/* Maps raw bytes to the byte-level alphabet; returns the encoded length. */
static size_t byte_encode(const char *src, size_t n, char *dst)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += fl_utf8_encode(fl_byte_to_cpt((uint8_t)src[i]), dst + k);
    return k;
}

static int tokenize_word(struct merge_state *st, char *enc, size_t n, struct fl_tokvec *out)
{
    st->enc = enc;
    if (st->tok->ignore_merges) {
        int32_t id = fl_tok_find(st->tok, enc, n);
        if (id >= 0)
            return fl_tokvec_push(out, id);
    }
    size_t n_sym = 0;
    for (size_t off = 0; off < n; n_sym++) {
        size_t cl = fl_utf8_len((uint8_t)enc[off]);
        if (cl > n - off)
            cl = n - off;
        st->sym[n_sym] = (struct sym){ (uint32_t)off, (uint32_t)cl, (int32_t)n_sym - 1,
                                       off + cl == n ? -1 : (int32_t)n_sym + 1,
                                       fl_tok_find(st->tok, enc + off, cl) };
        off += cl;
    }
    if (n_sym == 0)
        return 0;
    int rc = merge_word(st, n_sym);
    return rc ? rc : emit_word(st, out);
}

int fl_bpe_tokenize(const struct fl_tokenizer *tok, const char *text, size_t len,
                    struct fl_tokvec *out)
{
    char *norm = NULL, *work = NULL, *enc = NULL;
    size_t n = 0;
    struct spans words = { 0 };
    struct merge_state st = { .tok = tok };
    fl_merge_heap_init(&st.heap, sizeof(struct bigram), bigram_before);
    int rc = normalize(text, len, &norm, &work, &n);
    if (!rc)
        rc = pre_split(tok, work, n, &words);
    /* A byte becomes at most two bytes of the byte-level alphabet. */
    if (!rc && (!(enc = malloc(2 * n + 1)) || !(st.sym = malloc((2 * n + 1) * sizeof(*st.sym)))))
        rc = -ENOMEM;
    for (size_t w = 0; !rc && w < words.n; w++) {
        size_t k = byte_encode(norm + words.v[w].b, words.v[w].e - words.v[w].b, enc);
        rc = tokenize_word(&st, enc, k, out);
    }
    free(st.sym);
    fl_merge_heap_free(&st.heap);
    free(enc);
    free(words.v);
    free(norm);
    free(work);
    return rc;
}

/* ---- rendering ---------------------------------------------------------- */

/* Byte-level symbols back to bytes (llama.cpp's llama_decode_text). A code
 * point outside the alphabet is spelled "[UNK_BYTE_0x<its utf-8 hex><the
 * whole token text>]", as llama.cpp does. Two passes: size, then write. */
static size_t decode_into(const char *text, size_t len, char *buf)
{
    size_t n = 0;
    for (size_t off = 0; off < len;) {
        uint32_t cp = fl_utf8_decode(text, len, &off);
        int b = fl_cpt_to_byte(cp);
        if (b >= 0) {
            if (buf)
                buf[n] = (char)b;
            n++;
            continue;
        }
        char u[4], tmp[64];
        size_t k = fl_utf8_encode(cp, u), t = (size_t)snprintf(tmp, sizeof(tmp), "[UNK_BYTE_0x");
        for (size_t j = 0; j < k; j++)
            t += (size_t)snprintf(tmp + t, sizeof(tmp) - t, "%02x", (uint8_t)u[j]);
        if (buf) {
            memcpy(buf + n, tmp, t);
            memcpy(buf + n + t, text, len);
            buf[n + t + len] = ']';
        }
        n += t + len + 1;
    }
    return n;
}

char *fl_bpe_decode_text(const char *text, size_t len, uint32_t *out_len)
{
    size_t n = decode_into(text, len, NULL);
    char *buf = malloc(n + 1);
    if (!buf)
        return NULL;
    decode_into(text, len, buf);
    buf[n] = 0;
    *out_len = (uint32_t)n;
    return buf;
}

int32_t fl_bpe_byte_token(const struct fl_tokenizer *tok, uint8_t b)
{
    char u[4];
    size_t k = fl_utf8_encode(fl_byte_to_cpt(b), u);
    return fl_tok_find(tok, u, k);
}

int fl_bpe_split(const struct fl_tokenizer *tok, const char *text, size_t len, char **norm_out,
                 size_t **ends, size_t *n_words)
{
    char *norm = NULL, *work = NULL;
    size_t n = 0;
    struct spans words = { 0 };
    int rc = normalize(text, len, &norm, &work, &n);
    if (!rc)
        rc = pre_split(tok, work, n, &words);
    free(work);
    if (!rc && !(*ends = malloc((words.n + 1) * sizeof(**ends))))
        rc = -ENOMEM;
    if (rc) {
        free(norm);
        free(words.v);
        return rc;
    }
    for (size_t i = 0; i < words.n; i++)
        (*ends)[i] = words.v[i].e;
    *n_words = words.n;
    *norm_out = norm;
    free(words.v);
    return 0;
}
