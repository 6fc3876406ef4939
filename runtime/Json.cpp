#include "runtime/Json.h"

#include <clocale>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <locale.h>
#include <map>

namespace kda::rt::json {

const Value *Value::find(std::string_view key) const {
  for (const Member &m : members)
    if (m.key == key)
      return &m.value;
  return nullptr;
}

const char *kindName(Value::Kind kind) {
  switch (kind) {
  case Value::Kind::Null:
    return "null";
  case Value::Kind::Bool:
    return "boolean";
  case Value::Kind::Number:
    return "number";
  case Value::Kind::String:
    return "string";
  case Value::Kind::Array:
    return "array";
  case Value::Kind::Object:
    return "object";
  }
  return "?";
}

std::string aKind(Value::Kind kind) {
  return std::string(kind == Value::Kind::Array || kind == Value::Kind::Object
                         ? "an "
                         : "a ") +
         kindName(kind);
}

namespace {

// Manifests are a few levels deep; the limit keeps hostile input from
// overflowing the stack through recursion.
constexpr int kMaxDepth = 64;

// strtod follows the process locale (a host application may have set one
// with ',' as the decimal point); JSON numbers always use '.'.
double parseDoubleC(const std::string &s) {
  static locale_t cLocale = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
  if (cLocale)
    return strtod_l(s.c_str(), nullptr, cLocale);
  return std::strtod(s.c_str(), nullptr);
}

class Parser {
public:
  Parser(std::string_view text, std::string &error)
      : text_(text), error_(error) {}

  bool parseDocument(Value &out) {
    if (text_.size() >= 3 && text_.substr(0, 3) == "\xEF\xBB\xBF")
      return fail("a UTF-8 byte order mark is not allowed at the start");
    if (!skipWhitespace() || !parseValue(out, 0) || !skipWhitespace())
      return false;
    if (pos_ != text_.size())
      return fail("unexpected " + describeHere() + " after the JSON value");
    return true;
  }

private:
  std::string_view text_;
  std::string &error_;
  size_t pos_ = 0;
  int line_ = 1;
  size_t lineStart_ = 0;

  int column() const { return static_cast<int>(pos_ - lineStart_) + 1; }
  bool atEnd() const { return pos_ >= text_.size(); }
  unsigned char peek() const { return static_cast<unsigned char>(text_[pos_]); }

  bool fail(const std::string &message) {
    error_ =
        std::to_string(line_) + ":" + std::to_string(column()) + ": " + message;
    return false;
  }

  static std::string describeByte(unsigned char c) {
    if (c >= 0x20 && c < 0x7f)
      return std::string("'") + static_cast<char>(c) + "'";
    char buf[16];
    std::snprintf(buf, sizeof buf, "byte 0x%02X", c);
    return buf;
  }
  std::string describeHere() const {
    return atEnd() ? "end of input" : describeByte(peek());
  }

  bool skipWhitespace() {
    while (!atEnd()) {
      unsigned char c = peek();
      if (c == '\n') {
        ++pos_;
        ++line_;
        lineStart_ = pos_;
      } else if (c == ' ' || c == '\t' || c == '\r') {
        ++pos_;
      } else if (c == '/') {
        // Worth its own message: people annotate manifests like JavaScript.
        return fail("comments are not allowed in JSON");
      } else {
        break;
      }
    }
    return true;
  }

  bool parseValue(Value &out, int depth) {
    out.line = line_;
    out.column = column();
    if (atEnd())
      return fail("expected a JSON value, found end of input");
    unsigned char c = peek();
    if (c == '{')
      return parseObject(out, depth);
    if (c == '[')
      return parseArray(out, depth);
    if (c == '"') {
      out.kind = Value::Kind::String;
      return parseString(out.string);
    }
    if (c == '-' || (c >= '0' && c <= '9'))
      return parseNumber(out);
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
      return parseLiteral(out);
    return fail("expected a JSON value, found " + describeHere());
  }

  bool parseLiteral(Value &out) {
    size_t start = pos_;
    while (!atEnd() && ((peek() >= 'a' && peek() <= 'z') ||
                        (peek() >= 'A' && peek() <= 'Z')))
      ++pos_;
    std::string_view word = text_.substr(start, pos_ - start);
    if (word == "true" || word == "false") {
      out.kind = Value::Kind::Bool;
      out.boolean = word == "true";
      return true;
    }
    if (word == "null") {
      out.kind = Value::Kind::Null;
      return true;
    }
    pos_ = start;
    return fail(
        "unknown literal '" + std::string(word) +
        "' (JSON has true, false and null; strings need double quotes)");
  }

