// File: easyscale/common/checks.h
//
// The single home of the error-propagation macros.
//   ES_RETURN_IF_ERROR(expr)      return the Status of `expr` if it is not OK
//   ES_ASSIGN_OR_RETURN(lhs, expr) unwrap a StatusOr or return its Status
//   ES_CHECK(cond) << ...         internal invariant; throws InternalError with file:line
// External input never reaches ES_CHECK: it is validated and answered with a Status.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

#include "easyscale/common/status.h"

namespace easyscale {

// A broken internal invariant (a bug, not bad input).
class InternalError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

namespace internal {
class CheckFailure {
 public:
  CheckFailure(const char* file, int line, const char* cond) {
    os_ << file << ":" << line << ": check failed: " << cond << " ";
  }
  [[noreturn]] ~CheckFailure() noexcept(false) { throw InternalError(os_.str()); }
  template <typename T>
  CheckFailure& operator<<(const T& v) {
    os_ << v;
    return *this;
  }

 private:
  std::ostringstream os_;
};
}  // namespace internal

}  // namespace easyscale

#define ES_STATUS_CONCAT_INNER(a, b) a##b
#define ES_STATUS_CONCAT(a, b) ES_STATUS_CONCAT_INNER(a, b)

#define ES_RETURN_IF_ERROR(expr)             \
  do {                                       \
    ::easyscale::Status es_status_ = (expr); \
    if (!es_status_.ok()) return es_status_; \
  } while (0)

#define ES_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                             \
  if (!tmp.ok()) return tmp.status();            \
  lhs = std::move(*tmp)

#define ES_ASSIGN_OR_RETURN(lhs, expr) \
  ES_ASSIGN_OR_RETURN_IMPL(ES_STATUS_CONCAT(es_statusor_, __LINE__), lhs, expr)

#define ES_CHECK(cond) \
  if (cond) {          \
  } else               \
    ::easyscale::internal::CheckFailure(__FILE__, __LINE__, #cond)
