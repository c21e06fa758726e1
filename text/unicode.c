/* unicode.c: see unicode.h. */
#include "text/unicode.h"

size_t fl_utf8_len(uint8_t lead)
{
    static const uint8_t lookup[16] = { 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4 };
    return lookup[lead >> 4];
}

size_t fl_utf8_whole(const char *s, size_t n)
{
    size_t i = n, back = 0;
    while (i > 0 && back < 4 && ((unsigned char)s[i - 1] & 0xC0) == 0x80)
        i--, back++;
    if (i == 0)
        return n;
    const unsigned char lead = (unsigned char)s[i - 1];
    /* a byte no character starts with (0xC0, 0xC1, 0xF5..0xFF) is a whole
     * bad one: nothing that follows completes it */
    const size_t need = lead >= 0xF5 ? 1 : lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC2 ? 2 : 1;
    return need > back + 1 ? i - 1 : n;
}

static int is_cont(const char *s, size_t len, size_t i)
{
    return i < len && ((uint8_t)s[i] & 0xC0) == 0x80;
}

uint32_t fl_utf8_decode(const char *s, size_t len, size_t *off)
{
    size_t i = *off;
    uint8_t c = (uint8_t)s[i];
    if (c < 0x80) {
        *off = i + 1;
        return c;
    }
    /* A continuation byte as a lead, or a sequence cut short: one U+FFFD per
     * byte, exactly as llama.cpp's unicode_cpts_from_utf8 recovers. */
    if ((c & 0xE0) == 0xC0 && is_cont(s, len, i + 1)) {
        *off = i + 2;
        return ((uint32_t)(c & 0x1F) << 6) | ((uint8_t)s[i + 1] & 0x3F);
    }
    if ((c & 0xF0) == 0xE0 && is_cont(s, len, i + 1) && is_cont(s, len, i + 2)) {
        *off = i + 3;
        return ((uint32_t)(c & 0x0F) << 12) | ((uint32_t)((uint8_t)s[i + 1] & 0x3F) << 6) |
               ((uint8_t)s[i + 2] & 0x3F);
    }
    if ((c & 0xF8) == 0xF0 && is_cont(s, len, i + 1) && is_cont(s, len, i + 2) &&
        is_cont(s, len, i + 3)) {
        *off = i + 4;
        return ((uint32_t)(c & 0x07) << 18) | ((uint32_t)((uint8_t)s[i + 1] & 0x3F) << 12) |
               ((uint32_t)((uint8_t)s[i + 2] & 0x3F) << 6) | ((uint8_t)s[i + 3] & 0x3F);
    }
    *off = i + 1;
    return FL_UTF8_REPLACEMENT;
}

size_t fl_utf8_encode(uint32_t cp, char *out)
{
    if (cp > 0x10FFFF)
        cp = FL_UTF8_REPLACEMENT;
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Printable Latin-1 bytes stand for themselves; the other 68 bytes are
 * numbered from U+0100 up in byte order (GPT-2's bytes_to_unicode). */
static int printable(unsigned b)
{
    return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

/* The 68 others, in order: 0x00-0x20, 0x7F-0xA0, 0xAD. */
uint32_t fl_byte_to_cpt(uint8_t b)
{
    if (printable(b))
        return b;
    if (b <= 0x20)
        return 256u + b;
    if (b >= 0x7F && b <= 0xA0)
        return 256u + 33u + (b - 0x7Fu);
    return 256u + 67u; /* 0xAD */
}

int fl_cpt_to_byte(uint32_t cp)
{
    if (cp < 256)
        return printable(cp) ? (int)cp : -1;
    if (cp < 256 + 33)
        return (int)(cp - 256);
    if (cp < 256 + 67)
        return (int)(0x7F + (cp - 256 - 33));
    return cp == 256 + 67 ? 0xAD : -1;
}
