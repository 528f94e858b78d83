/* A small JSON reader and writer (see json.h). */
#include "json.h"

#include <stdlib.h>
#include <string.h>

#include "util/json.h"

struct parser {
  const char* p;
  const char* err;
  int depth;
};

static void skip(struct parser* ps) {
  while (*ps->p == ' ' || *ps->p == '\n' || *ps->p == '\t' || *ps->p == '\r') {
    ps->p++;
  }
}

struct jv* json_new(enum jt t) {
  struct jv* v = calloc(1, sizeof *v);
  if (v != NULL) {
    v->t = t;
  }
  return v;
}

struct jv* json_new_str(const char* s) {
  struct jv* v = json_new(J_STR);
  if (v != NULL) {
    v->str = strdup(s);
  }
  return v;
}

struct jv* json_new_num(double x) {
  struct jv* v = json_new(J_NUM);
  if (v != NULL) {
    v->num = x;
  }
  return v;
}

void json_add(struct jv* to, const char* key, struct jv* v) {
  struct jv** items = realloc(to->items, (size_t)(to->n + 1) * sizeof *items);
  if (items == NULL) {
    json_free(v);
    return;
  }
  to->items = items;
  if (to->t == J_OBJ) {
    char** keys = realloc(to->keys, (size_t)(to->n + 1) * sizeof *keys);
    if (keys == NULL) {
      json_free(v);
      return;
    }
    to->keys = keys;
    to->keys[to->n] = strdup(key != NULL ? key : "");
  }
  to->items[to->n++] = v;
}

static char* parse_string(struct parser* ps) {
  size_t cap = 32, n = 0;
  char* s = malloc(cap);
  ps->p++; /* the opening quote */
  while (s != NULL && *ps->p != '"') {
    char c = *ps->p++;
    if (c == '\0') {
      free(s);
      return NULL;
    }
    if (c == '\\') {
      c = *ps->p++;
      if (c == 'n') {
        c = '\n';
      } else if (c == 't') {
        c = '\t';
      } else if (c == 'u') {
        unsigned x = 0;
        if (sscanf(ps->p, "%4x", &x) != 1) {
          free(s);
          return NULL;
        }
        ps->p += 4;
        c = x < 0x80 ? (char)x : '?';
      } else if (c == '\0') {
        free(s);
        return NULL;
      }
    }
    if (n + 2 > cap) {
      char* t = realloc(s, cap *= 2);
      if (t == NULL) {
        free(s);
        return NULL;
      }
      s = t;
    }
    s[n++] = c;
  }
  if (s != NULL) {
    s[n] = '\0';
    ps->p++;
  }
  return s;
}

static struct jv* parse_value(struct parser* ps) {
  skip(ps);
  if (++ps->depth > 64) {
    return NULL;
  }
  struct jv* v = NULL;
  const char c = *ps->p;
  if (c == '{' || c == '[') {
    v = json_new(c == '{' ? J_OBJ : J_ARR);
    ps->p++;
    skip(ps);
    if (*ps->p == (c == '{' ? '}' : ']')) {
      ps->p++;
      ps->depth--;
      return v;
    }
    for (; v != NULL;) {
      char* key = NULL;
      skip(ps);
      if (c == '{') {
        if (*ps->p != '"' || (key = parse_string(ps)) == NULL) {
          break;
        }
        skip(ps);
        if (*ps->p++ != ':') {
          free(key);
          break;
        }
      }
      struct jv* item = parse_value(ps);
      if (item == NULL) {
        free(key);
        break;
      }
      json_add(v, key, item);
      free(key);
      skip(ps);
      if (*ps->p == ',') {
        ps->p++;
        continue;
      }
      if (*ps->p == (c == '{' ? '}' : ']')) {
        ps->p++;
        ps->depth--;
        return v;
      }
      break;
    }
    json_free(v);
    return NULL;
  }
  if (c == '"') {
    char* s = parse_string(ps);
    v = s != NULL ? json_new(J_STR) : NULL;
    if (v != NULL) {
      v->str = s;
    } else {
      free(s);
    }
  } else if (strncmp(ps->p, "null", 4) == 0 || strncmp(ps->p, "true", 4) == 0) {
    v = json_new(c == 'n' ? J_NULL : J_BOOL);
    if (v != NULL) {
      v->num = c == 't';
    }
    ps->p += 4;
  } else if (strncmp(ps->p, "false", 5) == 0) {
    v = json_new(J_BOOL);
    ps->p += 5;
  } else {
    char* end = NULL;
    const double x = strtod(ps->p, &end);
    if (end != ps->p) {
      v = json_new_num(x);
      ps->p = end;
    }
  }
  ps->depth--;
  return v;
}

struct jv* json_parse(const char* text, const char** err) {
  struct parser ps = {text, NULL, 0};
  struct jv* v = parse_value(&ps);
  skip(&ps);
  if (v == NULL || *ps.p != '\0') {
    json_free(v);
    *err = ps.p;
    return NULL;
  }
  return v;
}

void json_free(struct jv* v) {
  if (v == NULL) {
    return;
  }
  for (int i = 0; i < v->n; i++) {
    json_free(v->items[i]);
    if (v->keys != NULL) {
      free(v->keys[i]);
    }
  }
  free(v->items);
  free(v->keys);
  free(v->str);
  free(v);
}

struct jv* json_get(const struct jv* o, const char* key) {
  for (int i = 0; o != NULL && o->t == J_OBJ && i < o->n; i++) {
    if (strcmp(o->keys[i], key) == 0) {
      return o->items[i];
    }
  }
  return NULL;
}

double json_num(const struct jv* o, const char* key, double dflt) {
  const struct jv* v = json_get(o, key);
  return v != NULL && (v->t == J_NUM || v->t == J_BOOL) ? v->num : dflt;
}

const char* json_str(const struct jv* o, const char* key, const char* dflt) {
  const struct jv* v = json_get(o, key);
  return v != NULL && v->t == J_STR ? v->str : dflt;
}

struct jv* json_take(struct jv* o, const char* key) {
  for (int i = 0; o != NULL && o->t == J_OBJ && i < o->n; i++) {
    if (strcmp(o->keys[i], key) == 0) {
      struct jv* v = o->items[i];
      free(o->keys[i]);
      memmove(&o->items[i], &o->items[i + 1], (size_t)(o->n - i - 1) * sizeof *o->items);
      memmove(&o->keys[i], &o->keys[i + 1], (size_t)(o->n - i - 1) * sizeof *o->keys);
      o->n--;
      return v;
    }
  }
  return NULL;
}

void json_write(FILE* f, const struct jv* v) {
  switch (v->t) {
    case J_NULL:
      fputs("null", f);
      break;
    case J_BOOL:
      fputs(v->num != 0 ? "true" : "false", f);
      break;
    case J_NUM:
      if (v->num == (double)(long long)v->num && v->num < 9e18 && v->num > -9e18) {
        fprintf(f, "%lld", (long long)v->num);
      } else {
        fprintf(f, "%.6g", v->num);
      }
      break;
    case J_STR:
      tutti_json_fput(f, v->str);
      break;
    case J_ARR:
    case J_OBJ:
      fputc(v->t == J_ARR ? '[' : '{', f);
      for (int i = 0; i < v->n; i++) {
        if (i > 0) {
          fputc(',', f);
        }
        if (v->t == J_OBJ) {
          tutti_json_fput(f, v->keys[i]);
          fputc(':', f);
        }
        json_write(f, v->items[i]);
      }
      fputc(v->t == J_ARR ? ']' : '}', f);
      break;
  }
}
