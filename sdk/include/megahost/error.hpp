// Errors across the ABI for C++ code on either side: an exception type that
// carries an MH_ErrorCode, conversion of any exception into an MH_Error*
// (so nothing is ever thrown across the boundary), and back.
#pragma once

#include <megahost/abi.h>

#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <utility>

namespace mh {

class Error : public std::runtime_error {
 public:
  Error(MH_ErrorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  MH_ErrorCode code() const { return code_; }

 private:
  MH_ErrorCode code_;
};

// Throws mh::Error(MH_INVALID_ARGUMENT, message) unless `ok`.
inline void require(bool ok, const std::string& message, MH_ErrorCode code = MH_INVALID_ARGUMENT) {
  if (!ok) throw Error(code, message);
}

namespace detail {
inline void destroy_error(MH_Error* e) {
  if (e == nullptr) return;
  delete[] e->message;
  delete e;
}
}  // namespace detail

// Allocates an MH_Error owned by this side of the boundary; the receiver
// frees it through e->destroy, which runs this side's delete.
inline MH_Error* make_error(MH_ErrorCode code, const std::string& message) noexcept {
  MH_Error* e = new (std::nothrow) MH_Error{};
  char* text = new (std::nothrow) char[message.size() + 1];
  if (e == nullptr || text == nullptr) {
    delete e;
    delete[] text;
    static MH_Error oom{MH_STRUCT_SIZE(MH_Error, destroy), MH_RESOURCE_EXHAUSTED,
                        "out of host memory while reporting an error", [](MH_Error*) {}};
    return &oom;
  }
  std::memcpy(text, message.c_str(), message.size() + 1);
  e->struct_size = MH_STRUCT_SIZE(MH_Error, destroy);
  e->code = code;
  e->message = text;
  e->destroy = &detail::destroy_error;
  return e;
}

// Runs f and turns whatever it throws into an MH_Error*; NULL when it returns.
template <class F>
MH_Error* guard(F&& f) noexcept {
  try {
    std::forward<F>(f)();
    return nullptr;
  } catch (const Error& e) {
    return make_error(e.code(), e.what());
  } catch (const std::bad_alloc&) {
    return make_error(MH_RESOURCE_EXHAUSTED, "out of memory");
  } catch (const std::exception& e) {
    return make_error(MH_INTERNAL, std::string("uncaught exception: ") + e.what());
  } catch (...) {
    return make_error(MH_INTERNAL, "uncaught exception of unknown type");
  }
}

struct ErrorDeleter {
  void operator()(MH_Error* e) const {
    if (e != nullptr && e->destroy != nullptr) e->destroy(e);
  }
};
using ErrorPtr = std::unique_ptr<MH_Error, ErrorDeleter>;

inline const char* code_name(int32_t code) {
  switch (code) {
    case MH_OK: return "OK";
    case MH_INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case MH_NOT_FOUND: return "NOT_FOUND";
    case MH_UNIMPLEMENTED: return "UNIMPLEMENTED";
    case MH_RESOURCE_EXHAUSTED: return "RESOURCE_EXHAUSTED";
    case MH_UNAVAILABLE: return "UNAVAILABLE";
    case MH_DEADLINE_EXCEEDED: return "DEADLINE_EXCEEDED";
    case MH_ABORTED: return "ABORTED";
    default: return "INTERNAL";
  }
}

// Takes ownership of an error returned across the ABI and throws it as
// mh::Error prefixed with `context`; does nothing for NULL.
inline void check(MH_Error* raw, const std::string& context = {}) {
  if (raw == nullptr) return;
  ErrorPtr e(raw);
  std::string message = e->message != nullptr ? e->message : "(no message)";
  if (!context.empty()) message = context + ": " + message;
  throw Error(static_cast<MH_ErrorCode>(e->code), message);
}

}  // namespace mh