  bool parseNumber(Value &out) {
    size_t start = pos_;
    auto digits = [&] {
      size_t n = 0;
      while (!atEnd() && peek() >= '0' && peek() <= '9') {
        ++pos_;
        ++n;
      }
      return n;
    };
    if (peek() == '-')
      ++pos_;
    if (atEnd() || !(peek() >= '0' && peek() <= '9'))
      return fail("expected a digit after '-', found " + describeHere());
    if (peek() == '0') {
      ++pos_;
      if (!atEnd() && peek() >= '0' && peek() <= '9')
        return fail("leading zeros are not allowed in numbers");
    } else {
      digits();
    }
    bool integral = true;
    if (!atEnd() && peek() == '.') {
      ++pos_;
      integral = false;
      if (digits() == 0)
        return fail("expected a digit after '.', found " + describeHere());
    }
    if (!atEnd() && (peek() == 'e' || peek() == 'E')) {
      ++pos_;
      integral = false;
      if (!atEnd() && (peek() == '+' || peek() == '-'))
        ++pos_;
      if (digits() == 0)
        return fail("expected a digit in the exponent, found " +
                    describeHere());
    }
    std::string literal(text_.substr(start, pos_ - start));
    out.kind = Value::Kind::Number;
    out.number = parseDoubleC(literal);
    if (!std::isfinite(out.number)) {
      pos_ = start;
      return fail("number " + literal + " is out of range");
    }
    if (integral) {
      // Exact int64 when it fits; otherwise only the double is meaningful.
      bool negative = literal[0] == '-';
      uint64_t magnitude = 0;
      bool fits = true;
      for (size_t i = negative ? 1 : 0; i < literal.size() && fits; ++i) {
        unsigned d = static_cast<unsigned>(literal[i] - '0');
        if (magnitude > (UINT64_MAX - d) / 10)
          fits = false;
        else
          magnitude = magnitude * 10 + d;
      }
      uint64_t limit = negative ? uint64_t(INT64_MAX) + 1 : uint64_t(INT64_MAX);
      if (fits && magnitude <= limit) {
        out.isInteger = true;
        out.integer = negative ? static_cast<int64_t>(0 - magnitude)
                               : static_cast<int64_t>(magnitude);
      }
    }
    return true;
  }

  bool parseHex4(unsigned &out) {
    out = 0;
    for (int i = 0; i < 4; ++i) {
      if (atEnd())
        return fail("expected 4 hex digits after \\u, found end of input");
      unsigned char c = peek();
      unsigned d;
      if (c >= '0' && c <= '9')
        d = c - '0';
      else if (c >= 'a' && c <= 'f')
        d = c - 'a' + 10;
      else if (c >= 'A' && c <= 'F')
        d = c - 'A' + 10;
      else
        return fail("expected 4 hex digits after \\u, found " +
                    describeByte(c));
      out = out * 16 + d;
      ++pos_;
    }
    return true;
  }

