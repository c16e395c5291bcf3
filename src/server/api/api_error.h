// Errors that become OpenAI-style error responses at the HTTP edge:
//   {"error": {"message": ..., "type": ..., "param": ..., "code": ...}}
// Handlers throw ApiError; exactly one wrapper (Server::guard) turns it, pc::Error
// and any other exception into a response.
#pragma once
#include <stdexcept>
#include <string>

namespace pc::server {

struct ApiError : std::runtime_error {
  ApiError(int status, std::string type, const std::string& message, std::string param = "",
           std::string code = "")
      : std::runtime_error(message),
        status(status),
        type(std::move(type)),
        param(std::move(param)),
        code(std::move(code)) {}
  int status;
  std::string type;   // invalid_request_error, authentication_error, server_error, ...
  std::string param;  // the offending request field ("" = none)
  std::string code;   // machine-readable code ("" = none)
};

// 400 for a bad field of the request body.
inline ApiError bad_field(const std::string& param, const std::string& message,
                          const std::string& code = "invalid_value") {
  return ApiError(400, "invalid_request_error", message, param, code);
}

}  // namespace pc::server
