// A small, strict JSON (RFC 8259) parser for bundle manifests.
//
// The runtime may not link LLVM, so it carries its own parser. "Strict" means:
// no comments, no trailing commas, no duplicate keys, no leading zeros, no
// NaN/Infinity, valid UTF-8 only, nothing after the top-level value. Every
// error and every value carries a 1-based line and column (in bytes) so that
// the manifest layer can point at the exact spot.
#ifndef KDA_RUNTIME_JSON_H
#define KDA_RUNTIME_JSON_H

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kda::rt::json {

struct Member;

struct Value {
  enum class Kind { Null, Bool, Number, String, Array, Object };

  Kind kind = Kind::Null;
  int line = 0, column = 0; // where the value starts

  bool boolean = false;
  // Numbers: `number` always; `isInteger` when the literal has no fraction or
  // exponent and fits in int64 (then `integer` is exact).
  double number = 0;
  bool isInteger = false;
  int64_t integer = 0;
  std::string string;
  std::vector<Value> array;
  std::vector<Member> members; // objects, in source order (keys are unique)

  bool isNull() const { return kind == Kind::Null; }
  bool isBool() const { return kind == Kind::Bool; }
  bool isNumber() const { return kind == Kind::Number; }
  bool isString() const { return kind == Kind::String; }
  bool isArray() const { return kind == Kind::Array; }
  bool isObject() const { return kind == Kind::Object; }

  // The member named `key`, or nullptr (also for non-objects).
  const Value *find(std::string_view key) const;
};

struct Member {
  std::string key;
  Value value;
};

// "null", "boolean", "number", "string", "array", "object".
const char *kindName(Value::Kind kind);
// The same with an article, for messages: "a number", "an array".
std::string aKind(Value::Kind kind);

// Parses `text` as one JSON document. On failure returns false and sets
// `error` to "LINE:COLUMN: what was expected, what was found".
bool parse(std::string_view text, Value &out, std::string &error);

} // namespace kda::rt::json

#endif // KDA_RUNTIME_JSON_H