  static void appendUtf8(std::string &s, unsigned cp) {
    if (cp < 0x80) {
      s += static_cast<char>(cp);
    } else if (cp < 0x800) {
      s += static_cast<char>(0xC0 | (cp >> 6));
      s += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      s += static_cast<char>(0xE0 | (cp >> 12));
      s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      s += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      s += static_cast<char>(0xF0 | (cp >> 18));
      s += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      s += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  // Copies one raw UTF-8 sequence starting at a byte >= 0x80, rejecting
  // overlong forms, encoded surrogates and code points above U+10FFFF.
  bool copyUtf8(std::string &s) {
    unsigned char c = peek();
    int length;
    unsigned cp, min;
    if (c >= 0xC2 && c <= 0xDF) {
      length = 2, cp = c & 0x1F, min = 0x80;
    } else if (c >= 0xE0 && c <= 0xEF) {
      length = 3, cp = c & 0x0F, min = 0x800;
    } else if (c >= 0xF0 && c <= 0xF4) {
      length = 4, cp = c & 0x07, min = 0x10000;
    } else {
      return fail("invalid UTF-8 " + describeByte(c) + " in string");
    }
    if (pos_ + length > text_.size())
      return fail("truncated UTF-8 sequence in string");
    for (int i = 1; i < length; ++i) {
      unsigned char cc = static_cast<unsigned char>(text_[pos_ + i]);
      if ((cc & 0xC0) != 0x80)
        return fail("invalid UTF-8 sequence in string");
      cp = (cp << 6) | (cc & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
      return fail("invalid UTF-8 sequence in string");
    s.append(text_.substr(pos_, length));
    pos_ += length;
    return true;
  }

  bool parseString(std::string &out) {
    ++pos_; // opening quote
    out.clear();
    while (true) {
      if (atEnd())
        return fail("unterminated string");
      unsigned char c = peek();
      if (c == '"') {
        ++pos_;
        return true;
      }
      if (c < 0x20)
        return fail("control character " + describeByte(c) +
                    " in string (write it as an escape)");
      if (c >= 0x80) {
        if (!copyUtf8(out))
          return false;
        continue;
      }
      if (c != '\\') {
        out += static_cast<char>(c);
        ++pos_;
        continue;
      }
      ++pos_;
      if (atEnd())
        return fail("unterminated string");
      unsigned char e = peek();
      ++pos_;
      switch (e) {
      case '"':
        out += '"';
        break;
      case '\\':
        out += '\\';
        break;
      case '/':
        out += '/';
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'n':
        out += '\n';
        break;
      case 'r':
        out += '\r';
        break;
      case 't':
        out += '\t';
        break;
      case 'u': {
        unsigned cp;
        if (!parseHex4(cp))
          return false;
        if (cp >= 0xDC00 && cp <= 0xDFFF)
          return fail("unpaired low surrogate \\u escape in string");
        if (cp >= 0xD800 && cp <= 0xDBFF) {
          if (text_.substr(pos_, 2) != "\\u")
            return fail(
                "high surrogate \\u escape not followed by a low surrogate");
          pos_ += 2;
          unsigned low;
          if (!parseHex4(low))
            return false;
          if (low < 0xDC00 || low > 0xDFFF)
            return fail(
                "high surrogate \\u escape not followed by a low surrogate");
          cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
        }
        appendUtf8(out, cp);
        break;
      }
      default:
        --pos_;
        return fail("invalid escape \\" + std::string(1, static_cast<char>(e)) +
                    " in string");
      }
    }
  }

  bool parseArray(Value &out, int depth) {
    if (depth >= kMaxDepth)
      return fail("nesting deeper than " + std::to_string(kMaxDepth) +
                  " levels");
    out.kind = Value::Kind::Array;
    ++pos_; // '['
    if (!skipWhitespace())
      return false;
    if (!atEnd() && peek() == ']') {
      ++pos_;
      return true;
    }
    while (true) {
      out.array.emplace_back();
      if (!parseValue(out.array.back(), depth + 1) || !skipWhitespace())
        return false;
      if (atEnd())
        return fail(
            "unterminated array: expected ',' or ']', found end of input");
      if (peek() == ']') {
        ++pos_;
        return true;
      }
      if (peek() != ',')
        return fail("expected ',' or ']' in array, found " + describeHere());
      ++pos_;
      if (!skipWhitespace())
        return false;
      if (!atEnd() && peek() == ']')
        return fail("trailing comma before ']'");
    }
  }

  bool parseObject(Value &out, int depth) {
    if (depth >= kMaxDepth)
      return fail("nesting deeper than " + std::to_string(kMaxDepth) +
                  " levels");
    out.kind = Value::Kind::Object;
    ++pos_; // '{'
    if (!skipWhitespace())
      return false;
    if (!atEnd() && peek() == '}') {
      ++pos_;
      return true;
    }
    std::map<std::string, std::pair<int, int>>
        seen; // key -> where it first appeared
    while (true) {
      if (atEnd() || peek() != '"')
        return fail("expected a key in double quotes, found " + describeHere());
      size_t keyPos = pos_; // a key never spans lines
      int keyLine = line_, keyColumn = column();
      Member member;
      if (!parseString(member.key))
        return false;
      auto inserted =
          seen.emplace(member.key, std::make_pair(keyLine, keyColumn));
      if (!inserted.second) {
        pos_ = keyPos; // point at the duplicate, not past it
        return fail("duplicate key \"" + member.key + "\" (first at " +
                    std::to_string(inserted.first->second.first) + ":" +
                    std::to_string(inserted.first->second.second) + ")");
      }
      if (!skipWhitespace())
        return false;
      if (atEnd() || peek() != ':')
        return fail("expected ':' after key \"" + member.key + "\", found " +
                    describeHere());
      ++pos_;
      if (!skipWhitespace())
        return false;
      out.members.push_back(std::move(member));
      if (!parseValue(out.members.back().value, depth + 1) || !skipWhitespace())
        return false;
      if (atEnd())
        return fail(
            "unterminated object: expected ',' or '}', found end of input");
      if (peek() == '}') {
        ++pos_;
        return true;
      }
      if (peek() != ',')
        return fail("expected ',' or '}' in object, found " + describeHere());
      ++pos_;
      if (!skipWhitespace())
        return false;
      if (!atEnd() && peek() == '}')
        return fail("trailing comma before '}'");
    }
  }
};

} // namespace

bool parse(std::string_view text, Value &out, std::string &error) {
  out = Value();
  Parser parser(text, error);
  return parser.parseDocument(out);
}

} // namespace kda::rt::json
