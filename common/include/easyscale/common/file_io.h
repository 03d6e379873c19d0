// File: easyscale/common/file_io.h
//
// Whole-file reads and crash-safe writes. WriteFileAtomic writes a temporary file
// beside the target, fsyncs it, renames it over the target and fsyncs the folder:
// a reader sees the old content or the new, never a torn file.
#pragma once

#include <string>
#include <string_view>

#include "easyscale/common/status.h"

namespace easyscale {

StatusOr<std::string> ReadFile(const std::string& path);
Status WriteFileAtomic(const std::string& path, std::string_view content);
// Creates `path` and its parents; OK if it already exists as a folder.
Status MakeDirs(const std::string& path);

}  // namespace easyscale
