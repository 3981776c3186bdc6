#include "coordinator/server/auth.h"

#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace hlab::coordinator {

absl::StatusOr<Role> ParseRole(absl::string_view name) {
  if (name == "read") return Role::kRead;
  if (name == "submit") return Role::kSubmit;
  if (name == "worker") return Role::kWorker;
  if (name == "admin") return Role::kAdmin;
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown role '", name, "'; roles are admin, submit, read, worker"));
}

const char* RoleName(Role role) {
  switch (role) {
    case Role::kRead:
      return "read";
    case Role::kSubmit:
      return "submit";
    case Role::kWorker:
      return "worker";
    case Role::kAdmin:
      return "admin";
  }
  return "unknown";
}

namespace {

bool Allows(Role have, Role needed) {
  if (have == Role::kAdmin || have == needed) return true;
  return have == Role::kSubmit && needed == Role::kRead;
}

}  // namespace

absl::StatusOr<Authorizer> Authorizer::FromText(absl::string_view text) {
  Authorizer auth;
  auth.enabled_ = true;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    const size_t hash = line.find('#');
    if (hash != absl::string_view::npos) line = line.substr(0, hash);
    std::vector<absl::string_view> parts =
        absl::StrSplit(line, absl::ByAnyChar(" \t\r"), absl::SkipEmpty());
    if (parts.empty()) continue;
    if (parts.size() != 2) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tokens file line ", line_number, ": expected 'role token', got '",
          absl::StripAsciiWhitespace(line), "'"));
    }
    absl::StatusOr<Role> role = ParseRole(parts[0]);
    if (!role.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tokens file line ", line_number, ": ", role.status().message()));
    }
    if (!auth.tokens_.emplace(std::string(parts[1]), *role).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("tokens file line ", line_number, ": duplicate token"));
    }
  }
  if (auth.tokens_.empty()) {
    return absl::InvalidArgumentError("tokens file holds no tokens");
  }
  return auth;
}

absl::StatusOr<Authorizer> Authorizer::FromFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return absl::NotFoundError(absl::StrCat("cannot read tokens file ", path));
  }
  std::stringstream text;
  text << in.rdbuf();
  absl::StatusOr<Authorizer> auth = FromText(text.str());
  if (!auth.ok()) {
    return absl::Status(auth.status().code(),
                        absl::StrCat(path, ": ", auth.status().message()));
  }
  return auth;
}

absl::Status Authorizer::Check(
    const std::multimap<grpc::string_ref, grpc::string_ref>& metadata,
    Role needed) const {
  if (!enabled_) return absl::OkStatus();
  auto it = metadata.find("authorization");
  if (it == metadata.end()) {
    return absl::UnauthenticatedError(
        "missing 'authorization: Bearer <token>' metadata");
  }
  absl::string_view value(it->second.data(), it->second.size());
  if (!absl::ConsumePrefix(&value, "Bearer ")) {
    return absl::UnauthenticatedError(
        "authorization metadata must be 'Bearer <token>'");
  }
  auto token = tokens_.find(std::string(absl::StripAsciiWhitespace(value)));
  if (token == tokens_.end()) {
    return absl::UnauthenticatedError("unknown token");
  }
  if (!Allows(token->second, needed)) {
    return absl::PermissionDeniedError(
        absl::StrCat("a ", RoleName(token->second), " token may not do this; ",
                     "it needs the ", RoleName(needed), " role"));
  }
  return absl::OkStatus();
}

}  // namespace hlab::coordinator
