/* JSON strings escaped and JSON text checked (see util/json.h). */
#include "util/json.h"

#include <string.h>

/* The length of the UTF-8 sequence at s (at most n bytes), or 0 when it is
 * not one (overlong forms and surrogates included). */
static size_t utf8_len(const unsigned char* s, size_t n) {
  const unsigned char c = s[0];
  size_t len;
  unsigned lo = 0x80, hi = 0xbf; /* the second byte's range */
  if (c < 0x80) {
    return 1;
  } else if (c >= 0xc2 && c <= 0xdf) {
    len = 2;
  } else if (c >= 0xe0 && c <= 0xef) {
    len = 3;
    lo = c == 0xe0 ? 0xa0 : 0x80;
    hi = c == 0xed ? 0x9f : 0xbf;
  } else if (c >= 0xf0 && c <= 0xf4) {
    len = 4;
    lo = c == 0xf0 ? 0x90 : 0x80;
    hi = c == 0xf4 ? 0x8f : 0xbf;
  } else {
    return 0;
  }
  if (n < len || s[1] < lo || s[1] > hi) {
    return 0;
  }
  for (size_t i = 2; i < len; i++) {
    if (s[i] < 0x80 || s[i] > 0xbf) {
      return 0;
    }
  }
  return len;
}

size_t tutti_json_escape(const char* s, size_t n, size_t* used, char* out, size_t cap) {
  static const char hex[] = "0123456789abcdef";
  const unsigned char* p = (const unsigned char*)s;
  size_t in = 0, at = 0;
  while (in < n) {
    char e[8];
    size_t elen, take = 1;
    const unsigned char c = p[in];
    if (c == '"' || c == '\\') {
      e[0] = '\\', e[1] = (char)c, elen = 2;
    } else if (c == '\n' || c == '\t' || c == '\r') {
      e[0] = '\\', e[1] = c == '\n' ? 'n' : c == '\t' ? 't' : 'r', elen = 2;
    } else if (c < 0x20) {
      memcpy(e, "\\u00", 4);
      e[4] = hex[c >> 4], e[5] = hex[c & 15], elen = 6;
    } else if (c < 0x80) {
      e[0] = (char)c, elen = 1;
    } else if ((take = utf8_len(p + in, n - in)) != 0) {
      memcpy(e, p + in, take);
      elen = take;
    } else {
      memcpy(e, "\\ufffd", 6), elen = 6, take = 1;
    }
    if (at + elen + 1 > cap) {
      break;
    }
    memcpy(out + at, e, elen);
    at += elen;
    in += take;
  }
  if (cap > 0) {
    out[at] = '\0';
  }
  if (used != NULL) {
    *used = in;
  }
  return at;
}

void tutti_json_fput(FILE* f, const char* s) {
  if (s == NULL) {
    fputs("null", f);
    return;
  }
  char chunk[512];
  size_t n = strlen(s);
  fputc('"', f);
  while (n > 0) {
    size_t used = 0;
    fwrite(chunk, 1, tutti_json_escape(s, n, &used, chunk, sizeof chunk), f);
    s += used;
    n -= used;
  }
  fputc('"', f);
}

/* The checker: a cursor over the text. */
struct scan {
  const unsigned char* p;
  const unsigned char* end;
};

static void ws(struct scan* s) {
  while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r')) {
    s->p++;
  }
}

static int is_hex(unsigned char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static int digits(struct scan* s) {
  const unsigned char* start = s->p;
  while (s->p < s->end && *s->p >= '0' && *s->p <= '9') {
    s->p++;
  }
  return s->p > start;
}

static int string(struct scan* s) {
  s->p++; /* the opening quote */
  while (s->p < s->end) {
    const unsigned char c = *s->p;
    if (c == '"') {
      s->p++;
      return 1;
    }
    if (c < 0x20) {
      return 0;
    }
    if (c == '\\') {
      if (s->end - s->p < 2) {
        return 0;
      }
      const unsigned char e = s->p[1];
      if (e == 'u') {
        if (s->end - s->p < 6 || !is_hex(s->p[2]) || !is_hex(s->p[3]) || !is_hex(s->p[4]) ||
            !is_hex(s->p[5])) {
          return 0;
        }
        s->p += 6;
      } else if (strchr("\"\\/bfnrt", e) != NULL && e != '\0') {
        s->p += 2;
      } else {
        return 0;
      }
      continue;
    }
    const size_t len = utf8_len(s->p, (size_t)(s->end - s->p));
    if (len == 0) {
      return 0;
    }
    s->p += len;
  }
  return 0;
}

static int number(struct scan* s) {
  if (*s->p == '-') {
    s->p++;
  }
  if (s->p < s->end && *s->p == '0') {
    s->p++;
  } else if (!digits(s)) {
    return 0;
  }
  if (s->p < s->end && *s->p == '.') {
    s->p++;
    if (!digits(s)) {
      return 0;
    }
  }
  if (s->p < s->end && (*s->p == 'e' || *s->p == 'E')) {
    s->p++;
    if (s->p < s->end && (*s->p == '+' || *s->p == '-')) {
      s->p++;
    }
    if (!digits(s)) {
      return 0;
    }
  }
  return 1;
}

static int word(struct scan* s, const char* w) {
  const size_t n = strlen(w);
  if ((size_t)(s->end - s->p) < n || memcmp(s->p, w, n) != 0) {
    return 0;
  }
  s->p += n;
  return 1;
}

static int value(struct scan* s, int depth) {
  ws(s);
  if (s->p >= s->end) {
    return 0;
  }
  const unsigned char c = *s->p;
  if (c == '"') {
    return string(s);
  }
  if (c == 't' || c == 'f' || c == 'n') {
    return word(s, c == 't' ? "true" : c == 'f' ? "false" : "null");
  }
  if (c != '{' && c != '[') {
    return number(s);
  }
  if (depth <= 0) {
    return 0;
  }
  const unsigned char close = c == '{' ? '}' : ']';
  s->p++;
  ws(s);
  if (s->p < s->end && *s->p == close) {
    s->p++;
    return 1;
  }
  for (;;) {
    if (c == '{') {
      ws(s);
      if (s->p >= s->end || *s->p != '"' || !string(s)) {
        return 0;
      }
      ws(s);
      if (s->p >= s->end || *s->p++ != ':') {
        return 0;
      }
    }
    if (!value(s, depth - 1)) {
      return 0;
    }
    ws(s);
    if (s->p >= s->end) {
      return 0;
    }
    if (*s->p == ',') {
      s->p++;
      continue;
    }
    if (*s->p == close) {
      s->p++;
      return 1;
    }
    return 0;
  }
}

int tutti_json_valid(const char* text, size_t n, int max_depth) {
  struct scan s = {(const unsigned char*)text, (const unsigned char*)text + n};
  if (text == NULL || !value(&s, max_depth)) {
    return 0;
  }
  ws(&s);
  return s.p == s.end;
}
