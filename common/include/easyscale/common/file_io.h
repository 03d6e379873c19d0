// File: easyscale/common/file_io.h
//
// Bounded whole-file reads and crash-safe writes. WriteFileAtomic writes a temporary file
// beside the target, fsyncs it, renames it over the target and fsyncs the folder:
// a reader sees the old content or the new, never a torn file.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "easyscale/common/status.h"

namespace easyscale {

// Reads a whole regular file of at most `max_bytes`. FIFOs, devices and
// folders are refused before they are opened for reading (so nothing blocks
// or reads forever), a file over the limit before it is read; each caller
// passes the bound that suits what the file holds.
StatusOr<std::string> ReadFile(const std::string& path, size_t max_bytes);
// A bearer token file (a service account's, which kubelet rewrites as the
// token rotates): at most 1 MiB, surrounding whitespace removed.
StatusOr<std::string> ReadTokenFile(const std::string& path);
// Errors name `path` and the errno: "writing <path>: No space left on device
// (ENOSPC)" (ResourceExhausted); the old content is then untouched.
Status WriteFileAtomic(const std::string& path, std::string_view content);
// Creates `path` and its parents; OK if it already exists as a folder.
Status MakeDirs(const std::string& path);

}  // namespace easyscale
