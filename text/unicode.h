/* unicode.h: the few UTF-8 helpers the tokenizers need, with llama.cpp's
 * treatment of malformed input (so token ids match its reference runs). */
#ifndef FL_UNICODE_H
#define FL_UNICODE_H

#include <stddef.h>
#include <stdint.h>

#define FL_UTF8_REPLACEMENT 0xFFFDu

/* Length of the sequence a byte starts, from its high nibble only (1 for
 * continuation bytes): how llama.cpp splits text into symbols. */
size_t fl_utf8_len(uint8_t lead);

/* Decodes the code point at s[*off] (*off < len) and advances *off. A bad
 * lead byte or a missing continuation byte yields U+FFFD and advances one
 * byte. Overlong forms and surrogates are accepted as llama.cpp does. */
uint32_t fl_utf8_decode(const char *s, size_t len, size_t *off);

/* The bytes of s[0, n) that end on a whole character: a token's piece may
 * end inside one (the rest comes with the next); a stream sends, and a
 * reasoning budget forces, only after whole ones. A byte that starts no
 * character (0xC0, 0xC1, 0xF5..0xFF) is whole, as a decoder replaces it. */
size_t fl_utf8_whole(const char *s, size_t n);

/* Encodes cp into out (4 bytes of room); code points past U+10FFFF become
 * U+FFFD. Returns the number of bytes written. */
size_t fl_utf8_encode(uint32_t cp, char *out);

/* GPT-2's byte-level alphabet: the code point that stands for byte b, and
 * back (-1 when cp stands for no byte). */
uint32_t fl_byte_to_cpt(uint8_t b);
int fl_cpt_to_byte(uint32_t cp);

#endif
