// A status code plus the sentence that explains it: the runtime's only error
// channel (the project builds without exceptions, and the C API returns codes).
#ifndef KDA_RUNTIME_STATUS_H
#define KDA_RUNTIME_STATUS_H

#include "runtime/kda_runtime.h"

#include <string>
#include <utility>

namespace kda::rt {

class [[nodiscard]] Status {
public:
  Status() = default; // KDA_OK
  Status(kda_status code, std::string message)
      : code_(code), message_(std::move(message)) {}

  static Status ok() { return Status(); }

  bool isOk() const { return code_ == KDA_OK; }
  explicit operator bool() const {
    return !isOk();
  } // true when failed: `if (Status s = f()) return s;`
  kda_status code() const { return code_; }
  const std::string &message() const { return message_; }

  // Adds context in front of the message ("manifest.json: " + ...), keeping the
  // code.
  Status &prefix(const std::string &context) {
    message_ = context + message_;
    return *this;
  }

private:
  kda_status code_ = KDA_OK;
  std::string message_;
};

} // namespace kda::rt

#endif // KDA_RUNTIME_STATUS_H
